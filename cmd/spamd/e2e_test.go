package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/decide"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/tokenize"
)

// labelled is a message with its class.
type labelled struct {
	class string
	raw   []byte
}

// e2eMessages returns messages to train and candidates to send: from the
// SpamAssassin corpus at $SPAMD_CORPUS (index lines "CLASS PATH"), the
// first perClass of each class to train and the next few to send, else
// the repository's sample.
func e2eMessages(t *testing.T, perClass int) (train, send []labelled) {
	t.Helper()
	var all []labelled
	if dir := os.Getenv("SPAMD_CORPUS"); dir != "" {
		f, err := os.Open(filepath.Join(dir, "index"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for sc := bufio.NewScanner(f); sc.Scan(); {
			class, path, _ := strings.Cut(sc.Text(), " ")
			all = append(all, labelled{class: class, raw: readFile(t, filepath.Join(dir, path))})
			if len(all) >= 4*perClass {
				break
			}
		}
	} else {
		for _, class := range []string{filter.Spam, filter.Ham} {
			dir := filepath.Join("../../testdata/sample", class)
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				all = append(all, labelled{class: class, raw: readFile(t, filepath.Join(dir, e.Name()))})
			}
		}
		perClass = 16
	}
	n := map[string]int{}
	for _, m := range all {
		if n[m.class] < perClass {
			train = append(train, m)
		} else {
			send = append(send, m)
		}
		n[m.class]++
	}
	return train, send
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stripFrom drops an mbox "From " line, which is not part of a message
// sent over SMTP.
func stripFrom(raw []byte) []byte {
	if bytes.HasPrefix(raw, []byte("From ")) {
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			return raw[i+1:]
		}
	}
	return raw
}

// lockedBuffer collects a process's output for the test to read while
// it runs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// buildSpamd builds the daemon into dir.
func buildSpamd(t *testing.T, dir string) string {
	t.Helper()
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin = "go"
	}
	bin := filepath.Join(dir, "spamd")
	if out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// e2eConfig is the daemon's configuration for the test, with actions
// appended to [actions].
func e2eConfig(work string, milterPort int, actions string) string {
	return fmt.Sprintf(`[store]
dir = %q
[milter]
listen = "tcp://127.0.0.1:%d"
[api]
socket = %q
[metrics]
listen = ""
[actions]
%s
`, filepath.Join(work, "db"), milterPort, filepath.Join(work, "api.sock"), actions)
}

// replaceFile replaces path with content the way editors do: a new file
// renamed over the old.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".new"
	write(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// headers parses the header of a delivered message.
func headers(t *testing.T, raw []byte) mail.Header {
	t.Helper()
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("delivered message: %v\n%s", err, raw)
	}
	return m.Header
}

// TestPostfixEndToEnd runs spamd behind a real Postfix: trained, it lets
// a ham through tagged X-Spam-Flag: NO and rejects a spam with 550; with
// a new configuration it delivers the spam tagged instead; stopped, it
// lets mail flow as milter_default_action says.
func TestPostfixEndToEnd(t *testing.T) {
	pfBin := needPostfix(t)
	work := t.TempDir()
	bin := buildSpamd(t, work)
	train, candidates := e2eMessages(t, 300)

	milterPort := freePort(t)
	cfgPath := filepath.Join(work, "config.toml")
	reject := "reject = true\nreject_score = 0.0\n"
	write(t, cfgPath, e2eConfig(work, milterPort, reject))
	var logs lockedBuffer
	daemon := exec.Command(bin, "--config", cfgPath)
	daemon.Stdout, daemon.Stderr = &logs, &logs
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- daemon.Wait() }()
	t.Cleanup(func() {
		daemon.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("spamd's log:\n%s", logs.String())
		}
	})

	api, err := control.NewClient("unix:"+filepath.Join(work, "api.sock"), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	waitFor(t, 20*time.Second, "spamd's API", func() bool { return api.Health(ctx) == nil })

	// Train through the control API, as spamtrain does while spamd runs.
	for i := 0; i < len(train); i += 100 {
		var items []control.Item
		for _, m := range train[i:min(i+100, len(train))] {
			items = append(items, control.Item{Class: m.class, Message: m.raw})
		}
		if _, err := api.Train(ctx, "", items); err != nil {
			t.Fatal(err)
		}
	}
	st, err := api.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("trained %v messages", st.Users[0].Messages)

	// One unseen ham and one unseen spam the model gets right.
	pick := func(class string) []byte {
		for _, m := range candidates {
			raw := stripFrom(m.raw)
			if m.class != class {
				continue
			}
			if _, err := mail.ReadMessage(bytes.NewReader(raw)); err != nil {
				continue
			}
			if v, err := api.Classify(ctx, "", raw, 0); err == nil && v.Verdict == class {
				return raw
			}
		}
		t.Fatalf("no unseen %s classified as %s", class, class)
		return nil
	}
	ham, spam := pick(filter.Ham), pick(filter.Spam)

	pf := startPostfix(t, pfBin, fmt.Sprintf("127.0.0.1:%d", milterPort))

	t.Run("ham delivered with X-Spam-Flag NO", func(t *testing.T) {
		got := pf.deliver(t, ham)
		h := headers(t, got)
		if flags := h["X-Spam-Flag"]; len(flags) != 1 || flags[0] != "NO" {
			t.Errorf("X-Spam-Flag %q, want exactly one NO", flags)
		}
		if !strings.HasPrefix(h.Get("X-Spam-Status"), "No, score=") {
			t.Errorf("X-Spam-Status %q", h.Get("X-Spam-Status"))
		}
		res, err := decide.ParseResult(h.Get(decide.ResultHeader))
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict != filter.Ham || res.Signature != tokenize.Digest(got) {
			t.Errorf("X-Spamd-Result %+v; want ham signed with the delivered message's digest %x", res, tokenize.Digest(got))
		}
	})

	t.Run("spam rejected with 550", func(t *testing.T) {
		before := len(pf.delivered())
		err := pf.send(spam)
		code, msg := smtpCode(err)
		if code != 550 || msg != "5.7.1 Message rejected as spam" {
			t.Fatalf("submission answered %v, want 550 5.7.1 Message rejected as spam", err)
		}
		time.Sleep(300 * time.Millisecond)
		if n := len(pf.delivered()); n != before {
			t.Errorf("%d messages delivered after the rejection, want %d", n, before)
		}
		if !strings.Contains(pf.log(), "milter-reject: END-OF-MESSAGE") {
			t.Errorf("Postfix did not log the milter's rejection:\n%s", pf.log())
		}
	})

	t.Run("reloaded: spam delivered tagged", func(t *testing.T) {
		reloads := strings.Count(logs.String(), "configuration reloaded")
		replaceFile(t, cfgPath, e2eConfig(work, milterPort, "reject = false\nsubject_tag = \"[SPAM]\"\n"))
		waitFor(t, 10*time.Second, "spamd to reload its configuration", func() bool {
			return strings.Count(logs.String(), "configuration reloaded") > reloads
		})
		h := headers(t, pf.deliver(t, spam))
		if flags := h["X-Spam-Flag"]; len(flags) != 1 || flags[0] != "YES" {
			t.Errorf("X-Spam-Flag %q, want exactly one YES", flags)
		}
		if !strings.HasPrefix(h.Get("Subject"), "[SPAM] ") {
			t.Errorf("Subject %q is not tagged", h.Get("Subject"))
		}
		if res, err := decide.ParseResult(h.Get(decide.ResultHeader)); err != nil || res.Verdict != filter.Spam {
			t.Errorf("X-Spamd-Result %+v, %v", res, err)
		}
	})

	t.Run("spamd stopped: mail still flows", func(t *testing.T) {
		if err := daemon.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			if err != nil {
				t.Fatalf("spamd exited with %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("spamd did not stop on SIGTERM")
		}
		if !strings.Contains(logs.String(), "spamd: stopped") {
			t.Error("spamd did not log its stop")
		}
		h := headers(t, pf.deliver(t, ham))
		if v := h.Get(decide.ResultHeader); v != "" {
			t.Errorf("delivered with %s %q from a stopped spamd", decide.ResultHeader, v)
		}
		if !strings.Contains(pf.log(), "connect to Milter service inet:127.0.0.1:") {
			t.Error("Postfix did not log the unreachable milter")
		}
	})
}
