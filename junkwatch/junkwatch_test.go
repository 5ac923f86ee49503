package junkwatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/spamd/spamd/decide"
	"github.com/spamd/spamd/reportq"
	"github.com/spamd/spamd/store"
)

func TestParsePattern(t *testing.T) {
	for _, tt := range []struct {
		in, prefix, suffix string
		ok                 bool
	}{
		{"/var/mail/%u/Maildir/.Junk", "/var/mail", "Maildir/.Junk", true},
		{"/home/%u/.Junk", "/home", ".Junk", true},
		{"/srv/vmail/example.org/%u/Maildir/Junk", "/srv/vmail/example.org", "Maildir/Junk", true},
		{"var/mail/%u/Maildir/.Junk", "", "", false},
		{"/var/mail/%u", "", "", false},
		{"/%u/Maildir/.Junk", "", "", false},
		{"/var/mail/%u/%u/.Junk", "", "", false},
		{"/var/mail/u%u/Maildir/.Junk", "", "", false},
		{"/var/mail/%d/%u/Maildir/.Junk", "/var/mail", "Maildir/.Junk", true},
		{"/var/vmail/%d/%n/Maildir/.Junk", "/var/vmail", "Maildir/.Junk", true},
		{"/home/%n/Maildir/.Junk", "/home", "Maildir/.Junk", true},
		{"/var/vmail/%d/Maildir/.Junk", "", "", false},
		{"/var/vmail/%u/%n/Maildir/.Junk", "", "", false},
		{"/var/mail/../%u/Maildir/.Junk", "", "", false},
		{"/var/mail/Maildir/.Junk", "", "", false},
	} {
		t.Run(tt.in, func(t *testing.T) {
			p, err := ParsePattern(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("ParsePattern: %v", err)
			}
			if tt.ok && (p.Prefix() != tt.prefix || p.p.Suffix() != tt.suffix || p.String() != tt.in) {
				t.Errorf("got %q %q (%s)", p.Prefix(), p.p.Suffix(), p)
			}
		})
	}
}

func TestExpandRefusesCraftedNames(t *testing.T) {
	p, err := ParsePattern("/var/mail/%u/Maildir/.Junk")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, user string
		ok         bool
	}{
		{"plain", "alice", true},
		{"address", "bob@example.org", true},
		{"dot dot", "..", false},
		{"climbing", "../x", false},
		{"slash", "a/b", false},
		{"empty", "", false},
		{"hidden", ".x", false},
		{"10 kB", strings.Repeat("a", 10<<10), false},
		{"NUL", "a\x00b", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.Expand(tt.user)
			if (err == nil) != tt.ok {
				t.Fatalf("Expand: %q, %v", got, err)
			}
			if !tt.ok && !errors.Is(err, store.ErrInvalidUser) {
				t.Errorf("error %v does not wrap store.ErrInvalidUser", err)
			}
			if tt.ok && got != "/var/mail/"+tt.user+"/Maildir/.Junk" {
				t.Errorf("got %q", got)
			}
		})
	}
}

// mailboxes is a directory of users' Maildir++ maildirs, changed the way
// Dovecot changes them (dovecot-imapsieve.md §8).
type mailboxes struct {
	t    *testing.T
	base string
	// layout is the path from base to a user's directory, in Dovecot's
	// variables: %u, or %d/%n.
	layout string
	seq    atomic.Int64
}

func newMailboxes(t *testing.T, users ...string) *mailboxes {
	return newMailboxesIn(t, "%u", users...)
}

// newMailboxesIn is newMailboxes with the users' directories at layout.
func newMailboxesIn(t *testing.T, layout string, users ...string) *mailboxes {
	m := &mailboxes{t: t, base: t.TempDir(), layout: layout}
	for _, u := range users {
		m.add(u)
	}
	return m
}

// add makes user's maildir: INBOX, Junk and Trash.
func (m *mailboxes) add(user string) {
	for _, f := range []string{"", ".Junk", ".Trash"} {
		m.folder(user, f)
	}
}

