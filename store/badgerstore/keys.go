package badgerstore

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
)

// Key kinds: the first byte of every key. A user's keys are the kind, the
// user name, a 0x00 byte and the rest; ValidUser admits no 0x00, so the
// separator ends the name for certain and "a" can never reach "ab"'s keys.
// Kinds are printable so that a key dump is readable.
const (
	kindMeta   = 'm' // "m": the store's schema version and class list (JSON)
	kindTotals = 'u' // "u" user 0x00: the user's totals (encodeTotals)
	kindToken  = 't' // "t" user 0x00 hash(8, big-endian): counts (appendCounts)
	kindSeen   = 's' // "s" user 0x00 digest(32): class index (uvarint)
)

// schemaVersion is written into the meta key. Bump it on any change of
// key layout or value encoding, and teach Open to convert older stores.
const schemaVersion = 1

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

// errCorrupt marks a stored value that does not decode; it is reported as
// store.ErrInconsistent, which is what a caller can act on (run Check).
var errCorrupt = fmt.Errorf("%w: undecodable value", store.ErrInconsistent)

// appendCounts appends one token's per-class counts as uvarints indexed by
// class, trailing zeros dropped: a token of a two-class model seen a few
// times takes two or three bytes.
func appendCounts(dst []byte, c []uint64) []byte {
	n := len(c)
	for n > 0 && c[n-1] == 0 {
		n--
	}
	for _, v := range c[:n] {
		dst = binary.AppendUvarint(dst, v)
	}
	return dst
}

// decodeCounts appends the counts encoded in b to dst.
func decodeCounts(dst []uint64, b []byte) ([]uint64, error) {
	for len(b) > 0 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return dst, errCorrupt
		}
		dst = append(dst, v)
		b = b[n:]
	}
	return dst, nil
}

// totals is a user's totals as stored: one key, read once per Apply and
// cached for readers.
type totals struct {
	messages   []uint64 // per class
	tokens     []uint64 // per class
	vocabulary uint64
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

func appendSeen(dst []byte, class int) []byte { return binary.AppendUvarint(dst, uint64(class)) }

// decodeSeen decodes a seen record's class index; the caller checks it
// against the class list.
func decodeSeen(b []byte) (uint64, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 || n != len(b) || v > math.MaxInt32 {
		return 0, errCorrupt
	}
	return v, nil
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
