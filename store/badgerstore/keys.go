package badgerstore

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
)

// Key kinds: the first byte of every key. A user's keys are the kind, the
// user name, a 0x00 byte and the rest; ValidUser admits no 0x00, so the
// separator ends the name for certain and "a" can never reach "ab"'s keys.
// Kinds are printable so that a key dump is readable.
const (
	kindMeta   = 'm' // "m": the store's schema version and class list (JSON)
	kindTotals = 'u' // "u" user 0x00: the user's totals (appendTotals)
	kindToken  = 'r' // "r" user 0x00 hash(8, big-endian): a token's row (appendRow)
	kindSeen   = 'S' // "S" user 0x00 digest(32): class index, steps and values (appendSeen)
	// kindSample holds a measure's sample in a class: "h" user 0x00
	// measure(1) class index (uvarint) → appendSample.
	kindSample = 'h'
	// kindBusy marks a user whose model a restore or a delete is
	// writing: "x" user 0x00, no value. Open finishes a delete it finds
	// marked and drops a restore, so that either leaves a whole model or
	// none.
	kindBusy = 'x'
	// kindTokenV1 held a token's counts in schema 1 (decodeCountsV1).
	// Only converting a schema-1 store and Check still read it; a value
	// of either schema is found under its own kind only, so the two can
	// never be mistaken for each other.
	kindTokenV1 = 't'
	// kindSeenV2 held seen records in schemas 1 and 2, class and steps
	// (decodeSeenV2), read as kindTokenV1 is.
	kindSeenV2 = 's'
)

// schemaVersion is written into the meta key. Bump it on any change of
// key layout or value encoding, and teach Open to convert older stores.
// Schema 2 added the weights to the token rows and the steps to the seen
// records; schema 3 the measures' values to the seen records, under a
// kind of their own, and the samples.
const schemaVersion = 3

var metaKey = []byte{kindMeta}

// appendUserPrefix appends the prefix shared by all of user's keys of kind.
func appendUserPrefix(dst []byte, kind byte, user string) []byte {
	dst = append(dst, kind)
	dst = append(dst, user...)
	return append(dst, 0)
}

func userPrefix(kind byte, user string) []byte {
	return appendUserPrefix(make([]byte, 0, len(user)+2), kind, user)
}

func appendTokenKey(dst []byte, user string, h bow.Hash) []byte {
	return binary.BigEndian.AppendUint64(appendUserPrefix(dst, kindToken, user), uint64(h))
}

func appendSeenKey(dst []byte, user string, d store.Digest) []byte {
	return append(appendUserPrefix(dst, kindSeen, user), d[:]...)
}

func totalsKey(user string) []byte { return userPrefix(kindTotals, user) }

// sampleKey names the sample of measure m in class c.
type sampleKey struct {
	measure uint8
	class   int
}

func appendSampleKey(dst []byte, user string, k sampleKey) []byte {
	dst = append(appendUserPrefix(dst, kindSample, user), k.measure)
	return binary.AppendUvarint(dst, uint64(k.class))
}

// parseSampleKey reads the measure and class of a sample key of user's.
func parseSampleKey(key []byte, user string) (sampleKey, bool) {
	rest := key[min(len(key), len(user)+2):]
	if len(rest) < 2 {
		return sampleKey{}, false
	}
	c, n := binary.Uvarint(rest[1:])
	if n <= 0 || 1+n != len(rest) || c > math.MaxInt32 || rest[0] >= store.MaxMeasures {
		return sampleKey{}, false
	}
	return sampleKey{measure: rest[0], class: int(c)}, true
}

// appendSample appends a sample as uvarints: its count, sum and sum of
// squares, then per level with values the distance from the last level
// (the first from 0) and the count there. A class's sample of a few
// hundred messages takes some hundreds of bytes.
func appendSample(dst []byte, s store.Sample) []byte {
	dst = binary.AppendUvarint(dst, s.N)
	dst = binary.AppendUvarint(dst, s.Sum)
	dst = binary.AppendUvarint(dst, s.SumSq)
	last := uint16(0)
	for _, b := range s.Bins {
		dst = binary.AppendUvarint(dst, uint64(b.Level-last))
		dst = binary.AppendUvarint(dst, b.Count)
		last = b.Level
	}
	return dst
}

