package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gomilter "github.com/emersion/go-milter"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/filter"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestShippedConfigLoads(t *testing.T) {
	cfg, _, err := load("../../config.toml", options{}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	fc, err := filterConfig(cfg.Filter)
	if err != nil {
		t.Fatal(err)
	}
	def := filter.DefaultConfig()
	for _, k := range filter.Keys() {
		got, _ := fc.Get(k)
		want, _ := def.Get(k)
		if got != want {
			t.Errorf("[filter] %s = %s, want the default %s", k, got, want)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	for _, tt := range []struct {
		name  string
		doc   string
		opts  options
		check func(t *testing.T, c config.Config)
		err   string
	}{
		{name: "filter settings", doc: "[filter]\nalpha = 0.25\nstem = false\n", check: func(t *testing.T, c config.Config) {
			fc, err := filterConfig(c.Filter)
			if err != nil {
				t.Fatal(err)
			}
			if a, _ := fc.Get("alpha"); a != "0.25" {
				t.Errorf("alpha %s", a)
			}
			if s, _ := fc.Get("stem"); s != "false" {
				t.Errorf("stem %s", s)
			}
		}},
		{name: "unknown filter key", doc: "[filter]\nalpah = 0.25\n", err: `[filter] alpah: bad setting: unknown key "alpah"`},
		{name: "bad filter value", doc: "[filter]\nprior = \"guess\"\n", err: "[filter] prior"},
		{name: "unknown key", doc: "[milter]\nlisten_on = \"x\"\n", err: `unknown key "milter.listen_on"`},
		{name: "flags override the file",
			doc:  "[store]\ndir = \"/var/lib/other\"\n[milter]\nlisten = \"tcp://127.0.0.1:1\"\n",
			opts: options{db: "/srv/spamd", milter: "unix:/run/m.sock", api: "unix:/run/a.sock"},
			check: func(t *testing.T, c config.Config) {
				if c.Store.Dir != "/srv/spamd" || c.Milter.Listen != "unix:/run/m.sock" || c.API.Socket != "/run/a.sock" {
					t.Errorf("got %+v %+v %+v", c.Store, c.Milter.Listen, c.API)
				}
			}},
		{name: "api over tcp", doc: "[api]\ntoken_file = \"/etc/spamd/token\"\n", opts: options{api: "tcp://127.0.0.1:11333"},
			check: func(t *testing.T, c config.Config) {
				if c.API.TCP != "127.0.0.1:11333" {
					t.Errorf("api tcp %q", c.API.TCP)
				}
			}},
		{name: "api over tcp needs a token", opts: options{api: "tcp://127.0.0.1:11333"}, err: "api.token_file"},
		{name: "bad milter flag", opts: options{milter: "127.0.0.1:11332"}, err: "milter.listen"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			write(t, path, tt.doc)
			c, _, err := load(path, tt.opts, env(nil))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestConfigPath(t *testing.T) {
	if _, err := os.Stat(config.DefaultPath); err == nil {
		t.Skipf("%s exists on this machine", config.DefaultPath)
	}
	for _, tt := range []struct {
		name string
		o    options
		env  map[string]string
		want string
	}{
		{"flag", options{config: "/a.toml"}, map[string]string{"SPAMD_CONFIG": "/b.toml"}, "/a.toml"},
		{"environment", options{}, map[string]string{"SPAMD_CONFIG": "/b.toml"}, "/b.toml"},
		{"none", options{}, nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := configPath(tt.o, env(tt.env)); err != nil || got != tt.want {
				t.Errorf("configPath = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestStoreNotWritable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	write(t, file, "")
	c := config.Default(env(nil)).Store
	c.Dir = filepath.Join(file, "db")
	_, err := openStore(context.Background(), c, nil)
	if err == nil || !strings.Contains(err.Error(), "--db DIR") {
		t.Errorf("error %v does not suggest --db", err)
	}
}

// runDaemon runs the daemon in-process until the test ends, and returns
// its log and a function that stops it and returns run's error.
func runDaemon(t *testing.T, o options, e map[string]string) (*lockedBuffer, chan<- os.Signal, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &lockedBuffer{}
	hup := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() { done <- run(ctx, o, env(e), logs, hup) }()
	// A test may stop the daemon on a goroutine of its own while its
	// cleanup stops it too: once makes the second wait for the first.
	var once sync.Once
	var err error
	stop := func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("spamd's log:\n%s", logs.String())
		}
	})
	return logs, hup, stop
}

func TestRunWithoutConfiguration(t *testing.T) {
	if _, err := os.Stat(config.DefaultPath); err == nil {
		t.Skipf("%s exists on this machine", config.DefaultPath)
	}
	for _, addr := range []string{"127.0.0.1:11332", "127.0.0.1:11334"} {
		if ln, err := net.Listen("tcp", addr); err != nil {
			t.Skipf("%s is in use", addr)
		} else {
			ln.Close()
		}
	}
	state, runtime := t.TempDir(), t.TempDir()
	logs, _, stop := runDaemon(t, options{}, map[string]string{"STATE_DIRECTORY": state, "RUNTIME_DIRECTORY": runtime})
	api, err := control.NewClient("unix:"+filepath.Join(runtime, "api.sock"), "")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the API", func() bool { return api.Health(context.Background()) == nil })
	if fi, err := os.Stat(filepath.Join(runtime, "api.sock")); err != nil || fi.Mode().Perm() != 0o660 {
		t.Errorf("api.sock: %v, mode %v; want 0660", err, fi.Mode().Perm())
	}
	c, err := net.Dial("tcp", "127.0.0.1:11332")
	if err != nil {
		t.Fatalf("the milter does not listen on the default address: %v", err)
	}
	c.Close()
	if _, err := os.Stat(filepath.Join(state, "MANIFEST")); err != nil {
		t.Errorf("no store in $STATE_DIRECTORY: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "running on the defaults") {
		t.Error("the log does not say the defaults are used")
	}
}

// trainSample trains the repository's sample through api.
func trainSample(t *testing.T, api *control.Client) (spam, ham []byte) {
	t.Helper()
	var items []control.Item
	for _, class := range []string{filter.Spam, filter.Ham} {
		dir := filepath.Join("../../testdata/sample", class)
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range ents {
			raw := readFile(t, filepath.Join(dir, e.Name()))
			if i == len(ents)-1 {
				if class == filter.Spam {
					spam = raw
				} else {
					ham = raw
				}
				continue
			}
			items = append(items, control.Item{Class: class, Message: raw})
		}
	}
	if _, err := api.Train(context.Background(), "", items); err != nil {
		t.Fatal(err)
	}
	return stripFrom(spam), stripFrom(ham)
}

// milterSession opens a milter session on the unix socket sock.
func milterSession(t *testing.T, sock string) *gomilter.ClientSession {
	t.Helper()
	c := gomilter.NewClientWithOptions("unix", sock, gomilter.ClientOptions{
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
		ActionMask: gomilter.OptAddHeader | gomilter.OptChangeHeader | gomilter.OptQuarantine,
	})
	s, err := c.Session()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Conn("client.example.net", gomilter.FamilyInet, 40000, "198.51.100.7"); err != nil {
		t.Fatal(err)
	}
	return s
}

// startMessage sends a message up to its end.
func startMessage(t *testing.T, s *gomilter.ClientSession, raw []byte) {
	t.Helper()
	if err := sendMessage(s, raw); err != nil {
		t.Fatal(err)
	}
}

// sendMessage sends a message up to its end, for goroutines that cannot
// fail the test themselves.
func sendMessage(s *gomilter.ClientSession, raw []byte) error {
	head, body, _ := strings.Cut(strings.ReplaceAll(string(raw), "\r\n", "\n"), "\n\n")
	if _, err := s.Mail("sender@example.net", nil); err != nil {
		return err
	}
	if _, err := s.Rcpt("user@test.example", nil); err != nil {
		return err
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
			return err
		}
	}
	if _, err := s.HeaderEnd(); err != nil {
		return err
	}
	body = strings.ReplaceAll(body, "\n", "\r\n")
	for len(body) > 0 {
		n := min(len(body), gomilter.MaxBodyChunk)
		if _, err := s.BodyChunk([]byte(body[:n])); err != nil {
			return err
		}
		body = body[n:]
	}
	return nil
}

// endMessage ends a message and returns the answer: "accept" with the
// X-Spam-Flag added, or the SMTP reply.
func endMessage(t *testing.T, s *gomilter.ClientSession) string {
	t.Helper()
	got, err := finishMessage(s)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// finishMessage is endMessage for goroutines.
func finishMessage(s *gomilter.ClientSession) (string, error) {
	mods, act, err := s.End()
	if err != nil {
		return "", err
	}
	if act.Code == gomilter.ActReplyCode {
		return fmt.Sprintf("%d %s", act.SMTPCode, act.SMTPText), nil
	}
	for _, m := range mods {
		if m.Code == gomilter.ActAddHeader && m.HeaderName == "X-Spam-Flag" {
			return "accept " + m.HeaderValue, nil
		}
	}
	return fmt.Sprintf("%c", act.Code), nil
}

// TestReloadAndStop checks that the configuration reloads, from its file
// and on SIGHUP, without dropping an open MTA connection; that a bad
// configuration is logged and the running one kept; that the metrics
// count what happened; and that stopping lets a message in flight finish.
func TestReloadAndStop(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	doc := func(actions string) string {
		return fmt.Sprintf("[store]\ndir = %q\n[milter]\nlisten = \"unix:%s\"\n[api]\nsocket = %q\n[metrics]\nlisten = %q\n[actions]\n%s\n",
			filepath.Join(dir, "db"), filepath.Join(dir, "milter.sock"), filepath.Join(dir, "api.sock"), metricsAddr, actions)
	}
	write(t, path, doc(""))
	logs, hup, stop := runDaemon(t, options{config: path}, nil)
	api, err := control.NewClient("unix:"+filepath.Join(dir, "api.sock"), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	waitFor(t, 10*time.Second, "the API", func() bool { return api.Health(ctx) == nil })
	spam, _ := trainSample(t, api)
	s := milterSession(t, filepath.Join(dir, "milter.sock"))
	defer s.Close()
	message := func() string {
		startMessage(t, s, spam)
		return endMessage(t, s)
	}
	reloaded := func(n int) {
		t.Helper()
		waitFor(t, 10*time.Second, "a reload", func() bool { return strings.Count(logs.String(), "configuration reloaded") == n })
	}

	if got := message(); got != "accept YES" {
		t.Fatalf("before reloading: %s", got)
	}
	replaceFile(t, path, doc("reject = true\nreject_score = 0.0\nreject_text = \"Go away\""))
	reloaded(1)
	if want := `changed="[actions.reject actions.reject_score actions.reject_text]"`; !strings.Contains(logs.String(), want) {
		t.Errorf("the reload does not say what changed (%s):\n%s", want, logs.String())
	}
	if got := message(); got != "550 5.7.1 Go away" {
		t.Errorf("after saving the file, on the same connection: %s", got)
	}
	replaceFile(t, path, doc("reject = maybe"))
	waitFor(t, 10*time.Second, "the bad configuration to be refused", func() bool {
		return strings.Contains(logs.String(), "configuration not reloaded")
	})
	if got := message(); got != "550 5.7.1 Go away" {
		t.Errorf("after a bad configuration: %s", got)
	}
	// Writing into the file, rather than replacing it, is seen too; and
	// SIGHUP reloads.
	write(t, path, doc("reject = true\nreject_score = 0.0\nreject_text = \"Go away\"\nsubject_tag = \"[SPAM]\""))
	reloaded(2)
	hup <- os.Interrupt
	reloaded(3)

	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`spamd_messages_total{action="accept",verdict="spam"} 1`,
		`spamd_messages_total{action="reject",verdict="spam"} 2`,
		`spamd_config_reloads_total{result="ok"} 3`,
		`spamd_config_reloads_total{result="failed"} 1`,
		`spamd_trained_total{class="spam"} 19`,
		`spamd_model_messages{class="ham"} 19`,
		`spamd_milter_connections 1`,
		`spamd_milter_latency_seconds_count 3`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if resp, err := http.Get("http://" + metricsAddr + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %v %v", resp, err)
	}
	// Every message so far was decided spam, so whatever ham the filter
	// reckons was among them it reckons a false positive.
	st, err := api.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := st.Classified; c == nil || c.Messages != 3 || !(c.ExpectedHam > 0 && c.ExpectedHam < 3) || c.ExpectedFalsePositives != c.ExpectedHam {
		t.Errorf("stats: classified %+v, want 3 messages, all decided spam", c)
	}
	if !strings.Contains(string(body), "spamd_expected_false_positives_total") {
		t.Error("metrics lack spamd_expected_false_positives_total")
	}

	// Stopping waits for the message in flight.
	startMessage(t, s, spam)
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	time.Sleep(100 * time.Millisecond)
	if got := endMessage(t, s); got != "550 5.7.1 Go away" {
		t.Errorf("the message in flight while stopping: %s", got)
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return")
	}
	if c, err := net.Dial("unix", filepath.Join(dir, "milter.sock")); err == nil {
		c.Close()
		t.Error("the milter still listens after stopping")
	}
}

// TestStaleSocket checks that a socket left by a crash is replaced and a
// live one is not taken over.
func TestStaleSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := listen("unix:"+sock, 0o660); err == nil || !strings.Contains(err.Error(), "another process") {
		t.Errorf("a live socket was taken over: %v", err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	ln2, err := listen("unix:"+sock, 0o660)
	if err != nil {
		t.Fatalf("a stale socket was not replaced: %v", err)
	}
	ln2.Close()
}

// TestMilterDocSnippets checks the addresses the documentation gives for
// the default milter address.
func TestMilterDocSnippets(t *testing.T) {
	def := config.Default(env(nil)).Milter.Listen
	_, hostport, err := config.SplitAddr(def)
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(hostport)
	for _, tt := range []struct{ doc, want string }{
		{"../../docs/postfix.md", "smtpd_milters = inet:" + hostport},
		{"../../docs/sendmail.md", "S=inet:" + port + "@" + host},
	} {
		t.Run(filepath.Base(tt.doc), func(t *testing.T) {
			if !strings.Contains(string(readFile(t, tt.doc)), tt.want) {
				t.Errorf("%s does not say %q for the default %s", tt.doc, tt.want, def)
			}
		})
	}
}

// TestPrefsThroughAPI sets preferences in the file and through the API of
// a running daemon, and checks that each applies to the next message,
// that the API's are kept in prefs.json, and that a reload names the
// preference that changed.
func TestPrefsThroughAPI(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	doc := func(required string) string {
		return fmt.Sprintf("[store]\ndir = %q\n[milter]\nlisten = \"unix:%s\"\n[api]\nsocket = %q\n[metrics]\nlisten = \"\"\n"+
			"[prefs.user.\"user@test.example\"]\nrequired = %s\n",
			filepath.Join(dir, "db"), filepath.Join(dir, "milter.sock"), filepath.Join(dir, "api.sock"), required)
	}
	write(t, path, doc("1000.0"))
	logs, _, _ := runDaemon(t, options{config: path}, nil)
	api, err := control.NewClient("unix:"+filepath.Join(dir, "api.sock"), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	waitFor(t, 10*time.Second, "the API", func() bool { return api.Health(ctx) == nil })
	spam, _ := trainSample(t, api)
	s := milterSession(t, filepath.Join(dir, "milter.sock"))
	defer s.Close()
	message := func() string {
		startMessage(t, s, spam)
		return endMessage(t, s)
	}
	if got := message(); got != "accept NO" {
		t.Fatalf("with the file's required score far above the spam's: %s", got)
	}
	// The sender is sender@example.net.
	if _, err := api.SetPrefs(ctx, "user@test.example", "", config.Pref{Deny: []string{"example.net"}}); err != nil {
		t.Fatal(err)
	}
	if got := message(); got != "accept YES" {
		t.Errorf("with the sender's domain denied through the API: %s", got)
	}
	p, err := api.SetPrefs(ctx, "", "test.example", config.Pref{Action: "reject"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Action != "reject" || p.Source["action"] != "domain" {
		t.Errorf("the domain's preferences: %+v", p)
	}
	if got := message(); got != "550 5.7.1 Message rejected as spam" {
		t.Errorf("with the domain's action reject: %s", got)
	}
	kept, err := os.ReadFile(filepath.Join(dir, "db", "prefs.json"))
	if err != nil || !strings.Contains(string(kept), `"example.net"`) || !strings.Contains(string(kept), `"reject"`) {
		t.Errorf("prefs.json: %s %v", kept, err)
	}
	got, err := api.Prefs(ctx, "user@test.example", "")
	if err != nil || got.Required != 1000 || got.Source["required"] != "user" {
		t.Errorf("the user's preferences: %+v %v", got, err)
	}
	replaceFile(t, path, doc("2000.0"))
	waitFor(t, 10*time.Second, "a reload", func() bool {
		return strings.Contains(logs.String(), `changed="[prefs.user.\"user@test.example\".required]"`)
	})
	if got, _ := api.Prefs(ctx, "user@test.example", ""); got.Required != 2000 || got.Action != "reject" {
		t.Errorf("after the reload: %+v", got)
	}
}
