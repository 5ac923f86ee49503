package redisstore

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
)

// Key suffixes after a user's base, P{user:}. Short, since Redis keeps
// every key name in memory, and readable in redis-cli.
const (
	suffixTotals  = "t"  // hash: the user's totals and bucket layout
	suffixSeen    = "s"  // hash: digest (32 bytes) → seen record (text)
	suffixSamples = "d"  // hash: "CLASS.MEASURE.LEVEL" → count, "CLASS.MEASURE.n|s|q" → moments
	suffixBucket  = "b:" // hash, followed by the bucket's number in hex: token hash (8 bytes) → row
	metaSuffix    = "meta"
)

// schemaVersion is the layout of keys and values this build reads, kept
// in the meta hash. Schema 2 added the measures' values to the seen
// records and the samples hash; schema 3 the last day trained to the
// token rows and the totals, the day and the mark to the seen records,
// and the forgotten messages to the totals. A store of an older schema is
// read as it is: what it lacks reads as empty, the samples and values of
// schema 1, the forgotten messages, and the days, which read as the day
// the store was upgraded (the meta hash's "upgraded"), so that nothing
// old looks ancient to Prune the day after an upgrade. Open marks it of
// schema 3.
const schemaVersion = "3"

// oldSchemas are the schemas Open upgrades.
var oldSchemas = []string{"1", "2"}

// keys names the keys of one store: every one starts with the prefix.
type keys struct{ prefix string }

// base returns the part every key of user's model starts with: the
// prefix and the hash tag {user:}, which puts all of them in one Cluster
// slot. The colon keeps the global model's tag, {:}, from being the bare
// {} Cluster ignores.
func (k keys) base(user string) string { return k.prefix + "{" + user + ":}" }

func (k keys) totals(user string) string  { return k.base(user) + suffixTotals }
func (k keys) seen(user string) string    { return k.base(user) + suffixSeen }
func (k keys) samples(user string) string { return k.base(user) + suffixSamples }
func (k keys) meta() string               { return k.prefix + metaSuffix }
func (k keys) bucket(user string, b uint64) string {
	return k.base(user) + suffixBucket + strconv.FormatUint(b, 16)
}

// parsed is what a key names.
type parsed struct {
	kind   byte // 'm' meta, 't' totals, 's' seen, 'd' samples, 'b' bucket, 0 unknown
	user   string
	bucket uint64
}

// parse reads a key of this store, as invalidation messages name them.
func (k keys) parse(key string) parsed {
	rest, ok := strings.CutPrefix(key, k.prefix)
	if !ok {
		return parsed{}
	}
	if rest == metaSuffix {
		return parsed{kind: 'm'}
	}
	if !strings.HasPrefix(rest, "{") {
		return parsed{}
	}
	user, rest, ok := strings.Cut(rest[1:], ":}")
	if !ok || store.ValidUser(user) != nil {
		return parsed{}
	}
	switch {
	case rest == suffixTotals:
		return parsed{kind: 't', user: user}
	case rest == suffixSeen:
		return parsed{kind: 's', user: user}
	case rest == suffixSamples:
		return parsed{kind: 'd', user: user}
	case strings.HasPrefix(rest, suffixBucket):
		b, err := strconv.ParseUint(rest[len(suffixBucket):], 16, 64)
		if err != nil || b == 0 {
			return parsed{}
		}
		return parsed{kind: 'b', user: user, bucket: b}
	}
	return parsed{}
}

// field returns a token's field in its bucket: its hash, 8 bytes big-endian.
func field(h bow.Hash) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(h))
	return string(b[:])
}

// layout says which bucket holds a token: linear hashing on the top bits
// of the token's hash. At level L there are 2^L buckets of the top L bits;
// the first split of them have been split in two, by the next bit, into
// buckets of level L+1. Bucket x of level l is numbered 2^l + x, so that a
// number names the same bucket at any layout, and the children of bucket
// n are 2n and 2n+1.
//
// Redis's apply script splits the bucket at split once the user's rows
// outnumber load times the buckets, so buckets grow from one, for a new
// user, to as many as the model needs, a bucket at a time, each kept to
// some 24 to 96 tokens: a hash that small stays listpack-encoded, where a
// token costs its bytes and little more.
type layout struct {
	level uint8
	split uint64
}

// maxLevel bounds the level, so that bucket numbers stay exact in the Lua
// scripts' doubles: 2^32 buckets, far past any model.
const maxLevel = 31

