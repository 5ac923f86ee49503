package redisstore

import (
	"fmt"
	"testing"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
)

var testKeys = keys{prefix: "spamd:"}

// read does what Lookup does with the cache for one token of user u:
// getTokens, then, unless the cache had it, run (the meeting with other
// events) and fill with row at version ver.
func read(c *nodeCache, u string, h bow.Hash, row []uint64, ver uint64, run func()) {
	out := make([]store.Counts, 1)
	tk := c.getTokens(u, []bow.Hash{h}, out, 2)
	if len(tk.miss) == 0 {
		return
	}
	if run != nil {
		run()
	}
	c.fill(u, tk, []bow.Hash{h}, &totals{version: ver}, []store.Counts{row})
}

// ticketOf returns a ticket of u's cache as it is now.
func ticketOf(c *nodeCache, u string) *ticket {
	tk, _ := c.noteBuckets(u, nil)
	return tk
}

func cached(c *nodeCache, u string, h bow.Hash) ([]uint64, bool) {
	out := make([]store.Counts, 1)
	tk := c.getTokens(u, []bow.Hash{h}, out, 2)
	return out[0], len(tk.miss) == 0
}

// TestCacheFill walks the orders in which a read from Redis meets the
// invalidations and the other reads of what it read, and checks that the
// cache never ends with an older row than one a reader was given.
func TestCacheFill(t *testing.T) {
	const h = bow.Hash(7)
	bucket := testKeys.bucket("u", layout{}.bucket(h))
	tests := []struct {
		name string
		run  func(c *nodeCache)
		want []uint64 // nil: not cached
	}{
		{"fill", func(c *nodeCache) { read(c, "u", h, []uint64{1}, 1, nil) }, []uint64{1}},
		{"invalidated during the first read", func(c *nodeCache) {
			read(c, "u", h, []uint64{1}, 1, func() { c.invalidate(testKeys, []string{bucket}, false, func() {}) })
		}, nil},
		{"invalidated during a later read", func(c *nodeCache) {
			read(c, "u", bow.Hash(8), []uint64{5}, 1, nil) // the region exists
			read(c, "u", h, []uint64{1}, 1, func() { c.invalidate(testKeys, []string{bucket}, false, func() {}) })
		}, nil},
		{"an older read fills after a newer one", func(c *nodeCache) {
			read(c, "u", h, []uint64{1}, 1, func() { read(c, "u", h, []uint64{2}, 2, nil) })
		}, []uint64{2}},
		{"an older read fills first", func(c *nodeCache) {
			out := make([]store.Counts, 1)
			newer := c.getTokens("u", []bow.Hash{h}, out, 2)
			read(c, "u", h, []uint64{1}, 1, nil)
			c.fill("u", newer, []bow.Hash{h}, &totals{version: 2}, []store.Counts{{2}})
		}, []uint64{2}},
		{"connection lost during the read", func(c *nodeCache) {
			read(c, "u", h, []uint64{1}, 1, func() { c.invalidate(testKeys, nil, true, func() {}) })
		}, nil},
		{"another user's bucket invalidated", func(c *nodeCache) {
			read(c, "u", h, []uint64{1}, 1, func() {
				c.invalidate(testKeys, []string{testKeys.bucket("v", 1), testKeys.totals("u")}, false, func() {})
			})
		}, []uint64{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newNodeCache(1 << 20)
			tt.run(c)
			got, ok := cached(c, "u", h)
			switch {
			case tt.want == nil && ok:
				t.Errorf("cache holds %v, want a miss", got)
			case tt.want != nil && (!ok || got[0] != tt.want[0]):
				t.Errorf("cache holds %v (hit %v), want %v", got, ok, tt.want)
			}
		})
	}
}

// TestCacheStale checks that what the cache held when the connection went
// is served by stale, and no longer as current.
func TestCacheStale(t *testing.T) {
	c := newNodeCache(1 << 20)
	read(c, "u", 7, []uint64{3}, 1, nil)
	c.fillTotals("u", ticketOf(c, "u"), &totals{version: 1, messages: []uint64{4}})
	c.invalidate(testKeys, nil, true, func() {})
	if _, ok := cached(c, "u", 7); ok {
		t.Fatal("a row from before the lost connection is served as current")
	}
	out := make([]store.Counts, 2)
	tk := c.getTokens("u", []bow.Hash{7, 8}, out, 2)
	c.stale("u", []bow.Hash{7, 8}, out, tk, 2)
	if out[0] == nil || out[0][0] != 3 || out[1] != nil {
		t.Errorf("stale rows %v, want [3] and nil", out)
	}
	if tot := c.staleTotals("u"); tot == nil || tot.messages[0] != 4 {
		t.Errorf("stale totals %+v", tot)
	}
	if tot, _ := c.getTotals("u"); tot != nil {
		t.Error("totals from before the lost connection are served as current")
	}
	// A server that restarted empty counts versions anew: its version 0
	// must fill again.
	c.fillTotals("u", ticketOf(c, "u"), &totals{version: 0, messages: []uint64{0}})
	if tot, _ := c.getTotals("u"); tot == nil || len(tot.messages) != 1 || tot.messages[0] != 0 {
		t.Errorf("after the restart, totals %+v", tot)
	}
}

// TestCacheComplete checks that a bucket Warm read whole answers for the
// tokens it does not hold, until it is invalidated.
func TestCacheComplete(t *testing.T) {
	c := newNodeCache(1 << 20)
	b := layout{}.bucket(1)
	tk, ids := c.noteBuckets("u", []uint64{b})
	if n := c.fillDump("u", tk, ids, &totals{version: 1}, []uint64{b}, [][]bow.Hash{{1}}, [][]store.Counts{{{5}}}); n != 1 {
		t.Fatalf("fillDump = %d", n)
	}
	out := make([]store.Counts, 2)
	if tk := c.getTokens("u", []bow.Hash{1, 2}, out, 2); len(tk.miss) != 0 || out[0][0] != 5 || out[1] != nil {
		t.Fatalf("misses %v, rows %v; want the bucket to answer for both", tk.miss, out)
	}
	c.invalidate(testKeys, []string{testKeys.bucket("u", b)}, false, func() {})
	if tk := c.getTokens("u", []bow.Hash{1, 2}, out, 2); len(tk.miss) != 2 {
		t.Errorf("after an invalidation, misses %v, want both", tk.miss)
	}
}

// TestCacheUsers checks that a cache of too many users keeps the global
// model's.
func TestCacheUsers(t *testing.T) {
	c := newNodeCache(1 << 20)
	c.maxUsers = 10
	read(c, "", 1, []uint64{9}, 1, nil)
	for i := range 25 {
		read(c, fmt.Sprint("user", i), 1, []uint64{uint64(i)}, 1, nil)
	}
	if len(c.users) > 10 {
		t.Errorf("%d users cached", len(c.users))
	}
	if got, ok := cached(c, "", 1); !ok || got[0] != 9 {
		t.Errorf("the global model's row: %v, %v", got, ok)
	}
	if got, ok := cached(c, "user24", 1); !ok || got[0] != 24 {
		t.Errorf("the last user's row: %v, %v", got, ok)
	}
}
