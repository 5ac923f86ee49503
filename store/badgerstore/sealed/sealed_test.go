package sealed

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
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

// crowded returns a model of rows rows whose hashes are 0 to rows−1, so
// that the Writer, from its first rows, takes them for many more.
func crowded(rows int) model {
	m := model{"": {}}
	for h := range rows {
		m[""][uint64(h)] = []byte{byte(h)}
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
		{"a bucket", randomModel(1, []string{""}, 2*bucketRows-1)},
		{"rows held exactly", randomModel(2, []string{""}, estimateRows)},
		{"rows held and one", randomModel(2, []string{""}, estimateRows+1)},
		{"hashes not spread", crowded(2 * estimateRows)},
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
				Touch(s, hs)
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
		{"offsets", func(b []byte) []byte { b[meta+5] ^= 1; return b }, true},
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

// getBefore is Get as it was before Find, which reads a row in place:
// the reference that FuzzFind and TestFindAsBefore hold Find to.
func (s *Section) getBefore(h uint64, dst []byte) ([]byte, bool, error) {
	start, end := s.bucket(h >> s.shift)
	p := s.data[start:end]
	want, mask, w := h&s.remMask, s.remMask, s.width
	// head holds the first nhead bytes (at most maxShared, which is under
	// 4) of the row read last, its first byte lowest; prev is that row's
	// hash bits.
	var head uint32
	var nhead int
	var prev uint64
	for i := 0; len(p) > 0; i++ {
		if len(p) <= w {
			return dst, false, corrupt("row cut short")
		}
		var rem uint64
		if len(p) >= 8 {
			rem = binary.LittleEndian.Uint64(p) & mask
		} else {
			for j := w - 1; j >= 0; j-- {
				rem = rem<<8 | uint64(p[j])
			}
		}
		shared, n := int(p[w]>>6), uint64(p[w]&lenEscape)
		p = p[w+1:]
		if n == lenEscape {
			var err error
			if n, p, err = uvarint(p); err != nil {
				return dst, false, err
			}
		}
		switch {
		case n > uint64(len(p)):
			return dst, false, corrupt("row past its bucket")
		case shared > nhead:
			return dst, false, corrupt("row shares more than the row before has")
		case i > 0 && rem <= prev:
			return dst, false, corrupt("row %d of a bucket out of order", i)
		}
		if rem >= want {
			if rem != want {
				return dst, false, nil
			}
			d := len(dst)
			dst = binary.LittleEndian.AppendUint32(dst, head)[:d+shared]
			return append(dst, p[:n]...), true, nil
		}
		// The row's first bytes: the shared ones, then its own.
		var own uint32
		if len(p) >= 4 {
			own = binary.LittleEndian.Uint32(p)
		} else {
			for j := len(p) - 1; j >= 0; j-- {
				own = own<<8 | uint32(p[j])
			}
		}
		k := min(n, maxShared)
		own &= 1<<(8*k) - 1
		head = (head&(1<<(8*shared)-1) | own<<(8*shared)) & (1<<(8*maxShared) - 1)
		nhead = min(maxShared, shared+int(k))
		prev = rem
		p = p[n:]
	}
	return dst, false, nil
}

// bucketSection returns a section of one bucket, rows, that every hash
// falls in, of a user of 2^k buckets.
func bucketSection(rows []byte, k uint64) *Section {
	return &Section{
		data:    rows,
		offsets: binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 0), uint32(len(rows))),
		shift:   64,
		width:   remWidth(k),
		remMask: ^uint64(0) >> (64 - 8*remWidth(k)),
	}
}

// sameAsBefore fails t if Get, and so Find, differs from getBefore on h:
// in the row, in whether there is one, or in the error.
func sameAsBefore(t *testing.T, s *Section, h uint64) {
	t.Helper()
	prefix := []byte{0xee}
	got, ok, err := s.Get(h, prefix)
	want, wantOK, wantErr := s.getBefore(h, prefix)
	if !bytes.Equal(got, want) || ok != wantOK || fmt.Sprint(err) != fmt.Sprint(wantErr) || (err != nil) != errors.Is(err, ErrCorrupt) {
		t.Fatalf("Get(%x) of %x = %x, %v, %v; before, %x, %v, %v", h, s.data, got, ok, err, want, wantOK, wantErr)
	}
}

