package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

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
// the daemon may write its store. Whatever may pass (the daemon
// restarting or busy, its spool unwritable for a moment: no answer, a 5xx,
// 408 or 429) it tries again, waiting 50 ms, then twice as long each time
// up to a second, or as long as the daemon's Retry-After says, until the
// timeout, which stays well under Dovecot's 10 s limit on a pipe. Each
// failed attempt is said on standard error, and a report that could not
// be delivered is an error naming why: never dropped in silence.
func runReport(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("report")
	user := fs.String("user", "", "the user whose model learns from the report (required)")
	spam := fs.Bool("spam", false, "the message is spam")
	ham := fs.Bool("ham", false, "the message is ham")
	api := fs.String("api", os.Getenv("SPAMD_API"), "the daemon's API: unix:/PATH or tcp://HOST:PORT (default $SPAMD_API, else its configuration's socket)")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return usageError(err)
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
		addr = "unix:" + configuredSocket()
	}
	c, err := control.NewClient(addr, os.Getenv("SPAMD_API_TOKEN"))
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	return deliver(ctx, e.stderr, func(ctx context.Context) error {
		res, err := c.Report(ctx, *user, class, "spamtrain", raw)
		if err == nil {
			fmt.Fprintf(e.stdout, "report: %s for %s queued as %s\n", class, *user, res.ID)
		}
		return err
	})
}

// Backoff of deliver: the first wait, the longest, and how long before
// the timeout the last attempt is made.
const (
	firstWait  = 50 * time.Millisecond
	maxWait    = time.Second
	lastMoment = 10 * time.Millisecond
)

// deliver calls send until it succeeds, fails for good (control.Temporary
// says no) or ctx ends, waiting between attempts with exponential backoff
// or as long as the daemon asks (Retry-After), and saying each failure on
// log. The error says the report was not delivered, and why.
func deliver(ctx context.Context, log io.Writer, send func(context.Context) error) error {
	wait := firstWait
	for attempt := 1; ; attempt++ {
		err := send(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("report not delivered after %d attempts: %w", attempt, err)
		}
		if !control.Temporary(err) {
			return fmt.Errorf("report not delivered: refused: %w", err)
		}
		next := wait
		var ae *control.Error
		if errors.As(err, &ae) && ae.RetryAfter > next {
			next = ae.RetryAfter
		}
		if d, ok := ctx.Deadline(); ok && time.Until(d) < next {
			// Once more at the last moment rather than not at all, and
			// no more after that.
			next = time.Until(d) - lastMoment
			if next <= 0 {
				return fmt.Errorf("report not delivered after %d attempts: %w", attempt, err)
			}
		}
		fmt.Fprintf(log, "spamtrain report: attempt %d failed (%v); trying again in %v\n", attempt, err, next.Round(time.Millisecond))
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("report not delivered after %d attempts: %w", attempt, err)
		case <-t.C:
		}
		wait = min(2*wait, maxWait)
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
