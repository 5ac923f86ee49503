// Package redistest starts private Redis and Valkey servers for tests:
// one server on a unix socket in a temporary directory, or a Cluster of
// several masters on 127.0.0.1, each killed when the test ends. It speaks
// just enough of the protocol to wait for a server and to form a Cluster,
// so that tests need nothing but the server program.
//
// A test asks for a program with Binary, which skips the test with a
// clear message where the program is not installed, and fails it instead
// when SPAMD_REQUIRE_E2E=1 says nothing may be skipped.
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Engine is a server program: Redis or Valkey.
type Engine struct {
	// Name is "redis" or "valkey".
	Name string
	// Path is the server program.
	Path string
}

// Engines lists the server programs tests run against: redis-server, and
// valkey-server where installed (Debian has it from trixie and in
// bookworm-backports). $SPAMD_REDIS_SERVER and $SPAMD_VALKEY_SERVER name
// other programs. Redis is required as Binary says. Valkey is left out
// where it is absent, unless SPAMD_REQUIRE_E2E=1, under which CI installs
// both and a missing one fails the test.
func Engines(t testing.TB) []Engine {
	t.Helper()
	out := []Engine{{"redis", Binary(t, "SPAMD_REDIS_SERVER", "redis-server")}}
	if p := lookPath("SPAMD_VALKEY_SERVER", "valkey-server"); p != "" {
		out = append(out, Engine{"valkey", p})
	} else if os.Getenv("SPAMD_REQUIRE_E2E") == "1" {
		t.Fatal("valkey-server is not installed (apt-get install valkey-server; on Debian 12 from bookworm-backports), and SPAMD_REQUIRE_E2E=1 forbids leaving it out")
	}
	return out
}

// Binary returns the path of a server program: the one $env names, else
// name on $PATH (or in /usr/sbin, /usr/bin). Where there is none, it skips
// the test, or fails it when SPAMD_REQUIRE_E2E=1.
func Binary(t testing.TB, env, name string) string {
	t.Helper()
	if p := lookPath(env, name); p != "" {
		return p
	}
	msg := fmt.Sprintf("%s is not installed (apt-get install %s, or name it with $%s): the tests against a real server cannot run", name, name, env)
	if os.Getenv("SPAMD_REQUIRE_E2E") == "1" {
		t.Fatal(msg + ", and SPAMD_REQUIRE_E2E=1 forbids skipping them")
	}
	t.Skip(msg)
	return ""
}

func lookPath(env, name string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/bin", "/usr/sbin", "/usr/local/bin"} {
		if p := filepath.Join(dir, name); isExec(p) {
			return p
		}
	}
	return ""
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// Server is a server started for a test.
type Server struct {
	// Addr is its address as redisstore takes it: "unix:/PATH", or
	// "HOST:PORT" for a Cluster node.
	Addr string
	// Dir is its working directory, where its AOF and RDB files go.
	Dir    string
	bin    string
	args   []string
	cmd    *exec.Cmd
	exited chan struct{}
	dial   func() (net.Conn, error)
	t      testing.TB
}

// Start starts the program bin on a unix socket in a new temporary
// directory, persisting nothing (--save "" --appendonly no) unless extra
// arguments say otherwise, and waits until it answers PING. The server is
// killed when the test ends.
func Start(t testing.TB, bin string, extra ...string) *Server {
	t.Helper()
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "r.sock")
	args := []string{"--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
		"--dir", dir, "--save", "", "--appendonly", "no", "--logfile", filepath.Join(dir, "server.log")}
	s := &Server{
		Addr: "unix:" + sock,
		Dir:  dir,
		bin:  bin,
		args: append(args, extra...),
		dial: func() (net.Conn, error) { return net.DialTimeout("unix", sock, time.Second) },
		t:    t,
	}
	s.start(t)
	t.Cleanup(s.Kill)
	return s
}

