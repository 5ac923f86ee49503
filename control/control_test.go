package control

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/history"
	"github.com/spamd/spamd/prefs"
	"github.com/spamd/spamd/prefs/prefstest"
	"github.com/spamd/spamd/relabel"
	"github.com/spamd/spamd/reportq"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/tokenize"
)

func readDir(t *testing.T, dir string) [][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// counter is an Observer that counts.
type counter struct {
	mu       sync.Mutex
	requests map[string]int
	trained  map[string]int
}

func (c *counter) Request(endpoint string, status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests[fmt.Sprintf("%s %d", endpoint, status)]++
}

func (c *counter) Trained(class string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trained[class]++
}

// fixture is a server on a unix socket over a memory store, with the
// sample's spam and ham.
type fixture struct {
	f         *filter.Filter
	sock      string
	client    *Client
	obs       *counter
	spam, ham [][]byte
}

func newFixture(t *testing.T, o Options) *fixture {
	t.Helper()
	f, err := filter.New(store.NewMemory(), filter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// Reachable by the unprivileged helper process.
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	sock := filepath.Join(dir, "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	obs := &counter{requests: map[string]int{}, trained: map[string]int{}}
	o.Filter = func() *filter.Filter { return f }
	o.Observer = obs
	srv := &http.Server{Handler: NewServer(o).Handler(), ConnContext: ConnContext}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	c, err := NewClient("unix:"+sock, "")
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{f: f, sock: sock, client: c, obs: obs,
		spam: readDir(t, "../testdata/sample/spam"), ham: readDir(t, "../testdata/sample/ham")}
}

// trainAll trains every sample message but the last of each class for
// user through the client.
func (fx *fixture) trainAll(t *testing.T, user string) {
	t.Helper()
	var items []Item
	for _, m := range fx.spam[:len(fx.spam)-1] {
		items = append(items, Item{Class: filter.Spam, Message: m})
	}
	for _, m := range fx.ham[:len(fx.ham)-1] {
		items = append(items, Item{Class: filter.Ham, Message: m})
	}
	res, err := fx.client.Train(context.Background(), user, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if !r.Changed || r.Error != "" {
			t.Fatalf("item %d: %+v", i, r)
		}
	}
}

// post sends a raw request over the socket, as curl would, and decodes
// the JSON answer if there is one.
func (fx *fixture) post(t *testing.T, path string, body []byte) (int, map[string]any) {
	t.Helper()
	hc := http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", fx.sock)
	}}}
	resp, err := hc.Post("http://spamd"+path, "message/rfc822", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out) // a 404 is not JSON
	return resp.StatusCode, out
}

// TestHealthUndertrained checks that /healthz says degraded, and why,
// while the global model is under min_trained, and ok once it is not.
func TestHealthUndertrained(t *testing.T) {
	fx := newFixture(t, Options{})
	health := func() map[string]any {
		hc := http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", fx.sock)
		}}}
		resp, err := hc.Get("http://spamd/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("status %d: mail is still classified, so the daemon is not down", resp.StatusCode)
		}
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	got := health()
	if got["status"] != "degraded" || !strings.Contains(fmt.Sprint(got["reason"]), "0 spam and 0 ham messages, fewer than min_trained (10)") {
		t.Errorf("empty model: %v", got)
	}
	if err := fx.client.Health(context.Background()); err != nil {
		t.Errorf("Client.Health of a degraded daemon: %v", err)
	}
	fx.trainAll(t, "bob")
	if got := health(); got["status"] != "degraded" {
		t.Errorf("only a user's model trained: %v", got)
	}
	fx.trainAll(t, "")
	if got := health(); got["status"] != "ok" || got["reason"] != nil {
		t.Errorf("trained: %v", got)
	}
}

