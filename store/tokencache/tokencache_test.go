package tokencache

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"github.com/spamd/spamd/bow"
)

func TestBoundedMap(t *testing.T) {
	for _, max := range []int{0, 1, 10, 1000} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			m := NewBounded[int, int](max)
			for i := range 5000 {
				m.Put(i, i)
				if len(m.m) > max {
					t.Fatalf("%d entries after %d puts", len(m.m), i+1)
				}
			}
			if max > 0 {
				if v, ok := m.Get(4999); !ok || v != 4999 {
					t.Errorf("last put gone: %d, %v", v, ok)
				}
			}
		})
	}
}

func TestSizedMap(t *testing.T) {
	m := NewSized[int, []byte](1000, func(b []byte) int { return len(b) })
	total := func() int {
		n := 0
		for _, v := range m.m {
			n += len(v)
		}
		return n
	}
	for i := range 500 {
		m.Put(i%50, make([]byte, 1+i%97))
		if n := total(); n > 1000 || n != m.used {
			t.Fatalf("after %d puts: %d bytes held, %d counted", i+1, n, m.used)
		}
	}
	m.Put(-1, make([]byte, 1001))
	if _, ok := m.Get(-1); ok {
		t.Error("an entry bigger than the whole map was kept")
	}
	m.Delete(49)
	m.Delete(48)
	if total() != m.used {
		t.Errorf("after deletes: %d bytes held, %d counted", total(), m.used)
	}
	m.Clear()
	if m.used != 0 || m.Len() != 0 {
		t.Errorf("after Clear: %d entries, %d bytes", m.Len(), m.used)
	}
}

// get returns the row the table holds for user id's token h, trailing
// zeros dropped, nil for a token known absent, and whether it has one.
func (t *Table) get(id uint32, h bow.Hash) ([]uint64, bool) {
	e, _ := t.find(id, h)
	switch {
	case e == nil:
		return nil, false
	case e.width == wideCounts:
		return t.wide.Get(key{id, h})
	case e.width == 0:
		return nil, true
	}
	row := make([]uint64, e.width)
	e.vals.Unpack(row, int(e.width))
	return row, true
}

func TestTokenTable(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n != EntryBytes {
		t.Fatalf("tokenEntry takes %d bytes, EntryBytes says %d", n, EntryBytes)
	}
	neg := func(w int64) uint64 { return uint64(w) }
	rows := func(i int) []uint64 {
		switch i % 6 {
		case 0:
			return nil // known absent
		case 1:
			return []uint64{uint64(i)}
		case 2:
			return []uint64{uint64(i), neg(-int64(i)), 1, 7}
		case 3:
			return []uint64{0, 0, 0, 0, uint64(i)} // a third class: kept aside
		case 4:
			return []uint64{0, neg(math.MinInt32 - int64(i))} // a weight past int32: kept aside
		}
		return []uint64{math.MaxUint32 + uint64(i)} // a count past 32 bits: kept aside
	}
	tt := New(1 << 20)
	const users, tokens = 3, 40000 // past one generation's bound
	for i := range tokens {
		for u := range uint32(users) {
			tt.Put(u, bow.Hash(i), rows(i+int(u)))
		}
		if len(tt.cur) > tt.maxSlots || len(tt.old) > tt.maxSlots {
			t.Fatalf("generations of %d and %d slots, bound %d", len(tt.cur), len(tt.old), tt.maxSlots)
		}
	}
	found := 0
	for i := range tokens {
		for u := range uint32(users) {
			got, ok := tt.get(u, bow.Hash(i))
			if !ok {
				continue // dropped with a generation, or evicted from the side map
			}
			found++
			if want := rows(i + int(u)); !slices.Equal(got, want) {
				t.Fatalf("user %d token %d: %v, want %v", u, i, got, want)
			}
		}
	}
	// Whatever was dropped, the newest puts are there.
	for u := range uint32(users) {
		if e, _ := tt.find(u, bow.Hash(tokens-1)); e == nil {
			t.Errorf("user %d: last token dropped", u)
		}
	}
	if found == users*tokens || found < tt.maxSlots/2 {
		t.Errorf("%d of %d entries kept with %d slots a generation", found, users*tokens, tt.maxSlots)
	}

	off := New(0)
	off.Put(0, 1, []uint64{1})
	if e, _ := off.find(0, 1); e != nil || off.cur != nil {
		t.Error("a table of no bytes caches")
	}
}

// TestTokenTableGenerations follows one token through two rotations: an
// update while it sits in the old generation wins, and a token read back
// into the new generation, as Lookup does with what getTokens finds only
// in the old one, survives the rotation that drops the rest.
func TestTokenTableGenerations(t *testing.T) {
	tests := []struct {
		name   string
		bytes  int64
		mapped bool // generations outside the heap
	}{
		{"in the heap", 1 << 20, false},
		{"outside the heap", 32 << 20, runtime.GOOS == "linux"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { testGenerations(t, tc.bytes, tc.mapped) })
	}
}

