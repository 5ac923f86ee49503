package milter

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomilter "github.com/emersion/go-milter"

	"github.com/spamd/spamd/internal/procstat"
	"github.com/spamd/spamd/store"
)

// The hostile-client tests: a peer on the milter socket floods headers,
// forges X-Spam-* fields by the thousand, trickles its commands or holds
// idle connections by the thousand. Each runs against a real server on
// 127.0.0.1 with go-milter's client (or bare TCP where no MTA would
// speak), and bounds what it costs the process: the growth of its
// resident memory (RSS) and of the Go heap, its CPU time and its
// goroutines, measured by procstat. RSS and CPU bounds are multiplied by
// procstat.RaceFactor under the race detector; heap and goroutine bounds
// are not, since the race detector does not change them. Every bound is
// a fraction of what the code before the bounds (go-milter v0.5.0
// unpatched, no limits) used under the same test; the figures are in
// the log with -v.

// probe starts measuring; 2 ms between samples.
func probe() *procstat.Probe { return procstat.Start(2 * time.Millisecond) }

// hostileServer serves the trained sample filter with l's limits; the
// default envelope's client is trusted when trust is set, so that the
// messages skip classification and a test measures the protocol alone.
func hostileServer(t *testing.T, l limits, trust bool) (*Server, string, *recorder) {
	t.Helper()
	f, _, _ := trainedFilter(t, store.NewMemory())
	set := testSettings(f)
	set.Milter.ReadTimeout.Duration = 10 * time.Second
	if trust {
		set.Milter.TrustedNetworks = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}
	}
	l.set(set)
	rec := &recorder{}
	srv, addr := startServer(t, set, rec)
	return srv, addr, rec
}

