package control

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spamd/spamd/internal/procstat"
)

// The hostile-client tests of the API: bodies of hundreds of MiB, many
// at once, trickling, and a thousand idle connections, against a real
// server on a unix socket served as the daemon serves it, with bounds on
// what they cost the process (see the milter's hostile tests for how
// they are measured). Before: /v1/train read its request whole, up to
// 256 MiB, with no bound on requests at once (one user peaked at 664 MB,
// four at 2.84 GB), and the server had no read, write or idle timeout and
// no bound on connections.

// attachment returns message i of a batch: a short text and an
// attachment of size random bytes, the kind of large message a user
// trains.
func attachment(i, size int) []byte {
	r := rand.New(rand.NewSource(int64(i)))
	data := make([]byte, size)
	r.Read(data)
	enc := base64.StdEncoding.EncodeToString(data)
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: a%d@example.org\r\nTo: b@example.org\r\nSubject: report %d\r\nMIME-Version: 1.0\r\n", i, i)
	b.WriteString("Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nthe figures are attached\r\n")
	b.WriteString("--b\r\nContent-Type: application/octet-stream; name=\"data.bin\"\r\nContent-Transfer-Encoding: base64\r\n\r\n")
	for len(enc) > 76 {
		b.WriteString(enc[:76])
		b.WriteString("\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc)
	b.WriteString("\r\n--b--\r\n")
	return b.Bytes()
}

// batchBody is a TrainRequest of n messages made by msg, written as it
// is read: the client holds one message at a time.
func batchBody(n int, msg func(i int) []byte) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		w := func(s string) error { _, err := io.WriteString(pw, s); return err }
		if err := w(`{"items":[`); err != nil {
			return
		}
		for i := range n {
			if i > 0 {
				w(",")
			}
			b, _ := json.Marshal(Item{Class: "spam", Message: msg(i)})
			if _, err := pw.Write(b); err != nil {
				return
			}
		}
		w("]}")
		pw.Close()
	}()
	return pr
}

// repeat is size bytes of 'a', made as they are read. The HTTP client
// may still read it after the answer came, so what is left is atomic.
type repeat struct{ left atomic.Int64 }

// newRepeat returns a repeat of size bytes.
func newRepeat(size int64) *repeat {
	r := &repeat{}
	r.left.Store(size)
	return r
}

func (r *repeat) Read(b []byte) (int, error) {
	left := r.left.Load()
	if left <= 0 {
		return 0, io.EOF
	}
	n := min(int64(len(b)), left)
	for i := range b[:n] {
		b[i] = 'a'
	}
	r.left.Add(-n)
	return int(n), nil
}

// post sends body to path over the socket and returns the status and the
// answer, or the error of a request the server cut short.
func post(sock, path string, body io.Reader) (int, http.Header, []byte, error) {
	hc := http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Post("http://spamd"+path, "application/json", body)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}

