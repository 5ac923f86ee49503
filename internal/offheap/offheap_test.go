package offheap

import (
	"runtime"
	"testing"
	"unsafe"
)

type slot struct {
	a, b uint64
	c    [4]uint32
}

// TestMake makes arrays below and above the size that goes outside the
// heap: each is zero and writable, and a large one is mapped where the
// system maps memory.
func TestMake(t *testing.T) {
	tests := []struct {
		name   string
		n      int
		mapped bool
	}{
		{"empty", 0, false},
		{"small", 1000, false},
		{"just below", minBytes/32 - 1, false},
		{"large", minBytes / 32 * 3, runtime.GOOS == "linux"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, free := Make[slot](tt.n)
			if len(s) != tt.n || (free != nil) != tt.mapped {
				t.Fatalf("got %d slots, mapped %v; want %d, mapped %v", len(s), free != nil, tt.n, tt.mapped)
			}
			for i := range s {
				if s[i] != (slot{}) {
					t.Fatalf("slot %d is not zero", i)
				}
				s[i] = slot{a: uint64(i), c: [4]uint32{3: 1}}
			}
			for i := range s {
				if s[i].a != uint64(i) || s[i].c[3] != 1 {
					t.Fatalf("slot %d lost what was written", i)
				}
			}
			if free != nil {
				free()
			}
		})
	}
}

// TestDrop drops parts of a mapped array: whole huge pages inside the
// part read as zero after, everything else keeps its value, and the
// count returned ends at the last whole page.
func TestDrop(t *testing.T) {
	const perPage = hugePage / 32
	s, free := Make[slot](5 * perPage)
	if free == nil {
		t.Skip("arrays are not mapped here")
	}
	defer free()
	fill := func() {
		for i := range s {
			s[i] = slot{a: uint64(i) + 1}
		}
	}
	// The mapping starts at a page boundary, but not always a huge one.
	first := 0
	for first < len(s) && (uintptrOf(&s[first])%hugePage) != 0 {
		first++
	}
	tests := []struct {
		name     string
		from, to int
	}{
		{"less than a page", first, first + perPage - 1},
		{"one page", first, first + perPage},
		{"a page and a half, off a boundary", first + perPage/2, first + 2*perPage + perPage/2},
		{"two pages", first + perPage, first + 3*perPage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fill()
			covered := Drop(s[tt.from:tt.to])
			// Whole pages within [from, to): from rounded up, to down.
			lo := tt.from + (perPage-(tt.from-first)%perPage)%perPage
			hi := tt.to - (tt.to-first)%perPage
			if hi <= lo {
				lo, hi = tt.from, tt.from
			}
			if want := hi - tt.from; hi > lo && covered != want || hi == lo && covered != 0 {
				t.Errorf("Drop covered %d slots, want %d", covered, hi-tt.from)
			}
			for i := range s {
				dropped := i >= lo && i < hi
				if got := s[i].a == 0; got != dropped {
					t.Fatalf("slot %d (from %d to %d, pages %d to %d): zero %v, want %v", i, tt.from, tt.to, lo, hi, got, dropped)
				}
			}
		})
	}
}

func uintptrOf(p *slot) uintptr { return uintptr(unsafe.Pointer(p)) }

// TestMakeRefusesPointers makes arrays of types with and without
// pointers: only plain values may live where the collector does not look.
func TestMakeRefusesPointers(t *testing.T) {
	type withString struct {
		a uint64
		s string
	}
	tests := []struct {
		name  string
		make  func()
		panic bool
	}{
		{"plain struct", func() { Make[slot](1) }, false},
		{"array of plain", func() { Make[[4]uint32](1) }, false},
		{"string field", func() { Make[withString](1) }, true},
		{"pointer", func() { Make[*slot](1) }, true},
		{"slice", func() { Make[[]byte](1) }, true},
		{"array of strings", func() { Make[[2]string](1) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if got := recover() != nil; got != tt.panic {
					t.Errorf("panicked %v, want %v", got, tt.panic)
				}
			}()
			tt.make()
		})
	}
}

// TestDropOddSize drops part of a mapped array of elements whose size
// does not divide a huge page: nothing is dropped, since an element
// could straddle a page's edge.
func TestDropOddSize(t *testing.T) {
	type odd [24]byte
	s, free := Make[odd](3 * hugePage / 24)
	if free == nil {
		t.Skip("arrays are not mapped here")
	}
	defer free()
	for i := range s {
		s[i][0] = 1
	}
	if n := Drop(s); n != 0 {
		t.Errorf("Drop covered %d elements, want none", n)
	}
	for i := range s {
		if s[i][0] != 1 {
			t.Fatalf("element %d was dropped", i)
		}
	}
}
