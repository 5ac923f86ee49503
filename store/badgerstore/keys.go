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
	kindToken  = 'T' // "T" user 0x00 hash(8, big-endian): a token's day and row (appendRow)
	kindSeen   = 'M' // "M" user 0x00 digest(32): a message's class, day, steps, values and mark (appendSeen)
	// kindSample holds a measure's sample in a class: "h" user 0x00
	// measure(1) class index (uvarint) → appendSample.
	kindSample = 'h'
	// kindBusy marks a user whose model a restore or a delete is
	// writing: "x" user 0x00, no value. Open finishes a delete it finds
	// marked and drops a restore, so that either leaves a whole model or
	// none.
	kindBusy = 'x'
	// kindVoid marks a user whose rows in the sealed file are void, a
	// deleted model's: "v" user 0x00, no value (seal.go).
	kindVoid = 'v'
	// kindTokenV1 held a token's counts in schema 1 (decodeCountsV1).
	// Only converting a store of an older schema and Check still read
	// the kinds of older schemas; a value of any schema is found under
	// its own kind only, so that two can never be mistaken for each
	// other.
	kindTokenV1 = 't'
	// kindSeenV2 held seen records in schemas 1 and 2, class and steps
	// (decodeSeenV2).
	kindSeenV2 = 's'
	// kindTokenV3 held token rows without a day in schemas 2 and 3
	// (decodeRowV3).
	kindTokenV3 = 'r'
	// kindSeenV3 held seen records without a day or a mark in schema 3
	// (decodeSeenV3).
	kindSeenV3 = 'S'
)

// userKinds are the kinds of key a user's model is made of in this
// schema, and oldKinds those that only a conversion cut off may leave.
var (
	userKinds = []byte{kindTotals, kindToken, kindSeen, kindSample}
	oldKinds  = []byte{kindTokenV1, kindSeenV2, kindTokenV3, kindSeenV3}
)

// schemaVersion is written into the meta key. Bump it on any change of
// key layout or value encoding, and teach Open to convert older stores.
// Schema 2 added the weights to the token rows and the steps to the seen
// records; schema 3 the measures' values to the seen records, under a
// kind of their own, and the samples; schema 4 the day each token was
// last trained on to its row, the day and the mark to the seen records,
// and the last day and the forgotten messages to the totals; schema 5 the
// sealed file of token rows (seal.go), which a store of an older schema
// does not have and a build of one would not read; schema 6 that file in
// buckets, under another name, so that a build of schema 5 refuses the
// store for its schema rather than for a file it cannot read.
const schemaVersion = 6

// dayEpoch is the day the days in rows and seen records are counted
// from, as zigzag varints: 2025-01-01, so that every day from 2003 to
// 2047 takes two bytes, where a day counted from 1970 takes three.
const dayEpoch store.Day = 20089

func appendDay(dst []byte, d store.Day) []byte {
	return binary.AppendVarint(dst, int64(d)-int64(dayEpoch))
}

// decodeDay decodes a day from the start of b and returns the rest. The
// day of every row a lookup reads takes two bytes (appendDay), which it
// reads without binary.Varint's loop.
func decodeDay(b []byte) (store.Day, []byte, error) {
	var v int64
	var n int
	if len(b) > 1 && b[0] >= 0x80 && b[1] < 0x80 {
		u := uint64(b[0]&0x7f) | uint64(b[1])<<7
		v, n = int64(u>>1)^-int64(u&1), 2 // zigzag, as binary.Varint
	} else if v, n = binary.Varint(b); n <= 0 {
		return 0, nil, errCorrupt
	}
	d := v + int64(dayEpoch)
	if d < 0 || d > math.MaxUint32 {
		return 0, nil, fmt.Errorf("%w: day %d out of range", errCorrupt, d)
	}
	return store.Day(d), b[n:], nil
}

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

// appendRow appends one token's row of schema 4: the day it was last
// trained on (appendDay), then its values as appendRowV3 lays them out.
// A token of a two-class model seen a few times, with small weights,
// takes six to ten bytes.
func appendRow(dst []byte, day store.Day, row []uint64) []byte {
	return appendRowV3(appendDay(dst, day), row)
}

// decodeRow appends the row of schema 4 encoded in b to dst, and returns
// its day.
func decodeRow(dst []uint64, b []byte) ([]uint64, store.Day, error) {
	day, b, err := decodeDay(b)
	if err != nil {
		return dst, 0, err
	}
	dst, err = decodeRowV3(dst, b)
	return dst, day, err
}

