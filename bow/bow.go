// Package bow turns a token stream into a bag of words: a map from a
// token's 64-bit hash to the number of times it occurs in one message.
//
// Tokens are identified by their xxhash64 digest, so a model stores eight
// bytes per token whatever its length; the text of a token is kept only
// when Options.KeepNames asks for it, for explanations. Two distinct tokens
// colliding in 64 bits is possible but, for vocabularies of a few million
// tokens, about as likely as a disk returning wrong bytes.
//
// Besides unigram counts, a bag can carry orthogonal sparse bigrams (OSB,
// Siefkes et al., 2004): for each body token, pairs with each of the next
// Window-1 tokens, the distance between them being part of the feature.
// Pairs are formed only between tokens of the same field (the same prefix
// before ':'), so a subject word never pairs with a body word.
package bow

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// Hash identifies a token in a model.
type Hash uint64

// HashOf returns the hash of token s.
func HashOf(s string) Hash { return Hash(xxhash.Sum64String(s)) }

// Options selects how a bag is built.
type Options struct {
	// Boolean counts each distinct token once per message (presence),
	// instead of its number of occurrences (term frequency).
	Boolean bool
	// OSB is the window of orthogonal sparse bigrams: 0 or 1 turns them
	// off, 2 pairs adjacent tokens, 5 pairs each token with the next four.
	// A window wider than MaxOSB acts as MaxOSB.
	OSB int
	// KeepNames keeps the text of every token, for explanations.
	KeepNames bool
}

// Bag is the bag of words of one message.
type Bag struct {
	// Counts maps a token's hash to its count in the message. A bag from
	// New must not have its Counts changed: Hashes would no longer match.
	Counts map[Hash]uint32
	// Names maps a hash back to its token; nil unless Options.KeepNames.
	Names map[Hash]string
	// order lists the hashes of Counts in the order they first occurred.
	order []Hash
}

// Len returns the number of distinct features in the bag.
func (b Bag) Len() int { return len(b.Counts) }

// Total returns the sum of all counts in the bag.
func (b Bag) Total() uint64 {
	var n uint64
	for _, c := range b.Counts {
		n += uint64(c)
	}
	return n
}

// Hashes returns the bag's distinct hashes in the order they first
// occurred in the token stream, so that the same message always gives
// them in the same order (a map's order changes from run to run). The
// slice is the bag's own and must not be changed.
func (b Bag) Hashes() []Hash {
	if len(b.order) != len(b.Counts) {
		// A bag not built by New: sorting gives a fixed order too.
		hs := slices.Sorted(maps.Keys(b.Counts))
		return hs
	}
	return b.order
}

// Name returns the text of the token with hash h, or its hexadecimal hash
// when the bag was built without names.
func (b Bag) Name(h Hash) string {
	if s, ok := b.Names[h]; ok {
		return s
	}
	return "#" + strconv.FormatUint(uint64(h), 16)
}

// New builds the bag of tokens.
func New(tokens []string, o Options) Bag {
	pairs := min(max(o.OSB, 1), MaxOSB) - 1
	b := Bag{
		Counts: make(map[Hash]uint32, len(tokens)*(1+pairs)),
		order:  make([]Hash, 0, len(tokens)*(1+pairs)),
	}
	if o.KeepNames {
		b.Names = make(map[Hash]string, len(tokens)*(1+pairs))
	}
	if pairs == 0 {
		for _, t := range tokens {
			b.add(HashOf(t), t, o)
		}
		return b
	}
	// Each token's field is looked at by up to OSB-1 pairs; finding it
	// once per token halves the scanning for ':'.
	fields := make([]string, len(tokens))
	for i, t := range tokens {
		fields[i] = field(t)
	}
	var d xxhash.Digest
	for i, t := range tokens {
		b.add(HashOf(t), t, o)
		for dist := 1; dist <= pairs && i+dist < len(tokens); dist++ {
			if fields[i+dist] != fields[i] {
				break
			}
			u := tokens[i+dist]
			// Hashing the parts in a row gives the hash of the pair's
			// name without building it: building it was most of the
			// allocations of a bag.
			d.Reset()
			d.WriteString(t)
			d.WriteString(tildes[:dist])
			d.WriteString(u)
			var name string
			if b.Names != nil {
				name = pair(t, u, dist)
			}
			b.add(Hash(d.Sum64()), name, o)
		}
	}
	return b
}

// MaxOSB is the widest window of sparse bigrams, far past any that helps.
const MaxOSB = 16

// tildes holds the separators of pairs up to the widest window.
var tildes = strings.Repeat("~", MaxOSB-1)

func (b *Bag) add(h Hash, t string, o Options) {
	n := b.Counts[h]
	if n == 0 {
		b.order = append(b.order, h)
	}
	if o.Boolean {
		b.Counts[h] = 1
	} else {
		b.Counts[h] = n + 1
	}
	if b.Names != nil {
		if _, ok := b.Names[h]; !ok {
			b.Names[h] = t
		}
	}
}

// field returns the prefix of a token up to its first ':', "" for body
// words. URLs keep their scheme inside the token text, so only a prefix
// made of letters and '-' counts as a field name.
func field(t string) string {
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

// pair names the sparse bigram of a and b at distance d; the distance is
// written as that many '~' so "a~b" and "a~~b" are different features.
func pair(a, b string, d int) string {
	return a + strings.Repeat("~", d) + b
}