// bucket returns the number of the bucket holding token h.
func (l layout) bucket(h bow.Hash) uint64 {
	x := uint64(0)
	if l.level > 0 {
		x = uint64(h) >> (64 - l.level)
	}
	if x < l.split {
		return 1<<(l.level+1) | uint64(h)>>(63-l.level)
	}
	return 1<<l.level | x
}

// buckets returns the number of buckets.
func (l layout) buckets() uint64 { return 1<<l.level + l.split }

// each calls f with the number of every bucket.
func (l layout) each(f func(b uint64) bool) {
	for x := range uint64(1) << l.level {
		if x < l.split {
			if !f(1<<(l.level+1)|2*x) || !f(1<<(l.level+1)|2*x+1) {
				return
			}
		} else if !f(1<<l.level | x) {
			return
		}
	}
}

// has reports whether bucket b exists in the layout.
func (l layout) has(b uint64) bool {
	if b == 0 {
		return false
	}
	lv := uint8(bits.Len64(b) - 1)
	x := b &^ (1 << lv)
	switch lv {
	case l.level:
		return x >= l.split
	case l.level + 1:
		return x < 2*l.split
	}
	return false
}

// holds reports whether bucket b is where token h belongs at some layout:
// whether h's top bits are b's.
func holds(b uint64, h bow.Hash) bool {
	lv := bits.Len64(b) - 1
	if lv == 0 {
		return true
	}
	return uint64(h)>>(64-lv) == b&^(1<<lv)
}

// maxExact is the largest magnitude a count, a weight or a total may
// reach: the Lua scripts compute in doubles, exact up to 2^53.
const maxExact = 1 << 53

// errCorrupt marks a stored value that does not decode.
var errCorrupt = fmt.Errorf("%w: undecodable value", store.ErrInconsistent)

// A row holds a count and a weight per class index, laid out as
// store.Counts, and the last day the token was trained on. A row of at
// most two classes whose counts fit in 3 bytes unsigned and weights in 3
// bytes signed, nearly every row, is a header byte holding the widths of
// its four values in bytes, 2 bits each, low bits first, then the values
// big-endian, zeros taking no byte, then the day big-endian in as few
// bytes as hold it, 1 to 4: the scripts unpack and pack it with one call
// of Lua's struct library, several times faster than varints byte by byte
// in Lua, and it is about as small (a token seen a few times with a
// weight of about one, trained on a day of this century: 1+1+3+2 or
// 1+1+3+1+3+2 bytes). Any other row is the byte 0xff, which no header of
// the first kind is, then the values as varints (counts unsigned, weights
// zigzag, trailing zeros dropped), then the day as a varint, then the byte
// 0x80, with which no varint ends.
//
// A row of schema 2 has no day: nothing after its values, or no 0x80 at
// its end. It reads as trained on the day the store was upgraded (see
// Store.upgraded), and keeps no day until training writes it again. A
// reader of schema 2 finds a row of schema 3 too long, or cut off in a
// varint, and refuses it rather than take its day for a count.
const rowVarint = 0xff

// appendRow appends row, last trained on day, as the scripts write it.
func appendRow(dst []byte, row []uint64, day store.Day) []byte {
	n := len(row)
	for n > 0 && row[n-1] == 0 {
		n--
	}
	if n <= 4 {
		var v [4]uint64
		copy(v[:], row[:n])
		var w [4]int
		ok := true
		for i, x := range v {
			if w[i] = width(x, i%2 == 1); w[i] > 3 {
				ok = false
			}
		}
		if h := w[0] | w[1]<<2 | w[2]<<4 | w[3]<<6; ok && h != rowVarint {
			dst = append(dst, byte(h))
			for i, x := range v {
				for b := w[i] - 1; b >= 0; b-- {
					dst = append(dst, byte(x>>(8*b)))
				}
			}
			for b := max(width(uint64(day), false), 1) - 1; b >= 0; b-- {
				dst = append(dst, byte(day>>(8*b)))
			}
			return dst
		}
	}
	dst = append(dst, rowVarint)
	for i, v := range row[:n] {
		if i%2 == 0 {
			dst = binary.AppendUvarint(dst, v)
		} else {
			dst = binary.AppendVarint(dst, int64(v))
		}
	}
	dst = binary.AppendUvarint(dst, uint64(day))
	return append(dst, 0x80)
}

// width returns the bytes value x takes in a row's short form, 4 for
// more than it allows.
func width(x uint64, signed bool) int {
	if !signed {
		switch {
		case x == 0:
			return 0
		case x < 1<<8:
			return 1
		case x < 1<<16:
			return 2
		case x < 1<<24:
			return 3
		}
		return 4
	}
	switch v := int64(x); {
	case v == 0:
		return 0
	case v >= -1<<7 && v < 1<<7:
		return 1
	case v >= -1<<15 && v < 1<<15:
		return 2
	case v >= -1<<23 && v < 1<<23:
		return 3
	}
	return 4
}

