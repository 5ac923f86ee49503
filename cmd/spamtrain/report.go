package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/reportq"
	"github.com/spamd/spamd/store"
)

// runReport hands one message to the running daemon as a report that it
// is spam (or ham) for a user, and returns as soon as the daemon has
// queued it: it is what a Dovecot IMAPSieve script pipes a message into,
// inside the user's IMAP command. The daemon trains in the background.
//
//	spamtrain report --user U --spam|--ham [--api ADDR] [--timeout D] FILE|-
//
// The daemon is found as for the other commands (--api, $SPAMD_API, the
// socket of its configuration); there is no local fallback, since only
// the daemon may write its store. While the daemon cannot be reached (a
// restart), it tries again until the timeout, which stays well under
// Dovecot's 10 s limit on a pipe.
func runReport(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	user := fs.String("user", "", "the user whose model learns from the report (required)")
	spam := fs.Bool("spam", false, "the message is spam")
	ham := fs.Bool("ham", false, "the message is ham")
	api := fs.String("api", os.Getenv("SPAMD_API"), "the daemon's API: unix:/PATH or tcp://HOST:PORT (default $SPAMD_API, else its configuration's socket)")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *spam == *ham {
		return fmt.Errorf("%w: say --spam or --ham", errUsage)
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: name one message: FILE or - for standard input", errUsage)
	}
	if *user == "" {
		return fmt.Errorf("%w: --user: reports train a user's model; name the user", errUsage)
	}
	if err := store.ValidUser(*user); err != nil {
		return fmt.Errorf("%w: --user: %v", errUsage, err)
	}
	class := filter.Ham
	if *spam {
		class = filter.Spam
	}
	raw, err := readMessage(e.stdin, fs.Arg(0))
	if err != nil {
		return err
	}
	addr := *api
	if addr == "" {
		cfg := config.Default(os.Getenv)
		path := os.Getenv("SPAMD_CONFIG")
		if path == "" {
			path = config.DefaultPath
		}
		if c, err := config.Load(path, cfg); err == nil {
			cfg = c
		}
		addr = "unix:" + cfg.API.Socket
	}
	c, err := control.NewClient(addr, os.Getenv("SPAMD_API_TOKEN"))
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		res, err := c.Report(ctx, *user, class, "spamtrain", raw)
		if err == nil {
			fmt.Fprintf(e.stdout, "report: %s for %s queued as %s\n", class, *user, res.ID)
			return nil
		}
		var ae *control.Error
		if errors.As(err, &ae) && ae.Status != 503 {
			return err // refused: trying again changes nothing
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("report not delivered: %w", err)
		case <-time.After(wait):
		}
	}
}

// readMessage reads the message at path, or standard input for "-", at
// most reportq.MaxMessage bytes.
func readMessage(stdin io.Reader, path string) ([]byte, error) {
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	raw, err := io.ReadAll(io.LimitReader(r, reportq.MaxMessage+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", path, err)
	case len(raw) > reportq.MaxMessage:
		return nil, fmt.Errorf("%s: larger than %d bytes", path, reportq.MaxMessage)
	case len(raw) == 0:
		return nil, fmt.Errorf("%s: empty", path)
	}
	return raw, nil
}
