// Package reportq is the daemon's durable queue of misclassification
// reports: "user U says this message is spam (or ham)".
//
// A report is accepted in milliseconds and applied later, in the
// background, so that whoever reports (a Dovecot IMAPSieve script running
// inside the user's IMAP command, the maildir watcher, an API client)
// never waits for training. The queue is a spool directory in the manner
// of Maildir: Enqueue writes the report to tmp/, fsyncs it, renames it
// into new/ and fsyncs the directory before it returns, so an accepted
// report survives a crash or a power loss. Run applies the reports in the
// order they were accepted, one at a time, and removes each once applied.
//
// Delivery is at least once: a crash between applying a report and
// removing its file applies it again after the restart. That is harmless
// because training is idempotent per message (training a message as the
// class it already has changes nothing), which is why reports carry the
// message itself rather than a count change.
//
// A report whose handler fails with an error wrapping ErrPermanent (the
// message does not parse, the class is unknown) is dropped; any other
// error (the store is unavailable) is retried with backoff, holding back
// the reports behind it so that their order is kept. The queue is bounded
// in reports and bytes: Enqueue returns ErrFull past either bound.
//
// A spool directory removed while the queue runs (with the store's
// directory it lives in by default) is made anew by the next Enqueue,
// where the directory above it is there again: reports are taken again
// without a restart, and the ones that waited in the removed directory
// are lost with it, as the log says.
//
// One process owns a spool directory at a time; the queue does not lock
// it.
package reportq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spamd/spamd/store"
)

// Errors of the queue, to be tested with errors.Is.
var (
	// ErrFull is returned by Enqueue when the queue holds its maximum of
	// reports or bytes.
	ErrFull = errors.New("report queue is full")
	// ErrInvalid is returned for a report that can never be applied: a
	// bad user or class name, an empty or oversized message.
	ErrInvalid = errors.New("invalid report")
	// ErrPermanent, wrapped by a Handler's error, drops the report
	// instead of retrying it.
	ErrPermanent = errors.New("report cannot be applied")
)

// Defaults of Options.
const (
	DefaultMaxReports = 10000
	DefaultMaxBytes   = 1 << 30
	// MaxMessage is the largest message a report may carry.
	MaxMessage = 64 << 20
)

// Report is one user's statement that a message belongs to a class.
type Report struct {
	// User is the user whose model learns from the report. It must pass
	// store.ValidUser and must not be empty: the global model is trained
	// by its administrator, not by reports.
	User string
	// Class is the class the message belongs to: spam or ham by default.
	// It must pass store.ValidClass.
	Class string
	// Source says where the report came from, for the log: "api",
	// "maildir" and so on; at most 32 bytes of [a-z0-9_-], may be empty.
	Source string
	// Message is the raw message, 1 byte to MaxMessage bytes.
	Message []byte
}

// Check reports why r can never be applied, wrapping ErrInvalid, or nil.
func (r Report) Check() error {
	if r.User == "" {
		return fmt.Errorf("%w: no user: reports train a user's model, never the global one", ErrInvalid)
	}
	if err := store.ValidUser(r.User); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := store.ValidClass(r.Class); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(r.Source) > 32 || strings.Trim(r.Source, "abcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
		return fmt.Errorf("%w: source %q", ErrInvalid, r.Source)
	}
	if len(r.Message) == 0 || len(r.Message) > MaxMessage {
		return fmt.Errorf("%w: message of %d bytes (want 1 to %d)", ErrInvalid, len(r.Message), MaxMessage)
	}
	return nil
}

// Handler applies one report. An error wrapping ErrPermanent drops the
// report; any other error is retried later.
type Handler func(ctx context.Context, r Report) error

// Options configure a Queue.
type Options struct {
	// MaxReports bounds the reports waiting; 0 means DefaultMaxReports.
	MaxReports int
	// MaxBytes bounds the bytes of the reports waiting; 0 means
	// DefaultMaxBytes.
	MaxBytes int64
	// Log receives a line per report applied, dropped or retried.
	Log *slog.Logger
	// Retry is the first wait after a failed report, doubled on each
	// failure up to a minute; 0 means one second.
	Retry time.Duration
}

// Queue is a durable FIFO of reports in a spool directory. Its methods
// are safe for concurrent use; Run must be called at most once at a time.
type Queue struct {
	dir  string
	opts Options
	wake chan struct{}
	seq  atomic.Uint64

	mu      sync.Mutex
	pending int
	bytes   int64
}

