package filter

import (
	"context"
	"slices"
	"testing"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
)

// discriminative returns the default settings with learned weights on.
func discriminative() Config {
	cfg := DefaultConfig()
	cfg.NB.Discriminative = true
	return cfg
}

// trainSet returns the spam and ham bodies as items to train, interleaved.
func trainSet(t *testing.T, f *Filter) []Item {
	t.Helper()
	var items []Item
	for i := range spamBodies {
		for _, m := range []struct {
			raw   []byte
			class string
		}{{msg(i, "offer", spamBodies[i]), Spam}, {msg(100+i, "work", hamBodies[i]), Ham}} {
			p, err := f.Prepare(m.raw, false)
			if err != nil {
				t.Fatal(err)
			}
			items = append(items, Item{Prepared: p, Class: m.class})
		}
	}
	return items
}

// TestBatchLearnsAsOneByOne checks that a batch gives each message the
// step it would get trained alone after the ones before it: the learner's
// overlay stands in for what the store has not written yet.
func TestBatchLearnsAsOneByOne(t *testing.T) {
	ctx := context.Background()
	for _, user := range []string{"", "alice"} {
		t.Run("user "+user, func(t *testing.T) {
			one, batch := store.NewMemory(), store.NewMemory()
			f1, err := New(one, discriminative())
			if err != nil {
				t.Fatal(err)
			}
			fb, err := New(batch, discriminative())
			if err != nil {
				t.Fatal(err)
			}
			items := trainSet(t, f1)
			for _, it := range items {
				if _, err := f1.Train(ctx, user, []Item{it}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := fb.Train(ctx, user, items); err != nil {
				t.Fatal(err)
			}
			var hashes []bow.Hash
			for _, it := range items {
				hashes = append(hashes, it.Bag.Hashes()...)
			}
			a, err := one.Lookup(ctx, user, hashes)
			if err != nil {
				t.Fatal(err)
			}
			b, err := batch.Lookup(ctx, user, hashes)
			if err != nil {
				t.Fatal(err)
			}
			weighted := 0
			for i := range hashes {
				if !slices.Equal(a[i], b[i]) {
					t.Fatalf("token %x: one by one %v, in a batch %v", hashes[i], a[i], b[i])
				}
				if a[i].Weight(0) != 0 {
					weighted++
				}
			}
			if weighted == 0 {
				t.Error("training set no weight at all")
			}
		})
	}
}

// TestLearnedWeightsUndo checks that forgetting every trained message
// leaves no count and no weight behind: each message's steps are taken
// back exactly, whatever was trained after it.
func TestLearnedWeightsUndo(t *testing.T) {
	ctx := context.Background()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			f, err := New(st, discriminative())
			if err != nil {
				t.Fatal(err)
			}
			items := trainSet(t, f)
			if _, err := f.Train(ctx, "", items); err != nil {
				t.Fatal(err)
			}
			forget := slices.Clone(items)
			for i := range forget {
				forget[i].Class = ""
			}
			if _, err := f.Train(ctx, "", forget); err != nil {
				t.Fatal(err)
			}
			for _, it := range items {
				got, err := st.Lookup(ctx, "", it.Bag.Hashes())
				if err != nil {
					t.Fatal(err)
				}
				for i, c := range got {
					if c != nil {
						t.Fatalf("token %x left %v after every message was forgotten", it.Bag.Hashes()[i], c)
					}
				}
			}
			if err := st.Check(ctx, ""); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestPendingIndex checks the learner's index against a map, for hashes
// that crowd one end of the table (so that probes wrap around) and for
// more tokens than were reserved (so that it grows).
func TestPendingIndex(t *testing.T) {
	spread := func(i int) bow.Hash { return bow.Hash(uint64(i) * 0x9e3779b97f4a7c15) }
	top := func(i int) bow.Hash { return bow.Hash(^uint64(0) - uint64(i)) }
	for _, tc := range []struct {
		name    string
		reserve int
		n       int
		hash    func(int) bow.Hash
	}{
		{"within the reserve", 1000, 1000, spread},
		{"past the reserve", 3, 5000, spread},
		{"all at the last slot", 50, 50, top},
		{"none reserved, crowded", 0, 300, top},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := pendingIndex{slots: make([]pendingSlot, tc.reserve+1)}
			want := map[bow.Hash]int{}
			for i := range tc.n {
				h := tc.hash(i)
				if _, ok := x.get(h); ok {
					t.Fatalf("%x found before it was added", h)
				}
				x.add(h, 7*i)
				want[h] = 7 * i
			}
			if x.n != len(want) {
				t.Errorf("n = %d, want %d", x.n, len(want))
			}
			for h, at := range want {
				if got, ok := x.get(h); !ok || got != at {
					t.Errorf("get(%x) = %d, %v; want %d, true", h, got, ok, at)
				}
			}
			if _, ok := x.get(spread(tc.n + 1)); ok {
				t.Error("a hash never added was found")
			}
		})
	}
}