func TestTrainAndClassify(t *testing.T) {
	fx := newFixture(t, Options{})
	ctx := context.Background()
	if err := fx.client.Health(ctx); err != nil {
		t.Fatal(err)
	}
	fx.trainAll(t, "")
	for _, tt := range []struct {
		name, verdict string
		raw           []byte
	}{{"spam", "spam", fx.spam[len(fx.spam)-1]}, {"ham", "ham", fx.ham[len(fx.ham)-1]}} {
		t.Run(tt.name, func(t *testing.T) {
			v, err := fx.client.Classify(ctx, "", tt.raw, 3)
			if err != nil {
				t.Fatal(err)
			}
			if v.Verdict != tt.verdict || v.TrainedAs != "" || len(v.Toward[filter.Spam]) != 3 || len(v.Toward[filter.Ham]) != 3 {
				t.Errorf("verdict %+v, want %s with 3 tokens each way", v, tt.verdict)
			}
			if d := tokenize.Digest(tt.raw); v.Digest != hex.EncodeToString(d[:]) {
				t.Errorf("digest %s, want %x", v.Digest, d)
			}
		})
	}
	if fx.obs.trained[filter.Spam] != len(fx.spam)-1 || fx.obs.trained[filter.Ham] != len(fx.ham)-1 {
		t.Errorf("trained counts %v", fx.obs.trained)
	}
	st, err := fx.client.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Users) != 1 || st.Users[0].User != "" || st.Users[0].Messages[filter.Spam] != uint64(len(fx.spam)-1) {
		t.Errorf("stats %+v", st)
	}
}

func TestLearnForgetEndpoints(t *testing.T) {
	fx := newFixture(t, Options{})
	fx.trainAll(t, "")
	msg := fx.ham[len(fx.ham)-1]
	for _, tt := range []struct {
		name, path string
		status     int
		want       map[string]any
	}{
		{"learn", "/v1/learn?class=spam", 200, map[string]any{"changed": true}},
		{"learn again", "/v1/learn?class=spam", 200, map[string]any{"changed": false}},
		{"relabel", "/v1/learn?class=ham", 200, map[string]any{"changed": true, "prev": "spam"}},
		{"forget", "/v1/forget", 200, map[string]any{"changed": true, "prev": "ham"}},
		{"forget again", "/v1/forget", 200, map[string]any{"changed": false}},
		{"learn without class", "/v1/learn", 400, nil},
		{"unknown class", "/v1/learn?class=phish", 400, nil},
		{"invalid user", "/v1/learn?class=spam&user=../etc", 400, nil},
		{"bad explain", "/v1/classify?explain=x", 400, nil},
		{"bad decide", "/v1/classify?decide=yes", 400, nil},
		{"sender without decide", "/v1/classify?sender=a@example.org", 400, nil},
		{"decide without preferences kept", "/v1/classify?decide=1", 404, nil},
		{"unknown endpoint", "/v1/relearn", 404, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, out := fx.post(t, tt.path, msg)
			if status != tt.status {
				t.Fatalf("status %d (%v), want %d", status, out, tt.status)
			}
			for k, v := range tt.want {
				if out[k] != v {
					t.Errorf("%s = %v, want %v (%v)", k, out[k], v, out)
				}
			}
			if tt.status != 200 && tt.status != 404 && out["error"] == "" {
				t.Errorf("no error text: %v", out)
			}
		})
	}
}

func TestTrainBatch(t *testing.T) {
	fx := newFixture(t, Options{})
	ctx := context.Background()
	items := []Item{
		{Class: filter.Spam, Message: fx.spam[0]},
		{Class: filter.Ham, Message: []byte("\x00\x01 not a message")},
		{Class: filter.Ham, Message: fx.ham[0]},
		{Class: "", Message: fx.ham[1]},
	}
	res, err := fx.client.Train(ctx, "bob@example.org", items)
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Changed || res[1].Error == "" || res[1].Changed || !res[2].Changed || res[3].Changed || res[3].Error != "" {
		t.Errorf("results %+v", res)
	}
	// A message of an unknown class is refused on its own.
	res, err = fx.client.Train(ctx, "bob@example.org", []Item{{Class: filter.Spam, Message: fx.spam[1]}, {Class: "phish", Message: fx.spam[2]}})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Changed || res[1].Changed || !strings.Contains(res[1].Error, "unknown class") {
		t.Errorf("results %+v", res)
	}
	if v, err := fx.client.Classify(ctx, "bob@example.org", fx.spam[2], 0); err != nil || v.TrainedAs != "" {
		t.Errorf("the refused message: %+v, %v", v, err)
	}
}

