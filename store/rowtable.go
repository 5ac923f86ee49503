package store

import (
	"cmp"
	"math"
	"math/bits"
	"runtime"
	"slices"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/internal/offheap"
)

// rowTable holds a memory model's token rows, each with its last day
// trained, in one open-addressed array of 16-byte slots (linear probing,
// at most four fifths full, growing as grownSize says): a token's hash and its
// row packed in one word. Training and scoring are mostly lookups of rare
// tokens, each a cache miss: a slot costs one where a Go map to rows in
// chunks cost two or three. A first training of a large corpus holds
// little else in memory: trec07-late's 30,167 messages make 2.1 million
// rows, of which all but 79 pack (packRow), and a row takes 20 to 25
// bytes of the array, where 32-byte slots at most three quarters full
// took 43 to 64. A probe past four fifths full walks some 13 slots on
// average to find a token absent, which is three or four cache lines of
// 16-byte slots, as many as 9 slots of 32 bytes were. The rows that do not
// pack go in a map beside it. A large array is mapped outside the Go heap
// (offheap.Make).
type rowTable struct {
	slots []rowSlot
	n     int
	wide  map[bow.Hash]wideRowVals
	// unmap releases slots when they are mapped, and cleanup does it
	// if the table is dropped without release.
	unmap   func()
	cleanup runtime.Cleanup
}

// rowSlot must hold no pointer: the garbage collector does not see
// slots mapped outside the heap.
type rowSlot struct {
	hash bow.Hash
	// row is packRow's word; 0 marks a free slot, which no row packs to
	// (a row of zeros is deleted), and wideRow one whose row is in
	// rowTable.wide.
	row uint64
}

// wideRow marks a slot whose row is in rowTable.wide; packRow never
// returns it.
const wideRow = math.MaxUint64

// wideRowVals is a row that does not pack, and its day.
type wideRowVals struct {
	vals []uint64
	day  Day
}

// packRow packs row v and its day into one word, 16 bits each: the day,
// the two classes' counts, and the first class's weight, the second's
// being its negation. That is the row of a two-class model, whose
// training adds to one class's weight what it takes from the other's;
// a count or weight that needs more bits, a third class, a day past
// 2149, or weights that are not opposite do not pack, and false says so.
func packRow(v []uint64, day Day) (uint64, bool) {
	if len(v) > 4 || day > math.MaxUint16 {
		return 0, false
	}
	var x [4]uint64
	copy(x[:], v)
	c0, w0, c1, w1 := x[0], int64(x[1]), x[2], int64(x[3])
	if c0 > math.MaxUint16 || c1 > math.MaxUint16 || w0 != int64(int16(w0)) || w1 != -w0 {
		return 0, false
	}
	p := uint64(day)<<48 | c0<<32 | c1<<16 | uint64(uint16(w0))
	return p, p != wideRow
}

// unpackRow writes the row packed in p into dst, as many of its four
// values as dst holds, and returns its day. The values dst lacks are
// zero: a row put into a table is no wider than its model.
func unpackRow(p uint64, dst []uint64) Day {
	w := int64(int16(p))
	row := [4]uint64{p >> 32 & 0xffff, uint64(w), p >> 16 & 0xffff, uint64(-w)}
	copy(dst, row[:])
	return Day(p >> 48)
}

// minRowSlots is the size of a table's first array.
const minRowSlots = 64

// len returns the number of rows.
func (t *rowTable) len() int { return t.n }

// home returns the slot where the probe for h starts in a table of n
// slots: h scaled to n. Hashes are xxhash digests, as even in their top
// bits as a mix would make them, and a home that ascends with the hash
// lets ascending read the rows in hash order from one pass over the
// array, where finding them in that order missed the cache at every row.
func home(h bow.Hash, n int) int {
	hi, _ := bits.Mul64(uint64(h), uint64(n))
	return int(hi)
}

// find returns the slot of h and true, or where h would go and false; -1
// if the table has no slots.
func (t *rowTable) find(h bow.Hash) (int, bool) {
	if len(t.slots) == 0 {
		return -1, false
	}
	for i := home(h, len(t.slots)); ; {
		switch s := &t.slots[i]; {
		case s.row == 0:
			return i, false
		case s.hash == h:
			return i, true
		}
		if i++; i == len(t.slots) {
			i = 0
		}
	}
}

