package redisstore

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/storetest"
)

func TestKeys(t *testing.T) {
	k := keys{prefix: "spamd:"}
	tests := []struct {
		key  string
		want parsed
	}{
		{k.meta(), parsed{kind: 'm'}},
		{k.totals(""), parsed{kind: 't'}},
		{k.samples("al"), parsed{kind: 'd', user: "al"}},
		{k.totals("alice@example.org"), parsed{kind: 't', user: "alice@example.org"}},
		{k.seen("a"), parsed{kind: 's', user: "a"}},
		{k.bucket("a", 1), parsed{kind: 'b', user: "a", bucket: 1}},
		{k.bucket("a.b", 0x1f3), parsed{kind: 'b', user: "a.b", bucket: 0x1f3}},
		{"other:{a:}t", parsed{}},
		{"spamd:{a:}b:zz", parsed{}},
		{"spamd:{a:}b:0", parsed{}},
		{"spamd:{a b:}t", parsed{}},
		{"spamd:{a:}x", parsed{}},
	}
	for _, tt := range tests {
		if got := k.parse(tt.key); got != tt.want {
			t.Errorf("parse(%q) = %+v, want %+v", tt.key, got, tt.want)
		}
	}
	// Every user's keys share one hash tag, so one Cluster slot.
	if got := k.bucket("", 5); got != "spamd:{:}b:5" {
		t.Errorf("bucket key of the global model = %q", got)
	}
}

// TestLayout checks the linear hashing the scripts mirror: every token is
// in exactly one bucket of a layout, each bucket holds its tokens' top
// bits, and splitting a bucket moves its tokens to its two children.
func TestLayout(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	hashes := make([]bow.Hash, 2000)
	for i := range hashes {
		hashes[i] = bow.Hash(rng.Uint64())
	}
	hashes = append(hashes, 0, math.MaxUint64)
	l := layout{}
	for range 300 {
		var buckets []uint64
		l.each(func(b uint64) bool { buckets = append(buckets, b); return true })
		if uint64(len(buckets)) != l.buckets() {
			t.Fatalf("%+v: each lists %d buckets, buckets says %d", l, len(buckets), l.buckets())
		}
		for _, b := range buckets {
			if !l.has(b) {
				t.Fatalf("%+v: bucket %x listed but not had", l, b)
			}
		}
		for _, h := range hashes {
			b := l.bucket(h)
			if !l.has(b) || !holds(b, h) {
				t.Fatalf("%+v: token %x in bucket %x, which the layout has %v and which holds it %v", l, h, b, l.has(b), holds(b, h))
			}
		}
		// Split the next bucket: its tokens go to its children.
		next := l
		if next.split++; next.split == 1<<next.level {
			next.level, next.split = next.level+1, 0
		}
		parent := uint64(1)<<l.level + l.split
		for _, h := range hashes {
			if b := l.bucket(h); b == parent {
				if nb := next.bucket(h); nb>>1 != parent {
					t.Fatalf("%+v: token %x of bucket %x went to %x", l, h, parent, nb)
				}
			} else if next.bucket(h) != b {
				t.Fatalf("%+v: token %x moved from %x, which was not split", l, h, b)
			}
		}
		if next.has(parent) {
			t.Fatalf("%+v: split bucket %x still had", next, parent)
		}
		l = next
	}
}

// TestRowEncoding checks that rows decode to what was encoded, in the
// short form where it fits and in varints otherwise; the scripts' Lua
// encoding is checked against this one by every test that trains.
func TestRowEncoding(t *testing.T) {
	neg := func(w int64) uint64 { return uint64(w) }
	for _, tt := range []struct {
		row   []uint64
		short bool
		size  int
	}{
		{[]uint64{1}, true, 2},
		{[]uint64{3, neg(-65536), 0, 12}, true, 6},
		{[]uint64{0, 0, 0, neg(-1)}, true, 2},
		{[]uint64{1<<24 - 1, neg(-1 << 23), 255, 1<<23 - 1}, true, 11},
		{[]uint64{1 << 24}, false, 5},
		{[]uint64{0, neg(1 << 23)}, false, 6},
		{[]uint64{1, 0, 0, 0, 1}, false, 6},
		{[]uint64{1 << 40, neg(-(1 << 50)), 7, neg(1 << 50)}, false, 0},
		{[]uint64{1<<24 - 1, 1<<23 - 1, 1<<24 - 1, 1<<23 - 1}, false, 0}, // header 0xff
	} {
		b := appendRow(nil, tt.row)
		if short := b[0] != rowVarint; short != tt.short || tt.size > 0 && len(b) != tt.size {
			t.Errorf("appendRow(%v) = %x: short %v, %d bytes; want %v, %d", tt.row, b, short, len(b), tt.short, tt.size)
		}
		got, err := decodeRow(nil, string(b))
		if err != nil || !slices.Equal(got, tt.row) {
			t.Errorf("decodeRow(appendRow(%v)) = %v, %v", tt.row, got, err)
		}
	}
	for _, bad := range []string{"", "\x01", "\x01\x01\x01", "\xff\x80", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"} {
		if _, err := decodeRow(nil, bad); err == nil {
			t.Errorf("decodeRow(%x) accepted", bad)
		}
	}
}

