package bow

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	tokens := []string{"subject:free", "subject:cash", "buy", "cheap", "buy", "url:example.com"}
	for _, tc := range []struct {
		name string
		o    Options
		want map[string]uint32
	}{
		{"term frequency", Options{}, map[string]uint32{
			"subject:free": 1, "subject:cash": 1, "buy": 2, "cheap": 1, "url:example.com": 1,
		}},
		{"boolean", Options{Boolean: true}, map[string]uint32{
			"subject:free": 1, "subject:cash": 1, "buy": 1, "cheap": 1, "url:example.com": 1,
		}},
		// Pairs form within a field only: the subject words pair with each
		// other, body words with body words, and no pair crosses into the
		// url field.
		{"osb 2", Options{OSB: 2}, map[string]uint32{
			"subject:free": 1, "subject:cash": 1, "buy": 2, "cheap": 1, "url:example.com": 1,
			"subject:free~subject:cash": 1, "buy~cheap": 1, "cheap~buy": 1,
		}},
		{"osb 3", Options{OSB: 3}, map[string]uint32{
			"subject:free": 1, "subject:cash": 1, "buy": 2, "cheap": 1, "url:example.com": 1,
			"subject:free~subject:cash": 1, "buy~cheap": 1, "cheap~buy": 1, "buy~~buy": 1,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.KeepNames = true
			b := New(tokens, tc.o)
			if b.Len() != len(tc.want) {
				t.Errorf("%d features, want %d: %v", b.Len(), len(tc.want), b.Names)
			}
			var total uint64
			for tok, n := range tc.want {
				h := HashOf(tok)
				if got := b.Map()[h]; got != n {
					t.Errorf("count of %q = %d, want %d", tok, got, n)
				}
				if b.Name(h) != tok {
					t.Errorf("name of %x = %q, want %q", h, b.Name(h), tok)
				}
				total += uint64(n)
			}
			if b.Total() != total {
				t.Errorf("total %d, want %d", b.Total(), total)
			}
			hs := b.Hashes()
			if len(hs) != b.Len() {
				t.Errorf("%d hashes for %d features", len(hs), b.Len())
			}
			if again := New(tokens, tc.o).Hashes(); !slices.Equal(hs, again) {
				t.Errorf("hashes in another order the second time: %v, then %v", hs, again)
			}
			if hs[0] != HashOf(tokens[0]) {
				t.Errorf("first hash %x, want the first token's %x", hs[0], HashOf(tokens[0]))
			}
			for i, h := range hs {
				if b.Counts()[i] != b.Map()[h] {
					t.Errorf("count %d of %x, map says %d", b.Counts()[i], h, b.Map()[h])
				}
			}
			tc.o.KeepNames = false
			if bare := New(tokens, tc.o); !maps.Equal(bare.Map(), b.Map()) {
				t.Errorf("without names: %v, with names: %v", bare.Map(), b.Map())
			}
		})
	}
}

// TestPairHashes checks that a pair is hashed as its name, whether the
// name fits the stack buffer pairs are built in or is hashed in parts.
func TestPairHashes(t *testing.T) {
	long := strings.Repeat("x", 40)
	for _, tc := range []struct {
		name   string
		tokens []string
	}{
		{"short", []string{"a", "b", "c"}},
		{"fits exactly", []string{strings.Repeat("a", 31), strings.Repeat("b", 32)}},
		{"one byte over", []string{strings.Repeat("a", 32), strings.Repeat("b", 32)}},
		{"long", []string{long, long + "y", "z", long}},
		{"field prefix", []string{"subject:" + long, "subject:" + long, "subject:w"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New(tc.tokens, Options{OSB: MaxOSB, KeepNames: true})
			for h, name := range b.Names {
				if HashOf(name) != h {
					t.Errorf("feature %q has hash %x, its name hashes to %x", name, h, HashOf(name))
				}
			}
			for i := range tc.tokens {
				for d := 1; i+d < len(tc.tokens); d++ {
					if name := pair(tc.tokens[i], tc.tokens[i+d], d); b.Names[HashOf(name)] != name {
						t.Errorf("pair %q missing", name)
					}
				}
			}
		})
	}
}

