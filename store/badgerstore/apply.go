package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"
	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
)

// Apply carries out ops for user in order, in one transaction unless it is
// too big for Badger; then in several, each holding whole ops. On error,
// the results are those of the ops committed before it.
func (s *Store) Apply(ctx context.Context, user string, ops []store.Op) ([]store.Result, error) {
	if err := store.ValidUser(user); err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	for i := range ops {
		if c := ops[i].Class; c != "" {
			if err := store.ValidClass(c); err != nil {
				return nil, fmt.Errorf("apply op %d: %w", i, err)
			}
		}
	}
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	defer s.life.RUnlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	classes, err := s.register(ops)
	if err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	b := newBatch(s, user, classes)
	defer func() { b.txn.Discard() }()
	results := make([]store.Result, 0, len(ops))
	// Ops before done are committed; ops from start on are in b.txn.
	done, start := 0, 0
	for i := 0; i < len(ops); i++ {
		if err := ctx.Err(); err != nil {
			return results[:done], fmt.Errorf("apply op %d: %w", i, err)
		}
		res, err := b.apply(&ops[i])
		if errors.Is(err, badger.ErrTxnTooBig) {
			if i == start {
				return results[:done], fmt.Errorf("apply op %d: %w (%d tokens): %w", i, ErrOpTooLarge, len(ops[i].Bag), err)
			}
			if err := b.recommit(); err != nil {
				return results[:done], fmt.Errorf("apply ops %d to %d: %w", start, i-1, err)
			}
			done, start = i, i
			i-- // op i again, in the new transaction
			continue
		}
		if err != nil {
			return results[:done], fmt.Errorf("apply op %d: %w", i, err)
		}
		results = append(results, res)
	}
	if err := b.commit(); err != nil {
		return results[:done], fmt.Errorf("apply ops %d to %d: %w", start, len(ops)-1, err)
	}
	return results, nil
}

// register adds the classes of ops not registered yet to the meta record,
// in a transaction of its own: a class registered by an Apply that fails
// later stays registered, which is harmless.
func (s *Store) register(ops []store.Op) (*classList, error) {
	cur := s.classes.Load()
	var added []string
	for i := range ops {
		c := ops[i].Class
		if _, ok := cur.index[c]; c == "" || ok || slices.Contains(added, c) {
			continue
		}
		added = append(added, c)
	}
	if added == nil {
		return cur, nil
	}
	next := newClassList(append(slices.Clone(cur.names), added...))
	v, err := encodeMeta(meta{Schema: schemaVersion, Classes: next.names})
	if err != nil {
		return nil, err
	}
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(metaKey, v) }); err != nil {
		return nil, fmt.Errorf("register classes %q: %w", added, err)
	}
	s.classes.Store(next)
	return next, nil
}

// batch applies the ops of one Apply call. Its overlay holds every value
// the call has read or changed, so that an op sees the effects of the ops
// before it, committed or not, without asking Badger again; an undo log
// takes the op in progress back out of the overlay when Badger refuses it.
type batch struct {
	s       *Store
	user    string
	classes *classList
	width   int // len(classes.names)
	txn     *badger.Txn

	// The overlay. Token counts are rows of width counts in one slice; a
	// token absent from Badger has a row of zeros.
	rows   map[bow.Hash]int32
	hashes []bow.Hash // row → token
	counts []uint64
	seen   map[store.Digest]int // class index, -1 for none
	tot    *totals              // nil until the first op that changes something

	// What was written since the last commit, to rewrite it into a new
	// transaction when the current one turns out too big.
	dirtyRows []int32
	rowDirty  []bool // by row
	dirtySeen map[store.Digest]struct{}
	totDirty  bool

	// The op in progress: its rows and bag counts, their values before it
	// (width each), the rows it changed, and what else it changed.
	opRows    []int32
	opN       []uint64
	opOld     []uint64
	opChanged []int32
	opDigest  store.Digest
	opSeenOld int
	opTot     totals

	// Scratch for reading.
	key     []byte
	missing []bow.Hash
	missN   []uint64
	vals    []store.Counts

	// buf holds the keys and values handed to txn, which keeps references
	// to them until it ends; it is never reallocated, only replaced.
	buf []byte
}

