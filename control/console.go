package control

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/spamd/spamd/store"
)

// The console's pages and assets, embedded in the binary: nothing is
// fetched from elsewhere.
//
//go:embed console
var consoleFiles embed.FS

// ConsoleOptions configure the web console.
type ConsoleOptions struct {
	// API is the server whose filter, store, limits and history the
	// console shows and uses.
	API *Server
	// Token is the API's bearer token, which logging in asks for; the
	// console refuses to start without one.
	Token string
	// Counters, if not nil, returns the daemon's counters, those
	// /metrics exports, for the status page.
	Counters func() Counters
	// Relabel trains raw as class for user, untraining it first if it
	// was trained as another class, through the path every report takes
	// (package relabel); sig is the digest the message was classified
	// under. It returns the class the message was trained as before and
	// whether anything changed.
	Relabel func(ctx context.Context, user, class string, raw []byte, sig store.Digest) (prev string, changed bool, err error)
	// Config returns the configuration in force as a TOML document,
	// secrets hidden.
	Config func() string
	// Log receives a line per login, logout and message learned.
	Log *slog.Logger
}

// Sessions of the console.
const (
	// sessionCookie names the cookie holding a session.
	sessionCookie = "spamd_console"
	// sessionLife is how long a session lasts after logging in.
	sessionLife = 12 * time.Hour
	// maxSessions bounds the sessions open at once; logging in past it
	// ends the one that would end first.
	maxSessions = 64
	// loginPause is how long a wrong token is answered after, one
	// attempt at a time, so that guessing the token is hopeless.
	loginPause = time.Second
)

// Console is the web console: server-rendered pages over the API's
// server, behind a login with the API's token. It is safe for concurrent
// use.
//
// A login sets a session cookie (HttpOnly, SameSite=Strict, path
// /console/) holding a random session ID, never the token. Every request
// that changes something is a POST that must carry the session's CSRF
// token, an HMAC of its session ID under a key drawn at start, so that
// one session's token is worth nothing in another; and cross-origin
// POSTs are refused from their Sec-Fetch-Site or Origin header
// (http.CrossOriginProtection) before anything else. Requests whose Host
// is not a loopback address or localhost are refused, so that a hostile
// name resolving to 127.0.0.1 (DNS rebinding) gets nothing. Pages forbid
// framing and any script or style from elsewhere (Content-Security-
// Policy).
type Console struct {
	o       ConsoleOptions
	api     *Server
	log     *slog.Logger
	pages   map[string]*template.Template
	static  http.Handler
	cop     *http.CrossOriginProtection
	key     []byte // keys the CSRF tokens
	started time.Time

	mu       sync.Mutex
	sessions map[string]time.Time // session ID → when it ends
	login    chan struct{}        // one login attempt at a time
	rates    rates
}

// NewConsole returns the console of o.API.
func NewConsole(o ConsoleOptions) (*Console, error) {
	if o.API == nil || o.Relabel == nil || o.Config == nil {
		return nil, errors.New("console: API, Relabel and Config are required")
	}
	if len(o.Token) < 16 {
		return nil, errors.New("console: the API's token is required to log in (api.token_file)")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	static, err := fs.Sub(consoleFiles, "console/static")
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	key := make([]byte, 32)
	rand.Read(key)
	c := &Console{
		o: o, api: o.API, log: o.Log, pages: pages, key: key, started: time.Now(),
		static:   http.StripPrefix("/console/static/", http.FileServerFS(static)),
		cop:      http.NewCrossOriginProtection(),
		sessions: map[string]time.Time{},
		login:    make(chan struct{}, 1),
	}
	c.cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.log.Warn("console: cross-origin request refused", "path", r.URL.Path, "origin", r.Header.Get("Origin"), "remote", r.RemoteAddr)
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
	}))
	return c, nil
}