func TestNewSplit(t *testing.T) {
	// The header ends in a token of the same field as the body's first, so
	// only the split keeps them from pairing.
	tokens := []string{"subject:cheap", "subject:watch", "meta:x", "meta:y", "buy", "subject:cheap"}
	for _, tc := range []struct {
		name  string
		split int
		head  []string // features before Head, in order
	}{
		{"whole bag", 0, nil},
		{"header and body", 3, []string{"subject:cheap", "subject:cheap~subject:watch", "subject:watch", "meta:x"}},
		{"split inside a field", 4, []string{"subject:cheap", "subject:cheap~subject:watch", "subject:watch", "meta:x", "meta:x~meta:y", "meta:y"}},
		{"all header", 6, []string{"subject:cheap", "subject:cheap~subject:watch", "subject:watch", "meta:x", "meta:x~meta:y", "meta:y", "buy"}},
		{"beyond the end", 99, []string{"subject:cheap", "subject:cheap~subject:watch", "subject:watch", "meta:x", "meta:x~meta:y", "meta:y", "buy"}},
		{"negative", -1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewSplit(tokens, tc.split, Options{OSB: 2, KeepNames: true})
			var head []string
			for _, h := range b.Hashes()[:b.Head()] {
				head = append(head, b.Name(h))
			}
			if !slices.Equal(head, tc.head) {
				t.Errorf("head features %q, want %q", head, tc.head)
			}
			for _, h := range b.Hashes() {
				if n := b.Name(h); n == "meta:x~meta:y" && tc.split == 3 {
					t.Errorf("pair %q spans the split", n)
				}
			}
			// The last token repeats the first: one feature, counted in
			// the header, whatever the split.
			if got := b.Map()[HashOf("subject:cheap")]; got != 2 {
				t.Errorf("subject:cheap counted %d times, want 2", got)
			}
		})
	}
	if New(tokens, Options{}).Head() != 0 {
		t.Error("New: Head != 0")
	}
}

func TestNamesOnlyWhenAsked(t *testing.T) {
	b := New([]string{"a", "b"}, Options{})
	if b.Names != nil {
		t.Errorf("names kept without KeepNames: %v", b.Names)
	}
	if got := b.Name(HashOf("a")); got[0] != '#' {
		t.Errorf("Name without names = %q, want a #hash", got)
	}
}

func TestField(t *testing.T) {
	tokens := []string{
		"subject:free", "list-id:fork", "word", ":odd", "http://example.com", "Weird:Case",
		"", "-:x", "a:b:c", "a b:c", "é:x", "subjé:x", "to:", "x~y:z", "ab", ":", "a:", "b",
	}
	want := []string{
		"subject", "list-id", "", "", "http", "",
		"", "-", "a", "", "", "", "to", "", "", "", "a", "",
	}
	// Random tokens besides, compared with the first definition.
	r := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteString([]string{"a", "z", "-", ":", "A", "0", "~", "é", "\xff", " "}[r.IntN(10)])
		}
		tokens = append(tokens, b.String())
		want = append(want, referenceField(b.String()))
	}
	fields := make([]string, len(tokens))
	for i := range fields {
		fields[i] = "stale"
	}
	var joined []byte
	for _, tok := range tokens {
		joined = append(append(joined, tok...), '~')
	}
	findFields(fields, tokens, joined)
	for i, tok := range tokens {
		if fields[i] != want[i] {
			t.Errorf("field of %q = %q, want %q", tok, fields[i], want[i])
		}
	}
}

// benchTokens returns a message-sized token stream: a few header tokens,
// then body words drawn from a Zipf distribution, as in mail.
func benchTokens() []string {
	r := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(r, 1.1, 1, 5000)
	toks := []string{"subject:cheap", "subject:meds", "from:example.com", "to:example.org"}
	for range 400 {
		toks = append(toks, "w"+strconv.FormatUint(z.Uint64(), 10))
	}
	return toks
}

func BenchmarkNew(b *testing.B) {
	toks := benchTokens()
	for _, o := range []Options{{Boolean: true}, {Boolean: true, OSB: 2}, {OSB: 5}} {
		b.Run(fmt.Sprintf("boolean=%v/osb=%d", o.Boolean, o.OSB), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				New(toks, o)
			}
		})
	}
}