// decodeRow appends the row encoded in b to dst, trailing zeros dropped,
// and returns its day; dated is false for a row of schema 2, which has
// none.
func decodeRow(dst []uint64, b string) (row []uint64, day store.Day, dated bool, err error) {
	if len(b) == 0 {
		return dst, 0, false, errCorrupt
	}
	start := len(dst)
	if h := b[0]; h != rowVarint {
		b = b[1:]
		for i := range 4 {
			w := int(h>>(2*i)) & 3
			if len(b) < w {
				return dst, 0, false, errCorrupt
			}
			var x uint64
			for _, c := range []byte(b[:w]) {
				x = x<<8 | uint64(c)
			}
			if i%2 == 1 && w > 0 && x&(1<<(8*w-1)) != 0 {
				x |= ^uint64(0) << (8 * w) // sign-extend the weight
			}
			dst = append(dst, x)
			b = b[w:]
		}
		if len(b) > 4 {
			return dst, 0, false, errCorrupt
		}
		for _, c := range []byte(b) {
			day = day<<8 | store.Day(c)
		}
		for len(dst) > start && dst[len(dst)-1] == 0 {
			dst = dst[:len(dst)-1]
		}
		return dst, day, len(b) > 0, nil
	}
	b = b[1:]
	dated = len(b) > 0 && b[len(b)-1] == 0x80
	if dated {
		b = b[:len(b)-1]
	}
	for i := 0; len(b) > 0; i++ {
		var u uint64
		var n int
		// binary.Uvarint takes bytes; a short loop over the string saves
		// converting it.
		for s := uint(0); ; s += 7 {
			if n == len(b) || s > 63 {
				return dst, 0, false, errCorrupt
			}
			c := b[n]
			n++
			u |= uint64(c&0x7f) << s
			if c < 0x80 {
				break
			}
		}
		if dated && n == len(b) {
			if u > 1<<32-1 {
				return dst, 0, false, errCorrupt
			}
			return dst, store.Day(u), true, nil
		}
		if i%2 == 1 {
			u = uint64(int64(u>>1) ^ -int64(u&1))
		}
		dst = append(dst, u)
		b = b[n:]
	}
	if dated {
		return dst, 0, false, errCorrupt // no day before the 0x80
	}
	return dst, 0, false, nil
}

// totals is a user's totals hash as read.
type totals struct {
	version    uint64
	layout     layout
	rows       uint64 // fields in all buckets
	vocabulary uint64
	messages   []uint64 // per class index
	tokens     []uint64 // per class index
	// lastDay is the latest day trained; dayKnown is false for a model
	// of schema 2 not trained since the upgrade, which has none.
	lastDay  store.Day
	dayKnown bool
	// forgotten counts per class index the seen records Prune deleted.
	forgotten []uint64
}

// totalsFields are the fields of the totals hash, in the order the
// scripts and readers ask for them.
var totalsFields = []string{"ver", "lvl", "spl", "rows", "voc", "msg", "tok", "day", "fgt"}

