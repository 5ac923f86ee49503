package store

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/internal/offheap"
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
		{"packed", []uint64{3, neg(-1), 0, 1}, false},
		{"widest packed", []uint64{math.MaxUint16, neg(math.MinInt16), math.MaxUint16 - 1, math.MaxInt16 + 1}, false},
		{"one class", []uint64{1}, false},
		{"one class weighed", []uint64{1, 2}, true},
		{"weights not opposite", []uint64{3, neg(-1), 0, 5}, true},
		{"third class", []uint64{1, 0, 0, 0, 7, 1}, true},
		{"third class zero", []uint64{1, 0, 0, 0, 0, 0}, false},
		{"count past 16 bits", []uint64{math.MaxUint16 + 1, 0}, true},
		{"weight below int16", []uint64{0, neg(math.MinInt16 - 1), 1, math.MaxInt16 + 1}, true},
		{"all ones", []uint64{math.MaxUint16, neg(-1), math.MaxUint16, 1}, true},
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
		day := Day(20000 + step%1000)
		if rows[k].name == "all ones" {
			// With any other day it packs.
			day = math.MaxUint16
		}
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
		var sorted []bow.Hash
		err := tab.ascending(dst, func(h bow.Hash, row []uint64, day Day) error {
			if w := rows[want[h]].row; !slices.Equal(row[:len(w)], w) || day != days[h] {
				t.Fatalf("step %d: ascending gave token %x %v day %d, want %v day %d", step, h, row, day, w, days[h])
			}
			sorted = append(sorted, h)
			return nil
		})
		if err != nil || len(got) != len(want) || !slices.IsSorted(sorted) || len(sorted) != len(want) {
			t.Fatalf("step %d: each gave %d rows, ascending %d (%v), want %d", step, len(got), len(sorted), err, len(want))
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

// TestRowTableAscending reads rows in hash order from tables whose runs
// start at the first slot, wrap around the end of the array onto the
// rows homed at its start, or have been cut by deletions.
func TestRowTableAscending(t *testing.T) {
	top := func(k uint64) bow.Hash { return bow.Hash(math.MaxUint64 - k) }
	tests := []struct {
		name   string
		put    []bow.Hash
		remove []bow.Hash
	}{
		{"empty", nil, nil},
		{"one", []bow.Hash{7}, nil},
		{"runs at the start", []bow.Hash{3, 0, 1, 2, 1 << 60, 1<<60 + 1}, nil},
		{"run wrapped onto the start", []bow.Hash{top(0), 0, top(3), 1, top(1), 2, top(2)}, nil},
		{"wrapped run cut", []bow.Hash{top(0), 0, top(3), 1, top(1), 2, top(2), 1 << 62}, []bow.Hash{top(3), 0}},
		{"all removed", []bow.Hash{5, top(5)}, []bow.Hash{top(5), 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tab rowTable
			defer tab.release()
			want := map[bow.Hash]bool{}
			for i, h := range tt.put {
				j, _ := tab.at(h)
				tab.set(j, h, []uint64{uint64(i + 1)}, Day(i))
				want[h] = true
			}
			for _, h := range tt.remove {
				j, _ := tab.find(h)
				tab.set(j, h, nil, 0)
				delete(want, h)
			}
			got := ascendingHashes(t, &tab)
			if !slices.IsSorted(got) || len(got) != len(want) {
				t.Fatalf("ascending gave %x, want the %d hashes %v in order", got, len(want), want)
			}
			for _, h := range got {
				if !want[h] {
					t.Fatalf("ascending gave %x, not put", h)
				}
			}
		})
	}
	t.Run("error stops", func(t *testing.T) {
		var tab rowTable
		for _, h := range []bow.Hash{1, 2, top(0)} {
			j, _ := tab.at(h)
			tab.set(j, h, []uint64{1}, 0)
		}
		stop := errors.New("stop")
		calls := 0
		err := tab.ascending(make([]uint64, 1), func(bow.Hash, []uint64, Day) error {
			calls++
			return stop
		})
		if err != stop || calls != 1 {
			t.Errorf("ascending returned %v after %d calls, want the error after one", err, calls)
		}
	})
}

// ascendingHashes returns the hashes tab.ascending gives, in its order.
func ascendingHashes(t *testing.T, tab *rowTable) []bow.Hash {
	t.Helper()
	var got []bow.Hash
	if err := tab.ascending(make([]uint64, 4), func(h bow.Hash, _ []uint64, _ Day) error {
		got = append(got, h)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestRowTableLarge grows a table past the size from which its array is
// mapped outside the heap, and empties it again: every row is found,
// ascending gives exactly the hashes put, and release gives the array back.
func TestRowTableLarge(t *testing.T) {
	const n = 200_000 // past 4 MiB of 16-byte slots at four fifths full
	var tab rowTable
	want := make([]bow.Hash, n)
	// Counts past 16 bits make one row in a thousand wide.
	count := func(i int) uint64 {
		if i%1000 == 999 {
			return math.MaxUint16 + 1
		}
		return uint64(i%1000 + 1)
	}
	row := []uint64{1, 2, 3, math.MaxUint64 - 1}
	for i := range want {
		want[i] = bow.Hash(uint64(i+1) * 0x9e3779b97f4a7c15)
		j, _ := tab.at(want[i])
		row[0] = count(i)
		tab.set(j, want[i], row, Day(i%50000))
	}
	if len(tab.wide) != n/1000 {
		t.Errorf("%d rows wide, want %d", len(tab.wide), n/1000)
	}
	// Where the system maps arrays, this one is mapped.
	if _, free := offheap.Make[rowSlot](1 << 17); free != nil {
		free()
		if tab.unmap == nil {
			t.Errorf("an array of %d slots was not mapped", len(tab.slots))
		}
	}
	slices.Sort(want)
	if got := ascendingHashes(t, &tab); !slices.Equal(got, want) {
		t.Fatalf("ascending gave %d hashes, not the %d put", len(got), len(want))
	}
	dst := make([]uint64, 4)
	for i := range n {
		h := bow.Hash(uint64(i+1) * 0x9e3779b97f4a7c15)
		j, ok := tab.find(h)
		if !ok {
			t.Fatalf("row %d lost", i)
		}
		if d := tab.row(j, dst); !slices.Equal(dst, []uint64{count(i), 2, 3, math.MaxUint64 - 1}) || d != Day(i%50000) {
			t.Fatalf("row %d reads %v day %d", i, dst, d)
		}
		// Every other row goes, which moves the runs they cut.
		if i%2 == 0 {
			tab.set(j, h, []uint64{0, 0}, 0)
		}
	}
	if tab.len() != n/2 {
		t.Fatalf("%d rows left, want %d", tab.len(), n/2)
	}
	for i := 1; i < n; i += 2 {
		if _, ok := tab.find(bow.Hash(uint64(i+1) * 0x9e3779b97f4a7c15)); !ok {
			t.Fatalf("row %d lost when others went", i)
		}
	}
	tab.release()
	if tab.len() != 0 || tab.slots != nil || tab.unmap != nil {
		t.Error("release left rows or an array")
	}
}

// TestRowTableDrain drains tables large enough to be mapped, whose pages
// are given back as the rows are read: the rows come as ascending gives
// them, whole, and the table is empty after, also when fn fails.
func TestRowTableDrain(t *testing.T) {
	fill := func(n int) *rowTable {
		tab := &rowTable{}
		for i := range n {
			h := bow.Hash(uint64(i+1) * 0x9e3779b97f4a7c15)
			j, _ := tab.at(h)
			// One row in a thousand is wide.
			tab.set(j, h, []uint64{uint64(i%60000 + 1), uint64(i % 1000 / 999 * i)}, Day(i%60000))
		}
		return tab
	}
	type rec struct {
		h   bow.Hash
		row [2]uint64
		day Day
	}
	collect := func(out *[]rec) func(bow.Hash, []uint64, Day) error {
		return func(h bow.Hash, row []uint64, day Day) error {
			*out = append(*out, rec{h, [2]uint64(row), day})
			return nil
		}
	}
	for _, n := range []int{0, 100, 300_000} {
		var want, got []rec
		tab := fill(n)
		if err := tab.ascending(make([]uint64, 2), collect(&want)); err != nil {
			t.Fatal(err)
		}
		if err := tab.drain(make([]uint64, 2), collect(&got)); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) || len(got) != n {
			t.Errorf("%d rows: drain gave %d rows, not the %d ascending gives", n, len(got), len(want))
		}
		if tab.len() != 0 || tab.slots != nil || tab.unmap != nil {
			t.Errorf("%d rows: drain left rows or an array", n)
		}
	}
	tab := fill(300_000)
	stop := errors.New("stop")
	calls := 0
	err := tab.drain(make([]uint64, 2), func(bow.Hash, []uint64, Day) error {
		if calls++; calls == 100_000 {
			return stop
		}
		return nil
	})
	if err != stop || tab.len() != 0 || tab.slots != nil {
		t.Errorf("drain cut off: %v, %d rows left", err, tab.len())
	}
}

// TestGrownSize: a table doubles while small and then grows by a quarter,
// and every growth leaves room for at least one more row.
func TestGrownSize(t *testing.T) {
	for _, tc := range []struct{ n, want int }{
		{0, minRowSlots},
		{minRowSlots, 2 * minRowSlots},
		{smallRowSlots / 2, smallRowSlots},
		{smallRowSlots - 1, 2*smallRowSlots - 2},
		{smallRowSlots, smallRowSlots / 4 * 5},
		{4 * smallRowSlots, 5 * smallRowSlots},
	} {
		got := grownSize(tc.n)
		if got != tc.want {
			t.Errorf("grownSize(%d) = %d, want %d", tc.n, got, tc.want)
		}
		if maxRows(got) <= maxRows(tc.n) {
			t.Errorf("grownSize(%d) = %d holds no more rows", tc.n, got)
		}
	}
}