func TestHostileBodies(t *testing.T) {
	t.Run("a training batch of 246 MiB", func(t *testing.T) {
		// 180 messages of 1 MiB, 1.4 MiB each in base64 and JSON.
		sock, _, _ := hostileAPI(t, apiLimits{})
		p := procstat.Start(2 * time.Millisecond)
		status, _, b, err := post(sock, "/v1/train?user=alice", batchBody(180, func(i int) []byte { return attachment(i, 3<<18) }))
		procstat.Within(t, p.Stop(), procstat.Bound{RSS: 128 << 20, Heap: 96 << 20, CPU: 20 * time.Second})
		if err != nil || status != http.StatusOK {
			t.Fatalf("status %d, %v: %.200s", status, err, b)
		}
		var out TrainResponse
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		changed := 0
		for _, r := range out.Results {
			if r.Changed {
				changed++
			}
		}
		if len(out.Results) != 180 || changed != 180 {
			t.Errorf("%d results, %d trained, want 180", len(out.Results), changed)
		}
	})
	t.Run("four training batches of 88 MiB at once", func(t *testing.T) {
		sock, _, _ := hostileAPI(t, apiLimits{})
		p := procstat.Start(2 * time.Millisecond)
		var wg sync.WaitGroup
		statuses := make([]int, 4)
		for k := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, h, b, err := post(sock, fmt.Sprintf("/v1/train?user=u%d", k),
					batchBody(64, func(i int) []byte { return attachment(1000*k+i, 3<<18) }))
				statuses[k] = status
				switch {
				case err != nil:
					t.Errorf("batch %d: %v", k, err)
				case status == http.StatusServiceUnavailable && h.Get("Retry-After") == "":
					t.Errorf("batch %d: 503 without Retry-After", k)
				case status != http.StatusOK && status != http.StatusServiceUnavailable:
					t.Errorf("batch %d: status %d: %.200s", k, status, b)
				}
			}()
		}
		wg.Wait()
		procstat.Within(t, p.Stop(), procstat.Bound{RSS: 160 << 20, Heap: 128 << 20, CPU: 15 * time.Second})
		t.Logf("statuses %v", statuses)
	})
	t.Run("a 1 GiB message to classify", func(t *testing.T) {
		sock, _, _ := hostileAPI(t, apiLimits{})
		p := procstat.Start(2 * time.Millisecond)
		body := newRepeat(1 << 30)
		status, _, _, err := post(sock, "/v1/classify", body)
		procstat.Within(t, p.Stop(), procstat.Bound{RSS: 64 << 20, Heap: 96 << 20, CPU: 3 * time.Second})
		if err == nil && status != http.StatusRequestEntityTooLarge {
			t.Errorf("status %d, want 413", status)
		}
		// The server stopped reading past the limit: the client could not
		// send the rest.
		if read := 1<<30 - body.left.Load(); read >= 1<<30 {
			t.Errorf("the whole GiB was sent")
		} else {
			t.Logf("%d MiB sent of 1024", read>>20)
		}
	})
	t.Run("a batch holding one 200 MiB message", func(t *testing.T) {
		sock, _, _ := hostileAPI(t, apiLimits{})
		body := io.MultiReader(strings.NewReader(`{"items":[{"class":"spam","message":"`), newRepeat(200<<20), strings.NewReader(`"}]}`))
		p := procstat.Start(2 * time.Millisecond)
		status, _, b, err := post(sock, "/v1/train", body)
		procstat.Within(t, p.Stop(), procstat.Bound{RSS: 96 << 20, Heap: 64 << 20, CPU: 3 * time.Second})
		if err == nil && status != http.StatusRequestEntityTooLarge {
			t.Errorf("status %d, want 413: %.200s", status, b)
		}
	})
}

// slow is a body that gives a byte every gap, for total bytes; it counts
// the bytes given.
type slow struct {
	total int
	gap   time.Duration
	given atomic.Int64
}

func (s *slow) Read(b []byte) (int, error) {
	if s.given.Load() == int64(s.total) {
		return 0, io.EOF
	}
	time.Sleep(s.gap)
	s.given.Add(1)
	b[0] = 'a'
	return 1, nil
}

// TestHostileSlowAndIdle trickles bodies and holds idle connections.
// Before: the server had no read timeout, so a body trickling a byte at a
// time held its request until the client was done.
func TestHostileSlowAndIdle(t *testing.T) {
	t.Run("bodies one byte at a time", func(t *testing.T) {
		const total = 100
		sock, _, _ := hostileAPI(t, apiLimits{read: time.Second})
		var wg sync.WaitGroup
		p := procstat.Start(2 * time.Millisecond)
		bodies := make([]*slow, 20)
		statuses := make([]int, len(bodies))
		for k := range bodies {
			// 100 bytes over 10 s, with read_timeout 1s.
			bodies[k] = &slow{total: total, gap: 100 * time.Millisecond}
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[k], _, _, _ = post(sock, "/v1/classify", bodies[k])
			}()
		}
		wg.Wait()
		procstat.Within(t, p.Stop(), procstat.Bound{RSS: 32 << 20, Heap: 16 << 20, CPU: time.Second})
		most := int64(0)
		for _, b := range bodies {
			most = max(most, b.given.Load())
		}
		t.Logf("20 trickling requests sent at most %d of their %d bytes (read_timeout 1s); answers %v", most, total, statuses)
		if most >= total {
			t.Errorf("a request sent its whole body of %d bytes, one every 100 ms, with read_timeout 1s", total)
		}
		for _, st := range statuses {
			if st != 0 && st != http.StatusRequestTimeout {
				t.Errorf("a trickling request answered %d, want 408 or a closed connection", st)
			}
		}
	})
	t.Run("1000 idle connections", func(t *testing.T) {
		al := apiLimits{}
		sock, _, _ := hostileAPI(t, al)
		p := procstat.Start(2 * time.Millisecond)
		conns := make([]net.Conn, 0, 1000)
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for range 1000 {
			c, err := net.Dial("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		time.Sleep(300 * time.Millisecond)
		procstat.Within(t, p.Stop(), procstat.Bound{RSS: 32 << 20, Heap: 16 << 20, CPU: time.Second, Goroutines: 2*al.maxConnections() + 50})
	})
}