// parseTotals reads the values of totalsFields; a missing one is zero.
func parseTotals(vals []string, present []bool) (*totals, error) {
	if len(vals) != len(totalsFields) {
		return nil, fmt.Errorf("%w: totals of %d fields", store.ErrInconsistent, len(vals))
	}
	num := func(i int) (uint64, error) {
		if !present[i] || vals[i] == "" {
			return 0, nil
		}
		v, err := strconv.ParseUint(vals[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: totals field %s = %q", store.ErrInconsistent, totalsFields[i], vals[i])
		}
		return v, nil
	}
	var t totals
	var err error
	var lvl uint64
	for i, dst := range []*uint64{&t.version, &lvl, &t.layout.split, &t.rows, &t.vocabulary} {
		if *dst, err = num(i); err != nil {
			return nil, err
		}
	}
	if lvl > maxLevel || t.layout.split >= 1<<lvl && lvl > 0 || lvl == 0 && t.layout.split > 0 {
		return nil, fmt.Errorf("%w: bucket layout level %d split %d", store.ErrInconsistent, lvl, t.layout.split)
	}
	t.layout.level = uint8(lvl)
	if t.messages, err = parseList(vals[5], present[5]); err != nil {
		return nil, err
	}
	if t.tokens, err = parseList(vals[6], present[6]); err != nil {
		return nil, err
	}
	day, err := num(7)
	if err != nil {
		return nil, err
	}
	if day > 1<<32-1 {
		return nil, fmt.Errorf("%w: totals field day = %d", store.ErrInconsistent, day)
	}
	t.lastDay, t.dayKnown = store.Day(day), present[7]
	if t.forgotten, err = parseList(vals[8], present[8]); err != nil {
		return nil, err
	}
	return &t, nil
}

// parseList reads a space-separated list of decimal numbers.
func parseList(s string, present bool) ([]uint64, error) {
	if !present || s == "" {
		return nil, nil
	}
	f := strings.Fields(s)
	out := make([]uint64, len(f))
	for i, x := range f {
		v, err := strconv.ParseUint(x, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: totals list %q", store.ErrInconsistent, s)
		}
		out[i] = v
	}
	return out, nil
}

// seenRec is a seen record: the index of the class a message is trained
// as, the steps its training added, a head and a body step per class
// index, its values, the day it was trained on and its mark. It is kept as
// text, "CLASS [HEAD BODY]...", trailing zero pairs dropped, then ";" and
// each value's measure and level, "MEASURE LEVEL...", then ";" and the
// day, in decimal, and the mark unless it is 0, in hex: "0 5 -3;2 40;20417
// 9f3ac0de11" (a record per message can afford readability). A record of
// schema 1 ends after its steps; one of schema 2 has its values after a
// ";" if it has any, and neither day nor mark: it reads as trained on the
// day the store was upgraded, with mark 0.
type seenRec struct {
	class  int
	steps  []int64
	values []store.Value
	day    store.Day
	dated  bool // false for a record of schema 1 or 2
	mark   uint64
}

func parseSeen(s string) (seenRec, error) {
	parts := strings.SplitN(s, ";", 3)
	var values []store.Value
	if len(parts) > 1 {
		vs := parts[1]
		f := strings.Fields(vs)
		// Schema 2 wrote the ";" only before values.
		if len(f) == 0 && len(parts) == 2 || len(f)%2 != 0 {
			return seenRec{}, fmt.Errorf("%w: seen record %q", store.ErrInconsistent, s)
		}
		for i := 0; i < len(f); i += 2 {
			m, err1 := strconv.ParseUint(f[i], 10, 8)
			l, err2 := strconv.ParseUint(f[i+1], 10, 16)
			if err1 != nil || err2 != nil {
				return seenRec{}, fmt.Errorf("%w: seen record values %q", store.ErrInconsistent, vs)
			}
			values = append(values, store.Value{Measure: uint8(m), Level: uint16(l)})
		}
		if err := store.ValidValues(values); err != nil {
			return seenRec{}, fmt.Errorf("%w: seen record values %q: %w", store.ErrInconsistent, vs, err)
		}
	}
	r, err := parseSteps(parts[0])
	if err != nil {
		return seenRec{}, err
	}
	r.values = values
	if len(parts) == 3 {
		f := strings.Fields(parts[2])
		if len(f) < 1 || len(f) > 2 {
			return seenRec{}, fmt.Errorf("%w: seen record %q: day and mark", store.ErrInconsistent, s)
		}
		d, err := strconv.ParseUint(f[0], 10, 32)
		if err != nil {
			return seenRec{}, fmt.Errorf("%w: seen record %q: day", store.ErrInconsistent, s)
		}
		r.day, r.dated = store.Day(d), true
		if len(f) == 2 {
			if r.mark, err = strconv.ParseUint(f[1], 16, 64); err != nil {
				return seenRec{}, fmt.Errorf("%w: seen record %q: mark", store.ErrInconsistent, s)
			}
		}
	}
	return r, nil
}

// parseSteps reads the class and steps of a seen record.
func parseSteps(s string) (seenRec, error) {
	f := strings.Fields(s)
	if len(f) == 0 || len(f)%2 == 0 {
		return seenRec{}, fmt.Errorf("%w: seen record %q", store.ErrInconsistent, s)
	}
	c, err := strconv.Atoi(f[0])
	if err != nil || c < 0 {
		return seenRec{}, fmt.Errorf("%w: seen record %q", store.ErrInconsistent, s)
	}
	r := seenRec{class: c}
	for _, x := range f[1:] {
		v, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return seenRec{}, fmt.Errorf("%w: seen record %q", store.ErrInconsistent, s)
		}
		r.steps = append(r.steps, v)
	}
	return r, nil
}

