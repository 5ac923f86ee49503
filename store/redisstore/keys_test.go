package redisstore

import (
	"errors"
	"fmt"
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
// short form where it fits and in varints otherwise, with their days, and
// that rows of schema 2, without a day, still decode; the scripts' Lua
// encoding is checked against this one by TestScriptEncoding and every
// test that trains.
func TestRowEncoding(t *testing.T) {
	neg := func(w int64) uint64 { return uint64(w) }
	for _, tt := range []struct {
		row   []uint64
		day   store.Day
		short bool
		size  int
	}{
		{[]uint64{1}, 20417, true, 4},
		{[]uint64{1}, 0, true, 3},
		{[]uint64{1}, 200, true, 3},
		{[]uint64{1}, 1 << 16, true, 5},
		{[]uint64{1}, 1<<32 - 1, true, 6},
		{[]uint64{3, neg(-65536), 0, 12}, 20417, true, 8},
		{[]uint64{0, 0, 0, neg(-1)}, 20417, true, 4},
		{[]uint64{1<<24 - 1, neg(-1 << 23), 255, 1<<23 - 1}, 20417, true, 13},
		{[]uint64{1 << 24}, 20417, false, 5 + 3 + 1},
		{[]uint64{0, neg(1 << 23)}, 0, false, 6 + 1 + 1},
		{[]uint64{1, 0, 0, 0, 1}, 20417, false, 6 + 3 + 1},
		{[]uint64{1 << 40, neg(-(1 << 50)), 7, neg(1 << 50)}, 1<<32 - 1, false, 0},
		{[]uint64{1<<24 - 1, 1<<23 - 1, 1<<24 - 1, 1<<23 - 1}, 20417, false, 0}, // header 0xff
		{[]uint64{1 << 24, 0, 0, 1 << 7}, 1 << 14, false, 0},                    // varints with 0x80 bytes, the day's among them
		{[]uint64{1 << 14, 0, 0, 0, 0, 1 << 6}, 128, false, 0},
	} {
		b := appendRow(nil, tt.row, tt.day)
		if short := b[0] != rowVarint; short != tt.short || tt.size > 0 && len(b) != tt.size {
			t.Errorf("appendRow(%v, %d) = %x: short %v, %d bytes; want %v, %d", tt.row, tt.day, b, short, len(b), tt.short, tt.size)
		}
		// A reader of schema 2 must refuse it: in the short form it has
		// more than the values, in the varint form it ends inside a varint.
		if old := schema2Row(tt.row); len(b) <= len(old) || !tt.short && b[len(b)-1] < 0x80 {
			t.Errorf("appendRow(%v, %d) = %x, which a reader of schema 2 would take for %x", tt.row, tt.day, b, old)
		}
		got, day, dated, err := decodeRow(nil, string(b))
		if err != nil || !slices.Equal(got, tt.row) || day != tt.day || !dated {
			t.Errorf("decodeRow(appendRow(%v, %d)) = %v, %d, %v, %v", tt.row, tt.day, got, day, dated, err)
		}
		old := schema2Row(tt.row)
		got, day, dated, err = decodeRow(nil, old)
		if err != nil || !slices.Equal(got, tt.row) || day != 0 || dated {
			t.Errorf("decodeRow(%x), a row of schema 2 = %v, %d, %v, %v", old, got, day, dated, err)
		}
	}
	for _, bad := range []string{"", "\x01", "\x01\x01\x01\x01\x01\x01\x01", "\xff\x80", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
		"\xff\x01\x80\x80", "\xff\x01\x80\x80\x80\x80\x10\x80"} {
		if _, _, _, err := decodeRow(nil, bad); err == nil {
			t.Errorf("decodeRow(%x) accepted", bad)
		}
	}
}

// schema2Row encodes row as schema 2 did: without a day.
func schema2Row(row []uint64) string {
	b := appendRow(nil, row, 0)
	if b[0] != rowVarint {
		return string(b[:len(b)-1]) // the day 0 is one byte
	}
	return string(b[:len(b)-2]) // the day 0 and 0x80
}

func FuzzDecodeRow(f *testing.F) {
	f.Add(string(appendRow(nil, []uint64{3, 5, 300, uint64(1<<64 - 7)}, 20417)))
	f.Add(string(appendRow(nil, []uint64{1 << 30, 5, 300, 1, 9}, 20417)))
	f.Add(schema2Row([]uint64{1 << 30, 5, 300, 1, 9}))
	f.Add("\x05\x01\x01")
	f.Fuzz(func(t *testing.T, b string) {
		row, day, dated, err := decodeRow(nil, b)
		if err != nil {
			return
		}
		if !dated {
			day = 0
		}
		again, day2, _, err := decodeRow(nil, string(appendRow(nil, row, day)))
		if err != nil || !slices.Equal(trim(row), again) || day2 != day {
			t.Fatalf("%x decodes to %v day %d, which encodes to a row that decodes to %v day %d, %v", b, row, day, again, day2, err)
		}
	})
}

func trim(row []uint64) []uint64 {
	for len(row) > 0 && row[len(row)-1] == 0 {
		row = row[:len(row)-1]
	}
	return row
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
	// Records of schema 2: no day, no mark.
	rec, err := parseSeen("1 " + s)
	if err != nil || rec.class != 1 || !slices.Equal(rec.steps, []int64{5, 0, -7, 2}) || rec.dated || rec.mark != 0 {
		t.Errorf("parseSeen = %+v, %v", rec, err)
	}
	rec, err = parseSeen("1;3 4")
	if err != nil || rec.class != 1 || fmt.Sprint(rec.values) != "[{3 4}]" || rec.dated {
		t.Errorf("parseSeen of schema 2 with values = %+v, %v", rec, err)
	}
	for _, bad := range []string{"", "x", "-1", "1 2", "1;", "1;3", "1;3 x", "1;64 1", "1;1 1024", "1;2 1 1 1", "1 2;1 1",
		"1;;", "1;;x", "1;;-1", "1;;4294967296", "1;;1 2 3", "1;;1 xyz", "1;3;1", "1;;1;"} {
		if _, err := parseSeen(bad); err == nil {
			t.Errorf("parseSeen(%q) accepted", bad)
		}
	}
	values := []store.Value{{Measure: 0, Level: 412}, {Measure: 10, Level: 3}}
	v := formatSeen(1, s, values, 20417, 0x9f3ac0de11)
	if v != "1 5 0 -7 2;0 412 10 3;20417 9f3ac0de11" {
		t.Errorf("formatSeen = %q", v)
	}
	rec, err = parseSeen(v)
	if err != nil || rec.class != 1 || !slices.Equal(rec.steps, []int64{5, 0, -7, 2}) || !slices.Equal(rec.values, values) ||
		rec.day != 20417 || !rec.dated || rec.mark != 0x9f3ac0de11 {
		t.Errorf("parseSeen(%q) = %+v, %v", v, rec, err)
	}
	if v := formatSeen(0, "", nil, 0, 0); v != "0;;0" {
		t.Errorf("formatSeen of a record with neither steps nor values = %q", v)
	}
	if rec, err := parseSeen("0;;0"); err != nil || !rec.dated || rec.day != 0 || rec.values != nil {
		t.Errorf(`parseSeen("0;;0") = %+v, %v`, rec, err)
	}
	if v := formatSeen(0, "", nil, 7, 1<<64-1); v != "0;;7 ffffffffffffffff" {
		t.Errorf("formatSeen of the largest mark = %q", v)
	}
}

func FuzzParseSeen(f *testing.F) {
	f.Add("1 5 0 -7 2;0 412 10 3;20417 9f3ac0de11")
	f.Add("1 5 0 -7 2;0 412")
	f.Add("0;;0")
	f.Fuzz(func(t *testing.T, s string) {
		rec, err := parseSeen(s)
		if err != nil {
			return
		}
		if rec.class >= 1<<20 || len(rec.steps) > 64 {
			return
		}
		index := map[string]int{}
		var steps []store.Step
		for c := 0; 2*c+1 < len(rec.steps); c++ {
			name := fmt.Sprint("c", c)
			index[name] = c
			steps = append(steps, store.Step{Class: name, Head: rec.steps[2*c], Body: rec.steps[2*c+1]})
		}
		again, err := parseSeen(formatSeen(rec.class, formatSteps(steps, index), rec.values, rec.day, rec.mark))
		if err != nil || again.class != rec.class || !slices.Equal(again.values, rec.values) || again.day != rec.day || again.mark != rec.mark {
			t.Fatalf("%q parses to %+v, which formats to a record that parses to %+v, %v", s, rec, again, err)
		}
	})
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