// touch reads the home slot of each of hashes, so that the finds that
// follow find them in the processor's cache. A find of a large table
// waits on memory at every row; these reads depend on nothing before
// them, and the processor has many of them in flight at once. A first
// training of trec07-late's 30,167 messages spent 4 of its 25 seconds of
// processor in find, and took 7% less time with the rows touched first.
func (t *rowTable) touch(hashes []bow.Hash) {
	if len(t.slots) == 0 {
		return
	}
	var sum uint64
	for _, h := range hashes {
		sum += t.slots[home(h, len(t.slots))].row
	}
	// The sum is used, so that the reads are not optimized away.
	runtime.KeepAlive(sum)
}

// at returns what find does, having first made room for one more row,
// so that set can put h at the slot returned.
func (t *rowTable) at(h bow.Hash) (int, bool) {
	if t.n+1 > maxRows(len(t.slots)) {
		t.grow()
	}
	return t.find(h)
}

// row copies the row of the taken slot i into dst, zero beyond the row,
// and returns its day. dst is at least as long as any row put: as wide
// as the model was then.
func (t *rowTable) row(i int, dst []uint64) Day {
	s := &t.slots[i]
	clear(dst)
	if s.row != wideRow {
		return unpackRow(s.row, dst)
	}
	w := t.wide[s.hash]
	copy(dst, w.vals)
	return w.day
}

// set puts h's row v, with day, at slot i, which at returned for h; a
// row of zeros deletes h's. v is copied.
func (t *rowTable) set(i int, h bow.Hash, v []uint64, day Day) {
	s := &t.slots[i]
	n := len(v)
	for n > 0 && v[n-1] == 0 {
		n--
	}
	if n == 0 {
		if s.row != 0 {
			t.remove(i)
		}
		return
	}
	if s.row == 0 {
		t.n++
	}
	wasWide := s.row == wideRow
	s.hash = h
	if p, ok := packRow(v[:n], day); ok {
		s.row = p
		if wasWide {
			delete(t.wide, h)
		}
		return
	}
	s.row = wideRow
	if t.wide == nil {
		t.wide = make(map[bow.Hash]wideRowVals)
	}
	t.wide[h] = wideRowVals{append(t.wide[h].vals[:0], v[:n]...), day}
}

// remove empties the taken slot i, moving later rows of its run back
// into the hole where their home slot allows (deletion without
// tombstones, Knuth's algorithm R), so that a probe never stops short.
func (t *rowTable) remove(i int) {
	if s := &t.slots[i]; s.row == wideRow {
		delete(t.wide, s.hash)
	}
	n := len(t.slots)
	for j := i; ; {
		if j++; j == n {
			j = 0
		}
		s := &t.slots[j]
		if s.row == 0 {
			break
		}
		// The row at j may fill the hole unless its home lies
		// cyclically in (i, j].
		k := home(s.hash, n)
		if i < j && (k <= i || k > j) || i > j && k <= i && k > j {
			t.slots[i] = *s
			i = j
		}
	}
	t.slots[i] = rowSlot{}
	t.n--
}

// grow moves the rows into a larger array.
func (t *rowTable) grow() { t.growTo(grownSize(len(t.slots))) }

// smallRowSlots is the size below which a table doubles as it grows:
// 16 MiB of slots, less than the rest of a training process holds. Each
// growth moves every row, a cache miss apiece, so a table that grows by a
// quarter has moved each row some five times, and one that doubles, twice:
// a first training of the SpamAssassin corpus's first 4,837 messages
// (545,000 rows) spent a tenth of its serial learner's time moving rows.
// Past this size a doubling's slack, up to three fifths of the array,
// grows with the model, and the table grows by a quarter, to stay between
// 64% and 80% full.
const smallRowSlots = 1 << 20

// grownSize is the size of the array that replaces one of n slots.
func grownSize(n int) int {
	if n < smallRowSlots {
		return max(2*n, minRowSlots)
	}
	return n / 4 * 5
}

// reserve makes room for n more rows without growing again. Rows put in
// hash order into a table that grows as it fills would all be homed in
// its first part, in one run that every put walks to its end: whoever
// puts rows that come sorted (a dump, a message's bag) reserves for them
// first.
func (t *rowTable) reserve(n int) {
	if need := t.n + n; need > maxRows(len(t.slots)) {
		t.growTo(max((need+3)/4*5, grownSize(len(t.slots))))
	}
}

