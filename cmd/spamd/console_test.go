package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	gomilter "github.com/emersion/go-milter"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/history"
)

// needChromium returns the path of a Chromium to drive, skipping the
// test when there is none, unless SPAMD_REQUIRE_E2E=1.
func needChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "chromium is not installed: install it with `apt-get install chromium`"
	if os.Getenv("SPAMD_REQUIRE_E2E") == "1" {
		t.Fatal(msg + " (SPAMD_REQUIRE_E2E=1 makes this a failure)")
	}
	t.Skip(msg + "; set SPAMD_REQUIRE_E2E=1 to make this a failure")
	return ""
}

// browser starts a headless Chromium with a fresh profile and returns a
// context whose actions drive one tab of it, ending with the test.
func browser(t *testing.T, ctx context.Context, chromium string) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("font-render-hinting", "none"),
		chromedp.WindowSize(1360, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	return bctx
}

// sendAs sends raw through a milter session with its From address as
// the envelope sender and rcpt as the recipient, and returns the answer.
func sendAs(t *testing.T, s *gomilter.ClientSession, raw []byte, rcpt string) string {
	t.Helper()
	from := "<>"
	if m, err := mail.ReadMessage(bytes.NewReader(raw)); err == nil {
		if a, err := mail.ParseAddress(m.Header.Get("From")); err == nil {
			from = a.Address
		}
	}
	head, body, _ := strings.Cut(strings.ReplaceAll(string(raw), "\r\n", "\n"), "\n\n")
	if _, err := s.Mail(from, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Rcpt(rcpt, nil); err != nil {
		t.Fatal(err)
	}
	var fields [][2]string
	for _, line := range strings.Split(head, "\n") {
		if (strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")) && len(fields) > 0 {
			fields[len(fields)-1][1] += "\n" + line
		} else if k, v, ok := strings.Cut(line, ":"); ok {
			fields = append(fields, [2]string{k, strings.TrimPrefix(v, " ")})
		}
	}
	for _, f := range fields {
		if _, err := s.HeaderField(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.HeaderEnd(); err != nil {
		t.Fatal(err)
	}
	body = strings.ReplaceAll(body, "\n", "\r\n")
	for len(body) > 0 {
		n := min(len(body), gomilter.MaxBodyChunk)
		if _, err := s.BodyChunk([]byte(body[:n])); err != nil {
			t.Fatal(err)
		}
		body = body[n:]
	}
	return endMessage(t, s)
}

// TestConsoleBrowser drives the web console of a real spamd with a
// headless Chromium: it logs in with the API's token, sees mail sent
// through the milter appear in the history, opens a spam message and
// learns it as ham with a click, and checks that the model changed.
// SPAMD_SCREENSHOTS=DIR saves the status, history and message pages
// there (docs/screenshots/ holds the README's).
func TestConsoleBrowser(t *testing.T) {
	chromium := needChromium(t)
	dir := t.TempDir()
	token := "console-test-token-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	write(t, filepath.Join(dir, "token"), token+"\n")
	consoleAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	path := filepath.Join(dir, "config.toml")
	write(t, path, fmt.Sprintf(`[store]
dir = %q
[milter]
listen = "unix:%s"
users = "localpart"
explain = 4
[api]
socket = %q
token_file = %q
[metrics]
listen = ""
[history]
size = 100
[console]
enabled = true
listen = %q
`, filepath.Join(dir, "db"), filepath.Join(dir, "milter.sock"), filepath.Join(dir, "api.sock"),
		filepath.Join(dir, "token"), consoleAddr))
	runDaemon(t, options{config: path}, nil)
	api, err := control.NewClient("unix:"+filepath.Join(dir, "api.sock"), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	waitFor(t, 10*time.Second, "the API", func() bool { return api.Health(ctx) == nil })
	heldSpam, heldHam := trainSample(t, api)
	before := globalCounts(t, ctx, api)

	shots := os.Getenv("SPAMD_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	b := browser(t, ctx, chromium)
	base := "http://" + consoleAddr
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(b, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(b, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return strings.TrimSpace(s)
	}
	count := func(sel string) int {
		t.Helper()
		n, err := chromedp.Run(b, chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%q).length", sel)))
		if err != nil {
			t.Fatalf("count %s: %v", sel, err)
		}
		return n
	}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(b, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot of %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Logging in: a page asks for the token, then leads where it was
	// asked for.
	do("log in", chromedp.Navigate(base+"/console/history"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.ID("history")))
	if n := count("#history tbody tr[data-id]"); n != 0 {
		t.Fatalf("the history shows %d messages before any was sent", n)
	}

	// Mail through the milter appears in the history.
	s := milterSession(t, filepath.Join(dir, "milter.sock"))
	defer s.Close()
	type message struct {
		raw        []byte
		rcpt, want string
	}
	answer := map[string]string{filter.Spam: "accept YES", filter.Ham: "accept NO"}
	var sent []message
	for _, class := range []string{filter.Spam, filter.Ham} {
		ents, err := os.ReadDir(filepath.Join("../../testdata/sample", class))
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range ents[:4] {
			raw := stripFrom(readFile(t, filepath.Join("../../testdata/sample", class, e.Name())))
			sent = append(sent, message{raw, []string{"alice", "bob", "carol"}[i%3] + "@example.org", answer[class]})
		}
	}
	// The held-out spam last: it is the newest row.
	sent = append(sent, message{heldHam, "alice@example.org", answer[filter.Ham]}, message{heldSpam, "bob@example.org", answer[filter.Spam]})
	for i, m := range sent {
		if got := sendAs(t, s, m.raw, m.rcpt); got != m.want {
			t.Errorf("message %d to %s: %s, want %s", i, m.rcpt, got, m.want)
		}
	}
	do("see the verdicts", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#history tbody tr[data-id]")))
	rows, spam, ham := count("#history tbody tr[data-id]"), count("#history tbody tr[data-id] .v-spam"), count("#history tbody tr[data-id] .v-ham")
	if rows != len(sent) || spam != 5 || ham != 5 {
		t.Fatalf("the history shows %d messages (%d spam, %d ham); want %d, 5 and 5", rows, spam, ham, len(sent))
	}
	shot("history")

	// Open the held-out spam, and learn it as ham.
	do("open a message", chromedp.Click(chromedp.CSS("#history tbody tr[data-id]:first-child td a")),
		chromedp.WaitVisible(chromedp.ID("now-global")))
	if v := text("#now-global .verdict"); v != "spam" {
		t.Fatalf("the newest message is %s now, want spam", v)
	}
	scoreBefore := text("#now-global .score")
	shot("message")
	do("learn it as ham", chromedp.Click(chromedp.ID("learn-ham-global")), chromedp.WaitVisible(chromedp.CSS(".notice")))
	notice, scoreAfter, trainedAs := text(".notice"), text("#now-global .score"), text("#now-global .trained")
	if !strings.Contains(notice, "Learned as ham for the global model") || trainedAs != "ham" {
		t.Errorf("after learning: notice %q, trained as %q", notice, trainedAs)
	}
	b1, _ := strconv.ParseFloat(scoreBefore, 64)
	a1, _ := strconv.ParseFloat(scoreAfter, 64)
	if !(a1 < b1) {
		t.Errorf("the score went from %s to %s on learning the message as ham; want it lower", scoreBefore, scoreAfter)
	}
	after := globalCounts(t, ctx, api)
	if after[filter.Ham] != before[filter.Ham]+1 || after[filter.Spam] != before[filter.Spam] {
		t.Errorf("the global model holds %v messages after learning one as ham, %v before", after, before)
	}
	if v, err := api.Classify(ctx, "", heldSpam, 0); err != nil || v.TrainedAs != filter.Ham {
		t.Errorf("the API says the message is trained as %q (%v), want ham", v.TrainedAs, err)
	}

	// The status page counts what happened.
	do("status", chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.ID("health")))
	if h := text("#health"); h != "ok" {
		t.Errorf("health %q, want ok", h)
	}
	if got := text("#verdict-spam .total"); got != "5" {
		t.Errorf("the status page counts %q spam, want 5", got)
	}
	shot("status")

	// The configuration in force names the token's file, never the token.
	do("configuration", chromedp.Navigate(base+"/console/config"), chromedp.WaitVisible(chromedp.ID("config")))
	if cfg := text("#config"); strings.Contains(cfg, token) || !strings.Contains(cfg, filepath.Join(dir, "token")) ||
		!strings.Contains(cfg, `users = "localpart"`) || !strings.Contains(cfg, "min_trained = 10") {
		t.Errorf("the configuration page shows\n%s", cfg)
	}
	t.Logf("screenshots in %s", shots)
}

// globalCounts returns the global model's messages by class.
func globalCounts(t *testing.T, ctx context.Context, api *control.Client) map[string]uint64 {
	t.Helper()
	st, err := api.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range st.Users {
		if u.User == "" {
			return u.Messages
		}
	}
	return map[string]uint64{}
}

// TestHistoryPersists checks that the daemon keeps its verdicts across a
// restart, in a file only it reads, and serves the console at /console/
// on the API's TCP listener beside the API.
func TestHistoryPersists(t *testing.T) {
	dir := t.TempDir()
	token := "history-test-token-0123456789"
	write(t, filepath.Join(dir, "token"), token+"\n")
	apiTCP := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	path := filepath.Join(dir, "config.toml")
	write(t, path, fmt.Sprintf(`[store]
dir = %q
[milter]
listen = "unix:%s"
[api]
socket = %q
tcp = %q
token_file = %q
[metrics]
listen = ""
[history]
size = 10
[console]
enabled = true
`, filepath.Join(dir, "db"), filepath.Join(dir, "milter.sock"), filepath.Join(dir, "api.sock"), apiTCP, filepath.Join(dir, "token")))
	ctx := context.Background()
	start := func() (*control.Client, func() error) {
		_, _, stop := runDaemon(t, options{config: path}, nil)
		api, err := control.NewClient("unix:"+filepath.Join(dir, "api.sock"), "")
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the API", func() bool { return api.Health(ctx) == nil })
		return api, stop
	}
	api, stop := start()
	spam, _ := trainSample(t, api)
	s := milterSession(t, filepath.Join(dir, "milter.sock"))
	startMessage(t, s, spam)
	if got := endMessage(t, s); got != "accept YES" {
		t.Fatalf("the spam: %s", got)
	}
	s.Close()
	h, err := api.History(ctx, control.HistoryQuery{})
	if err != nil || len(h.Entries) != 1 || h.Entries[0].Verdict != "spam" || !h.Entries[0].Held || h.Size != 10 {
		t.Fatalf("history %+v, %v", h, err)
	}
	// The console beside the API on its TCP listener; the API still
	// wants its token there.
	resp, err := http.Get("http://" + apiTCP + "/console/login")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the console on the API's listener: %v %v", resp, err)
	}
	resp.Body.Close()
	tcp, _ := control.NewClient("tcp://"+apiTCP, "")
	if _, err := tcp.History(ctx, control.HistoryQuery{}); err == nil {
		t.Error("/v1/history over TCP without the token")
	}
	tcp, _ = control.NewClient("tcp://"+apiTCP, token)
	if h, err := tcp.History(ctx, control.HistoryQuery{}); err != nil || len(h.Entries) != 1 {
		t.Errorf("/v1/history over TCP with the token: %v %v", h, err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "db", "history.jsonl")
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("history file: %v, mode %v", err, fi.Mode().Perm())
	}

	api, _ = start()
	h, err = api.History(ctx, control.HistoryQuery{})
	if err != nil || len(h.Entries) != 1 || h.Entries[0].ID != 1 || h.Entries[0].Held || h.Entries[0].Sender != "sender@example.net" {
		t.Fatalf("after a restart: %+v, %v", h, err)
	}
	s = milterSession(t, filepath.Join(dir, "milter.sock"))
	defer s.Close()
	startMessage(t, s, spam)
	endMessage(t, s)
	if h, _ := api.History(ctx, control.HistoryQuery{}); len(h.Entries) != 2 || h.Entries[0].ID != 2 {
		t.Errorf("the next verdict after a restart: %+v", h.Entries)
	}
}

// TestOpenHistory checks what the daemon does with the file of the last
// run's history: reads a history, starts anew from a missing or empty
// one, and leaves alone, unsaved over, a file that is something else.
func TestOpenHistory(t *testing.T) {
	saved := filepath.Join(t.TempDir(), "saved.jsonl")
	h, err := history.New(history.Options{Size: 10})
	if err != nil {
		t.Fatal(err)
	}
	h.Add(history.Entry{Verdict: "spam", Action: "accept", Recipients: []string{}}, nil)
	if _, err := h.Save(saved); err != nil {
		t.Fatal(err)
	}
	savedBytes, err := os.ReadFile(saved)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		content  []byte // nil: no file
		entries  int
		saved    bool
		warnings string
	}{
		{"a history", savedBytes, 1, true, ""},
		{"no file", nil, 0, true, ""},
		{"empty", []byte{}, 0, true, "not read"},
		{"another file", []byte("[store]\ndir = \"/var/lib/spamd\"\n"), 0, false, "left as it is"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "history.jsonl")
			if tt.content != nil {
				write(t, path, string(tt.content))
			}
			var log bytes.Buffer
			h, file, err := openHistory(config.History{Size: 10, Persist: true, File: path}, slog.New(slog.NewTextHandler(&log, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if n := len(h.List(history.Query{})); n != tt.entries || (file != "") != tt.saved {
				t.Errorf("%d entries, saved to %q; want %d, saved %v", n, file, tt.entries, tt.saved)
			}
			if tt.warnings != "" && !strings.Contains(log.String(), tt.warnings) {
				t.Errorf("the log does not say %q:\n%s", tt.warnings, log.String())
			}
			if file == "" && tt.content != nil {
				h.Add(history.Entry{Verdict: "ham"}, nil)
				if got, _ := os.ReadFile(path); !bytes.Equal(got, tt.content) {
					t.Errorf("the file was changed: %q", got)
				}
			}
		})
	}
	if h, file, err := openHistory(config.History{Size: 10, Persist: false, File: saved}, slog.New(slog.DiscardHandler)); err != nil || h == nil || file != "" {
		t.Errorf("without persist: %v %q %v", h, file, err)
	}
	if h, _, err := openHistory(config.History{Size: 0}, slog.New(slog.DiscardHandler)); err != nil || h != nil {
		t.Errorf("size 0: %v %v", h, err)
	}
}
