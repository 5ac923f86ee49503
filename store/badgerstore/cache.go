package badgerstore

import (
	"math"
	"math/bits"
	"slices"
	"sync"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
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
	mu     sync.RWMutex
	gen    uint64
	tokens tokenTable
	totals boundedMap[string, *totals]
	// ids numbers users for the token table: a fixed-size key hashes and
	// compares faster than one holding the name, and token lookups are
	// the hot path. Numbers are never reused while the tokens cached under
	// them may remain; past maxUserIDs users, both are dropped at once.
	ids map[string]uint32
}

type tokenKey struct {
	user uint32
	hash bow.Hash
}

// totalsEntryBytes is the rough cost in bytes of a user's cached totals,
// map overhead included, for a two-class model.
const totalsEntryBytes = 192

func newCache(bytes int64) *cache {
	bytes = max(bytes, 0)
	// Totals are one entry per active user; a sixteenth of the budget is
	// thousands of users, the rest goes to tokens.
	return &cache{
		tokens: newTokenTable(bytes / 16 * 15),
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
			c.tokens.reset()
		}
		id = uint32(len(c.ids))
		c.ids[user] = id
	}
	return id
}

// getTokens sets out[i] to a copy of the cached row of hashes[i] for user
// (nil for a token known to be absent), at least width values long, and
// returns the indices it has no entry for, the indices it found only in
// the old generation, and the generation to pass to fillTokens, which
// should put both back: the misses read from Badger, the others so that a
// token in use survives the next rotation. The rows are the caller's; all
// those of width values share one array.
func (c *cache) getTokens(user string, hashes []bow.Hash, out []store.Counts, width int) (miss, old []int, gen uint64) {
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
	var backing []uint64
	row := func(i, n int) []uint64 {
		if n > width {
			return make([]uint64, n)
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
		e, inOld := c.tokens.find(id, h)
		switch {
		case e == nil:
			miss = append(miss, i)
			continue
		case e.width == wideCounts:
			v, ok := c.tokens.wide.get(tokenKey{id, h})
			if !ok {
				miss = append(miss, i)
				continue
			}
			r := row(i, len(v))
			copy(r, v)
			out[i] = r
		case e.width > 0:
			r := row(i, int(e.width))
			e.unpack(r)
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
		c.tokens.put(id, hashes[i], vals[i])
	}
	return true
}

// room returns how many tokens one generation of the table holds.
func (c *cache) room() int { return c.tokens.maxSlots / 4 * 3 }

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

// committed records what a commit wrote for user: copies of the new rows
// of hashes (nil for deleted) and, if not nil, the new totals.
func (c *cache) committed(user string, hashes []bow.Hash, vals [][]uint64, t *totals) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	id := c.id(user)
	for i, h := range hashes {
		c.tokens.put(id, h, vals[i])
	}
	if t != nil {
		c.totals.put(user, t)
	}
}

// tokenTable maps a user's token to its row, in open-addressed arrays of
// fixed-size entries that hold the row of a two-class model inline, in 32
// bits a value: a lookup costs about one cache miss, where a Go map of
// slices cost three or four (the group's control word, the slot, the
// slice's array), and scoring a message is mostly lookups. Counts past
// 2^32 and weights outside int32, which a two-class model hardly ever
// has, go aside like the rows of more classes: 32 bits keep an entry at
// half a cache line, where 64 would need three quarters, and entries
// would then straddle lines.
//
// It keeps two generations. Entries go into cur, which grows as it fills
// up to its bound; a full cur becomes old, and the old one is dropped.
// Lookups try cur, then old, so the value found is the newest; readers put
// what they found only in old back into cur, so a working set that fits in
// one generation moves across rotations instead of being dropped. That
// bounds memory at two generations and keeps eviction off the read path.
type tokenTable struct {
	cur, old []tokenEntry
	n        int // entries in cur
	maxSlots int // slots of a generation at its bound; 0 turns caching off
	// wide holds the rows that do not fit in an entry: of tokens with a
	// count or weight of a class past the first inlineClasses, or too
	// big for 32 bits. Their entries say wideCounts.
	wide boundedMap[tokenKey, []uint64]
}

// inlineClasses is the number of classes whose count and weight an entry
// holds.
const inlineClasses = 2

type tokenEntry struct {
	hash bow.Hash
	user uint32 // user id + 1; 0 marks an empty slot
	// width is the number of values in the row, trailing zeros dropped;
	// 0 means the token is known to be absent, wideCounts that its row
	// is in tokenTable.wide.
	width uint32
	// vals is the row: counts as uint32, weights as int32.
	vals [2 * inlineClasses]uint32
}

// pack puts row v into e, reporting false if it does not fit.
func (e *tokenEntry) pack(v []uint64) bool {
	if len(v) > len(e.vals) {
		return false
	}
	for i, x := range v {
		if i%2 == 0 && x > math.MaxUint32 || i%2 == 1 && int64(x) != int64(int32(x)) {
			return false
		}
		e.vals[i] = uint32(x)
	}
	return true
}

// unpack writes e's row into dst, which is at least e.width long and
// zero beyond it.
func (e *tokenEntry) unpack(dst []uint64) {
	for i := range e.width {
		if i%2 == 0 {
			dst[i] = uint64(e.vals[i])
		} else {
			dst[i] = uint64(int64(int32(e.vals[i])))
		}
	}
}

const (
	wideCounts   = 1 << 31
	entryBytes   = 32 // unsafe.Sizeof(tokenEntry{})
	minSlots     = 1 << 12
	wideFraction = 8 // wide entries may take 1/wideFraction of the slots
)

func newTokenTable(bytes int64) tokenTable {
	var t tokenTable
	// Two generations of entries fill the budget.
	if n := bytes / (2 * entryBytes); n >= minSlots {
		t.maxSlots = int(n)
	}
	t.wide = newBoundedMap[tokenKey, []uint64](t.maxSlots / wideFraction)
	return t
}

// slot returns where the probe for the token starts in a table of n
// slots: the high bits of a multiplicative mix of the hash and the user
// id, scaled to n. Multiplying rather than masking lets n be any size, so
// a generation uses all of its budget; mixing first matters because the
// scaling keeps the top bits, and Warm puts tokens in hash order, which
// unmixed would land in one long run of slots.
func slot(user uint32, h bow.Hash, n int) int {
	x := (uint64(h) ^ uint64(user)<<32) * 0x9e3779b97f4a7c15
	x ^= x >> 29
	hi, _ := bits.Mul64(x*0xbf58476d1ce4e5b9, uint64(n))
	return int(hi)
}

// find returns the entry of user id's token h, or nil, and whether it is
// in the old generation.
func (t *tokenTable) find(id uint32, h bow.Hash) (e *tokenEntry, old bool) {
	if e := probe(t.cur, id+1, h); e != nil && e.user != 0 {
		return e, false
	}
	if e := probe(t.old, id+1, h); e != nil && e.user != 0 {
		return e, true
	}
	return nil, false
}

// probe returns the slot of gen holding (user, h), or the empty slot where
// it belongs, or nil if gen has no slots. The table never fills beyond
// three quarters, so an empty slot is always found.
func probe(gen []tokenEntry, user uint32, h bow.Hash) *tokenEntry {
	if len(gen) == 0 {
		return nil
	}
	for i := slot(user, h, len(gen)); ; {
		e := &gen[i]
		if e.user == 0 || e.user == user && e.hash == h {
			return e
		}
		if i++; i == len(gen) {
			i = 0
		}
	}
}

// put caches a copy of row v (nil: absent) for user id's token h.
func (t *tokenTable) put(id uint32, h bow.Hash, v []uint64) {
	if t.maxSlots == 0 {
		return
	}
	if t.n+1 > len(t.cur)/4*3 {
		t.grow()
	}
	e := probe(t.cur, id+1, h)
	if e.user == 0 {
		t.n++
	}
	// Rows are as wide as the class list was; the values of classes a
	// token never had take no room.
	n := len(v)
	for n > 0 && v[n-1] == 0 {
		n--
	}
	*e = tokenEntry{hash: h, user: id + 1, width: uint32(n)}
	if !e.pack(v[:n]) {
		*e = tokenEntry{hash: h, user: id + 1, width: wideCounts}
		t.wide.put(tokenKey{id, h}, slices.Clone(v[:n]))
	}
}

// grow doubles cur, up to its bound, or, at the bound, makes it old and
// starts anew.
func (t *tokenTable) grow() {
	if len(t.cur) < t.maxSlots {
		prev := t.cur
		t.cur = make([]tokenEntry, min(max(2*len(prev), minSlots), t.maxSlots))
		for i := range prev {
			if e := &prev[i]; e.user != 0 {
				*probe(t.cur, e.user, e.hash) = *e
			}
		}
		return
	}
	// The dropped generation's array is the new one's, cleared.
	drop := t.old
	t.old = t.cur
	if len(drop) == len(t.cur) {
		clear(drop)
	} else {
		drop = make([]tokenEntry, len(t.cur))
	}
	t.cur, t.n = drop, 0
}

// reset drops every entry.
func (t *tokenTable) reset() {
	t.cur, t.old, t.n = nil, nil, 0
	clear(t.wide.m)
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
