package tokenize

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestCache: what put returns, get returns; a token too long is not
// cached; a shard whose map or arena is full is emptied, and the tokens
// handed out before stay as they were.
func TestCache(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tokens []string
		// cached says which of tokens get finds after all are put.
		cached []bool
	}{
		{"plain", []string{"viagra", "subject:free", "\x00", ""}, []bool{true, true, true, true}},
		{"too long", []string{strings.Repeat("x", maxCachedLen+1), "ok"}, []bool{false, true}},
		{"longest", []string{strings.Repeat("y", maxCachedLen)}, []bool{true}},
		{"arena full", append(repeatTokens(arenaSize/maxCachedLen, maxCachedLen), "last"),
			append(make([]bool, arenaSize/maxCachedLen), true)},
		{"map full", append(repeatTokens(cacheShardMax, 1), "last"),
			append(make([]bool, cacheShardMax), true)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCache()
			// All in one shard, so that filling it is a matter of count.
			hash := func(i int) uint64 { return uint64(i+1) * cacheShards }
			got := make([]string, len(tc.tokens))
			for i, tok := range tc.tokens {
				// A view that changes after put, as addBytes's key does.
				b := []byte(tok)
				got[i] = c.put(hash(i), string(b))
				clear(b)
				if got[i] != tok {
					t.Fatalf("put %q returned %q", tok, got[i])
				}
			}
			for i, tok := range tc.tokens {
				if got[i] != tok {
					t.Errorf("token %d handed out as %q is now %q", i, tok, got[i])
				}
				v, ok := c.get(hash(i))
				if ok != tc.cached[i] || ok && v != tok {
					t.Errorf("get of token %d = %q, %v; want %q, %v", i, v, ok, tok, tc.cached[i])
				}
			}
		})
	}
}

// repeatTokens returns n tokens of length size.
func repeatTokens(n, size int) []string {
	toks := make([]string, n)
	for i := range toks {
		s := fmt.Sprintf("%0*d", size, i)
		toks[i] = s[len(s)-size:]
	}
	return toks
}

// TestCacheConcurrent has goroutines put and get the tokens of one set of
// keys, all of one shard, which fills past the points where its table
// doubles and where it is emptied, and checks that every get finds a
// key's own token or none, and that the tokens handed out before the
// shard was emptied are as they were. Run with -race, it also checks that
// the lock-free reads are synchronized.
func TestCacheConcurrent(t *testing.T) {
	c := newCache()
	const keys = 3 * cacheShardMax / 2
	tok := func(k uint64) string { return fmt.Sprintf("token-%d", k) }
	early := make([][]string, 4)
	var wg sync.WaitGroup
	for g := range early {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range keys {
				k := uint64((i*7919+g*104729)%keys + 1)
				h := k * 0x9e3779b97f4a7c15 &^ (cacheShards - 1)
				if got, ok := c.get(h); ok && got != tok(k) {
					t.Errorf("get of key %d = %q", k, got)
					return
				}
				got := c.put(h, tok(k))
				if got != tok(k) {
					t.Errorf("put of key %d returned %q", k, got)
					return
				}
				if i < 100 {
					early[g] = append(early[g], got)
				}
			}
		}()
	}
	wg.Wait()
	for g, toks := range early {
		for i, got := range toks {
			if k := uint64((i*7919+g*104729)%keys + 1); got != tok(k) {
				t.Errorf("token of key %d handed out early is now %q", k, got)
			}
		}
	}
}
