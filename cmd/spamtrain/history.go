package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"mime"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/emersion/go-message/charset"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/history"
	"github.com/spamd/spamd/store"
)

// runHistory prints the milter's latest verdicts, which the running
// daemon keeps in memory ([history] in its configuration): there is no
// local store to read them from, so the daemon must run.
//
//	spamtrain history [--api ADDR] [--limit N] [--user NAME] [--verdict V] [--before ID] [--json] [-v] [-f]
//
// Oldest first, as a log reads; -f keeps printing new verdicts as they
// come. A user other than root, spamd's account and the [api] admins
// sees only the mail of the user named like their account.
func runHistory(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("history")
	api := fs.String("api", os.Getenv("SPAMD_API"), "the daemon's API: unix:/PATH or tcp://HOST:PORT (default $SPAMD_API, else its configuration's socket)")
	limit := fs.Int("limit", 20, "how many verdicts, the latest (1 to 10000)")
	user := fs.String("user", "", "only the mail of this user")
	verdict := fs.String("verdict", "", "only this verdict: ham, unsure, spam, skipped or error")
	before := fs.Uint64("before", 0, "only the verdicts before this ID (to page back)")
	asJSON := fs.Bool("json", false, "print one JSON object per verdict")
	verbose := fs.Bool("v", false, "print the features that weighed most toward each class")
	follow := fs.Bool("f", false, "keep printing new verdicts as they come, until interrupted")
	fs.Bool("follow", false, "the same as -f")
	if err := fs.Parse(args); err != nil {
		return usageError(err)
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "follow" {
			*follow = true
		}
	})
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	case *limit < 1 || *limit > 10000:
		return fmt.Errorf("%w: --limit %d: want 1 to 10000", errUsage, *limit)
	case *verdict != "" && !slices.Contains([]string{"ham", "unsure", "spam", "skipped", "error"}, *verdict):
		return fmt.Errorf("%w: --verdict %q: want ham, unsure, spam, skipped or error", errUsage, *verdict)
	case *follow && *before != 0:
		return fmt.Errorf("%w: --before pages back; -f follows what comes next: give one of them", errUsage)
	}
	if err := store.ValidUser(*user); err != nil {
		return fmt.Errorf("%w: --user: %v", errUsage, err)
	}
	addr := *api
	if addr == "" {
		addr = "unix:" + configuredSocket()
	}
	c, err := control.NewClient(addr, os.Getenv("SPAMD_API_TOKEN"))
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	q := control.HistoryQuery{Limit: *limit, User: *user, Verdict: *verdict, Before: *before}
	h, err := c.History(ctx, q)
	if err != nil {
		return historyError(addr, err)
	}
	p := &historyPrinter{w: e.stdout, json: *asJSON, verbose: *verbose}
	last := uint64(0)
	if len(h.Entries) > 0 {
		last = h.Entries[0].ID
	}
	if err := p.print(h.Entries); err != nil {
		return err
	}
	if !*follow {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
		q := control.HistoryQuery{Limit: 10000, User: *user, Verdict: *verdict, After: last}
		h, err := c.History(ctx, q)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return historyError(addr, err)
		}
		if len(h.Entries) > 0 {
			last = h.Entries[0].ID
		}
		if err := p.print(h.Entries); err != nil {
			return err
		}
	}
}

// configuredSocket returns the API socket of spamd's configuration
// ($SPAMD_CONFIG, else /etc/spamd/config.toml, else the default).
func configuredSocket() string {
	cfg := config.Default(os.Getenv)
	path := os.Getenv("SPAMD_CONFIG")
	if path == "" {
		path = config.DefaultPath
	}
	if c, err := config.Load(path, cfg); err == nil {
		cfg = c
	}
	return cfg.API.Socket
}

// historyError explains a failure to read the history.
func historyError(addr string, err error) error {
	var ae *control.Error
	switch {
	case errors.As(err, &ae) && ae.Status == 404:
		return fmt.Errorf("spamd at %s keeps no history: set [history] size in its configuration", addr)
	case errors.As(err, &ae):
		return err
	}
	return fmt.Errorf("the history lives in the running spamd, and none answers at %s: start spamd, or name it with --api ADDR "+
		"or $SPAMD_API (spamtrain cannot read it from a store): %w", addr, err)
}

// historyPrinter prints verdicts as a table or as JSON lines.
type historyPrinter struct {
	w       io.Writer
	json    bool
	verbose bool
}

// print prints entries, given newest first, oldest first.
func (p *historyPrinter) print(entries []history.Entry) error {
	if p.json {
		enc := json.NewEncoder(p.w)
		for i := len(entries) - 1; i >= 0; i-- {
			if err := enc.Encode(entries[i]); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(p.w, 0, 0, 2, ' ', 0)
	for i := len(entries) - 1; i >= 0; i-- {
		e := &entries[i]
		prob, score := "-", "-"
		if e.Classified() {
			prob, score = fmt.Sprintf("%.4f", e.Probability), fmt.Sprintf("%.2f", e.Score)
		} else if e.Reason != "" {
			score = e.Reason
		}
		sender := e.Sender
		if sender == "" {
			sender = "<>"
		}
		rcpts := strings.Join(e.Recipients, ",")
		if e.MoreRecipients > 0 {
			rcpts += fmt.Sprintf(",+%d", e.MoreRecipients)
		}
		action := e.Action
		if e.Learned != "" {
			action += ",learned=" + e.Learned
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, e.Time.Local().Format("2006-01-02 15:04:05"),
			printable(orDash(e.QueueID)), e.Verdict, prob, score, action, printable(sender), printable(orDash(rcpts)), printable(decodeSubject(e.Subject)))
		if p.verbose {
			for _, class := range slices.Sorted(maps.Keys(e.Toward)) {
				var names []string
				for _, f := range e.Toward[class] {
					names = append(names, fmt.Sprintf("%s (%+.3f)", printable(f.Name), f.Weight))
				}
				fmt.Fprintf(tw, "\t\t\t\t\t\t\ttoward %s: %s\n", class, strings.Join(names, ", "))
			}
		}
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// decodeSubject decodes the encoded words of a Subject for the terminal.
func decodeSubject(s string) string {
	d, err := (&mime.WordDecoder{CharsetReader: charset.Reader}).DecodeHeader(s)
	if err != nil {
		return s
	}
	return d
}

// printable replaces control characters, which a hostile sender could use
// to drive the terminal, by spaces.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return ' '
		}
		return r
	}, s)
}
