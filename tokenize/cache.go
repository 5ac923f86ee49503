package tokenize

import (
	"hash/maphash"
	"math"
	"strings"
	"sync"
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
// larger shared map, split into shards under their own locks so that
// goroutines rarely wait for each other. A shard that fills up is emptied,
// which costs a few misses and keeps memory bounded.
//
// A shard keeps its tokens' bytes in one arena and maps a hash to where
// the token is in it, so that neither the map nor the arena holds a
// pointer. Held as a string each, the shared level's quarter of a million
// tokens were as many objects for the garbage collector to mark at every
// cycle, in a daemon's cache as in a training; a token handed out is a
// string into the arena, whose bytes are never written again. An emptied
// shard's arena lives on while tokens point into it, those in the
// states' tables among them, which turn over in a few hundred messages
// where a shard fills in thousands: over trec07-late's 37,709 messages the
// live heap after a collection was 15-26 MB, against 13-21 MB with a
// string a token.
const (
	cacheShards   = 64
	cacheShardMax = 4096  // entries per shard: about 260k in all
	localSize     = 16384 // entries of a state's table, a power of two: 384 KiB
	// arenaSize is a shard's arena, 24 bytes an entry, twice what a
	// token takes on average. A shard whose arena fills up is emptied as
	// one whose map does.
	arenaSize = 24 * cacheShardMax
	// maxCachedLen is the longest token cached: a longer one is mostly
	// a URL or a header seen once, and would take much of an arena.
	maxCachedLen = 256
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
	mu sync.RWMutex
	// m maps a hash to its token's place in arena: the offset in the top
	// 32 bits, the length in the others.
	m     map[uint64]uint64
	arena []byte
}

func newCache() *cache {
	c := &cache{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = make(map[uint64]uint64)
	}
	return c
}

func (c *cache) get(h uint64) (string, bool) {
	s := &c.shards[h%cacheShards]
	s.mu.RLock()
	at, ok := s.m[h]
	arena := s.arena
	s.mu.RUnlock()
	if !ok {
		return "", false
	}
	return arenaString(arena, at), true
}

// put caches tok under h and returns it as the string that the cache
// holds, which tok may only be a view of.
func (c *cache) put(h uint64, tok string) string {
	if len(tok) > maxCachedLen {
		return strings.Clone(tok)
	}
	s := &c.shards[h%cacheShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= cacheShardMax || len(s.arena)+len(tok) > cap(s.arena) {
		// The strings handed out keep the old arena for as long as
		// they live; the new one is written from its start.
		clear(s.m)
		s.arena = make([]byte, 0, arenaSize)
	}
	at := uint64(len(s.arena))<<32 | uint64(len(tok))
	s.arena = append(s.arena, tok...)
	s.m[h] = at
	return arenaString(s.arena, at)
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
// then the shared map, and the hash of key for a later store.
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