// growTo moves the rows into an array of n slots.
func (t *rowTable) growTo(n int) {
	mapped := t.unmap != nil
	prev, unmap := t.slots, t.detach()
	t.slots = nil
	if t.slots, t.unmap = offheap.Make[rowSlot](n); t.unmap != nil {
		t.cleanup = runtime.AddCleanup(t, func(unmap func()) { unmap() }, t.unmap)
	}
	// The new array fills in the order the old one is read (a home
	// ascends with the hash), so giving back the old one's pages as they
	// are read keeps the two from being held whole at once.
	freed := 0
	for i := range prev {
		if s := &prev[i]; s.row != 0 {
			j, _ := t.find(s.hash)
			t.slots[j] = *s
		}
		if mapped && (i+1)%(1<<16) == 0 {
			freed += offheap.Drop(prev[freed : i+1])
		}
	}
	unmap()
}

// detach returns what releases the array now in use, which the table
// then no longer owns.
func (t *rowTable) detach() func() {
	unmap := t.unmap
	if unmap == nil {
		return func() {}
	}
	t.cleanup.Stop()
	t.unmap = nil
	return unmap
}

// release drops every row and gives back the array at once.
func (t *rowTable) release() {
	t.detach()()
	*t = rowTable{}
}

// each calls fn with every row in table order, in dst, which is as wide
// as the widest row put. fn must not keep the row, nor change the table.
func (t *rowTable) each(dst []uint64, fn func(h bow.Hash, row []uint64, day Day)) {
	for i := range t.slots {
		if t.slots[i].row != 0 {
			fn(t.slots[i].hash, dst, t.row(i, dst))
		}
	}
}

// ascending calls fn with every row in ascending order of hash, in dst
// as each does, and stops at the first error fn returns.
//
// A row sits in the first free slot from its home on, and a home ascends
// with the hash; deletion shifts rows back without ever leaving a free
// slot between a row and its home. So every row homed before a free slot
// sits before it: the rows between two free slots (a run) are those homed
// there, and the rows in order are the runs in order, each sorted. The
// run that reaches the end of the array goes on at its start, and comes
// last; the rows before the first free slot that are homed there come
// first.
func (t *rowTable) ascending(dst []uint64, fn func(h bow.Hash, row []uint64, day Day) error) error {
	return t.runs(dst, fn, nil)
}

// drain is ascending for a table that is dropped after: as it goes, the
// memory of the slots it has read is given back to the system, and the
// table is empty once it returns, whatever it returns. A bulk load that
// drains the model it writes out does not hold it twice.
func (t *rowTable) drain(dst []uint64, fn func(h bow.Hash, row []uint64, day Day) error) error {
	defer t.release()
	if t.unmap == nil {
		return t.ascending(dst, fn)
	}
	freed := 0
	return t.runs(dst, fn, func(first, end int) {
		// The slots before first are read again with the run that
		// wraps, at the end.
		if end > first {
			freed = max(freed, first)
			freed += offheap.Drop(t.slots[freed:end])
		}
	})
}

// runs is ascending, calling read, if not nil, once the rows of slots
// from first up to end have all been handed to fn, first being the first
// free slot.
func (t *rowTable) runs(dst []uint64, fn func(h bow.Hash, row []uint64, day Day) error, read func(first, end int)) error {
	n := len(t.slots)
	first := slices.IndexFunc(t.slots, func(s rowSlot) bool { return s.row == 0 })
	if t.n == 0 || first < 0 {
		return nil
	}
	var run []int
	emit := func() error {
		slices.SortFunc(run, func(a, b int) int { return cmp.Compare(t.slots[a].hash, t.slots[b].hash) })
		for _, i := range run {
			if err := fn(t.slots[i].hash, dst, t.row(i, dst)); err != nil {
				return err
			}
		}
		run = run[:0]
		return nil
	}
	for i := range first {
		if home(t.slots[i].hash, n) <= i {
			run = append(run, i)
		}
	}
	if err := emit(); err != nil {
		return err
	}
	for i := first + 1; i <= n+first; i++ {
		j := i % n
		switch s := &t.slots[j]; {
		case s.row == 0:
			if err := emit(); err != nil {
				return err
			}
			if read != nil {
				read(first, min(i, n))
			}
		case j >= first || home(s.hash, n) > j:
			run = append(run, j)
		}
	}
	return emit()
}

// maxRows is how many rows a table of n slots holds before it grows.
func maxRows(n int) int { return n / 5 * 4 }
