package badgerstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/spamd/spamd/store"
)

// TestKeyPrefixes checks the property isolation rests on: no key prefix
// of one user is a prefix of another user's, whatever the kinds, so that
// neither a Get nor a prefix scan for one user can meet the other's keys.
func TestKeyPrefixes(t *testing.T) {
	users := []string{"", "a", "ab", "a.b", "A", "a@b", "b", "t", "r", "u", "s", "S", "h", "m", "T", "M", "x"}
	kinds := slices.Concat(userKinds, oldKinds, []byte{kindBusy})
	for _, u1 := range users {
		for _, u2 := range users {
			if u1 == u2 {
				continue
			}
			for _, k1 := range kinds {
				for _, k2 := range kinds {
					p1, p2 := userPrefix(k1, u1), userPrefix(k2, u2)
					if bytes.HasPrefix(p1, p2) || bytes.HasPrefix(p2, p1) {
						t.Errorf("prefix %q of %q and %q of %q overlap", p1, u1, p2, u2)
					}
				}
			}
		}
		for _, k := range kinds {
			if bytes.HasPrefix(userPrefix(k, u1), metaKey) {
				t.Errorf("user %q's keys of kind %q start like the meta key", u1, k)
			}
		}
	}
}

func TestKeys(t *testing.T) {
	tests := []struct {
		name string
		got  []byte
		want []byte
	}{
		{"totals", totalsKey("al"), []byte("ual\x00")},
		{"global totals", totalsKey(""), []byte("u\x00")},
		{"token", appendTokenKey(nil, "al", 0x0102030405060708), []byte("Tal\x00\x01\x02\x03\x04\x05\x06\x07\x08")},
		{"seen", appendSeenKey(nil, "", store.Digest{31: 9}), append(append([]byte("M\x00"), make([]byte, 31)...), 9)},
		{"seen of schema 2", appendSeenKeyV2(nil, "", store.Digest{31: 9}), append(append([]byte("s\x00"), make([]byte, 31)...), 9)},
		{"sample", appendSampleKey(nil, "al", sampleKey{measure: 3, class: 300}), []byte("hal\x00\x03\xac\x02")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !bytes.Equal(tt.got, tt.want) {
				t.Errorf("key %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestDays(t *testing.T) {
	tests := []struct {
		day store.Day
		enc []byte
	}{
		{dayEpoch, []byte{0}},
		{dayEpoch + 1, []byte{2}},
		{dayEpoch - 1, []byte{1}},
		{dayEpoch + 8191, []byte{0xfe, 0x7f}}, // 2047-06-04: two bytes still
		{dayEpoch - 8192, []byte{0xff, 0x7f}}, // 2002-07-29: two bytes still
		{0, []byte{0xf1, 0xb9, 2}},
		{math.MaxUint32, nil},
	}
	for _, tt := range tests {
		enc := appendDay(nil, tt.day)
		if tt.enc != nil && !bytes.Equal(enc, tt.enc) {
			t.Errorf("appendDay(%d) = %x, want %x", tt.day, enc, tt.enc)
		}
		if d, rest, err := decodeDay(append(enc, 7)); err != nil || d != tt.day || !bytes.Equal(rest, []byte{7}) {
			t.Errorf("decodeDay(%x) = %d, %x, %v", enc, d, rest, err)
		}
	}
	// Every day of one and two bytes, which decodeDay reads on its own,
	// against binary.Varint.
	for d := dayEpoch - 8192; d < dayEpoch+8192; d++ {
		enc := appendDay(nil, d)
		v, n := binary.Varint(enc)
		if got, rest, err := decodeDay(enc); err != nil || got != d || len(rest) != 0 || store.Day(v+int64(dayEpoch)) != d || n != len(enc) {
			t.Fatalf("decodeDay(%x) = %d, %x, %v; want %d", enc, got, rest, err, d)
		}
	}
	for _, bad := range [][]byte{nil, {0x80}, binary.AppendVarint(nil, -int64(dayEpoch)-1), binary.AppendVarint(nil, math.MaxUint32)} {
		if _, _, err := decodeDay(bad); !errors.Is(err, store.ErrInconsistent) {
			t.Errorf("decodeDay(%x): error %v, want ErrInconsistent", bad, err)
		}
	}
}

func TestRows(t *testing.T) {
	// A row of schema 4 is its day, then its values as schema 3 had them.
	enc := appendRow(nil, dayEpoch+1, []uint64{3, 0, 300})
	if want := []byte{2, 3, 0, 0xac, 2}; !bytes.Equal(enc, want) {
		t.Errorf("appendRow = %x, want %x", enc, want)
	}
	if row, day, err := decodeRow(nil, enc); err != nil || day != dayEpoch+1 || !slices.Equal(row, []uint64{3, 0, 300}) {
		t.Errorf("decodeRow = %v, %d, %v", row, day, err)
	}
	for _, bad := range [][]byte{nil, {0x80}, {2, 0x80}, {2, 1, 0xff}} {
		if _, _, err := decodeRow(nil, bad); !errors.Is(err, store.ErrInconsistent) {
			t.Errorf("decodeRow(%x): error %v, want ErrInconsistent", bad, err)
		}
	}
}

func TestRowsV3(t *testing.T) {
	neg := func(w int64) uint64 { return uint64(w) }
	tests := []struct {
		name string
		row  []uint64
		enc  []byte
		dec  []uint64 // what decoding enc gives back
	}{
		{"counts only", []uint64{3, 0, 300}, []byte{3, 0, 0xac, 2}, []uint64{3, 0, 300}},
		{"weights zigzag", []uint64{1, 5, 0, neg(-3)}, []byte{1, 10, 0, 5}, []uint64{1, 5, 0, neg(-3)}},
		{"weight without count", []uint64{0, neg(-1)}, []byte{0, 1}, []uint64{0, neg(-1)}},
		{"trailing zeros dropped", []uint64{2, 0, 0, 0}, []byte{2}, []uint64{2}},
		{"all zero", []uint64{0, 0}, nil, nil},
		{"large count", []uint64{1 << 63}, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 1}, []uint64{1 << 63}},
		{"extreme weights", []uint64{0, neg(math.MinInt64), 0, neg(math.MaxInt64)}, nil, []uint64{0, neg(math.MinInt64), 0, neg(math.MaxInt64)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := appendRowV3(nil, tt.row)
			if tt.enc != nil && !bytes.Equal(enc, tt.enc) {
				t.Errorf("appendRowV3 = %x, want %x", enc, tt.enc)
			}
			dec, err := decodeRowV3(nil, enc)
			if err != nil || !slices.Equal(dec, tt.dec) {
				t.Errorf("decodeRowV3 = %v, %v; want %v", dec, err, tt.dec)
			}
		})
	}
	// Values of every length, against binary's decoders.
	rng := rand.New(rand.NewPCG(5, 6))
	for range 10_000 {
		var b []byte
		var want []uint64
		for i := range 1 + rng.IntN(6) {
			v := rng.Uint64() >> rng.IntN(64)
			if i%2 == 0 {
				b = binary.AppendUvarint(b, v)
			} else {
				b = binary.AppendVarint(b, int64(v))
			}
			want = append(want, v)
		}
		if got, err := decodeRowV3(nil, b); err != nil || !slices.Equal(got, want) {
			t.Fatalf("decodeRowV3(%x) = %v, %v; want %v", b, got, err, want)
		}
	}
	for _, bad := range [][]byte{{0x80}, {1, 0xff}, bytes.Repeat([]byte{0xff}, 11)} {
		if _, err := decodeRowV3(nil, bad); !errors.Is(err, store.ErrInconsistent) {
			t.Errorf("decodeRowV3(%x): error %v, want ErrInconsistent", bad, err)
		}
	}
}

func TestCountsV1(t *testing.T) {
	tests := []struct {
		name string
		enc  []byte
		row  []uint64
	}{
		{"two classes", []byte{3, 0xac, 2}, []uint64{3, 0, 300, 0}},
		{"second class only", []byte{0, 1}, []uint64{0, 0, 1, 0}},
		{"none", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			row, err := decodeCountsV1(nil, tt.enc)
			if err != nil || !slices.Equal(row, tt.row) {
				t.Errorf("decodeCountsV1 = %v, %v; want %v", row, err, tt.row)
			}
		})
	}
	for _, bad := range [][]byte{{0x80}, {1, 0xff}, bytes.Repeat([]byte{0xff}, 11)} {
		if _, err := decodeCountsV1(nil, bad); !errors.Is(err, store.ErrInconsistent) {
			t.Errorf("decodeCountsV1(%x): error %v, want ErrInconsistent", bad, err)
		}
	}
}

func TestSeen(t *testing.T) {
	values := []store.Value{{Measure: 0, Level: 300}, {Measure: 10, Level: 5}}
	e := dayEpoch
	tests := []struct {
		name string
		rec  seenRec
		enc  []byte
	}{
		{"no steps", seenRec{class: 1, day: e}, []byte{1, 0, 0, 0}},
		{"day and mark", seenRec{class: 1, day: e + 1, mark: 0x0102030405060708}, []byte{1, 2, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}},
		{"steps", seenRec{class: 0, day: e, steps: []int64{10, 3, -10, -3}}, []byte{0, 0, 4, 20, 6, 19, 5, 0}},
		{"values", seenRec{class: 1, day: e - 1, values: values}, []byte{1, 1, 0, 2, 0, 0xac, 2, 10, 5}},
		{"everything", seenRec{class: 2, day: e, steps: []int64{1, -1}, values: values[1:], mark: 1 << 63}, []byte{2, 0, 2, 2, 1, 1, 10, 5, 0x80, 0, 0, 0, 0, 0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := appendSeen(nil, tt.rec)
			if !bytes.Equal(enc, tt.enc) {
				t.Errorf("appendSeen = %x, want %x", enc, tt.enc)
			}
			dec, err := decodeSeen(enc, nil)
			if err != nil || !dec.equal(tt.rec) {
				t.Errorf("decodeSeen = %+v, %v; want %+v", dec, err, tt.rec)
			}
		})
	}
	for _, bad := range [][]byte{
		nil,                                  // no class
		{0x80, 0x80, 0x80, 0x80, 0x10},       // class beyond int32
		{1},                                  // no day
		{1, 0},                               // no number of steps
		{1, 0, 1, 2, 0},                      // a head step without its body step
		{1, 0, 0},                            // no number of values
		{1, 0, 0, 2, 1, 1},                   // fewer values than said
		{1, 0, 0, 1, 64, 1},                  // a measure off the grid
		{1, 0, 0, 2, 2, 1, 1, 1},             // measures not in order
		{1, 0, 0, 0, 1, 2, 3},                // a mark cut short
		{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, // a mark of 0 written out
	} {
		if _, err := decodeSeen(bad, nil); !errors.Is(err, store.ErrInconsistent) {
			t.Errorf("decodeSeen(%x): error %v, want ErrInconsistent", bad, err)
		}
	}
}

func TestSeenV3(t *testing.T) {
	values := []store.Value{{Measure: 0, Level: 300}, {Measure: 10, Level: 5}}
	tests := []struct {
		name string
		rec  seenRec
		enc  []byte
		dec  seenRec // what decoding enc gives back
	}{
		{"no steps", seenRec{class: 1}, []byte{1, 0}, seenRec{class: 1}},
		{"steps", seenRec{class: 0, steps: []int64{10, 3, -10, -3}}, []byte{0, 4, 20, 6, 19, 5}, seenRec{class: 0, steps: []int64{10, 3, -10, -3}}},
		{"trailing zero pairs dropped", seenRec{class: 2, steps: []int64{0, 1, 0, 0}}, []byte{2, 2, 0, 2}, seenRec{class: 2, steps: []int64{0, 1}}},
		{"all zero", seenRec{class: 0, steps: []int64{0, 0}}, []byte{0, 0}, seenRec{class: 0}},
		{"values", seenRec{class: 1, values: values}, []byte{1, 0, 0, 0xac, 2, 10, 5}, seenRec{class: 1, values: values}},
		{"steps and values", seenRec{class: 1, steps: []int64{1, -1}, values: values[1:]}, []byte{1, 2, 2, 1, 10, 5}, seenRec{class: 1, steps: []int64{1, -1}, values: values[1:]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := appendSeenV3(nil, tt.rec)
			if !bytes.Equal(enc, tt.enc) {
				t.Errorf("appendSeenV3 = %x, want %x", enc, tt.enc)
			}
			dec, err := decodeSeenV3(enc, nil)
			if err != nil || !dec.equal(tt.dec) {
				t.Errorf("decodeSeenV3 = %+v, %v; want %+v", dec, err, tt.dec)
			}
		})
	}
	for _, bad := range [][]byte{
		nil,                            // no class
		{0x80, 0x80, 0x80, 0x80, 0x10}, // class beyond int32
		{1},                            // no number of steps
		{1, 2, 0x80},                   // truncated step
		{1, 1, 2},                      // a head step without its body step
		{1, 4, 2, 2},                   // fewer steps than said
		{1, 0, 3},                      // a measure without its level
		{1, 0, 64, 1},                  // a measure off the grid
		{1, 0, 1, 0x80, 8},             // a level off the grid
		{1, 0, 2, 1, 1, 1},             // measures not in order
	} {
		if _, err := decodeSeenV3(bad, nil); !errors.Is(err, store.ErrInconsistent) {
			t.Errorf("decodeSeenV3(%x): error %v, want ErrInconsistent", bad, err)
		}
	}
}

func TestSeenV2(t *testing.T) {
	for _, tt := range []struct {
		enc []byte
		dec seenRec
	}{
		{[]byte{1}, seenRec{class: 1}},
		{[]byte{0, 20, 6, 19, 5}, seenRec{class: 0, steps: []int64{10, 3, -10, -3}}},
	} {
		if dec, err := decodeSeenV2(tt.enc, nil); err != nil || !dec.equal(tt.dec) {
			t.Errorf("decodeSeenV2(%x) = %+v, %v; want %+v", tt.enc, dec, err, tt.dec)
		}
		if enc := appendSeenV2(nil, tt.dec); !bytes.Equal(enc, tt.enc) {
			t.Errorf("appendSeenV2(%+v) = %x, want %x", tt.dec, enc, tt.enc)
		}
	}
	for _, bad := range [][]byte{nil, {1, 0x80}, {1, 2}} {
		if _, err := decodeSeenV2(bad, nil); !errors.Is(err, store.ErrInconsistent) {
			t.Errorf("decodeSeenV2(%x): error %v, want ErrInconsistent", bad, err)
		}
	}
}

func TestSamples(t *testing.T) {
	smp := store.Sample{N: 4, Sum: 3*7 + 1000, SumSq: 3*49 + 1000*1000, Bins: []store.Bin{{Level: 7, Count: 3}, {Level: 1000, Count: 1}}}
	enc := appendSample(nil, smp)
	if want := []byte{4, 0xfd, 7, 0xd3, 0x85, 0x3d, 7, 3, 0xe1, 7, 1}; !bytes.Equal(enc, want) {
		t.Errorf("appendSample = %x, want %x", enc, want)
	}
	if dec, err := decodeSample(enc); err != nil || !dec.Equal(smp) {
		t.Errorf("decodeSample = %+v, %v", dec, err)
	}
	if dec, err := decodeSample(appendSample(nil, store.Sample{})); err != nil || !dec.Empty() {
		t.Errorf("empty sample: %+v, %v", dec, err)
	}
	for name, bad := range map[string]store.Sample{
		"count off":            {N: 5, Sum: smp.Sum, SumSq: smp.SumSq, Bins: smp.Bins},
		"sum off":              {N: 4, Sum: smp.Sum + 1, SumSq: smp.SumSq, Bins: smp.Bins},
		"levels not ascending": {N: 4, Sum: smp.Sum, SumSq: smp.SumSq, Bins: []store.Bin{{Level: 1000, Count: 1}, {Level: 7, Count: 3}}},
		"level twice":          {N: 2, Sum: 14, SumSq: 98, Bins: []store.Bin{{Level: 7, Count: 1}, {Level: 7, Count: 1}}},
		"empty level":          {N: 1, Sum: 7, SumSq: 49, Bins: []store.Bin{{Level: 5}, {Level: 7, Count: 1}}},
		"level off the grid":   {N: 1, Sum: 1024, SumSq: 1024 * 1024, Bins: []store.Bin{{Level: 1024, Count: 1}}},
	} {
		if _, err := decodeSample(appendSample(nil, bad)); !errors.Is(err, store.ErrInconsistent) {
			t.Errorf("%s: error %v, want ErrInconsistent", name, err)
		}
	}
	for _, bad := range [][]byte{nil, {1, 1}, {1, 1, 1, 0x80}, {1, 1, 1, 1}} {
		if _, err := decodeSample(bad); !errors.Is(err, store.ErrInconsistent) {
			t.Errorf("decodeSample(%x): error %v, want ErrInconsistent", bad, err)
		}
	}
	for _, k := range []sampleKey{{0, 0}, {63, 1}, {7, 1 << 20}} {
		if got, ok := parseSampleKey(appendSampleKey(nil, "u", k), "u"); !ok || got != k {
			t.Errorf("parseSampleKey(appendSampleKey(%v)) = %v, %v", k, got, ok)
		}
	}
	for _, bad := range [][]byte{[]byte("hu\x00"), []byte("hu\x00\x01"), []byte("hu\x00\x40\x00"), []byte("hu\x00\x01\x00\x00")} {
		if _, ok := parseSampleKey(bad, "u"); ok {
			t.Errorf("parseSampleKey(%q) accepted", bad)
		}
	}
}

func TestTotals(t *testing.T) {
	tests := []struct {
		name string
		in   totals
		enc  []byte
	}{
		{"empty", totals{}, []byte{0, 0, 0}},
		{"two classes", totals{messages: []uint64{2, 1}, tokens: []uint64{600, 7}, vocabulary: 130, lastDay: 20000, forgotten: []uint64{1, 0}},
			[]byte{0x82, 1, 2, 2, 0xd8, 4, 1, 7, 0xa0, 0x9c, 1, 1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := appendTotals(nil, &tt.in)
			if !bytes.Equal(enc, tt.enc) {
				t.Errorf("appendTotals = %x, want %x", enc, tt.enc)
			}
			got, err := decodeTotals(enc)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.messages, tt.in.messages) || !slices.Equal(got.tokens, tt.in.tokens) || got.vocabulary != tt.in.vocabulary ||
				got.lastDay != tt.in.lastDay || !slices.Equal(got.forgotten, tt.in.forgotten) && len(tt.in.forgotten) > 0 {
				t.Errorf("decodeTotals = %+v, want %+v", got, tt.in)
			}
		})
	}
	// Totals of schema 3 had no last day and no forgotten messages.
	if got, err := decodeTotals([]byte{0x82, 1, 2, 2, 0xd8, 4, 1, 7}); err != nil || got.vocabulary != 130 || got.tokens[0] != 600 || got.lastDay != 0 || got.forgotten != nil {
		t.Errorf("decodeTotals of schema 3 = %+v, %v", got, err)
	}
	for _, bad := range [][]byte{nil, {0}, {0, 1}, {0, 1, 1}, {0, 1, 1, 1, 1}, {0, 0xff, 0xff, 0xff, 0x0f},
		{0, 1, 1, 1, 5}, {0, 1, 1, 1, 5, 0, 0}, {0, 1, 1, 1, 0x80, 0x80, 0x80, 0x80, 0x10, 0}} {
		if _, err := decodeTotals(bad); !errors.Is(err, store.ErrInconsistent) {
			t.Errorf("decodeTotals(%x): error %v, want ErrInconsistent", bad, err)
		}
	}
}

func TestMeta(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"new", `{"schema":2,"classes":[]}`, true},
		{"classes", `{"schema":2,"classes":["spam","ham"]}`, true},
		{"schema 1", `{"schema":1,"classes":["spam","ham"]}`, true},
		{"duplicate", `{"schema":2,"classes":["spam","spam"]}`, false},
		{"invalid class", `{"schema":2,"classes":["Spam"]}`, false},
		{"not JSON", `schema=2`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := decodeMeta([]byte(tt.in))
			if !tt.ok {
				if !errors.Is(err, ErrSchema) {
					t.Errorf("decodeMeta: error %v, want ErrSchema", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			enc, err := encodeMeta(m)
			if err != nil || string(enc) != tt.in {
				t.Errorf("encodeMeta = %s, %v; want %s", enc, err, tt.in)
			}
		})
	}
}

// The fuzz targets feed stored values, as a damaged disk could hand them
// back, to the decoders: they must fail cleanly, never panic or allocate
// without bound, and what they accept must survive a round trip.

func FuzzDecodeRow(f *testing.F) {
	f.Add(appendRow(nil, 20400, []uint64{3, 5, 300, uint64(1<<64 - 7)}))
	f.Fuzz(func(t *testing.T, b []byte) {
		row, day, err := decodeRow(nil, b)
		if err != nil {
			return
		}
		again, dayAgain, err := decodeRow(nil, appendRow(nil, day, row))
		if err != nil {
			t.Fatal(err)
		}
		n := len(row)
		for n > 0 && row[n-1] == 0 {
			n--
		}
		if !slices.Equal(again, row[:n]) || dayAgain != day {
			t.Errorf("round trip of %v on day %d gave %v on day %d", row, day, again, dayAgain)
		}
	})
}

// sealedAsWhole fails t if decodeSealedRow of row, its first shared
// bytes in a word with junk past them, differs from decodeRow of row.
func sealedAsWhole(t *testing.T, row []byte, shared int, junk uint32) {
	t.Helper()
	var head [4]byte
	binary.LittleEndian.PutUint32(head[:], junk)
	copy(head[:], row[:shared])
	dst := []uint64{7} // what the caller's row held before
	got, day, err := decodeSealedRow(dst[:1:1], binary.LittleEndian.Uint32(head[:]), shared, row[shared:])
	want, wantDay, wantErr := decodeRow(dst[:1:1], row)
	if !slices.Equal(got, want) || day != wantDay || fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Fatalf("decodeSealedRow of %x sharing %d = %v, %d, %v; decodeRow, %v, %d, %v", row, shared, got, day, err, want, wantDay, wantErr)
	}
}

// TestDecodeSealedRow decodes rows as a sealed file holds them, their
// first bytes shared with the row before, as decodeRow decodes them
// whole: rows of every day and of values of every length, and rows that
// do not decode.
func TestDecodeSealedRow(t *testing.T) {
	rows := [][]byte{
		nil, {0x80}, {0x80, 0x80}, {2}, {2, 0x80}, {2, 1, 0xff}, {0xff, 0x7f, 0x80},
		appendRow(nil, dayEpoch, nil),
		appendRow(nil, dayEpoch+1, []uint64{3, 0, 300}),
		appendRow(nil, dayEpoch-1, []uint64{1 << 63, uint64(1<<64 - 7)}),
		append(appendRow(nil, dayEpoch+100, []uint64{1, 2}), 0x80),
		binary.AppendVarint(nil, -int64(dayEpoch)-1),
		binary.AppendVarint(nil, math.MaxUint32),
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 5000 {
		vals := make([]uint64, rng.IntN(7))
		for i := range vals {
			vals[i] = rng.Uint64() >> rng.IntN(64)
		}
		day := store.Day(rng.IntN(2 * int(dayEpoch)))
		if rng.IntN(2) == 0 {
			day = dayEpoch + store.Day(rng.IntN(400)) // two bytes, as a model's days
		}
		rows = append(rows, appendRow(nil, day, vals))
	}
	for _, row := range rows {
		for shared := range min(len(row), 3) + 1 {
			sealedAsWhole(t, row, shared, rng.Uint32())
		}
	}
}

func FuzzDecodeSealedRow(f *testing.F) {
	f.Add(appendRow(nil, 20400, []uint64{3, 5, 300, uint64(1<<64 - 7)}), uint8(2), uint32(0xdeadbeef))
	f.Add(appendRow(nil, 20400, []uint64{3, 5}), uint8(3), uint32(0))
	f.Fuzz(func(t *testing.T, row []byte, shared uint8, junk uint32) {
		sealedAsWhole(t, row, min(int(shared%4), len(row)), junk)
	})
}

// decodeRowV3Ref is decodeRowV3 as its format defines it, with
// binary's decoders, which FuzzDecodeRowV3 holds decodeRowV3's reads of
// short values to.
func decodeRowV3Ref(dst []uint64, b []byte) ([]uint64, error) {
	for i := 0; len(b) > 0; i++ {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return dst, errCorrupt
		}
		if i%2 == 1 {
			w, _ := binary.Varint(b[:n])
			v = uint64(w)
		}
		dst, b = append(dst, v), b[n:]
	}
	return dst, nil
}

func FuzzDecodeRowV3(f *testing.F) {
	f.Add(appendRowV3(nil, []uint64{3, 5, 300, uint64(1<<64 - 7)}))
	f.Add([]byte{0x80, 0x80, 1, 0xff, 0xff, 0x7f, 0x80, 0x80, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		row, err := decodeRowV3(nil, b)
		want, wantErr := decodeRowV3Ref(nil, b)
		if !slices.Equal(row, want) || err != wantErr {
			t.Fatalf("decodeRowV3(%x) = %v, %v; by binary's decoders, %v, %v", b, row, err, want, wantErr)
		}
		if err != nil {
			return
		}
		again, err := decodeRowV3(nil, appendRowV3(nil, row))
		if err != nil {
			t.Fatal(err)
		}
		n := len(row)
		for n > 0 && row[n-1] == 0 {
			n--
		}
		if !slices.Equal(again, row[:n]) {
			t.Errorf("round trip of %v gave %v", row, again)
		}
	})
}

func FuzzDecodeCountsV1(f *testing.F) {
	f.Add([]byte{3, 0xac, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		row, err := decodeCountsV1(nil, b)
		if err != nil {
			return
		}
		if len(row) > 2*len(b) {
			t.Fatalf("%d values from %d bytes", len(row), len(b))
		}
		for i := 1; i < len(row); i += 2 {
			if row[i] != 0 {
				t.Fatalf("row %v has a weight", row)
			}
		}
	})
}

func FuzzDecodeTotals(f *testing.F) {
	f.Add(appendTotals(nil, &totals{messages: []uint64{2, 1}, tokens: []uint64{600, 7}, vocabulary: 130, lastDay: 20400, forgotten: []uint64{0, 1}}))
	f.Add([]byte{0x82, 1, 2, 2, 0xd8, 4, 1, 7}) // schema 3's
	f.Fuzz(func(t *testing.T, b []byte) {
		tot, err := decodeTotals(b)
		if err != nil {
			return
		}
		if len(tot.messages) > len(b) {
			t.Fatalf("%d classes from %d bytes", len(tot.messages), len(b))
		}
		again, err := decodeTotals(appendTotals(nil, &tot))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(again.messages, tot.messages) || !slices.Equal(again.tokens, tot.tokens) || again.vocabulary != tot.vocabulary ||
			again.lastDay != tot.lastDay || slices.ContainsFunc(tot.forgotten, func(n uint64) bool { return n != 0 }) && !slices.Equal(again.forgotten, tot.forgotten) {
			t.Errorf("round trip of %+v gave %+v", tot, again)
		}
	})
}

func FuzzDecodeSeen(f *testing.F) {
	f.Add(appendSeen(nil, seenRec{class: 1, day: 20400}))
	f.Add(appendSeen(nil, seenRec{class: 0, day: 20400, mark: 77, steps: []int64{10, 3, -10, -3}, values: []store.Value{{Measure: 1, Level: 9}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := decodeSeen(b, nil)
		if err != nil {
			return
		}
		again, err := decodeSeen(appendSeen(nil, rec), nil)
		if err != nil {
			t.Fatal(err)
		}
		n := len(rec.steps)
		for n > 0 && rec.steps[n-1] == 0 && rec.steps[n-2] == 0 {
			n -= 2
		}
		rec.steps = rec.steps[:n]
		if n == 0 {
			rec.steps = nil
		}
		if !again.equal(rec) {
			t.Errorf("round trip of %+v gave %+v", rec, again)
		}
	})
}

func FuzzDecodeSeenV3(f *testing.F) {
	f.Add(appendSeenV3(nil, seenRec{class: 1}))
	f.Add(appendSeenV3(nil, seenRec{class: 0, steps: []int64{10, 3, -10, -3}, values: []store.Value{{Measure: 1, Level: 9}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := decodeSeenV3(b, nil)
		if err != nil {
			return
		}
		again, err := decodeSeenV3(appendSeenV3(nil, rec), nil)
		if err != nil {
			t.Fatal(err)
		}
		n := len(rec.steps)
		for n > 0 && rec.steps[n-1] == 0 && rec.steps[n-2] == 0 {
			n -= 2
		}
		if again.class != rec.class || !slices.Equal(again.steps, rec.steps[:n]) || !slices.Equal(again.values, rec.values) {
			t.Errorf("round trip of %+v gave %+v", rec, again)
		}
	})
}

func FuzzDecodeMeta(f *testing.F) {
	f.Add([]byte(`{"schema":2,"classes":["spam","ham"]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMeta(b)
		if err != nil {
			return
		}
		for _, c := range m.Classes {
			if err := store.ValidClass(c); err != nil {
				t.Fatalf("accepted class %q: %v", c, err)
			}
		}
		enc, err := encodeMeta(m)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeMeta(enc)
		if err != nil || again.Schema != m.Schema || !slices.Equal(again.Classes, m.Classes) {
			t.Errorf("round trip of %+v gave %+v, %v", m, again, err)
		}
	})
}