// startMessage sends MAIL and RCPT.
func startMessage(t *testing.T, s *gomilter.ClientSession) {
	t.Helper()
	if _, err := s.Mail("sender@example.net", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Rcpt("user@test.example", nil); err != nil {
		t.Fatal(err)
	}
}

// endMessage ends the header and the message and returns the answer.
func endMessage(s *gomilter.ClientSession) (*gomilter.Action, error) {
	if _, err := s.HeaderEnd(); err != nil {
		return nil, err
	}
	if _, err := s.BodyChunk([]byte("hello\r\n")); err != nil {
		return nil, err
	}
	_, act, err := s.End()
	return act, err
}

// rejected checks that act is the answer to a header over a bound.
func rejected(t *testing.T, act *gomilter.Action, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if act.Code != gomilter.ActReplyCode || act.SMTPCode != 552 || !strings.HasPrefix(act.SMTPText, "5.6.0 ") {
		t.Errorf("answer %c %d %q, want 552 5.6.0", act.Code, act.SMTPCode, act.SMTPText)
	}
}

// waitConnections waits until srv has n connections open, for up to d,
// and returns how long that took.
func waitConnections(t *testing.T, srv *Server, n int, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for srv.Connections() != n {
		if time.Since(start) > d {
			t.Fatalf("%d connections open after %v, want %d", srv.Connections(), d, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// TestHostileHeaderFlood sends headers that are huge, or many, or both.
// Before: go-milter kept every field until an abort, so one message of
// 1,600 fields of 256 KiB, or 3,000 messages of 64 KiB of header on one
// connection, stayed in memory (RSS +400 MB and more).
func TestHostileHeaderFlood(t *testing.T) {
	value := strings.Repeat("a", 256<<10)
	t.Run("one message, 1600 fields of 256 KiB", func(t *testing.T) {
		_, addr, rec := hostileServer(t, limits{connHeader: 1 << 30}, false)
		s := openSession(t, addr, defaultEnvelope())
		defer s.Close()
		p := probe()
		startMessage(t, s)
		for i := range 1600 {
			if _, err := s.HeaderField(fmt.Sprintf("X-Flood-%d", i%7), value); err != nil {
				t.Fatal(err)
			}
		}
		act, err := endMessage(s)
		// Each field is 256 KiB of garbage for the client and as much for
		// the server, which hands it to Header as a string: 800 MB in a
		// third of a second, whose objects not yet swept peak at 35 to
		// 55 MiB by the collector's pace alone, without -race. What the
		// bound is for is the 400 MB that was kept.
		procstat.Within(t, p.Stop(), procstat.Bound{RSS: 64 << 20, Heap: 64 << 20, CPU: 5 * time.Second})
		rejected(t, act, err)
		if rec.errorCount("limit") != 1 {
			t.Errorf("%d limits counted, want 1", rec.errorCount("limit"))
		}
		// The connection serves the next message as usual.
		startMessage(t, s)
		if _, err := s.HeaderField("Subject", "hi"); err != nil {
			t.Fatal(err)
		}
		if act, err := endMessage(s); err != nil || act.Code != gomilter.ActAccept {
			t.Errorf("the next message: %+v, %v", act, err)
		}
	})
	t.Run("3000 messages of 64 KiB of header on one connection", func(t *testing.T) {
		_, addr, _ := hostileServer(t, limits{}, true)
		s := openSession(t, addr, defaultEnvelope())
		defer s.Close()
		field := value[:4<<10]
		p := probe()
		for range 3000 {
			startMessage(t, s)
			for j := range 16 {
				if _, err := s.HeaderField(fmt.Sprintf("X-Field-%d", j), field); err != nil {
					t.Fatal(err)
				}
			}
			act, err := endMessage(s)
			if err != nil || act.Code != gomilter.ActAccept {
				t.Fatalf("%+v, %v", act, err)
			}
		}
		procstat.Within(t, p.Stop(), procstat.Bound{RSS: 64 << 20, Heap: 32 << 20, CPU: 10 * time.Second})
	})
	t.Run("past max_connection_header_bytes the connection closes", func(t *testing.T) {
		srv, addr, rec := hostileServer(t, limits{connHeader: 8 << 20}, true)
		s := openSession(t, addr, defaultEnvelope())
		defer s.Close()
		p := probe()
		var err error
		sent := 0
		for ; sent < 100 && err == nil; sent++ {
			startMessage(t, s)
			for j := 0; j < 3 && err == nil; j++ { // 768 KiB, under max_header_bytes
				_, err = s.HeaderField("X-Field", value)
			}
			if err == nil {
				_, err = endMessage(s)
			}
		}
		procstat.Within(t, p.Stop(), procstat.Bound{RSS: 64 << 20, Heap: 32 << 20, CPU: 5 * time.Second})
		if err == nil {
			t.Fatalf("100 messages of 768 KiB of header passed on one connection, limit 8 MiB")
		}
		if sent > 11 {
			t.Errorf("closed after %d messages of 768 KiB of header, limit 8 MiB", sent)
		}
		waitConnections(t, srv, 0, 5*time.Second)
		if rec.errorCount("limit") != 1 || rec.errorCount("protocol") != 0 {
			t.Errorf("errors %v, want one limit", rec.errors)
		}
	})
}

// TestHostileSpoofFlood forges X-Spam-* fields by the hundred thousand.
// Before: each name was looked for in a list of the names before, 100,000
// distinct names took 32 s of CPU, and every field was removed by a change
// of its own at the end.
func TestHostileSpoofFlood(t *testing.T) {
	for _, tt := range []struct {
		name string
		of   func(i int) string
	}{
		{"100000 distinct names", func(i int) string { return fmt.Sprintf("X-Spam-%d", i) }},
		{"one name 100000 times", func(int) string { return "X-Spam-Flag" }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, addr, rec := hostileServer(t, limits{}, false)
			s := openSession(t, addr, defaultEnvelope())
			defer s.Close()
			p := probe()
			startMessage(t, s)
			for i := range 100000 {
				if _, err := s.HeaderField(tt.of(i), "YES"); err != nil {
					t.Fatal(err)
				}
			}
			act, err := endMessage(s)
			procstat.Within(t, p.Stop(), procstat.Bound{RSS: 64 << 20, Heap: 32 << 20, CPU: 5 * time.Second})
			rejected(t, act, err)
			if rec.errorCount("limit") != 1 {
				t.Errorf("%d limits counted, want 1", rec.errorCount("limit"))
			}
		})
	}
	t.Run("up to max_spoofed_headers all are removed", func(t *testing.T) {
		_, addr, _ := hostileServer(t, limits{spoofedHeaders: 20}, false)
		_, _, ham := trainedFilter(t, store.NewMemory())
		msg := parse(ham)
		for i := range 20 {
			msg.fields = append(msg.fields, [2]string{fmt.Sprintf("x-spam-%d", i%5), "YES"})
		}
		r := sendOne2(t, addr, msg)
		if n := len(r.changes()); n != 20 || r.act.Code != gomilter.ActAccept {
			t.Errorf("answer %c with %d removals, want accept with 20: %q", r.act.Code, n, r.changes())
		}
	})
}

// sendOne2 passes one split message through a session of its own.
func sendOne2(t *testing.T, addr string, msg parsed) reply {
	t.Helper()
	s := openSession(t, addr, defaultEnvelope())
	defer s.Close()
	r, err := sendParsed(s, defaultEnvelope(), msg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// trickle is a connection that writes one byte at a time, every gap,
// once slowed down, and counts the bytes it wrote so.
type trickle struct {
	net.Conn
	gap  time.Duration
	slow atomic.Bool
	sent atomic.Int64 // bytes written slowly
}

func (c *trickle) Write(b []byte) (int, error) {
	if !c.slow.Load() {
		return c.Conn.Write(b)
	}
	for i := range b {
		if _, err := c.Conn.Write(b[i : i+1]); err != nil {
			return i, err
		}
		c.sent.Add(1)
		time.Sleep(c.gap)
	}
	return len(b), nil
}

// trickleDialer makes a trickling connection.
type trickleDialer struct {
	gap  time.Duration
	conn atomic.Pointer[trickle]
}

func (d *trickleDialer) Dial(network, addr string) (net.Conn, error) {
	c, err := net.Dial(network, addr)
	if err != nil {
		return nil, err
	}
	tc := &trickle{Conn: c, gap: d.gap}
	d.conn.Store(tc)
	return tc, nil
}

// TestHostileSlowloris holds connections with commands that trickle in.
// Before: the read deadline was set for each read, so a client sending a
// byte every little while held its connection as long as it liked: it
// sent its whole command, or its whole message, however slowly. Now the
// connection is closed at the deadline, before the client is done: what
// is asserted is how much it could send, not how long anything took.
func TestHostileSlowloris(t *testing.T) {
	const clients = 50
	t.Run("a command one byte at a time", func(t *testing.T) {
		srv, addr, rec := hostileServer(t, limits{read: time.Second}, false)
		// The field's command: length, code, name, value, two NULs.
		value := strings.Repeat("x", 90)
		command := int64(4 + 1 + len("Subject") + 1 + len(value) + 1)
		var wg sync.WaitGroup
		sent := make([]int64, clients)
		p := probe()
		start := time.Now()
		for k := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := &trickleDialer{gap: 100 * time.Millisecond}
				s, err := gomilter.NewClientWithOptions("tcp", addr, gomilter.ClientOptions{Dialer: d,
					ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
					ActionMask: gomilter.OptAddHeader | gomilter.OptChangeHeader | gomilter.OptQuarantine}).Session()
				if err != nil {
					t.Error(err)
					return
				}
				defer s.Close()
				if _, err := s.Mail("a@example.net", nil); err != nil {
					return
				}
				// A byte every 100 ms: the field takes 10 s to send,
				// each byte well within the read timeout of 1 s.
				tc := d.conn.Load()
				tc.slow.Store(true)
				s.HeaderField("Subject", value)
				sent[k] = tc.sent.Load()
			}()
		}
		wg.Wait()
		held := time.Since(start)
		waitConnections(t, srv, 0, 30*time.Second)
		procstat.Within(t, p.Stop(), procstat.Bound{RSS: 32 << 20, Heap: 16 << 20, CPU: 2 * time.Second})
		t.Logf("%d trickling clients sent at most %d of the %d bytes of their command (read_timeout 1s; all cut after %v)",
			clients, slices.Max(sent), command, held.Round(time.Millisecond))
		if m := slices.Max(sent); m >= command {
			t.Errorf("a client sent its whole command of %d bytes, one every 100 ms, with read_timeout 1s", command)
		}
		if rec.errorCount("timeout") != clients {
			t.Errorf("%d timeouts counted, want %d", rec.errorCount("timeout"), clients)
		}
	})
	t.Run("a message one command at a time", func(t *testing.T) {
		const fields = 40
		srv, addr, rec := hostileServer(t, limits{read: time.Second, message: 2 * time.Second}, false)
		var wg sync.WaitGroup
		sent := make([]int, clients)
		p := probe()
		start := time.Now()
		for k := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := newClient(addr).Session()
				if err != nil {
					t.Error(err)
					return
				}
				defer s.Close()
				if _, err := s.Mail("a@example.net", nil); err != nil {
					return
				}
				// Each field well within the read timeout; the message
				// would take 10 s.
				for range fields {
					if _, err := s.HeaderField("X-Slow", "x"); err != nil {
						return
					}
					sent[k]++
					time.Sleep(250 * time.Millisecond)
				}
			}()
		}
		wg.Wait()
		held := time.Since(start)
		waitConnections(t, srv, 0, 30*time.Second)
		procstat.Within(t, p.Stop(), procstat.Bound{RSS: 32 << 20, Heap: 16 << 20, CPU: 2 * time.Second})
		t.Logf("%d slow clients sent at most %d of their %d fields (message_timeout 2s; all cut after %v)",
			clients, slices.Max(sent), fields, held.Round(time.Millisecond))
		if m := slices.Max(sent); m >= fields {
			t.Errorf("a client sent all %d fields, one every 250 ms, with message_timeout 2s", fields)
		}
		if rec.errorCount("limit") != clients {
			t.Errorf("%d limits counted, want %d", rec.errorCount("limit"), clients)
		}
	})
}

// TestHostileIdleConnections opens 1,000 connections that send nothing,
// or announce a command of 1 MiB and send nothing more. Before: every
// connection was served (two goroutines each), and go-milter allocated
// the 1 MiB it was promised before any of it arrived.
func TestHostileIdleConnections(t *testing.T) {
	const n = 1000
	for _, tt := range []struct {
		name  string
		hello []byte
	}{
		{"silent", nil},
		{"announcing 1 MiB", binary.BigEndian.AppendUint32(nil, 1<<20-1)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, addr, rec := hostileServer(t, limits{read: 3 * time.Second}, false)
			max := srv.Settings().Milter.MaxConnections
			p := probe()
			conns := make([]net.Conn, 0, n)
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			for range n {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				if tt.hello != nil {
					c.Write(tt.hello)
				}
				conns = append(conns, c)
			}
			waitConnections(t, srv, max, 5*time.Second)
			time.Sleep(200 * time.Millisecond) // for the heap to show what was allocated
			u := p.Now()
			procstat.Within(t, u, procstat.Bound{RSS: 64 << 20, Heap: 32 << 20, CPU: 3 * time.Second, Goroutines: max + 50})
			if got := rec.errorCount("limit"); got != n-max {
				t.Errorf("%d connections refused, want %d", got, n-max)
			}
			// The read timeout closes the rest.
			waitConnections(t, srv, 0, 10*time.Second)
			for range 100 {
				if u := p.Now(); u.Base.Goroutines+10 >= procstat.Now().Goroutines {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if g, base := procstat.Now().Goroutines, u.Base.Goroutines; g > base+10 {
				t.Errorf("%d goroutines after the timeout, %d before", g, base)
			}
			p.Stop()
		})
	}
}
