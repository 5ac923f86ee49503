package milter

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/textproto"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomilter "github.com/emersion/go-milter"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/decide"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/history"
	"github.com/spamd/spamd/store/badgerstore"
)

// corpus returns labelled messages for training and others to send:
// from the SpamAssassin corpus at $SPAMD_CORPUS (its index file lists
// "CLASS PATH" lines) when set, else the repository's sample.
func corpus(b *testing.B, trainN, sendN int) (train map[string][][]byte, send [][]byte) {
	b.Helper()
	dir := os.Getenv("SPAMD_CORPUS")
	if dir == "" {
		s := loadSample(b)
		train = map[string][][]byte{filter.Spam: s.spam, filter.Ham: s.ham}
		return train, slices.Concat(s.spam, s.ham)
	}
	f, err := os.Open(filepath.Join(dir, "index"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	train = map[string][][]byte{}
	sc := bufio.NewScanner(f)
	for n := 0; sc.Scan() && n < trainN+sendN; n++ {
		class, path, _ := strings.Cut(sc.Text(), " ")
		raw, err := os.ReadFile(filepath.Join(dir, path))
		if err != nil {
			b.Fatal(err)
		}
		if n < trainN {
			train[class] = append(train[class], raw)
		} else {
			send = append(send, raw)
		}
	}
	return train, send
}

// floor is a baseline milter that negotiates exactly what spamd
// negotiates (the same events, an answer to the end of the message only)
// and only adds a header: spamd minus its work.
type floor struct{}

func (floor) Connect(string, string, uint16, net.IP, *gomilter.Modifier) (gomilter.Response, error) {
	return nil, nil
}
func (floor) Helo(string, *gomilter.Modifier) (gomilter.Response, error)     { return nil, nil }
func (floor) MailFrom(string, *gomilter.Modifier) (gomilter.Response, error) { return nil, nil }
func (floor) RcptTo(string, *gomilter.Modifier) (gomilter.Response, error)   { return nil, nil }
func (floor) Header(string, string, *gomilter.Modifier) (gomilter.Response, error) {
	return nil, nil
}
func (floor) Headers(textproto.MIMEHeader, *gomilter.Modifier) (gomilter.Response, error) {
	return nil, nil
}
func (floor) BodyChunk([]byte, *gomilter.Modifier) (gomilter.Response, error) { return nil, nil }
func (floor) Abort(*gomilter.Modifier) error                                  { return nil }
func (floor) Body(m *gomilter.Modifier) (gomilter.Response, error)            { return addNoop(m) }

// noop is go-milter's NoOpMilter adding a header, served with the
// library's defaults: every event sent and answered.
type noop struct{ gomilter.NoOpMilter }

func (noop) Body(m *gomilter.Modifier) (gomilter.Response, error) { return addNoop(m) }

func addNoop(m *gomilter.Modifier) (gomilter.Response, error) {
	if err := m.AddHeader("X-Noop", "seen"); err != nil {
		return nil, err
	}
	return gomilter.RespAccept, nil
}

// serveBaseline starts a baseline server and returns its address.
func serveBaseline(b *testing.B, s *gomilter.Server) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go s.Serve(ln)
	b.Cleanup(func() { s.Close() })
	return ln.Addr().String()
}

// load sends n messages to addr over sessions concurrent connections, one
// connection per message as Postfix opens them, and returns the time it
// took and the latency of each message (connect to answer).
func load(b *testing.B, addr string, sessions, n int, msgs []parsed, header string) (elapsed time.Duration, lat []time.Duration) {
	b.Helper()
	var next atomic.Int64
	var errs atomic.Int64
	var firstErr atomic.Value
	lats := make([][]time.Duration, sessions)
	var wg sync.WaitGroup
	start := time.Now()
	for g := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env := defaultEnvelope()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				t0 := time.Now()
				if err := once(addr, env, msgs[int(i)%len(msgs)], header); err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				lats[g] = append(lats[g], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed = time.Since(start)
	if e := errs.Load(); e > 0 {
		b.Fatalf("%d of %d messages failed; first: %v", e, n, firstErr.Load())
	}
	return elapsed, slices.Concat(lats...)
}

// once passes one message through a new connection to addr and checks
// that it was accepted with header added.
func once(addr string, env envelope, msg parsed, header string) error {
	s, err := newClient(addr).Session()
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := s.Conn("client.example.net", gomilter.FamilyInet, 40000, env.client); err != nil {
		return err
	}
	if _, err := s.Helo("client.example.net"); err != nil {
		return err
	}
	r, err := sendParsed(s, env, msg)
	if err != nil {
		return err
	}
	if r.act == nil || r.act.Code != gomilter.ActAccept {
		return fmt.Errorf("answer %+v", r.act)
	}
	if _, ok := r.added(header); !ok {
		return fmt.Errorf("no %s added", header)
	}
	return nil
}

// target is a server under load.
type target struct{ name, addr, header string }

// compare sends n messages to each target, alternating between them in
// rounds so that whatever else the machine does weighs on all alike, and
// returns each target's rate and sorted latencies.
func compare(b *testing.B, sessions, n int, msgs []parsed, targets []target) (rate []float64, lat [][]time.Duration) {
	rounds := min(10, max(1, n/(8*sessions)))
	took := make([]time.Duration, len(targets))
	rate, lat = make([]float64, len(targets)), make([][]time.Duration, len(targets))
	for r := range rounds {
		k := n / rounds
		if r == rounds-1 {
			k = n - k*(rounds-1)
		}
		// Each round starts with the next target, so that none always
		// runs right after the same other one and pays for what that one
		// left behind: its garbage to collect, its sockets closing.
		for j := range targets {
			i := (r + j) % len(targets)
			t := targets[i]
			e, l := load(b, t.addr, sessions, k, msgs, t.header)
			took[i] += e
			lat[i] = append(lat[i], l...)
		}
	}
	for i := range targets {
		rate[i] = float64(n) / took[i].Seconds()
		slices.Sort(lat[i])
	}
	return rate, lat
}

func quantile(lat []time.Duration, q float64) float64 {
	if len(lat) == 0 {
		return 0
	}
	return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))]) / float64(time.Millisecond)
}

