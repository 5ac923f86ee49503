package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/decide"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/mailbox"
	"github.com/spamd/spamd/prefs"
)

// The filter command is for delivery outside the MTA's milter: procmail,
// maildrop, Exim's transport filter, Dovecot Sieve's extprograms. It
// reads one message on standard input and writes it to standard output
// with the headers the milter adds for the recipient --user names, under
// their preferences and sender lists (package decide, as the milter
// decides), and says the verdict in its exit status. Whatever fails, the
// message itself is written: a filter must never lose mail.

// exitCodes are the exit statuses of the filter command by outcome.
type exitCodes struct{ ham, spam, unsure, err int }

func (c *exitCodes) String() string {
	return fmt.Sprintf("%d,%d,%d,%d", c.ham, c.spam, c.unsure, c.err)
}

func (c *exitCodes) Set(s string) error {
	parts := strings.Split(s, ",")
	if len(parts) != 4 {
		return errors.New("want HAM,SPAM,UNSURE,ERROR, e.g. 0,1,2,3")
	}
	var v [4]int
	for i, p := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 0 || n > 125 {
			return fmt.Errorf("%q is not an exit status (0 to 125)", p)
		}
		v[i] = n
	}
	*c = exitCodes{v[0], v[1], v[2], v[3]}
	return nil
}

// exitStatus is an error that carries the exit status the filter ends
// with, having done its work.
type exitStatus struct {
	code int
	err  error // nil when the status says a verdict
}

func (e *exitStatus) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return fmt.Sprintf("exit status %d", e.code)
}

func (e *exitStatus) Unwrap() error { return e.err }

// filterArgs are the parsed arguments of filter.
type filterArgs struct {
	mf    modelFlags
	codes exitCodes
	// tag, when tagSet, replaces the Subject tag the decision puts on.
	tag     string
	tagSet  bool
	explain int           // the tokens per side X-Spamd-Result lists
	timeout time.Duration // the longest classifying may take
	// sender is the envelope sender, when senderSet; else the message's
	// Return-Path field says it.
	sender    string
	senderSet bool
	// cfg is spamd's configuration, whose [actions] and [prefs] the
	// local path decides with; cfgErr says why it could not be read.
	cfg    config.Config
	cfgErr error
}