// folder makes a folder of user's maildir ("" is INBOX) and returns it.
func (m *mailboxes) folder(user, name string) string {
	udir, err := m.pattern().Dir(user)
	if err != nil {
		m.t.Fatal(err)
	}
	dir := filepath.Join(udir, "Maildir", name)
	for _, sub := range []string{"cur", "new", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			m.t.Fatal(err)
		}
	}
	return dir
}

func (m *mailboxes) pattern() Pattern {
	p, err := ParsePattern(filepath.Join(m.base, m.layout, "Maildir", ".Junk"))
	if err != nil {
		m.t.Fatal(err)
	}
	return p
}

// name returns a fresh maildir file name for a message of size bytes.
func (m *mailboxes) name(size int) string {
	return fmt.Sprintf("%d.M%dP1.test,S=%d,W=%d", time.Now().Unix(), m.seq.Add(1), size, size+10)
}

// deliver writes raw into folder/new as a delivery agent does: tmp/, then
// a rename.
func (m *mailboxes) deliver(folder string, raw []byte) string {
	name := m.name(len(raw))
	tmp := filepath.Join(folder, "tmp", name)
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		m.t.Fatal(err)
	}
	dst := filepath.Join(folder, "new", name)
	if err := os.Rename(tmp, dst); err != nil {
		m.t.Fatal(err)
	}
	return dst
}

// move moves the message at src into folder as Dovecot does: a hard link
// into tmp/ under a fresh name, a rename into cur/ (keeping the flags),
// then the unlink of the source. With rename set, the message gets a new
// base name.
func (m *mailboxes) move(src, folder string, rename bool) string {
	base, flags, _ := strings.Cut(filepath.Base(src), ":2,")
	if rename {
		fi, err := os.Stat(src)
		if err != nil {
			m.t.Fatal(err)
		}
		base = m.name(int(fi.Size()))
	}
	tmp := filepath.Join(folder, "tmp", m.name(0))
	if err := os.Link(src, tmp); err != nil {
		m.t.Fatal(err)
	}
	dst := filepath.Join(folder, "new", base)
	if flags != "" || strings.Contains(filepath.Base(src), ":2,") {
		dst = filepath.Join(folder, "cur", base+":2,"+flags)
	}
	if err := os.Rename(tmp, dst); err != nil {
		m.t.Fatal(err)
	}
	if err := os.Remove(src); err != nil {
		m.t.Fatal(err)
	}
	return dst
}

// copyMove moves the message at src into folder as a copy, not a link:
// what Dovecot does across file systems.
func (m *mailboxes) copyMove(src, folder string) string {
	raw, err := os.ReadFile(src)
	if err != nil {
		m.t.Fatal(err)
	}
	dst := m.deliver(folder, raw)
	if err := os.Remove(src); err != nil {
		m.t.Fatal(err)
	}
	return dst
}

// flag changes the flags of the message at path: a rename into cur/.
func (m *mailboxes) flag(path, flags string) string {
	base, _, _ := strings.Cut(filepath.Base(path), ":2,")
	dst := filepath.Join(filepath.Dir(filepath.Dir(path)), "cur", base+":2,"+flags)
	if err := os.Rename(path, dst); err != nil {
		m.t.Fatal(err)
	}
	return dst
}

// message returns a distinct message; verdict, if set, is the milter's
// in X-Spamd-Result.
func message(n int, verdict string) []byte {
	h := ""
	if verdict != "" {
		h = decide.ResultHeader + ": " + decide.Result{Verdict: verdict, Probability: 0.5}.String() + "\n"
	}
	return fmt.Appendf(nil, "%sFrom: sender%d@example.net\nTo: user@example.org\nSubject: offer %d\nMessage-ID: <%d@example.net>\n\nbody %d\n", h, n, n, n, n)
}

// reports collects what a watcher reports.
type reports struct {
	mu  sync.Mutex
	got []reportq.Report
	ch  chan struct{}
}

func newReports() *reports { return &reports{ch: make(chan struct{}, 1000)} }

