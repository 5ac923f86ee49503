package badgerstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/storetest"
)

func TestFilter(t *testing.T) {
	tests := []struct {
		name string
		h    func(i uint64) bow.Hash
	}{
		{"hashes", func(i uint64) bow.Hash { return bow.Hash(i * 0x9e3779b97f4a7c15) }},
		// Tests use small numbers as hashes.
		{"small numbers", func(i uint64) bow.Hash { return bow.Hash(i) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Sized for a tenth of what is added, so that it grows.
			const n = 200_000
			f := newFilter(n / 10)
			for i := range uint64(n) {
				if f.full() {
					f.layers = append(f.layers, newLayer(2*f.layers[len(f.layers)-1].capacity))
				}
				f.add(tt.h(i))
			}
			if len(f.layers) < 3 {
				t.Errorf("%d layers, want some", len(f.layers))
			}
			for i := range uint64(n) {
				if !f.mayHave(tt.h(i)) {
					t.Fatalf("hash %d added but not found", i)
				}
			}
			wrong := 0
			for i := uint64(n); i < 2*n; i++ {
				if f.mayHave(tt.h(i)) {
					wrong++
				}
			}
			// Each layer errs about 1% of the time.
			if rate := float64(wrong) / n; rate > 0.01*float64(len(f.layers)) {
				t.Errorf("false positives: %.2f%% with %d layers", 100*rate, len(f.layers))
			}
		})
	}
}

func TestPresenceBound(t *testing.T) {
	p := newPresence(3 * newLayer(1<<16).bytes())
	ctx := context.Background()
	s := open(t, "", Options{InMemory: true})
	defer s.Close()
	for _, u := range []string{"a", "b", "c"} {
		if f, err := p.get(ctx, s.db, u, 1, 0); f == nil || err != nil {
			t.Fatalf("get(%q) = %v, %v; want a filter", u, f, err)
		}
	}
	if len(p.filters) != 3 || p.bytes > p.max {
		t.Fatalf("%d filters of %d bytes, bound %d", len(p.filters), p.bytes, p.max)
	}
	// A fourth user's filter evicts another's.
	if f, _ := p.get(ctx, s.db, "d", 1, 0); f == nil || len(p.filters) != 3 || p.filters["d"] == nil {
		t.Fatalf("after a fourth user: %d filters, d's %v", len(p.filters), p.filters["d"])
	}
	// Growing past the bound drops the others', then its own.
	for i := range 1 << 18 {
		p.add("d", []bow.Hash{bow.Hash(i)})
		if p.bytes > p.max {
			t.Fatalf("%d bytes after %d adds, bound %d", p.bytes, i+1, p.max)
		}
	}
	if p.filters["d"] != nil || p.bytes != 0 {
		t.Errorf("d's filter outgrew the bound and is still there, %d bytes", p.bytes)
	}
	// A user with a large vocabulary gets a filter only once the reads
	// it saves pay for the scan.
	if f, _ := p.get(ctx, s.db, "e", 100, 1000); f != nil {
		t.Error("filter for 100 misses in a vocabulary of 1000")
	}
	if f, _ := p.get(ctx, s.db, "e", 25, 1000); f == nil {
		t.Error("no filter for 125 misses in a vocabulary of 1000")
	}
}

// TestPresenceAfterReopen trains, reopens and trains again the same
// tokens without a cache, so that every token is read from Badger or
// skipped on the word of a filter built by scanning what the first run
// stored, and checks that no count went missing.
func TestPresenceAfterReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(11, 12))
	bags := make([]map[bow.Hash]uint32, 40)
	for i := range bags {
		bags[i] = storetest.RandomBagOf(rng, 200, 5000)
	}
	batch := func(round int) []store.Op {
		ops := make([]store.Op, len(bags))
		for i, bag := range bags {
			ops[i] = storetest.Train(fmt.Sprint(round, i), []string{"spam", "ham"}[i%2], bag)
		}
		return ops
	}
	m := store.NewMemory()
	for round := range 4 {
		s := open(t, dir, Options{CacheBytes: -1})
		for _, ops := range [][]store.Op{batch(2 * round), batch(2*round + 1)} {
			train(t, s, "u", ops...)
			if _, err := m.Apply(ctx, "u", ops); err != nil {
				t.Fatal(err)
			}
		}
		if f := s.present.filters["u"]; f == nil {
			t.Errorf("round %d: no filter", round)
		}
		if err := s.Check(ctx, "u"); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		var hashes []bow.Hash
		for _, bag := range bags {
			for h := range bag {
				hashes = append(hashes, h)
			}
		}
		got, _ := s.Lookup(ctx, "u", hashes)
		want, _ := m.Lookup(ctx, "u", hashes)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d: counts differ from the memory store's", round)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
