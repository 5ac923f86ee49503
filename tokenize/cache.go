package tokenize

import (
	"hash/maphash"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Finished tokens are cached by the 64-bit hash of what they are made
// from: a byte naming what is done to the word, the field prefix and the
// word. A hit saves the Snowball stemmer (microseconds per word) and the
// allocation of the token string, so that a frequent token is one shared
// string. Two inputs with the same 64-bit hash would share a token; like
// the hashing of tokens downstream, this is accepted as far less likely
// than a hardware error.
//
// There are two levels. Each pooled state has a direct-mapped table of its
// own, read without a lock in one memory access, and the Tokenizer has a
// larger shared one, split into shards, each an open-addressed table that
// is read without a lock too: a slot, once written, is never written
// again, and its hash is stored after what it holds, so that a reader
// that finds the hash finds the rest. Writers take the shard's lock. A
// shard that fills up is emptied, which costs a few misses and keeps
// memory bounded. Under a read-write lock and a Go map, the shared
// level's reads were a seventh of a first training's processor time.
//
// A shard keeps its tokens' bytes in one arena and its table maps a hash
// to where the token is in it, so that neither holds a pointer. Held as a
// string each, the shared level's quarter of a million tokens were as
// many objects for the garbage collector to mark at every cycle, in a
// daemon's cache as in a training; a token handed out is a string into
// the arena, whose bytes are never written again. An emptied shard's
// arena lives on while tokens point into it, those in the states' tables
// among them, which turn over in a few hundred messages where a shard
// fills in thousands: over trec07-late's 37,709 messages the live heap
// after a collection was 15-26 MB, against 13-21 MB with a string a
// token.
const (
	cacheShards   = 64
	cacheShardMax = 4096  // entries per shard: about 260k in all
	localSize     = 16384 // entries of a state's table, a power of two: 384 KiB
	// arenaSize is a shard's arena, 24 bytes an entry, twice what a
	// token takes on average. A shard whose arena fills up is emptied as
	// one whose table does.
	arenaSize = 24 * cacheShardMax
	// maxCachedLen is the longest token cached: a longer one is mostly
	// a URL or a header seen once, and would take much of an arena.
	maxCachedLen = 256
	// minSlots is the size of a shard's first table, which doubles
	// before an entry would fill it past half, up to 2·cacheShardMax
	// slots: a run that meets a few thousand tokens touches a few pages
	// of it.
	minSlots = 256
)

// Key namespaces: the first byte of a cache key.
const (
	nsPlain = 0 // the token is the rest of the key
	nsReg   = 1 // the token is the prefix and the registrable domain of the host, or noReg
	nsStem  = 2 // plus a language index: the token is the stem of the word
)

type cache struct {
	seed   maphash.Seed
	shards [cacheShards]cacheShard
}

type cacheShard struct {
	table atomic.Pointer[shardTable] // nil until the first put
	mu    sync.Mutex                 // held by writers
	n     int                        // entries in table
	used  int                        // bytes of the arena taken
}

// shardTable is a shard's table and the arena its slots point into. A
// table that doubles keeps its arena; a shard emptied gets a new table
// and a new arena.
type shardTable struct {
	slots []cacheSlot // a power of two
	arena []byte      // arenaSize long
}

// cacheSlot maps a hash to its token's place in the arena: the offset in
// the top 32 bits of at, the length in the others. A zero hash marks an
// empty slot; a key that hashes to zero is not cached.
type cacheSlot struct {
	h, at atomic.Uint64
}

func newCache() *cache { return &cache{seed: maphash.MakeSeed()} }

// home is h's first slot in a table of mask+1 slots. The shard is chosen
// by h's low bits; the slot by others.
func home(h uint64, mask int) int { return int(h>>32) & mask }

func (c *cache) get(h uint64) (string, bool) {
	t := c.shards[h%cacheShards].table.Load()
	if t == nil || h == 0 {
		return "", false
	}
	if sl := t.slot(h); sl.h.Load() == h {
		return arenaString(t.arena, sl.at.Load()), true
	}
	return "", false
}

// put caches tok under h and returns it as the string that the cache
// holds, which tok may only be a view of.
func (c *cache) put(h uint64, tok string) string {
	if len(tok) > maxCachedLen || h == 0 {
		return strings.Clone(tok)
	}
	s := &c.shards[h%cacheShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.table.Load()
	if t != nil {
		if sl := t.slot(h); sl.h.Load() == h {
			// Another state missed the same key and put it first.
			return arenaString(t.arena, sl.at.Load())
		}
	}
	switch {
	case t == nil || s.n >= cacheShardMax || s.used+len(tok) > len(t.arena):
		// The strings handed out keep the old arena for as long as
		// they live; the new one is written from its start.
		t = &shardTable{slots: make([]cacheSlot, minSlots), arena: make([]byte, arenaSize)}
		s.n, s.used = 0, 0
		s.table.Store(t)
	case 2*(s.n+1) > len(t.slots):
		// Readers go on in the table they loaded, which stays as it
		// is: a token put from here on is a miss there.
		grown := &shardTable{slots: make([]cacheSlot, 2*len(t.slots)), arena: t.arena}
		for i := range t.slots {
			if k := t.slots[i].h.Load(); k != 0 {
				grown.slot(k).set(k, t.slots[i].at.Load())
			}
		}
		t = grown
		s.table.Store(t)
	}
	sl := t.slot(h)
	at := uint64(s.used)<<32 | uint64(len(tok))
	s.used += copy(t.arena[s.used:], tok)
	sl.set(h, at)
	s.n++
	return arenaString(t.arena, at)
}

// slot returns h's slot in t, or the empty one where it would go; a table
// is at most half full, so an empty slot ends every probe. A reader may
// find that empty slot filled by then, with h (a hit) or another hash (a
// miss); only a writer, holding the shard's lock, fills the slot it
// returns.
func (t *shardTable) slot(h uint64) *cacheSlot {
	mask := len(t.slots) - 1
	i := home(h, mask)
	for {
		if k := t.slots[i].h.Load(); k == h || k == 0 {
			return &t.slots[i]
		}
		i = (i + 1) & mask
	}
}

// set fills an empty slot: the place first, so that a reader that finds
// h finds it.
func (sl *cacheSlot) set(h, at uint64) {
	sl.at.Store(at)
	sl.h.Store(h)
}

// arenaString returns the token at place at of arena.
func arenaString(arena []byte, at uint64) string {
	n := int(at & math.MaxUint32)
	if n == 0 {
		return ""
	}
	return unsafe.String(&arena[at>>32], n)
}

// localEntry is a slot of a state's table.
type localEntry struct {
	h   uint64
	tok string // "" for an empty slot
}

// cached returns the token cached for key, trying the state's table and
// then the shared table, and the hash of key for a later store.
func (st *state) cached(key []byte) (tok string, h uint64, ok bool) {
	h = maphash.Bytes(st.t.cache.seed, key)
	e := &st.local[h&(localSize-1)]
	if e.h == h && e.tok != "" {
		return e.tok, h, true
	}
	if tok, ok = st.t.cache.get(h); ok {
		*e = localEntry{h, tok}
	}
	return tok, h, ok
}

// store caches tok under the hash h of its key and returns the string
// cached, which tok may only be a view of.
func (st *state) store(h uint64, tok string) string {
	tok = st.t.cache.put(h, tok)
	st.local[h&(localSize-1)] = localEntry{h, tok}
	return tok
}