// formatSteps returns the steps of an op as a seen record keeps them: by
// class index, a head and a body step each, the last step given for a
// class winning, trailing zero pairs dropped.
func formatSteps(steps []store.Step, index map[string]int) string {
	n := 0
	for _, st := range steps {
		n = max(n, 2*(index[st.Class]+1))
	}
	v := make([]int64, n)
	for _, st := range steps {
		c := index[st.Class]
		v[2*c], v[2*c+1] = st.Head, st.Body
	}
	for n > 0 && v[n-1] == 0 && v[n-2] == 0 {
		n -= 2
	}
	var b strings.Builder
	for i, x := range v[:n] {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatInt(x, 10))
	}
	return b.String()
}

// formatValues returns values as a seen record keeps them after its ";",
// and as the apply script takes them: "MEASURE LEVEL..." in decimal.
func formatValues(vs []store.Value) string {
	var b []byte
	for i, v := range vs {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendUint(b, uint64(v.Measure), 10)
		b = append(b, ' ')
		b = strconv.AppendUint(b, uint64(v.Level), 10)
	}
	return string(b)
}

// formatSeen returns a seen record as the seen hash keeps it.
func formatSeen(class int, steps string, vs []store.Value, day store.Day, mark uint64) string {
	v := strconv.Itoa(class)
	if steps != "" {
		v += " " + steps
	}
	return v + ";" + formatValues(vs) + ";" + formatDayMark(day, mark)
}

// formatDayMark returns the end of a seen record after its last ";", as
// the apply script takes it: "DAY[ MARK]".
func formatDayMark(day store.Day, mark uint64) string {
	v := strconv.FormatUint(uint64(day), 10)
	if mark != 0 {
		v += " " + strconv.FormatUint(mark, 16)
	}
	return v
}

// sampleField names a field of the samples hash: a level's count, or
// with what "n", "s" or "q", a moment.
func sampleField(class int, measure uint8, what string) string {
	return strconv.Itoa(class) + "." + strconv.Itoa(int(measure)) + "." + what
}

// parseSamples reads the fields and values of a samples hash into
// samples by measure and class, checking that every count is positive,
// every field well formed and every sample's moments those of its levels.
func parseSamples(fv map[string]string) (store.Samples, error) {
	type acc struct {
		hist       map[uint16]uint64
		n, sum, sq uint64
	}
	byKey := map[[2]int]*acc{}
	get := func(c, m int) *acc {
		a := byKey[[2]int{m, c}]
		if a == nil {
			a = &acc{hist: map[uint16]uint64{}}
			byKey[[2]int{m, c}] = a
		}
		return a
	}
	for f, v := range fv {
		parts := strings.Split(f, ".")
		if len(parts) != 3 {
			return nil, fmt.Errorf("%w: samples field %q", store.ErrInconsistent, f)
		}
		c, err1 := strconv.Atoi(parts[0])
		m, err2 := strconv.ParseUint(parts[1], 10, 8)
		n, err3 := strconv.ParseUint(v, 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || c < 0 || m >= store.MaxMeasures || n == 0 || n > maxExact {
			return nil, fmt.Errorf("%w: samples field %q = %q", store.ErrInconsistent, f, v)
		}
		a := get(c, int(m))
		switch parts[2] {
		case "n":
			a.n = n
		case "s":
			a.sum = n
		case "q":
			a.sq = n
		default:
			l, err := strconv.ParseUint(parts[2], 10, 16)
			if err != nil || l >= store.MaxLevels {
				return nil, fmt.Errorf("%w: samples field %q", store.ErrInconsistent, f)
			}
			a.hist[uint16(l)] = n
		}
	}
	var out store.Samples
	for k, a := range byKey {
		m, c := k[0], k[1]
		h := make([]uint64, store.MaxLevels)
		for l, n := range a.hist {
			h[l] = n
		}
		smp := store.SampleOfHistogram(h)
		if smp.N != a.n || smp.Sum != a.sum || smp.SumSq != a.sq {
			return nil, fmt.Errorf("%w: measure %d of class %d: count %d, sum %d, sum of squares %d, but the levels hold %d, %d, %d",
				store.ErrInconsistent, m, c, a.n, a.sum, a.sq, smp.N, smp.Sum, smp.SumSq)
		}
		for len(out) <= m {
			out = append(out, nil)
		}
		for len(out[m]) <= c {
			out[m] = append(out[m], store.Sample{})
		}
		out[m][c] = smp
	}
	return out, nil
}

// appendBag appends the bag as the apply script reads it: 12 bytes a
// feature, its hash and its count, both big-endian.
func appendBag(dst []byte, bag bow.Bag) []byte {
	counts := bag.Counts()
	for i, h := range bag.Hashes() {
		dst = binary.BigEndian.AppendUint64(dst, uint64(h))
		dst = binary.BigEndian.AppendUint32(dst, counts[i])
	}
	return dst
}
