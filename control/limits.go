package control

import (
	"context"
	"errors"
	"log"
	"net"
	"net/http"
	"sync"
	"time"
)

// Limits bound what the API's requests may cost, in memory and time.
type Limits struct {
	// MaxMessage is the largest message, in bytes: the body of classify,
	// learn, forget and report, and each message of a training batch.
	MaxMessage int64
	// MaxBatch is the largest training request, in bytes.
	MaxBatch int64
	// MaxRequests bounds the requests with a message body served at once.
	MaxRequests int
	// MaxTraining bounds, among those, the training requests.
	MaxTraining int
	// QueueWait is how long a request waits for its turn among those
	// before it is answered 503 with Retry-After.
	QueueWait time.Duration
	// ReadTimeout bounds reading a request, header and body; a training
	// batch gets it again for each message.
	ReadTimeout time.Duration
	// WriteTimeout bounds a request from its header to the end of its
	// answer; a training batch gets it again for each message.
	WriteTimeout time.Duration
	// IdleTimeout bounds the wait of a kept-alive connection for its next
	// request.
	IdleTimeout time.Duration
	// MaxConnections bounds the connections served at once on a listener.
	MaxConnections int
}

// DefaultLimits are the limits of a zero field of Options.Limits, the
// defaults of the configuration's [api] section.
var DefaultLimits = Limits{
	MaxMessage:     16 << 20,
	MaxBatch:       256 << 20,
	MaxRequests:    8,
	MaxTraining:    2,
	QueueWait:      10 * time.Second,
	ReadTimeout:    time.Minute,
	WriteTimeout:   5 * time.Minute,
	IdleTimeout:    time.Minute,
	MaxConnections: 64,
}

// withDefaults returns l with every zero field set from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	orDefault(&l.MaxMessage, d.MaxMessage)
	orDefault(&l.MaxBatch, d.MaxBatch)
	orDefault(&l.MaxRequests, d.MaxRequests)
	orDefault(&l.MaxTraining, d.MaxTraining)
	orDefault(&l.QueueWait, d.QueueWait)
	orDefault(&l.ReadTimeout, d.ReadTimeout)
	orDefault(&l.WriteTimeout, d.WriteTimeout)
	orDefault(&l.IdleTimeout, d.IdleTimeout)
	orDefault(&l.MaxConnections, d.MaxConnections)
	return l
}

// orDefault sets *v to def unless it is positive.
func orDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// ReadHeaderTimeout bounds reading a request's header, whatever the
// limits.
const ReadHeaderTimeout = 10 * time.Second

// maxHeaderBytes bounds a request's header.
const maxHeaderBytes = 64 << 10

// HTTPServer returns a server of h with the timeouts of l, the peer
// credentials of unix-socket clients (ConnContext) and errors logged to
// errLog, which may be nil. Serve it with Listener, so that it serves at
// most l.MaxConnections connections at once.
func HTTPServer(h http.Handler, l Limits, errLog *log.Logger) *http.Server {
	l = l.withDefaults()
	return &http.Server{
		Handler:           h,
		ConnContext:       ConnContext,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          errLog,
	}
}

// Listener returns ln accepting at most l.MaxConnections connections at
// once; more wait in the kernel's queue until one closes. Its connections
// unwrap (NetConn) to ln's, so that ConnContext still reads the
// credentials of a unix-socket peer.
func Listener(ln net.Listener, l Limits) net.Listener {
	n := l.withDefaults().MaxConnections
	return &limitListener{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{})}
}

// limitListener is a listener with at most cap(sem) connections open.
type limitListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn gives its slot back when closed.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// NetConn returns the connection accepted.
func (c *limitConn) NetConn() net.Conn { return c.Conn }

// slots is a counting semaphore.
type slots chan struct{}

// errBusy is the error of a request that waited its turn in vain.
var errBusy = errors.New("the daemon is busy with other requests; try again")

// acquire takes a slot, waiting at most wait; the request's end or a
// wait in vain is a 503 to try again after a second.
func (s slots) acquire(ctx context.Context, wait time.Duration) (release func(), err error) {
	select {
	case s <- struct{}{}:
		return func() { <-s }, nil
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case s <- struct{}{}:
		return func() { <-s }, nil
	case <-t.C:
		return nil, retryLater(errBusy, time.Second)
	case <-ctx.Done():
		return nil, retryLater(ctx.Err(), time.Second)
	}
}