func TestSeenRecords(t *testing.T) {
	index := map[string]int{"spam": 0, "ham": 1, "x": 2}
	steps := []store.Step{{Class: "ham", Head: -7, Body: 2}, {Class: "spam", Head: 5}}
	s := formatSteps(steps, index)
	if s != "5 0 -7 2" {
		t.Errorf("formatSteps = %q", s)
	}
	if s := formatSteps([]store.Step{{Class: "x"}}, index); s != "" {
		t.Errorf("formatSteps of zero steps = %q", s)
	}
	rec, err := parseSeen("1 " + s)
	if err != nil || rec.class != 1 || !slices.Equal(rec.steps, []int64{5, 0, -7, 2}) {
		t.Errorf("parseSeen = %+v, %v", rec, err)
	}
	for _, bad := range []string{"", "x", "-1", "1 2", "1;", "1;3", "1;3 x", "1;64 1", "1;1 1024", "1;2 1 1 1", "1 2;1 1"} {
		if _, err := parseSeen(bad); err == nil {
			t.Errorf("parseSeen(%q) accepted", bad)
		}
	}
	values := []store.Value{{Measure: 0, Level: 412}, {Measure: 10, Level: 3}}
	v := formatSeen(1, s, values)
	if v != "1 5 0 -7 2;0 412 10 3" {
		t.Errorf("formatSeen = %q", v)
	}
	rec, err = parseSeen(v)
	if err != nil || rec.class != 1 || !slices.Equal(rec.steps, []int64{5, 0, -7, 2}) || !slices.Equal(rec.values, values) {
		t.Errorf("parseSeen(%q) = %+v, %v", v, rec, err)
	}
	if v := formatSeen(0, "", nil); v != "0" {
		t.Errorf("formatSeen of a record with neither steps nor values = %q", v)
	}
}

func TestSamplesHash(t *testing.T) {
	fv := map[string]string{
		"1.0.7": "3", "1.0.1000": "1", "1.0.n": "4", "1.0.s": "1021", "1.0.q": "1000147",
		"0.3.9": "1", "0.3.n": "1", "0.3.s": "9", "0.3.q": "81",
	}
	got, err := parseSamples(fv)
	if err != nil {
		t.Fatal(err)
	}
	want := store.Samples{0: {{}, storetest.SampleOf(7, 7, 7, 1000)}, 3: {storetest.SampleOf(9)}}
	if d := got.Differences(want, nil); len(d) > 0 {
		t.Errorf("parseSamples: %q", d)
	}
	for _, bad := range []map[string]string{
		{"1.0.7": "3"},               // no moments
		{"1.0.7": "0", "1.0.n": "0"}, // a zero kept
		{"1.0": "1"},                 // malformed field
		{"x.0.n": "1"},               // malformed class
		{"1.64.n": "1"},              // measure off the grid
		{"1.0.1024": "1", "1.0.n": "1", "1.0.s": "1024", "1.0.q": "1048576"}, // level off the grid
		{"1.0.7": "x"}, // not a number
		{"1.0.7": "1", "1.0.n": "1", "1.0.s": "7", "1.0.q": "48"}, // moments off
	} {
		if _, err := parseSamples(bad); !errors.Is(err, store.ErrInconsistent) {
			t.Errorf("parseSamples(%v): %v, want ErrInconsistent", bad, err)
		}
	}
}