// decodeSample decodes a sample, checking that its levels ascend within
// the grid, that its counts are positive and that its moments are those
// of its bins.
func decodeSample(b []byte) (store.Sample, error) {
	var s store.Sample
	var vals [3]uint64
	for i := range vals {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return store.Sample{}, errCorrupt
		}
		vals[i], b = v, b[n:]
	}
	s.N, s.Sum, s.SumSq = vals[0], vals[1], vals[2]
	var n, sum, sq uint64
	level := uint64(0)
	for len(b) > 0 {
		d, k := binary.Uvarint(b)
		if k <= 0 {
			return store.Sample{}, errCorrupt
		}
		b = b[k:]
		c, k := binary.Uvarint(b)
		if k <= 0 {
			return store.Sample{}, errCorrupt
		}
		b = b[k:]
		if level += d; (d == 0 && len(s.Bins) > 0) || level >= store.MaxLevels || c == 0 {
			return store.Sample{}, fmt.Errorf("%w: levels not ascending within the grid, or an empty level", errCorrupt)
		}
		s.Bins = append(s.Bins, store.Bin{Level: uint16(level), Count: c})
		n, sum, sq = n+c, sum+c*level, sq+c*level*level
	}
	if n != s.N || sum != s.Sum || sq != s.SumSq {
		return store.Sample{}, fmt.Errorf("%w: count %d, sum %d, sum of squares %d, but the levels hold %d, %d, %d", store.ErrInconsistent, s.N, s.Sum, s.SumSq, n, sum, sq)
	}
	return s, nil
}

// errCorrupt marks a stored value that does not decode; it is reported as
// store.ErrInconsistent, which is what a caller can act on (run Check).
var errCorrupt = fmt.Errorf("%w: undecodable value", store.ErrInconsistent)

// appendRow appends one token's row, laid out as store.Counts (a count
// and a weight per class index), trailing zeros dropped: counts as
// uvarints, weights zigzag-encoded, since they are as often negative. A
// token of a two-class model seen a few times, with small weights, takes
// four to eight bytes.
func appendRow(dst []byte, row []uint64) []byte {
	n := len(row)
	for n > 0 && row[n-1] == 0 {
		n--
	}
	for i, v := range row[:n] {
		if i%2 == 0 {
			dst = binary.AppendUvarint(dst, v)
		} else {
			dst = binary.AppendVarint(dst, int64(v))
		}
	}
	return dst
}

// decodeRow appends the row encoded in b to dst. What it appends may be
// shorter than the class list; the rest is zero.
func decodeRow(dst []uint64, b []byte) ([]uint64, error) {
	for i := 0; len(b) > 0; i++ {
		var v uint64
		var n int
		if i%2 == 0 {
			v, n = binary.Uvarint(b)
		} else {
			var w int64
			w, n = binary.Varint(b)
			v = uint64(w)
		}
		if n <= 0 {
			return dst, errCorrupt
		}
		dst = append(dst, v)
		b = b[n:]
	}
	return dst, nil
}

// decodeCountsV1 appends to dst, as a row (each count followed by a zero
// weight), the schema-1 counts in b: a uvarint per class index, trailing
// zeros dropped.
func decodeCountsV1(dst []uint64, b []byte) ([]uint64, error) {
	for len(b) > 0 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return dst, errCorrupt
		}
		dst = append(dst, v, 0)
		b = b[n:]
	}
	return dst, nil
}

// totals is a user's totals as stored, read once per Apply and cached for
// readers: the totals key and, beside it, the samples' keys.
type totals struct {
	messages   []uint64 // per class
	tokens     []uint64 // per class
	vocabulary uint64
	samples    store.Samples // shared, never modified
}

// bytes returns about what t takes in memory.
func (t *totals) bytes() int {
	n := 96 + 8*(len(t.messages)+len(t.tokens))
	for _, byClass := range t.samples {
		n += 24
		for _, s := range byClass {
			n += 48 + 16*len(s.Bins)
		}
	}
	return n
}

// appendTotals appends t as uvarints: vocabulary, number of classes n, then
// n pairs of message and token totals.
func appendTotals(dst []byte, t *totals) []byte {
	n := max(len(t.messages), len(t.tokens))
	dst = binary.AppendUvarint(dst, t.vocabulary)
	dst = binary.AppendUvarint(dst, uint64(n))
	for i := range n {
		dst = binary.AppendUvarint(dst, at(t.messages, i))
		dst = binary.AppendUvarint(dst, at(t.tokens, i))
	}
	return dst
}

func decodeTotals(b []byte) (totals, error) {
	var t totals
	var vals [2]uint64
	for i := range vals {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return totals{}, errCorrupt
		}
		vals[i], b = v, b[n:]
	}
	t.vocabulary = vals[0]
	// Each pair takes at least two bytes; checking first keeps a corrupt
	// count from allocating gigabytes.
	if vals[1] > uint64(len(b)/2) {
		return totals{}, errCorrupt
	}
	n := int(vals[1])
	t.messages = make([]uint64, n)
	t.tokens = make([]uint64, n)
	for i := range n {
		for _, dst := range []*uint64{&t.messages[i], &t.tokens[i]} {
			v, k := binary.Uvarint(b)
			if k <= 0 {
				return totals{}, errCorrupt
			}
			*dst, b = v, b[k:]
		}
	}
	if len(b) != 0 {
		return totals{}, errCorrupt
	}
	return t, nil
}

