package milter

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// conn is one MTA connection: a net.Conn that puts a deadline on every
// read and write, knows whether a message is in flight, and holds what the
// MTA said about the SMTP client, which every message of the connection
// shares.
type conn struct {
	net.Conn
	srv         *Server
	id          uint64
	read, write time.Duration

	done      chan struct{} // closed by Close
	closeOnce sync.Once
	closed    atomic.Bool // closed by us: reads end quietly

	mu       sync.Mutex
	busy     bool // a message is in flight
	draining bool // close as soon as no message is in flight

	// Set by the session goroutine at connect, read by its messages;
	// broken says why every message gets the failure action.
	client netip.Addr
	broken string

	// While hold is set, writes are kept in pending and go out with the
	// next write after it is cleared: the end-of-message changes then
	// leave with the final answer, in one system call rather than one
	// per change. Used by the session goroutine only.
	hold    bool
	pending []byte
}

// Read reads with the read deadline. A deadline passing is logged and
// counted here, and reported to go-milter as the end of the stream.
func (c *conn) Read(b []byte) (int, error) {
	if c.closed.Load() {
		return 0, io.EOF
	}
	// The deadline is set under mu so that drain cannot shorten it between
	// the check and the setting.
	c.mu.Lock()
	wait := c.read
	if c.draining && !c.busy {
		wait = drainGrace
	}
	err := c.Conn.SetReadDeadline(time.Now().Add(wait))
	c.mu.Unlock()
	if err != nil {
		if c.closed.Load() {
			return 0, io.EOF
		}
		return 0, err
	}
	n, err := c.Conn.Read(b)
	if err == nil {
		return n, nil
	}
	if c.closed.Load() {
		return n, io.EOF
	}
	if c.idle() && errors.Is(err, os.ErrDeadlineExceeded) {
		return n, io.EOF // drained: the MTA had nothing more to send
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.srv.log.Warn("milter: the MTA sent nothing within the read timeout; closing the connection",
			"conn", c.id, "timeout", c.read, "in_message", c.inMessage())
		c.srv.obs.Error("timeout")
		return n, io.EOF
	}
	return n, err
}

// Write writes with the write deadline, then closes a draining
// connection once no message is in flight: the answer to a message's end
// was the last thing it had to say.
func (c *conn) Write(b []byte) (int, error) {
	if c.hold {
		c.pending = append(c.pending, b...)
		return len(b), nil
	}
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.write)); err != nil {
		return 0, err
	}
	out := b
	if len(c.pending) > 0 {
		c.pending = append(c.pending, b...)
		out = c.pending
	}
	n, err := c.Conn.Write(out)
	if len(c.pending) > 0 {
		c.pending = c.pending[:0]
		n = max(0, n-(len(out)-len(b)))
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.srv.log.Warn("milter: the MTA read nothing within the write timeout; closing the connection",
			"conn", c.id, "timeout", c.write)
		c.srv.obs.Error("timeout")
	}
	if c.idle() {
		c.Close()
	}
	return n, err
}

// Close closes the connection once. A peer that leaves in the middle of a
// message is a protocol error.
func (c *conn) Close() error {
	err := net.ErrClosed
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.mu.Lock()
		broken := c.busy && !c.draining
		c.mu.Unlock()
		if broken {
			c.srv.log.Warn("milter: connection closed in the middle of a message", "conn", c.id)
			c.srv.obs.Error("protocol")
		}
		err = c.Conn.Close()
		close(c.done)
	})
	return err
}

// idle reports whether the connection drains with no message in flight:
// what is left to do is close it.
func (c *conn) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.draining && !c.busy
}

func (c *conn) inMessage() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.busy
}

// begin marks a message in flight.
func (c *conn) begin() {
	c.mu.Lock()
	c.busy = true
	c.mu.Unlock()
}

// end marks the message finished. An aborted message gets no answer, so a
// draining connection is closed right away (now); after an answer, Write
// closes it.
func (c *conn) end(now bool) {
	c.mu.Lock()
	c.busy = false
	closeNow := now && c.draining
	c.mu.Unlock()
	if closeNow {
		c.Close()
	}
}

// drainGrace is how long a draining connection with no message in flight
// is still read. The MTA sends MAIL, RCPT, headers and body without waiting
// for replies, so a message it has begun may still sit unread in the
// socket: closing at once would cut it off, and Postfix would apply its
// milter_default_action to a message spamd could have answered.
const drainGrace = 500 * time.Millisecond

// drain marks the connection to be closed after the answer to the message
// in flight or, if none is, once drainGrace passes with nothing read.
func (c *conn) drain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.draining = true
	if !c.busy {
		// Wakes a Read blocked on the full read timeout.
		_ = c.Conn.SetReadDeadline(time.Now().Add(drainGrace))
	}
}

// oneConn is a listener that yields one connection, then blocks until
// that connection is closed: it lets a go-milter Server serve a
// connection accepted elsewhere.
type oneConn struct {
	c     *conn
	taken atomic.Bool
}

func (l *oneConn) Accept() (net.Conn, error) {
	if !l.taken.Swap(true) {
		return l.c, nil
	}
	<-l.c.done
	return nil, net.ErrClosed
}

// Close does nothing: the connection closes itself.
func (l *oneConn) Close() error { return nil }

func (l *oneConn) Addr() net.Addr { return l.c.LocalAddr() }
