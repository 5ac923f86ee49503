package sealed

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// model is a test model: users' rows by hash.
type model map[string]map[uint64][]byte

func write(t testing.TB, m model) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	users := make([]string, 0, len(m))
	for u := range m {
		users = append(users, u)
	}
	slices.Sort(users)
	for _, u := range users {
		hs := make([]uint64, 0, len(m[u]))
		for h := range m[u] {
			hs = append(hs, h)
		}
		slices.Sort(hs)
		for _, h := range hs {
			if err := w.Add(u, h, m[u][h]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func randomModel(seed uint64, users []string, rows int) model {
	r := rand.New(rand.NewPCG(seed, 1))
	m := model{}
	for _, u := range users {
		m[u] = map[uint64][]byte{}
		for range rows {
			// Rows that start alike, as a model's do, some of
			// them long enough for their length to be escaped.
			n := r.IntN(12)
			if r.IntN(8) == 0 {
				n = 60 + r.IntN(20)
			}
			row := make([]byte, n)
			for i := range row {
				row[i] = byte(r.Uint32())
				if i < 4 && r.IntN(4) > 0 {
					row[i] = byte(i)
				}
			}
			m[u][r.Uint64()] = row
		}
	}
	return m
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name  string
		model model
	}{
		{"empty", model{}},
		{"one row", model{"": {42: {1, 2}}}},
		{"edges", model{"": {0: {}, 1: {1}, 1<<64 - 1: {9, 9}}}},
		{"a block exactly", randomModel(1, []string{""}, blockRows)},
		{"a block and one", randomModel(2, []string{""}, blockRows+1)},
		{"users", randomModel(3, []string{"", "alice", "bob@example.org"}, 1000)},
		{"large", randomModel(4, []string{""}, 50_000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Open(write(t, tc.model))
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Verify(); err != nil {
				t.Fatal(err)
			}
			var users []string
			for u := range tc.model {
				users = append(users, u)
			}
			slices.Sort(users)
			if got := f.Users(); !slices.Equal(got, users) && len(users) > 0 {
				t.Fatalf("users %q, want %q", got, users)
			}
			if f.Section("nobody") != nil {
				t.Fatal("a section for a user with no rows")
			}
			r := rand.New(rand.NewPCG(9, 9))
			for u, rows := range tc.model {
				s := f.Section(u)
				if s.Rows() != uint64(len(rows)) {
					t.Fatalf("%q: %d rows, want %d", u, s.Rows(), len(rows))
				}
				// Touch, which reads nothing outside the file
				// for any hash, and changes nothing Get finds.
				hs := append([]uint64{0, 1<<64 - 1}, slices.Collect(maps.Keys(rows))...)
				s.Touch(len(hs), func(i int) uint64 { return hs[i] })
				for h, want := range rows {
					got, ok, err := s.Get(h, nil)
					if err != nil || !ok || !bytes.Equal(got, want) {
						t.Fatalf("%q: Get(%x) = %x, %v, %v; want %x", u, h, got, ok, err, want)
					}
					// Beside each stored hash, one that is not.
					for _, o := range []uint64{h - 1, h + 1, r.Uint64()} {
						if _, stored := rows[o]; stored {
							continue
						}
						if got, ok, err := s.Get(o, nil); err != nil || ok {
							t.Fatalf("%q: Get(%x) of no row = %x, %v, %v", u, o, got, ok, err)
						}
					}
				}
				var last uint64
				n := 0
				err := s.Scan(func(h uint64, row []byte) bool {
					if n > 0 && h <= last {
						t.Fatalf("%q: %x after %x", u, h, last)
					}
					if !bytes.Equal(row, rows[h]) {
						t.Fatalf("%q: scan gave %x for %x, want %x", u, row, h, rows[h])
					}
					last = h
					n++
					return true
				})
				if err != nil || n != len(rows) {
					t.Fatalf("%q: scan: %d rows, %v", u, n, err)
				}
			}
		})
	}
}

func TestWriterOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		adds []struct {
			user string
			h    uint64
		}
	}{
		{"hash repeated", []struct {
			user string
			h    uint64
		}{{"", 5}, {"", 5}}},
		{"hash descends", []struct {
			user string
			h    uint64
		}{{"", 5}, {"", 4}}},
		{"user descends", []struct {
			user string
			h    uint64
		}{{"b", 1}, {"a", 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWriter(&bytes.Buffer{})
			var err error
			for _, a := range tc.adds {
				if err = w.Add(a.user, a.h, nil); err != nil {
					break
				}
			}
			if err == nil {
				t.Fatal("no error")
			}
		})
	}
}

func TestCorrupt(t *testing.T) {
	good := write(t, randomModel(5, []string{"", "u"}, 300))
	f, err := Open(good)
	if err != nil {
		t.Fatal(err)
	}
	meta := int(f.metaOff)
	for _, tc := range []struct {
		name   string
		mangle func([]byte) []byte
		atOpen bool // Open finds it; else Verify does
	}{
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }, true},
		{"no magic", func(b []byte) []byte { b[0] ^= 1; return b }, true},
		{"index", func(b []byte) []byte { b[meta+3] ^= 1; return b }, true},
		{"directory", func(b []byte) []byte { b[len(b)-footerSize-2] ^= 1; return b }, true},
		{"footer offset", func(b []byte) []byte { b[len(b)-footerSize] ^= 1; return b }, true},
		{"a row", func(b []byte) []byte { b[meta/2] ^= 1; return b }, false},
		{"empty", func([]byte) []byte { return nil }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Open(tc.mangle(slices.Clone(good)))
			if tc.atOpen {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Open: %v, want ErrCorrupt", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if err := f.Verify(); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Verify: %v, want ErrCorrupt", err)
			}
		})
	}
}

