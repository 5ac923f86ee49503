package badgerstore

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"unsafe"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
)

func TestBoundedMap(t *testing.T) {
	for _, max := range []int{0, 1, 10, 1000} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			m := newBoundedMap[int, int](max)
			for i := range 5000 {
				m.put(i, i)
				if len(m.m) > max {
					t.Fatalf("%d entries after %d puts", len(m.m), i+1)
				}
			}
			if max > 0 {
				if v, ok := m.get(4999); !ok || v != 4999 {
					t.Errorf("last put gone: %d, %v", v, ok)
				}
			}
		})
	}
}

// TestCacheFill walks the orders in which a reader's fill and a commit can
// meet, and checks that the cache ends with the committed value.
func TestCacheFill(t *testing.T) {
	stale, fresh := store.Counts{1}, store.Counts{2}
	hashes := []bow.Hash{7}
	tests := []struct {
		name string
		run  func(c *cache)
	}{
		{"fill, then commit", func(c *cache) {
			_, _, gen := c.getTokens("u", hashes, make([]store.Counts, 1), 4)
			c.fillTokens(gen, "u", hashes, []store.Counts{stale}, []int{0})
			c.committed("u", hashes, [][]uint64{fresh}, nil)
		}},
		{"read before commit, fill after", func(c *cache) {
			_, _, gen := c.getTokens("u", hashes, make([]store.Counts, 1), 4)
			c.committed("u", hashes, [][]uint64{fresh}, nil)
			c.fillTokens(gen, "u", hashes, []store.Counts{stale}, []int{0})
		}},
		{"fill after commit of another user", func(c *cache) {
			_, _, gen := c.getTokens("u", hashes, make([]store.Counts, 1), 4)
			c.committed("u", hashes, [][]uint64{fresh}, nil)
			c.committed("v", hashes, [][]uint64{stale}, nil)
			c.fillTokens(gen, "u", hashes, []store.Counts{stale}, []int{0})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCache(1 << 20)
			tt.run(c)
			got := make([]store.Counts, 1)
			if miss, _, _ := c.getTokens("u", hashes, got, 4); len(miss) != 0 || got[0][0] != 2 {
				t.Errorf("cache holds %v (misses %v), want [2]", got[0], miss)
			}
		})
	}
}

func TestCacheUserIDs(t *testing.T) {
	c := newCache(1 << 20)
	c.committed("first", []bow.Hash{1}, [][]uint64{{5}}, nil)
	for i := range maxUserIDs + 10 {
		c.committed(fmt.Sprint("user", i), []bow.Hash{1}, [][]uint64{{uint64(i)}}, nil)
	}
	if len(c.ids) > maxUserIDs {
		t.Errorf("%d user ids", len(c.ids))
	}
	// Whatever was dropped, no user may see another's counts.
	for _, u := range []string{"first", "user0", fmt.Sprint("user", maxUserIDs+9)} {
		got := make([]store.Counts, 1)
		miss, _, _ := c.getTokens(u, []bow.Hash{1}, got, 4)
		want := uint64(5)
		if u != "first" {
			fmt.Sscanf(u, "user%d", &want)
		}
		if len(miss) == 0 && got[0][0] != want {
			t.Errorf("user %s sees %v, want %d", u, got[0], want)
		}
	}
}

// get returns the row the table holds for user id's token h, trailing
// zeros dropped, nil for a token known absent, and whether it has one.
func (t *tokenTable) get(id uint32, h bow.Hash) ([]uint64, bool) {
	e, _ := t.find(id, h)
	switch {
	case e == nil:
		return nil, false
	case e.width == wideCounts:
		return t.wide.get(tokenKey{id, h})
	case e.width == 0:
		return nil, true
	}
	row := make([]uint64, e.width)
	e.unpack(row)
	return row, true
}