func parseFilterArgs(e *env, args []string) (*filterArgs, error) {
	fs := e.flagSet("filter")
	a := &filterArgs{codes: exitCodes{0, 1, 2, 3}}
	a.mf.register(fs, true)
	fs.Var(&a.codes, "exit-codes", "exit statuses for ham, spam, unsure and error; procmail's f flag wants 0,0,0,0")
	fs.StringVar(&a.tag, "tag", "", "Subject tag for the mail the decision tags (default: the recipient's, from the preferences, else [actions] subject_tag)")
	fs.StringVar(&a.sender, "sender", "", "envelope sender, for the sender lists (default: the message's Return-Path field; none: the null sender)")
	fs.DurationVar(&a.timeout, "timeout", 30*time.Second, "longest classifying may take; past it the message is passed on unfiltered, with the error status")
	if err := fs.Parse(args); err != nil {
		return nil, usageError(err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: filter reads the message on standard input and takes no arguments", errUsage)
	}
	// The headers are spamd's: its explanation length, and locally its
	// [actions] and [prefs]. A configuration that cannot be read leaves
	// the defaults for the explanation; the local path then fails, and
	// the message is still passed on.
	a.cfg, _, a.cfgErr = loadConfig(a.mf.cfgPath)
	if a.cfgErr != nil {
		a.cfg = config.Default(os.Getenv)
	}
	a.explain = a.cfg.Milter.Explain
	fs.Visit(func(f *flag.Flag) {
		a.tagSet = a.tagSet || f.Name == "tag"
		a.senderSet = a.senderSet || f.Name == "sender"
	})
	return a, nil
}

// envelope returns the envelope sender of raw: --sender, else the
// message's first Return-Path field (which procmail, maildrop and
// Dovecot's LDA find or add), else the null sender, which no allow list
// matches.
func (a *filterArgs) envelope(raw []byte) string {
	if a.senderSet {
		return a.sender
	}
	return returnPath(raw)
}

// returnPath returns the address of raw's first Return-Path field, ""
// if it has none, it is the null sender or it holds no address.
func returnPath(raw []byte) string {
	for len(raw) > 0 {
		line, rest, _ := bytes.Cut(raw, []byte("\n"))
		raw = rest
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			break // the end of the header
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if ok && strings.EqualFold(string(bytes.TrimRight(name, " \t")), "Return-Path") {
			v := strings.TrimSpace(string(value))
			if i := strings.IndexByte(v, '<'); i >= 0 {
				v, _, _ = strings.Cut(v[i+1:], ">")
			}
			if v = strings.TrimSpace(v); strings.ContainsAny(v, "<> \t\r\n") {
				return "" // no address: no list can name it
			}
			return v
		}
	}
	return ""
}

// localBook returns the preferences the local path decides with: the
// [prefs] of spamd's configuration, and under them what was set through
// the API, kept in the prefs.json the daemon keeps ([prefs] file, by
// default in the store's directory), read as the daemon last wrote it.
func (a *filterArgs) localBook(fc filter.Config) (*prefs.Book, error) {
	if a.cfgErr != nil {
		return nil, fmt.Errorf("spamd's configuration, whose preferences apply: %w", a.cfgErr)
	}
	path := a.cfg.Prefs.File
	if path == "" {
		dir := a.cfg.Store.Dir
		if a.mf.db != "" && a.mf.redis == "" {
			dir = a.mf.db
		}
		path = filepath.Join(dir, "prefs.json")
	}
	pf, err := prefs.OpenFile(path)
	if err != nil {
		return nil, err
	}
	return prefs.New(prefs.SiteOf(fc.Required(), a.cfg.Actions, a.cfg.Prefs),
		prefs.Layer{Users: a.cfg.Prefs.User, Domains: a.cfg.Prefs.Domain}, pf.Layer()), nil
}

// readFiltered reads the message on standard input, up to the size a
// mailbox message may have; a longer one is passed on untouched.
func readFiltered(in io.Reader) (raw []byte, whole bool, err error) {
	raw, err = io.ReadAll(io.LimitReader(in, mailbox.DefaultMaxBytes+1))
	return raw, len(raw) <= mailbox.DefaultMaxBytes, err
}

// passOn writes the message, annotated with j's headers unless cause
// says why it could not be judged, and returns the exit status for it.
func passOn(e *env, a *filterArgs, raw []byte, rest io.Reader, j *judged, cause error) error {
	out := raw
	if cause == nil {
		tag := ""
		if j.tagged {
			tag = j.tag
			if a.tagSet {
				tag = a.tag
			}
		}
		out = decide.Annotate(raw, j.headers, tag)
	}
	if _, err := e.stdout.Write(out); err != nil {
		return &exitStatus{code: a.codes.err, err: fmt.Errorf("write the message: %w", err)}
	}
	if rest != nil {
		if _, err := io.Copy(e.stdout, rest); err != nil {
			return &exitStatus{code: a.codes.err, err: fmt.Errorf("write the message: %w", err)}
		}
	}
	// A quarantine or a rejection means nothing in a pipe: the message
	// gets the headers of mail the milter accepts, and the status of
	// its verdict.
	switch {
	case cause != nil:
		return &exitStatus{code: a.codes.err, err: fmt.Errorf("the message was passed on unfiltered: %w", cause)}
	case j.spam:
		return &exitStatus{code: a.codes.spam}
	case j.verdict == "unsure":
		return &exitStatus{code: a.codes.unsure}
	}
	// Ham, and every class that is not spam.
	return &exitStatus{code: a.codes.ham}
}

// judged is what filter decided for the recipient: the verdict under
// their preferences and whether it is a spam class (and not unsure),
// the header fields to add, and whether and with what to tag the
// Subject.
type judged struct {
	verdict string
	spam    bool
	headers [][2]string
	tagged  bool
	tag     string
}

// recipient returns the user name and the domain whose preferences
// apply to the mail of user: the user, and the domain of its address.
func recipient(user string) (string, string) { return user, decide.DomainOf(user) }

func runFilter(ctx context.Context, e *env, args []string) error {
	a, err := parseFilterArgs(e, args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	a.mf.readsOnly = true
	// The store is opened before the message is read: one that spamd
	// holds is used through spamd (viaDaemon), which reads the message.
	f, st, openErr := a.mf.open(ctx, e)
	if errors.Is(openErr, errStoreLocked) {
		return openErr
	}
	if openErr == nil {
		defer st.Close()
	}
	return filterMessage(e, a, func(raw []byte) (*judged, error) {
		if openErr != nil {
			return nil, openErr
		}
		fc := f.Config()
		book, err := a.localBook(fc)
		if err != nil {
			return nil, err
		}
		v, err := f.Classify(ctx, a.mf.user, raw, filter.ClassifyOptions{Explain: a.explain})
		if err != nil {
			return nil, err
		}
		d := decide.For(fc, a.cfg.Actions, book.For(recipient(a.mf.user)), decide.SenderOf(raw, a.envelope(raw)), v, decide.Fields(raw))
		return &judged{verdict: d.Verdict, spam: d.Spam, headers: d.Headers(), tagged: d.Tag, tag: d.SubjectTag}, nil
	})
}

// remoteFilter classifies through the daemon, which decides under the
// preferences it holds.
func remoteFilter(ctx context.Context, e *env, c *control.Client, args []string) error {
	a, err := parseFilterArgs(e, args)
	if err != nil {
		return err
	}
	if err := checkRemote(&a.mf); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	return filterMessage(e, a, func(raw []byte) (*judged, error) {
		v, err := c.Decide(ctx, a.mf.user, a.envelope(raw), raw, a.explain)
		if err != nil {
			return nil, err
		}
		d := v.Decision
		return &judged{verdict: d.Verdict, spam: d.Spam, headers: d.Headers, tagged: d.Tag, tag: d.SubjectTag}, nil
	})
}

// passOnFailure returns the filter command run made to pass the message
// on when run fails before it reads it: a command line it refuses (a
// mistyped flag, a --user spamd would not take), no daemon answering, a
// store held by another process. The message is copied through unread,
// and the status is the error's, never one a verdict could have: a
// script must not take a broken filter's silence for a verdict, nor lose
// the message to it.
func passOnFailure(run func(context.Context, *env, []string) error) func(context.Context, *env, []string) error {
	return func(ctx context.Context, e *env, args []string) error {
		err := run(ctx, e, args)
		var st *exitStatus
		if err == nil || errors.Is(err, flag.ErrHelp) || errors.As(err, &st) {
			// Done, -h asked for, or the message passed on already.
			return err
		}
		if _, werr := io.Copy(e.stdout, e.stdin); werr != nil {
			err = fmt.Errorf("%w; writing the message: %v", err, werr)
		}
		return &exitStatus{code: errorStatus(args), err: fmt.Errorf("the message was passed on unfiltered: %w", err)}
	}
}

// errorStatus is the error status the command line asks for with
// --exit-codes, 3 if it asks for none it can be read for.
func errorStatus(args []string) int {
	codes := exitCodes{0, 1, 2, 3}
	for i, a := range args {
		var v string
		switch {
		case a == "--":
			return codes.err
		case a == "--exit-codes" || a == "-exit-codes":
			if i+1 < len(args) {
				v = args[i+1]
			}
		case strings.HasPrefix(a, "--exit-codes=") || strings.HasPrefix(a, "-exit-codes="):
			_, v, _ = strings.Cut(a, "=")
		default:
			continue
		}
		var c exitCodes
		if c.Set(v) == nil {
			codes = c
		}
	}
	return codes.err
}

// filterMessage reads the message on standard input, judges it with
// classify and passes it on.
func filterMessage(e *env, a *filterArgs, classify func(raw []byte) (*judged, error)) error {
	raw, whole, err := readFiltered(e.stdin)
	if err != nil {
		return passOn(e, a, raw, nil, nil, fmt.Errorf("read the message: %w", err))
	}
	if !whole {
		return passOn(e, a, raw, e.stdin, nil, errors.New("the message is larger than a message may be"))
	}
	r, err := classify(raw)
	return passOn(e, a, raw, nil, r, err)
}

// filterExit turns the filter's outcome into main's exit status.
func filterExit(e *env, err error) (int, bool) {
	var st *exitStatus
	if !errors.As(err, &st) {
		return 0, false
	}
	if st.err != nil {
		fmt.Fprintf(e.stderr, "spamtrain filter: %v\n", st.err)
	}
	return st.code, true
}
