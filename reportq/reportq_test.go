package reportq

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var msg = []byte("From: a@example.org\r\nSubject: hi\r\n\r\nhello\r\n")

func TestCheck(t *testing.T) {
	for _, tt := range []struct {
		name string
		r    Report
		ok   bool
	}{
		{"valid", Report{User: "alice@example.org", Class: "spam", Source: "maildir", Message: msg}, true},
		{"no source", Report{User: "bob", Class: "ham", Message: msg}, true},
		{"empty user", Report{User: "", Class: "spam", Message: msg}, false},
		{"dot dot", Report{User: "../x", Class: "spam", Message: msg}, false},
		{"slash", Report{User: "a/b", Class: "spam", Message: msg}, false},
		{"10 kB user", Report{User: strings.Repeat("a", 10<<10), Class: "spam", Message: msg}, false},
		{"newline in user", Report{User: "a\nclass ham", Class: "spam", Message: msg}, false},
		{"bad class", Report{User: "bob", Class: "Spam\n", Message: msg}, false},
		{"bad source", Report{User: "bob", Class: "spam", Source: "x y", Message: msg}, false},
		{"empty message", Report{User: "bob", Class: "spam"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.r.Check()
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Errorf("Check: %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestEncodeDecode(t *testing.T) {
	for _, tt := range []struct {
		name string
		r    Report
	}{
		{"crlf", Report{User: "alice", Class: "spam", Source: "imapsieve", Message: msg}},
		{"lf with blank lines", Report{User: "bob", Class: "ham", Message: []byte("Subject: x\n\n\nbody\n\n")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(Encode(tt.r))
			if err != nil {
				t.Fatal(err)
			}
			if got.User != tt.r.User || got.Class != tt.r.Class || got.Source != tt.r.Source || string(got.Message) != string(tt.r.Message) {
				t.Errorf("got %+v, want %+v", got, tt.r)
			}
		})
	}
	for _, bad := range []string{"", "spamd-report 2\nuser a\nclass b\n\nx", magic + "user a\nclass b\nx", magic + "user a\n\nx",
		magic + "user a\nuser b\nclass c\n\nx", magic + "user a\nclass c\nflavour d\n\nx"} {
		if _, err := Decode([]byte(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("Decode(%q): %v, want ErrInvalid", bad, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Encode(Report{User: "alice", Class: "spam", Source: "api", Message: msg}))
	f.Add([]byte(magic + "user \nclass \n\n"))
	f.Add([]byte(magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Decode(b)
		if err != nil {
			return
		}
		if r.Check() != nil {
			return
		}
		// A valid report survives a round trip.
		again, err := Decode(Encode(r))
		if err != nil || again.User != r.User || again.Class != r.Class || again.Source != r.Source || string(again.Message) != string(r.Message) {
			t.Fatalf("round trip of %+v: %+v, %v", r, again, err)
		}
	})
}

// recorder is a Handler that records what it applied and fails as told.
type recorder struct {
	mu   sync.Mutex
	got  []string
	fail func(r Report) error
	done chan struct{}
	want int
}

func (rc *recorder) handle(_ context.Context, r Report) error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.fail != nil {
		if err := rc.fail(r); err != nil {
			return err
		}
	}
	rc.got = append(rc.got, r.User+":"+r.Class)
	if len(rc.got) == rc.want {
		close(rc.done)
	}
	return nil
}

func (rc *recorder) wait(t *testing.T) []string {
	t.Helper()
	select {
	case <-rc.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("only %d of %d reports applied", len(rc.got), rc.want)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.got...)
}

func run(t *testing.T, q *Queue, h Handler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- q.Run(ctx, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	})
}

func TestQueue(t *testing.T) {
	ctx := context.Background()
	t.Run("in order, surviving a restart", func(t *testing.T) {
		dir := t.TempDir()
		q, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for i := range 20 {
			r := Report{User: fmt.Sprintf("u%d", i), Class: []string{"spam", "ham"}[i%2], Message: msg}
			if _, err := q.Enqueue(ctx, r); err != nil {
				t.Fatal(err)
			}
			want = append(want, r.User+":"+r.Class)
		}
		// A half-written report of a crash is discarded at open.
		os.WriteFile(filepath.Join(dir, "tmp", "junk"), []byte("spamd-rep"), 0o600)
		q, err = Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if q.Len() != 20 {
			t.Fatalf("%d reports waiting after reopening, want 20", q.Len())
		}
		rc := &recorder{done: make(chan struct{}), want: 20}
		run(t, q, rc.handle)
		if got := rc.wait(t); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("applied %v, want %v", got, want)
		}
		waitEmpty(t, q)
		if ents, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(ents) != 0 {
			t.Errorf("tmp/ holds %d files", len(ents))
		}
	})
	t.Run("retried in order after a failure", func(t *testing.T) {
		q, err := Open(t.TempDir(), Options{Retry: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		failures := 3
		rc := &recorder{done: make(chan struct{}), want: 2, fail: func(r Report) error {
			if r.User == "first" && failures > 0 {
				failures--
				return errors.New("store unavailable")
			}
			return nil
		}}
		run(t, q, rc.handle)
		q.Enqueue(ctx, Report{User: "first", Class: "spam", Message: msg})
		q.Enqueue(ctx, Report{User: "second", Class: "ham", Message: msg})
		if got := rc.wait(t); strings.Join(got, " ") != "first:spam second:ham" {
			t.Errorf("applied %v", got)
		}
	})
	t.Run("permanent failures and panics", func(t *testing.T) {
		q, err := Open(t.TempDir(), Options{Retry: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		panicked := false
		rc := &recorder{done: make(chan struct{}), want: 2, fail: func(r Report) error {
			switch {
			case r.User == "malformed":
				return fmt.Errorf("%w: not a message", ErrPermanent)
			case r.User == "panics" && !panicked:
				panicked = true
				panic("boom")
			}
			return nil
		}}
		run(t, q, rc.handle)
		for _, u := range []string{"malformed", "panics", "last"} {
			if _, err := q.Enqueue(ctx, Report{User: u, Class: "spam", Message: msg}); err != nil {
				t.Fatal(err)
			}
		}
		if got := rc.wait(t); strings.Join(got, " ") != "panics:spam last:spam" {
			t.Errorf("applied %v", got)
		}
		waitEmpty(t, q)
	})
	t.Run("bounded", func(t *testing.T) {
		q, err := Open(t.TempDir(), Options{MaxReports: 2})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			_, err := q.Enqueue(ctx, Report{User: "bob", Class: "spam", Message: msg})
			if (i < 2) != (err == nil) || (i == 2 && !errors.Is(err, ErrFull)) {
				t.Errorf("report %d: %v", i, err)
			}
		}
		q, err = Open(t.TempDir(), Options{MaxBytes: 100})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Enqueue(ctx, Report{User: "bob", Class: "spam", Message: make([]byte, 200)}); !errors.Is(err, ErrFull) {
			t.Errorf("oversized: %v", err)
		}
	})
	t.Run("spool removed", func(t *testing.T) {
		// The spool inside the store's directory, both removed while
		// reports wait: they are gone, but the queue takes reports
		// again, and counts only those, once the directory above it is
		// back; until then, it refuses them.
		parent := filepath.Join(t.TempDir(), "db")
		dir := filepath.Join(parent, "reports")
		q, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := q.Enqueue(ctx, Report{User: "bob", Class: "spam", Message: msg}); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.RemoveAll(parent); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Enqueue(ctx, Report{User: "bob", Class: "ham", Message: msg}); err == nil {
			t.Fatal("a report queued where no directory is")
		}
		if _, err := os.Stat(parent); !os.IsNotExist(err) {
			t.Fatalf("the queue made the directory above its own: %v", err)
		}
		if err := os.Mkdir(parent, 0o750); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Enqueue(ctx, Report{User: "carol", Class: "ham", Message: msg}); err != nil {
			t.Fatalf("with the directory above back: %v", err)
		}
		if q.Len() != 1 {
			t.Errorf("%d reports counted waiting, want 1", q.Len())
		}
		rc := &recorder{done: make(chan struct{}), want: 1}
		run(t, q, rc.handle)
		if got := rc.wait(t); strings.Join(got, " ") != "carol:ham" {
			t.Errorf("applied %v", got)
		}
		waitEmpty(t, q)
	})
	t.Run("invalid reports are refused", func(t *testing.T) {
		dir := t.TempDir()
		q, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range []string{"", "../x", "a/b", strings.Repeat("x", 10<<10)} {
			if _, err := q.Enqueue(ctx, Report{User: u, Class: "spam", Message: msg}); !errors.Is(err, ErrInvalid) {
				t.Errorf("user %.20q: %v", u, err)
			}
		}
		if ents, _ := os.ReadDir(filepath.Join(dir, "new")); len(ents) != 0 || q.Len() != 0 {
			t.Errorf("%d files queued", len(ents))
		}
	})
}

func waitEmpty(t *testing.T, q *Queue) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for q.Len() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d reports still waiting", q.Len())
		}
		time.Sleep(5 * time.Millisecond)
	}
	names, err := q.list()
	if err != nil || len(names) != 0 {
		t.Fatalf("new/ holds %v, %v", names, err)
	}
}
