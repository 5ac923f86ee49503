package badgerstore

import (
	"fmt"
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
			_, gen := c.getTokens("u", hashes, make([]store.Counts, 1))
			c.fillTokens(gen, "u", hashes, []store.Counts{stale}, []int{0})
			c.committed("u", hashes, [][]uint64{fresh}, nil)
		}},
		{"read before commit, fill after", func(c *cache) {
			_, gen := c.getTokens("u", hashes, make([]store.Counts, 1))
			c.committed("u", hashes, [][]uint64{fresh}, nil)
			c.fillTokens(gen, "u", hashes, []store.Counts{stale}, []int{0})
		}},
		{"fill after commit of another user", func(c *cache) {
			_, gen := c.getTokens("u", hashes, make([]store.Counts, 1))
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
			if miss, _ := c.getTokens("u", hashes, got); len(miss) != 0 || got[0][0] != 2 {
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
		miss, _ := c.getTokens(u, []bow.Hash{1}, got)
		want := uint64(5)
		if u != "first" {
			fmt.Sscanf(u, "user%d", &want)
		}
		if len(miss) == 0 && got[0][0] != want {
			t.Errorf("user %s sees %v, want %d", u, got[0], want)
		}
	}
}

func TestTokenTable(t *testing.T) {
	if n := unsafe.Sizeof(tokenEntry{}); n != entryBytes {
		t.Fatalf("tokenEntry takes %d bytes, entryBytes says %d", n, entryBytes)
	}
	counts := func(i int) []uint64 {
		switch i % 4 {
		case 0:
			return nil // known absent
		case 1:
			return []uint64{uint64(i)}
		case 2:
			return []uint64{uint64(i), 1}
		}
		return []uint64{0, uint64(i), 7} // a third class: kept aside
	}
	tt := newTokenTable(1 << 20)
	const users, tokens = 3, 40000 // past one generation's bound
	for i := range tokens {
		for u := range uint32(users) {
			tt.put(u, bow.Hash(i), counts(i+int(u)))
		}
		if len(tt.cur) > tt.maxSlots || len(tt.old) > tt.maxSlots {
			t.Fatalf("generations of %d and %d slots, bound %d", len(tt.cur), len(tt.old), tt.maxSlots)
		}
	}
	found := 0
	for i := range tokens {
		for u := range uint32(users) {
			e := tt.find(u, bow.Hash(i))
			if e == nil {
				continue
			}
			found++
			want := counts(i + int(u))
			var got []uint64
			switch {
			case e.width == wideCounts:
				var ok bool
				if got, ok = tt.wide.get(tokenKey{u, bow.Hash(i)}); !ok {
					continue // evicted from the side map
				}
			case e.width > 0:
				got = e.counts[:e.width]
			}
			if !slices.Equal(got, want) {
				t.Fatalf("user %d token %d: %v, want %v", u, i, got, want)
			}
		}
	}
	// Whatever was dropped, the newest puts are there.
	for u := range uint32(users) {
		if tt.find(u, bow.Hash(tokens-1)) == nil {
			t.Errorf("user %d: last token dropped", u)
		}
	}
	if found == users*tokens || found < tt.maxSlots/2 {
		t.Errorf("%d of %d entries kept with %d slots a generation", found, users*tokens, tt.maxSlots)
	}

	// An update replaces, even when the old value sits in the old
	// generation.
	tt.put(0, bow.Hash(1), []uint64{99, 98})
	if e := tt.find(0, bow.Hash(1)); e == nil || e.counts != [2]uint64{99, 98} {
		t.Errorf("after update: %+v", e)
	}

	off := newTokenTable(0)
	off.put(0, 1, []uint64{1})
	if off.find(0, 1) != nil || off.cur != nil {
		t.Error("a table of no bytes caches")
	}
}