// BenchmarkMilterLoad measures spamd's milter under concurrent sessions,
// one connection per message as Postfix opens them, against two baseline
// go-milter servers in the same run, which only add a header: "noop", the
// library's NoOpMilter with its defaults (every event sent and answered),
// and "floor", which negotiates exactly what spamd negotiates (events
// streamed, only the end of the message answered), so that spamd's own
// work stands alone; and "history", spamd recording every verdict in a
// history of the default size (package history), to show what that
// costs. Each of b.N messages goes to every server, in rounds whose
// order rotates. The metrics are each server's messages per second and 50th and
// 99th percentile latency (connect to answer), spamd's throughput as a
// share of each baseline's and the difference of the 99th percentiles,
// and the history's throughput as a share of spamd's without it
// (history/spamd-throughput).
func BenchmarkMilterLoad(b *testing.B) {
	trainSet, sendSet := corpus(b, 2000, 1000)
	st, err := badgerstore.Open(context.Background(), b.TempDir(), badgerstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	f, err := filter.New(st, filter.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	for class, msgs := range trainSet {
		items := make([]filter.Item, 0, len(msgs))
		for _, raw := range msgs {
			p, err := f.Prepare(raw, false)
			if err != nil {
				continue
			}
			items = append(items, filter.Item{Prepared: p, Class: class})
		}
		if _, err := f.Train(context.Background(), "", items); err != nil {
			b.Fatal(err)
		}
	}
	// The daemon reads the model into the cache when it starts.
	if _, err := st.Warm(context.Background(), ""); err != nil {
		b.Fatal(err)
	}
	msgs := make([]parsed, len(sendSet))
	var bytes int
	for i, raw := range sendSet {
		msgs[i] = parse(raw)
		bytes += len(raw)
	}
	b.Logf("trained %d spam and %d ham; sending %d messages of %d bytes on average",
		len(trainSet[filter.Spam]), len(trainSet[filter.Ham]), len(msgs), bytes/len(msgs))

	// spamd logs every message; a text handler into io.Discard keeps the
	// cost of formatting the line.
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	def := config.Default(func(string) string { return "" })
	serve := func(set *Settings) string {
		srv := New(set, log, nil)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		go srv.Serve(ln)
		b.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			srv.Shutdown(ctx)
		})
		return ln.Addr().String()
	}
	hist, err := history.New(history.Options{Size: def.History.Size, MaxMessageBytes: int64(def.History.MessageMB) << 20})
	if err != nil {
		b.Fatal(err)
	}
	targets := []target{
		{"spamd", serve(&Settings{Filter: f, Milter: def.Milter, Actions: def.Actions}), decide.ResultHeader},
		{"history", serve(&Settings{Filter: f, Milter: def.Milter, Actions: def.Actions, History: hist}), decide.ResultHeader},
		{"noop", serveBaseline(b, &gomilter.Server{NewMilter: func() gomilter.Milter { return noop{} }, Actions: gomilter.OptAddHeader}), "X-Noop"},
		{"floor", serveBaseline(b, &gomilter.Server{NewMilter: func() gomilter.Milter { return floor{} }, Actions: actions, Protocol: protocol}), "X-Noop"},
	}
	for _, sessions := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("sessions=%d", sessions), func(b *testing.B) {
			// Warm all up: caches, goroutines, the kernel's socket state.
			compare(b, sessions, min(200, len(msgs)), msgs, targets)
			b.ResetTimer()
			rate, lat := compare(b, sessions, b.N, msgs, targets)
			b.StopTimer()
			for i, t := range targets {
				b.ReportMetric(rate[i], t.name+"-msgs/s")
				b.ReportMetric(quantile(lat[i], 0.50), t.name+"-p50-ms")
				b.ReportMetric(quantile(lat[i], 0.99), t.name+"-p99-ms")
				switch {
				case t.name == "history":
					b.ReportMetric(rate[i]/rate[0], "history/spamd-throughput")
					b.ReportMetric(quantile(lat[i], 0.99)-quantile(lat[0], 0.99), "history-spamd-p99-delta-ms")
				case i > 0:
					b.ReportMetric(rate[0]/rate[i], "spamd/"+t.name+"-throughput")
					b.ReportMetric(quantile(lat[0], 0.99)-quantile(lat[i], 0.99), "spamd-"+t.name+"-p99-delta-ms")
				}
			}
		})
	}
}