func TestMessageTooLarge(t *testing.T) {
	fx := newFixture(t, Options{})
	_, err := fx.client.Classify(context.Background(), "", bytes.Repeat([]byte("a"), int(DefaultLimits.MaxMessage)+1), 0)
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("got %v, want 413", err)
	}
}

// TestTrainingTakesTurns checks the bound on training requests at once:
// one more waits its turn, is answered 503 with Retry-After when the turn
// does not come, and the Client makes it again after that wait.
func TestTrainingTakesTurns(t *testing.T) {
	f, err := filter.New(store.NewMemory(), filter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	obs := &counter{requests: map[string]int{}, trained: map[string]int{}}
	lim := Limits{MaxRequests: 2, MaxTraining: 1, QueueWait: 100 * time.Millisecond}
	srv := NewServer(Options{Filter: func() *filter.Filter { return f }, Observer: obs, Limits: lim})
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := HTTPServer(srv.Handler(), srv.Limits, nil)
	go hs.Serve(Listener(ln, srv.Limits))
	t.Cleanup(func() { hs.Close() })
	spam := readDir(t, "../testdata/sample/spam")
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("still waiting for %s", what)
			}
		}
	}
	answered := func(status int) int {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return obs.requests[fmt.Sprintf("train %d", status)]
	}

	// A batch whose body stays open holds the one training turn.
	pr, pw := io.Pipe()
	held := make(chan int, 1)
	go func() {
		status, _, _, _ := post(sock, "/v1/train?user=alice", pr)
		held <- status
	}()
	if _, err := io.WriteString(pw, `{"items":[`); err != nil {
		t.Fatal(err)
	}
	waitFor("the first batch to take its turn", func() bool { return len(srv.training) == 1 })

	batch, _ := json.Marshal(TrainRequest{Items: []Item{{Class: filter.Spam, Message: spam[0]}}})
	status, h, b, err := post(sock, "/v1/train?user=bob", bytes.NewReader(batch))
	if err != nil || status != http.StatusServiceUnavailable || h.Get("Retry-After") != "1" {
		t.Fatalf("a second batch: %d, Retry-After %q, %v: %s; want 503 and to try again in 1 s", status, h.Get("Retry-After"), err, b)
	}

	c, err := NewClient("unix:"+sock, "")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		res []TrainResult
		err error
	}
	retried := make(chan result, 1)
	go func() {
		res, err := c.Train(context.Background(), "bob", []Item{{Class: filter.Spam, Message: spam[0]}})
		retried <- result{res, err}
	}()
	// The client's first attempt is turned away too; then the turn comes.
	waitFor("the client's first attempt to be answered", func() bool { return answered(http.StatusServiceUnavailable) == 2 })
	if _, err := io.WriteString(pw, `]}`); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if status := <-held; status != http.StatusOK {
		t.Errorf("the first batch: %d", status)
	}
	r := <-retried
	if r.err != nil || len(r.res) != 1 || !r.res[0].Changed {
		t.Fatalf("the client's batch: %+v, %v; want it trained once its turn came", r.res, r.err)
	}
	if n := answered(http.StatusServiceUnavailable); n != 2 {
		t.Errorf("%d answers 503, want 2", n)
	}
}

func TestBearerToken(t *testing.T) {
	f, err := filter.New(store.NewMemory(), filter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: NewServer(Options{Filter: func() *filter.Filter { return f }, Token: "s3cret-token-0123456789"}).Handler(), ConnContext: ConnContext}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	ham := readDir(t, "../testdata/sample/ham")[0]
	for _, tt := range []struct {
		name, token string
		status      int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"wrong token", "s3cret-token-0123456780", http.StatusUnauthorized},
		{"right token", "s3cret-token-0123456789", http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewClient("tcp://"+ln.Addr().String(), tt.token)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Health(context.Background()); err != nil {
				t.Errorf("health needs no token: %v", err)
			}
			_, err = c.Train(context.Background(), "", []Item{{Class: filter.Ham, Message: ham}})
			var e *Error
			switch {
			case tt.status == http.StatusOK && err != nil:
				t.Errorf("train: %v", err)
			case tt.status != http.StatusOK && (!errors.As(err, &e) || e.Status != tt.status):
				t.Errorf("train: %v, want %d", err, tt.status)
			}
		})
	}
}