func testGenerations(t *testing.T, bytes int64, mapped bool) {
	tt := New(bytes)
	if tt.maxSlots != int(bytes/(2*EntryBytes)) {
		t.Fatalf("%d slots a generation from %d bytes, want all of it: %d", tt.maxSlots, bytes, bytes/(2*EntryBytes))
	}
	rotations := 0
	// fill puts other tokens until the table rotates once more.
	fill := func(from int) int {
		start := rotations
		for i := from; ; i++ {
			n := tt.n
			tt.Put(1, bow.Hash(i), []uint64{uint64(i)})
			if tt.n < n {
				rotations++
			}
			if rotations > start {
				return i + 1
			}
		}
	}
	const key = bow.Hash(1 << 40)
	tt.Put(0, key, []uint64{1, 2})
	next := fill(0)
	if e, old := tt.find(0, key); e == nil || !old {
		t.Fatalf("after a rotation: entry %+v, in old %v; want it in old", e, old)
	}
	tt.Put(0, key, []uint64{3, 4})
	if e, old := tt.find(0, key); e == nil || old || e.vals != [4]uint32{3, 4} {
		t.Fatalf("after an update: %+v, in old %v; want [3 4] in cur", e, old)
	}
	next = fill(next)
	if e, old := tt.find(0, key); e == nil || !old {
		t.Fatalf("after a second rotation: %+v, in old %v", e, old)
	}
	tt.Put(0, key, []uint64{3, 4}) // read back, as Lookup does
	fill(next)
	if e, _ := tt.find(0, key); e == nil || e.vals != [4]uint32{3, 4} {
		t.Errorf("a token read back was dropped: %+v", e)
	}
	// A token of the first fill, never read since, is gone.
	if e, _ := tt.find(1, bow.Hash(0)); e != nil {
		t.Errorf("a token unread for two rotations is still there: %+v", e)
	}
	if got := tt.curMem.free != nil && tt.oldMem.free != nil; got != mapped {
		t.Errorf("generations outside the heap: %v, want %v", got, mapped)
	}
	tt.Reset()
	if tt.curMem != nil || tt.oldMem != nil || tt.cur != nil || tt.old != nil {
		t.Error("Reset kept a generation")
	}
}

// TestTokenTableProbes checks that keys put in order, as Warm puts a
// model's tokens, spread over the table: a slot function that kept their
// order would make each put walk the run of all the puts before it.
func TestTokenTableProbes(t *testing.T) {
	for _, tc := range []struct {
		name string
		hash func(i int) bow.Hash
	}{
		{"sorted hashes", func(i int) bow.Hash { return bow.Hash(uint64(i) << 40) }},
		{"consecutive hashes", func(i int) bow.Hash { return bow.Hash(i) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tt := New(8 << 20)
			const n = 90000 // two thirds of a generation's room
			for i := range n {
				tt.Put(uint32(i%3), tc.hash(i), []uint64{1})
			}
			total, longest := 0, 0
			for i, e := range tt.cur {
				if e.user == 0 {
					continue
				}
				d := (i - slot(e.user, e.hash, len(tt.cur)) + len(tt.cur)) % len(tt.cur)
				total += d
				longest = max(longest, d)
			}
			if mean := float64(total) / n; mean > 3 || longest > 100 {
				t.Errorf("mean probe %.2f slots, longest %d: keys put in order cluster", mean, longest)
			}
		})
	}
}

// TestGet checks what Get returns for each kind of entry, and that the
// row a caller copies out is the row put, padded with zeros.
func TestGet(t *testing.T) {
	tt := New(1 << 20)
	rows := map[bow.Hash][]uint64{
		1: nil,                                   // known absent
		2: {3, uint64(0xffff_ffff_ffff_fffe), 1}, // inline, negative weight
		3: {0, 0, 0, 0, 7},                       // a third class: aside
	}
	for h, v := range rows {
		tt.Put(9, h, v)
	}
	for h, want := range rows {
		r, ok, old := tt.Get(9, h)
		if !ok || old {
			t.Fatalf("token %d: found %v, in old %v", h, ok, old)
		}
		if r.Len() != len(want) {
			t.Fatalf("token %d: Len %d, want %d", h, r.Len(), len(want))
		}
		dst := make([]uint64, 6)
		r.CopyTo(dst)
		if !slices.Equal(dst[:len(want)], want) || slices.ContainsFunc(dst[len(want):], func(x uint64) bool { return x != 0 }) {
			t.Errorf("token %d: copied %v, want %v", h, dst, want)
		}
	}
	if _, ok, _ := tt.Get(9, 4); ok {
		t.Error("a token never put is found")
	}
	if _, ok, _ := tt.Get(8, 2); ok {
		t.Error("another user's token is found")
	}
	// A row aside that the side map evicted is a miss, not an absent token.
	tt.wide.Clear()
	if _, ok, _ := tt.Get(9, 3); ok {
		t.Error("a row evicted from the side map is found")
	}
}

