package tokenize

import (
	"hash/maphash"
	"sync"
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
const (
	cacheShards   = 64
	cacheShardMax = 4096  // entries per shard: about 260k in all
	localSize     = 16384 // entries of a state's table, a power of two: 384 KiB
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
	m  map[uint64]string
}

func newCache() *cache {
	c := &cache{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = make(map[uint64]string)
	}
	return c
}

func (c *cache) get(h uint64) (string, bool) {
	s := &c.shards[h%cacheShards]
	s.mu.RLock()
	v, ok := s.m[h]
	s.mu.RUnlock()
	return v, ok
}

func (c *cache) put(h uint64, tok string) {
	s := &c.shards[h%cacheShards]
	s.mu.Lock()
	if len(s.m) >= cacheShardMax {
		clear(s.m)
	}
	s.m[h] = tok
	s.mu.Unlock()
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

// store caches tok under the hash h of its key.
func (st *state) store(h uint64, tok string) {
	st.local[h&(localSize-1)] = localEntry{h, tok}
	st.t.cache.put(h, tok)
}
