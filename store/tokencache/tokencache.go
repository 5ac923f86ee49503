// Package tokencache holds the table of token rows that store backends
// keep in memory so that classifying mostly stays out of their storage:
// one implementation, shared by badgerstore (whose commits update it) and
// redisstore (whose node cache Redis's client tracking invalidates).
//
// A Table maps a (user number, token hash) pair to the token's row, laid
// out as store.Counts, or to "known absent". It knows nothing of when a
// row goes stale: that is the backend's business, which decides what to
// put and under which user number (a backend may give a user a new number
// to drop all its rows at once). A Table is not safe for concurrent use:
// the backend guards it, and must not copy it once used.
//
// # Method
//
// Rows live in open-addressed arrays of fixed-size entries that hold the
// row of a two-class model inline, in 32 bits a value: a lookup costs
// about one cache miss, where a Go map of slices cost three or four (the
// group's control word, the slot, the slice's array), and scoring a
// message is mostly lookups. Counts past 2^32 and weights outside int32,
// which a two-class model hardly ever has, go aside like the rows of more
// classes: 32 bits keep an entry at half a cache line, where 64 would need
// three quarters, and entries would then straddle lines.
//
// It keeps two generations. Entries go into cur, which grows as it fills
// up to its bound; a full cur becomes old, and the old one is dropped.
// Lookups try cur, then old, so the value found is the newest; callers
// put what they found only in old back into cur, so a working set that
// fits in one generation moves across rotations instead of being dropped.
// That bounds memory at two generations and keeps eviction off the read
// path.
package tokencache

import (
	"math"
	"math/bits"
	"runtime"
	"slices"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/internal/offheap"
)

// Table maps a user's token to its row. The zero value caches nothing;
// New makes one of a given size.
type Table struct {
	cur, old []entry
	// curMem and oldMem own cur's and old's arrays, which are outside
	// the heap when large: a cache at its bound would otherwise be most
	// of a daemon's live heap, and let as much garbage pile up again.
	curMem, oldMem *generation
	n              int // entries in cur
	maxSlots       int // slots of a generation at its bound; 0 turns caching off
	rotated        uint64
	// wide holds the rows that do not fit in an entry: of tokens with a
	// count or weight of a class past the first inlineClasses, or too
	// big for 32 bits. Their entries say wideCounts.
	wide Bounded[key, []uint64]
}

type key struct {
	user uint32
	hash bow.Hash
}

// inlineClasses is the number of classes whose count and weight an entry
// holds.
const inlineClasses = 2

type entry struct {
	hash bow.Hash
	user uint32 // user id + 1; 0 marks an empty slot
	// width is the number of values in the row, trailing zeros dropped;
	// 0 means the token is known to be absent, wideCounts that its row
	// is in Table.wide.
	width uint32
	vals  Packed
}

// Packed is a row, laid out as store.Counts, of a model of at most two
// classes in 32 bits a value: counts as uint32, weights as int32. It is
// what an entry holds inline, and what store's memory model keeps.
type Packed [2 * inlineClasses]uint32

// Pack puts row v into p, reporting false, with p unchanged, if it does
// not fit. Values past v's length are left as they are.
func (p *Packed) Pack(v []uint64) bool {
	if len(v) > len(p) {
		return false
	}
	for i, x := range v {
		if i%2 == 0 && x > math.MaxUint32 || i%2 == 1 && int64(x) != int64(int32(x)) {
			return false
		}
	}
	for i, x := range v {
		p[i] = uint32(x)
	}
	return true
}

// Unpack writes the first n values of p into dst.
func (p *Packed) Unpack(dst []uint64, n int) {
	for i := range n {
		if i%2 == 0 {
			dst[i] = uint64(p[i])
		} else {
			dst[i] = uint64(int64(int32(p[i])))
		}
	}
}

const (
	wideCounts = 1 << 31
	// EntryBytes is the size of an entry, what a cached token costs.
	EntryBytes   = 32 // unsafe.Sizeof(entry{})
	minSlots     = 1 << 12
	wideFraction = 8 // wide entries may take 1/wideFraction of the slots
)

// New returns a table of about bytes bytes: two generations of entries
// fill the budget. A budget too small for a useful table caches nothing.
func New(bytes int64) Table {
	var t Table
	if n := bytes / (2 * EntryBytes); n >= minSlots {
		t.maxSlots = int(n)
	}
	t.wide = NewBounded[key, []uint64](t.maxSlots / wideFraction)
	return t
}

// Room returns how many tokens one generation holds.
func (t *Table) Room() int { return t.maxSlots / 4 * 3 }

// Len returns the number of entries in the current generation; it drops
// when the table rotates.
func (t *Table) Len() int { return t.n }

// Rotations returns how many times the table has dropped a generation,
// Reset included: an entry put when it said r is still there, unless
// overwritten, as long as it says at most r+1.
func (t *Table) Rotations() uint64 { return t.rotated }

