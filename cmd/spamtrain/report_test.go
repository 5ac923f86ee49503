package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/milter"
	"github.com/spamd/spamd/relabel"
	"github.com/spamd/spamd/reportq"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/tokenize"
)

// reportDaemon is the daemon's report path in-process: the control API
// enqueueing into a real spool, applied to a memory store.
type reportDaemon struct {
	sock string
	st   store.Store
	q    *reportq.Queue
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
	if d.q, err = reportq.Open(t.TempDir(), reportq.Options{}); err != nil {
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
		hs.Close()
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
	msg := append([]byte(milter.ResultHeader+": "+milter.Result{Verdict: "ham", Signature: tokenize.Digest(raw)}.String()+"\n"), raw...)
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
