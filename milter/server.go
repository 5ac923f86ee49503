package milter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	gomilter "github.com/emersion/go-milter"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/decide"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/history"
	"github.com/spamd/spamd/prefs"
)

// Settings are what messages are judged by. A message reads one Settings
// when it starts, so replacing them (Server.Update) takes effect from the
// next message on without touching connections.
type Settings struct {
	// Filter classifies messages.
	Filter *filter.Filter
	// Milter holds limits, skip rules and timeouts; Listen and
	// ShutdownTimeout are the daemon's business and not read here.
	Milter config.Milter
	// Actions says what to do with each verdict.
	Actions config.Actions
	// Autolearn says which messages to train on by themselves.
	Autolearn config.Autolearn
	// History, if not nil, records every message answered, with the
	// message itself when it was classified.
	History *history.Ring
	// Prefs holds the recipients' preferences and the sender lists; nil
	// means the site's settings alone: Actions and the filter's required
	// score.
	Prefs *prefs.Book
}

// book returns the preferences messages are judged by.
func (s *Settings) book(fc filter.Config) *prefs.Book {
	if s.Prefs != nil {
		return s.Prefs
	}
	return prefs.New(prefs.SiteOf(fc.Required(), s.Actions, config.Prefs{}), prefs.Layer{}, prefs.Layer{})
}

// Observer is told what the milter does, for metrics. Its methods must be
// safe for concurrent use and return quickly.
type Observer interface {
	// Message reports one message: its verdict ("ham", "unsure", "spam",
	// "skipped" or "error"), the probability of spam the filter gave it
	// (NaN when it was not classified), the action taken and the time
	// from the end of the message to the answer.
	Message(verdict string, spam float64, action decide.Action, elapsed time.Duration)
	// Error reports one failure: "classify" (the filter failed), "panic",
	// "timeout" (a peer stalled past a deadline), "protocol" (a peer
	// went away in the middle of a message) or "limit" (a peer passed a
	// bound: a connection over max_connections, a message over
	// message_timeout, a header over its byte or spoofed-field limits).
	Error(kind string)
}

// nopObserver observes nothing.
type nopObserver struct{}

func (nopObserver) Message(string, float64, decide.Action, time.Duration) {}
func (nopObserver) Error(string)                                          {}

// What the milter asks of the MTA. It needs the client address (connect),
// the envelope (mail, rcpt), the header and the body; not HELO, the end of
// the header, DATA or unknown commands. It answers only the end of the
// message, so the MTA streams everything else without waiting for a reply
// (the SMFIP_NR_* flags, which Postfix since 2.6 and Sendmail since 8.14
// honour): a message costs one round trip instead of one per header.
const (
	actions  = gomilter.OptAddHeader | gomilter.OptChangeHeader | gomilter.OptQuarantine
	protocol = gomilter.OptNoHelo | gomilter.OptNoEOH | gomilter.OptNoUnknown | gomilter.OptNoData |
		gomilter.OptNoConnReply | gomilter.OptNoMailReply | gomilter.OptNoRcptReply |
		gomilter.OptNoHeaderReply | gomilter.OptNoBodyReply
)

// Server is spamd's milter server. Its methods are safe for concurrent
// use.
type Server struct {
	log      *slog.Logger
	obs      Observer
	settings atomic.Pointer[Settings]
	// ctx is cancelled when Shutdown gives up waiting, so that
	// classifications in flight stop.
	ctx    context.Context
	cancel context.CancelFunc
	ids    atomic.Uint64
	// cpus holds a token per classification running, at most one per CPU.
	cpus chan struct{}
	// bufs recycles message buffers (*[]byte).
	bufs sync.Pool

	mu       sync.Mutex
	lns      map[net.Listener]struct{}
	conns    map[*conn]struct{}
	draining bool
	wg       sync.WaitGroup // one count per connection
	// refused counts the connections closed over max_connections since
	// the last warning about them; lastRefusal is when that was logged.
	refused     int
	lastRefusal time.Time
}