// shortTempDir returns a temporary directory with a path short enough for
// a unix socket (108 bytes), which t.TempDir's may not be.
func shortTempDir(t testing.TB) string {
	dir, err := os.MkdirTemp("", "rt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (s *Server) start(t testing.TB) {
	t.Helper()
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.Dir
	// Its own process group, so that a ^C of the tests reaches it only
	// through Cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", s.bin, err)
	}
	exited := make(chan struct{})
	var werr error
	go func() {
		werr = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := s.ping(); err == nil {
			return
		}
		select {
		case <-exited:
			s.cmd = nil
			t.Fatalf("%s exited: %v\n%s", s.bin, werr, s.Log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not answer PING after 10 s\n%s", s.bin, s.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Log returns the end of the server's log file.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "server.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// ping sends PING and waits for PONG.
func (s *Server) ping() error {
	c, err := s.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	reply, err := Do(c, "PING")
	if err != nil {
		return err
	}
	if reply != "PONG" {
		return fmt.Errorf("PING: %q", reply)
	}
	return nil
}

// Kill kills the server with SIGKILL, as a crash would, and waits until
// it is gone. It does nothing to a server not running.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
	s.cmd = nil
	// The socket file stays behind; a restart replaces it.
}

// Signal sends sig to the server: SIGSTOP and SIGCONT freeze it and let
// it go on, as a hung server.
func (s *Server) Signal(sig syscall.Signal) error {
	if s.cmd == nil {
		return errors.New("not running")
	}
	return s.cmd.Process.Signal(sig)
}

// Restart starts the server again, after Kill, in the same directory
// with the same arguments: it loads what it persisted.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Kill()
	s.start(t)
}

// Do sends one command on c and returns the reply as text: a simple
// string, an error (as a Go error), an integer, or a bulk string. Arrays
// are not read.
func Do(c net.Conn, args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := ioReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

func ioReadFull(r *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Command runs one command on the server and returns its reply as Do
// does.
func (s *Server) Command(args ...string) (string, error) {
	c, err := s.dial()
	if err != nil {
		return "", err
	}
	defer c.Close()
	return Do(c, args...)
}

// Info returns the value of one field of INFO, "" if there is none.
func (s *Server) Info(field string) string {
	out, err := s.Command("INFO")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// StartCluster starts n masters on free ports of 127.0.0.1 with Cluster
// on, gives each an equal share of the 16384 slots, joins them and waits
// until every node reports cluster_state:ok. It returns the nodes; their
// Addr are the seeds to give redisstore.
func StartCluster(t testing.TB, bin string, n int) []*Server {
	t.Helper()
	nodes := make([]*Server, n)
	for i := range nodes {
		port := freePort(t)
		dir := shortTempDir(t)
		addr := "127.0.0.1:" + strconv.Itoa(port)
		s := &Server{
			Addr: addr,
			Dir:  dir,
			bin:  bin,
			args: []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no",
				"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
				"--cluster-node-timeout", "5000", "--logfile", filepath.Join(dir, "server.log")},
			dial: func() (net.Conn, error) { return net.DialTimeout("tcp", addr, time.Second) },
			t:    t,
		}
		s.start(t)
		t.Cleanup(s.Kill)
		nodes[i] = s
	}
	for i, s := range nodes {
		lo, hi := i*16384/n, (i+1)*16384/n-1
		if _, err := s.Command("CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil {
			t.Fatalf("%s: CLUSTER ADDSLOTSRANGE: %v", s.Addr, err)
		}
	}
	for _, s := range nodes[1:] {
		host, port, _ := net.SplitHostPort(s.Addr)
		if _, err := nodes[0].Command("CLUSTER", "MEET", host, port); err != nil {
			t.Fatalf("CLUSTER MEET %s: %v", s.Addr, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range nodes {
		for {
			info, err := s.Command("CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: cluster not ok after 30 s: %q %v", s.Addr, info, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nodes
}

// freePort returns a TCP port of 127.0.0.1 that is free, as is the port
// 10000 above it, Cluster's bus.
func freePort(t testing.TB) int {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if port+10000 > 65535 {
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		if err != nil {
			continue
		}
		bus.Close()
		return port
	}
	t.Fatal("no free port pair for a Cluster node")
	return 0
}

// StartTCP starts the program bin as Start does, listening on a free port
// of 127.0.0.1 as well; Addr stays the unix socket, TCPAddr is the port's.
func StartTCP(t testing.TB, bin string, extra ...string) (s *Server, tcpAddr string) {
	t.Helper()
	port := freePort(t)
	s = Start(t, bin, append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1"}, extra...)...)
	return s, "127.0.0.1:" + strconv.Itoa(port)
}

// StartSentinel starts the program bin as a Sentinel on a free port of
// 127.0.0.1, watching the master at masterAddr as the set name, and
// waits until it knows the master. It returns the Sentinel's address.
func StartSentinel(t testing.TB, bin, name, masterAddr string) string {
	t.Helper()
	port := freePort(t)
	dir := shortTempDir(t)
	host, mport, _ := net.SplitHostPort(masterAddr)
	conf := filepath.Join(dir, "sentinel.conf")
	body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\nsentinel monitor %s %s %s 1\nsentinel down-after-milliseconds %s 5000\n",
		port, dir, filepath.Join(dir, "server.log"), name, host, mport, name)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	s := &Server{
		Addr: addr,
		Dir:  dir,
		bin:  bin,
		args: []string{conf, "--sentinel"},
		dial: func() (net.Conn, error) { return net.DialTimeout("tcp", addr, time.Second) },
		t:    t,
	}
	s.start(t)
	t.Cleanup(s.Kill)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := s.dial()
		if err == nil {
			// The reply is an array, which Do does not read: a
			// non-error first line is enough.
			_, err = Do(c, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", name)
			c.Close()
			if err == nil || strings.Contains(err.Error(), "unexpected reply") {
				return addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Sentinel does not know %s after 10 s: %v\n%s", name, err, s.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
