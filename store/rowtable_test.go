package store

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/spamd/spamd/bow"
)

// TestRowTable puts, changes and deletes rows at random against a map,
// with few enough hashes that runs of slots collide, wrap around the end
// of the array and are cut by deletions.
func TestRowTable(t *testing.T) {
	neg := func(w int64) uint64 { return uint64(w) }
	rows := []struct {
		name string
		row  []uint64
		wide bool // kept beside the array
	}{
		{"packed", []uint64{3, neg(-1), 0, 5}, false},
		{"one class", []uint64{1, 2}, false},
		{"third class", []uint64{1, 0, 0, 0, 7, 1}, true},
		{"third class zero", []uint64{1, 0, 0, 0, 0, 0}, false},
		{"count past 32 bits", []uint64{math.MaxUint32 + 1, 0}, true},
		{"weight below int32", []uint64{0, neg(math.MinInt32 - 1)}, true},
		{"zero", []uint64{0, 0, 0, 0}, false},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var tab rowTable
	want := map[bow.Hash]int{} // index in rows
	days := map[bow.Hash]Day{}
	dst := make([]uint64, 6)
	get := func(h bow.Hash) (Day, bool) {
		i, ok := tab.find(h)
		if !ok {
			clear(dst)
			return 0, false
		}
		return tab.row(i, dst), true
	}
	for step := range 200_000 {
		// Hashes spread over the whole range, few enough to recur.
		h := bow.Hash(rng.Uint64N(5000) * 0x9e3779b97f4a7c15)
		k := rng.IntN(len(rows))
		row := rows[k].row
		if rng.IntN(3) == 0 {
			row = nil // delete
		}
		i, _ := tab.at(h)
		day := Day(step)
		tab.set(i, h, row, day)
		if allZero(row) {
			delete(want, h)
		} else {
			want[h], days[h] = k, day
		}
		if step%10_000 != 0 {
			continue
		}
		if tab.len() != len(want) {
			t.Fatalf("step %d: %d rows, want %d", step, tab.len(), len(want))
		}
		for h, k := range want {
			w := rows[k].row
			d, ok := get(h)
			if !ok || !slices.Equal(dst[:len(w)], w) || !allZero(dst[len(w):]) || d != days[h] {
				t.Fatalf("step %d: token %x: %v day %d (%v), want %v day %d", step, h, dst, d, ok, w, days[h])
			}
		}
		var got []bow.Hash
		tab.each(dst, func(h bow.Hash, row []uint64, _ Day) {
			got = append(got, h)
			if w := rows[want[h]].row; !slices.Equal(row[:len(w)], w) {
				t.Fatalf("step %d: each gave token %x %v, want %v", step, h, row, w)
			}
		})
		if sorted := tab.sorted(); len(got) != len(want) || !slices.IsSorted(sorted) || len(sorted) != len(want) {
			t.Fatalf("step %d: each gave %d rows, sorted %d, want %d", step, len(got), len(sorted), len(want))
		}
		wide := 0
		for _, k := range want {
			if rows[k].wide {
				wide++
			}
		}
		if len(tab.wide) != wide {
			t.Fatalf("step %d: %d rows aside, want %d", step, len(tab.wide), wide)
		}
	}
	if d, ok := get(1); ok || !allZero(dst) || d != 0 {
		t.Errorf("an absent token read %v day %d", dst, d)
	}
}