func TestNewClientAddresses(t *testing.T) {
	for _, tt := range []struct {
		addr string
		ok   bool
	}{
		{"unix:/run/spamd/api.sock", true},
		{"/run/spamd/api.sock", true},
		{"tcp://127.0.0.1:11333", true},
		{"http://[::1]:11333", true},
		{"unix:api.sock", false},
		{"127.0.0.1:11333", false},
		{"tcp://127.0.0.1", false},
	} {
		t.Run(tt.addr, func(t *testing.T) {
			if _, err := NewClient(tt.addr, ""); (err == nil) != tt.ok {
				t.Errorf("NewClient(%q): %v", tt.addr, err)
			}
		})
	}
}

// TestPeerCredentials runs requests from an unprivileged process (uid
// 65534, "nobody"), which the kernel names to the server.
func TestPeerCredentials(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a process as another uid")
	}
	nobody := lookupUID(65534)
	if nobody == "" {
		t.Skip("no account with uid 65534")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name      string
		admins    []string
		reporters []string
		user      string
		status    int
		report    int
		classify  int // with user's model
		users     int // models in /v1/stats
		prefs     int // setting and reading user's preferences
	}{
		{"own model", nil, nil, nobody, http.StatusOK, http.StatusAccepted, http.StatusOK, 2, http.StatusOK},
		{"another user's model", nil, nil, "bob@example.org", http.StatusForbidden, http.StatusForbidden, http.StatusForbidden, 2, http.StatusForbidden},
		{"the global model", nil, nil, "", http.StatusForbidden, http.StatusBadRequest, http.StatusOK, 2, http.StatusBadRequest},
		{"admin: another user's model", []string{nobody}, nil, "bob@example.org", http.StatusOK, http.StatusAccepted, http.StatusOK, 3, http.StatusOK},
		{"admin: the global model", []string{nobody}, nil, "", http.StatusOK, http.StatusBadRequest, http.StatusOK, 3, http.StatusBadRequest},
		{"reporter: reports for another user, trains nothing", nil, []string{nobody}, "bob@example.org", http.StatusForbidden, http.StatusAccepted, http.StatusForbidden, 2, http.StatusForbidden},
		{"reporter: never the global model", nil, []string{nobody}, "", http.StatusForbidden, http.StatusBadRequest, http.StatusOK, 2, http.StatusBadRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q, err := reportq.Open(t.TempDir(), reportq.Options{})
			if err != nil {
				t.Fatal(err)
			}
			hist, err := history.New(history.Options{Size: 10})
			if err != nil {
				t.Fatal(err)
			}
			// Mail to nobody and bob, to bob alone, and to no user.
			hist.Add(history.Entry{Verdict: "spam", Recipients: []string{nobody + "@example.org", "bob@example.org"}, Users: []string{nobody, "bob@example.org"}}, nil)
			hist.Add(history.Entry{Verdict: "ham", Recipients: []string{"bob@example.org"}, Users: []string{"bob@example.org"}}, nil)
			hist.Add(history.Entry{Verdict: "ham", Recipients: []string{"x@example.org"}, Users: []string{""}}, nil)
			fx := newFixture(t, Options{Admins: tt.admins, Reporters: tt.reporters, Enqueue: q.Enqueue, History: hist, Prefs: newTestPrefs(t)})
			// Models the child process may or may not see: the global one,
			// bob's, and its own.
			for _, u := range []string{"", "bob@example.org", nobody} {
				if _, err := fx.f.Learn(context.Background(), u, fx.ham[0], filter.Ham); err != nil {
					t.Fatal(err)
				}
			}
			// The test binary, where nobody may run it.
			bin := filepath.Join(filepath.Dir(fx.sock), "control.test")
			b, err := os.ReadFile(exe)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(bin, b, 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, "-test.run=^TestHelperPeer$")
			cmd.Env = append(os.Environ(), "CONTROL_HELPER_SOCKET="+fx.sock, "CONTROL_HELPER_USER="+tt.user)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("helper: %v\n%s", err, out)
			}
			var got struct {
				Train, Classify, ClassifyGlobal, Report, Users, Dump, Delete int
				Prune, Check                                                 int
				History, HistoryRcpts, HistoryOther                          int
				SetPrefs, GetPrefs, SetDomain                                int
				Decide                                                       int
			}
			if err := json.Unmarshal(bytes.TrimSpace(lastLine(out)), &got); err != nil {
				t.Fatalf("helper said %s", out)
			}
			if got.Train != tt.status || got.Classify != tt.classify || got.ClassifyGlobal != http.StatusOK || got.Report != tt.report {
				t.Errorf("train %d, classify %d, classify with the global model %d, report %d; want %d, %d, 200, %d",
					got.Train, got.Classify, got.ClassifyGlobal, got.Report, tt.status, tt.classify, tt.report)
			}
			// A decision under a user's preferences is read like their model.
			if got.Decide != tt.classify {
				t.Errorf("decide for the user %d, want %d", got.Decide, tt.classify)
			}
			if got.Users != tt.users {
				t.Errorf("/v1/stats lists %d models, want %d", got.Users, tt.users)
			}
			// Maintenance reads and changes every model: the admins'.
			if want := map[bool]int{true: http.StatusOK, false: http.StatusForbidden}[len(tt.admins) > 0]; got.Dump != want || got.Delete != want {
				t.Errorf("dump %d, delete-user %d; want %d", got.Dump, got.Delete, want)
			}
			if want := map[bool]int{true: http.StatusOK, false: http.StatusForbidden}[len(tt.admins) > 0]; got.Prune != want || got.Check != want {
				t.Errorf("prune %d, check %d; want %d", got.Prune, got.Check, want)
			}
			// The history: an admin sees every message, another account
			// only the mail of its own user, without the other recipients.
			want := struct{ n, rcpts, other int }{1, 1, http.StatusForbidden}
			if len(tt.admins) > 0 {
				want = struct{ n, rcpts, other int }{3, 4, http.StatusOK}
			}
			if got.History != want.n || got.HistoryRcpts != want.rcpts || got.HistoryOther != want.other {
				t.Errorf("history: %d entries with %d recipients, bob's %d; want %d, %d, %d",
					got.History, got.HistoryRcpts, got.HistoryOther, want.n, want.rcpts, want.other)
			}
			if got.SetPrefs != tt.prefs || got.GetPrefs != tt.prefs {
				t.Errorf("set preferences %d, read them %d; want %d", got.SetPrefs, got.GetPrefs, tt.prefs)
			}
			if want := map[bool]int{true: http.StatusOK, false: http.StatusForbidden}[len(tt.admins) > 0]; got.SetDomain != want {
				t.Errorf("set a domain's preferences %d, want %d", got.SetDomain, want)
			}
			if want := map[bool]int{true: 1}[tt.report == http.StatusAccepted]; q.Len() != want {
				t.Errorf("%d reports queued, want %d", q.Len(), want)
			}
		})
	}
}