func newBatch(s *Store, user string, classes *classList) *batch {
	return &batch{
		s:         s,
		user:      user,
		classes:   classes,
		width:     len(classes.names),
		txn:       s.db.NewTransaction(true),
		rows:      make(map[bow.Hash]int32),
		seen:      make(map[store.Digest]int),
		dirtySeen: make(map[store.Digest]struct{}),
	}
}

func (b *batch) row(r int32) []uint64 {
	i := int(r) * b.width
	return b.counts[i : i+b.width : i+b.width]
}

// apply carries out op on the overlay and writes what it changed into the
// transaction. If Badger refuses the writes, it takes op back out of the
// overlay and returns badger.ErrTxnTooBig.
func (b *batch) apply(op *store.Op) (store.Result, error) {
	prev, err := b.seenClass(op.Digest)
	if err != nil {
		return store.Result{}, err
	}
	next := -1
	if op.Class != "" {
		next = b.classes.index[op.Class]
	}
	var res store.Result
	if prev >= 0 {
		res.Prev = b.classes.names[prev]
	}
	if prev == next {
		return res, nil
	}
	res.Changed = true
	if err := b.begin(op); err != nil {
		return store.Result{}, err
	}
	t := b.tot
	if prev >= 0 {
		for k, r := range b.opRows {
			row := b.row(r)
			// Take from the total exactly what the clamp lets us take
			// from the count, so that the two keep agreeing.
			d := min(row[prev], b.opN[k])
			row[prev] -= d
			t.tokens[prev] -= d
		}
		t.messages[prev] = subClamp(t.messages[prev], 1)
	}
	if next >= 0 {
		for k, r := range b.opRows {
			b.row(r)[next] += b.opN[k]
			t.tokens[next] += b.opN[k]
		}
		t.messages[next]++
	}
	b.opDigest, b.opSeenOld = op.Digest, prev
	b.seen[op.Digest] = next
	for k, r := range b.opRows {
		was, is := !allZero(b.opOld[k*b.width:(k+1)*b.width]), !allZero(b.row(r))
		switch {
		case is && !was:
			t.vocabulary++
		case was && !is:
			t.vocabulary = subClamp(t.vocabulary, 1)
		}
	}
	if err := b.write(); err != nil {
		b.undo()
		return store.Result{}, err
	}
	for _, r := range b.opChanged {
		if !b.rowDirty[r] {
			b.rowDirty[r] = true
			b.dirtyRows = append(b.dirtyRows, r)
		}
	}
	b.dirtySeen[op.Digest] = struct{}{}
	b.totDirty = true
	return res, nil
}

// seenClass returns the class index d is trained as, -1 for none.
func (b *batch) seenClass(d store.Digest) (int, error) {
	if c, ok := b.seen[d]; ok {
		return c, nil
	}
	c, err := readSeen(b.txn, b.user, d)
	if err != nil {
		return 0, fmt.Errorf("read seen record: %w", err)
	}
	if c >= b.width {
		return 0, fmt.Errorf("%w: seen record of unknown class %d", store.ErrInconsistent, c)
	}
	b.seen[d] = c
	return c, nil
}

