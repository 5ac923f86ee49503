package badgerstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/badgerstore/sealed"
)

// Apply carries out ops for user in order. The ops change an in-memory
// overlay of the values they touch, and each changed key is written once,
// when the ops are committed: in one transaction, or, when the changed
// keys would not fit in one, in several, each holding whole ops. Then the
// ops of the next transaction are carried out while Badger writes the one
// before. On error, the results are those of the ops committed before it.
//
// Before each transaction it makes sure the store may write (see Faults
// in health.go): a degraded store fails with store.ErrReadOnly, a failed
// one with store.ErrFailed, both wrapped, having committed nothing more.
func (s *Store) Apply(ctx context.Context, user string, ops []store.Op) (_ []store.Result, err error) {
	defer s.recoverFault(&err, "apply")
	if err := store.ValidUser(user); err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	if err := store.ValidOps(ops); err != nil {
		return nil, fmt.Errorf("apply: %w", err)
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
	// The state alone, to refuse before reading: writable looks at the
	// directory before each write, and a second look here would cost
	// every Apply a stat.
	if err := s.refusal(); err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	classes, err := s.register(ops)
	if err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	b := newBatch(ctx, s, user, classes)
	defer b.close()
	results := make([]store.Result, 0, len(ops))
	// Ops before sent are committed, or being committed in the one
	// transaction in flight; ops from sent to i are in the overlay,
	// waiting for the next commit. lastChange is the last of those that
	// changed something, and changes counts them.
	sent, lastChange, changes := 0, -1, 0
	// stop waits for the transaction in flight and returns the results
	// of the ops committed, with the error of that transaction or else
	// err.
	stop := func(err error) ([]store.Result, error) {
		done, werr := b.wait()
		if werr != nil {
			err = werr
		}
		return results[:done], err
	}
	for i := 0; ; {
		if i < len(ops) {
			if err := ctx.Err(); err != nil {
				return stop(fmt.Errorf("apply op %d: %w", i, err))
			}
			res, err := b.apply(&ops[i])
			if err == nil {
				if res.Changed {
					lastChange, changes = i, changes+1
				}
				results = append(results, res)
				i++
				continue
			}
			if !errors.Is(err, errFull) {
				return stop(fmt.Errorf("apply op %d: %w", i, err))
			}
			// Op i would not fit: commit the ops before it, then
			// try it again in a new transaction.
		}
		f, err := b.prepare(sent, i)
		if errors.Is(err, badger.ErrTxnTooBig) {
			// Badger counts otherwise than the budget assumed. Take
			// the ops back out of the overlay and do them again in
			// smaller transactions; an op alone that is too big
			// fails.
			b.rollback()
			results = results[:sent]
			if changes <= 1 {
				return stop(fmt.Errorf("apply op %d: %w (%d tokens): %w", lastChange, ErrOpTooLarge, ops[lastChange].Bag.Len(), err))
			}
			b.maxCount, b.maxSize = b.maxCount/2, b.maxSize/2
			i, lastChange, changes = sent, -1, 0
			continue
		}
		if err != nil {
			return stop(fmt.Errorf("apply ops %d to %d: %w", sent, i-1, err))
		}
		switch {
		case f != nil:
			// One transaction in flight at a time, so that if one
			// fails, the ops committed are a prefix of ops.
			if _, err := b.wait(); err != nil {
				f.txn.Discard()
				return stop(err)
			}
			if err := s.writable(false); err != nil {
				f.txn.Discard()
				return stop(fmt.Errorf("apply ops %d to %d: %w", sent, i-1, err))
			}
			b.send(f)
		case b.inflight != nil:
			// The ops since changed nothing: they stand or fall
			// with the transaction before them.
			b.inflight.end = i
		default:
			b.committed = i
		}
		sent, lastChange, changes = i, -1, 0
		if i == len(ops) {
			return stop(nil)
		}
	}
}

// register adds the classes of ops and of their steps not registered yet
// to the meta record, in a transaction of its own: a class registered by
// an Apply that fails later stays registered, which is harmless. The steps
// of an op that forgets are ignored, their classes too. It is called
// holding s.life and s.wmu.
func (s *Store) register(ops []store.Op) (*classList, error) {
	cur := s.classes.Load()
	var added []string
	add := func(c string) {
		if _, ok := cur.index[c]; !ok && !slices.Contains(added, c) {
			added = append(added, c)
		}
	}
	for i := range ops {
		if ops[i].Class == "" {
			continue
		}
		add(ops[i].Class)
		for _, st := range ops[i].Steps {
			add(st.Class)
		}
	}
	if added == nil {
		return cur, nil
	}
	if err := s.writable(false); err != nil {
		return nil, fmt.Errorf("register classes %q: %w", added, err)
	}
	next := newClassList(append(slices.Clone(cur.names), added...))
	if err := s.writeMetaRecord(s.metaRecord(next.names)); err != nil {
		if serr := s.writeFailed(err); serr != nil {
			return nil, fmt.Errorf("register classes %q: %w (%w)", added, err, serr)
		}
		return nil, fmt.Errorf("register classes %q: %w", added, err)
	}
	s.classes.Store(next)
	return next, nil
}

// errCommitHangs, returned by the commitErr hook of a test, makes the
// commit it stands for never end, as a Badger stuck in its writer.
var errCommitHangs = errors.New("commit hangs")

// errFull is returned by batch.apply for an op whose changes would take
// the keys waiting to be committed past the transaction budget.
var errFull = errors.New("transaction budget spent")

// defaultTxnShare is the share, in percent, of Badger's limits on a
// transaction that a commit may fill. The estimate of what the dirty keys
// take is exact in entries and high in bytes; the margin covers what
// Badger may count that it does not.
const defaultTxnShare = 95

// batch applies the ops of one Apply call.
//
// Its overlay holds every value the call has read or changed, committed
// or not, so that an op sees the effects of the ops before it without
// asking Badger again. An op changes only the overlay and marks the keys
// it changed dirty; prepare writes each dirty key once, whatever number of
// ops changed it: a token in 200 messages of a batch is one write, not
// 200 that Badger would count against the transaction's limits.
//
// Before an op changes anything, it checks that the keys it would make
// dirty fit in what is left of the transaction budget, counted as Badger's
// Txn.checkSize counts, and returns errFull if not: the ops before it are
// then committed and it is tried again. Nothing an op does can fail once
// it started changing the overlay, so an op never needs taking back out;
// the value each key had when it first became dirty is kept anyway, so
// that rollback can take out all the ops waiting, should Badger refuse
// the transaction after all.
type batch struct {
	ctx      context.Context
	s        *Store
	user     string
	classes  *classList
	nclasses int // len(classes.names)
	width    int // values in a row: a count and a weight per class

	// rtxn reads what is not in the overlay. A single snapshot serves
	// the whole call: only the holder of s.wmu writes, and what this call
	// wrote is in the overlay.
	rtxn *badger.Txn
	// wtxn is the transaction the next commit writes. Badger's
	// NewTransaction waits for every commit in flight, so it is opened
	// before the one before is sent, not after: otherwise preparing a
	// transaction would wait for Badger to write the last one, and the
	// two would never overlap.
	wtxn *badger.Txn

	// sec holds the user's sealed rows, which Badger's keys lie over
	// (seal.go); nil if none.
	sec *sealed.Section

	// The overlay. Token rows, laid out as store.Counts, are width values
	// each in one slice; a token absent from the store has a row of zeros.
	rows   map[bow.Hash]int32
	hashes []bow.Hash // row → token
	cells  []uint64
	// days holds each row's last day trained, unknownDay for a row read
	// from the cache, which keeps no days: training on a day no earlier
	// than the totals' last day needs none, since no row's day is later,
	// and the other ops read the days they need (resolveDays).
	days []store.Day
	seen map[store.Digest]seenRec // class -1 for none
	tot  *totals                  // nil until the first op that changes something
	// samp holds the samples the ops touched, dense.
	samp map[sampleKey]*dense

	// What changed since the last commit, with the values it had before.
	dirtyRows []int32
	rowBase   []uint64    // width per dirty row, in the order of dirtyRows
	dayBase   []store.Day // per dirty row, in the order of dirtyRows
	rowDirty  []bool      // by row
	seenBase  map[store.Digest]seenRec
	totDirty  bool
	totBase   totals
	sampDirty []sampleKey
	sampBase  map[sampleKey]dense

	// The transaction Badger is writing, if any, and the number of ops
	// committed before it.
	inflight  *inflight
	committed int
	// free holds transactions Badger has written, whose memory prepare
	// fills again.
	free []*inflight

	// The transaction budget, and what the dirty keys take of it.
	maxCount, maxSize int64
	count, size       int64
	// Upper bounds of the sizes of entries as budget counts them.
	rowCost, seenCost, totCost, sampleCost int64

	// The op in progress: its rows, bag counts and whether each is of
	// the bag's head, and the rows' values (width each) and days before
	// it.
	opRows   []int32
	opN      []uint64
	opHead   []bool
	opOld    []uint64
	opOldDay []store.Day

	// Scratch for reading.
	key      []byte
	missing  []bow.Hash
	missN    []uint64
	missHead []bool
	vals     []store.Counts
}

func newBatch(ctx context.Context, s *Store, user string, classes *classList) *batch {
	k := int64(len(classes.names))
	// Badger's Txn.checkSize counts an entry as its key, its value (both
	// short of the value threshold here) and 2 bytes of meta, plus 10 for
	// the version. A count, a weight, a step, a day or a total takes at
	// most MaxVarintLen64 bytes, a mark 8.
	const overhead, uv = 2 + 10, binary.MaxVarintLen64
	u := int64(len(user))
	sec := s.section(user)
	if sec != nil {
		s.overlay(user)
	}
	b := s.spare
	s.spare = nil
	if b == nil {
		b = &batch{
			rows:     make(map[bow.Hash]int32),
			seen:     make(map[store.Digest]seenRec),
			seenBase: make(map[store.Digest]seenRec),
			samp:     make(map[sampleKey]*dense),
			sampBase: make(map[sampleKey]dense),
		}
	}
	b.ctx, b.s, b.sec, b.user = ctx, s, sec, user
	b.classes, b.nclasses, b.width = classes, int(k), int(2*k)
	b.maxCount = s.db.MaxBatchCount() * s.txnShare / 100
	b.maxSize = s.db.MaxBatchSize() * s.txnShare / 100
	b.rowCost = 2 + u + 8 + (1+2*k)*uv + overhead
	b.seenCost = 2 + u + int64(len(store.Digest{})) + (4+2*k)*uv + 8 + overhead
	b.totCost = 2 + u + (3+3*k)*uv + overhead
	// A sample's key and moments; its levels are counted as they are.
	b.sampleCost = 2 + u + 1 + uv + 3*uv + overhead
	return b
}

// A batch's arrays and maps, sized by the tokens of a call's ops (some
// 60,000 rows for 256 messages of the SpamAssassin corpus) and by the
// transactions it commits (a few megabytes each), were made anew by every
// Apply, a third of what training into a store allocated. The store
// keeps the last batch's for the next (Store.spare), one set whatever the
// number of users, but not an overlay of more than maxSpareRows rows nor
// a transaction's memory for more than maxSpareTxnKeys keys. With the
// default memtables a transaction holds at most some 25,000 keys, and a
// training in batches of 256 messages leaves some 20 MB: two
// transactions' of 6 MB each and an overlay of 8, against a token cache
// of 128 MB.
const (
	maxSpareRows    = 1 << 17
	maxSpareTxnKeys = 1 << 15
)

// release leaves b's memory, emptied, to the store's next Apply, unless
// Badger may still read a transaction's (one a panic left in flight) or
// the call was far larger than usual. Whatever state b ended in, only
// arrays and maps go on, truncated or cleared, and only transactions
// Badger has written; all else is zeroed.
func (b *batch) release() {
	if b.inflight != nil || len(b.hashes) > maxSpareRows {
		return
	}
	var free []*inflight
	for _, f := range b.free {
		if cap(f.entries) <= maxSpareTxnKeys {
			// The entries point to keys Badger made.
			clear(f.entries[:cap(f.entries)])
			free = append(free, f)
		}
	}
	// What the maps and vals hold points to a call's seen records,
	// samples and rows; the other arrays hold numbers.
	clear(b.rows)
	clear(b.seen)
	clear(b.seenBase)
	clear(b.samp)
	clear(b.sampBase)
	clear(b.vals[:cap(b.vals)])
	s := b.s
	*b = batch{
		rows:      b.rows,
		hashes:    b.hashes[:0],
		cells:     b.cells[:0],
		days:      b.days[:0],
		seen:      b.seen,
		samp:      b.samp,
		dirtyRows: b.dirtyRows[:0],
		rowBase:   b.rowBase[:0],
		dayBase:   b.dayBase[:0],
		rowDirty:  b.rowDirty[:0],
		seenBase:  b.seenBase,
		sampDirty: b.sampDirty[:0],
		sampBase:  b.sampBase,
		free:      free,
		opRows:    b.opRows[:0],
		opN:       b.opN[:0],
		opHead:    b.opHead[:0],
		opOld:     b.opOld[:0],
		opOldDay:  b.opOldDay[:0],
		key:       b.key[:0],
		missing:   b.missing[:0],
		missN:     b.missN[:0],
		missHead:  b.missHead[:0],
		vals:      b.vals[:0],
	}
	s.spare = b
}

// dense is a sample in the overlay: its moments and a count per level.
type dense struct {
	n, sum, sq uint64
	hist       []uint64 // store.MaxLevels long
	levels     int      // levels with a count
}

func newDense(s store.Sample) *dense {
	d := &dense{n: s.N, sum: s.Sum, sq: s.SumSq, hist: make([]uint64, store.MaxLevels), levels: len(s.Bins)}
	for _, b := range s.Bins {
		d.hist[b.Level] = b.Count
	}
	return d
}

// add adds one value at level l, or takes one away (n = -1), which it
// does only where there is one: the seen record says what training added,
// so there always is, but for damage, which Check reports.
func (d *dense) add(l uint16, n int) {
	x := uint64(l)
	if n < 0 {
		if d.hist[l] == 0 {
			return
		}
		d.hist[l]--
		d.n, d.sum, d.sq = d.n-1, d.sum-x, d.sq-x*x
		if d.hist[l] == 0 {
			d.levels--
		}
		return
	}
	if d.hist[l] == 0 {
		d.levels++
	}
	d.hist[l]++
	d.n, d.sum, d.sq = d.n+1, d.sum+x, d.sq+x*x
}

// sample returns d as a store.Sample.
func (d *dense) sample() store.Sample {
	s := store.Sample{N: d.n, Sum: d.sum, SumSq: d.sq, Bins: make([]store.Bin, 0, d.levels)}
	for l, c := range d.hist {
		if c != 0 {
			s.Bins = append(s.Bins, store.Bin{Level: uint16(l), Count: c})
		}
	}
	return s
}

// seenSize is what op's seen record takes in the budget, at most.
func (b *batch) seenSize(op *store.Op) int64 {
	return b.seenCost + int64(len(op.Values))*2*binary.MaxVarintLen64
}

// levelCost is what one more level takes in a sample's value, at most.
const levelCost = 3 + binary.MaxVarintLen64

// sampleKeys calls f with the key of each sample the values of a message
// of class c touch.
func sampleKeys(c int, vs []store.Value, f func(sampleKey)) {
	if c < 0 {
		return
	}
	for _, v := range vs {
		f(sampleKey{measure: v.Measure, class: c})
	}
}

func (b *batch) close() {
	// Apply waits for the transaction in flight before it returns; this
	// is for a panic.
	if b.inflight != nil {
		t := time.NewTimer(b.s.opts.WriteTimeout)
		select {
		case <-b.inflight.done:
		case <-t.C:
			b.abandon(b.inflight)
		}
		t.Stop()
	}
	if b.rtxn != nil {
		b.rtxn.Discard()
	}
	if b.wtxn != nil {
		b.wtxn.Discard()
	}
	b.release()
}

func (b *batch) reader() *badger.Txn {
	if b.rtxn == nil {
		b.rtxn = b.s.db.NewTransaction(false)
	}
	return b.rtxn
}

func (b *batch) row(r int32) []uint64 {
	i := int(r) * b.width
	return b.cells[i : i+b.width : i+b.width]
}

// dirty reports whether anything waits to be committed.
func (b *batch) dirty() bool { return b.count > 0 }

// apply carries out op on the overlay, or returns errFull without
// changing anything if what it would change does not fit in the budget
// next to what waits to be committed.
func (b *batch) apply(op *store.Op) (store.Result, error) {
	prev, err := b.record(op.Digest)
	if err != nil {
		return store.Result{}, err
	}
	next := seenRec{class: -1}
	if op.Class != "" {
		next.class = b.classes.index[op.Class]
	}
	var res store.Result
	if prev.class >= 0 {
		res.Prev = b.classes.names[prev.class]
	}
	if prev.class == next.class {
		return res, nil
	}
	res.Changed = true
	if err := b.begin(op, prev); err != nil {
		return store.Result{}, err
	}
	if !b.fits(op, prev) {
		return store.Result{}, errFull
	}

	// From here on, nothing fails.
	if next.class >= 0 {
		next.steps = b.stepsOf(op.Steps)
		next.values = slices.Clone(op.Values)
		next.day, next.mark = op.Day, op.Mark
	}
	b.changeSamples(prev.class, prev.values, -1)
	b.changeSamples(next.class, next.values, 1)
	t := b.tot
	if !b.totDirty {
		b.totDirty = true
		b.totBase.messages = append(b.totBase.messages[:0], t.messages...)
		b.totBase.tokens = append(b.totBase.tokens[:0], t.tokens...)
		b.totBase.vocabulary = t.vocabulary
		b.totBase.lastDay = t.lastDay
		b.count++
		b.size += b.totCost
	}
	if _, ok := b.seenBase[op.Digest]; !ok {
		b.seenBase[op.Digest] = prev
		b.count++
		b.size += b.seenSize(op)
	}
	b.seen[op.Digest] = next
	if c := prev.class; c >= 0 {
		for k, r := range b.opRows {
			row, n := b.row(r), b.opN[k]
			if allZero(row) {
				// No row: a bag the message was not trained with has
				// nothing to take back from this token, not even steps.
				continue
			}
			// Take from the total exactly what the clamp lets us take
			// from the count, so that the two keep agreeing.
			d := min(row[2*c], n)
			row[2*c] -= d
			t.tokens[c] -= d
			addSteps(row, prev.steps, b.opHead[k], -int64(n))
			if allZero(row) {
				// The row is gone, its day with it: one trained
				// again starts afresh, as a new token would.
				b.days[r] = 0
			}
		}
		t.messages[c] = subClamp(t.messages[c], 1)
	}
	if c := next.class; c >= 0 {
		for k, r := range b.opRows {
			row, n := b.row(r), b.opN[k]
			row[2*c] += n
			t.tokens[c] += n
			addSteps(row, next.steps, b.opHead[k], int64(n))
			// An unknown day is no later than the totals' last day,
			// and so than op.Day: begin made sure.
			if d := b.days[r]; d == unknownDay || d < op.Day {
				b.days[r] = op.Day
			}
		}
		t.messages[c]++
		t.lastDay = max(t.lastDay, op.Day)
	}
	for k, r := range b.opRows {
		old, row := b.opOld[k*b.width:(k+1)*b.width], b.row(r)
		was, is := countsAny(old), countsAny(row)
		switch {
		case is && !was:
			t.vocabulary++
		case was && !is:
			t.vocabulary = subClamp(t.vocabulary, 1)
		}
		if !b.rowDirty[r] && (!slices.Equal(old, row) || b.opOldDay[k] != b.days[r]) {
			b.rowDirty[r] = true
			b.dirtyRows = append(b.dirtyRows, r)
			b.rowBase = append(b.rowBase, old...)
			b.dayBase = append(b.dayBase, b.opOldDay[k])
			b.count++
			b.size += b.rowCost
		}
	}
	return res, nil
}

// changeSamples adds (n = 1) or takes away (n = -1) the values of a
// message of class c, marking the samples changed dirty.
func (b *batch) changeSamples(c int, vs []store.Value, n int) {
	sampleKeys(c, vs, func(k sampleKey) {
		d := b.samp[k]
		if _, ok := b.sampBase[k]; !ok {
			b.sampBase[k] = dense{n: d.n, sum: d.sum, sq: d.sq, hist: slices.Clone(d.hist), levels: d.levels}
			b.sampDirty = append(b.sampDirty, k)
			b.count++
			b.size += b.sampleCost + int64(d.levels)*levelCost
		}
		if n > 0 {
			b.size += levelCost
		}
	})
	for _, v := range vs {
		b.samp[sampleKey{measure: v.Measure, class: c}].add(v.Level, n)
	}
}

// stepsOf returns steps as a seen record keeps them: by class index,
// trailing zero pairs dropped, the last step given for a class winning.
func (b *batch) stepsOf(steps []store.Step) []int64 {
	n := 0
	for _, st := range steps {
		n = max(n, 2*(b.classes.index[st.Class]+1))
	}
	v := make([]int64, n)
	for _, st := range steps {
		c := b.classes.index[st.Class]
		v[2*c], v[2*c+1] = st.Head, st.Body
	}
	for n > 0 && v[n-1] == 0 && v[n-2] == 0 {
		n -= 2
	}
	if n == 0 {
		return nil
	}
	return v[:n:n]
}

// addSteps adds n times steps to the weights in row: the head steps if
// head, else the body steps. The arithmetic wraps, so that subtracting
// later what was added gives back what was there, whatever came between.
func addSteps(row []uint64, steps []int64, head bool, n int64) {
	i := 1
	if head {
		i = 0
	}
	// steps[2c] and steps[2c+1] are class c's, whose weight is row[2c+1].
	for ; i < len(steps); i += 2 {
		if st := steps[i]; st != 0 {
			row[i|1] += uint64(st * n)
		}
	}
}

// fits reports whether the keys the op in progress, on a message trained
// as prev, may make dirty fit in the budget next to those already dirty.
// Anything fits into an empty transaction: whether an op alone is too
// big, Badger decides.
func (b *batch) fits(op *store.Op, prev seenRec) bool {
	if !b.dirty() {
		return true
	}
	count, size := b.count, b.size
	if !b.totDirty {
		count, size = count+1, size+b.totCost
	}
	if _, ok := b.seenBase[op.Digest]; !ok {
		count, size = count+1, size+b.seenSize(op)
	}
	samples := func(k sampleKey) {
		if _, ok := b.sampBase[k]; !ok {
			count, size = count+1, size+b.sampleCost+int64(b.samp[k].levels)*levelCost
		}
		size += levelCost
	}
	sampleKeys(prev.class, prev.values, samples)
	if op.Class != "" {
		sampleKeys(b.classes.index[op.Class], op.Values, samples)
	}
	for _, r := range b.opRows {
		if !b.rowDirty[r] {
			count, size = count+1, size+b.rowCost
		}
	}
	return count <= b.maxCount && size <= b.maxSize
}

// record returns d's seen record, of class -1 if there is none.
func (b *batch) record(d store.Digest) (seenRec, error) {
	if r, ok := b.seen[d]; ok {
		return r, nil
	}
	r, err := readSeen(b.reader(), b.user, d, nil)
	if err != nil {
		return seenRec{}, fmt.Errorf("read seen record: %w", err)
	}
	if r.class >= b.nclasses || len(r.steps) > b.width {
		return seenRec{}, fmt.Errorf("%w: seen record of unknown class %d or steps of %d classes", store.ErrInconsistent, r.class, len(r.steps)/2)
	}
	b.seen[d] = r
	return r, nil
}

// begin loads what op, on a message trained as prev, will change into the
// overlay, reading the totals and the tokens and samples not in it yet
// from the cache or Badger, and notes the rows' values before the op.
func (b *batch) begin(op *store.Op, prev seenRec) error {
	if err := b.loadTotals(); err != nil {
		return err
	}
	load := func(k sampleKey) {
		if b.samp[k] == nil {
			b.samp[k] = newDense(b.tot.samples.Of(int(k.measure), k.class))
		}
	}
	sampleKeys(prev.class, prev.values, load)
	if op.Class != "" {
		sampleKeys(b.classes.index[op.Class], op.Values, load)
	}
	b.opRows, b.opN, b.opHead, b.opOld, b.opOldDay = b.opRows[:0], b.opN[:0], b.opHead[:0], b.opOld[:0], b.opOldDay[:0]
	b.missing, b.missN, b.missHead = b.missing[:0], b.missN[:0], b.missHead[:0]
	hashes, counts, head := op.Bag.Hashes(), op.Bag.Counts(), op.Bag.Head()
	for i, h := range hashes {
		n := counts[i]
		if n == 0 {
			continue
		}
		if r, ok := b.rows[h]; ok {
			b.opRows = append(b.opRows, r)
			b.opN = append(b.opN, uint64(n))
			b.opHead = append(b.opHead, i < head)
		} else {
			b.missing = append(b.missing, h)
			b.missN = append(b.missN, uint64(n))
			b.missHead = append(b.missHead, i < head)
		}
	}
	if err := b.load(); err != nil {
		return err
	}
	// A row's day is needed unless training sets it to op.Day, which it
	// does when op.Day is no earlier than the last day trained on. An op
	// that only untrains keeps the days of the rows it leaves.
	if op.Class == "" || op.Day < b.tot.lastDay {
		if err := b.resolveDays(); err != nil {
			return err
		}
	}
	for _, r := range b.opRows {
		b.opOld = append(b.opOld, b.row(r)...)
		b.opOldDay = append(b.opOldDay, b.days[r])
	}
	return nil
}

// unknownDay stands for the day of a row read from the cache, which keeps
// no days; it is no day training is given in earnest (the year
// 11,760,000).
const unknownDay store.Day = math.MaxUint32

// resolveDays reads from Badger the days of the op's rows that came from
// the cache. Nothing else writes while an Apply runs, so the snapshot it
// reads holds the rows as the cache has them.
func (b *batch) resolveDays() error {
	txn := b.reader()
	for _, r := range b.opRows {
		if b.days[r] != unknownDay {
			continue
		}
		h := b.hashes[r]
		b.key = appendTokenKey(b.key[:0], b.user, h)
		item, err := txn.Get(b.key)
		if errors.Is(err, badger.ErrKeyNotFound) && b.sec != nil {
			var ok bool
			if _, b.days[r], ok, err = sealedRow(b.sec, h, nil); err == nil && !ok {
				err = badger.ErrKeyNotFound
			}
			if err == nil {
				continue
			}
		}
		if errors.Is(err, badger.ErrKeyNotFound) {
			return fmt.Errorf("%w: token %x is cached but not stored", store.ErrInconsistent, h)
		}
		if err != nil {
			return fmt.Errorf("read token %x: %w", h, err)
		}
		err = item.Value(func(v []byte) error {
			if len(v) == 0 {
				return fmt.Errorf("%w: token %x is cached but deleted", store.ErrInconsistent, h)
			}
			var err error
			b.days[r], _, err = decodeDay(v)
			return err
		})
		if err != nil {
			return fmt.Errorf("read token %x: %w", h, err)
		}
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
	first := int32(len(b.hashes))
	b.cells = append(b.cells, make([]uint64, len(b.missing)*b.width)...)
	// The cache copies the rows it has straight into the overlay's new
	// ones. Tokens found only in its old generation are not put back
	// here: the ones the op changes, its commit puts into the cache.
	miss, _, _ := b.s.cache.getTokens(b.user, b.missing, b.vals, b.width, b.cells[int(first)*b.width:])
	b.hashes = append(b.hashes, b.missing...)
	b.days = append(b.days, make([]store.Day, len(b.missing))...)
	b.rowDirty = append(b.rowDirty, make([]bool, len(b.missing))...)
	for i, h := range b.missing {
		r := first + int32(i)
		b.rows[h] = r
		b.opRows = append(b.opRows, r)
		b.opN = append(b.opN, b.missN[i])
		b.opHead = append(b.opHead, b.missHead[i])
		if len(b.vals[i]) > b.width {
			return fmt.Errorf("%w: token %x has counts of unknown classes", store.ErrInconsistent, h)
		}
		if b.vals[i] != nil {
			b.days[r] = unknownDay
		}
	}
	if len(miss) == 0 {
		return nil
	}
	// A sealed model's filter holds the keys over its sealed rows, which
	// cost a scan of what they are, not of the vocabulary.
	vocabulary := b.tot.vocabulary
	if b.sec != nil {
		vocabulary = 0
	}
	f, err := b.s.present.get(b.ctx, b.s.db, b.user, len(miss), vocabulary)
	if err != nil {
		return err
	}
	txn := b.reader()
	for _, i := range miss {
		h := b.missing[i]
		r := first + int32(i)
		row := b.row(r)
		var item *badger.Item
		err := badger.ErrKeyNotFound
		if f == nil || f.mayHave(h) {
			b.key = appendTokenKey(b.key[:0], b.user, h)
			item, err = txn.Get(b.key)
		}
		if errors.Is(err, badger.ErrKeyNotFound) {
			if b.sec != nil {
				c, day, ok, err := sealedRow(b.sec, h, row[:0])
				if err == nil && len(c) > b.width {
					err = fmt.Errorf("%w: counts of unknown classes", store.ErrInconsistent)
				}
				if err != nil {
					return fmt.Errorf("read token %x: %w", h, err)
				}
				if ok {
					b.days[r] = day
				}
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("read token %x: %w", h, err)
		}
		err = item.Value(func(v []byte) error {
			if len(v) == 0 {
				return nil // a tombstone over a sealed row: none
			}
			// row is capped at width: a longer row is decoded elsewhere.
			c, day, err := decodeRow(row[:0], v)
			if err == nil && len(c) > b.width {
				err = fmt.Errorf("%w: counts of unknown classes", store.ErrInconsistent)
			}
			b.days[r] = day
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
		if t, err = readTotals(b.reader(), b.user); err != nil {
			return fmt.Errorf("read totals: %w", err)
		}
	}
	if len(t.messages) > b.nclasses || len(t.tokens) > b.nclasses || len(t.forgotten) > b.nclasses {
		return fmt.Errorf("%w: totals of unknown classes", store.ErrInconsistent)
	}
	// A copy, since what the cache holds is shared and never modified.
	b.tot = &totals{
		messages:   make([]uint64, b.nclasses),
		tokens:     make([]uint64, b.nclasses),
		forgotten:  make([]uint64, b.nclasses),
		vocabulary: t.vocabulary,
		lastDay:    t.lastDay,
		samples:    t.samples,
	}
	copy(b.tot.messages, t.messages)
	copy(b.tot.tokens, t.tokens)
	copy(b.tot.forgotten, t.forgotten)
	return nil
}

// inflight is a transaction for Badger to write, and what to do once it
// is written.
type inflight struct {
	txn        *badger.Txn
	done       chan error
	first, end int // the ops it holds: first to end-1
	hashes     []bow.Hash
	vals       [][]uint64 // nil for a deleted token, else in arena
	tot        *totals    // nil if not written
	// What txn refers to until it ends: keys and values in buf, the
	// entries holding them.
	buf     []byte
	entries []badger.Entry
	arena   []uint64
}

// prepare writes every dirty key once into a transaction holding ops
// first to end-1, for send, or returns nil if nothing is dirty. If Badger
// refuses a write, prepare returns the error with the overlay unchanged,
// for rollback.
func (b *batch) prepare(first, end int) (f *inflight, err error) {
	if !b.dirty() {
		return nil, nil
	}
	txn := b.wtxn
	if txn == nil {
		txn = b.s.db.NewTransaction(true)
	}
	b.wtxn = nil
	defer func() {
		if err != nil {
			txn.Discard()
		}
	}()
	// The memory of a transaction written before, if any: this one is
	// prepared while the last is in flight, so two take turns.
	if n := len(b.free); n > 0 {
		f, b.free = b.free[n-1], b.free[:n-1]
	} else {
		f = &inflight{done: make(chan error, 1)}
	}
	// Keys and values are appended to buf, which txn refers to until it
	// ends: it is big enough up front never to move. size is the sum of
	// bounds of key and value lengths, and more.
	f.buf = room(f.buf, int(b.size), int(b.maxSize))
	buf := f.buf
	since := func(start int) []byte { return buf[start:len(buf):len(buf)] }
	// Entries in one array rather than one allocation each.
	f.entries = room(f.entries, int(b.count), int(b.maxCount))
	entries := f.entries
	set := func(key, value []byte) error {
		entries = append(entries, badger.Entry{Key: key, Value: value})
		return txn.SetEntry(&entries[len(entries)-1])
	}
	for i, r := range b.dirtyRows {
		row := b.row(r)
		if slices.Equal(row, b.rowBase[i*b.width:(i+1)*b.width]) && b.days[r] == b.dayBase[i] {
			continue // the ops since the last commit took back what they did
		}
		start := len(buf)
		buf = appendTokenKey(buf, b.user, b.hashes[r])
		key := since(start)
		if allZero(row) {
			// Over a sealed row, a tombstone; a key deleted would
			// let the row show through.
			if b.sec != nil {
				_, ok, err := b.sec.Get(uint64(b.hashes[r]), nil)
				if err != nil {
					return nil, fmt.Errorf("token %x: %w: %w", b.hashes[r], store.ErrInconsistent, err)
				}
				if ok {
					if err := set(key, nil); err != nil {
						return nil, err
					}
					continue
				}
			}
			if err := txn.Delete(key); err != nil {
				return nil, err
			}
			continue
		}
		if b.days[r] == unknownDay {
			// begin makes sure every op that needs a day has it.
			return nil, fmt.Errorf("%w: token %x changed without its day known", store.ErrInconsistent, b.hashes[r])
		}
		start = len(buf)
		buf = appendRow(buf, b.days[r], row)
		if err := set(key, since(start)); err != nil {
			return nil, err
		}
	}
	for d, was := range b.seenBase {
		rec := b.seen[d]
		if rec.equal(was) {
			continue
		}
		start := len(buf)
		buf = appendSeenKey(buf, b.user, d)
		key := since(start)
		if rec.class < 0 {
			if err := txn.Delete(key); err != nil {
				return nil, err
			}
			continue
		}
		start = len(buf)
		buf = appendSeen(buf, rec)
		if err := set(key, since(start)); err != nil {
			return nil, err
		}
	}
	if b.totDirty {
		start := len(buf)
		buf = appendUserPrefix(buf, kindTotals, b.user)
		key := since(start)
		start = len(buf)
		buf = appendTotals(buf, b.tot)
		if err := set(key, since(start)); err != nil {
			return nil, err
		}
	}
	// The samples changed, as the totals the cache gets will hold them.
	samples := b.tot.samples
	for _, k := range b.sampDirty {
		d := b.samp[k]
		if base := b.sampBase[k]; d.n == base.n && slices.Equal(d.hist, base.hist) {
			continue
		}
		smp := d.sample()
		samples = withSample(samples, k, smp)
		start := len(buf)
		buf = appendSampleKey(buf, b.user, k)
		key := since(start)
		if d.n == 0 {
			if err := txn.Delete(key); err != nil {
				return nil, err
			}
			continue
		}
		// A sample's value may grow past the size reserved for it;
		// appending to buf then would move what txn refers to.
		v := appendSample(nil, smp)
		if err := set(key, v); err != nil {
			return nil, err
		}
	}

	// What the cache and the presence filter are to learn once the
	// transaction is written, copied, since the overlay moves on.
	n := len(b.dirtyRows)
	f.txn, f.first, f.end, f.tot = txn, first, end, nil
	f.hashes = room(f.hashes, n, int(b.maxCount))[:n]
	f.vals = room(f.vals, n, int(b.maxCount))[:n]
	clear(f.vals)
	f.arena = room(f.arena, n*b.width, int(b.maxCount)*b.width)
	arena := f.arena
	for i, r := range b.dirtyRows {
		f.hashes[i] = b.hashes[r]
		row := b.row(r)
		if allZero(row) {
			continue
		}
		start := len(arena)
		arena = append(arena, row...)
		f.vals[i] = arena[start:len(arena):len(arena)]
	}
	if b.totDirty {
		f.tot = &totals{
			messages:   slices.Clone(b.tot.messages),
			tokens:     slices.Clone(b.tot.tokens),
			forgotten:  slices.Clone(b.tot.forgotten),
			vocabulary: b.tot.vocabulary,
			lastDay:    b.tot.lastDay,
			samples:    samples,
		}
	}
	b.tot.samples = samples
	return f, nil
}

// room returns s emptied, with room for n elements. An array too small
// is made again twice as large, but no larger than limit, the most a
// transaction holds, unless n is: grown to fit each transaction, the
// arrays were made again for most of the first few.
func room[T any](s []T, n, limit int) []T {
	if cap(s) >= n {
		return s[:0]
	}
	return make([]T, 0, max(n, min(2*cap(s), limit)))
}

// send hands f to Badger, which writes it while the next ops run, and
// cleans the overlay: what was dirty is in f. Nothing may be in flight.
func (b *batch) send(f *inflight) {
	if h := b.s.commitErr; h != nil {
		if err := h(f.first); err != nil {
			f.txn.Discard()
			if err != errCommitHangs {
				f.done <- err
			}
			b.inflight = f
			b.clean()
			return
		}
	}
	b.wtxn = b.s.db.NewTransaction(true)
	f.txn.CommitWith(func(err error) { f.done <- err })
	b.inflight = f
	b.clean()
}

// wait waits for the transaction in flight, if any, and brings the cache
// and the presence filter up to date with what it wrote. It returns the
// number of ops committed before the first not committed, or the error
// of the transaction and the number of ops committed before it.
//
// A commit that takes longer than WriteTimeout is given up: Badger is
// stuck, and whether it will still write it cannot be known, so the
// store fails, for a reopen to learn the truth from the log, and forgets
// what it cached of the user meanwhile.
func (b *batch) wait() (int, error) {
	f := b.inflight
	if f == nil {
		return b.committed, nil
	}
	b.inflight = nil
	t := time.NewTimer(b.s.opts.WriteTimeout)
	defer t.Stop()
	var err error
	select {
	case err = <-f.done:
	case <-t.C:
		b.abandon(f)
		return b.committed, fmt.Errorf("apply ops %d to %d: commit: %w: Badger did not write it within %v, and may still", f.first, f.end-1, store.ErrFailed, b.s.opts.WriteTimeout)
	}
	// Badger is done with f's memory, and the next prepare, which fills
	// it again, comes after what follows reads it.
	f.txn = nil
	b.free = append(b.free, f)
	if err != nil {
		// What a failed commit left in Badger is not known: the cache
		// must not answer for it, least of all as a whole model, nor
		// the presence filter, which would send a read of a key it
		// may have written to the sealed row under it.
		b.s.cache.forget(b.user)
		b.s.present.drop(b.user)
		if serr := b.s.writeFailed(err); serr != nil {
			return b.committed, fmt.Errorf("apply ops %d to %d: commit: %w (%w)", f.first, f.end-1, err, serr)
		}
		return b.committed, fmt.Errorf("apply ops %d to %d: commit: %w", f.first, f.end-1, err)
	}
	b.s.cache.committed(b.user, f.hashes, f.vals, f.tot)
	b.s.present.add(b.user, f.hashes)
	b.committed = f.end
	return b.committed, nil
}

// abandon gives up waiting for f: the store fails, and what it cached of
// the user goes, since f may yet change it.
func (b *batch) abandon(f *inflight) {
	b.s.cache.forget(b.user)
	b.s.present.drop(b.user)
	b.s.fail(FaultStall, fmt.Sprintf("a commit of %d ops did not finish within %v", f.end-f.first, b.s.opts.WriteTimeout))
}

// rollback takes the ops not yet prepared for a transaction back out of
// the overlay.
func (b *batch) rollback() {
	for i, r := range b.dirtyRows {
		copy(b.row(r), b.rowBase[i*b.width:(i+1)*b.width])
		b.days[r] = b.dayBase[i]
	}
	for d, rec := range b.seenBase {
		b.seen[d] = rec
	}
	if b.totDirty {
		copy(b.tot.messages, b.totBase.messages)
		copy(b.tot.tokens, b.totBase.tokens)
		b.tot.vocabulary = b.totBase.vocabulary
		b.tot.lastDay = b.totBase.lastDay
	}
	for k, base := range b.sampBase {
		*b.samp[k] = base
	}
	b.clean()
}

// clean forgets what was dirty.
func (b *batch) clean() {
	for _, r := range b.dirtyRows {
		b.rowDirty[r] = false
	}
	b.dirtyRows, b.rowBase, b.dayBase = b.dirtyRows[:0], b.rowBase[:0], b.dayBase[:0]
	clear(b.seenBase)
	b.totDirty = false
	clear(b.sampBase)
	b.sampDirty = b.sampDirty[:0]
	b.count, b.size = 0, 0
}

// countsAny reports whether row has a non-zero count: whether the token
// is in the vocabulary. A row kept only by its weights is not.
func countsAny(row []uint64) bool {
	for i := 0; i < len(row); i += 2 {
		if row[i] != 0 {
			return true
		}
	}
	return false
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
