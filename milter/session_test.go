package milter

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gomilter "github.com/emersion/go-milter"

	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/tokenize"
)

func TestForgedHeadersRemovedBeforeAdding(t *testing.T) {
	f, spam, ham := trainedFilter(t, store.NewMemory())
	_, addr := startServer(t, testSettings(f), nil)
	for _, tt := range []struct {
		name string
		raw  []byte
		flag string
	}{{"ham forging YES", ham, "NO"}, {"spam forging NO", spam, "YES"}} {
		t.Run(tt.name, func(t *testing.T) {
			r := sendOne(t, addr, defaultEnvelope(), forged(tt.raw))
			want := []string{"X-Spam-Flag[1]=", "X-Spam-Flag[2]=", "X-Spam-Status[1]=", "X-Spamd-Result[1]="}
			if !slices.Equal(r.changes(), want) {
				t.Errorf("changes %q, want %q", r.changes(), want)
			}
			lastRemoval, firstAdd := -1, len(r.mods)
			for i, m := range r.mods {
				switch m.Code {
				case gomilter.ActChangeHeader:
					lastRemoval = i
				case gomilter.ActAddHeader:
					firstAdd = min(firstAdd, i)
				}
			}
			if lastRemoval > firstAdd {
				t.Errorf("a forged field was removed after the milter's own were added: %+v", r.mods)
			}
			if v, _ := r.added("X-Spam-Flag"); v != tt.flag {
				t.Errorf("X-Spam-Flag %q, want %q", v, tt.flag)
			}
			// Fields of the same name are removed from the last to the first.
			var idx []uint32
			for _, m := range r.mods {
				if m.Code == gomilter.ActChangeHeader && m.HeaderName == "X-Spam-Flag" {
					idx = append(idx, m.HeaderIndex)
				}
			}
			if !slices.Equal(idx, []uint32{2, 1}) {
				t.Errorf("X-Spam-Flag removed at %v, want [2 1]", idx)
			}
		})
	}
}

func TestSeveralMessagesOnOneConnection(t *testing.T) {
	f, spam, ham := trainedFilter(t, store.NewMemory())
	srv, addr := startServer(t, testSettings(f), nil)
	s := openSession(t, addr, defaultEnvelope())
	defer s.Close()
	for i, tt := range []struct {
		raw  []byte
		flag string
		set  func(*Settings)
	}{
		{ham, "NO", nil},
		{spam, "YES", nil},
		// New settings apply from the next message on the same connection.
		{spam, "", func(s *Settings) { s.Actions.Reject, s.Actions.RejectScore = true, 0 }},
		{ham, "NO", nil},
	} {
		if tt.set != nil {
			set := *srv.Settings()
			tt.set(&set)
			srv.Update(&set)
		}
		r, err := send(s, defaultEnvelope(), tt.raw)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if tt.flag == "" {
			if r.act.Code != gomilter.ActReplyCode || r.act.SMTPCode != 550 {
				t.Errorf("message %d: answer %+v, want 550", i, r.act)
			}
			continue
		}
		if v, _ := r.added("X-Spam-Flag"); r.act.Code != gomilter.ActAccept || v != tt.flag {
			t.Errorf("message %d: answer %c, X-Spam-Flag %q; want accept, %q", i, r.act.Code, v, tt.flag)
		}
	}
}

