package badgerstore

import (
	"sync"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/tokencache"
)

// cache holds recently read or written token rows (nil for a token known
// to be absent) and totals, so that classifying mostly stays out of Badger.
//
// It must never serve a value older than the last Apply that returned.
// Apply, after each commit and before returning, writes the new values in
// and bumps gen, all under mu. A reader that missed notes gen before it
// opens its Badger transaction, and puts what it read only if gen has not
// moved since: otherwise a commit may have happened in between, and the
// value it read from its older snapshot may be one that commit replaced.
// Losing such a fill costs a later miss, nothing else. Rows go in and
// out as copies, so what a caller holds is never the cache's and the
// other way round; totals are never modified, only replaced, so a reader
// may keep them past mu.
type cache struct {
	mu  sync.RWMutex
	gen uint64
	// tokens is the token table every backend's cache shares.
	tokens tokencache.Table
	totals tokencache.Bounded[string, *totals]
	// ids numbers users for the token table: a fixed-size key hashes and
	// compares faster than one holding the name, and token lookups are
	// the hot path. Numbers are never reused while the tokens cached under
	// them may remain; past maxUserIDs users, both are dropped at once.
	ids map[string]uint32
	// next is the number the next user gets.
	next uint32
	// whole holds, by number, the users whose every token row is in the
	// table, for whom a token the table lacks is a token the model
	// lacks: a warm read the whole model, and every commit since put what
	// it wrote. The value is the table's rotation count when the warm
	// began; the rows are all there as long as the count has not moved
	// past it by more than one (tokencache.Table.Rotations).
	whole map[uint32]uint64
}

// totalsEntryBytes is the rough cost in bytes of a user's cached totals
// beyond what totals.bytes counts: the map's.
const totalsEntryBytes = 64

func newCache(bytes int64) *cache {
	bytes = max(bytes, 0)
	// Totals are one entry per active user, a couple of hundred bytes and
	// the samples, a few kilobytes for a user who trained hundreds of
	// messages: a sixteenth of the budget is thousands of users, the rest
	// goes to tokens.
	return &cache{
		tokens: tokencache.New(bytes / 16 * 15),
		totals: tokencache.NewSized[string](int(bytes/16), func(t *totals) int { return totalsEntryBytes + t.bytes() }),
		ids:    make(map[string]uint32),
		whole:  make(map[uint32]uint64),
	}
}

// maxUserIDs bounds the users numbered at once, some 3 MB of names.
const maxUserIDs = 1 << 16

// id returns user's number; c.mu must be held for writing.
func (c *cache) id(user string) uint32 {
	id, ok := c.ids[user]
	if !ok {
		if c.next >= maxUserIDs {
			clear(c.ids)
			clear(c.whole)
			c.tokens.Reset()
			c.next = 0
		}
		id = c.next
		c.next++
		c.ids[user] = id
	}
	return id
}

// forget drops all it holds of user, whose model was deleted or
// replaced: the user's tokens go unreachable under a number never given
// again, and a fill read before is refused.
func (c *cache) forget(user string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if id, ok := c.ids[user]; ok {
		delete(c.whole, id)
	}
	delete(c.ids, user)
	c.totals.Delete(user)
}

// rotations returns the token table's rotation count, which a warm
// notes before it starts to fill.
func (c *cache) rotations() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.tokens.Rotations()
}

// warmed records that a warm put every token row of user, having noted
// gen and rotations from before it started: unless a commit or a
// rotation too many came in between, the table now holds the whole model.
func (c *cache) warmed(gen uint64, user string, rotations uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == gen && c.tokens.Rotations() <= rotations+1 {
		c.whole[c.id(user)] = rotations
	}
}

// isWhole reports whether the table holds all of user id's rows; c.mu
// is held.
func (c *cache) isWhole(id uint32) bool {
	r, ok := c.whole[id]
	return ok && c.tokens.Rotations() <= r+1
}

// getTokens sets out[i] to a copy of the cached row of hashes[i] for user
// (nil for a token known to be absent), at least width values long, and
// returns the indices it has no entry for, the indices it found only in
// the old generation, and the generation to pass to fillTokens, which
// should put both back: the misses read from Badger, the others so that a
// token in use survives the next rotation. The rows are the caller's; all
// those of width values share one array: dst, row i at i·width, if dst
// is not nil (len(hashes)·width zero values), else one it allocates.
func (c *cache) getTokens(user string, hashes []bow.Hash, out []store.Counts, width int, dst []uint64) (miss, old []int, gen uint64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	id, ok := c.ids[user]
	if !ok {
		miss = make([]int, len(hashes))
		for i := range miss {
			miss[i] = i
		}
		return miss, nil, c.gen
	}
	whole := c.isWhole(id)
	c.tokens.Touch(id, hashes)
	var backing []uint64
	row := func(i, n int) []uint64 {
		if n > width {
			return make([]uint64, n)
		}
		if dst != nil {
			return dst[i*width : (i+1)*width : (i+1)*width]
		}
		if len(backing) == 0 {
			// Enough for the rest of the call, all hits; allocated at
			// the first, so that a call of unknown tokens allocates none.
			backing = make([]uint64, (len(hashes)-i)*width)
		}
		r := backing[:width:width]
		backing = backing[width:]
		return r
	}
	for i, h := range hashes {
		e, ok, inOld := c.tokens.Get(id, h)
		if !ok {
			// A row kept aside may have been evicted from beside its
			// entry, which Has still finds.
			if !whole || c.tokens.Has(id, h) {
				miss = append(miss, i)
			}
			continue
		}
		if n := e.Len(); n > 0 {
			r := row(i, n)
			e.CopyTo(r)
			out[i] = r
		}
		if inOld {
			old = append(old, i)
		}
	}
	return miss, old, c.gen
}

// fillTokens caches a copy of vals[i] for hashes[i] for each i in idx,
// unless a commit happened since gen; it reports whether it did.
func (c *cache) fillTokens(gen uint64, user string, hashes []bow.Hash, vals []store.Counts, idx []int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return false
	}
	id := c.id(user)
	for _, i := range idx {
		c.tokens.Put(id, hashes[i], vals[i])
	}
	return true
}

// touch reads where user's hashes go in the table
// (tokencache.Table.Touch), for a fill of rows that no lookup has just
// looked for: a warm's.
func (c *cache) touch(user string, hashes []bow.Hash) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if id, ok := c.ids[user]; ok {
		c.tokens.Touch(id, hashes)
	}
}

// reserve makes room for n more tokens at once (tokencache.Table.Reserve).
func (c *cache) reserve(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tokens.Reserve(n)
}

// room returns how many tokens one generation of the table holds.
func (c *cache) room() int { return c.tokens.Room() }

func (c *cache) getTotals(user string) (t *totals, ok bool, gen uint64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	t, ok = c.totals.Get(user)
	return t, ok, c.gen
}

func (c *cache) fillTotals(gen uint64, user string, t *totals) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == gen {
		c.totals.Put(user, t)
	}
}

// committed records what a commit wrote for user: copies of the new rows
// of hashes (nil for deleted) and, if not nil, the new totals.
func (c *cache) committed(user string, hashes []bow.Hash, vals [][]uint64, t *totals) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	id := c.id(user)
	for i, h := range hashes {
		c.tokens.Put(id, h, vals[i])
	}
	if t != nil {
		c.totals.Put(user, t)
	}
}