// slot returns where the probe for the token starts in a table of n
// slots: the high bits of a multiplicative mix of the hash and the user
// id, scaled to n. Multiplying rather than masking lets n be any size, so
// a generation uses all of its budget; mixing first matters because the
// scaling keeps the top bits, and tokens put in hash order (as a backend
// warming its cache from a scan does) would otherwise land in one long
// run of slots.
func slot(user uint32, h bow.Hash, n int) int {
	x := uint64(h) ^ uint64(user)<<32
	x *= 0x9e3779b97f4a7c15
	x ^= x >> 29
	hi, _ := bits.Mul64(x*0xbf58476d1ce4e5b9, uint64(n))
	return int(hi)
}

// find returns the entry of user id's token h, or nil, and whether it is
// in the old generation.
func (t *Table) find(id uint32, h bow.Hash) (e *entry, old bool) {
	if e := probe(t.cur, id+1, h); e != nil && e.user != 0 {
		return e, false
	}
	if e := probe(t.old, id+1, h); e != nil && e.user != 0 {
		return e, true
	}
	return nil, false
}

// probe returns the slot of gen holding (user, h), or the empty slot where
// it belongs, or nil if gen has no slots. The table never fills beyond
// three quarters, so an empty slot is always found.
func probe(gen []entry, user uint32, h bow.Hash) *entry {
	if len(gen) == 0 {
		return nil
	}
	for i := slot(user, h, len(gen)); ; {
		e := &gen[i]
		if e.user == 0 || e.user == user && e.hash == h {
			return e
		}
		if i++; i == len(gen) {
			i = 0
		}
	}
}

// Row is a row found in a table, to be copied out with CopyTo.
type Row struct {
	e    entry
	wide []uint64 // the row, when it is kept aside
}

// Len returns the number of values of the row, trailing zeros dropped;
// 0 for a token known to be absent.
func (r Row) Len() int {
	if r.wide != nil {
		return len(r.wide)
	}
	return int(r.e.width)
}

// CopyTo copies the row into dst, which must be at least Len values long
// and zero beyond them.
func (r Row) CopyTo(dst []uint64) {
	if r.wide != nil {
		copy(dst, r.wide)
		return
	}
	r.e.vals.Unpack(dst, int(r.e.width))
}

// Get returns user id's token h's row, whether the table has it (a row
// of Len 0 is a token known to be absent) and whether it was found only
// in the old generation, which a caller should put back to keep it.
func (t *Table) Get(id uint32, h bow.Hash) (r Row, ok, old bool) {
	e, old := t.find(id, h)
	switch {
	case e == nil:
		return Row{}, false, false
	case e.width == wideCounts:
		v, ok := t.wide.Get(key{id, h})
		if !ok {
			return Row{}, false, false
		}
		return Row{wide: v}, true, old
	}
	return Row{e: *e}, true, old
}

// Touch reads the slot where the probe for each of user id's hashes
// starts, in both generations, so that the Gets that follow find them in
// the processor's cache: a Get of a large table waits on memory, one
// token at a time, where these reads depend on nothing and the processor
// has many of them in flight at once.
func (t *Table) Touch(id uint32, hashes []bow.Hash) {
	var sum uint32
	for _, gen := range [2][]entry{t.cur, t.old} {
		if len(gen) == 0 {
			continue
		}
		for _, h := range hashes {
			sum += gen[slot(id+1, h, len(gen))].user
		}
	}
	// The sum is used, so that the reads are not optimized away.
	runtime.KeepAlive(sum)
}

// Has reports whether the table has an entry for user id's token h, even
// one whose row, kept aside, was evicted (which Get does not find).
func (t *Table) Has(id uint32, h bow.Hash) bool {
	e, _ := t.find(id, h)
	return e != nil
}

// Put caches a copy of row v (nil: known absent) for user id's token h.
func (t *Table) Put(id uint32, h bow.Hash, v []uint64) {
	if t.maxSlots == 0 {
		return
	}
	if t.n+1 > len(t.cur)/4*3 {
		t.grow()
	}
	e := probe(t.cur, id+1, h)
	if e.user == 0 {
		t.n++
	}
	// Rows are as wide as the class list was; the values of classes a
	// token never had take no room.
	n := len(v)
	for n > 0 && v[n-1] == 0 {
		n--
	}
	*e = entry{hash: h, user: id + 1, width: uint32(n)}
	if !e.vals.Pack(v[:n]) {
		*e = entry{hash: h, user: id + 1, width: wideCounts}
		t.wide.Put(key{id, h}, slices.Clone(v[:n]))
	}
}

// generation owns the array of a generation's entries.
type generation struct {
	entries []entry
	free    func() // nil for an array in the heap
	cleanup runtime.Cleanup
}

