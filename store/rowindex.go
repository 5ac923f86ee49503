package store

import (
	"unsafe"

	"github.com/spamd/spamd/bow"
)

// RowIndex is a read-only copy in memory of a model's token rows, for a
// backend whose rows are stored in a form slower to search: built once,
// from rows in ascending hash order, then read by any number of
// goroutines at once without a lock. It is a memory model's table (16
// bytes a slot, at most four fifths full), so a lookup is one cache miss,
// and rows added in hash order fill its array from start to end.
//
// Its array is outside the Go heap when large, and given back when the
// index is no longer reachable; a reader keeps it alive by holding it.
type RowIndex struct {
	t rowTable
	// next is the slot after the last row added, while rows have come
	// in ascending hash order and none has wrapped around the array's
	// end; -1 once one has not.
	next int
	last bow.Hash
}

// NewRowIndex returns an empty index with room for n rows.
func NewRowIndex(n int) *RowIndex {
	x := &RowIndex{}
	x.t.reserve(n)
	return x
}

// Add puts h's row v, which is copied. Rows are added before the index
// is shared, best in ascending hash order; a row of zeros is none.
//
// A row that comes in order goes to its home slot or, if the rows before
// reach past it, to the slot after theirs: every slot from its home to
// there holds a row homed no later, so that is where a probe would have
// put it, without the probe, which in a table four fifths full walks
// some thirteen slots.
func (x *RowIndex) Add(h bow.Hash, v []uint64, day Day) {
	n := len(x.t.slots)
	if x.next >= 0 && (x.t.n == 0 || h > x.last) && x.t.n < maxRows(n) {
		if i := max(home(h, n), x.next); i < n {
			x.t.set(i, h, v, day)
			x.last = h
			if x.t.slots[i].row != 0 {
				x.next = i + 1
			}
			return
		}
	}
	x.next = -1
	i, _ := x.t.at(h)
	x.t.set(i, h, v, day)
}

// Len returns the number of rows.
func (x *RowIndex) Len() int { return x.t.len() }

// Bytes returns the memory the index takes, its array's.
func (x *RowIndex) Bytes() int64 {
	return int64(len(x.t.slots)) * int64(unsafe.Sizeof(rowSlot{}))
}

// Touch reads where each of hashes would be, so that the Gets that follow
// find them in the processor's cache (rowTable.touch).
func (x *RowIndex) Touch(hashes []bow.Hash) { x.t.touch(hashes) }

// Get copies h's row into dst, zero beyond the row, and reports whether
// the index has it; dst is left as it was if not. dst must be at least as
// long as any row added.
func (x *RowIndex) Get(h bow.Hash, dst []uint64) bool {
	i, ok := x.t.find(h)
	if ok {
		x.t.row(i, dst)
	}
	return ok
}