// Open opens, creating it if need be, the spool directory dir. It
// removes what a crash left half-written in dir/tmp and counts the
// reports waiting in dir/new.
func Open(dir string, o Options) (*Queue, error) {
	if o.MaxReports <= 0 {
		o.MaxReports = DefaultMaxReports
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Retry <= 0 {
		o.Retry = time.Second
	}
	q := &Queue{dir: dir, opts: o, wake: make(chan struct{}, 1)}
	for _, sub := range []string{"tmp", "new"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o750); err != nil {
			return nil, fmt.Errorf("report queue: %w", err)
		}
	}
	tmp, err := os.ReadDir(filepath.Join(dir, "tmp"))
	if err != nil {
		return nil, fmt.Errorf("report queue: %w", err)
	}
	for _, e := range tmp {
		if err := os.Remove(filepath.Join(dir, "tmp", e.Name())); err != nil {
			return nil, fmt.Errorf("report queue: remove a half-written report: %w", err)
		}
	}
	names, err := q.list()
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if fi, err := os.Stat(filepath.Join(dir, "new", n)); err == nil {
			q.pending++
			q.bytes += fi.Size()
		}
	}
	return q, nil
}

// Dir returns the spool directory.
func (q *Queue) Dir() string { return q.dir }

// Len returns the number of reports waiting.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pending
}

// Enqueue stores r durably and returns its id; Run applies it later. It
// refuses an invalid report (ErrInvalid) and, past the queue's bounds,
// any report (ErrFull).
func (q *Queue) Enqueue(ctx context.Context, r Report) (string, error) {
	if err := r.Check(); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("enqueue: %w", err)
	}
	b := Encode(r)
	size := int64(len(b))
	q.mu.Lock()
	if q.pending >= q.opts.MaxReports || q.bytes+size > q.opts.MaxBytes {
		n, by := q.pending, q.bytes
		q.mu.Unlock()
		return "", fmt.Errorf("%w: %d reports, %d bytes waiting", ErrFull, n, by)
	}
	q.pending++
	q.bytes += size
	q.mu.Unlock()
	id, err := q.write(b)
	if errors.Is(err, fs.ErrNotExist) {
		if err = q.remake(size); err == nil {
			id, err = q.write(b)
		}
	}
	if err != nil {
		q.mu.Lock()
		q.pending--
		q.bytes -= size
		q.mu.Unlock()
		return "", err
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return id, nil
}

// remake makes the spool's directory anew after it was removed (with the
// store's directory it lives in by default, say), so that reports are
// taken again without a restart, and counts again what waits in it,
// holding the place of the report of size being enqueued. The directory
// is made only where its parent still is: a parent removed too is not
// the queue's to make.
func (q *Queue) remake(size int64) error {
	if _, err := os.Stat(filepath.Join(q.dir, "new")); err == nil {
		return nil
	}
	for _, d := range []string{q.dir, filepath.Join(q.dir, "tmp"), filepath.Join(q.dir, "new")} {
		if err := os.Mkdir(d, 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("enqueue: the spool directory was removed, and cannot be made anew: %w", err)
		}
	}
	names, err := q.list()
	if err != nil {
		return err
	}
	n, waiting := 0, int64(0)
	for _, name := range names {
		if fi, err := os.Stat(filepath.Join(q.dir, "new", name)); err == nil {
			n++
			waiting += fi.Size()
		}
	}
	q.mu.Lock()
	lost := q.pending - 1 - n
	q.pending, q.bytes = n+1, waiting+size
	q.mu.Unlock()
	q.opts.Log.Error("reports: the spool directory was removed; made it anew, the reports that waited in it are lost",
		"dir", q.dir, "lost", max(lost, 0))
	return nil
}

// write writes b as a new report file and returns its name. Names sort in
// the order reports were accepted: nanoseconds since the epoch, then a
// sequence number, both fixed-width hex.
func (q *Queue) write(b []byte) (string, error) {
	id := fmt.Sprintf("%016x.%08x.%d", time.Now().UnixNano(), q.seq.Add(1)&0xffffffff, os.Getpid())
	tmp := filepath.Join(q.dir, "tmp", id)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return "", fmt.Errorf("enqueue: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(q.dir, "new", id))
	}
	if err == nil {
		err = syncDir(filepath.Join(q.dir, "new"))
	}
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("enqueue: %w", err)
	}
	return id, nil
}