// Handler returns the console's handler, serving every path under
// /console/ (and redirecting / there).
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /console/static/", c.static)
	mux.HandleFunc("GET /console/login", c.loginPage)
	mux.HandleFunc("POST /console/login", c.loginPost)
	mux.HandleFunc("POST /console/logout", c.logout)
	mux.Handle("GET /console/{$}", c.page("status", c.statusPage))
	mux.Handle("GET /console/history", c.page("history", c.historyPage))
	mux.Handle("GET /console/message/{id}", c.page("message", c.messagePage))
	mux.Handle("POST /console/message/{id}/learn", c.action(c.learn))
	mux.Handle("GET /console/classify", c.page("classify", c.classifyForm))
	mux.Handle("POST /console/classify", c.page("classify", c.classifyPost))
	mux.Handle("GET /console/models", c.page("models", c.modelsPage))
	mux.Handle("GET /console/config", c.page("config", c.configPage))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
	})
	return c.guard(c.cop.Handler(mux))
}

// guard checks the Host of every request, sets the headers every answer
// carries, and turns a panic into a 500.
func (c *Console) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				c.log.Error("console: panic", "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				http.Error(w, "internal error", http.StatusInternalServerError)
			}
		}()
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
			"form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		if !loopbackHost(r.Host) {
			c.log.Warn("console: request for another host refused", "host", r.Host, "remote", r.RemoteAddr)
			http.Error(w, "the console answers only to a loopback address or localhost", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether the Host header host names a loopback
// address or localhost.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// newSession opens a session and returns its ID.
func (c *Console) newSession() string {
	b := make([]byte, 32)
	rand.Read(b)
	id := base64.RawURLEncoding.EncodeToString(b)
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for s, end := range c.sessions {
		if now.After(end) {
			delete(c.sessions, s)
		}
	}
	if len(c.sessions) >= maxSessions {
		first := ""
		for s, end := range c.sessions {
			if first == "" || end.Before(c.sessions[first]) {
				first = s
			}
		}
		delete(c.sessions, first)
	}
	c.sessions[id] = now.Add(sessionLife)
	return id
}

// session returns the request's session ID, "" without a valid one.
func (c *Console) session(r *http.Request) string {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	end, ok := c.sessions[ck.Value]
	if !ok {
		return ""
	}
	if time.Now().After(end) {
		delete(c.sessions, ck.Value)
		return ""
	}
	return ck.Value
}

// csrfToken is the CSRF token of session id.
func (c *Console) csrfToken(id string) string {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte("csrf\x00" + id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkCSRF checks the csrf field of a POST against session id's token.
func (c *Console) checkCSRF(r *http.Request, id string) bool {
	got := r.PostFormValue("csrf")
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(c.csrfToken(id))) == 1
}

// setCookie sets (or, with maxAge < 0, clears) the session cookie.
func setCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: value, Path: "/console/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
		// Behind a TLS reverse proxy, the cookie never travels in clear.
		Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https",
	})
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if c.session(r) != "" {
		http.Redirect(w, r, localPath(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, "login", &view{Title: "Log in", Data: loginData{Next: localPath(r.URL.Query().Get("next"))}})
}

type loginData struct{ Next string }

func (c *Console) loginPost(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	next := localPath(r.PostFormValue("next"))
	token := r.PostFormValue("token")
	select {
	case c.login <- struct{}{}:
	case <-r.Context().Done():
		return
	}
	ok := subtle.ConstantTimeCompare([]byte(token), []byte(c.o.Token)) == 1
	if !ok {
		c.log.Warn("console: login refused: wrong token", "remote", r.RemoteAddr)
		// The pause holds the one slot, whole even when the client goes
		// away: a guesser who hung up early would otherwise try again at
		// once, and tell a right token by its quick answer.
		time.Sleep(loginPause)
		<-c.login
		c.render(w, r, http.StatusUnauthorized, "login", &view{Title: "Log in", Error: "That is not the API's token.", Data: loginData{Next: next}})
		return
	}
	<-c.login
	setCookie(w, r, c.newSession(), int(sessionLife/time.Second))
	c.log.Info("console: logged in", "remote", r.RemoteAddr)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	id := c.session(r)
	if id != "" && c.checkCSRF(r, id) {
		c.mu.Lock()
		delete(c.sessions, id)
		c.mu.Unlock()
		c.log.Info("console: logged out", "remote", r.RemoteAddr)
	}
	setCookie(w, r, "", -1)
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
}

// localPath returns p if it is a path of the console, else the status
// page: a login never sends the browser elsewhere.
func localPath(p string) string {
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || !strings.HasPrefix(u.Path, "/console/") ||
		strings.HasPrefix(p, "//") || strings.Contains(p, "\\") {
		return "/console/"
	}
	return u.RequestURI()
}

// view is what every page's template gets.
type view struct {
	Title   string
	Active  string
	CSRF    string
	Notice  string
	Error   string
	Version string
	Data    any
}

// navigation lists the console's pages, for the header.
var navigation = []struct{ Name, Page, Href string }{
	{"Status", "status", "/console/"},
	{"History", "history", "/console/history"},
	{"Classify", "classify", "/console/classify"},
	{"Models", "models", "/console/models"},
	{"Configuration", "config", "/console/config"},
}

// page wraps the handler of a page: a session is required (without one
// the browser is sent to log in), and so is the CSRF token of a POST.
// The handler fills v; an error it returns is shown on the page with its
// status.
func (c *Console) page(name string, h func(r *http.Request, v *view) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := c.session(r)
		if id == "" {
			http.Redirect(w, r, "/console/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		v := &view{Active: name, CSRF: c.csrfToken(id)}
		if err := c.readForm(w, r); err != nil {
			c.render(w, r, statusOf(err).status, "error", &view{Title: "Refused", Active: name, CSRF: v.CSRF, Error: err.Error()})
			return
		}
		if r.Method == http.MethodPost && !c.checkCSRF(r, id) {
			c.render(w, r, http.StatusForbidden, "error", &view{Title: "Refused", Active: name, CSRF: v.CSRF,
				Error: "The form was not sent from this console's page (its CSRF token is missing or stale): reload the page and try again."})
			return
		}
		status, tmpl := http.StatusOK, name
		if err := h(r, v); err != nil {
			status = statusOf(err).status
			if status >= 500 {
				c.log.Error("console: page failed", "page", name, "status", status, "err", err)
			}
			v.Error = err.Error()
			if v.Data == nil {
				tmpl = "error"
			}
		}
		c.render(w, r, status, tmpl, v)
	})
}

// readForm reads the form of a POST, bounded: a message pasted and one
// uploaded, each up to the API's largest, and the form's other fields.
func (c *Console) readForm(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		return nil
	}
	limit := 2*c.api.Limits.MaxMessage + 64<<10
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	var err error
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		err = r.ParseMultipartForm(32 << 20)
	} else {
		err = r.ParseForm()
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return fail(http.StatusRequestEntityTooLarge, fmt.Errorf("the form is larger than %d bytes: a message may have up to %d ([api] max_message_bytes)", limit, c.api.Limits.MaxMessage))
	case err != nil:
		return fail(http.StatusBadRequest, fmt.Errorf("read the form: %w", err))
	}
	return nil
}

// action wraps a POST that changes something and redirects: a session
// and its CSRF token are required.
func (c *Console) action(h func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := c.session(r)
		if id == "" {
			http.Redirect(w, r, "/console/login", http.StatusSeeOther)
			return
		}
		if err := c.readForm(w, r); err != nil {
			c.render(w, r, statusOf(err).status, "error", &view{Title: "Refused", CSRF: c.csrfToken(id), Error: err.Error()})
			return
		}
		if !c.checkCSRF(r, id) {
			c.render(w, r, http.StatusForbidden, "error", &view{Title: "Refused", CSRF: c.csrfToken(id),
				Error: "The form was not sent from this console's page (its CSRF token is missing or stale): reload the page and try again."})
			return
		}
		if err := h(w, r); err != nil {
			status := statusOf(err).status
			if status >= 500 {
				c.log.Error("console: action failed", "path", r.URL.Path, "status", status, "err", err)
			}
			c.render(w, r, status, "error", &view{Title: "Failed", CSRF: c.csrfToken(id), Error: err.Error()})
		}
	})
}