func (r *reports) report(_ context.Context, rp reportq.Report) error {
	if err := rp.Check(); err != nil {
		return err
	}
	r.mu.Lock()
	r.got = append(r.got, rp)
	r.mu.Unlock()
	r.ch <- struct{}{}
	return nil
}

func (r *reports) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rp := range r.got {
		out = append(out, rp.User+":"+rp.Class+":"+strings.TrimSpace(string(rp.Message[strings.LastIndex(string(rp.Message), "body"):])))
	}
	return out
}

// expect waits for the reports to be want, then a moment for any more.
func (r *reports) expect(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for len(r.list()) < len(want) {
		select {
		case <-r.ch:
		case <-deadline:
			t.Fatalf("reports %q, want %q", r.list(), want)
		}
	}
	time.Sleep(150 * time.Millisecond)
	if got := r.list(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("reports %q, want %q", got, want)
	}
	r.mu.Lock()
	r.got = nil
	r.mu.Unlock()
}

// logBuffer is a log the test can read while the watcher writes it.
type logBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// watching waits until the watcher logged that it watches user.
func (b *logBuffer) watching(t *testing.T, user string) {
	t.Helper()
	waitFor(t, func() bool { return strings.Contains(b.String(), "junkwatch: watching\" user="+user+" ") })
}

// start runs a watcher over m, reporting to report, until the test
// ends, once it watches every user of m, and returns its log.
func start(t *testing.T, m *mailboxes, report func(context.Context, reportq.Report) error) *logBuffer {
	t.Helper()
	return startWith(t, m, Options{Report: report})
}

// startWith is start with o's Report and Model.
func startWith(t *testing.T, m *mailboxes, o Options) *logBuffer {
	t.Helper()
	log := &logBuffer{}
	w, err := New(Options{Pattern: m.pattern(), Trash: []string{".Trash"}, Rescan: time.Hour, Report: o.Report, Model: o.Model,
		Log: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
		if t.Failed() {
			t.Logf("log:\n%s", log)
		}
	})
	users, _, err := m.pattern().Users()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		log.watching(t, u)
	}
	return log
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

func TestWatcher(t *testing.T) {
	m := newMailboxes(t, "alice", "bob")
	inbox, junk, trash := m.folder("alice", ""), m.folder("alice", ".Junk"), m.folder("alice", ".Trash")
	// Already in Junk when the watcher starts: not reported.
	old := m.deliver(junk, message(0, ""))
	rs := newReports()
	log := start(t, m, rs.report)

	// A spam the filter missed is delivered to INBOX, read, moved to Junk.
	p := m.deliver(inbox, message(1, "ham"))
	p = m.flag(p, "S")
	rs.expect(t)
	p = m.move(p, junk, false)
	rs.expect(t, "alice:spam:body 1")
	// Flags change in Junk: nothing.
	p = m.flag(p, "ST")
	p = m.flag(p, "S")
	rs.expect(t)
	// Moved back to INBOX under a new name: ham, once.
	p = m.move(p, inbox, true)
	rs.expect(t, "alice:ham:body 1")
	p = m.flag(p, "RS")
	rs.expect(t)
	// And to Junk again, then to Trash: spam, then nothing.
	p = m.move(p, junk, false)
	rs.expect(t, "alice:spam:body 1")
	m.move(p, trash, false)
	rs.expect(t)
	// Unflagged in new/, moved out, then the destination renames it to
	// cur/ as a client selecting the folder makes it.
	p = m.move(old, inbox, false)
	m.flag(p, "")
	rs.expect(t, "alice:ham:body 0")

	// Delivered straight to Junk: spam unless the filter said spam.
	m.deliver(junk, message(2, "spam"))
	m.deliver(junk, message(3, "unsure"))
	rs.expect(t, "alice:spam:body 3")

	// A move across file systems is a copy: matched by content.
	p = m.deliver(junk, message(4, ""))
	rs.expect(t, "alice:spam:body 4")
	m.copyMove(p, inbox)
	rs.expect(t, "alice:ham:body 4")

	// A folder made now, and a message moved into it from Junk.
	p = m.deliver(junk, message(5, ""))
	rs.expect(t, "alice:spam:body 5")
	work := m.folder("alice", ".Work")
	m.move(p, work, false)
	rs.expect(t, "alice:ham:body 5")

	// Moving between folders other than Junk: nothing.
	p = m.deliver(inbox, message(6, ""))
	p = m.move(p, work, false)
	m.move(p, trash, false)
	rs.expect(t)

	// bob's moves are his.
	p = m.deliver(m.folder("bob", ""), message(7, ""))
	m.move(p, m.folder("bob", ".Junk"), false)
	rs.expect(t, "bob:spam:body 7")

	// A user who appears later.
	for _, f := range []string{"", ".Junk"} {
		m.folder("carol", f)
	}
	log.watching(t, "carol")
	p = m.deliver(m.folder("carol", ""), message(8, ""))
	m.move(p, m.folder("carol", ".Junk"), false)
	rs.expect(t, "carol:spam:body 8")
}

