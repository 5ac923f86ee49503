package control

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/store"
)

// apiLimits are what a hostile-client test changes of DefaultLimits.
type apiLimits struct {
	read, write time.Duration
	connections int
}

// hostileAPI serves the API over a memory store on a unix socket as the
// daemon does (HTTPServer, Listener) and returns the socket, the server
// and its filter.
func hostileAPI(t *testing.T, al apiLimits) (string, *Server, *filter.Filter) {
	t.Helper()
	f, err := filter.New(store.NewMemory(), filter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	l := DefaultLimits
	if al.read > 0 {
		l.ReadTimeout = al.read
	}
	if al.write > 0 {
		l.WriteTimeout = al.write
	}
	if al.connections > 0 {
		l.MaxConnections = al.connections
	}
	srv := NewServer(Options{Filter: func() *filter.Filter { return f }, Limits: l})
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(sock, 0o666)
	hs := HTTPServer(srv.Handler(), l, nil)
	go hs.Serve(Listener(ln, l))
	t.Cleanup(func() { hs.Close() })
	return sock, srv, f
}

// maxConnections is the bound of connections hostileAPI serves with al.
func (al apiLimits) maxConnections() int {
	if al.connections > 0 {
		return al.connections
	}
	return DefaultLimits.MaxConnections
}
