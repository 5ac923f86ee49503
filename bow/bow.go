// Package bow turns a token stream into a bag of words: each distinct
// token's 64-bit hash with the number of times it occurs in one message.
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
	"bytes"
	"slices"
	"strconv"
	"strings"
	"sync"

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

// Bag is the bag of words of one message: its distinct features, in the
// order they first occur in the token stream, with their counts. The
// order is fixed for a given message, unlike a map's, so that whatever
// sums over a bag gives the same result to the bit every time.
type Bag struct {
	hashes []Hash
	counts []uint32
	head   int // features made by the tokens before NewSplit's split
	// Names maps a hash back to its token; nil unless Options.KeepNames.
	Names map[Hash]string
}

// Len returns the number of distinct features in the bag.
func (b Bag) Len() int { return len(b.hashes) }

// Total returns the sum of all counts in the bag.
func (b Bag) Total() uint64 {
	var n uint64
	for _, c := range b.counts {
		n += uint64(c)
	}
	return n
}

// Head returns how many of the bag's first features came from the tokens
// before the split NewSplit was given: the message's header, when the
// tokens are a tokenizer's. It is 0 for a bag built by New.
func (b Bag) Head() int { return b.head }

// Hashes returns the bag's distinct features. The slice is the bag's own
// and must not be changed.
func (b Bag) Hashes() []Hash { return b.hashes }

// Counts returns the count of each feature, in the order of Hashes. The
// slice is the bag's own and must not be changed.
func (b Bag) Counts() []uint32 { return b.counts }

// Map returns the bag as a new map from hash to count.
func (b Bag) Map() map[Hash]uint32 {
	m := make(map[Hash]uint32, len(b.hashes))
	for i, h := range b.hashes {
		m[h] = b.counts[i]
	}
	return m
}