func TestAbortedMessage(t *testing.T) {
	f, spam, ham := trainedFilter(t, store.NewMemory())
	_, addr := startServer(t, testSettings(f), nil)
	s := openSession(t, addr, defaultEnvelope())
	defer s.Close()
	if _, err := s.Mail("a@example.net", nil); err != nil {
		t.Fatal(err)
	}
	fields, _ := splitMessage(spam)
	for _, fl := range fields[:3] {
		if _, err := s.HeaderField(fl[0], fl[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Abort(); err != nil {
		t.Fatal(err)
	}
	// Nothing of the aborted message leaks into the next.
	r, err := send(s, defaultEnvelope(), ham)
	if err != nil {
		t.Fatal(err)
	}
	if res := r.result(t); res.Verdict != "ham" {
		t.Errorf("after an abort: %+v", res)
	}
	if res := r.result(t); res.Signature != tokenize.Digest(ham) {
		t.Errorf("signature %x is not the second message's", res.Signature)
	}
}

func TestRecipientModels(t *testing.T) {
	st := store.NewMemory()
	f, spam, _ := trainedFilter(t, st)
	// bob's model has the labels the other way round: what the global
	// model calls spam, his calls ham.
	ctx := context.Background()
	s := loadSample(t)
	for class, msgs := range map[string][][]byte{filter.Ham: s.spam, filter.Spam: s.ham} {
		for _, m := range msgs {
			if _, err := f.Learn(ctx, "bob@test.example", m, class); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tt := range []struct {
		name    string
		users   string
		rcpts   []string
		verdict string
	}{
		{"no model of their own", "address", []string{"alice@test.example"}, "spam"},
		{"own model", "address", []string{"Bob@Test.Example"}, "ham"},
		{"mixed: the least spammy verdict", "address", []string{"alice@test.example", "bob@test.example"}, "ham"},
		{"global only", "global", []string{"bob@test.example"}, "spam"},
		{"local part has no model", "localpart", []string{"bob@test.example"}, "spam"},
		{"invalid user name", "address", []string{"b o b@test.example"}, "spam"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			set := testSettings(f)
			set.Milter.Users = tt.users
			_, addr := startServer(t, set, nil)
			env := defaultEnvelope()
			env.rcpts = tt.rcpts
			if res := sendOne(t, addr, env, spam).result(t); res.Verdict != tt.verdict {
				t.Errorf("verdict %s, want %s", res.Verdict, tt.verdict)
			}
		})
	}
}

// dialer remembers the connections it makes.
type dialer struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (d *dialer) Dial(network, addr string) (net.Conn, error) {
	c, err := net.Dial(network, addr)
	if err == nil {
		d.mu.Lock()
		d.conns = append(d.conns, c)
		d.mu.Unlock()
	}
	return c, err
}

func (d *dialer) last() net.Conn {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.conns[len(d.conns)-1]
}

// session opens a session whose connection the test can reach.
func (d *dialer) session(t *testing.T, addr string) (*gomilter.ClientSession, net.Conn) {
	t.Helper()
	c := gomilter.NewClientWithOptions("tcp", addr, gomilter.ClientOptions{
		Dialer:       d,
		ReadTimeout:  10 * time.Second,
		WriteTimeout: 10 * time.Second,
		ActionMask:   gomilter.OptAddHeader | gomilter.OptChangeHeader | gomilter.OptQuarantine,
	})
	s, err := c.Session()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Conn("client.example.net", gomilter.FamilyInet, 40000, "198.51.100.7"); err != nil {
		t.Fatal(err)
	}
	return s, d.last()
}

// waitBusy waits until n connections of srv have a message in flight.
func waitBusy(t *testing.T, srv *Server, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		busy := 0
		srv.mu.Lock()
		for c := range srv.conns {
			if c.inMessage() {
				busy++
			}
		}
		srv.mu.Unlock()
		if busy == n {
			return
		}
	}
	t.Fatalf("no %d connections with a message in flight", n)
}

// closedWithin reports whether the server closed c within d: reading
// ends, with EOF or a reset, before the deadline.
func closedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.ReadAll(c)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

func TestBrokenPeers(t *testing.T) {
	f, spam, ham := trainedFilter(t, store.NewMemory())
	set := testSettings(f)
	set.Milter.ReadTimeout.Duration = 300 * time.Millisecond
	rec := &recorder{}
	_, addr := startServer(t, set, rec)
	garbage := make([]byte, 4096)
	rand.Read(garbage)
	for _, tt := range []struct {
		name string
		// peer misbehaves on a connection and returns it.
		peer func(t *testing.T) net.Conn
		// counted is the kind of error the server counts, if any.
		counted string
	}{
		{"garbage", func(t *testing.T) net.Conn {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			c.Write(garbage)
			return c
		}, ""},
		{"oversized packet", func(t *testing.T) net.Conn {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			binary.Write(c, binary.BigEndian, uint32(1<<30))
			c.Write([]byte("B"))
			return c
		}, ""},
		{"unknown command", func(t *testing.T) net.Conn {
			var d dialer
			_, c := d.session(t, addr)
			binary.Write(c, binary.BigEndian, uint32(1))
			c.Write([]byte("Z"))
			return c
		}, ""},
		{"stalls mid-message", func(t *testing.T) net.Conn {
			var d dialer
			s, c := d.session(t, addr)
			if _, err := s.Mail("a@example.net", nil); err != nil {
				t.Fatal(err)
			}
			if _, err := s.HeaderField("Subject", "hello"); err != nil {
				t.Fatal(err)
			}
			return c // and says nothing more
		}, "timeout"},
		{"disconnects mid-body", func(t *testing.T) net.Conn {
			var d dialer
			s, c := d.session(t, addr)
			if _, err := s.Mail("a@example.net", nil); err != nil {
				t.Fatal(err)
			}
			if _, err := s.HeaderField("Subject", "hello"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.BodyChunk([]byte("the first part of the body\r\n")); err != nil {
				t.Fatal(err)
			}
			c.Close()
			return nil
		}, "protocol"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := 0
			if tt.counted != "" {
				before = rec.errorCount(tt.counted)
			}
			// Another client is served meanwhile.
			done := make(chan reply, 1)
			c := tt.peer(t)
			go func() { done <- sendOne(t, addr, defaultEnvelope(), ham) }()
			if c != nil {
				defer c.Close()
				if !closedWithin(c, 3*time.Second) {
					t.Error("the server did not close the connection")
				}
			}
			select {
			case r := <-done:
				if res := r.result(t); res.Verdict != "ham" {
					t.Errorf("the other client got %+v", res)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the other client was not served")
			}
			if tt.counted != "" {
				deadline := time.Now().Add(2 * time.Second)
				for rec.errorCount(tt.counted) == before && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if rec.errorCount(tt.counted) == before {
					t.Errorf("no %s error counted", tt.counted)
				}
			}
		})
	}
	// And the server still serves.
	if res := sendOne(t, addr, defaultEnvelope(), spam).result(t); res.Verdict != "spam" {
		t.Errorf("after the broken peers: %+v", res)
	}
}

func TestShutdownDrains(t *testing.T) {
	f, spam, _ := trainedFilter(t, store.NewMemory())
	srv, addr := startServer(t, testSettings(f), nil)
	var d dialer
	_, idle := d.session(t, addr)
	busy, busyConn := d.session(t, addr)
	body := sendHead(t, busy, spam)
	// The MTA waits for no reply before the end of the message, so wait
	// until the server has seen the message start.
	waitBusy(t, srv, 1)
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stopped <- srv.Shutdown(ctx)
	}()
	if !closedWithin(idle, 3*time.Second) {
		t.Error("an idle connection stayed open")
	}
	select {
	case err := <-stopped:
		t.Fatalf("Shutdown returned %v with a message in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Error("a new connection was accepted while draining")
	}
	// The message in flight is finished and answered.
	if _, err := busy.BodyChunk(body); err != nil {
		t.Fatal(err)
	}
	endDrained(t, busy, busyConn, stopped)
}

// sendHead sends raw's envelope sender and header on s and returns its
// body, for a test to send when it chooses.
func sendHead(t *testing.T, s *gomilter.ClientSession, raw []byte) []byte {
	t.Helper()
	if _, err := s.Mail("a@example.net", nil); err != nil {
		t.Fatal(err)
	}
	fields, body := splitMessage(raw)
	for _, fl := range fields {
		if _, err := s.HeaderField(fl[0], fl[1]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.HeaderEnd(); err != nil {
		t.Fatal(err)
	}
	return body
}

// endDrained ends the spam message in flight on s while the server drains,
// and checks that it is answered, that conn is closed after the answer,
// and that Shutdown then returns without error on stopped.
func endDrained(t *testing.T, s *gomilter.ClientSession, conn net.Conn, stopped <-chan error) {
	t.Helper()
	mods, act, err := s.End()
	if err != nil {
		t.Fatalf("the message in flight got no answer: %v", err)
	}
	if r := (reply{mods: mods, act: act}); r.result(t).Verdict != "spam" {
		t.Errorf("the message in flight got %+v", r)
	}
	if !closedWithin(conn, 3*time.Second) {
		t.Error("the drained connection stayed open after its answer")
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not return")
	}
}

// TestShutdownReadsWhatWasSent: the MTA sends a message's start without
// waiting for replies, so a connection the server sees as idle when it
// drains may have a message on the way; one that arrives within drainGrace
// is still answered.
func TestShutdownReadsWhatWasSent(t *testing.T) {
	f, spam, _ := trainedFilter(t, store.NewMemory())
	srv, addr := startServer(t, testSettings(f), nil)
	var d dialer
	s, conn := d.session(t, addr)
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stopped <- srv.Shutdown(ctx)
	}()
	// Listeners close in the same step as connections are drained.
	deadline := time.Now().Add(3 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the server never started draining")
		}
		time.Sleep(5 * time.Millisecond)
	}
	body := sendHead(t, s, spam)
	if _, err := s.BodyChunk(body); err != nil {
		t.Fatal(err)
	}
	endDrained(t, s, conn, stopped)
}

func TestShutdownGivesUp(t *testing.T) {
	f, _, _ := trainedFilter(t, store.NewMemory())
	srv, addr := startServer(t, testSettings(f), nil)
	var d dialer
	s, c := d.session(t, addr)
	if _, err := s.Mail("a@example.net", nil); err != nil {
		t.Fatal(err)
	}
	waitBusy(t, srv, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "1 connections") {
		t.Errorf("Shutdown: %v, want a deadline error naming one connection", err)
	}
	if !closedWithin(c, time.Second) {
		t.Error("the connection stayed open")
	}
}
