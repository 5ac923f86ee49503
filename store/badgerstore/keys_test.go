package badgerstore

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/spamd/spamd/store"
)

// TestKeyPrefixes checks the property isolation rests on: no key prefix
// of one user is a prefix of another user's, whatever the kinds, so that
// neither a Get nor a prefix scan for one user can meet the other's keys.
func TestKeyPrefixes(t *testing.T) {
	users := []string{"", "a", "ab", "a.b", "A", "a@b", "b", "t", "u", "s", "m"}
	kinds := []byte{kindTotals, kindToken, kindSeen}
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
		if bytes.HasPrefix(userPrefix(kindToken, u1), metaKey) {
			t.Errorf("user %q's keys start like the meta key", u1)
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
		{"token", appendTokenKey(nil, "al", 0x0102030405060708), []byte("tal\x00\x01\x02\x03\x04\x05\x06\x07\x08")},
		{"seen", appendSeenKey(nil, "", store.Digest{31: 9}), append(append([]byte("s\x00"), make([]byte, 31)...), 9)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !bytes.Equal(tt.got, tt.want) {
				t.Errorf("key %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestCounts(t *testing.T) {
	tests := []struct {
		name   string
		counts []uint64
		enc    []byte
		dec    []uint64 // what decoding enc gives back
	}{
		{"two classes", []uint64{3, 300}, []byte{3, 0xac, 2}, []uint64{3, 300}},
		{"trailing zeros dropped", []uint64{0, 1, 0, 0}, []byte{0, 1}, []uint64{0, 1}},
		{"all zero", []uint64{0, 0}, nil, nil},
		{"large", []uint64{1 << 63}, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 1}, []uint64{1 << 63}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := appendCounts(nil, tt.counts)
			if !bytes.Equal(enc, tt.enc) {
				t.Errorf("appendCounts = %x, want %x", enc, tt.enc)
			}
			dec, err := decodeCounts(nil, enc)
			if err != nil || !slices.Equal(dec, tt.dec) {
				t.Errorf("decodeCounts = %v, %v; want %v", dec, err, tt.dec)
			}
		})
	}
	for _, bad := range [][]byte{{0x80}, {1, 0xff}, bytes.Repeat([]byte{0xff}, 11)} {
		if _, err := decodeCounts(nil, bad); !errors.Is(err, store.ErrInconsistent) {
			t.Errorf("decodeCounts(%x): error %v, want ErrInconsistent", bad, err)
		}
	}
}

func TestTotals(t *testing.T) {
	tests := []struct {
		name string
		in   totals
		enc  []byte
	}{
		{"empty", totals{}, []byte{0, 0}},
		{"two classes", totals{messages: []uint64{2, 1}, tokens: []uint64{600, 7}, vocabulary: 130}, []byte{0x82, 1, 2, 2, 0xd8, 4, 1, 7}},
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
			if !slices.Equal(got.messages, tt.in.messages) || !slices.Equal(got.tokens, tt.in.tokens) || got.vocabulary != tt.in.vocabulary {
				t.Errorf("decodeTotals = %+v, want %+v", got, tt.in)
			}
		})
	}
	for _, bad := range [][]byte{nil, {0}, {0, 1}, {0, 1, 1}, {0, 1, 1, 1, 1}, {0, 0xff, 0xff, 0xff, 0x0f}} {
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
		{"new", `{"schema":1,"classes":[]}`, true},
		{"classes", `{"schema":1,"classes":["spam","ham"]}`, true},
		{"duplicate", `{"schema":1,"classes":["spam","spam"]}`, false},
		{"invalid class", `{"schema":1,"classes":["Spam"]}`, false},
		{"not JSON", `schema=1`, false},
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

func FuzzDecodeCounts(f *testing.F) {
	f.Add(appendCounts(nil, []uint64{3, 300}))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeCounts(nil, b)
		if err != nil {
			return
		}
		again, err := decodeCounts(nil, appendCounts(nil, c))
		if err != nil {
			t.Fatal(err)
		}
		n := len(c)
		for n > 0 && c[n-1] == 0 {
			n--
		}
		if !slices.Equal(again, c[:n]) {
			t.Errorf("round trip of %v gave %v", c, again)
		}
	})
}

func FuzzDecodeTotals(f *testing.F) {
	f.Add(appendTotals(nil, &totals{messages: []uint64{2, 1}, tokens: []uint64{600, 7}, vocabulary: 130}))
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
		if !slices.Equal(again.messages, tot.messages) || !slices.Equal(again.tokens, tot.tokens) || again.vocabulary != tot.vocabulary {
			t.Errorf("round trip of %+v gave %+v", tot, again)
		}
	})
}

func FuzzDecodeSeen(f *testing.F) {
	f.Add(appendSeen(nil, 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeSeen(b)
		if err != nil {
			return
		}
		if again, err := decodeSeen(appendSeen(nil, int(c))); err != nil || again != c {
			t.Errorf("round trip of %d gave %d, %v", c, again, err)
		}
	})
}

func FuzzDecodeMeta(f *testing.F) {
	f.Add([]byte(`{"schema":1,"classes":["spam","ham"]}`))
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
