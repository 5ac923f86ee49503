package milter

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	gomilter "github.com/emersion/go-milter"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/decide"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/store"
)

// readDir returns the messages in dir, sorted by name.
func readDir(tb testing.TB, dir string) [][]byte {
	tb.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var out [][]byte
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// sample holds the repository's small labelled sample.
type sample struct{ spam, ham [][]byte }

var (
	sampleOnce sync.Once
	theSample  sample
)

func loadSample(tb testing.TB) sample {
	sampleOnce.Do(func() {
		theSample = sample{
			spam: readDir(tb, "../testdata/sample/spam"),
			ham:  readDir(tb, "../testdata/sample/ham"),
		}
	})
	return theSample
}

// trainedFilter returns a filter over a memory store trained on all but
// the last message of each class of the sample, which it returns unseen.
func trainedFilter(tb testing.TB, st store.Store) (f *filter.Filter, spam, ham []byte) {
	tb.Helper()
	s := loadSample(tb)
	f, err := filter.New(st, filter.DefaultConfig())
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	// In a fixed order: the learned weights depend on it.
	for i := range max(len(s.spam), len(s.ham)) {
		for _, m := range []struct {
			msgs  [][]byte
			class string
		}{{s.spam, filter.Spam}, {s.ham, filter.Ham}} {
			if i < len(m.msgs)-1 {
				if _, err := f.Learn(ctx, "", m.msgs[i], m.class); err != nil {
					tb.Fatal(err)
				}
			}
		}
	}
	return f, s.spam[len(s.spam)-1], s.ham[len(s.ham)-1]
}

// testSettings are the defaults with f, and short timeouts.
func testSettings(f *filter.Filter) *Settings {
	c := config.Default(func(string) string { return "" })
	c.Milter.ReadTimeout.Duration = 2 * time.Second
	c.Milter.WriteTimeout.Duration = 2 * time.Second
	return &Settings{Filter: f, Milter: c.Milter, Actions: c.Actions}
}

// recorder is an Observer that remembers what it was told.
type recorder struct {
	mu       sync.Mutex
	messages []string // verdict/action
	errors   map[string]int
}

func (r *recorder) Message(verdict string, _ float64, a decide.Action, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.messages = append(r.messages, verdict+"/"+a.String())
}

func (r *recorder) Error(kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.errors == nil {
		r.errors = map[string]int{}
	}
	r.errors[kind]++
}

func (r *recorder) errorCount(kind string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errors[kind]
}

// startServer serves set on a fresh loopback port and returns the server
// and its address; the server is shut down when the test ends.
func startServer(tb testing.TB, set *Settings, obs Observer) (*Server, string) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s := New(set, log, obs)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			tb.Error(err)
		}
		if err := <-done; err != nil {
			tb.Error(err)
		}
	})
	return s, ln.Addr().String()
}

// newClient returns a go-milter client for addr, offering what Postfix
// offers that the milter asks for.
func newClient(addr string) *gomilter.Client {
	return gomilter.NewClientWithOptions("tcp", addr, gomilter.ClientOptions{
		Dialer:       &net.Dialer{Timeout: 5 * time.Second},
		ReadTimeout:  10 * time.Second,
		WriteTimeout: 10 * time.Second,
		ActionMask:   gomilter.OptAddHeader | gomilter.OptChangeHeader | gomilter.OptQuarantine,
	})
}

// envelope is what an SMTP client says about a message besides the
// message itself.
type envelope struct {
	client string // IP address
	auth   string // {auth_authen}
	from   string
	rcpts  []string
	queue  string
}

func defaultEnvelope() envelope {
	return envelope{client: "198.51.100.7", from: "sender@example.net", rcpts: []string{"user@test.example"}, queue: "4ABCDEF"}
}

// splitMessage splits a raw message as an MTA hands it to a milter: the
// header fields (name, value without the space after the colon, folded
// lines kept with LF) and the body with CRLF line endings. An mbox
// "From " line is dropped.
func splitMessage(raw []byte) (fields [][2]string, body []byte) {
	if bytes.HasPrefix(raw, []byte("From ")) {
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			raw = raw[i+1:]
		}
	}
	r := bufio.NewReader(bytes.NewReader(raw))
	for {
		line, err := r.ReadString('\n')
		trimmed := strings.TrimRight(line, "\r\n")
		if trimmed == "" {
			break
		}
		if (trimmed[0] == ' ' || trimmed[0] == '\t') && len(fields) > 0 {
			fields[len(fields)-1][1] += "\n" + trimmed
		} else if name, value, ok := strings.Cut(trimmed, ":"); ok {
			fields = append(fields, [2]string{name, strings.TrimPrefix(value, " ")})
		}
		if err != nil {
			return fields, nil
		}
	}
	rest, _ := io.ReadAll(r)
	rest = bytes.ReplaceAll(rest, []byte("\r\n"), []byte("\n"))
	return fields, bytes.ReplaceAll(rest, []byte("\n"), []byte("\r\n"))
}

