package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/history"
	"github.com/spamd/spamd/store"
)

// historyDaemon serves the control API with history h (none if nil) on
// a unix socket and returns its address.
func historyDaemon(t *testing.T, h *history.Ring) string {
	t.Helper()
	f, err := filter.New(store.NewMemory(), filter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := control.NewServer(control.Options{Filter: func() *filter.Filter { return f }, History: h})
	hs := &http.Server{Handler: srv.Handler(), ConnContext: control.ConnContext}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return "unix:" + sock
}

// lockedWriter is a buffer a command writes while the test reads it.
type lockedWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func TestHistory(t *testing.T) {
	h, err := history.New(history.Options{Size: 100})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2024, 3, 1, 12, 0, 0, 0, time.Local)
	h.Add(history.Entry{Time: at, QueueID: "4ABC", Sender: "spammer@example.net", Recipients: []string{"bob@example.org"},
		Users: []string{"bob"}, Subject: "=?utf-8?q?caf=C3=A9?= \x1b[31mred", Verdict: "spam", Probability: 0.99991, Score: 9.876, Action: "reject",
		Toward: map[string][]history.Feature{"spam": {{Name: "viagra", Value: 1, Weight: 1.25}}, "ham": {{Name: "meeting", Value: 1, Weight: 0.5}}}}, nil)
	h.Add(history.Entry{Time: at.Add(time.Second), Recipients: []string{"alice@example.org"}, Users: []string{"alice"},
		Verdict: "skipped", Reason: "authenticated", Action: "accept"}, nil)
	addr := historyDaemon(t, h)

	code, out, errOut := spamtrain(t, "", "history", "--api", addr, "-v")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "1 ") || !strings.HasPrefix(lines[3], "2 ") {
		t.Fatalf("want the two verdicts oldest first, each spam's features under it:\n%s", out)
	}
	for _, want := range []string{"2024-03-01 12:00:00", "4ABC", "spam", "0.9999", "9.88", "reject", "spammer@example.net", "bob@example.org", "café  [31mred"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("%q lacks %q", lines[0], want)
		}
	}
	if !strings.Contains(out, "toward spam: viagra (+1.250)") || !strings.Contains(out, "toward ham: meeting (+0.500)") {
		t.Errorf("-v lacks the features:\n%s", out)
	}
	if !strings.Contains(lines[3], "skipped") || !strings.Contains(lines[3], "authenticated") || !strings.Contains(lines[3], "<>") {
		t.Errorf("the skipped message: %q", lines[3])
	}
	if strings.Contains(out, "\x1b") {
		t.Error("a control character reached the terminal")
	}

	code, out, _ = spamtrain(t, "", "history", "--api", addr, "--json", "--verdict", "spam")
	var e history.Entry
	if err := json.Unmarshal([]byte(out), &e); code != 0 || err != nil || e.ID != 1 || e.QueueID != "4ABC" {
		t.Errorf("--json --verdict spam: exit %d, %v, %q", code, err, out)
	}
	if code, out, _ = spamtrain(t, "", "history", "--api", addr, "--user", "alice", "--limit", "5"); code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, "alice@") {
		t.Errorf("--user alice: exit %d, %q", code, out)
	}

	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no daemon", []string{"--api", "unix:" + filepath.Join(t.TempDir(), "none.sock")}, 1, "the history lives in the running spamd, and none answers at unix:"},
		{"no history", []string{"--api", historyDaemon(t, nil)}, 1, "keeps no history: set [history] size"},
		{"bad verdict", []string{"--api", addr, "--verdict", "maybe"}, 2, "--verdict"},
		{"bad limit", []string{"--api", addr, "--limit", "0"}, 2, "--limit"},
		{"bad user", []string{"--api", addr, "--user", "../x"}, 2, "--user"},
		{"follow and before", []string{"--api", addr, "-f", "--before", "3"}, 2, "give one of them"},
		{"an argument", []string{"--api", addr, "x"}, 2, "unexpected"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := spamtrain(t, "", append([]string{"history"}, tt.args...)...)
			if code != tt.code || !strings.Contains(errOut, tt.want) {
				t.Errorf("exit %d, %q; want %d and %q", code, errOut, tt.code, tt.want)
			}
		})
	}

	// -f prints what comes next.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out2 := &lockedWriter{}
	e2 := &env{stdout: out2, stderr: io.Discard, log: slog.New(slog.DiscardHandler)}
	done := make(chan int, 1)
	go func() { done <- run(ctx, e2, []string{"history", "--api", addr, "--limit", "1", "-f"}) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out2.String(), "alice@") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	h.Add(history.Entry{Time: time.Now(), Recipients: []string{"carol@example.org"}, Verdict: "ham", Action: "accept"}, nil)
	for !strings.Contains(out2.String(), "carol@") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != 0 || strings.Count(out2.String(), "\n") != 2 || strings.Contains(out2.String(), "bob@") {
		t.Errorf("-f: exit %d, printed\n%s", code, out2.String())
	}
}
