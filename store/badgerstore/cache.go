package badgerstore

import (
	"sync"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
)

// cache holds recently read or written token counts (nil for a token known
// to be absent) and totals, so that classifying mostly stays out of Badger.
//
// It must never serve a value older than the last Apply that returned.
// Apply, after each commit and before returning, writes the new values in
// and bumps gen, all under mu. A reader that missed notes gen before it
// opens its Badger transaction, and puts what it read only if gen has not
// moved since: otherwise a commit may have happened in between, and the
// value it read from its older snapshot may be one that commit replaced.
// Losing such a fill costs a later miss, nothing else. Values in the maps
// are never modified, only replaced, so a reader may keep one past mu.
type cache struct {
	mu     sync.RWMutex
	gen    uint64
	tokens boundedMap[tokenKey, []uint64]
	totals boundedMap[string, *totals]
	// ids numbers users for tokenKey: a fixed-size key hashes and
	// compares faster than one holding the name, and token lookups are
	// the hot path. Numbers are never reused while the tokens cached under
	// them may remain; past maxUserIDs users, both are dropped at once.
	ids map[string]uint32
}

type tokenKey struct {
	user uint32
	hash bow.Hash
}

// Rough costs of an entry in bytes, map overhead included, to turn
// Options.CacheBytes into entry counts; a two-class model is assumed.
const (
	tokenEntryBytes  = 96
	totalsEntryBytes = 192
)

func newCache(bytes int64) *cache {
	bytes = max(bytes, 0)
	// Totals are one entry per active user; a sixteenth of the budget is
	// thousands of users, the rest goes to tokens.
	return &cache{
		tokens: newBoundedMap[tokenKey, []uint64](int(bytes / 16 * 15 / tokenEntryBytes)),
		totals: newBoundedMap[string, *totals](int(bytes / 16 / totalsEntryBytes)),
		ids:    make(map[string]uint32),
	}
}

// maxUserIDs bounds the users numbered at once, some 3 MB of names.
const maxUserIDs = 1 << 16

// id returns user's number; c.mu must be held for writing.
func (c *cache) id(user string) uint32 {
	id, ok := c.ids[user]
	if !ok {
		if len(c.ids) >= maxUserIDs {
			clear(c.ids)
			clear(c.tokens.m)
		}
		id = uint32(len(c.ids))
		c.ids[user] = id
	}
	return id
}

// getTokens sets out[i] to the cached counts of hashes[i] for user and
// returns the indices it has no entry for, with the generation to pass to
// fillTokens.
func (c *cache) getTokens(user string, hashes []bow.Hash, out []store.Counts) (miss []int, gen uint64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	id, ok := c.ids[user]
	if !ok {
		miss = make([]int, len(hashes))
		for i := range miss {
			miss[i] = i
		}
		return miss, c.gen
	}
	for i, h := range hashes {
		v, ok := c.tokens.get(tokenKey{id, h})
		if !ok {
			miss = append(miss, i)
			continue
		}
		out[i] = v
	}
	return miss, c.gen
}

// fillTokens caches vals[i] for hashes[i] for each i in idx, unless a
// commit happened since gen.
func (c *cache) fillTokens(gen uint64, user string, hashes []bow.Hash, vals []store.Counts, idx []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	id := c.id(user)
	for _, i := range idx {
		c.tokens.put(tokenKey{id, hashes[i]}, vals[i])
	}
}

func (c *cache) getTotals(user string) (t *totals, ok bool, gen uint64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	t, ok = c.totals.get(user)
	return t, ok, c.gen
}

func (c *cache) fillTotals(gen uint64, user string, t *totals) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == gen {
		c.totals.put(user, t)
	}
}

// committed records what a commit wrote for user: the new counts of
// hashes (nil for deleted) and, if not nil, the new totals.
func (c *cache) committed(user string, hashes []bow.Hash, vals [][]uint64, t *totals) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	id := c.id(user)
	for i, h := range hashes {
		c.tokens.put(tokenKey{id, h}, vals[i])
	}
	if t != nil {
		c.totals.put(user, t)
	}
}

// boundedMap is a map of at most max entries that evicts entries at
// random when full. Random eviction needs no bookkeeping on the read path,
// which is what matters here: a hit costs one map lookup under a shared
// lock, and the hot tokens of mail (Zipf-distributed) come straight back
// after an unlucky eviction.
type boundedMap[K comparable, V any] struct {
	m   map[K]V
	max int
}

func newBoundedMap[K comparable, V any](max int) boundedMap[K, V] {
	return boundedMap[K, V]{m: make(map[K]V), max: max}
}

func (b *boundedMap[K, V]) get(k K) (V, bool) {
	v, ok := b.m[k]
	return v, ok
}

func (b *boundedMap[K, V]) put(k K, v V) {
	if b.max <= 0 {
		return
	}
	if _, ok := b.m[k]; !ok && len(b.m) >= b.max {
		// Evicting a slice of the map at once keeps the cost of starting
		// a map iteration off most puts. Go starts each iteration at a
		// random place, which makes the victims random.
		n := b.max/64 + 1
		for victim := range b.m {
			delete(b.m, victim)
			if n--; n == 0 {
				break
			}
		}
	}
	b.m[k] = v
}
