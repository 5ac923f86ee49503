package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spamd/spamd/control"
)

// soakEnv sets the soak's duration, as time.ParseDuration takes it:
// SPAMD_SOAK=10m. Unset, the soak runs for defaultSoak, so that it stays
// exercised; the long run is made by hand (docs/faults.md records its
// figures):
//
//	SPAMD_SOAK=10m SPAMD_CORPUS=../shared/corpus/spamassassin \
//	    go test -run '^TestSoak$' -v -timeout 20m ./cmd/spamd
const soakEnv = "SPAMD_SOAK"

const defaultSoak = 15 * time.Second

// TestSoak runs the built spamd, a process of its own so that its memory
// can be measured, under 64 milter sessions sending mail with forged
// X-Spam-* fields back to back, while reports arrive through /v1/report,
// for the duration SPAMD_SOAK says. It must make no error anywhere (the
// MTA's side, the reporter's, spamd_errors_total), keep its resident
// memory flat within 10% once warmed up (the first fifth of the run, half
// of a run shorter than a minute: the caches filling with the models
// reports train), and be
// back to its goroutines of before the load once the sessions close.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("a soak")
	}
	duration := defaultSoak
	if v := os.Getenv(soakEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", soakEnv, v, err)
		}
		duration = d
	}
	// Short runs warm up for half their time: the first seconds fill
	// the caches with what reports train.
	warmup := duration / 5
	if duration < time.Minute {
		warmup = duration / 2
	}
	const sessions = 64

	work := t.TempDir()
	bin := buildSpamd(t, work)
	metrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	sock := filepath.Join(work, "milter.sock")
	path := filepath.Join(work, "config.toml")
	write(t, path, fmt.Sprintf(`[store]
dir = %q
[milter]
listen = "unix:%s"
[api]
socket = %q
[metrics]
listen = %q
[log]
level = "warn"
`, filepath.Join(work, "db"), sock, filepath.Join(work, "api.sock"), metrics))
	logs := &lockedBuffer{}
	cmd := exec.Command(bin, "--config", path)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() || strings.TrimSpace(logs.String()) != "" {
			t.Logf("spamd's log (warnings and errors):\n%s", logs.String())
		}
	})
	api, err := control.NewClient("unix:"+filepath.Join(work, "api.sock"), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	waitFor(t, 20*time.Second, "the API", func() bool { return api.Health(ctx) == nil })

	// The global model, from the corpus if there is one; the rest of the
	// messages read is the mail, and the reports.
	train, send := e2eMessages(t, 300)
	for i := 0; i < len(train); i += 100 {
		var items []control.Item
		for _, m := range train[i:min(i+100, len(train))] {
			items = append(items, control.Item{Class: m.class, Message: m.raw})
		}
		if _, err := api.Train(ctx, "", items); err != nil {
			t.Fatal(err)
		}
	}
	// Spam and ham in turn, however the corpus orders them.
	byClass := map[string][]labelled{}
	for _, m := range send {
		byClass[m.class] = append(byClass[m.class], m)
	}
	send = send[:0]
	for i := 0; len(send) < cap(send); i++ {
		for _, class := range []string{"spam", "ham"} {
			if ms := byClass[class]; len(ms) > 0 {
				send = append(send, ms[i%len(ms)])
			}
		}
	}
	var mail [][]byte
	for _, m := range send {
		mail = append(mail, stripFrom(m.raw))
	}
	users := []string{"alice@test.example", "bob@test.example", "carol@test.example", "dave@test.example"}

	rss := &rssSampler{pid: cmd.Process.Pid, stop: make(chan struct{}), done: make(chan struct{})}
	go rss.run(time.Second)
	t.Cleanup(rss.halt)
	time.Sleep(2 * time.Second) // the store's start settles
	before := scrape(t, metrics)
	rssBefore := rss.last()

	start := time.Now()
	ml := startMilterLoad(t, "unix", sock, sessions, mail, "accept")
	// Each message is reported for the same user each time round, so
	// that the models stop growing once every message was reported.
	rl := startReportLoad(t, api, 200*time.Millisecond, func(n int) (string, string, []byte) {
		m := send[n%len(send)]
		return users[n%len(send)%len(users)], m.class, stripFrom(m.raw)
	})
	time.Sleep(warmup)
	rssWarm := rss.last()
	heapWarm := scrape(t, metrics)["go_memstats_heap_inuse_bytes"]
	time.Sleep(duration - warmup)
	heapEnd := scrape(t, metrics)["go_memstats_heap_inuse_bytes"]
	ml.halt()
	rl.halt()
	elapsed := time.Since(start)
	rssEnd := rss.last()
	waitApplied(t, api, time.Minute)

	// Goroutines: the sessions closed, spamd must be back to where it
	// was, within the time its connections take to end: an HTTP client
	// may leave one more kept-alive connection than before, which
	// [api] idle_timeout (1m) closes.
	var after map[string]float64
	deadline := time.Now().Add(75 * time.Second)
	for {
		after = scrape(t, metrics)
		if after["go_goroutines"] <= before["go_goroutines"] || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	rss.halt()

	kinds, lost, slowest, failures := ml.summary()
	rl.mu.Lock()
	reported, refused, rfailures := rl.accepted, rl.refused, rl.failures
	rl.mu.Unlock()
	errs, byKind := errorsTotal(after)
	peak, peakAt := rss.peak(start.Add(warmup))
	t.Logf("soak of %v, %d milter sessions: %d messages answered (%.0f/s) %v, slowest %v; %d reports accepted, %d refused",
		elapsed.Round(time.Second), sessions, ml.answered.Load(), float64(ml.answered.Load())/elapsed.Seconds(), kinds, slowest, reported, refused)
	t.Logf("RSS: %d MiB before the load, %d MiB after the warm-up (%v), %d MiB at most after it (at +%v), %d MiB at the end",
		rssBefore>>20, rssWarm>>20, warmup, peak>>20, peakAt.Sub(start).Round(time.Second), rssEnd>>20)
	t.Logf("RSS by minute, least–most: %s; Go heap in use %.0f MiB after the warm-up, %.0f MiB at the end",
		rss.byMinute(start), heapWarm/(1<<20), heapEnd/(1<<20))
	t.Logf("goroutines: %v before the load, %v after; spamd_errors_total %v %v",
		before["go_goroutines"], after["go_goroutines"], errs, byKind)

	for _, err := range failures {
		t.Errorf("milter: %v", err)
	}
	if lost > 0 {
		t.Errorf("%d milter sessions lost", lost)
	}
	for _, err := range rfailures {
		t.Errorf("reports: %v", err)
	}
	if refused > 0 {
		t.Errorf("%d reports refused", refused)
	}
	if errs != 0 {
		t.Errorf("spamd_errors_total: %v", byKind)
	}
	if float64(peak) > 1.10*float64(rssWarm) || float64(rssEnd) > 1.10*float64(rssWarm) {
		t.Errorf("RSS grew more than 10%% after the warm-up: %d MiB, then %d MiB at most, %d MiB at the end", rssWarm>>20, peak>>20, rssEnd>>20)
	}
	if after["go_goroutines"] > before["go_goroutines"] {
		t.Errorf("goroutines: %v after the load, %v before; their stacks follow in spamd's log", after["go_goroutines"], before["go_goroutines"])
		// SIGQUIT makes the Go runtime print every goroutine's stack.
		cmd.Process.Signal(syscall.SIGQUIT)
		<-exited
		exited <- nil
	}
	rl.mu.Lock()
	verifyModels(t, api, nil, rl.acked)
	rl.mu.Unlock()
}

// rssSampler reads a process's resident memory every interval.
type rssSampler struct {
	pid  int
	stop chan struct{}
	done chan struct{}
	once sync.Once

	mu      sync.Mutex
	samples []rssSample
}

type rssSample struct {
	at    time.Time
	bytes int64
}

func (r *rssSampler) run(interval time.Duration) {
	defer close(r.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if b, err := readRSS(r.pid); err == nil {
			r.mu.Lock()
			r.samples = append(r.samples, rssSample{time.Now(), b})
			r.mu.Unlock()
		}
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
	}
}

func (r *rssSampler) halt() {
	r.once.Do(func() { close(r.stop) })
	<-r.done
}

// last returns the latest sample.
func (r *rssSampler) last() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.samples) == 0 {
		return 0
	}
	return r.samples[len(r.samples)-1].bytes
}

// peak returns the largest sample from since on, and when.
func (r *rssSampler) peak(since time.Time) (int64, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var p rssSample
	for _, s := range r.samples {
		if !s.at.Before(since) && s.bytes > p.bytes {
			p = s
		}
	}
	return p.bytes, p.at
}

// byMinute returns the least and the most of the samples of each minute
// from start on, in MiB.
func (r *rssSampler) byMinute(start time.Time) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	type span struct{ lo, hi int64 }
	var spans []span
	for _, s := range r.samples {
		if s.at.Before(start) {
			continue
		}
		m := int(s.at.Sub(start) / time.Minute)
		for len(spans) <= m {
			spans = append(spans, span{lo: 1 << 62})
		}
		spans[m].lo, spans[m].hi = min(spans[m].lo, s.bytes), max(spans[m].hi, s.bytes)
	}
	var out []string
	for _, sp := range spans {
		out = append(out, fmt.Sprintf("%d–%d", sp.lo>>20, sp.hi>>20))
	}
	return strings.Join(out, ", ")
}

// readRSS reads VmRSS of process pid, in bytes.
func readRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