// newGeneration makes an array of n empty entries, outside the heap when
// large, where a cleanup gives it back should the table be dropped.
func newGeneration(n int) *generation {
	g := &generation{}
	if g.entries, g.free = offheap.Make[entry](n); g.free != nil {
		g.cleanup = runtime.AddCleanup(g, func(free func()) { free() }, g.free)
	}
	return g
}

// release gives g's array back at once; nothing may use it after.
func (g *generation) release() {
	if g == nil || g.free == nil {
		return
	}
	g.cleanup.Stop()
	g.free()
	g.free, g.entries = nil, nil
}

// setCur makes g the current generation, with the entries of prev, which
// it then gives back.
func (t *Table) setCur(g *generation) {
	prev, prevMem := t.cur, t.curMem
	t.cur, t.curMem = g.entries, g
	for i := range prev {
		if e := &prev[i]; e.user != 0 {
			*probe(t.cur, e.user, e.hash) = *e
		}
	}
	prevMem.release()
}

// Reserve grows the current generation, within the table's bound, to hold
// n more entries without growing again: warming a model of known size
// then fills it once, where doubling would move every entry anew at each
// step, a random access each.
func (t *Table) Reserve(n int) {
	need := min((t.n+n)*4/3+4, t.maxSlots)
	if need <= len(t.cur) {
		return
	}
	t.setCur(newGeneration(max(need, minSlots)))
}

// grow doubles cur, up to its bound, or, at the bound, makes it old and
// starts anew.
func (t *Table) grow() {
	if len(t.cur) < t.maxSlots {
		t.setCur(newGeneration(min(max(2*len(t.cur), minSlots), t.maxSlots)))
		return
	}
	// The dropped generation's array in the heap is the new one's,
	// cleared; one outside it is given back, and a new mapping's pages
	// are taken only as they fill.
	t.rotated++
	drop := t.oldMem
	t.old, t.oldMem = t.cur, t.curMem
	if drop != nil && drop.free == nil && len(drop.entries) == len(t.cur) {
		clear(drop.entries)
	} else {
		drop.release()
		drop = newGeneration(len(t.cur))
	}
	t.cur, t.curMem, t.n = drop.entries, drop, 0
}

// Reset drops every entry.
func (t *Table) Reset() {
	t.rotated += 2
	t.curMem.release()
	t.oldMem.release()
	t.cur, t.old, t.curMem, t.oldMem, t.n = nil, nil, nil, nil, 0
	t.wide.Clear()
}

// Bounded is a map of at most max entries, or of entries of at most max
// bytes in all, that evicts entries at random when full. Random eviction
// needs no bookkeeping on the read path, which is what matters here: a hit
// costs one map lookup under a shared lock, and the hot tokens of mail
// (Zipf-distributed) come straight back after an unlucky eviction. Like a
// Table, it is not safe for concurrent use.
type Bounded[K comparable, V any] struct {
	m    map[K]V
	max  int
	used int
	size func(V) int // nil: each entry counts 1
}

// NewBounded returns an empty map of at most max entries; one of max 0
// holds nothing.
func NewBounded[K comparable, V any](max int) Bounded[K, V] {
	return Bounded[K, V]{m: make(map[K]V), max: max}
}

// NewSized returns an empty map of entries of at most max bytes in all,
// an entry taking size(v) bytes; an entry bigger than max is not kept.
func NewSized[K comparable, V any](max int, size func(V) int) Bounded[K, V] {
	return Bounded[K, V]{m: make(map[K]V), max: max, size: size}
}

func (b *Bounded[K, V]) sizeOf(v V) int {
	if b.size == nil {
		return 1
	}
	return max(b.size(v), 1)
}

// Get returns the value of k and whether there is one.
func (b *Bounded[K, V]) Get(k K) (V, bool) {
	v, ok := b.m[k]
	return v, ok
}

// Put sets the value of k, evicting others at random if the map is full.
func (b *Bounded[K, V]) Put(k K, v V) {
	n := b.sizeOf(v)
	if old, ok := b.m[k]; ok {
		b.used -= b.sizeOf(old)
		delete(b.m, k)
	}
	if n > b.max {
		return
	}
	for b.used+n > b.max {
		// Evicting a slice of the map at once keeps the cost of starting
		// a map iteration off most puts. Go starts each iteration at a
		// random place, which makes the victims random.
		evict := len(b.m)/64 + 1
		for victim, old := range b.m {
			b.used -= b.sizeOf(old)
			delete(b.m, victim)
			if evict--; evict == 0 {
				break
			}
		}
	}
	b.m[k] = v
	b.used += n
}

// Delete removes k.
func (b *Bounded[K, V]) Delete(k K) {
	if old, ok := b.m[k]; ok {
		b.used -= b.sizeOf(old)
		delete(b.m, k)
	}
}

// Len returns the number of entries.
func (b *Bounded[K, V]) Len() int { return len(b.m) }

// Clear removes every entry.
func (b *Bounded[K, V]) Clear() {
	clear(b.m)
	b.used = 0
}
