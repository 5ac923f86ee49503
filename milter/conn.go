package milter

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// conn is one MTA connection: a net.Conn that bounds the time each
// command and each message may take and the header bytes the connection
// may send, knows whether a message is in flight, and holds what the MTA
// said about the SMTP client, which every message of the connection
// shares.
type conn struct {
	net.Conn
	srv   *Server
	id    uint64
	write time.Duration
	// Limits read when the connection was accepted.
	read, message time.Duration
	maxHeader     int64 // header bytes of the whole connection

	closeOnce sync.Once
	closed    atomic.Bool // closed by us: reads end quietly
	// limited says why the connection was closed over a limit, for Close
	// not to count it a second time.
	limited atomic.Bool

	mu       sync.Mutex
	busy     bool      // a message is in flight
	draining bool      // close as soon as no message is in flight
	started  time.Time // when the message in flight began
	// answering is set from a message's answered end until the answer
	// is written: the one write after which a draining connection closes.
	answering bool

	// The framing of the command being read, seen as go-milter reads it:
	// each command is a 4-byte length and that many bytes. Used by the
	// session goroutine only (Read).
	lenBuf  [4]byte
	lenN    int
	left    uint32
	waiting time.Time // when the wait for the current command began; zero between commands

	// headerBytes counts the header bytes of every message so far; used
	// by the session goroutine only.
	headerBytes int64

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

// Read reads with a deadline: the whole of a command must arrive within
// the read timeout of the moment the milter began waiting for it, however
// its bytes trickle in, and a message must end within the message timeout
// of its start. A deadline passing is logged and counted here, and
// reported to go-milter as the end of the stream.
func (c *conn) Read(b []byte) (int, error) {
	if c.closed.Load() {
		return 0, io.EOF
	}
	now := time.Now()
	if c.waiting.IsZero() {
		c.waiting = now
	}
	// The deadline is set under mu so that drain cannot shorten it between
	// the check and the setting.
	c.mu.Lock()
	deadline, why := c.waiting.Add(c.read), "command"
	if c.busy {
		if d := c.started.Add(c.message); d.Before(deadline) {
			deadline, why = d, "message"
		}
	} else if c.draining {
		deadline, why = now.Add(drainGrace), "drain"
	}
	err := c.Conn.SetReadDeadline(deadline)
	c.mu.Unlock()
	if err != nil {
		if c.closed.Load() {
			return 0, io.EOF
		}
		return 0, err
	}
	n, err := c.Conn.Read(b)
	c.frame(b[:n])
	if err == nil {
		return n, nil
	}
	if c.closed.Load() {
		return n, io.EOF
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return n, err
	}
	switch {
	case c.idle():
		return n, io.EOF // drained: the MTA had nothing more to send
	case why == "message":
		c.overLimit(fmt.Sprintf("the message did not end within message_timeout (%v)", c.message))
	case c.lenN > 0 || c.left > 0:
		c.srv.log.Warn("milter: a command did not arrive whole within the read timeout; closing the connection",
			"conn", c.id, "timeout", c.read, "in_message", c.inMessage())
		c.srv.obs.Error("timeout")
	default:
		c.srv.log.Warn("milter: the MTA sent nothing within the read timeout; closing the connection",
			"conn", c.id, "timeout", c.read, "in_message", c.inMessage())
		c.srv.obs.Error("timeout")
	}
	return n, io.EOF
}

// frame follows the commands through the bytes read: when one is
// complete, the wait for the next begins with the next read.
func (c *conn) frame(b []byte) {
	for len(b) > 0 {
		if c.left == 0 {
			k := copy(c.lenBuf[c.lenN:], b)
			c.lenN += k
			b = b[k:]
			if c.lenN < len(c.lenBuf) {
				return
			}
			c.lenN = 0
			c.left = binary.BigEndian.Uint32(c.lenBuf[:])
			if c.left == 0 {
				// go-milter refuses it and closes the connection.
				c.waiting = time.Time{}
			}
			continue
		}
		k := uint32(min(len(b), int(min(c.left, 1<<30))))
		c.left -= k
		b = b[k:]
		if c.left == 0 {
			c.waiting = time.Time{}
		}
	}
}

// overLimit closes the connection for a reason of its own: a limit was
// passed. It is logged and counted once, as "limit".
func (c *conn) overLimit(reason string) {
	if c.limited.Swap(true) {
		return
	}
	c.srv.log.Warn("milter: closing the connection: "+reason, "conn", c.id, "in_message", c.inMessage())
	c.srv.obs.Error("limit")
	c.Close()
}

// addHeader counts n more header bytes on the connection and closes it
// past its limit; it reports whether the connection is still open.
func (c *conn) addHeader(n int64) bool {
	c.headerBytes += n
	if c.headerBytes > c.maxHeader {
		c.overLimit(fmt.Sprintf("its messages' headers passed max_connection_header_bytes (%d)", c.maxHeader))
		return false
	}
	return true
}

// Write writes with the write deadline, then closes a draining
// connection if what it wrote was the answer to a message's end: that was
// the last thing it had to say. Any other reply (the negotiation's, one
// written just as the drain began) leaves the connection to the drain's
// grace, for the MTA may already be sending a message on it.
func (c *conn) Write(b []byte) (int, error) {
	if c.hold {
		c.pending = append(c.pending, b...)
		return len(b), nil
	}
	c.mu.Lock()
	answer := c.answering
	c.answering = false
	c.mu.Unlock()
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
	if answer && c.idle() {
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
		broken := c.busy && !c.draining && !c.limited.Load()
		c.mu.Unlock()
		if broken {
			c.srv.log.Warn("milter: connection closed in the middle of a message", "conn", c.id)
			c.srv.obs.Error("protocol")
		}
		err = c.Conn.Close()
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

// begin marks a message in flight; the message timeout runs from now.
func (c *conn) begin() {
	c.mu.Lock()
	c.busy = true
	c.started = time.Now()
	c.mu.Unlock()
}

// end marks the message finished. An aborted message gets no answer, so a
// draining connection is closed right away (now); after an answer, Write
// closes it.
func (c *conn) end(now bool) {
	c.mu.Lock()
	c.busy = false
	c.answering = !now
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
