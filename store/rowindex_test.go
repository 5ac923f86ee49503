package store

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/spamd/spamd/bow"
)

// TestRowIndex adds rows to an index in ascending hash order, with rows
// of zeros and rows that do not pack among them and hashes at both ends
// of their range, whose runs wrap around the array, then some out of
// order, and finds every row, and no other.
func TestRowIndex(t *testing.T) {
	for _, tc := range []struct {
		name     string
		n        int
		outOfOrd int
	}{
		{"empty", 0, 0},
		{"one", 1, 0},
		{"sorted", 5000, 0},
		{"then unsorted", 5000, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, uint64(tc.n)))
			set := map[bow.Hash]bool{}
			for len(set) < tc.n {
				h := bow.Hash(rng.Uint64())
				switch rng.IntN(20) {
				case 0:
					h = bow.Hash(math.MaxUint64 - rng.Uint64N(64)) // the last slots
				case 1:
					h = bow.Hash(rng.Uint64N(64))
				}
				set[h] = true
			}
			hashes := slices.Sorted(func(yield func(bow.Hash) bool) {
				for h := range set {
					if !yield(h) {
						return
					}
				}
			})
			want := map[bow.Hash][]uint64{}
			rowOf := func(i int) []uint64 {
				switch i % 7 {
				case 0:
					return []uint64{0, 0, 0, 0} // no row
				case 1:
					return []uint64{math.MaxUint16 + 1, 0, 3, 0} // does not pack
				}
				w := uint64(int64(i%5 - 2))
				return []uint64{uint64(i % 100), w, uint64(i % 3), -w}
			}
			x := NewRowIndex(tc.n)
			sorted, rest := hashes[:tc.n-tc.outOfOrd], hashes[tc.n-tc.outOfOrd:]
			rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
			for i, h := range slices.Concat(sorted, rest) {
				v := rowOf(i)
				x.Add(h, v, Day(i))
				if slices.ContainsFunc(v, func(u uint64) bool { return u != 0 }) {
					want[h] = v
				}
			}
			if x.Len() != len(want) {
				t.Errorf("Len %d, want %d", x.Len(), len(want))
			}
			x.Touch(hashes)
			dst := make([]uint64, 4)
			for _, h := range hashes {
				clear(dst)
				ok := x.Get(h, dst)
				w, has := want[h]
				if ok != has || has && !slices.Equal(dst, w) {
					t.Fatalf("Get(%x) = %v, %v; want %v, %v", h, dst, ok, w, has)
				}
			}
			for range 1000 {
				if h := bow.Hash(rng.Uint64()); !set[h] && x.Get(h, dst) {
					t.Fatalf("Get(%x) found a row never added", h)
				}
			}
		})
	}
}