// appendRowV3 appends a token's values, a row of schemas 2 and 3, laid
// out as store.Counts (a count and a weight per class index), trailing
// zeros dropped: counts as uvarints, weights zigzag-encoded, since they
// are as often negative.
func appendRowV3(dst []byte, row []uint64) []byte {
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

// decodeRowV3 appends the values encoded in b by appendRowV3 to dst.
// What it appends may be shorter than the class list; the rest is zero.
// A lookup decodes a row a token, and most of a row's values take one
// byte or two (a weight), and of the rest most three (a weight of a
// token seen often), which it reads without binary.Uvarint's loop.
func decodeRowV3(dst []uint64, b []byte) ([]uint64, error) {
	return decodeRowTail(dst, b, 0)
}

// decodeRowTail is decodeRowV3 of the values of a row from its i-th on,
// those before it decoded already.
func decodeRowTail(dst []uint64, b []byte, i int) ([]uint64, error) {
	// An index into b, not b resliced at every value: a slice's three
	// words updated per value were a sixth of the loop.
	for j := 0; j < len(b); i++ {
		v := uint64(b[j])
		switch {
		case v < 0x80:
			j++
		case j+1 < len(b) && b[j+1] < 0x80:
			v = v&0x7f | uint64(b[j+1])<<7
			j += 2
		case j+2 < len(b) && b[j+2] < 0x80:
			v = v&0x7f | uint64(b[j+1]&0x7f)<<7 | uint64(b[j+2])<<14
			j += 3
		default:
			var n int
			if v, n = binary.Uvarint(b[j:]); n <= 0 {
				return dst, errCorrupt
			}
			j += n
		}
		if i&1 == 1 {
			v = uint64(int64(v>>1) ^ -int64(v&1)) // zigzag, as binary.Varint
		}
		dst = append(dst, v)
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
	messages   []uint64 // per class, forgotten included
	tokens     []uint64 // per class
	forgotten  []uint64 // per class: messages whose seen records Prune deleted
	vocabulary uint64
	// lastDay is the latest day trained on, which no row's day and no
	// seen record's is after: Apply relies on it to know a row's new day
	// without reading its old one.
	lastDay store.Day
	samples store.Samples // shared, never modified
}

// bytes returns about what t takes in memory.
func (t *totals) bytes() int {
	n := 104 + 8*(len(t.messages)+len(t.tokens)+len(t.forgotten))
	for _, byClass := range t.samples {
		n += 24
		for _, s := range byClass {
			n += 48 + 16*len(s.Bins)
		}
	}
	return n
}

// appendTotals appends t as uvarints: vocabulary, number of classes n, n
// pairs of message and token totals, then the last day and n forgotten
// messages. The last two are schema 4's: decodeTotals reads totals
// without them as a schema-3 store wrote them, which the conversion to
// schema 4 rewrites in place.
func appendTotals(dst []byte, t *totals) []byte {
	n := max(len(t.messages), len(t.tokens), len(t.forgotten))
	dst = binary.AppendUvarint(dst, t.vocabulary)
	dst = binary.AppendUvarint(dst, uint64(n))
	for i := range n {
		dst = binary.AppendUvarint(dst, at(t.messages, i))
		dst = binary.AppendUvarint(dst, at(t.tokens, i))
	}
	dst = binary.AppendUvarint(dst, uint64(t.lastDay))
	for i := range n {
		dst = binary.AppendUvarint(dst, at(t.forgotten, i))
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
	if len(b) == 0 {
		return t, nil // schema 3's
	}
	d, k := binary.Uvarint(b)
	if k <= 0 || d > math.MaxUint32 {
		return totals{}, errCorrupt
	}
	t.lastDay, b = store.Day(d), b[k:]
	t.forgotten = make([]uint64, n)
	for i := range n {
		v, k := binary.Uvarint(b)
		if k <= 0 {
			return totals{}, errCorrupt
		}
		t.forgotten[i], b = v, b[k:]
	}
	if len(b) != 0 {
		return totals{}, errCorrupt
	}
	return t, nil
}

// seenRec is a seen record: the index of the class a message is trained
// as, -1 for none, the steps its training added, a head and a body step
// per class index, trailing zero pairs dropped, its values, the day it
// was trained on and its mark (store.Op.Mark). Its steps and values are
// never modified once made, so records may share them.
type seenRec struct {
	class  int
	steps  []int64
	values []store.Value
	day    store.Day
	mark   uint64
}

func (r seenRec) equal(o seenRec) bool {
	return r.class == o.class && slices.Equal(r.steps, o.steps) && slices.Equal(r.values, o.values) && r.day == o.day && r.mark == o.mark
}

// appendSeen appends a seen record of schema 4: the class index as a
// uvarint, the day (appendDay), the number of steps as a uvarint, the
// steps as zigzag varints, the number of values as a uvarint and each
// value's measure and level as uvarints, then the mark as 8 bytes
// big-endian, or nothing for a mark of 0.
func appendSeen(dst []byte, r seenRec) []byte {
	dst = binary.AppendUvarint(dst, uint64(r.class))
	dst = appendDay(dst, r.day)
	dst = appendSteps(dst, r.steps)
	dst = binary.AppendUvarint(dst, uint64(len(r.values)))
	dst = appendValues(dst, r.values)
	if r.mark != 0 {
		dst = binary.BigEndian.AppendUint64(dst, r.mark)
	}
	return dst
}

// appendSteps appends the number of steps, trailing zero pairs dropped,
// as a uvarint and the steps as zigzag varints.
func appendSteps(dst []byte, steps []int64) []byte {
	n := len(steps) &^ 1
	for n > 0 && steps[n-1] == 0 && steps[n-2] == 0 {
		n -= 2
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	for _, s := range steps[:n] {
		dst = binary.AppendVarint(dst, s)
	}
	return dst
}

func appendValues(dst []byte, vs []store.Value) []byte {
	for _, v := range vs {
		dst = binary.AppendUvarint(dst, uint64(v.Measure))
		dst = binary.AppendUvarint(dst, uint64(v.Level))
	}
	return dst
}

// decodeSeen decodes a seen record of schema 4, appending its steps to
// steps; the caller checks the class index and the number of steps
// against its class list. Its values must be valid ones.
func decodeSeen(b []byte, steps []int64) (seenRec, error) {
	c, n := binary.Uvarint(b)
	if n <= 0 || c > math.MaxInt32 {
		return seenRec{}, errCorrupt
	}
	day, b, err := decodeDay(b[n:])
	if err != nil {
		return seenRec{}, err
	}
	r := seenRec{class: int(c), day: day}
	if r.steps, b, err = decodeSteps(b, steps); err != nil {
		return seenRec{}, err
	}
	nv, n := binary.Uvarint(b)
	// A value takes at least two bytes.
	if n <= 0 || nv > uint64(len(b)/2) {
		return seenRec{}, errCorrupt
	}
	if r.values, b, err = decodeValues(b[n:], int(nv)); err != nil {
		return seenRec{}, err
	}
	switch len(b) {
	case 0:
	case 8:
		r.mark = binary.BigEndian.Uint64(b)
		if r.mark == 0 {
			return seenRec{}, fmt.Errorf("%w: a mark of 0 written out", errCorrupt)
		}
	default:
		return seenRec{}, fmt.Errorf("%w: %d bytes after the values", errCorrupt, len(b))
	}
	return r, nil
}

// decodeSteps decodes what appendSteps appended, appending the steps to
// steps, and returns them and the rest of b.
func decodeSteps(b []byte, steps []int64) ([]int64, []byte, error) {
	ns, n := binary.Uvarint(b)
	if n <= 0 || ns%2 != 0 || ns > uint64(len(b)) {
		return nil, nil, errCorrupt
	}
	b = b[n:]
	start := len(steps)
	for range ns {
		s, n := binary.Varint(b)
		if n <= 0 {
			return nil, nil, errCorrupt
		}
		steps = append(steps, s)
		b = b[n:]
	}
	if len(steps) == start {
		return nil, b, nil
	}
	return steps[start:len(steps):len(steps)], b, nil
}

// decodeValues decodes n values (all of b if n < 0), which must be valid
// ones, and returns them and the rest of b.
func decodeValues(b []byte, n int) ([]store.Value, []byte, error) {
	var vs []store.Value
	for i := 0; n < 0 && len(b) > 0 || i < n; i++ {
		m, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, nil, errCorrupt
		}
		b = b[k:]
		l, k := binary.Uvarint(b)
		if k <= 0 || m >= store.MaxMeasures || l >= store.MaxLevels {
			return nil, nil, errCorrupt
		}
		b = b[k:]
		vs = append(vs, store.Value{Measure: uint8(m), Level: uint16(l)})
	}
	if err := store.ValidValues(vs); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errCorrupt, err)
	}
	return vs, b, nil
}

// appendSeenV3 appends a seen record of schema 3: the class index, the
// steps as appendSteps appends them, then each value's measure and level
// as uvarints. Only tests write one now, as an older build did.
func appendSeenV3(dst []byte, r seenRec) []byte {
	dst = binary.AppendUvarint(dst, uint64(r.class))
	dst = appendSteps(dst, r.steps)
	return appendValues(dst, r.values)
}

// decodeSeenV3 decodes a seen record of schema 3, appending its steps to
// steps. It has no day and no mark.
func decodeSeenV3(b []byte, steps []int64) (seenRec, error) {
	c, n := binary.Uvarint(b)
	if n <= 0 || c > math.MaxInt32 {
		return seenRec{}, errCorrupt
	}
	r := seenRec{class: int(c)}
	var err error
	if r.steps, b, err = decodeSteps(b[n:], steps); err != nil {
		return seenRec{}, err
	}
	if r.values, _, err = decodeValues(b, -1); err != nil {
		return seenRec{}, err
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
	// Upgraded is the day the store was converted to schema 4, which the
	// rows and seen records written before, without a day, were given;
	// 0 for a store made in schema 4. A conversion cut off and resumed on
	// a later day goes on with the day it started with.
	Upgraded store.Day `json:"upgraded,omitempty"`
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
