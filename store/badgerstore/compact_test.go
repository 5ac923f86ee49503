package badgerstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/storetest"
)

// trainModel trains n random messages of 100 tokens as user, half spam,
// half ham, and returns the ops, to be forgotten later.
func trainModel(t *testing.T, s *Store, user string, n int, seed uint64) []store.Op {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	var all []store.Op
	for i := 0; i < n; i += 100 {
		ops := make([]store.Op, 100)
		for j := range ops {
			class := "spam"
			if j%2 == 0 {
				class = "ham"
			}
			ops[j] = storetest.Train(fmt.Sprint(user, i+j), class, storetest.RandomBagOf(rng, 100, 200000))
		}
		train(t, s, user, ops...)
		all = append(all, ops...)
	}
	return all
}

// TestCompactReclaims checks that compacting gives back the space of
// what the store no longer holds, while the store stays open as in the
// daemon: a model forgotten message by message leaves superseded rows and
// deletion markers in the tables and in the memtable, and after Compact
// the store is about as small as one that never held it.
func TestCompactReclaims(t *testing.T) {
	for _, tc := range []struct {
		name     string
		memtable int64
		n        int
		levels   int
	}{
		// A small store's tables all lie in level 0, which Flatten
		// leaves alone.
		{"level 0 only", 0, 600, 0},
		// Memtables of 1 MiB make a tree of several levels.
		{"several levels", 1 << 20, 1000, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testCompactReclaims(t, Options{GCInterval: -1, MemTableBytes: tc.memtable}, tc.n, tc.levels)
		})
	}
}

func testCompactReclaims(t *testing.T, o Options, n, levels int) {
	ctx := context.Background()
	// The reference: the global model alone, compacted.
	ref := open(t, t.TempDir(), o)
	trainModel(t, ref, "", n, 1)
	if _, err := ref.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	refLSM, _ := ref.Size()
	if err := ref.Close(); err != nil {
		t.Fatal(err)
	}

	s := open(t, t.TempDir(), o)
	defer s.Close()
	trainModel(t, s, "", n, 1)
	ops := trainModel(t, s, "alice", n, 2)
	for i := range ops {
		ops[i].Class = ""
	}
	for i := 0; i < len(ops); i += 100 {
		train(t, s, "alice", ops[i:i+100]...)
	}
	global, err := s.Totals(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	// Badger moves tables out of level 0 in the background, later on a
	// loaded machine.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, on := s.tables(); on >= levels {
			break
		}
	}
	start := time.Now()
	c, err := s.Compact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compact in %v: %d → %d bytes (tables %d → %d, on %d → %d levels; logs %d → %d); reference %d",
		time.Since(start).Round(time.Millisecond), c.Before(), c.After(), c.TablesBefore, c.TablesAfter,
		c.LevelsBefore, c.LevelsAfter, c.LogsBefore, c.LogsAfter, refLSM)
	if c.LevelsBefore < levels {
		t.Fatalf("tables on %d levels before compacting, want at least %d", c.LevelsBefore, levels)
	}
	if !c.Flushed {
		t.Errorf("memtables not written out: %q", c.FlushSkipped)
	}
	if c.After() >= c.Before()/2 {
		t.Errorf("compacting a store of which half was forgotten: %d → %d bytes, want less than half", c.Before(), c.After())
	}
	// Badger keeps a deletion marker while a lower level might hold
	// the key it hides; a few of alice's stay.
	if c.LSMAfter > refLSM*12/10 {
		t.Errorf("compacted tables of %d bytes, a store that never held the forgotten model has %d", c.LSMAfter, refLSM)
	}
	if c.LogsAfter >= c.LogsBefore {
		t.Errorf("logs %d → %d bytes: the memtables' write-ahead logs were not dropped", c.LogsBefore, c.LogsAfter)
	}
	if c.LevelsAfter != 1 {
		t.Errorf("tables on %d levels after compacting, want 1", c.LevelsAfter)
	}
	// Compacting changed nothing the store holds, and it still trains.
	if after, err := s.Totals(ctx, ""); err != nil || fmt.Sprint(after) != fmt.Sprint(global) {
		t.Errorf("global totals %v (%v) after compacting, %v before", after, err, global)
	}
	if a, err := s.Totals(ctx, "alice"); err != nil || slices.ContainsFunc(a.Messages, func(n uint64) bool { return n > 0 }) || a.Vocabulary != 0 {
		t.Errorf("alice's totals %v (%v), want none left", a, err)
	}
	for _, u := range []string{"", "alice"} {
		if err := s.Check(ctx, u); err != nil {
			t.Error(err)
		}
	}
	train(t, s, "alice", storetest.Train("after", "spam", map[bow.Hash]uint32{1: 1}))
	if err := s.Check(ctx, "alice"); err != nil {
		t.Error(err)
	}
}

// TestCompactBusy checks that a call holding the store does not keep
// Compact from its other steps, nor readers waiting behind it.
func TestCompactBusy(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir(), Options{GCInterval: -1, MemTableBytes: 1 << 20})
	defer s.Close()
	s.flushWait = 50 * time.Millisecond
	trainModel(t, s, "", 1000, 1)
	if err := s.enter(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// A reader coming while Compact tries is not held up.
		time.Sleep(10 * time.Millisecond)
		if _, err := s.Totals(ctx, ""); err != nil {
			t.Error(err)
		}
	}()
	cdone := make(chan struct{})
	var c store.Compaction
	var err error
	go func() {
		defer close(cdone)
		c, err = s.Compact(ctx)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a reader waited behind Compact")
	}
	// Compact flattens holding the store shared, like the call.
	<-cdone
	s.life.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	if c.Flushed || !strings.Contains(c.FlushSkipped, "busy") {
		t.Errorf("flushed %v, skipped %q: want the flush skipped as busy", c.Flushed, c.FlushSkipped)
	}
	if c.TablesBefore == 0 || c.LevelsAfter != 1 {
		t.Errorf("tables on %d levels, want 1: the other steps ran", c.LevelsAfter)
	}
}