func lastLine(b []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		if bytes.HasPrefix(lines[i], []byte("{")) {
			return lines[i]
		}
	}
	return nil
}

// TestHelperPeer is the unprivileged side of TestPeerCredentials: it
// trains and classifies one message and prints the statuses as JSON.
func TestHelperPeer(t *testing.T) {
	sock := os.Getenv("CONTROL_HELPER_SOCKET")
	if sock == "" {
		t.Skip("run by TestPeerCredentials")
	}
	c, err := NewClient(sock, "")
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("From: a@example.org\r\nSubject: hi\r\n\r\nhello there\r\n")
	status := func(err error) int {
		var e *Error
		if errors.As(err, &e) {
			return e.Status
		}
		if err != nil {
			t.Fatal(err)
		}
		return http.StatusOK
	}
	ctx := context.Background()
	user := os.Getenv("CONTROL_HELPER_USER")
	_, cerr := c.Classify(ctx, user, msg, 3)
	_, gerr := c.Classify(ctx, "", msg, 3)
	_, decerr := c.Decide(ctx, user, "a@example.org", msg, 3)
	st, serr := c.Stats(ctx)
	if serr != nil {
		t.Fatal(serr)
	}
	_, terr := c.Train(ctx, user, []Item{{Class: filter.Spam, Message: msg}})
	derr := c.Dump(ctx, nil, io.Discard)
	_, xerr := c.DeleteUsers(ctx, []string{"nobody-has-this-model"})
	// Every model, or bob's: an admin's to change, no other account's.
	_, pruneErr := c.Prune(ctx, []string{"bob@example.org"}, store.PruneRule{MaxTokens: 1 << 20})
	_, checkErr := c.Check(ctx)
	_, rerr := c.Report(ctx, user, filter.Spam, "", msg)
	report := http.StatusAccepted // what the client answers nil for
	if rerr != nil {
		report = status(rerr)
	}
	h, herr := c.History(ctx, HistoryQuery{})
	if herr != nil {
		t.Fatal(herr)
	}
	rcpts := 0
	for _, e := range h.Entries {
		rcpts += len(e.Recipients)
	}
	_, oerr := c.History(ctx, HistoryQuery{User: "bob@example.org"})
	required := 5.0
	_, perr := c.SetPrefs(ctx, user, "", config.Pref{Required: &required})
	_, gperr := c.Prefs(ctx, user, "")
	_, dperr := c.SetPrefs(ctx, "", "example.org", config.Pref{Action: "quarantine"})
	json.NewEncoder(os.Stdout).Encode(map[string]int{"Train": status(terr), "Classify": status(cerr), "ClassifyGlobal": status(gerr),
		"Decide": status(decerr),
		"Report": report, "Users": len(st.Users), "Dump": status(derr), "Delete": status(xerr),
		"Prune": status(pruneErr), "Check": status(checkErr),
		"History": len(h.Entries), "HistoryRcpts": rcpts, "HistoryOther": status(oerr),
		"SetPrefs": status(perr), "GetPrefs": status(gperr), "SetDomain": status(dperr)})
	io.WriteString(os.Stdout, "\n")
}

