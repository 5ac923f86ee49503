package history

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spamd/spamd/store"
)

func newRing(t testing.TB, size int, msgBytes int64) *Ring {
	t.Helper()
	r, err := New(Options{Size: size, MaxMessageBytes: msgBytes})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// entry returns an entry of verdict to rcpts, whose user is each
// recipient's local part.
func entry(verdict string, rcpts ...string) Entry {
	e := Entry{Time: time.Unix(1700000000, 0).UTC(), Sender: "s@example.net", Verdict: verdict, Action: "accept",
		Recipients: rcpts, Models: []string{""}}
	for _, r := range rcpts {
		u, _, _ := strings.Cut(r, "@")
		e.Users = append(e.Users, u)
	}
	return e
}

func ids(es []Entry) []uint64 {
	out := make([]uint64, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func TestNew(t *testing.T) {
	for _, o := range []Options{{Size: 0}, {Size: -1}, {Size: 1, MaxMessageBytes: -1}} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

// TestRing checks that the ring keeps the last Size entries in order and
// that List selects among them, newest first.
func TestRing(t *testing.T) {
	r := newRing(t, 5, 0)
	for i := range 8 {
		v := []string{"spam", "ham"}[i%2]
		if id := r.Add(entry(v, fmt.Sprintf("u%d@example.org", i%3)), nil); id != uint64(i+1) {
			t.Fatalf("entry %d got ID %d", i, id)
		}
	}
	for _, tt := range []struct {
		name string
		q    Query
		want []uint64
	}{
		{"all", Query{}, []uint64{8, 7, 6, 5, 4}},
		{"limit", Query{Limit: 2}, []uint64{8, 7}},
		{"before", Query{Before: 7}, []uint64{6, 5, 4}},
		{"before and limit", Query{Before: 7, Limit: 1}, []uint64{6}},
		{"after", Query{After: 6}, []uint64{8, 7}},
		{"before an evicted ID", Query{Before: 2}, nil},
		{"after everything", Query{After: 8}, nil},
		{"match", Query{Match: func(e *Entry) bool { return e.Verdict == "spam" }}, []uint64{7, 5}},
		{"belongs", Query{Match: func(e *Entry) bool { return e.Belongs("u1") }}, []uint64{8, 5}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := ids(r.List(tt.q)); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	if _, _, ok := r.Get(3); ok {
		t.Error("an evicted entry is still there")
	}
	if e, _, ok := r.Get(6); !ok || e.ID != 6 {
		t.Errorf("Get(6) = %+v, %v", e, ok)
	}
	if st := r.Stats(); st.Entries != 5 || st.Size != 5 {
		t.Errorf("stats %+v", st)
	}
}

// TestMessages checks that the messages held stay within their budget,
// the oldest let go first, their entries kept.
func TestMessages(t *testing.T) {
	r := newRing(t, 10, 250)
	msg := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, 100) }
	for i := range 4 {
		r.Add(entry("spam", "a@example.org"), msg(i))
	}
	st := r.Stats()
	if st.Messages != 2 || st.MessageBytes != 200 {
		t.Fatalf("stats %+v: want the last 2 messages held, 200 bytes", st)
	}
	for id, held := range map[uint64]bool{1: false, 2: false, 3: true, 4: true} {
		e, m, ok := r.Get(id)
		if !ok || e.Held != held || (m != nil) != held {
			t.Errorf("entry %d: ok %v, held %v, message %d bytes; want held %v", id, ok, e.Held, len(m), held)
		}
		if held && !bytes.Equal(m, msg(int(id-1))) {
			t.Errorf("entry %d holds another message", id)
		}
	}
	// A message larger than the whole budget is not held, and lets go of
	// nothing.
	r.Add(entry("ham", "a@example.org"), make([]byte, 300))
	if e, m, _ := r.Get(5); e.Held || m != nil {
		t.Error("a message over the budget is held")
	}
	if st := r.Stats(); st.Messages != 2 {
		t.Errorf("stats %+v after a message over the budget", st)
	}
	// The caller may reuse its buffer: the ring holds a copy.
	buf := msg(9)
	r.Add(entry("ham", "a@example.org"), buf)
	buf[0] = 'X'
	if _, m, _ := r.Get(6); m[0] != 'j' {
		t.Error("the ring holds the caller's buffer, not a copy")
	}
	// Evicting an entry gives back its message's bytes.
	small := newRing(t, 2, 1000)
	for i := range 5 {
		small.Add(entry("spam"), msg(i))
	}
	if st := small.Stats(); st.Messages != 2 || st.MessageBytes != 200 {
		t.Errorf("stats %+v after evictions", st)
	}
}

func TestTrim(t *testing.T) {
	r := newRing(t, 1, 0)
	var rcpts []string
	for i := range MaxRecipients + 7 {
		rcpts = append(rcpts, fmt.Sprintf("user%d@example.org", i))
	}
	e := entry("spam", rcpts...)
	e.Subject = strings.Repeat("é", 400) // 800 bytes
	e.Toward = map[string][]Feature{"spam": make([]Feature, 80)}
	r.Add(e, nil)
	got, _, _ := r.Get(1)
	switch {
	case len(got.Recipients) != MaxRecipients || got.MoreRecipients != 7 || len(got.Users) != MaxRecipients:
		t.Errorf("%d recipients, %d more, %d users", len(got.Recipients), got.MoreRecipients, len(got.Users))
	case len(got.Subject) > maxText || !strings.HasPrefix(e.Subject, got.Subject) || !strings.HasSuffix(got.Subject, "é"):
		t.Errorf("subject of %d bytes not cut at a character", len(got.Subject))
	case len(got.Toward["spam"]) != maxFeatures:
		t.Errorf("%d features kept", len(got.Toward["spam"]))
	}
}

func TestRedacted(t *testing.T) {
	e := entry("spam", "alice@a.example", "bob@b.example", "alice@c.example")
	e.Models = []string{"bob", "alice", ""}
	e.MoreRecipients = 3
	got := e.Redacted("alice")
	if fmt.Sprint(got.Recipients) != "[alice@a.example alice@c.example]" || fmt.Sprint(got.Users) != "[alice alice]" ||
		fmt.Sprint(got.Models) != "[alice ]" || got.MoreRecipients != 0 {
		t.Errorf("redacted for alice: %+v", got)
	}
	if len(e.Recipients) != 3 {
		t.Error("redacting changed the entry")
	}
	if got := e.Redacted("carol"); len(got.Recipients) != 0 || got.Recipients == nil {
		t.Errorf("redacted for carol: %v", got.Recipients)
	}
	if e.Belongs("") || !e.Belongs("bob") || e.Belongs("carol") {
		t.Error("Belongs")
	}
	// The model whose verdict stood is named only when it is the
	// reader's or the global one.
	for _, tt := range []struct{ model, reader, want string }{
		{"bob", "alice", Withheld},
		{"bob", "bob", "bob"},
		{"", "alice", ""},
		{"alice", "alice", "alice"},
	} {
		e.Model = tt.model
		if got := e.Redacted(tt.reader).Model; got != tt.want {
			t.Errorf("model %q redacted for %q: %q, want %q", tt.model, tt.reader, got, tt.want)
		}
	}
	if store.ValidUser(Withheld) == nil {
		t.Errorf("%q is a valid model name", Withheld)
	}
}

func TestTrained(t *testing.T) {
	r := newRing(t, 1, 0)
	t0 := time.Unix(1700000000, 0)
	r.Trained("", t0)
	r.Trained("alice", t0.Add(time.Hour))
	r.Trained("alice", t0) // older: kept the later
	if at, ok := r.LastTrained("alice"); !ok || !at.Equal(t0.Add(time.Hour)) {
		t.Errorf("alice last trained %v %v", at, ok)
	}
	if _, ok := r.LastTrained("bob"); ok {
		t.Error("bob was never trained")
	}
	long := strings.Repeat("x", store.MaxUserLen+1)
	if r.Trained(long, t0); maxUser != store.MaxUserLen {
		t.Errorf("maxUser %d, store.MaxUserLen %d", maxUser, store.MaxUserLen)
	}
	if _, ok := r.LastTrained(long); ok {
		t.Error("a name longer than any model's is remembered")
	}
}

// TestSaveLoad checks that the entries and the models' last training
// outlive a restart, without the messages, and that the file is private.
func TestSaveLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	r := newRing(t, 3, 1<<20)
	if n, err := r.Load(path); err != nil || n.Entries != 0 {
		t.Fatalf("loading a missing file: %+v %v", n, err)
	}
	for i := range 4 {
		e := entry([]string{"spam", "ham"}[i%2], "alice@example.org")
		e.Toward = map[string][]Feature{"spam": {{Name: "viagra", Value: 2, Weight: 1.5}}}
		e.Digest[0] = byte(i)
		r.Add(e, []byte("Subject: x\r\n\r\nbody"))
	}
	trained := time.Unix(1700000000, 0).UTC()
	r.Trained("alice", trained)
	if wrote, err := r.Save(path); err != nil || !wrote {
		t.Fatalf("save: %v %v", wrote, err)
	}
	if wrote, err := r.Save(path); err != nil || wrote {
		t.Errorf("saving again with nothing new: wrote %v, %v", wrote, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".history*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}

	back := newRing(t, 3, 1<<20)
	n, err := back.Load(path)
	if err != nil || n.Entries != 3 || n.Skipped != 0 {
		t.Fatalf("load: %+v %v", n, err)
	}
	want, got := r.List(Query{}), back.List(Query{})
	if fmt.Sprint(ids(got)) != "[4 3 2]" {
		t.Fatalf("loaded %v", ids(got))
	}
	for i := range want {
		w := want[i]
		w.Held = false
		if fmt.Sprintf("%+v", got[i]) != fmt.Sprintf("%+v", w) {
			t.Errorf("entry %d loaded as\n%+v\nwant\n%+v", w.ID, got[i], w)
		}
	}
	if _, m, _ := back.Get(4); m != nil {
		t.Error("a message came back from the file")
	}
	if at, ok := back.LastTrained("alice"); !ok || !at.Equal(trained) {
		t.Errorf("last trained %v %v", at, ok)
	}
	if id := back.Add(entry("ham"), nil); id != 5 {
		t.Errorf("the next entry after loading is %d, want 5", id)
	}
	// A smaller ring keeps the newest.
	one := newRing(t, 1, 0)
	if n, err := one.Load(path); err != nil || n.Entries != 1 || fmt.Sprint(ids(one.List(Query{}))) != "[4]" {
		t.Errorf("into a ring of 1: %+v %v %v", n, err, ids(one.List(Query{})))
	}
}

// TestLoadDamaged checks that a damaged file loses only its bad lines,
// and that a file that is not a history is refused.
func TestLoadDamaged(t *testing.T) {
	dir := t.TempDir()
	good := func(id int) string {
		return fmt.Sprintf(`{"id":%d,"time":"2024-01-01T00:00:00Z","sender":"","recipients":[],"verdict":"ham","action":"accept","size":1,"elapsed_ms":1,"digest":"%064x","held":true}`, id, id)
	}
	for _, tt := range []struct {
		name          string
		content       string
		entries, skip int
		err           error
	}{
		{"bad lines", `{"spamd_history":1}` + "\n" + good(1) + "\n{not json\n" + good(2) + "\n" + `{"id":3}` + "\n" + good(3), 3, 2, nil},
		{"out of order", `{"spamd_history":1}` + "\n" + good(5) + "\n" + good(4) + "\n" + good(6) + "\n", 2, 1, nil},
		{"cut short", `{"spamd_history":1}` + "\n" + good(1) + "\n" + good(2)[:40], 1, 1, nil},
		{"line too long", `{"spamd_history":1}` + "\n" + strings.Repeat("x", maxLine+10) + "\n" + good(1) + "\n", 1, 1, nil},
		{"CRLF", `{"spamd_history":1}` + "\r\n" + good(1) + "\r\n", 1, 0, nil},
		{"empty", "", 0, 0, ErrFormat},
		{"other version", `{"spamd_history":2}` + "\n" + good(1), 0, 0, ErrFormat},
		{"not a history", "[store]\ndir = \"/x\"\n", 0, 0, ErrFormat},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-"))
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			r := newRing(t, 10, 0)
			n, err := r.Load(path)
			if !errors.Is(err, tt.err) || n.Entries != tt.entries || n.Skipped != tt.skip {
				t.Errorf("loaded %+v, %v; want %d entries, %d skipped, error %v", n, err, tt.entries, tt.skip, tt.err)
			}
			for _, e := range r.List(Query{}) {
				if e.Held {
					t.Errorf("entry %d says its message is held", e.ID)
				}
			}
		})
	}
}

// TestConcurrent adds, lists and saves at once, for the race detector.
func TestConcurrent(t *testing.T) {
	r := newRing(t, 50, 2000)
	path := filepath.Join(t.TempDir(), "h")
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				switch (g + i) % 4 {
				case 0, 1:
					r.Add(entry("spam", "a@example.org"), make([]byte, 100))
				case 2:
					for _, e := range r.List(Query{Limit: 10}) {
						r.Get(e.ID)
					}
					r.Stats()
				case 3:
					if _, err := r.Save(path); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if st := r.Stats(); st.Entries != 50 || st.MessageBytes > 2000 {
		t.Errorf("stats %+v", st)
	}
}

// FuzzLoad feeds arbitrary files to Load: it never panics, and what it
// loads is within the ring's bounds and in order.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(`{"spamd_history":1}` + "\n" + `{"id":1,"verdict":"ham","recipients":["a@b"],"users":["a","b","c"]}` + "\n"))
	f.Add([]byte(`{"spamd_history":1,"trained":{"":"2024-01-01T00:00:00Z"}}` + "\n{}\n\n" + `{"id":9,"verdict":"spam","toward":{"spam":[{"name":"x"}]}}`))
	f.Add([]byte("{\"spamd_history\":1}\n{\"id\":18446744073709551615,\"verdict\":\"x\"}\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "h")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		r := newRing(t, 4, 0)
		if _, err := r.Load(path); err != nil && !errors.Is(err, ErrFormat) {
			return
		}
		es := r.List(Query{})
		if len(es) > 4 {
			t.Fatalf("%d entries in a ring of 4", len(es))
		}
		for i, e := range es {
			if i > 0 && e.ID >= es[i-1].ID {
				t.Fatalf("IDs out of order: %v", ids(es))
			}
			if len(e.Users) > len(e.Recipients) || len(e.Recipients) > MaxRecipients {
				t.Fatalf("entry out of bounds: %+v", e)
			}
		}
		r.Add(entry("ham"), nil)
	})
}

// TestSaveLoadManyModels checks that the last training of many models
// comes back: they all stand in the file's first line.
func TestSaveLoadManyModels(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	r := newRing(t, 2, 0)
	r.Add(entry("spam", "a@example.org"), nil)
	at := time.Unix(1700000000, 123456789).UTC()
	const models = 5000
	long := strings.Repeat("x", maxUser-20)
	for i := range models {
		r.Trained(fmt.Sprintf("%s-%06d@example.org", long[:i%len(long)], i), at)
	}
	if _, err := r.Save(path); err != nil {
		t.Fatal(err)
	}
	back := newRing(t, 2, 0)
	if n, err := back.Load(path); err != nil || n.Entries != 1 {
		t.Fatalf("load: %+v %v", n, err)
	}
	for i := range models {
		if got, ok := back.LastTrained(fmt.Sprintf("%s-%06d@example.org", long[:i%len(long)], i)); !ok || !got.Equal(at) {
			t.Fatalf("model %d last trained %v %v", i, got, ok)
		}
	}
}