// New returns a server judging messages by set. It logs to log and
// reports to obs, which may be nil.
func New(set *Settings, log *slog.Logger, obs Observer) *Server {
	if obs == nil {
		obs = nopObserver{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		log:    log,
		obs:    obs,
		ctx:    ctx,
		cancel: cancel,
		cpus:   make(chan struct{}, runtime.GOMAXPROCS(0)),
		lns:    map[net.Listener]struct{}{},
		conns:  map[*conn]struct{}{},
	}
	s.bufs.New = func() any { b := make([]byte, 0, 64<<10); return &b }
	s.settings.Store(set)
	return s
}

// Update replaces the settings messages are judged by, from the next
// message on.
func (s *Server) Update(set *Settings) { s.settings.Store(set) }

// Settings returns the settings new messages are judged by.
func (s *Server) Settings() *Settings { return s.settings.Load() }

// Connections returns the number of open MTA connections.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Serve accepts MTA connections on ln until Shutdown, serving each on
// its own goroutine. It returns nil after Shutdown, else the error that
// stopped it; either way ln is closed.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.lns, ln)
		s.mu.Unlock()
		ln.Close()
	}()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			draining := s.draining
			s.mu.Unlock()
			if draining {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// Out of file descriptors and the like: wait, as
				// net/http does, rather than spin or give up.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("milter: accept failed, retrying", "err", err, "wait", backoff)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("milter: accept on %s: %w", ln.Addr(), err)
		}
		backoff = 0
		if c := s.track(nc); c != nil {
			go s.serveConn(c)
		}
	}
}

// refusalLog is how often connections refused over max_connections are
// logged: one line says how many there were since the last.
const refusalLog = 10 * time.Second

// track registers a new connection, or closes it if the server is
// draining or has max_connections open.
func (s *Server) track(nc net.Conn) *conn {
	set := s.settings.Load()
	m := set.Milter
	c := &conn{
		Conn:      nc,
		srv:       s,
		id:        s.ids.Add(1),
		read:      m.ReadTimeout.Duration,
		write:     m.WriteTimeout.Duration,
		message:   m.MessageTimeout.Duration,
		maxHeader: m.MaxConnectionHeaderBytes,
	}
	if c.message <= 0 {
		c.message = 30 * time.Minute
	}
	if c.maxHeader <= 0 {
		c.maxHeader = math.MaxInt64
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		nc.Close()
		return nil
	}
	if m.MaxConnections > 0 && len(s.conns) >= m.MaxConnections {
		nc.Close()
		s.obs.Error("limit")
		s.refused++
		if now := time.Now(); now.Sub(s.lastRefusal) >= refusalLog {
			s.log.Warn("milter: refusing connections over max_connections", "max_connections", m.MaxConnections,
				"refused", s.refused, "remote", nc.RemoteAddr().String())
			s.refused, s.lastRefusal = 0, now
		}
		return nil
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return c
}

// serveConn runs go-milter's session on c, on the calling goroutine. A
// go-milter Server of its own lets every message of the connection reach
// the connection's state; it keeps no copy of the header (DiscardHeaders,
// spamd's patch of go-milter), which the milter bounds itself.
func (s *Server) serveConn(c *conn) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("milter: panic serving a connection", "conn", c.id, "panic", v, "stack", string(debug.Stack()))
			s.obs.Error("panic")
			c.Close()
		}
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.wg.Done()
	}()
	srv := &gomilter.Server{
		NewMilter:      func() gomilter.Milter { return &message{c: c} },
		Actions:        actions,
		Protocol:       protocol,
		DiscardHeaders: true,
	}
	srv.ServeConn(c)
	c.Close()
}

// Shutdown stops accepting connections, closes idle ones once nothing
// arrives on them within drainGrace, lets messages in flight finish and
// closes their connections after the answer. If ctx
// ends first, it closes every connection, cancels classifications still
// running and returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	for ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		c.drain()
	}
	s.mu.Unlock()

	done := make(chan struct{})
	go func() {
		defer func() {
			if v := recover(); v != nil {
				s.log.Error("milter: panic waiting for connections", "panic", v)
			}
			close(done)
		}()
		s.wg.Wait()
	}()
	select {
	case <-done:
		s.cancel()
		return nil
	case <-ctx.Done():
	}
	s.cancel()
	s.mu.Lock()
	n := len(s.conns)
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	<-done
	return fmt.Errorf("milter: shutdown: closed %d connections with messages in flight: %w", n, ctx.Err())
}