// TestRotations checks the promise of Rotations: an entry stays through
// one rotation, and Has finds an entry whose row aside was evicted.
func TestRotations(t *testing.T) {
	tt := New(1 << 20)
	tt.Put(1, 5, []uint64{1, 2, 3, 4, 5}) // aside
	r0 := tt.Rotations()
	for i := 0; tt.Rotations() == r0; i++ {
		tt.Put(2, bow.Hash(i), []uint64{1})
	}
	if !tt.Has(1, 5) {
		t.Fatal("an entry is gone after one rotation")
	}
	tt.wide.Clear()
	if _, ok, _ := tt.Get(1, 5); ok || !tt.Has(1, 5) {
		t.Errorf("an entry whose row aside was evicted: Get found %v, Has %v", ok, tt.Has(1, 5))
	}
	tt.Reset()
	if tt.Rotations() < r0+2 || tt.Has(1, 5) {
		t.Errorf("after Reset: rotations %d, entry %v", tt.Rotations(), tt.Has(1, 5))
	}
}

// TestReserve checks that a reserved table takes as many entries as it
// was told without growing, keeps what it had, and stays in its bound.
func TestReserve(t *testing.T) {
	tests := []struct {
		name      string
		bytes     int64
		had, more int
	}{
		{"empty", 64 << 20, 0, 100000},
		{"with entries", 64 << 20, 5000, 50000},
		{"beyond the bound", 1 << 20, 0, 1 << 20},
		{"off", 0, 0, 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := New(tt.bytes)
			for i := range tt.had {
				tab.Put(1, bow.Hash(i), []uint64{uint64(i + 1)})
			}
			tab.Reserve(tt.more)
			slots := len(tab.cur)
			if slots > tab.maxSlots {
				t.Fatalf("%d slots, bound %d", slots, tab.maxSlots)
			}
			fits := min(tt.more, tab.Room()-tt.had)
			for i := range fits {
				tab.Put(2, bow.Hash(i), []uint64{uint64(i + 1)})
			}
			if len(tab.cur) != slots {
				t.Errorf("grew from %d to %d slots for %d reserved entries", slots, len(tab.cur), tt.more)
			}
			for i := range tt.had {
				if r, ok, _ := tab.Get(1, bow.Hash(i)); !ok || r.Len() != 1 {
					t.Fatalf("entry %d lost", i)
				}
			}
		})
	}
}

// TestResetWide fills the rows kept aside to their bound, resets the
// table and fills them again: Reset gives back the whole budget, where
// emptying the map alone left it spent and the next put looking forever
// for a row to evict.
func TestResetWide(t *testing.T) {
	tt := New(1 << 20)
	limit := tt.maxSlots / wideFraction
	fill := func() {
		for i := range limit {
			tt.Put(1, bow.Hash(uint64(i+1)*0x9e3779b97f4a7c15), []uint64{1, 0, 0, 0, 2, 0})
		}
	}
	fill()
	if tt.wide.Len() != limit {
		t.Fatalf("%d rows aside, want %d", tt.wide.Len(), limit)
	}
	tt.Reset()
	fill()
	if tt.wide.Len() != limit {
		t.Errorf("after a reset, %d rows aside, want %d", tt.wide.Len(), limit)
	}
}

// TestTouch checks that touching hashes, which only reads, leaves what
// every Get finds as it was: in an empty table, in one generation and in
// two.
func TestTouch(t *testing.T) {
	hashes := []bow.Hash{1, 1 << 40, ^bow.Hash(0), 12345}
	for _, tc := range []struct {
		name string
		puts int // tokens put before the ones looked at, to rotate
	}{
		{"empty", -1},
		{"one generation", 0},
		{"two generations", 40000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tt := New(1 << 20)
			if tc.puts >= 0 {
				for i, h := range hashes {
					tt.Put(3, h, []uint64{uint64(i + 1)})
				}
			}
			for i := range max(tc.puts, 0) {
				tt.Put(4, bow.Hash(i), []uint64{1})
			}
			if tc.puts > 0 && (tt.Rotations() == 0 || len(tt.old) == 0) {
				t.Fatal("the table never rotated")
			}
			want := make([]Row, len(hashes))
			for i, h := range hashes {
				want[i], _, _ = tt.Get(3, h)
			}
			tt.Touch(3, hashes)
			tt.Touch(9, hashes)
			for i, h := range hashes {
				if got, _, _ := tt.Get(3, h); got.Len() != want[i].Len() || got.e != want[i].e {
					t.Errorf("Get(%x) after Touch = %+v, want %+v", h, got, want[i])
				}
			}
		})
	}
}
