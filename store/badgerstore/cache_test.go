package badgerstore

import (
	"fmt"
	"slices"
	"testing"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
)

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
			_, _, gen := c.getTokens("u", hashes, make([]store.Counts, 1), 4, nil)
			c.fillTokens(gen, "u", hashes, []store.Counts{stale}, []int{0})
			c.committed("u", hashes, [][]uint64{fresh}, nil)
		}},
		{"read before commit, fill after", func(c *cache) {
			_, _, gen := c.getTokens("u", hashes, make([]store.Counts, 1), 4, nil)
			c.committed("u", hashes, [][]uint64{fresh}, nil)
			c.fillTokens(gen, "u", hashes, []store.Counts{stale}, []int{0})
		}},
		{"fill after commit of another user", func(c *cache) {
			_, _, gen := c.getTokens("u", hashes, make([]store.Counts, 1), 4, nil)
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
			if miss, _, _ := c.getTokens("u", hashes, got, 4, nil); len(miss) != 0 || got[0][0] != 2 {
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
		miss, _, _ := c.getTokens(u, []bow.Hash{1}, got, 4, nil)
		want := uint64(5)
		if u != "first" {
			fmt.Sscanf(u, "user%d", &want)
		}
		if len(miss) == 0 && got[0][0] != want {
			t.Errorf("user %s sees %v, want %d", u, got[0], want)
		}
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
			if miss, _, _ := c.getTokens("u", []bow.Hash{1}, got, 6, nil); len(miss) != 0 || got[0][0] != 1 {
				t.Fatalf("after the putter scribbled: %v (misses %v)", got[0], miss)
			}
			if len(got[0]) != 6 || !slices.Equal(got[0][:len(tc.row)], tc.row) {
				t.Fatalf("got %v, want %v padded to 6", got[0], tc.row)
			}
			got[0][0] = 98
			again := make([]store.Counts, 1)
			c.getTokens("u", []bow.Hash{1}, again, 6, nil)
			if again[0][0] != 1 {
				t.Errorf("after the getter scribbled: %v", again[0])
			}
		})
	}
}

// TestCacheTokensInto checks that getTokens copies rows of width values
// into the array given, each at its place, and a wider row apart.
func TestCacheTokensInto(t *testing.T) {
	c := newCache(1 << 20)
	c.committed("u", []bow.Hash{1, 2, 3}, [][]uint64{{5, 6}, nil, {1, 2, 3, 4, 5}}, nil)
	hashes := []bow.Hash{1, 2, 3, 4}
	got := make([]store.Counts, len(hashes))
	dst := make([]uint64, len(hashes)*4)
	miss, _, _ := c.getTokens("u", hashes, got, 4, dst)
	if !slices.Equal(miss, []int{3}) {
		t.Errorf("misses %v, want [3]", miss)
	}
	if !slices.Equal(dst, []uint64{5, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}) || &got[0][0] != &dst[0] || len(got[0]) != 4 {
		t.Errorf("array %v, row 0 %v: want token 1's row at its place", dst, got[0])
	}
	if got[1] != nil || !slices.Equal(got[2], []uint64{1, 2, 3, 4, 5}) || got[3] != nil {
		t.Errorf("rows %v, want [nil [1 2 3 4 5] nil] after the first", got[1:])
	}
}

func TestLookupPutsBackOldHits(t *testing.T) {
	c := newCache(1 << 20)
	hashes := []bow.Hash{7}
	c.committed("u", hashes, [][]uint64{{5, 6}}, nil)
	// Rotate the table once, with other users' tokens.
	for i := 0; ; i++ {
		n := c.tokens.Len()
		c.committed("v", []bow.Hash{bow.Hash(i)}, [][]uint64{{1}}, nil)
		if c.tokens.Len() < n {
			break
		}
	}
	got := make([]store.Counts, 1)
	miss, old, gen := c.getTokens("u", hashes, got, 2, nil)
	if len(miss) != 0 || len(old) != 1 || !slices.Equal(got[0], []uint64{5, 6}) {
		t.Fatalf("miss %v, old %v, counts %v; want the token found in old", miss, old, got[0])
	}
	if !c.fillTokens(gen, "u", hashes, got, old) {
		t.Fatal("fill refused with no commit since")
	}
	if _, old, _ := c.getTokens("u", hashes, got, 2, nil); len(old) != 0 {
		t.Error("still only in the old generation after being put back")
	}
}

// TestCacheWhole walks what makes a warmed cache whole or not: a warm
// that a commit overtook, the rotations that drop the rows a warm put,
// and a row kept aside whose side entry was evicted.
func TestCacheWhole(t *testing.T) {
	model := []bow.Hash{1, 2, 3}
	rows := []store.Counts{{1}, {2, 0, 0, 0, 5}, {3}} // the second is kept aside: a third class
	absent := []bow.Hash{9}
	warm := func(c *cache, commitMeanwhile bool) {
		_, _, gen := c.getTotals("u")
		r := c.rotations()
		c.fillTokens(gen, "u", model, rows, []int{0, 1, 2})
		if commitMeanwhile {
			c.committed("v", []bow.Hash{4}, [][]uint64{{1}}, nil)
		}
		c.warmed(gen, "u", r)
	}
	misses := func(c *cache, hs []bow.Hash) int {
		miss, _, _ := c.getTokens("u", hs, make([]store.Counts, len(hs)), 4, nil)
		return len(miss)
	}
	tests := []struct {
		name  string
		run   func(c *cache)
		whole bool
	}{
		{"warmed", func(c *cache) { warm(c, false) }, true},
		{"a commit during the warm", func(c *cache) { warm(c, true) }, false},
		{"one rotation since", func(c *cache) {
			warm(c, false)
			rotate(c, 1)
		}, true},
		{"two rotations since", func(c *cache) {
			warm(c, false)
			rotate(c, 2)
		}, false},
		{"forgotten", func(c *cache) {
			warm(c, false)
			c.forget("u")
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCache(1 << 20)
			tt.run(c)
			if got := misses(c, absent) == 0; got != tt.whole {
				t.Errorf("an absent token answered without a read: %v, want %v", got, tt.whole)
			}
		})
	}

	// Rows kept aside (of a third class) beyond what the side map holds:
	// those it evicted are read again, whole or not, and a token of no
	// row still is not.
	c := newCache(1 << 20)
	var wide []bow.Hash
	var wideRows []store.Counts
	var idx []int
	for i := range 3000 {
		wide = append(wide, bow.Hash(100+i))
		wideRows = append(wideRows, store.Counts{1, 0, 0, 0, 1})
		idx = append(idx, i)
	}
	_, _, gen := c.getTotals("u")
	r := c.rotations()
	c.fillTokens(gen, "u", wide, wideRows, idx)
	c.warmed(gen, "u", r)
	if n := misses(c, wide); n == 0 || n == len(wide) {
		t.Errorf("%d of %d rows kept aside missed, want those the side map evicted", n, len(wide))
	}
	if n := misses(c, absent); n != 0 {
		t.Errorf("an absent token missed in a whole cache with rows aside evicted")
	}
}

// rotate puts other users' tokens into c until its table has rotated n
// more times.
func rotate(c *cache, n uint64) {
	want := c.rotations() + n
	for i := 0; c.rotations() < want; i++ {
		c.committed(fmt.Sprint("other", i%100), []bow.Hash{bow.Hash(i)}, [][]uint64{{1}}, nil)
	}
}