func TestFromMaps(t *testing.T) {
	for _, tc := range []struct {
		name       string
		head, body map[Hash]uint32
		hashes     []Hash
		counts     []uint32
		split      int
	}{
		{"empty", nil, nil, nil, nil, 0},
		{"body only, sorted", nil, map[Hash]uint32{9: 1, 3: 2}, []Hash{3, 9}, []uint32{2, 1}, 0},
		{"head first", map[Hash]uint32{7: 1}, map[Hash]uint32{2: 4}, []Hash{7, 2}, []uint32{1, 4}, 1},
		{"a token in both counts as the head's", map[Hash]uint32{5: 1}, map[Hash]uint32{5: 3, 1: 1}, []Hash{5, 1}, []uint32{1, 1}, 1},
		{"zero counts left out", map[Hash]uint32{5: 0}, map[Hash]uint32{5: 2, 6: 0}, []Hash{5}, []uint32{2}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := FromMaps(tc.head, tc.body)
			if !slices.Equal(b.Hashes(), tc.hashes) || !slices.Equal(b.Counts(), tc.counts) || b.Head() != tc.split {
				t.Errorf("FromMaps = %v %v head %d, want %v %v head %d", b.Hashes(), b.Counts(), b.Head(), tc.hashes, tc.counts, tc.split)
			}
		})
	}
}

// TestNewSplitReference compares NewSplit with a plain construction of the
// same bag on random token streams: every feature's name spelled out and
// hashed whole, each pair's field found by the first definition of field.
// The features and their order must be the same to the bit, since models
// are keyed by the hashes and scores sum in bag order. Tokens run to 70
// bytes, so pair names fall on both sides of the hash's 32-byte blocks and
// of the 64 bytes built on the stack.
func TestNewSplitReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	prefixes := []string{"", "", "", "subject:", "to:", "list-id:", "http:", "Weird:", "é:", ":", "a-b:c:"}
	alphabet := []string{"a", "b", "c", "x", "y", "z", "0", "1", "9", "-", ".", "~", ":", "@", "é"}
	token := func() string {
		var b strings.Builder
		b.WriteString(prefixes[r.IntN(len(prefixes))])
		for range r.IntN(r.IntN(71) + 1) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	for i := range 2000 {
		tokens := make([]string, r.IntN(40))
		for j := range tokens {
			tokens[j] = token()
		}
		// Repeats, so that counts go past 1.
		for j := range tokens {
			if j > 2 && r.IntN(4) == 0 {
				tokens[j] = tokens[r.IntN(j)]
			}
		}
		o := Options{Boolean: r.IntN(2) == 0, OSB: r.IntN(MaxOSB + 3), KeepNames: r.IntN(2) == 0}
		split := r.IntN(len(tokens)+3) - 1
		b := NewSplit(tokens, split, o)
		hashes, counts, head := referenceBag(tokens, split, o)
		if !slices.Equal(b.Hashes(), hashes) || !slices.Equal(b.Counts(), counts) || b.Head() != head {
			t.Fatalf("case %d, %q split %d %+v:\nhashes %x\n  want %x\ncounts %v\n  want %v\nhead %d, want %d",
				i, tokens, split, o, b.Hashes(), hashes, b.Counts(), counts, b.Head(), head)
		}
		for h, name := range b.Names {
			if HashOf(name) != h {
				t.Fatalf("case %d: feature %q has hash %x, its name hashes to %x", i, name, h, HashOf(name))
			}
		}
	}
}

// referenceBag returns the features of NewSplit(tokens, split, o), their
// counts and the length of the head, built the plainest way.
func referenceBag(tokens []string, split int, o Options) (hashes []Hash, counts []uint32, head int) {
	split = min(max(split, 0), len(tokens))
	window := min(max(o.OSB, 1), MaxOSB)
	at := map[Hash]int{}
	add := func(name string) {
		h := HashOf(name)
		if i, ok := at[h]; ok {
			if !o.Boolean {
				counts[i]++
			}
			return
		}
		at[h] = len(hashes)
		hashes = append(hashes, h)
		counts = append(counts, 1)
	}
	run := func(run []string) {
		for i, a := range run {
			add(a)
			for d := 1; d < window && i+d < len(run) && referenceField(run[i+d]) == referenceField(a); d++ {
				add(a + strings.Repeat("~", d) + run[i+d])
			}
		}
	}
	run(tokens[:split])
	head = len(hashes)
	run(tokens[split:])
	return hashes, counts, head
}

// referenceField is field as first written: the token's prefix up to its
// first ':' when that prefix is all lower-case ASCII letters and '-'.
func referenceField(t string) string {
	i := strings.IndexByte(t, ':')
	if i <= 0 {
		return ""
	}
	for _, r := range t[:i] {
		if !(r >= 'a' && r <= 'z' || r == '-') {
			return ""
		}
	}
	return t[:i]
}
