package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/decide"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/mailbox"
)

// The filter command is for delivery outside the MTA's milter: procmail,
// maildrop, Exim's transport filter, Dovecot Sieve's extprograms. It
// reads one message on standard input and writes it to standard output
// with the headers the milter adds, and says the verdict in its exit
// status. Whatever fails, the message itself is written: a filter must
// never lose mail.

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
	mf      modelFlags
	codes   exitCodes
	tag     string        // the Subject tag for spam
	explain int           // the tokens per side X-Spamd-Result lists
	timeout time.Duration // the longest classifying may take
}

func parseFilterArgs(e *env, args []string) (*filterArgs, error) {
	fs := e.flagSet("filter")
	a := &filterArgs{codes: exitCodes{0, 1, 2, 3}}
	a.mf.register(fs, true)
	fs.Var(&a.codes, "exit-codes", "exit statuses for ham, spam, unsure and error; procmail's f flag wants 0,0,0,0")
	tag := fs.String("tag", "", "Subject tag for spam (default: [actions] subject_tag of spamd's configuration)")
	fs.DurationVar(&a.timeout, "timeout", 30*time.Second, "longest classifying may take; past it the message is passed on unfiltered, with the error status")
	if err := fs.Parse(args); err != nil {
		return nil, usageError(err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: filter reads the message on standard input and takes no arguments", errUsage)
	}
	// The headers are spamd's: its tag and its explanation length,
	// unless told otherwise. A configuration that cannot be read leaves
	// the defaults; the message is still passed on.
	cfg, _, err := loadConfig(a.mf.cfgPath)
	if err != nil {
		cfg = config.Default(os.Getenv)
	}
	a.tag, a.explain = cfg.Actions.SubjectTag, cfg.Milter.Explain
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "tag" {
			a.tag = *tag
		}
	})
	return a, nil
}

// readFiltered reads the message on standard input, up to the size a
// mailbox message may have; a longer one is passed on untouched.
func readFiltered(in io.Reader) (raw []byte, whole bool, err error) {
	raw, err = io.ReadAll(io.LimitReader(in, mailbox.DefaultMaxBytes+1))
	return raw, len(raw) <= mailbox.DefaultMaxBytes, err
}

// passOn writes the message, annotated with r unless cause says why it
// could not be judged, and returns the exit status for it.
func passOn(e *env, a *filterArgs, raw []byte, rest io.Reader, j *judged, cause error) error {
	out := raw
	if cause == nil {
		r, tag := j.r, ""
		r.Fields = decide.Fields(raw)
		if j.spam {
			tag = a.tag
		}
		out = decide.Annotate(raw, decide.Decision{Spam: j.spam, Class: j.class, Result: r}.Headers(), tag)
	}
	if _, err := e.stdout.Write(out); err != nil {
		return &exitStatus{code: a.codes.err, err: fmt.Errorf("write the message: %w", err)}
	}
	if rest != nil {
		if _, err := io.Copy(e.stdout, rest); err != nil {
			return &exitStatus{code: a.codes.err, err: fmt.Errorf("write the message: %w", err)}
		}
	}
	switch {
	case cause != nil:
		return &exitStatus{code: a.codes.err, err: fmt.Errorf("the message was passed on unfiltered: %w", cause)}
	case j.spam:
		return &exitStatus{code: a.codes.spam}
	case j.r.Verdict == "unsure":
		return &exitStatus{code: a.codes.unsure}
	}
	// Ham, and every class that is not spam.
	return &exitStatus{code: a.codes.ham}
}

// judged is what filter found of a message: X-Spamd-Result's content,
// the class decided and whether it is a spam class (and not unsure).
type judged struct {
	r     decide.Result
	class string
	spam  bool
}

func runFilter(ctx context.Context, e *env, args []string) error {
	a, err := parseFilterArgs(e, args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
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
		v, err := f.Classify(ctx, a.mf.user, raw, filter.ClassifyOptions{Explain: a.explain})
		if err != nil {
			return nil, err
		}
		fc := f.Config()
		j := &judged{class: v.Class, spam: !v.Unsure && fc.IsSpam(v.Class),
			r: decide.Result{Verdict: v.Label(), Probability: v.Probability, Score: v.Score, Required: fc.Required(), Signature: v.Digest}}
		for c, cs := range v.Toward {
			for _, x := range cs {
				if c == fc.Positive {
					j.r.Spammy = append(j.r.Spammy, x.Name)
				} else {
					j.r.Hammy = append(j.r.Hammy, x.Name)
				}
			}
		}
		return j, nil
	})
}

// remoteFilter classifies through the daemon.
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
		v, err := c.Classify(ctx, a.mf.user, raw, a.explain)
		if err != nil {
			return nil, err
		}
		j := &judged{class: v.Class, spam: v.Spam,
			r: decide.Result{Verdict: v.Verdict, Probability: v.Probability, Score: v.Score, Required: v.Required}}
		if d, err := hex.DecodeString(v.Digest); err == nil && len(d) == len(j.r.Signature) {
			copy(j.r.Signature[:], d)
		}
		for c, ws := range v.Toward {
			for _, w := range ws {
				if c == v.Positive {
					j.r.Spammy = append(j.r.Spammy, w.Token)
				} else {
					j.r.Hammy = append(j.r.Hammy, w.Token)
				}
			}
		}
		return j, nil
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
