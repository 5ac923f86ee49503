package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/storetest"
)

// TestMaxMemory trains into a Redis with a small maxmemory and
// noeviction until it refuses, as docs/cluster.md tells admins to run it:
// the refused call must be refused whole (the scripts declare that they
// write, so Redis refuses them before they run), say so, and leave a
// model that Check passes. Prune still runs (its scripts free memory and
// may run past maxmemory): once it has pruned to half the tokens, training
// goes on where it stopped, and again once maxmemory is raised.
func TestMaxMemory(t *testing.T) {
	srv := redisServer(t, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
	s := open(t, []string{srv.Addr}, Options{Prefix: "mm:"})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	trained := map[string]bool{}
	var refused error
	var pending []store.Op
	for i := 0; i < 5000 && refused == nil; i++ {
		ops := make([]store.Op, 4)
		for j := range ops {
			name := fmt.Sprint("m", i, "-", j)
			ops[j] = store.Op{Digest: storetest.D(name), Class: []string{"spam", "ham"}[rng.IntN(2)],
				Bag: bow.FromMaps(nil, storetest.RandomBag(rng, 300, 1<<40))}
		}
		res, err := s.Apply(ctx, "alice", ops)
		for j := range res {
			trained[fmt.Sprint("m", i, "-", j)] = true
		}
		if err != nil {
			refused = err
			pending = ops[len(res):]
		}
	}
	if refused == nil {
		t.Fatal("Redis never refused a write with maxmemory 4mb")
	}
	t.Logf("refused after %d messages: %v", len(trained), refused)
	if !errors.Is(refused, ErrUnavailable) || !strings.Contains(refused.Error(), "maxmemory") {
		t.Errorf("the refusal does not say Redis is out of memory: %v", refused)
	}
	if err := s.Check(ctx, "alice"); err != nil {
		t.Fatalf("Check after the refusal: %v", err)
	}
	tot, err := s.Totals(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if n := tot.Messages[0] + tot.Messages[1]; n != uint64(len(trained)) {
		t.Fatalf("totals count %d messages, %d were acknowledged", n, len(trained))
	}

	full := usedMemory(t, srv)
	pr, err := s.Prune(ctx, "alice", store.PruneRule{MaxTokens: tot.Vocabulary / 2})
	if err != nil || pr.Vocabulary > tot.Vocabulary/2 {
		t.Fatalf("Prune of a full Redis = %+v, %v", pr, err)
	}
	t.Logf("Prune of a full Redis deleted %d of %d tokens: used_memory %d → %d", pr.Tokens, tot.Vocabulary, full, usedMemory(t, srv))
	if err := s.Check(ctx, "alice"); err != nil {
		t.Fatalf("Check after the prune: %v", err)
	}
	res, err := s.Apply(ctx, "alice", pending)
	if err != nil || len(res) != len(pending) {
		t.Fatalf("after the prune: %d of %d applied, %v", len(res), len(pending), err)
	}

	if _, err := srv.Command("CONFIG", "SET", "maxmemory", "0"); err != nil {
		t.Fatal(err)
	}
	more := make([]store.Op, 20)
	for j := range more {
		more[j] = store.Op{Digest: storetest.D(fmt.Sprint("more", j)), Class: "spam", Bag: bow.FromMaps(nil, storetest.RandomBag(rng, 300, 1<<40))}
	}
	res, err = s.Apply(ctx, "alice", more)
	if err != nil || len(res) != len(more) {
		t.Fatalf("after raising maxmemory: %d of %d applied, %v", len(res), len(more), err)
	}
	if err := s.Check(ctx, "alice"); err != nil {
		t.Fatalf("Check after training went on: %v", err)
	}
}