// reply is what the milter answered about one message.
type reply struct {
	mods []gomilter.ModifyAction
	act  *gomilter.Action
}

// added returns the value of the first header the milter added with name.
func (r reply) added(name string) (string, bool) {
	for _, m := range r.mods {
		if m.Code == gomilter.ActAddHeader && m.HeaderName == name {
			return m.HeaderValue, true
		}
	}
	return "", false
}

// result parses the X-Spamd-Result the milter added.
func (r reply) result(tb testing.TB) decide.Result {
	tb.Helper()
	v, ok := r.added(decide.ResultHeader)
	if !ok {
		tb.Fatalf("no %s added; changes: %+v", decide.ResultHeader, r.mods)
	}
	res, err := decide.ParseResult(v)
	if err != nil {
		tb.Fatal(err)
	}
	return res
}

// changes lists the ChangeHeader requests as "Name[index]=value".
func (r reply) changes() []string {
	var out []string
	for _, m := range r.mods {
		if m.Code == gomilter.ActChangeHeader {
			out = append(out, fmt.Sprintf("%s[%d]=%s", m.HeaderName, m.HeaderIndex, m.HeaderValue))
		}
	}
	sort.Strings(out)
	return out
}

// parsed is a message split as an MTA hands it to a milter.
type parsed struct {
	fields [][2]string
	body   []byte
}

func parse(raw []byte) parsed {
	f, b := splitMessage(raw)
	return parsed{f, b}
}

// send passes one message through an open session.
func send(s *gomilter.ClientSession, env envelope, raw []byte) (reply, error) {
	return sendParsed(s, env, parse(raw))
}

// sendParsed passes one split message through an open session.
func sendParsed(s *gomilter.ClientSession, env envelope, msg parsed) (reply, error) {
	if env.auth != "" {
		if err := s.Macros(gomilter.CodeMail, "{auth_authen}", env.auth); err != nil {
			return reply{}, err
		}
	}
	if act, err := s.Mail(env.from, nil); err != nil || act.Code != gomilter.ActContinue {
		return reply{act: act}, err
	}
	for _, rc := range env.rcpts {
		if act, err := s.Rcpt(rc, nil); err != nil || act.Code != gomilter.ActContinue {
			return reply{act: act}, err
		}
	}
	for _, f := range msg.fields {
		if act, err := s.HeaderField(f[0], f[1]); err != nil || act.Code != gomilter.ActContinue {
			return reply{act: act}, err
		}
	}
	if act, err := s.HeaderEnd(); err != nil || act.Code != gomilter.ActContinue {
		return reply{act: act}, err
	}
	body := msg.body
	for len(body) > 0 {
		n := min(len(body), gomilter.MaxBodyChunk)
		if act, err := s.BodyChunk(body[:n]); err != nil || act.Code != gomilter.ActContinue {
			return reply{act: act}, err
		}
		body = body[n:]
	}
	if env.queue != "" {
		if err := s.Macros(gomilter.CodeEOB, "i", env.queue); err != nil {
			return reply{}, err
		}
	}
	mods, act, err := s.End()
	return reply{mods: mods, act: act}, err
}

// openSession connects to addr and says where the SMTP client is.
func openSession(tb testing.TB, addr string, env envelope) *gomilter.ClientSession {
	tb.Helper()
	s, err := newClient(addr).Session()
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := s.Conn("client.example.net", gomilter.FamilyInet, 40000, env.client); err != nil {
		tb.Fatal(err)
	}
	return s
}

// sendOne opens a session, passes raw through it and closes it.
func sendOne(tb testing.TB, addr string, env envelope, raw []byte) reply {
	tb.Helper()
	s := openSession(tb, addr, env)
	defer s.Close()
	r, err := send(s, env, raw)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// TestMain quiets go-milter, which reports the broken peers the tests
// make through the standard logger, unless -v.
func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Verbose() {
		log.SetOutput(io.Discard)
	}
	os.Exit(m.Run())
}