func BenchmarkGet(b *testing.B) {
	for _, rows := range []int{500_000, 2_000_000} {
		b.Run(fmt.Sprint(rows), func(b *testing.B) {
			m := randomModel(6, []string{""}, rows)
			f, err := Open(write(b, m))
			if err != nil {
				b.Fatal(err)
			}
			hs := make([]uint64, 0, rows)
			for h := range m[""] {
				hs = append(hs, h)
			}
			s := f.Section("")
			var buf [64]byte
			b.ResetTimer()
			for i := range b.N {
				if _, ok, _ := s.Get(hs[i%len(hs)], buf[:0]); !ok {
					b.Fatal("not found")
				}
			}
		})
	}
}

// FuzzOpen reads whatever Open accepts, every row of every section and
// Gets of hashes stored and not: none of it may panic or read past the
// file, and what a scan finds a Get finds.
func FuzzOpen(f *testing.F) {
	f.Add(write(f, model{}))
	f.Add(write(f, model{"": {42: {1, 2}}}))
	f.Add(write(f, randomModel(7, []string{"", "u"}, 70)))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Open(data)
		if err != nil {
			return
		}
		_ = file.Verify()
		for _, u := range file.Users() {
			s := file.Section(u)
			_ = s.Scan(func(h uint64, row []byte) bool {
				got, ok, err := s.Get(h, nil)
				if err == nil && (!ok || !bytes.Equal(got, row)) {
					t.Fatalf("%q: Get(%x) = %x, %v; the scan found %x", u, h, got, ok, row)
				}
				_, _, _ = s.Get(h+1, nil)
				return true
			})
		}
	})
}

// TestUvarint compares uvarint with binary.Uvarint on values of every
// length, some encoded a byte longer than need be, followed by more bytes
// or cut short.
func TestUvarint(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 100_000 {
		v := rng.Uint64() >> rng.IntN(64)
		if i < 300 {
			v = uint64(i)
		}
		b := binary.AppendUvarint(nil, v)
		if i%5 == 0 && len(b) < 10 {
			// Longer than it need be, as binary.Uvarint accepts.
			b[len(b)-1] |= 0x80
			b = append(b, 0)
		}
		b = append(b, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a)
		for cut := 0; cut <= len(b); cut++ {
			got, rest, err := uvarint(b[:cut])
			want, n := binary.Uvarint(b[:cut])
			if n <= 0 {
				if err == nil {
					t.Fatalf("%x: no error", b[:cut])
				}
				continue
			}
			if err != nil || got != want || len(rest) != cut-n {
				t.Fatalf("%x: %d, %d bytes left, %v; want %d, %d left", b[:cut], got, len(rest), err, want, cut-n)
			}
		}
	}
}
