package control

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/history"
	"github.com/spamd/spamd/store"
)

const consoleToken = "console-token-0123456789"

// consoleFixture is a console over a trained memory store, with a
// history of one held spam message (ID 1), one held ham (2) and one
// whose message is no longer held (3).
type consoleFixture struct {
	f    *filter.Filter
	h    *history.Ring
	con  *Console
	srv  *httptest.Server
	spam []byte
}

func newConsoleFixture(t *testing.T) *consoleFixture {
	t.Helper()
	f, err := filter.New(store.NewMemory(), filter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	spam, ham := readDir(t, "../testdata/sample/spam"), readDir(t, "../testdata/sample/ham")
	ctx := context.Background()
	for i := range len(spam) - 1 {
		for _, m := range []struct {
			raw   []byte
			class string
		}{{spam[i], filter.Spam}, {ham[i], filter.Ham}} {
			if _, err := f.Learn(ctx, "", m.raw, m.class); err != nil {
				t.Fatal(err)
			}
		}
	}
	h, err := history.New(history.Options{Size: 10, MaxMessageBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	add := func(raw []byte, subject string, held bool) {
		v, err := f.Classify(ctx, "", raw, filter.ClassifyOptions{Explain: 3})
		if err != nil {
			t.Fatal(err)
		}
		e := history.Entry{Time: time.Now(), Sender: "s@example.net", Recipients: []string{"alice@example.org"},
			Users: []string{"alice@example.org"}, Models: []string{""}, Subject: subject, Verdict: v.Label(),
			Probability: v.Probability, Score: v.Score, Action: "accept", Digest: history.Digest(v.Digest),
			Toward: map[string][]history.Feature{}}
		for c, cs := range v.Toward {
			for _, x := range cs {
				e.Toward[c] = append(e.Toward[c], history.Feature{Name: x.Name, Value: x.Count, Weight: x.Weight})
			}
		}
		if !held {
			raw = nil
		}
		h.Add(e, raw)
	}
	last := spam[len(spam)-1]
	add(last, "<script>alert(1)</script>", true)
	add(ham[len(ham)-1], "=?utf-8?q?caf=C3=A9?=", true)
	add(last, "gone", false)
	api := NewServer(Options{Filter: func() *filter.Filter { return f }, History: h})
	con, err := NewConsole(ConsoleOptions{API: api, Token: consoleToken,
		Relabel: func(ctx context.Context, user, class string, raw []byte, sig store.Digest) (string, bool, error) {
			_, res, err := f.Relabel(ctx, user, raw, class, sig)
			return res.Prev, res.Changed, err
		},
		Config: func() string { return "[api]\ntoken_file = \"/etc/spamd/token\"\n# <b>not bold</b>\n" },
		Counters: func() Counters {
			return Counters{Messages: map[string]uint64{"spam": 3, "ham": 7}, Actions: map[string]uint64{"accept": 10},
				Latency: Histogram{Bounds: []float64{0.001, 0.01, 0.1}, Counts: []uint64{2, 9, 10}, Count: 10, Sum: 0.05}}
		}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(con.Handler())
	t.Cleanup(srv.Close)
	return &consoleFixture{f: f, h: h, con: con, srv: srv, spam: last}
}

// browser is a client keeping cookies and not following redirects, so
// that each answer can be checked.
func (fx *consoleFixture) browser(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// do sends a request, as a browser on the console's own pages would
// (same-origin), and returns the status, Location and body.
func (fx *consoleFixture) do(t *testing.T, c *http.Client, method, path string, form url.Values, header map[string]string) (int, string, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, fx.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", fx.srv.URL)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if h := header["Host"]; h != "" {
		// As a browser would, for the page it loaded from this host.
		req.Host = h
		for _, ck := range c.Jar.Cookies(req.URL) {
			req.AddCookie(ck)
		}
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(b)
}

// login logs c in and returns the session's CSRF token.
func (fx *consoleFixture) login(t *testing.T, c *http.Client) string {
	t.Helper()
	status, loc, _ := fx.do(t, c, "POST", "/console/login", url.Values{"token": {consoleToken}, "next": {"/console/history"}}, nil)
	if status != http.StatusSeeOther || loc != "/console/history" {
		t.Fatalf("login: %d to %q", status, loc)
	}
	_, _, page := fx.do(t, c, "GET", "/console/", nil, nil)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on the status page:\n%s", page)
	}
	return m[1]
}

func TestConsoleLogin(t *testing.T) {
	fx := newConsoleFixture(t)
	c := fx.browser(t)
	status, loc, _ := fx.do(t, c, "GET", "/console/models?q=a", nil, nil)
	if status != http.StatusSeeOther || loc != "/console/login?next=%2Fconsole%2Fmodels%3Fq%3Da" {
		t.Errorf("without a session: %d to %q", status, loc)
	}
	start := time.Now()
	status, _, body := fx.do(t, c, "POST", "/console/login", url.Values{"token": {consoleToken + "x"}}, nil)
	if status != http.StatusUnauthorized || !strings.Contains(body, "not the API&#39;s token") || time.Since(start) < loginPause {
		t.Errorf("a wrong token: %d after %v", status, time.Since(start))
	}
	if u, _ := url.Parse(fx.srv.URL + "/console/"); len(c.Jar.Cookies(u)) != 0 {
		t.Error("a wrong token got a cookie")
	}

	req, _ := http.NewRequest("POST", fx.srv.URL+"/console/login", strings.NewReader(url.Values{"token": {consoleToken}, "next": {"//evil.example/x"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/console/" {
		t.Errorf("login: %d to %q; want the status page, never elsewhere", resp.StatusCode, loc)
	}
	var cookie *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == sessionCookie {
			cookie = ck
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/console/" ||
		strings.Contains(cookie.Value, consoleToken) || cookie.MaxAge != int(sessionLife/time.Second) {
		t.Fatalf("session cookie %+v", cookie)
	}
	for _, page := range []string{"/console/", "/console/history", "/console/history?verdict=spam", "/console/message/1",
		"/console/models", "/console/config", "/console/classify", "/console/static/console.css", "/console/static/console.js"} {
		t.Run(page, func(t *testing.T) {
			status, _, _ := fx.do(t, c, "GET", page, nil, nil)
			if status != http.StatusOK {
				t.Errorf("status %d", status)
			}
		})
	}
	if status, _, _ := fx.do(t, c, "GET", "/console/static/nothing.css", nil, nil); status != http.StatusNotFound {
		t.Errorf("a missing asset: %d", status)
	}
	// Logging out ends the session on the server, not only in the browser.
	csrf := fx.login(t, c)
	u, _ := url.Parse(fx.srv.URL + "/console/")
	old := c.Jar.Cookies(u)
	if status, loc, _ := fx.do(t, c, "POST", "/console/logout", url.Values{"csrf": {csrf}}, nil); status != http.StatusSeeOther || loc != "/console/login" {
		t.Errorf("logout: %d to %q", status, loc)
	}
	c.Jar.SetCookies(u, old)
	if status, _, _ := fx.do(t, c, "GET", "/console/", nil, nil); status != http.StatusSeeOther {
		t.Errorf("the old cookie after logging out: %d", status)
	}
}

// TestConsoleLoginPause checks that a wrong token holds the login for
// the whole pause even when its client hangs up at once: otherwise a
// guesser would try again without waiting, and know a right token by
// its quick answer.
func TestConsoleLoginPause(t *testing.T) {
	fx := newConsoleFixture(t)
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", fx.srv.URL+"/console/login",
			strings.NewReader(url.Values{"token": {"a-wrong-guess-0123456789"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	// Hang up once the wrong guess holds the login.
	for len(fx.con.login) == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the wrong guess was answered before its client hung up: %v", err)
	}
	fx.login(t, fx.browser(t))
	if waited := time.Since(start); waited < loginPause {
		t.Errorf("a right token was let in %v after a wrong one whose client hung up; want the whole pause, %v", waited, loginPause)
	}
}

// TestConsoleRefuses checks the console's defences: foreign hosts,
// cross-origin POSTs, missing or foreign CSRF tokens, and the headers
// every page carries.
func TestConsoleRefuses(t *testing.T) {
	fx := newConsoleFixture(t)
	alice, bob := fx.browser(t), fx.browser(t)
	aliceCSRF, bobCSRF := fx.login(t, alice), fx.login(t, bob)
	if aliceCSRF == bobCSRF {
		t.Fatal("two sessions share a CSRF token")
	}
	learn := func(csrf string) url.Values {
		return url.Values{"csrf": {csrf}, "class": {"ham"}, "model": {""}}
	}
	for _, tt := range []struct {
		name   string
		method string
		path   string
		form   url.Values
		header map[string]string
		status int
	}{
		{"another host (DNS rebinding)", "GET", "/console/", nil, map[string]string{"Host": "evil.example:8080"}, http.StatusMisdirectedRequest},
		{"another host, login", "POST", "/console/login", url.Values{"token": {consoleToken}}, map[string]string{"Host": "evil.example"}, http.StatusMisdirectedRequest},
		{"cross-site POST", "POST", "/console/message/1/learn", learn(aliceCSRF), map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"}, http.StatusForbidden},
		{"cross-origin POST without Sec-Fetch-Site", "POST", "/console/message/1/learn", learn(aliceCSRF), map[string]string{"Sec-Fetch-Site": "", "Origin": "http://evil.example"}, http.StatusForbidden},
		{"cross-site login", "POST", "/console/login", url.Values{"token": {consoleToken}}, map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"no CSRF token", "POST", "/console/message/1/learn", learn(""), nil, http.StatusForbidden},
		{"another session's CSRF token", "POST", "/console/message/1/learn", learn(bobCSRF), nil, http.StatusForbidden},
		{"no CSRF token, classify", "POST", "/console/classify", url.Values{"message": {"Subject: x\n\nhi"}}, nil, http.StatusForbidden},
		{"localhost is fine", "GET", "/console/", nil, map[string]string{"Host": "localhost:1"}, http.StatusOK},
		{"IPv6 loopback is fine", "GET", "/console/", nil, map[string]string{"Host": "[::1]:1"}, http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, _, _ := fx.do(t, alice, tt.method, tt.path, tt.form, tt.header)
			if status != tt.status {
				t.Errorf("status %d, want %d", status, tt.status)
			}
		})
	}
	if prev, _ := fx.f.Store().Seen(context.Background(), "", fx.digest(t)); prev != "" {
		t.Errorf("a refused request trained the message as %q", prev)
	}
	req, _ := http.NewRequest("GET", fx.srv.URL+"/console/history", nil)
	resp, err := alice.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for k, want := range map[string]string{
		"Content-Security-Policy": "default-src 'none'; script-src 'self'",
		"X-Frame-Options":         "DENY",
		"X-Content-Type-Options":  "nosniff",
		"Cache-Control":           "no-store",
	} {
		if !strings.HasPrefix(resp.Header.Get(k), want) {
			t.Errorf("%s: %q, want %q", k, resp.Header.Get(k), want)
		}
	}
}

func (fx *consoleFixture) digest(t *testing.T) store.Digest {
	p, err := fx.f.Prepare(fx.spam, false)
	if err != nil {
		t.Fatal(err)
	}
	return p.Digest
}

// TestConsolePages checks what the pages show, escaped, and that
// learning a message trains the model it names.
func TestConsolePages(t *testing.T) {
	fx := newConsoleFixture(t)
	c := fx.browser(t)
	csrf := fx.login(t, c)
	_, _, hist := fx.do(t, c, "GET", "/console/history", nil, nil)
	for _, want := range []string{`data-id="1"`, `data-id="2"`, `data-id="3"`, "&lt;script&gt;alert(1)&lt;/script&gt;", "café", "alice@example.org"} {
		if !strings.Contains(hist, want) {
			t.Errorf("the history lacks %q", want)
		}
	}
	if strings.Contains(hist, "<script>alert") {
		t.Error("the history page writes a subject unescaped")
	}
	_, _, spamOnly := fx.do(t, c, "GET", "/console/history?verdict=ham", nil, nil)
	if strings.Contains(spamOnly, `data-id="1"`) || !strings.Contains(spamOnly, `data-id="2"`) {
		t.Error("verdict=ham lists the spam")
	}
	if status, _, _ := fx.do(t, c, "GET", "/console/history?verdict=bogus", nil, nil); status != http.StatusBadRequest {
		t.Errorf("a bad verdict: %d", status)
	}

	_, _, msg := fx.do(t, c, "GET", "/console/message/1", nil, nil)
	for _, want := range []string{`id="now-global"`, `id="learn-ham-global"`, "toward spam", "toward ham", "Header ("} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message page lacks %q", want)
		}
	}
	_, _, gone := fx.do(t, c, "GET", "/console/message/3", nil, nil)
	if !strings.Contains(gone, "no longer held") || strings.Contains(gone, `id="learn-ham-global"`) {
		t.Error("a message no longer held offers to learn it")
	}
	for path, want := range map[string]int{"/console/message/99": http.StatusNotFound, "/console/message/x": http.StatusBadRequest} {
		if status, _, _ := fx.do(t, c, "GET", path, nil, nil); status != want {
			t.Errorf("%s: %d, want %d", path, status, want)
		}
	}

	// Learning.
	for _, tt := range []struct {
		name   string
		id     string
		form   url.Values
		status int
	}{
		{"unknown class", "1", url.Values{"class": {"eggs"}, "model": {""}}, http.StatusBadRequest},
		{"a model that did not judge it", "1", url.Values{"class": {"ham"}, "model": {"bob@example.org"}}, http.StatusBadRequest},
		{"not held", "3", url.Values{"class": {"ham"}, "model": {""}}, http.StatusGone},
		{"gone", "99", url.Values{"class": {"ham"}, "model": {""}}, http.StatusNotFound},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.form.Set("csrf", csrf)
			if status, _, _ := fx.do(t, c, "POST", "/console/message/"+tt.id+"/learn", tt.form, nil); status != tt.status {
				t.Errorf("status %d, want %d", status, tt.status)
			}
		})
	}
	status, loc, _ := fx.do(t, c, "POST", "/console/message/1/learn", url.Values{"csrf": {csrf}, "class": {"ham"}, "model": {""}}, nil)
	if status != http.StatusSeeOther || loc != "/console/message/1?learned=ham&model=&prev=&changed=1" {
		t.Fatalf("learn: %d to %q", status, loc)
	}
	if prev, _ := fx.f.Store().Seen(context.Background(), "", fx.digest(t)); prev != filter.Ham {
		t.Errorf("the message is trained as %q, want ham", prev)
	}
	if _, ok := fx.h.LastTrained(""); !ok {
		t.Error("the training is not noted")
	}
	_, _, after := fx.do(t, c, "GET", loc, nil, nil)
	if !strings.Contains(after, "Learned as ham for the global model.") || !strings.Contains(after, `trained as <span class="trained">ham</span>`) {
		t.Errorf("the message page does not say what was learned:\n%s", after)
	}
	_, loc, _ = fx.do(t, c, "POST", "/console/message/1/learn", url.Values{"csrf": {csrf}, "class": {"ham"}, "model": {""}}, nil)
	if _, _, again := fx.do(t, c, "GET", loc, nil, nil); !strings.Contains(again, "already trained as ham, nothing changed") {
		t.Error("learning twice does not say nothing changed")
	}

	// Classifying a pasted message, and an uploaded one.
	pasted := strings.ReplaceAll(string(fx.spam), "\r\n", "\n")
	_, _, res := fx.do(t, c, "POST", "/console/classify", url.Values{"csrf": {csrf}, "message": {pasted}}, nil)
	if !strings.Contains(res, "trained as ham") || !strings.Contains(res, "global model") {
		t.Error("the pasted message's verdict does not show")
	}
	var mp bytes.Buffer
	w := multipart.NewWriter(&mp)
	w.WriteField("csrf", csrf)
	w.WriteField("model", "nobody-yet")
	fw, _ := w.CreateFormFile("file", "msg.eml")
	fw.Write(fx.spam)
	w.Close()
	req, _ := http.NewRequest("POST", fx.srv.URL+"/console/classify", &mp)
	req.Header.Set("Content-Type", w.FormDataContentType())
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "nobody-yet model") {
		t.Errorf("upload: %d", resp.StatusCode)
	}
	big := url.Values{"csrf": {csrf}, "message": {strings.Repeat("x", int(2*DefaultLimits.MaxMessage)+100<<10)}}
	if status, _, body := fx.do(t, c, "POST", "/console/classify", big, nil); status != http.StatusRequestEntityTooLarge || !strings.Contains(body, "max_message_bytes") {
		t.Errorf("a form too large: %d", status)
	}
	for name, form := range map[string]url.Values{
		"empty":    {"message": {"  "}},
		"bad user": {"message": {pasted}, "model": {"../etc"}},
	} {
		form.Set("csrf", csrf)
		if status, _, _ := fx.do(t, c, "POST", "/console/classify", form, nil); status != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", name, status)
		}
	}

	_, _, cfg := fx.do(t, c, "GET", "/console/config", nil, nil)
	if !strings.Contains(cfg, `token_file = &#34;/etc/spamd/token&#34;`) || strings.Contains(cfg, "<b>") {
		t.Error("the configuration page does not show the text escaped")
	}
	_, _, models := fx.do(t, c, "GET", "/console/models", nil, nil)
	if !strings.Contains(models, "<strong>global</strong>") || !strings.Contains(models, "ago)") {
		t.Error("the models page lacks the global model or its last training")
	}
	_, _, st := fx.do(t, c, "GET", "/console/", nil, nil)
	for _, want := range []string{`id="health"`, `id="verdict-spam"`, `<td class="num total">3</td>`, "Latency"} {
		if !strings.Contains(st, want) {
			t.Errorf("the status page lacks %q", want)
		}
	}
}

// TestLearnedNotice checks that the message page says what learning did
// only from a query the learn action could have made.
func TestLearnedNotice(t *testing.T) {
	classes, models := []string{"spam", "ham"}, []string{"", "alice"}
	for _, tt := range []struct{ query, want string }{
		{"learned=ham&model=&prev=&changed=1", "Learned as ham for the global model."},
		{"learned=spam&model=alice&prev=ham&changed=1", "Learned as spam for the alice model, untrained as ham first."},
		{"learned=spam&model=alice&prev=&changed=0", "Learned as spam for the alice model: it was already trained as spam, nothing changed."},
		{"", ""},
		{"learned=spam.+Your+session+expired:+log+in+at+evil.example&model=&changed=1", ""},
		{"learned=spam&model=bob&changed=1", ""},
		{"learned=spam&model=&prev=eggs&changed=1", ""},
	} {
		q, err := url.ParseQuery(tt.query)
		if err != nil {
			t.Fatal(err)
		}
		if got := learnedNotice(q, classes, models); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.query, got, tt.want)
		}
	}
}

func TestLocalPath(t *testing.T) {
	for in, want := range map[string]string{
		"":                           "/console/",
		"/console/history?verdict=x": "/console/history?verdict=x",
		"/console/message/3":         "/console/message/3",
		"//evil.example/console/":    "/console/",
		"http://evil.example/":       "/console/",
		"/\\evil.example":            "/console/",
		"/other":                     "/console/",
		"javascript:alert(1)":        "/console/",
	} {
		if got := localPath(in); got != want {
			t.Errorf("localPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHistogramQuantile(t *testing.T) {
	h := Histogram{Bounds: []float64{1, 2, 4}, Counts: []uint64{10, 30, 40}, Count: 40}
	for q, want := range map[float64]float64{0.25: 1, 0.5: 1.5, 0.75: 2, 0.875: 3, 1: 4} {
		if got := h.Quantile(q); math.Abs(got-want) > 1e-9 {
			t.Errorf("quantile %v = %v, want %v", q, got, want)
		}
	}
	if !math.IsNaN((Histogram{}).Quantile(0.5)) {
		t.Error("an empty histogram has a quantile")
	}
	d := h.Sub(Histogram{Bounds: h.Bounds, Counts: []uint64{10, 10, 10}, Count: 10})
	if d.Count != 30 || d.Counts[0] != 0 || d.Quantile(0.5) != 1.75 {
		t.Errorf("difference %+v, median %v", d, d.Quantile(0.5))
	}
}
