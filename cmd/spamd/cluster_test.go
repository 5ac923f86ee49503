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

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/mailbox"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/badgerstore"
	"github.com/spamd/spamd/store/redisstore"
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
	rs, err := redisstore.Open(ctx, redisstore.Options{Addresses: []string{srv.Addr}, NoStaleReads: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	bs, err := badgerstore.Open(ctx, db, badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	var raws [][]byte
	for _, p := range parts[:nodes] {
		for _, m := range p {
			raws = append(raws, m.raw)
		}
	}
	sameCounts(t, bs, rs, raws)

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

// sameCounts compares the global models of a and b: their totals, and
// the counts of every feature of raws (weights depend on the order in
// which messages were learned, which four nodes do not share).
func sameCounts(t *testing.T, a, b store.Store, raws [][]byte) {
	t.Helper()
	ctx := context.Background()
	ta, err := a.Totals(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	tb, err := b.Totals(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range ta.Classes {
		j := tb.Index(c)
		if j < 0 || ta.Messages[i] != tb.Messages[j] || ta.Tokens[i] != tb.Tokens[j] {
			t.Errorf("class %s: %d messages, %d tokens in Badger; %v in Redis", c, ta.Messages[i], ta.Tokens[i], tb)
		}
	}
	if ta.Vocabulary != tb.Vocabulary {
		t.Errorf("vocabulary %d in Badger, %d in Redis", ta.Vocabulary, tb.Vocabulary)
	}
	f, err := filter.New(store.NewMemory(), filter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	set := map[bow.Hash]bool{}
	for _, raw := range raws {
		if p, err := f.Prepare(raw, false); err == nil {
			for _, h := range p.Bag.Hashes() {
				set[h] = true
			}
		}
	}
	hashes := slices.Collect(func(yield func(bow.Hash) bool) {
		for h := range set {
			if !yield(h) {
				return
			}
		}
	})
	ra, err := a.Lookup(ctx, "", hashes)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := b.Lookup(ctx, "", hashes)
	if err != nil {
		t.Fatal(err)
	}
	differ := 0
	for i := range hashes {
		for c, name := range ta.Classes {
			if ra[i].Count(c) != rb[i].Count(tb.Index(name)) {
				if differ++; differ <= 5 {
					t.Errorf("feature %x, class %s: %d in Badger, %d in Redis", hashes[i], name, ra[i].Count(c), rb[i].Count(tb.Index(name)))
				}
			}
		}
	}
	t.Logf("%d features compared: %d counts differ; totals %v messages, %v tokens, vocabulary %d in both",
		len(hashes), differ, ta.Messages, ta.Tokens, ta.Vocabulary)
}