// TestReportEndpoint runs the API's report channel whole: POST
// /v1/report enqueues into a real spool, applied in the background to
// the filter.
func TestReportEndpoint(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	q, err := reportq.Open(t.TempDir(), reportq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fx := newFixture(t, Options{Enqueue: q.Enqueue})
	a := &relabel.Applier{Filter: func() *filter.Filter { return fx.f }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.Run(ctx, a.Apply)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	fx.trainAll(t, "")
	fx.trainAll(t, "bob")
	counts := func(t *testing.T, user string) map[string]uint64 {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); q.Len() > 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d reports waiting", q.Len())
			}
		}
		tot, err := fx.f.Store().Totals(ctx, user)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]uint64{}
		for i, c := range tot.Classes {
			out[c] = tot.Messages[i]
		}
		return out
	}
	bob := counts(t, "bob")
	msg := fx.spam[len(fx.spam)-1]
	for _, tt := range []struct {
		name, query string
		status      int
		spam, ham   uint64
	}{
		{"spam once", "user=alice&class=spam", http.StatusAccepted, 1, 0},
		{"the same report again", "user=alice&class=spam", http.StatusAccepted, 1, 0},
		{"relabeled ham", "user=alice&class=ham", http.StatusAccepted, 0, 1},
		{"global model", "class=spam", http.StatusBadRequest, 0, 1},
		{"climbing user", "user=..%2Fx&class=spam", http.StatusBadRequest, 0, 1},
		{"slash", "user=a%2Fb&class=spam", http.StatusBadRequest, 0, 1},
		{"10 kB user", "user=" + strings.Repeat("a", 10<<10) + "&class=spam", http.StatusBadRequest, 0, 1},
		{"unknown class", "user=alice&class=phish", http.StatusBadRequest, 0, 1},
		{"no class", "user=alice", http.StatusBadRequest, 0, 1},
		{"bad source", "user=alice&class=spam&source=a+b", http.StatusBadRequest, 0, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, body := fx.post(t, "/v1/report?"+tt.query, msg)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %v", status, tt.status, body)
			}
			if status == http.StatusAccepted && body["id"] == "" {
				t.Errorf("no id: %v", body)
			}
			got := counts(t, "alice")
			if got[filter.Spam] != tt.spam || got[filter.Ham] != tt.ham {
				t.Errorf("alice's model holds %v, want spam %d ham %d", got, tt.spam, tt.ham)
			}
			if got := counts(t, "bob"); !maps.Equal(got, bob) {
				t.Errorf("bob's model changed: %v → %v", bob, got)
			}
		})
	}
	t.Run("client", func(t *testing.T) {
		res, err := fx.client.Report(ctx, "alice", filter.Spam, "imapsieve", msg)
		if err != nil || res.ID == "" {
			t.Fatalf("%+v, %v", res, err)
		}
		if got := counts(t, "alice"); got[filter.Spam] != 1 || got[filter.Ham] != 0 {
			t.Errorf("alice's model holds %v", got)
		}
	})
	t.Run("no queue", func(t *testing.T) {
		fx := newFixture(t, Options{})
		if status, _ := fx.post(t, "/v1/report?user=alice&class=spam", msg); status != http.StatusNotFound {
			t.Errorf("status %d, want 404", status)
		}
	})
}