// FromMaps builds a bag from the counts of its two parts: head's features
// first, then those of body that are not also in head, each part in
// ascending hash order. Zero counts are left out. It is for callers that
// hold counts rather than tokens, such as tests of the stores.
func FromMaps(head, body map[Hash]uint32) Bag {
	var b Bag
	add := func(part map[Hash]uint32, skip map[Hash]uint32) {
		start := len(b.hashes)
		for h, n := range part {
			if n != 0 && skip[h] == 0 {
				b.hashes = append(b.hashes, h)
			}
		}
		slices.Sort(b.hashes[start:])
		for _, h := range b.hashes[start:] {
			b.counts = append(b.counts, part[h])
		}
	}
	add(head, nil)
	b.head = len(b.hashes)
	add(body, head)
	return b
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
func New(tokens []string, o Options) Bag { return NewSplit(tokens, 0, o) }

// NewSplit builds the bag of tokens, of which the first split are one part
// of the message (its header) and the rest another: no sparse bigram spans
// the two, and Head tells where the first part's features end. A token of
// the second part that also occurs in the first counts as the first's.
func NewSplit(tokens []string, split int, o Options) Bag {
	split = min(max(split, 0), len(tokens))
	pairs := min(max(o.OSB, 1), MaxOSB) - 1
	bd := getBuilder(len(tokens)*(1+pairs), o)
	defer putBuilder(bd)
	bd.run(tokens[:split], pairs)
	head := len(bd.order)
	bd.run(tokens[split:], pairs)
	// The bag gets arrays of its own, as long as it has features: the
	// builder's are sized for every token and pair distinct.
	return Bag{hashes: slices.Clone(bd.order), counts: slices.Clone(bd.counts), Names: bd.names, head: head}
}

// run adds the features of one run of tokens: each token and its sparse
// bigrams with the next pairs tokens of the run in the same field.
func (bd *builder) run(tokens []string, pairs int) {
	if pairs == 0 {
		for _, t := range tokens {
			if h := HashOf(t); bd.count(h) && bd.names != nil {
				bd.names[h] = t
			}
		}
		return
	}
	// The tokens are laid end to end, each followed by a '~', so that the
	// name of a pair of adjacent tokens, most pairs and all of a window of
	// 2, is a slice of that text: hashed where it lies, each token is
	// copied once in all rather than once for every pair it is in.
	joined := bd.joined[:0]
	for _, t := range tokens {
		joined = append(joined, t...)
		joined = append(joined, '~')
	}
	bd.joined = joined
	// Each token's field is looked at by up to OSB-1 pairs, so it is found
	// once per token.
	bd.fields = slices.Grow(bd.fields[:0], len(tokens))[:len(tokens)]
	fields := bd.fields
	findFields(fields, tokens, joined)
	var d xxhash.Digest
	// The name of a sparser pair, built on the stack where it fits: hashing
	// it whole takes fewer than half the instructions of a digest fed its
	// three parts, which is how a longer one is hashed, to the same value.
	var buf [64]byte
	at := 0 // where t starts in joined
	for i, t := range tokens {
		if h := HashOf(t); bd.count(h) && bd.names != nil {
			bd.names[h] = t
		}
		for dist := 1; dist <= pairs && i+dist < len(tokens); dist++ {
			if fields[i+dist] != fields[i] {
				break
			}
			u := tokens[i+dist]
			var h Hash
			if n := len(t) + dist + len(u); dist == 1 {
				h = Hash(xxhash.Sum64(joined[at : at+n]))
			} else if n <= len(buf) {
				copy(buf[len(t)+dist:], u)
				copy(buf[len(t):len(t)+dist], tildes)
				copy(buf[:], t)
				h = Hash(xxhash.Sum64(buf[:n]))
			} else {
				// Hashing the parts in a row gives the hash of the
				// pair's name without building it: building it was
				// most of the allocations of a bag.
				d.Reset()
				d.WriteString(t)
				d.WriteString(tildes[:dist])
				d.WriteString(u)
				h = Hash(d.Sum64())
			}
			if bd.count(h) && bd.names != nil {
				bd.names[h] = pair(t, u, dist)
			}
		}
		at += len(t) + 1
	}
	clear(fields) // not to keep the tokens alive in the pool
}

// builder collects a bag's features in slices, finding repeats through an
// open-addressed index of their positions: a probe or two into a small
// array where a Go map would hash and probe twice per feature, once to
// read the count and once to write it. Builders are pooled: their arrays,
// sized for every feature distinct, were a third of the bytes that
// preparing a message allocated.
type builder struct {
	boolean bool
	slots   []int32 // position in order + 1; 0 marks an empty slot
	order   []Hash
	counts  []uint32
	fields  []string // run's
	joined  []byte   // run's tokens, each followed by '~'
	names   map[Hash]string
}

var builders = sync.Pool{New: func() any { return new(builder) }}

// maxPooled bounds the room a pooled builder keeps, in slots and in
// features, and sixteen times that in bytes of joined tokens: one huge
// message's is not kept for all.
const maxPooled = 1 << 16

// getBuilder returns an empty builder with room for features features.
func getBuilder(features int, o Options) *builder {
	bd := builders.Get().(*builder)
	// At most half full, so that probes stay short.
	n := 8
	for n < 2*features {
		n *= 2
	}
	if cap(bd.slots) < n {
		bd.slots = make([]int32, n)
	} else {
		bd.slots = bd.slots[:n]
		clear(bd.slots)
	}
	bd.boolean = o.Boolean
	bd.order = slices.Grow(bd.order[:0], features)
	bd.counts = slices.Grow(bd.counts[:0], features)
	bd.names = nil
	if o.KeepNames {
		bd.names = make(map[Hash]string, features)
	}
	return bd
}

// putBuilder gives bd back to the pool, unless it grew past maxPooled.
func putBuilder(bd *builder) {
	if cap(bd.slots) <= maxPooled && cap(bd.order) <= maxPooled && cap(bd.joined) <= 16*maxPooled {
		builders.Put(bd)
	}
}

// count counts feature h and reports whether it is new. Hashes are
// uniform, so their low bits spread them over the slots. It runs for every
// token and pair, and is written to stay within the compiler's budget for
// inlining (go build -gcflags=-m): a call on each cost a twentieth of
// building a bag.
func (bd *builder) count(h Hash) bool {
	i := uint64(h)
	for {
		i &= uint64(len(bd.slots) - 1)
		p := bd.slots[i]
		if p == 0 {
			break
		}
		if bd.order[p-1] == h {
			if !bd.boolean {
				bd.counts[p-1]++
			}
			return false
		}
		i++
	}
	bd.slots[i] = int32(len(bd.order) + 1)
	bd.order = append(bd.order, h)
	bd.counts = append(bd.counts, 1)
	return true
}

// MaxOSB is the widest window of sparse bigrams, far past any that helps.
const MaxOSB = 16

// tildes holds the separators of pairs up to the widest window.
var tildes = strings.Repeat("~", MaxOSB-1)

// findFields sets fields[i] to the field of tokens[i], given the tokens
// joined, each followed by a byte other than ':'. Only a token with a ':'
// has a field, and most have none: the colons are looked for in the
// joined text, past the tokens without one in a single scan.
func findFields(fields, tokens []string, joined []byte) {
	colon := nextColon(joined, 0)
	at := 0 // where t starts in joined
	for i, t := range tokens {
		fields[i] = ""
		if colon < at+len(t) {
			fields[i] = field(t, colon-at)
			colon = nextColon(joined, at+len(t)+1)
		}
		at += len(t) + 1
	}
}

// nextColon returns the offset of the first ':' in b[from:] from b's
// start, or len(b).
func nextColon(b []byte, from int) int {
	if i := bytes.IndexByte(b[from:], ':'); i >= 0 {
		return from + i
	}
	return len(b)
}

// field returns the prefix of token t up to its first ':', at i, or "" for
// body words. URLs keep their scheme inside the token text, so only a
// prefix made of letters and '-' counts as a field name.
func field(t string, i int) string {
	for _, c := range []byte(t[:i]) {
		if !(c >= 'a' && c <= 'z' || c == '-') {
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
