package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/mailbox"
	"github.com/spamd/spamd/store/redisstore/redistest"
)

// TestFourNodes is the demonstration docs/cluster.md describes: four
// spamd processes on one Redis train disjoint fifths of the SpamAssassin
// corpus ($SPAMD_CORPUS) through their APIs while classifying the last
// fifth through their milters. Then spamtrain check passes on the Redis
// model, its counts equal, token by token, those of a Badger model
// spamtrain trains on the same four fifths, and a report made on node 1
// changes node 3's score for the reported message within milliseconds.
func TestFourNodes(t *testing.T) {
	corpus := os.Getenv("SPAMD_CORPUS")
	if corpus == "" || testing.Short() {
		t.Skip("set SPAMD_CORPUS to the SpamAssassin corpus to run four nodes on it")
	}
	entries, err := mailbox.ReadIndex(filepath.Join(corpus, "index"))
	if err != nil {
		t.Fatal(err)
	}
	srv := redistest.Start(t, redistest.Binary(t, "SPAMD_REDIS_SERVER", "redis-server"),
		"--appendonly", "yes", "--appendfsync", "everysec")
	bin := t.TempDir()
	spamd, spamtrain := buildSpamd(t, bin), buildSpamtrain(t, bin)

	const nodes = 4
	apis := make([]*control.Client, nodes)
	milters := make([]string, nodes)
	for i := range nodes {
		dir := t.TempDir()
		cfg := filepath.Join(dir, "config.toml")
		milters[i] = filepath.Join(dir, "milter.sock")
		write(t, cfg, fmt.Sprintf("[store]\nbackend = \"redis\"\ndir = %q\n[store.redis]\naddress = [%q]\n"+
			"[milter]\nlisten = \"unix:%s\"\n[api]\nsocket = %q\n[metrics]\nlisten = \"\"\n",
			dir, srv.Addr, milters[i], filepath.Join(dir, "api.sock")))
		var logs lockedBuffer
		cmd := exec.Command(spamd, "--config", cfg)
		cmd.Stderr = &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
			if t.Failed() {
				t.Logf("node %d's log:\n%s", i+1, logs.String())
			}
		})
		if apis[i], err = control.NewClient("unix:"+filepath.Join(dir, "api.sock"), ""); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, "the API", func() bool { return apis[i].Health(context.Background()) == nil })
	}

	type msg struct {
		path, class string
		raw         []byte
	}
	var parts [nodes + 1][]msg
	for i, e := range entries {
		raw, err := os.ReadFile(e.Path)
		if err != nil {
			t.Fatal(err)
		}
		parts[i%(nodes+1)] = append(parts[i%(nodes+1)], msg{e.Path, strings.ToLower(e.Label), raw})
	}
	ctx := context.Background()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 2*nodes)
	classified := make([]int, nodes)
	for n := range nodes {
		wg.Go(func() {
			for i := 0; i < len(parts[n]); i += 100 {
				var items []control.Item
				for _, m := range parts[n][i:min(i+100, len(parts[n]))] {
					items = append(items, control.Item{Class: m.class, Message: m.raw})
				}
				if _, err := apis[n].Train(ctx, "", items); err != nil {
					errs <- fmt.Errorf("node %d: train: %w", n+1, err)
					return
				}
			}
		})
		wg.Go(func() {
			s := milterSession(t, milters[n])
			defer s.Close()
			for i := n; i < len(parts[nodes]); i += nodes {
				startMessage(t, s, stripFrom(parts[nodes][i].raw))
				if got := endMessage(t, s); !strings.HasPrefix(got, "accept") {
					errs <- fmt.Errorf("node %d: milter: %s", n+1, got)
					return
				}
				classified[n]++
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	trained := 0
	for _, p := range parts[:nodes] {
		trained += len(p)
	}
	t.Logf("%d nodes trained %d messages and classified %d through their milters in %v", nodes, trained,
		len(parts[nodes]), time.Since(start).Round(time.Millisecond))

	if out, err := exec.Command(spamtrain, "check", "--redis", srv.Addr).CombinedOutput(); err != nil {
		t.Fatalf("spamtrain check: %v\n%s", err, out)
	} else {
		t.Logf("spamtrain check --redis: %s", strings.TrimSpace(string(out)))
	}

	// One Badger node, trained by spamtrain on the same messages.
	index := filepath.Join(t.TempDir(), "index")
	var ib bytes.Buffer
	for _, p := range parts[:nodes] {
		for _, m := range p {
			abs, _ := filepath.Abs(m.path)
			fmt.Fprintf(&ib, "%s %s\n", m.class, abs)
		}
	}
	write(t, index, ib.String())
	db := t.TempDir()
	if out, err := exec.Command(spamtrain, "train", "--db", db, "--index", index).CombinedOutput(); err != nil {
		t.Fatalf("spamtrain train --db: %v\n%s", err, out)
	}
	dumpOf := func(args ...string) string {
		out, err := exec.Command(spamtrain, append([]string{"dump", "--user", ""}, args...)...).Output()
		if err != nil {
			t.Fatalf("spamtrain dump %v: %v", args, err)
		}
		return string(out)
	}
	inRedis, inBadger := countsOf(t, dumpOf("--redis", srv.Addr)), countsOf(t, dumpOf("--db", db))
	if inRedis != inBadger {
		a, b := strings.Split(inBadger, "\n"), strings.Split(inRedis, "\n")
		for i := range min(len(a), len(b)) {
			if a[i] != b[i] {
				t.Fatalf("the dumps differ first at line %d:\nBadger: %s\nRedis:  %s", i+1, a[i], b[i])
			}
		}
		t.Fatalf("the dumps differ in length: %d lines from Badger, %d from Redis", len(a), len(b))
	}
	t.Logf("spamtrain dump of the Redis and the Badger model: the same %d token rows and seen records, counts and classes",
		strings.Count(inRedis, "\n"))

	// A report on node 1 reaches node 3.
	const user = "alice@example.org"
	m := parts[nodes][0]
	before, err := apis[2].Classify(ctx, user, m.raw, 0)
	if err != nil {
		t.Fatal(err)
	}
	other := "spam"
	if m.class == "spam" {
		other = "ham"
	}
	reported := time.Now()
	if _, err := apis[0].Report(ctx, user, other, "api", m.raw); err != nil {
		t.Fatal(err)
	}
	for {
		v, err := apis[2].Classify(ctx, user, m.raw, 0)
		if err != nil {
			t.Fatal(err)
		}
		if v.Score != before.Score {
			break
		}
		if time.Since(reported) > 5*time.Second {
			t.Fatalf("node 3's score stays %v after the report on node 1", v.Score)
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("a report on node 1 changed node 3's score after %v (report queued, applied, invalidated)", time.Since(reported).Round(10*time.Microsecond))
}

// countsOf returns what of a dump must not depend on the order in which
// messages were learned: every token row's last day and counts and every
// seen record's class, day and mark, with the classes in name order. The
// learned weights and the steps of the seen records are left out, since
// four nodes learning at once see messages in another order than one node
// does.
func countsOf(t *testing.T, dump string) string {
	t.Helper()
	var b strings.Builder
	var classes, order []string
	// byName rewrites fields, one per class in the section's order (or
	// pairs of count and weight where pairs), in the order of the names.
	byName := func(fields []string, pairs bool) string {
		step := 1
		if pairs {
			step = 2
		}
		if len(fields) != step*len(classes) {
			t.Fatalf("dump line with %d fields for %d classes: %q", len(fields), len(classes), fields)
		}
		out := make([]string, len(order))
		for i, name := range order {
			out[i] = name + "=" + fields[step*slices.Index(classes, name)]
		}
		return strings.Join(out, " ")
	}
	for _, line := range strings.Split(strings.TrimSpace(dump), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case f[0] == "classes":
			classes, order = f[1:], slices.Sorted(slices.Values(f[1:]))
			fmt.Fprintf(&b, "classes %s\n", strings.Join(order, " "))
		case f[0] == "t" && len(f) >= 3:
			fmt.Fprintf(&b, "t %s %s %s\n", f[1], f[2], byName(f[3:], true))
		case f[0] == "s" && len(f) >= 5:
			fmt.Fprintf(&b, "s %s %s %s %s\n", f[1], f[2], f[3], f[4])
		case f[0] == "end":
			fmt.Fprintf(&b, "end")
			for _, kv := range f[1:] {
				k, v, _ := strings.Cut(kv, "=")
				if k == "messages" || k == "counts" || k == "values" || k == "levels" {
					v = byName(strings.Split(v, ","), false)
				}
				fmt.Fprintf(&b, " %s=%s", k, v)
			}
			b.WriteString("\n")
		default:
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