// TestRescan drives the watcher by rescans alone, as on a file system
// that sends no events.
func TestRescan(t *testing.T) {
	m := newMailboxes(t, "alice", "bob")
	inbox, junk, trash := m.folder("alice", ""), m.folder("alice", ".Junk"), m.folder("alice", ".Trash")
	rs := newReports()
	w, err := New(Options{Pattern: m.pattern(), Trash: []string{".Trash"}, Report: rs.report})
	if err != nil {
		t.Fatal(err)
	}
	// Events are queued and never read.
	if w.fsw, err = fsnotify.NewBufferedWatcher(100000); err != nil {
		t.Fatal(err)
	}
	defer w.fsw.Close()
	ctx := context.Background()
	a := m.deliver(inbox, message(1, "ham"))
	b := m.deliver(junk, message(2, ""))
	c := m.deliver(junk, message(3, ""))
	w.rescan(ctx)
	rs.expect(t)

	a = m.move(a, junk, true)
	m.move(b, inbox, true)
	m.move(c, trash, false)
	m.folder("alice", ".Work")
	w.rescan(ctx)
	rs.expect(t, "alice:spam:body 1", "alice:ham:body 2")
	w.rescan(ctx)
	rs.expect(t)

	m.move(a, m.folder("alice", ".Work"), false)
	w.rescan(ctx)
	rs.expect(t, "alice:ham:body 1")
}

func TestUsersSkipped(t *testing.T) {
	m := newMailboxes(t, "alice")
	for _, name := range []string{".hidden", "-x", "b o b", "a\\b"} {
		os.MkdirAll(filepath.Join(m.base, name, "Maildir", ".Junk", "cur"), 0o700)
	}
	os.Symlink(filepath.Join(m.base, "alice"), filepath.Join(m.base, "mallory"))
	os.WriteFile(filepath.Join(m.base, "file"), nil, 0o600)
	users, skipped, err := m.pattern().Users()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(users, ",") != "alice" || len(skipped) != 6 {
		t.Errorf("users %q, skipped %q", users, skipped)
	}
}

// FuzzParsePattern checks that a pattern that parses expands every valid
// user name to a path inside its prefix, one element below it.
func FuzzParsePattern(f *testing.F) {
	f.Add("/var/mail/%u/Maildir/.Junk", "alice")
	f.Add("/home/%u/.Junk", "../x")
	f.Add("/a/%u/%u", "b")
	f.Add("/var/vmail/%d/%n/Maildir/.Junk", "alice@example.org")
	f.Add("/var/vmail/%d/%n/Maildir/.Junk", "a@../x")
	f.Add("/srv/%n/%d/x", "a@b@c")
	f.Fuzz(func(t *testing.T, pattern, user string) {
		p, err := ParsePattern(pattern)
		if err != nil {
			return
		}
		again, err := ParsePattern(p.String())
		if err != nil || again.String() != p.String() {
			t.Fatalf("%q → %q does not parse back: %v", pattern, p, err)
		}
		junk, err := p.Expand(user)
		if err != nil {
			return
		}
		// The user's parts are elements of their own, where the
		// pattern's variables are.
		rel, err := filepath.Rel(p.Prefix(), junk)
		want := strings.Split(strings.TrimPrefix(p.String(), p.Prefix()+"/"), "/")
		if err != nil || strings.HasPrefix(rel, "..") || filepath.Clean(junk) != junk || len(strings.Split(rel, "/")) != len(want) {
			t.Fatalf("user %q expands to %q, outside %q or not as %q", user, junk, p.Prefix(), p)
		}
	})
}