// seenRec is a seen record: the index of the class a message is trained
// as, -1 for none, the steps its training added, a head and a body step
// per class index, trailing zero pairs dropped, and its values. Its steps
// and values are never modified once made, so records may share them.
type seenRec struct {
	class  int
	steps  []int64
	values []store.Value
}

func (r seenRec) equal(o seenRec) bool {
	return r.class == o.class && slices.Equal(r.steps, o.steps) && slices.Equal(r.values, o.values)
}

// appendSeen appends a seen record of schema 3: the class index and the
// number of steps as uvarints, the steps as zigzag varints, then each
// value's measure and level as uvarints.
func appendSeen(dst []byte, r seenRec) []byte {
	dst = binary.AppendUvarint(dst, uint64(r.class))
	n := len(r.steps) &^ 1
	for n > 0 && r.steps[n-1] == 0 && r.steps[n-2] == 0 {
		n -= 2
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	for _, s := range r.steps[:n] {
		dst = binary.AppendVarint(dst, s)
	}
	for _, v := range r.values {
		dst = binary.AppendUvarint(dst, uint64(v.Measure))
		dst = binary.AppendUvarint(dst, uint64(v.Level))
	}
	return dst
}

// decodeSeen decodes a seen record of schema 3, appending its steps to
// steps; the caller checks the class index and the number of steps
// against its class list. Its values must be valid ones.
func decodeSeen(b []byte, steps []int64) (seenRec, error) {
	c, n := binary.Uvarint(b)
	if n <= 0 || c > math.MaxInt32 {
		return seenRec{}, errCorrupt
	}
	b = b[n:]
	ns, n := binary.Uvarint(b)
	if n <= 0 || ns%2 != 0 || ns > uint64(len(b)) {
		return seenRec{}, errCorrupt
	}
	b = b[n:]
	start := len(steps)
	for range ns {
		s, n := binary.Varint(b)
		if n <= 0 {
			return seenRec{}, errCorrupt
		}
		steps = append(steps, s)
		b = b[n:]
	}
	r := seenRec{class: int(c)}
	if len(steps) > start {
		r.steps = steps[start:len(steps):len(steps)]
	}
	for len(b) > 0 {
		m, k := binary.Uvarint(b)
		if k <= 0 {
			return seenRec{}, errCorrupt
		}
		b = b[k:]
		l, k := binary.Uvarint(b)
		if k <= 0 || m >= store.MaxMeasures || l >= store.MaxLevels {
			return seenRec{}, errCorrupt
		}
		b = b[k:]
		r.values = append(r.values, store.Value{Measure: uint8(m), Level: uint16(l)})
	}
	if err := store.ValidValues(r.values); err != nil {
		return seenRec{}, fmt.Errorf("%w: %w", errCorrupt, err)
	}
	return r, nil
}

// decodeSeenV2 decodes a seen record of schema 2 (or of schema 1, only the
// class index, which reads as one whose steps are all zero, which is what
// it added), appending its steps to steps.
func decodeSeenV2(b []byte, steps []int64) (seenRec, error) {
	c, n := binary.Uvarint(b)
	if n <= 0 || c > math.MaxInt32 {
		return seenRec{}, errCorrupt
	}
	b = b[n:]
	start := len(steps)
	for len(b) > 0 {
		s, n := binary.Varint(b)
		if n <= 0 {
			return seenRec{}, errCorrupt
		}
		steps = append(steps, s)
		b = b[n:]
	}
	if (len(steps)-start)%2 != 0 {
		return seenRec{}, fmt.Errorf("%w: a head step without its body step", errCorrupt)
	}
	r := seenRec{class: int(c)}
	if len(steps) > start {
		r.steps = steps[start:len(steps):len(steps)]
	}
	return r, nil
}

// meta is the store-wide record: JSON, since it is tiny, read once at Open
// and worth being readable in a key dump.
type meta struct {
	Schema  int      `json:"schema"`
	Classes []string `json:"classes"`
}

func encodeMeta(m meta) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode meta record: %w", err)
	}
	return b, nil
}

func decodeMeta(b []byte) (meta, error) {
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return meta{}, fmt.Errorf("%w: meta record: %w", ErrSchema, err)
	}
	seen := make(map[string]bool, len(m.Classes))
	for _, c := range m.Classes {
		if err := store.ValidClass(c); err != nil {
			return meta{}, fmt.Errorf("%w: meta record: %w", ErrSchema, err)
		}
		if seen[c] {
			return meta{}, fmt.Errorf("%w: meta record: class %q twice", ErrSchema, c)
		}
		seen[c] = true
	}
	return m, nil
}

func at(s []uint64, i int) uint64 {
	if i < len(s) {
		return s[i]
	}
	return 0
}