func TestTokenTable(t *testing.T) {
	if n := unsafe.Sizeof(tokenEntry{}); n != entryBytes {
		t.Fatalf("tokenEntry takes %d bytes, entryBytes says %d", n, entryBytes)
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
	tt := newTokenTable(1 << 20)
	const users, tokens = 3, 40000 // past one generation's bound
	for i := range tokens {
		for u := range uint32(users) {
			tt.put(u, bow.Hash(i), rows(i+int(u)))
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

	off := newTokenTable(0)
	off.put(0, 1, []uint64{1})
	if e, _ := off.find(0, 1); e != nil || off.cur != nil {
		t.Error("a table of no bytes caches")
	}
}

// TestCacheCopies checks that the rows going into the cache and coming out
// of it are copies, inline or aside, so that neither a caller scribbling
// on what it got or gave nor the cache can change the other's rows.
func TestCacheCopies(t *testing.T) {
	for _, tc := range []struct {
		name string
		row  []uint64
	}{
		{"inline", []uint64{1, 2, 3, 4}},
		{"aside", []uint64{1, 2, 3, 4, 5, 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCache(1 << 20)
			put := slices.Clone(tc.row)
			c.committed("u", []bow.Hash{1}, [][]uint64{put}, nil)
			put[0] = 99
			got := make([]store.Counts, 1)
			if miss, _, _ := c.getTokens("u", []bow.Hash{1}, got, 6); len(miss) != 0 || got[0][0] != 1 {
				t.Fatalf("after the putter scribbled: %v (misses %v)", got[0], miss)
			}
			if len(got[0]) != 6 || !slices.Equal(got[0][:len(tc.row)], tc.row) {
				t.Fatalf("got %v, want %v padded to 6", got[0], tc.row)
			}
			got[0][0] = 98
			again := make([]store.Counts, 1)
			c.getTokens("u", []bow.Hash{1}, again, 6)
			if again[0][0] != 1 {
				t.Errorf("after the getter scribbled: %v", again[0])
			}
		})
	}
}

// TestTokenTableGenerations follows one token through two rotations: an
// update while it sits in the old generation wins, and a token read back
// into the new generation, as Lookup does with what getTokens finds only
// in the old one, survives the rotation that drops the rest.
func TestTokenTableGenerations(t *testing.T) {
	tt := newTokenTable(1 << 20)
	if tt.maxSlots != 1<<20/(2*entryBytes) {
		t.Fatalf("%d slots a generation from 1 MiB, want all of it: %d", tt.maxSlots, 1<<20/(2*entryBytes))
	}
	rotations := 0
	// fill puts other tokens until the table rotates once more.
	fill := func(from int) int {
		start := rotations
		for i := from; ; i++ {
			n := tt.n
			tt.put(1, bow.Hash(i), []uint64{uint64(i)})
			if tt.n < n {
				rotations++
			}
			if rotations > start {
				return i + 1
			}
		}
	}
	const key = bow.Hash(1 << 40)
	tt.put(0, key, []uint64{1, 2})
	next := fill(0)
	if e, old := tt.find(0, key); e == nil || !old {
		t.Fatalf("after a rotation: entry %+v, in old %v; want it in old", e, old)
	}
	tt.put(0, key, []uint64{3, 4})
	if e, old := tt.find(0, key); e == nil || old || e.vals != [4]uint32{3, 4} {
		t.Fatalf("after an update: %+v, in old %v; want [3 4] in cur", e, old)
	}
	next = fill(next)
	if e, old := tt.find(0, key); e == nil || !old {
		t.Fatalf("after a second rotation: %+v, in old %v", e, old)
	}
	tt.put(0, key, []uint64{3, 4}) // read back, as Lookup does
	fill(next)
	if e, _ := tt.find(0, key); e == nil || e.vals != [4]uint32{3, 4} {
		t.Errorf("a token read back was dropped: %+v", e)
	}
	// A token of the first fill, never read since, is gone.
	if e, _ := tt.find(1, bow.Hash(0)); e != nil {
		t.Errorf("a token unread for two rotations is still there: %+v", e)
	}
}

func TestLookupPutsBackOldHits(t *testing.T) {
	c := newCache(1 << 20)
	hashes := []bow.Hash{7}
	c.committed("u", hashes, [][]uint64{{5, 6}}, nil)
	// Rotate the table once, with other users' tokens.
	for i := 0; ; i++ {
		n := c.tokens.n
		c.committed("v", []bow.Hash{bow.Hash(i)}, [][]uint64{{1}}, nil)
		if c.tokens.n < n {
			break
		}
	}
	got := make([]store.Counts, 1)
	miss, old, gen := c.getTokens("u", hashes, got, 2)
	if len(miss) != 0 || len(old) != 1 || !slices.Equal(got[0], []uint64{5, 6}) {
		t.Fatalf("miss %v, old %v, counts %v; want the token found in old", miss, old, got[0])
	}
	if !c.fillTokens(gen, "u", hashes, got, old) {
		t.Fatal("fill refused with no commit since")
	}
	if _, old, _ := c.getTokens("u", hashes, got, 2); len(old) != 0 {
		t.Error("still only in the old generation after being put back")
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
			tt := newTokenTable(8 << 20)
			const n = 90000 // two thirds of a generation's room
			for i := range n {
				tt.put(uint32(i%3), tc.hash(i), []uint64{1})
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