// syncDir makes a rename into dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// list returns the names of the reports waiting, oldest first.
func (q *Queue) list() ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(q.dir, "new"))
	if err != nil {
		return nil, fmt.Errorf("report queue: %w", err)
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

// Run applies the waiting reports with h, oldest first, and then each
// report as it is enqueued, until ctx is done; it then returns ctx's
// error. A panic in h counts as a failure to be retried.
func (q *Queue) Run(ctx context.Context, h Handler) error {
	// A timer, not only the wake channel, so that a report renamed into
	// new/ by hand is picked up too.
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	backoff := time.Duration(0)
	for {
		names, err := q.list()
		if err != nil {
			q.opts.Log.Error("reports: listing the queue", "err", err)
			names = nil
		}
		failed := false
		for _, name := range names {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !q.apply(ctx, h, name) {
				failed = true
				break
			}
		}
		if !failed {
			backoff = 0
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-q.wake:
			case <-tick.C:
			}
			continue
		}
		// New reports wait behind the one that failed.
		backoff = min(max(2*backoff, q.opts.Retry), time.Minute)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// apply applies the report in file name and removes it, unless it is to
// be retried; it reports whether the queue may go on to the next.
func (q *Queue) apply(ctx context.Context, h Handler, name string) (ok bool) {
	path := filepath.Join(q.dir, "new", name)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	if err != nil {
		q.opts.Log.Error("reports: reading a report; retrying", "id", name, "err", err)
		return false
	}
	r, err := Decode(b)
	if err == nil {
		err = r.Check()
	}
	if err != nil {
		q.opts.Log.Error("reports: dropping an unreadable report", "id", name, "err", err)
		q.remove(path, int64(len(b)))
		return true
	}
	err = q.call(ctx, h, r)
	switch {
	case err == nil:
		q.remove(path, int64(len(b)))
		return true
	case errors.Is(err, ErrPermanent):
		q.opts.Log.Warn("reports: dropping a report that cannot be applied", "id", name, "user", r.User,
			"class", r.Class, "source", r.Source, "err", err)
		q.remove(path, int64(len(b)))
		return true
	case ctx.Err() != nil:
		return false
	}
	q.opts.Log.Error("reports: applying a report failed; retrying", "id", name, "user", r.User, "err", err)
	return false
}

// call runs h, turning a panic into an error.
func (q *Queue) call(ctx context.Context, h Handler, r Report) (err error) {
	defer func() {
		if v := recover(); v != nil {
			q.opts.Log.Error("reports: panic applying a report", "panic", v, "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return h(ctx, r)
}

func (q *Queue) remove(path string, size int64) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		q.opts.Log.Error("reports: removing an applied report", "path", path, "err", err)
		return
	}
	q.mu.Lock()
	q.pending = max(q.pending-1, 0)
	q.bytes = max(q.bytes-size, 0)
	q.mu.Unlock()
}

// magic starts every report file, with the format's version.
const magic = "spamd-report 1\n"

// Encode formats r as a report file: the line "spamd-report 1", then
// "user", "class" and "source" lines of the form "KEY VALUE", a blank
// line, and the message as it came.
func Encode(r Report) []byte {
	var b bytes.Buffer
	b.Grow(len(magic) + 64 + len(r.User) + len(r.Message))
	b.WriteString(magic)
	fmt.Fprintf(&b, "user %s\nclass %s\nsource %s\n\n", r.User, r.Class, r.Source)
	b.Write(r.Message)
	return b.Bytes()
}

// Decode parses a report file written by Encode. It checks the format,
// not the values: call Report.Check for those.
func Decode(b []byte) (Report, error) {
	rest, ok := bytes.CutPrefix(b, []byte(magic))
	if !ok {
		return Report{}, fmt.Errorf("%w: not a report file", ErrInvalid)
	}
	var r Report
	seen := map[string]bool{}
	for {
		line, after, ok := bytes.Cut(rest, []byte("\n"))
		if !ok {
			return Report{}, fmt.Errorf("%w: no blank line after the fields", ErrInvalid)
		}
		rest = after
		if len(line) == 0 {
			break
		}
		key, value, _ := bytes.Cut(line, []byte(" "))
		k := string(key)
		if seen[k] {
			return Report{}, fmt.Errorf("%w: field %q twice", ErrInvalid, k)
		}
		seen[k] = true
		switch k {
		case "user":
			r.User = string(value)
		case "class":
			r.Class = string(value)
		case "source":
			r.Source = string(value)
		default:
			return Report{}, fmt.Errorf("%w: unknown field %q", ErrInvalid, k)
		}
	}
	if !seen["user"] || !seen["class"] {
		return Report{}, fmt.Errorf("%w: user and class are required", ErrInvalid)
	}
	r.Message = rest
	return r, nil
}
