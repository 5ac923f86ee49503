package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/decide"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/relabel"
	"github.com/spamd/spamd/reportq"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/tokenize"
)

// reportDaemon is the daemon's report path in-process: the control API
// enqueueing into a real spool, applied to a memory store.
type reportDaemon struct {
	sock  string
	st    store.Store
	q     *reportq.Queue
	spool string
}

func startReportDaemon(t *testing.T) *reportDaemon {
	t.Helper()
	d := &reportDaemon{sock: filepath.Join(t.TempDir(), "api.sock"), st: store.NewMemory()}
	f, err := filter.New(d.st, filter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, class := range []string{filter.Spam, filter.Ham} {
		ents, _ := os.ReadDir(filepath.Join(sample, class))
		for _, e := range ents[1:] {
			raw, _ := os.ReadFile(filepath.Join(sample, class, e.Name()))
			f.Learn(ctx, "", raw, class)
			f.Learn(ctx, "bob", raw, class)
		}
	}
	d.spool = t.TempDir()
	if d.q, err = reportq.Open(d.spool, reportq.Options{}); err != nil {
		t.Fatal(err)
	}
	a := &relabel.Applier{Filter: func() *filter.Filter { return f }}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.q.Run(runCtx, a.Apply)
	}()
	srv := control.NewServer(control.Options{Filter: func() *filter.Filter { return f }, Enqueue: d.q.Enqueue})
	ln, err := net.Listen("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler(), ConnContext: control.ConnContext}
	go hs.Serve(ln)
	t.Cleanup(func() {
		// Shutdown waits for the requests in flight: one a client gave up
		// on may still be writing to the spool, which is removed next.
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		defer scancel()
		if err := hs.Shutdown(sctx); err != nil {
			hs.Close()
		}
		cancel()
		<-done
	})
	return d
}

// settled waits for the queue to empty and returns user's message counts.
func (d *reportDaemon) settled(t *testing.T, user string) map[string]uint64 {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); d.q.Len() > 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d reports still waiting", d.q.Len())
		}
	}
	tot, err := d.st.Totals(context.Background(), user)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for i, c := range tot.Classes {
		out[c] = tot.Messages[i]
	}
	return out
}

func TestReport(t *testing.T) {
	isolate(t)
	d := startReportDaemon(t)
	ents, err := os.ReadDir(filepath.Join(sample, "spam"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(sample, "spam", ents[0].Name()))
	if err != nil {
		t.Fatal(err)
	}
	// As Dovecot pipes it: CRLF line endings, and what the milter said.
	_, raw, _ = bytes.Cut(raw, []byte("\n"))
	msg := append([]byte(decide.ResultHeader+": "+decide.Result{Verdict: "ham", Signature: tokenize.Digest(raw)}.String()+"\n"), raw...)
	msg = bytes.ReplaceAll(msg, []byte("\n"), []byte("\r\n"))
	file := filepath.Join(t.TempDir(), "msg.eml")
	os.WriteFile(file, msg, 0o644)
	api := "unix:" + d.sock
	bob := d.settled(t, "bob")
	for _, tt := range []struct {
		name      string
		args      []string
		stdin     string
		code      int
		spam, ham uint64
	}{
		{"moved to Junk: spam once", []string{"--user", "alice", "--spam", "-"}, string(msg), 0, 1, 0},
		{"the same report again", []string{"--user", "alice", "--spam", file}, "", 0, 1, 0},
		{"moved back: relabeled ham", []string{"--user", "alice", "--ham", "-"}, string(msg), 0, 0, 1},
		{"no user", []string{"--spam", "-"}, string(msg), 2, 0, 1},
		{"empty user", []string{"--user", "", "--spam", "-"}, string(msg), 2, 0, 1},
		{"climbing user", []string{"--user", "../x", "--spam", "-"}, string(msg), 2, 0, 1},
		{"slash", []string{"--user", "a/b", "--spam", "-"}, string(msg), 2, 0, 1},
		{"10 kB user", []string{"--user", strings.Repeat("a", 10<<10), "--spam", "-"}, string(msg), 2, 0, 1},
		{"neither spam nor ham", []string{"--user", "alice", "-"}, string(msg), 2, 0, 1},
		{"empty message", []string{"--user", "alice", "--spam", "-"}, "", 1, 0, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"report", "--api", api}, tt.args...)
			start := time.Now()
			code, out, errOut := spamtrain(t, tt.stdin, args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d: %s%s", code, tt.code, out, errOut)
			}
			if elapsed := time.Since(start); elapsed > time.Second {
				t.Errorf("report took %v", elapsed)
			}
			got := d.settled(t, "alice")
			if got[filter.Spam] != tt.spam || got[filter.Ham] != tt.ham {
				t.Errorf("alice's model holds %v, want spam %d ham %d", got, tt.spam, tt.ham)
			}
			if got := d.settled(t, "bob"); got[filter.Spam] != bob[filter.Spam] || got[filter.Ham] != bob[filter.Ham] {
				t.Errorf("bob's model changed: %v → %v", bob, got)
			}
		})
	}
	t.Run("no daemon", func(t *testing.T) {
		start := time.Now()
		code, _, errOut := spamtrain(t, string(msg), "report", "--api", "unix:"+filepath.Join(t.TempDir(), "none.sock"),
			"--timeout", "300ms", "--user", "alice", "--spam", "-")
		if code != 1 || !strings.Contains(errOut, "not delivered") {
			t.Errorf("exit %d: %s", code, errOut)
		}
		if elapsed := time.Since(start); elapsed > 2*time.Second {
			t.Errorf("gave up after %v", elapsed)
		}
	})
}