// begin loads what op will change into the overlay, reading the totals
// and the tokens not in it yet from the cache or Badger, and saves their
// values for undo.
func (b *batch) begin(op *store.Op) error {
	if err := b.loadTotals(); err != nil {
		return err
	}
	b.opTot.messages = append(b.opTot.messages[:0], b.tot.messages...)
	b.opTot.tokens = append(b.opTot.tokens[:0], b.tot.tokens...)
	b.opTot.vocabulary = b.tot.vocabulary
	b.opRows, b.opN, b.opOld = b.opRows[:0], b.opN[:0], b.opOld[:0]
	b.missing, b.missN = b.missing[:0], b.missN[:0]
	for h, n := range op.Bag {
		if n == 0 {
			continue
		}
		if r, ok := b.rows[h]; ok {
			b.opRows = append(b.opRows, r)
			b.opN = append(b.opN, uint64(n))
		} else {
			b.missing = append(b.missing, h)
			b.missN = append(b.missN, uint64(n))
		}
	}
	if err := b.load(); err != nil {
		return err
	}
	for _, r := range b.opRows {
		b.opOld = append(b.opOld, b.row(r)...)
	}
	return nil
}

// load adds rows for b.missing to the overlay and to the op.
func (b *batch) load() error {
	if len(b.missing) == 0 {
		return nil
	}
	b.vals = slices.Grow(b.vals[:0], len(b.missing))[:len(b.missing)]
	clear(b.vals)
	miss, _ := b.s.cache.getTokens(b.user, b.missing, b.vals)
	first := int32(len(b.hashes))
	b.counts = append(b.counts, make([]uint64, len(b.missing)*b.width)...)
	b.hashes = append(b.hashes, b.missing...)
	b.rowDirty = append(b.rowDirty, make([]bool, len(b.missing))...)
	for i, h := range b.missing {
		r := first + int32(i)
		b.rows[h] = r
		b.opRows = append(b.opRows, r)
		b.opN = append(b.opN, b.missN[i])
		if len(b.vals[i]) > b.width {
			return fmt.Errorf("%w: token %x has counts of unknown classes", store.ErrInconsistent, h)
		}
		copy(b.row(r), b.vals[i])
	}
	for _, i := range miss {
		h := b.missing[i]
		b.key = appendTokenKey(b.key[:0], b.user, h)
		item, err := b.txn.Get(b.key)
		if errors.Is(err, badger.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read token %x: %w", h, err)
		}
		row := b.row(first + int32(i))
		err = item.Value(func(v []byte) error {
			c, err := decodeCounts(row[:0], v)
			if err == nil && len(c) > b.width {
				err = fmt.Errorf("%w: counts of unknown classes", store.ErrInconsistent)
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("read token %x: %w", h, err)
		}
	}
	return nil
}

func (b *batch) loadTotals() error {
	if b.tot != nil {
		return nil
	}
	t, ok, _ := b.s.cache.getTotals(b.user)
	if !ok {
		var err error
		if t, err = readTotals(b.txn, b.user); err != nil {
			return fmt.Errorf("read totals: %w", err)
		}
	}
	if len(t.messages) > b.width || len(t.tokens) > b.width {
		return fmt.Errorf("%w: totals of unknown classes", store.ErrInconsistent)
	}
	// A copy, since what the cache holds is shared and never modified.
	b.tot = &totals{
		messages:   make([]uint64, b.width),
		tokens:     make([]uint64, b.width),
		vocabulary: t.vocabulary,
	}
	copy(b.tot.messages, t.messages)
	copy(b.tot.tokens, t.tokens)
	return nil
}

// write puts what the op in progress changed into the transaction.
func (b *batch) write() error {
	b.opChanged = b.opChanged[:0]
	for k, r := range b.opRows {
		if slices.Equal(b.row(r), b.opOld[k*b.width:(k+1)*b.width]) {
			continue
		}
		if err := b.writeRow(r); err != nil {
			return err
		}
		b.opChanged = append(b.opChanged, r)
	}
	if err := b.writeSeen(b.opDigest); err != nil {
		return err
	}
	return b.writeTotals()
}

func (b *batch) undo() {
	for k, r := range b.opRows {
		copy(b.row(r), b.opOld[k*b.width:(k+1)*b.width])
	}
	b.seen[b.opDigest] = b.opSeenOld
	copy(b.tot.messages, b.opTot.messages)
	copy(b.tot.tokens, b.opTot.tokens)
	b.tot.vocabulary = b.opTot.vocabulary
}

// Keys and values are appended to buf, which is first given room enough
// that append never moves what txn already refers to.
const maxKeyLen = 2 + store.MaxUserLen + len(store.Digest{})

func (b *batch) reserve(n int) {
	if cap(b.buf)-len(b.buf) < n {
		b.buf = make([]byte, 0, max(n, 64<<10))
	}
}

// since returns the bytes appended to buf since it was start long.
func (b *batch) since(start int) []byte { return b.buf[start:len(b.buf):len(b.buf)] }

func (b *batch) writeRow(r int32) error {
	row := b.row(r)
	b.reserve(maxKeyLen + len(row)*10)
	start := len(b.buf)
	b.buf = appendTokenKey(b.buf, b.user, b.hashes[r])
	key := b.since(start)
	if allZero(row) {
		return b.txn.Delete(key)
	}
	start = len(b.buf)
	b.buf = appendCounts(b.buf, row)
	return b.txn.Set(key, b.since(start))
}

func (b *batch) writeSeen(d store.Digest) error {
	b.reserve(maxKeyLen + 10)
	start := len(b.buf)
	b.buf = appendSeenKey(b.buf, b.user, d)
	key := b.since(start)
	c := b.seen[d]
	if c < 0 {
		return b.txn.Delete(key)
	}
	start = len(b.buf)
	b.buf = appendSeen(b.buf, c)
	return b.txn.Set(key, b.since(start))
}

func (b *batch) writeTotals() error {
	b.reserve(maxKeyLen + (2*b.width+2)*10)
	start := len(b.buf)
	b.buf = appendUserPrefix(b.buf, kindTotals, b.user)
	key := b.since(start)
	start = len(b.buf)
	b.buf = appendTotals(b.buf, b.tot)
	return b.txn.Set(key, b.since(start))
}

// recommit replaces the transaction, which Badger refused to grow by the
// op in progress, with one holding each value written since the last
// commit once, and commits it. It fits: the refused transaction held all
// those values, some several times.
func (b *batch) recommit() error {
	b.txn.Discard()
	b.txn = b.s.db.NewTransaction(true)
	b.buf = nil
	for _, r := range b.dirtyRows {
		if err := b.writeRow(r); err != nil {
			return err
		}
	}
	for d := range b.dirtySeen {
		if err := b.writeSeen(d); err != nil {
			return err
		}
	}
	if b.totDirty {
		if err := b.writeTotals(); err != nil {
			return err
		}
	}
	return b.commit()
}

// commit commits the transaction, brings the cache up to date with what
// it wrote and starts a new transaction for the ops still to come.
func (b *batch) commit() error {
	if len(b.dirtyRows) == 0 && len(b.dirtySeen) == 0 && !b.totDirty {
		return nil
	}
	if err := b.txn.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	hashes := make([]bow.Hash, len(b.dirtyRows))
	vals := make([][]uint64, len(b.dirtyRows))
	arena := make([]uint64, 0, len(b.dirtyRows)*b.width)
	for i, r := range b.dirtyRows {
		hashes[i] = b.hashes[r]
		b.rowDirty[r] = false
		row := b.row(r)
		if allZero(row) {
			continue
		}
		start := len(arena)
		arena = append(arena, row...)
		vals[i] = arena[start:len(arena):len(arena)]
	}
	var t *totals
	if b.totDirty {
		t = &totals{
			messages:   slices.Clone(b.tot.messages),
			tokens:     slices.Clone(b.tot.tokens),
			vocabulary: b.tot.vocabulary,
		}
	}
	b.s.cache.committed(b.user, hashes, vals, t)
	b.dirtyRows = b.dirtyRows[:0]
	clear(b.dirtySeen)
	b.totDirty = false
	b.txn = b.s.db.NewTransaction(true)
	b.buf = nil
	return nil
}

func allZero(c []uint64) bool {
	for _, n := range c {
		if n != 0 {
			return false
		}
	}
	return true
}

func subClamp(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}
