package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gomilter "github.com/emersion/go-milter"

	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/store/redisstore"
	"github.com/spamd/spamd/store/redisstore/redistest"
)

// outage is how long TestRedisNodes keeps Redis down.
const outage = 10 * time.Second

// redisNode runs a spamd node on the Redis server at addr, with its
// sockets and report queue in a directory of its own, and returns its
// API client and the path of its milter socket.
func redisNode(t *testing.T, addr string) (*control.Client, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	write(t, path, fmt.Sprintf("[store]\nbackend = \"redis\"\ndir = %q\n[store.redis]\naddress = [%q]\ntimeout = \"300ms\"\n"+
		"[milter]\nlisten = \"unix:%s\"\n[api]\nsocket = %q\n[metrics]\nlisten = \"\"\n",
		dir, addr, filepath.Join(dir, "milter.sock"), filepath.Join(dir, "api.sock")))
	runDaemon(t, options{config: path}, nil)
	api, err := control.NewClient("unix:"+filepath.Join(dir, "api.sock"), "")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the API", func() bool { return api.Health(context.Background()) == nil })
	return api, filepath.Join(dir, "milter.sock")
}

// TestRedisNodes runs two spamd nodes on one Redis: what one trains, the
// other classifies with; a report made on one changes the other's score
// within milliseconds; with Redis down the milter goes on judging from the
// cache and reports wait in the queue, to be applied once Redis is back.
func TestRedisNodes(t *testing.T) {
	srv := redistest.Start(t, redistest.Binary(t, "SPAMD_REDIS_SERVER", "redis-server"),
		"--appendonly", "yes", "--appendfsync", "everysec")
	api1, _ := redisNode(t, srv.Addr)
	api2, milter2 := redisNode(t, srv.Addr)
	ctx := context.Background()
	spam, _ := trainSample(t, api1)

	s := milterSession(t, milter2)
	defer s.Close()
	startMessage(t, s, spam)
	if got := endMessage(t, s); got != "accept YES" {
		t.Fatalf("node 2 judges the spam node 1 learned: %s", got)
	}

	// A user's report on node 1 moves node 2's score for that user.
	const user = "user@test.example"
	before, err := api2.Classify(ctx, user, spam, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api1.Train(ctx, user, []control.Item{{Class: "ham", Message: spam}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		v, err := api2.Classify(ctx, user, spam, 0)
		if err != nil {
			t.Fatal(err)
		}
		if v.Score != before.Score {
			break
		}
		if time.Since(start) > 2*time.Second {
			t.Fatalf("node 2's score stays %v after node 1 learned the message as ham", v.Score)
		}
		time.Sleep(time.Millisecond)
	}
	// Measured, not asserted: a loaded machine running -race may take
	// longer than the few milliseconds a quiet one does.
	t.Logf("node 2's score for %s moved %v after node 1's training returned", user, time.Since(start))

	// Redis down for a while, under milter load: every session goes on
	// judging, from the cache, each message well within its timeout;
	// reports wait in the queue. (docs/cluster.md: "Faults".)
	const sessions = 8
	ss := make([]*gomilter.ClientSession, sessions)
	ss[0] = s
	for i := 1; i < sessions; i++ {
		ss[i] = milterSession(t, milter2)
		defer ss[i].Close()
	}
	srv.Kill()
	down := time.Now()
	if _, err := api1.Report(ctx, user, "spam", "api", spam); err != nil {
		t.Fatalf("report with Redis down: %v", err)
	}
	var (
		mu       sync.Mutex
		messages int
		slowest  time.Duration
		wg       sync.WaitGroup
	)
	errs := make(chan error, sessions)
	for _, s := range ss {
		wg.Go(func() {
			for time.Since(down) < outage {
				if err := sendMessage(s, spam); err != nil {
					errs <- err
					return
				}
				start := time.Now()
				// The user's model says ham now: any verdict will do,
				// as long as there is one.
				got, err := finishMessage(s)
				if err == nil && !strings.HasPrefix(got, "accept") {
					err = fmt.Errorf("node 2 with Redis down: %s", got)
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				slowest = max(slowest, time.Since(start))
				messages++
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("Redis down for %v: %d milter sessions on node 2 judged %d messages from its cache, the slowest in %v",
		outage, sessions, messages, slowest)
	if slowest > 2*time.Second {
		t.Errorf("node 2 with Redis down took %v for a message", slowest)
	}
	if st, err := api1.Stats(ctx); err == nil && st.PendingReports != 1 {
		t.Errorf("%d reports pending with Redis down, want 1", st.PendingReports)
	}
	srv.Restart(t)
	waitFor(t, 30*time.Second, "the report to be applied", func() bool {
		st, err := api1.Stats(ctx)
		return err == nil && st.PendingReports == 0
	})
	v, err := api2.Classify(ctx, user, spam, 0)
	if err != nil {
		t.Fatal(err)
	}
	if v.TrainedAs != "spam" {
		t.Errorf("after Redis came back, node 2 sees the message trained as %q, want spam", v.TrainedAs)
	}
	rs, err := redisstore.Open(ctx, redisstore.Options{Addresses: []string{srv.Addr}, NoStaleReads: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	for _, u := range []string{"", user} {
		if err := rs.Check(ctx, u); err != nil {
			t.Errorf("Check(%q): %v", u, err)
		}
	}
	tot, err := rs.Totals(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	if i := tot.Index("spam"); i < 0 || tot.Messages[i] != 1 || tot.Messages[tot.Index("ham")] != 0 {
		t.Errorf("user's totals %+v: the report should have counted once, as spam", tot)
	}
}