// breakSpool makes the daemon's spool unwritable, as a full or read-only
// disk does (root writes through permissions, so tmp/ becomes a file),
// and returns what mends it.
func (d *reportDaemon) breakSpool(t *testing.T) (mend func()) {
	t.Helper()
	tmp := filepath.Join(d.spool, "tmp")
	if err := os.Remove(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.Remove(tmp); err != nil {
			t.Error(err)
		}
		if err := os.Mkdir(tmp, 0o750); err != nil {
			t.Error(err)
		}
	}
}

// TestReportUnwritableSpool checks that a report the daemon cannot queue
// is answered 503 and delivered once the spool mends, and that one it
// never can is an error that says so, never a silent loss.
func TestReportUnwritableSpool(t *testing.T) {
	isolate(t)
	d := startReportDaemon(t)
	msg, err := os.ReadFile(filepath.Join(sample, "spam", mustFirst(t, filepath.Join(sample, "spam"))))
	if err != nil {
		t.Fatal(err)
	}
	api := "unix:" + d.sock

	t.Run("the API answers 503 with Retry-After", func(t *testing.T) {
		mend := d.breakSpool(t)
		defer mend()
		c, err := control.NewClient(api, "")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err = c.Report(ctx, "alice", filter.Spam, "", msg)
		var ae *control.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || ae.RetryAfter <= 0 || !control.Temporary(err) {
			t.Fatalf("%v (%+v), want a 503 with Retry-After", err, ae)
		}
	})

	t.Run("delivered once the spool mends", func(t *testing.T) {
		mend := d.breakSpool(t)
		mended := make(chan struct{})
		go func() {
			defer close(mended)
			time.Sleep(700 * time.Millisecond)
			mend()
		}()
		defer func() { <-mended }()
		code, out, errOut := spamtrain(t, string(msg), "report", "--api", api, "--timeout", "8s", "--user", "alice", "--spam", "-")
		if code != 0 || !strings.Contains(out, "queued as") {
			t.Fatalf("exit %d: %s%s", code, out, errOut)
		}
		if !strings.Contains(errOut, "trying again") {
			t.Errorf("the failed attempts were not said: %q", errOut)
		}
		if got := d.settled(t, "alice"); got[filter.Spam] != 1 {
			t.Errorf("alice's model holds %v after the report", got)
		}
	})

	t.Run("never delivered: an error, not silence", func(t *testing.T) {
		mend := d.breakSpool(t)
		defer mend()
		code, out, errOut := spamtrain(t, string(msg), "report", "--api", api, "--timeout", "1500ms", "--user", "bob", "--ham", "-")
		if code != 1 || !strings.Contains(errOut, "not delivered") || !strings.Contains(errOut, "503") {
			t.Errorf("exit %d: %s%s", code, out, errOut)
		}
		if d.q.Len() != 0 {
			t.Errorf("%d reports queued", d.q.Len())
		}
	})
}

// TestDeliver checks what deliver does with each kind of failure: tries
// again after what may pass, gives up at once on a refusal, and ends with
// an error when the time is up.
func TestDeliver(t *testing.T) {
	unreachable := &net.OpError{Op: "dial", Net: "unix", Err: os.ErrNotExist}
	busy := &control.Error{Status: http.StatusServiceUnavailable, Message: "busy", RetryAfter: 10 * time.Millisecond}
	refused := &control.Error{Status: http.StatusForbidden, Message: "not allowed"}
	for _, tt := range []struct {
		name     string
		answers  []error // in turn; the last one again and again
		timeout  time.Duration
		attempts int // 0: more than one
		err      string
	}{
		{"at once", []error{nil}, time.Second, 1, ""},
		{"after the daemon comes back", []error{unreachable, unreachable, nil}, 5 * time.Second, 3, ""},
		{"after a 503", []error{busy, nil}, 5 * time.Second, 2, ""},
		{"refused", []error{refused, nil}, 5 * time.Second, 1, "refused"},
		{"never", []error{busy}, 300 * time.Millisecond, 0, "not delivered after"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tt.timeout)
			defer cancel()
			var log bytes.Buffer
			attempts := 0
			err := deliver(ctx, &log, func(context.Context) error {
				err := tt.answers[min(attempts, len(tt.answers)-1)]
				attempts++
				return err
			})
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("%v; log %q", err, log.String())
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("error %v, want it to say %q", err, tt.err)
			}
			if tt.attempts > 0 && attempts != tt.attempts || tt.attempts == 0 && attempts < 2 {
				t.Errorf("%d attempts, want %d", attempts, tt.attempts)
			}
			// Each failure that was tried again is said.
			if said := strings.Count(log.String(), "trying again"); said != attempts-1 && tt.err != "refused" {
				t.Errorf("%d failures said, %d attempts: %q", said, attempts, log.String())
			}
		})
	}
}

func mustFirst(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) == 0 {
		t.Fatal(dir, err)
	}
	return ents[0].Name()
}