// TestFindAsBefore reads every row of buckets as written, and of them
// with bytes changed and cut, as Get did before Find.
func TestFindAsBefore(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 12))
	for _, m := range []model{randomModel(13, []string{""}, 3000), crowded(300)} {
		f, err := Open(write(t, m))
		if err != nil {
			t.Fatal(err)
		}
		s := f.Section("")
		k := 64 - s.shift
		for b := range uint64(len(s.offsets)/offsetSize - 1) {
			start, end := s.bucket(b)
			rows := s.data[start:end]
			var hashes []uint64
			for h := range m[""] {
				if h>>s.shift == b {
					hashes = append(hashes, h, h+1, h-1)
				}
			}
			hashes = append(hashes, b<<s.shift, b<<s.shift|(1<<s.shift-1))
			for try := range 4 {
				mangled := slices.Clone(rows)
				switch {
				case try == 1 && len(mangled) > 0:
					mangled[r.IntN(len(mangled))] ^= byte(1 << r.IntN(8))
				case try == 2 && len(mangled) > 0:
					mangled[r.IntN(len(mangled))] = byte(r.Uint32())
				case try == 3:
					mangled = mangled[:r.IntN(len(mangled)+1)]
				}
				bs := bucketSection(mangled, k)
				for _, h := range hashes {
					sameAsBefore(t, bs, h)
					if _, stored := m[""][h]; stored && try == 0 && h>>s.shift == b {
						if _, ok, _ := bs.Get(h, nil); !ok {
							t.Fatalf("Get(%x) of its bucket found nothing", h)
						}
					}
				}
			}
		}
	}
}

// FuzzFind reads a bucket of any bytes, of a user of 2^k buckets, as Get
// did before Find.
func FuzzFind(f *testing.F) {
	m := randomModel(14, []string{""}, 200)
	file, err := Open(write(f, m))
	if err != nil {
		f.Fatal(err)
	}
	s := file.Section("")
	for h := range m[""] {
		start, end := s.bucket(h >> s.shift)
		f.Add(slices.Clone(s.data[start:end]), uint8(64-s.shift), h)
	}
	f.Add([]byte{}, uint8(0), uint64(0))
	f.Fuzz(func(t *testing.T, rows []byte, k uint8, h uint64) {
		sameAsBefore(t, bucketSection(rows, uint64(k)%(maxBits+1)), h)
	})
}

// TestScanV2 reads a file of the earlier layout, written by the build
// before this one from the model below, and rewrites it in this one.
func TestScanV2(t *testing.T) {
	want := randomModel(11, []string{"", "alice", "bob@example.org"}, 300)
	want["alice"][1<<64-1] = []byte{7}
	want["alice"][0] = nil
	data, err := os.ReadFile("testdata/v2.sealed")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(data); !errors.Is(err, ErrOldLayout) {
		t.Fatalf("Open: %v, want ErrOldLayout", err)
	}
	var buf bytes.Buffer
	w := NewWriter(&buf)
	got := model{}
	err = ScanV2(data, func(user string, h uint64, row []byte) error {
		if got[user] == nil {
			got[user] = map[uint64][]byte{}
		}
		got[user][h] = slices.Clone(row)
		return w.Add(user, h, row)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !equal(got, want) {
		t.Fatal("the rows scanned are not the model's")
	}
	f, err := Open(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	for u, rows := range want {
		for h, row := range rows {
			if v, ok, err := f.Section(u).Get(h, nil); err != nil || !ok || !bytes.Equal(v, row) {
				t.Fatalf("%q: Get(%x) = %x, %v, %v; want %x", u, h, v, ok, err, row)
			}
		}
	}
	for _, cut := range []int{len(data) / 3, len(data) - 1} {
		mangled := slices.Clone(data)
		mangled[cut] ^= 1
		if err := ScanV2(mangled, func(string, uint64, []byte) error { return nil }); !errors.Is(err, ErrCorrupt) {
			t.Errorf("a byte changed at %d: %v, want ErrCorrupt", cut, err)
		}
	}
	stop := errors.New("stop")
	if err := ScanV2(data, func(string, uint64, []byte) error { return stop }); err != stop {
		t.Errorf("f's error: %v", err)
	}
}

func equal(a, b model) bool {
	return maps.EqualFunc(a, b, func(x, y map[uint64][]byte) bool { return maps.EqualFunc(x, y, bytes.Equal) })
}

// FuzzScanV2 reads whatever ScanV2 accepts: it may not panic or read past
// the file, and what it gives a Writer takes.
func FuzzScanV2(f *testing.F) {
	data, err := os.ReadFile("testdata/v2.sealed")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) {
		w := NewWriter(io.Discard)
		if err := ScanV2(data, w.Add); err != nil {
			return
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCrowdedBound writes a user whose first hashes make the Writer
// expect some 2^64/2^13 times more rows than come: the file holds the
// offsets of the buckets for the rows that came, merged down to the least
// k whose rows hold as many bytes of the hash, not of 2^maxBits buckets.
func TestCrowdedBound(t *testing.T) {
	const rows = 2 * estimateRows
	data := write(t, crowded(rows))
	f, err := Open(data)
	if err != nil {
		t.Fatal(err)
	}
	if max := rows*8 + (1<<16+1)*offsetSize + 4096; len(data) > max {
		t.Errorf("%d bytes for %d rows, want at most %d", len(data), rows, max)
	}
	if s := f.Section(""); s.shift != 64-16 {
		t.Errorf("k %d, want 16", 64-s.shift)
	}
}
