package redisstore_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/mailbox"
	"github.com/spamd/spamd/store/redisstore"
	"github.com/spamd/spamd/store/redisstore/redistest"
)

// redisCPU returns the CPU time the server has used.
func redisCPU(t *testing.T, srv *redistest.Server) time.Duration {
	t.Helper()
	var sum float64
	for _, f := range []string{"used_cpu_user", "used_cpu_sys"} {
		v, err := strconv.ParseFloat(srv.Info(f), 64)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		sum += v
	}
	return time.Duration(sum * float64(time.Second))
}

// redisCalls returns the script calls the server has answered, not
// counting the commands the scripts run: each is a round trip, or part of
// one when pipelined. (The reads of totals alone, HMGET, are left out:
// scripts run it too, and a lookup brings the totals with it.)
func redisCalls(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	out, err := srv.Command("INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(out, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		switch strings.TrimPrefix(name, "cmdstat_") {
		case "evalsha", "evalsha_ro", "eval", "eval_ro":
		default:
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		v, _ := strconv.ParseInt(calls, 10, 64)
		n += v
	}
	return n
}

// selfCPU returns the CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestCapacity measures what bounds a cluster of nodes on one Redis, on
// the SpamAssassin corpus ($SPAMD_CORPUS): Redis's CPU time and calls per
// learned message, training four fifths of the corpus in batches of 100
// as spamtrain does; and per classified message on a node whose cache is
// warm, against the node's own CPU time for the message (tokenizing
// included), classifying the last fifth. docs/cluster.md projects from
// the figures it logs. It is a measurement, not a test: it runs only with
// SPAMD_MEASURE=1.
func TestCapacity(t *testing.T) {
	corpus := os.Getenv("SPAMD_CORPUS")
	if corpus == "" || os.Getenv("SPAMD_MEASURE") != "1" {
		t.Skip("set SPAMD_MEASURE=1 and SPAMD_CORPUS to the SpamAssassin corpus to measure capacity")
	}
	entries, err := mailbox.ReadIndex(filepath.Join(corpus, "index"))
	if err != nil {
		t.Fatal(err)
	}
	srv := redistest.Start(t, redistest.Binary(t, "SPAMD_REDIS_SERVER", "redis-server"))
	ctx := context.Background()
	open := func() *redisstore.Store {
		s, err := redisstore.Open(ctx, redisstore.Options{Addresses: []string{srv.Addr}, Prefix: "cap:"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	trainer, node := open(), open()
	ft, err := filter.New(trainer, filter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	fn, err := filter.New(node, filter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var train []filter.Item
	var test [][]byte
	for i, e := range entries {
		raw, err := os.ReadFile(e.Path)
		if err != nil {
			t.Fatal(err)
		}
		if i%5 == 4 {
			test = append(test, raw)
			continue
		}
		p, err := ft.Prepare(raw, false)
		if err != nil {
			continue
		}
		train = append(train, filter.Item{Prepared: p, Class: strings.ToLower(e.Label)})
	}

	cpu0, calls0, start := redisCPU(t, srv), redisCalls(t, srv), time.Now()
	for i := 0; i < len(train); i += 100 {
		if _, err := ft.Train(ctx, "", train[i:min(i+100, len(train))]); err != nil {
			t.Fatal(err)
		}
	}
	cpu, calls, wall := redisCPU(t, srv)-cpu0, redisCalls(t, srv)-calls0, time.Since(start)
	n := float64(len(train))
	if out, err := srv.Command("INFO", "commandstats"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "cmdstat_evalsha") {
				name, rest, _ := strings.Cut(strings.TrimSpace(line), ":")
				var calls, usec int64
				for _, kv := range strings.Split(rest, ",") {
					k, v, _ := strings.Cut(kv, "=")
					switch k {
					case "calls":
						calls, _ = strconv.ParseInt(v, 10, 64)
					case "usec":
						usec, _ = strconv.ParseInt(v, 10, 64)
					}
				}
				t.Logf("learn: %s: %d calls, %.0f µs a learned message", strings.TrimPrefix(name, "cmdstat_"), calls, float64(usec)/n)
			}
		}
	}
	t.Logf("learn: %d messages in %v (%.0f/s): Redis CPU %v a message, %.2f calls a message",
		len(train), wall.Round(time.Millisecond), n/wall.Seconds(), (cpu / time.Duration(n)).Round(time.Microsecond), float64(calls)/n)

	warmStart := time.Now()
	tokens, err := node.Warm(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("warm: %d tokens read into the node's cache in %v", tokens, time.Since(warmStart).Round(time.Millisecond))
	for pass := range 2 {
		cpu0, calls0, self0, start := redisCPU(t, srv), redisCalls(t, srv), selfCPU(), time.Now()
		for _, raw := range test {
			if _, err := fn.Classify(ctx, "", raw, filter.ClassifyOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		cpu, calls, self, wall := redisCPU(t, srv)-cpu0, redisCalls(t, srv)-calls0, selfCPU()-self0, time.Since(start)
		n := float64(len(test))
		t.Logf("classify, pass %d: %d messages in %v: node CPU %v a message, Redis CPU %v a message (%.2f%% of the node's), %.3f calls a message",
			pass+1, len(test), wall.Round(time.Millisecond), (self / time.Duration(n)).Round(time.Microsecond),
			(cpu / time.Duration(n)).Round(100*time.Nanosecond), 100*cpu.Seconds()/self.Seconds(), float64(calls)/n)
	}
}