func FuzzSizeInName(f *testing.F) {
	f.Add("1795283350.M198900P28454.vm,S=142,W=149:2,S")
	f.Add("1.M1P1.x,S=")
	f.Fuzz(func(t *testing.T, name string) {
		if n, ok := sizeInName(name); ok && (n < 0 || !strings.Contains(name, ",S="+strconv.FormatInt(n, 10))) {
			// Leading zeros and signs aside, the size is what the name says.
			if !strings.Contains(name, ",S=0") && !strings.Contains(name, ",S=+") {
				t.Fatalf("%q: size %d", name, n)
			}
		}
	})
}

// TestModelNaming checks that a folder's moves train the model the
// site's naming rule gives its user, and none when it gives none.
func TestModelNaming(t *testing.T) {
	m := newMailboxes(t, "alice", "bob")
	rs := newReports()
	model := func(user string) (string, bool) {
		if user == "alice" {
			return "alice@example.org", true
		}
		return "", false
	}
	log := startWith(t, m, Options{Report: rs.report, Model: model})
	p := m.deliver(m.folder("alice", ""), message(1, ""))
	m.move(p, m.folder("alice", ".Junk"), false)
	rs.expect(t, "alice@example.org:spam:body 1")
	p = m.deliver(m.folder("bob", ""), message(2, ""))
	m.move(p, m.folder("bob", ".Junk"), false)
	waitFor(t, func() bool { return strings.Contains(log.String(), "not reported") })
	if got := rs.list(); len(got) != 0 {
		t.Errorf("reports %q: bob's move names no model and must not be reported", got)
	}
}

// TestDomainLayout watches maildirs laid out as Dovecot's
// /var/vmail/%d/%n: a folder's user is n@d, and a domain and a user that
// appear while the watcher runs are watched.
func TestDomainLayout(t *testing.T) {
	m := newMailboxesIn(t, "%d/%n", "alice@example.org", "bob@example.net")
	os.MkdirAll(filepath.Join(m.base, "example.org", "Not A User"), 0o700)
	if users, skipped, err := m.pattern().Users(); err != nil || strings.Join(users, " ") != "bob@example.net alice@example.org" && strings.Join(users, " ") != "alice@example.org bob@example.net" || len(skipped) != 1 {
		t.Fatalf("users %q, skipped %q, %v", users, skipped, err)
	}
	rs := newReports()
	log := start(t, m, rs.report)
	a := m.deliver(m.folder("alice@example.org", ""), message(1, ""))
	m.move(a, m.folder("alice@example.org", ".Junk"), false)
	rs.expect(t, "alice@example.org:spam:body 1")

	// A new domain and its user, made while the watcher runs.
	m.add("carol@example.com")
	log.watching(t, "carol@example.com")
	c := m.deliver(m.folder("carol@example.com", ""), message(2, ""))
	m.move(c, m.folder("carol@example.com", ".Junk"), false)
	rs.expect(t, "carol@example.com:spam:body 2")
	// And a new user of a domain already watched.
	m.add("dave@example.org")
	log.watching(t, "dave@example.org")
	d := m.deliver(m.folder("dave@example.org", ""), message(3, ""))
	m.move(d, m.folder("dave@example.org", ".Junk"), false)
	rs.expect(t, "dave@example.org:spam:body 3")
}
