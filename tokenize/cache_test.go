package tokenize

import (
	"fmt"
	"strings"
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
