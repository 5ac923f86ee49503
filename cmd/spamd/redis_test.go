package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	t.Logf("node 2's score for %s moved %v after node 1's training returned", user, time.Since(start))
	if d := time.Since(start); d > 50*time.Millisecond {
		t.Errorf("node 2 took %v to see node 1's training", d)
	}

	// Redis down for a while: the milter goes on judging, from the
	// cache, every message well within its timeout; reports wait in the
	// queue. (docs/cluster.md: "Faults".)
	srv.Kill()
	down := time.Now()
	if _, err := api1.Report(ctx, user, "spam", "api", spam); err != nil {
		t.Fatalf("report with Redis down: %v", err)
	}
	messages, slowest := 0, time.Duration(0)
	for time.Since(down) < outage {
		startMessage(t, s, spam)
		start := time.Now()
		// The user's model says ham now: any verdict will do, as long
		// as there is one.
		if got := endMessage(t, s); !strings.HasPrefix(got, "accept") {
			t.Fatalf("node 2 with Redis down: %s", got)
		}
		slowest = max(slowest, time.Since(start))
		messages++
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("Redis down for %v: node 2 judged %d messages from its cache, the slowest in %v", outage, messages, slowest)
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