// newTestPrefs keeps preferences as the daemon does: the API's layer in
// a file, over the site's settings and a configuration's layer that
// holds example.org.
func newTestPrefs(t testing.TB) *prefstest.Service {
	pf, err := prefs.OpenFile(filepath.Join(t.(interface{ TempDir() string }).TempDir(), "prefs.json"))
	if err != nil {
		t.Fatal(err)
	}
	actions := config.Actions{SubjectTag: "[SPAM]", RejectScore: 10}
	conf := prefs.Layer{Domains: map[string]config.Pref{"example.org": {Action: "quarantine"}}}
	return prefstest.New(pf, actions, prefs.SiteOf(3, actions, config.Prefs{}), conf)
}

// TestPrefsEndpoint sets and reads preferences through the API, and
// checks what is refused.
func TestPrefsEndpoint(t *testing.T) {
	ctx := context.Background()
	tp := newTestPrefs(t)
	fx := newFixture(t, Options{Prefs: tp})
	got, err := fx.client.Prefs(ctx, "alice@example.org", "")
	if err != nil {
		t.Fatal(err)
	}
	want := Prefs{User: "alice@example.org", Domain: "example.org", Required: 3, SubjectTag: "[SPAM]", RejectScore: 10, Action: "quarantine",
		Source: map[string]prefs.Level{"required": prefs.Global, "subject_tag": prefs.Global, "reject_score": prefs.Global, "action": prefs.Domain}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("before: %+v\nwant %+v", got, want)
	}
	required, tag := 4.5, ""
	got, err = fx.client.SetPrefs(ctx, "alice@example.org", "", config.Pref{Required: &required, SubjectTag: &tag, Deny: []string{"*@spam.example"}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Required != 4.5 || got.SubjectTag != "" || got.Source["required"] != prefs.User || got.Action != "quarantine" ||
		!slices.Equal(got.Set.Deny, []string{"*@spam.example"}) {
		t.Errorf("after setting: %+v", got)
	}
	if l, ok := tp.Book().For("alice@example.org", "example.org").Listed(prefs.Sender{Envelope: "x@spam.example"}); !ok || l.Level != prefs.User {
		t.Errorf("the deny list set is not in force: %+v %v", l, ok)
	}
	// A user named by local part gets its domain from the request.
	if got, err := fx.client.Prefs(ctx, "bob", "example.org"); err != nil || got.Action != "quarantine" {
		t.Errorf("bob at example.org: %+v, %v", got, err)
	}
	if _, err := fx.client.SetPrefs(ctx, "alice@example.org", "", config.Pref{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := fx.client.Prefs(ctx, "alice@example.org", ""); got.Required != 3 || got.Set.Required != nil {
		t.Errorf("after clearing: %+v", got)
	}
	for _, tt := range []struct {
		name, path, body string
		status           int
	}{
		{"unknown key", "/v1/prefs?user=alice@example.org", `{"threshold":1}`, http.StatusBadRequest},
		{"bad action", "/v1/prefs?user=alice@example.org", `{"action":"discard"}`, http.StatusBadRequest},
		{"bad entry", "/v1/prefs?user=alice@example.org", `{"allow":["a b"]}`, http.StatusBadRequest},
		{"not JSON", "/v1/prefs?user=alice@example.org", `required=1`, http.StatusBadRequest},
		{"nobody named", "/v1/prefs", `{}`, http.StatusBadRequest},
		{"upper-case user", "/v1/prefs?user=Alice@example.org", `{}`, http.StatusBadRequest},
		{"bad domain", "/v1/prefs?domain=a@b", `{}`, http.StatusBadRequest},
	} {
		req, _ := http.NewRequest(http.MethodPut, "http://spamd"+tt.path, strings.NewReader(tt.body))
		hc := http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", fx.sock)
		}}}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.status {
			t.Errorf("%s: %d, want %d", tt.name, resp.StatusCode, tt.status)
		}
	}
	// Without preferences the endpoint is not there.
	bare := newFixture(t, Options{})
	var e *Error
	if _, err := bare.client.Prefs(ctx, "alice@example.org", ""); !errors.As(err, &e) || e.Status != http.StatusNotFound {
		t.Errorf("without preferences: %v", err)
	}
}

// TestClassifyDecide asks /v1/classify for the decision a recipient's
// mail gets under their preferences: the user's, their domain's and the
// site's, and the sender lists.
func TestClassifyDecide(t *testing.T) {
	ctx := context.Background()
	tp := newTestPrefs(t)
	fx := newFixture(t, Options{Prefs: tp})
	fx.trainAll(t, "")
	tag := "[ALICE]"
	if _, err := fx.client.SetPrefs(ctx, "alice@example.org", "", config.Pref{SubjectTag: &tag, Action: "tag", Deny: []string{"*@spam.example"}}); err != nil {
		t.Fatal(err)
	}
	spam, ham := fx.spam[len(fx.spam)-1], fx.ham[len(fx.ham)-1]
	for _, tt := range []struct {
		name, user, sender string
		msg                []byte
		want               Decision
		result             string // in X-Spamd-Result
	}{
		{"the site's", "x@elsewhere.example", "", spam, Decision{Verdict: "spam", Spam: true, Class: "spam", Required: 3, Tag: true, SubjectTag: "[SPAM]", Action: "accept"}, "spam; "},
		{"the domain's action", "bob@example.org", "", spam, Decision{Verdict: "spam", Spam: true, Class: "spam", Required: 3, Tag: true, SubjectTag: "[SPAM]", Action: "quarantine"}, "spam; "},
		{"the user's over the domain's", "alice@example.org", "", spam, Decision{Verdict: "spam", Spam: true, Class: "spam", Required: 3, Tag: true, SubjectTag: "[ALICE]", Action: "accept"}, "spam; "},
		{"the user's deny list", "alice@example.org", "bulk@spam.example", ham,
			Decision{Verdict: "spam", Spam: true, Class: "spam", Required: 3, Listed: "deny", By: "user", Tag: true, SubjectTag: "[ALICE]", Action: "accept"}, "listed=deny; by=user"},
		{"ham", "bob@example.org", "bulk@spam.example", ham, Decision{Verdict: "ham", Class: "ham", Required: 3, Action: "accept"}, "ham; "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, err := fx.client.Decide(ctx, tt.user, tt.sender, tt.msg, 0)
			if err != nil {
				t.Fatal(err)
			}
			d := *v.Decision
			hs := d.Headers
			d.Headers = nil
			if !reflect.DeepEqual(d, tt.want) {
				t.Errorf("decision %+v\nwant %+v", d, tt.want)
			}
			flag := map[bool]string{true: "YES", false: "NO"}[tt.want.Spam]
			if len(hs) != 6 || hs[0] != [2]string{"X-Spam-Flag", flag} || hs[4] != [2]string{"X-Spamd-Class", tt.want.Class} ||
				hs[5][0] != "X-Spamd-Result" || !strings.Contains(hs[5][1], tt.result) || !strings.Contains(hs[5][1], "; fields=") {
				t.Errorf("headers %q", hs)
			}
		})
	}
}
