package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/spamd/spamd/bow"
)

// Memory is a Store held in memory, for evaluation runs, a first
// training's bulk load and tests.
// One RWMutex guards it: Lookup, Totals, Seen, Users and Check share the
// read lock, Apply takes the write lock. Nothing survives Close or the
// process. The zero value is not usable; call NewMemory.
type Memory struct {
	mu      sync.RWMutex
	closed  bool
	classes []string       // append-only: a class keeps its index forever
	index   map[string]int // class name → index in classes
	users   map[string]*memModel
}

// memModel is one user's model. Its token rows are in a rowTable, a
// pointer-free array the garbage collector never scans.
type memModel struct {
	width    int                // values per row: a count and a weight per class when last grown
	rows     rowTable           // token → its row and last day trained
	scratch  []uint64           // a row of width values, for Apply under the write lock
	seen     map[Digest]seenRec // message → how it is trained
	messages []uint64           // per class
	tokens   []uint64           // per class
	vocab    uint64             // rows with a non-zero count
	forgot   []uint64           // per class: seen records pruned
	lastDay  Day
	samples  SampleSet // the values of the seen records
	// snap is samples as Totals gives them, shared and never modified:
	// the filter reads them for every message, and one message changes
	// but a few. stale lists the samples changed since, rebuilt by the
	// next reader; Apply adds to it under the write lock, readers take
	// it under snapMu.
	snapMu sync.Mutex
	snap   Samples
	stale  map[[2]int]bool // measure, class
}

// seenRec is a seen record: the index of the class a message is trained
// as, the steps its training added, a head and a body step per class
// index, and its values.
type seenRec struct {
	class  int
	steps  []int64
	values []Value
	day    Day
	mark   uint64
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{index: make(map[string]int), users: make(map[string]*memModel)}
}

// Totals returns the per-class totals of user's model.
func (m *Memory) Totals(_ context.Context, user string) (Totals, error) {
	if err := ValidUser(user); err != nil {
		return Totals{}, fmt.Errorf("totals: %w", err)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return Totals{}, fmt.Errorf("totals: %w", ErrClosed)
	}
	n := len(m.classes)
	t := Totals{
		Classes:  slices.Clone(m.classes),
		Messages: make([]uint64, n),
		Tokens:   make([]uint64, n),
	}
	if mod := m.users[user]; mod != nil {
		copy(t.Messages, mod.messages)
		copy(t.Tokens, mod.tokens)
		t.Vocabulary = mod.vocab
		t.Samples = mod.samplesNow()
		t.LastDay = mod.lastDay
		if slices.ContainsFunc(mod.forgot, func(n uint64) bool { return n != 0 }) {
			t.Forgotten = make([]uint64, n)
			copy(t.Forgotten, mod.forgot)
		}
	}
	return t, nil
}

// samplesNow returns the model's samples: the snapshot, its stale
// samples rebuilt into a new one that shares the others. Callers hold at
// least the read lock, which keeps the samples from changing meanwhile.
func (mod *memModel) samplesNow() Samples {
	mod.snapMu.Lock()
	defer mod.snapMu.Unlock()
	if len(mod.stale) == 0 {
		return mod.snap
	}
	next := slices.Clone(mod.snap)
	copied := map[int]bool{}
	for k := range mod.stale {
		m, c := k[0], k[1]
		for len(next) <= m {
			next = append(next, nil)
		}
		if !copied[m] {
			next[m] = slices.Clone(next[m])
			copied[m] = true
		}
		for len(next[m]) <= c {
			next[m] = append(next[m], Sample{})
		}
		next[m][c] = mod.samples.Of(m, c)
	}
	clear(mod.stale)
	mod.snap = next
	return next
}

// changeSamples adds (n = 1) or takes away (n = -1) the values of a
// message of class c, marking the samples they change stale; it is
// called under the write lock.
func (mod *memModel) changeSamples(c int, vs []Value, n int) {
	mod.samples.Add(c, vs, n)
	if mod.stale == nil {
		mod.stale = make(map[[2]int]bool)
	}
	for _, v := range vs {
		mod.stale[[2]int{int(v.Measure), c}] = true
	}
}

// Lookup returns the counts of each hash for user. All the Counts of one
// call share one backing array, as long as the number of classes.
func (m *Memory) Lookup(ctx context.Context, user string, hashes []bow.Hash) ([]Counts, error) {
	return m.LookupInto(ctx, user, hashes, new(LookupBuffer))
}

// LookupInto is Lookup in b's memory (Filler).
func (m *Memory) LookupInto(_ context.Context, user string, hashes []bow.Hash, b *LookupBuffer) ([]Counts, error) {
	if err := ValidUser(user); err != nil {
		return nil, fmt.Errorf("lookup: %w", err)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, fmt.Errorf("lookup: %w", ErrClosed)
	}
	out := b.Rows(len(hashes))
	mod := m.users[user]
	if mod == nil {
		return out, nil
	}
	w := 2 * len(m.classes)
	values := b.values[:0]
	mod.rows.touch(hashes)
	for i, h := range hashes {
		r, ok := mod.rows.find(h)
		if !ok {
			continue
		}
		if cap(values)-len(values) < w {
			// Room for every row still to come, found or not, and
			// twice the room there was, so that a reused buffer grows
			// to what messages need. The rows already read keep the
			// array they are in.
			values = make([]uint64, 0, max((len(hashes)-i)*w, 2*cap(values)))
		}
		c := values[len(values) : len(values)+w : len(values)+w]
		values = values[:len(values)+w]
		mod.rows.row(r, c)
		out[i] = c
	}
	b.values = values
	return out, nil
}

// Seen returns the class message d was trained as for user, "" if none.
func (m *Memory) Seen(_ context.Context, user string, d Digest) (string, error) {
	if err := ValidUser(user); err != nil {
		return "", fmt.Errorf("seen: %w", err)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return "", fmt.Errorf("seen: %w", ErrClosed)
	}
	if mod := m.users[user]; mod != nil {
		if rec, ok := mod.seen[d]; ok {
			return m.classes[rec.class], nil
		}
	}
	return "", nil
}

// Apply carries out ops for user in order, each one whole. Since nothing
// can fail halfway in memory, an error only comes from invalid names
// (nothing applied) or ctx ending between two ops.
func (m *Memory) Apply(ctx context.Context, user string, ops []Op) ([]Result, error) {
	if err := ValidUser(user); err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	if err := ValidOps(ops); err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("apply: %w", ErrClosed)
	}
	results := make([]Result, 0, len(ops))
	for i := range ops {
		if err := ctx.Err(); err != nil {
			return results, fmt.Errorf("apply op %d: %w", i, err)
		}
		results = append(results, m.apply(user, &ops[i]))
	}
	return results, nil
}

func (m *Memory) apply(user string, op *Op) Result {
	mod := m.users[user]
	prev := seenRec{class: -1}
	if mod != nil {
		if rec, ok := mod.seen[op.Digest]; ok {
			prev = rec
		}
	}
	next := seenRec{class: -1}
	if op.Class != "" {
		next.class = m.classIndex(op.Class)
		next.values = slices.Clone(op.Values)
		next.day, next.mark = op.Day, op.Mark
		for _, s := range op.Steps {
			c := m.classIndex(s.Class)
			if need := 2 * (c + 1); len(next.steps) < need {
				next.steps = append(next.steps, make([]int64, need-len(next.steps))...)
			}
			next.steps[2*c], next.steps[2*c+1] = s.Head, s.Body
		}
	}
	var res Result
	if prev.class >= 0 {
		res.Prev = m.classes[prev.class]
	}
	if prev.class == next.class {
		return res
	}
	res.Changed = true
	if mod == nil {
		mod = &memModel{seen: make(map[Digest]seenRec)}
		m.users[user] = mod
	}
	mod.grow(len(m.classes))
	if prev.class >= 0 {
		mod.change(op.Bag, prev, -1)
		mod.messages[prev.class] = subClamp(mod.messages[prev.class], 1)
		mod.changeSamples(prev.class, prev.values, -1)
		delete(mod.seen, op.Digest)
	}
	if next.class >= 0 {
		mod.change(op.Bag, next, 1)
		mod.lastDay = max(mod.lastDay, next.day)
		mod.messages[next.class]++
		mod.changeSamples(next.class, next.values, 1)
		mod.seen[op.Digest] = next
	}
	return res
}

// classIndex returns the index of class, registering it on first use.
func (m *Memory) classIndex(class string) int {
	if i, ok := m.index[class]; ok {
		return i
	}
	m.classes = append(m.classes, class)
	m.index[class] = len(m.classes) - 1
	return len(m.classes) - 1
}

// Users lists the users with a model, sorted.
func (m *Memory) Users(context.Context) ([]string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, fmt.Errorf("users: %w", ErrClosed)
	}
	users := make([]string, 0, len(m.users))
	for u := range m.users {
		users = append(users, u)
	}
	slices.Sort(users)
	return users, nil
}

// Check recounts user's seen records and token counts and compares them
// with the totals kept alongside.
func (m *Memory) Check(_ context.Context, user string) error {
	if err := ValidUser(user); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return fmt.Errorf("check: %w", ErrClosed)
	}
	mod := m.users[user]
	if mod == nil {
		return nil
	}
	k := mod.width / 2
	messages := make([]uint64, k)
	var recount SampleSet
	var marks MarkSet
	for d, rec := range mod.seen {
		messages[rec.class]++
		recount.Add(rec.class, rec.values, 1)
		marks.Add(rec.mark, m.classes[rec.class], d)
	}
	tokens, vocab := mod.recount()
	var problems []string
	for c := range k {
		if messages[c]+mod.forgot[c] != mod.messages[c] {
			problems = append(problems, fmt.Sprintf("class %q: %d messages in totals, %d seen records and %d forgotten", m.classes[c], mod.messages[c], messages[c], mod.forgot[c]))
		}
		if tokens[c] != mod.tokens[c] {
			problems = append(problems, fmt.Sprintf("class %q: %d tokens in totals, %d summed over token counts", m.classes[c], mod.tokens[c], tokens[c]))
		}
	}
	if vocab != mod.vocab {
		problems = append(problems, fmt.Sprintf("vocabulary %d in totals, %d tokens counted", mod.vocab, vocab))
	}
	problems = append(problems, mod.samples.Samples().Differences(recount.Samples(), m.classes)...)
	problems = append(problems, marks.Problems()...)
	if problems != nil {
		return fmt.Errorf("check %q: %w: %s", user, ErrInconsistent, strings.Join(problems, "; "))
	}
	return nil
}

// Close releases the models; later calls return ErrClosed.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	for _, mod := range m.users {
		mod.rows.release()
	}
	m.users = nil
	return nil
}

// recount sums the rows' counts per class and counts the rows with a
// count: what the totals' tokens and vocabulary should say.
func (mod *memModel) recount() (tokens []uint64, vocab uint64) {
	tokens = make([]uint64, mod.width/2)
	// Check recounts under the read lock: the scratch row is Apply's.
	mod.rows.each(make([]uint64, mod.width), func(_ bow.Hash, row []uint64, _ Day) {
		for c := range tokens {
			tokens[c] += Counts(row).Count(c)
		}
		if countsAny(row) {
			vocab++
		}
	})
	return tokens, vocab
}

// grow makes room for classes classes: rows are as wide as the class
// list was when they were put, and read back zero beyond.
func (mod *memModel) grow(classes int) {
	width := 2 * classes
	if width <= mod.width {
		return
	}
	mod.width = width
	mod.scratch = make([]uint64, width)
	mod.messages = append(mod.messages, make([]uint64, classes-len(mod.messages))...)
	mod.tokens = append(mod.tokens, make([]uint64, classes-len(mod.tokens))...)
	mod.forgot = append(mod.forgot, make([]uint64, classes-len(mod.forgot))...)
}

// change adds (sign 1) or takes away (sign -1) a message's bag and steps
// as rec records them. Taking away clamps each count at zero and takes
// from the class total exactly what it took from the counts, so the two
// keep agreeing even when a caller passes a bag it never added; weights
// are taken away exactly.
func (mod *memModel) change(bag bow.Bag, rec seenRec, sign int64) {
	c := rec.class
	hashes, counts := bag.Hashes(), bag.Counts()
	row := mod.scratch
	if sign > 0 {
		mod.rows.reserve(len(hashes))
	}
	mod.rows.touch(hashes)
	for i, h := range hashes {
		n := counts[i]
		if n == 0 {
			continue
		}
		r, ok := mod.rows.at(h)
		if !ok && sign < 0 {
			continue
		}
		var day Day
		if ok {
			day = mod.rows.row(r, row)
		} else {
			clear(row)
		}
		had := countsAny(row)
		if sign > 0 {
			row[2*c] += uint64(n)
			mod.tokens[c] += uint64(n)
			day = max(day, rec.day)
		} else {
			d := min(row[2*c], uint64(n))
			row[2*c] -= d
			mod.tokens[c] -= d
		}
		part := 1
		if i < bag.Head() {
			part = 0
		}
		for k := 0; 2*k+part < len(rec.steps); k++ {
			row[2*k+1] += uint64(sign * rec.steps[2*k+part] * int64(n))
		}
		switch has := countsAny(row); {
		case has && !had:
			mod.vocab++
		case had && !has:
			mod.vocab--
		}
		mod.rows.set(r, h, row, day)
	}
}

// countsAny reports whether a row has a non-zero count.
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

// Dump calls fn with the header and then user's rows and seen records,
// sorted, all read under the read lock.
func (m *Memory) Dump(ctx context.Context, user string, fn func(Record) error) error {
	if err := ValidUser(user); err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return fmt.Errorf("dump: %w", ErrClosed)
	}
	return m.dump(ctx, user, fn, false)
}

// Draining returns m as a Drainer, for a caller that drops m once it has
// written its models elsewhere.
func Draining(m *Memory) Drainer { return draining{m} }

type draining struct{ *Memory }

// Drain is Dump, giving back the memory of the rows as it hands them out;
// user's model is gone once it returns, whatever it returns.
func (d draining) Drain(ctx context.Context, user string, fn func(Record) error) error {
	if err := ValidUser(user); err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("drain: %w", ErrClosed)
	}
	defer func() {
		if mod := d.users[user]; mod != nil {
			mod.rows.release()
			delete(d.users, user)
		}
	}()
	return d.dump(ctx, user, fn, true)
}

// dump is Dump under the lock; with drain, it empties the rows' table as
// it goes.
func (m *Memory) dump(ctx context.Context, user string, fn func(Record) error, drain bool) error {
	mod := m.users[user]
	head := Record{Classes: slices.Clone(m.classes)}
	if mod != nil && slices.ContainsFunc(mod.forgot, func(n uint64) bool { return n != 0 }) {
		head.Forgotten = slices.Clone(mod.forgot)
	}
	if err := fn(head); err != nil {
		return err
	}
	if mod == nil {
		return nil
	}
	// One array for the rows saves an allocation a row: Dump hands a
	// model of millions of rows to a bulk load at once.
	var backing []uint64
	n := 0
	each := mod.rows.ascending
	if drain {
		each = mod.rows.drain
	}
	err := each(make([]uint64, mod.width), func(h bow.Hash, r []uint64, day Day) error {
		if n++; n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("dump: %w", err)
			}
		}
		if len(backing) < mod.width {
			backing = make([]uint64, 1024*mod.width)
		}
		row := backing[:mod.width:mod.width]
		backing = backing[mod.width:]
		copy(row, r)
		return fn(Record{Hash: h, Counts: row, Day: day})
	})
	if err != nil {
		return err
	}
	digests := slices.SortedFunc(maps.Keys(mod.seen), func(a, b Digest) int { return bytes.Compare(a[:], b[:]) })
	for _, d := range digests {
		rec := mod.seen[d]
		if err := fn(Record{Digest: d, Class: m.classes[rec.class], Steps: m.steps(rec.steps), Values: slices.Clone(rec.values), Day: rec.day, Mark: rec.mark}); err != nil {
			return err
		}
	}
	return nil
}

// steps turns a seen record's steps, by class index, into Steps.
func (m *Memory) steps(s []int64) []Step {
	var out []Step
	for c := 0; 2*c+1 < len(s); c++ {
		if s[2*c] != 0 || s[2*c+1] != 0 {
			out = append(out, Step{Class: m.classes[c], Head: s[2*c], Body: s[2*c+1]})
		}
	}
	return out
}

// Restore builds user's model from the records and puts it in place in
// one step, under the write lock.
func (m *Memory) Restore(ctx context.Context, user string, next func() (Record, error)) error {
	if err := ValidUser(user); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("restore: %w", ErrClosed)
	}
	if mod := m.users[user]; mod != nil && (mod.rows.len() > 0 || len(mod.seen) > 0) {
		return fmt.Errorf("restore %q: %w", user, ErrExists)
	}
	var index []int // the store's index of each class of the header
	mod := &memModel{seen: make(map[Digest]seenRec)}
	// The token rows, mod.width values each, go into the table once all
	// are read (rowTable.reserve).
	var (
		hashes []bow.Hash
		days   []Day
		rows   []uint64
	)
	kept := false
	defer func() {
		if !kept {
			mod.rows.release()
		}
	}()
	for n := 0; ; n++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		r, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		switch {
		case n == 0:
			if r.Classes == nil {
				return fmt.Errorf("restore: %w: no header", ErrInconsistent)
			}
			for _, c := range r.Classes {
				if err := ValidClass(c); err != nil {
					return fmt.Errorf("restore: %w", err)
				}
			}
			// Registering the classes is harmless if the restore fails.
			for _, c := range r.Classes {
				index = append(index, m.classIndex(c))
			}
			mod.grow(len(m.classes))
			if len(r.Forgotten) > len(index) {
				return fmt.Errorf("restore: %w: forgotten messages of classes the header lacks", ErrInconsistent)
			}
			for c, n := range r.Forgotten {
				mod.forgot[index[c]] = n
			}
		case r.Counts != nil:
			if len(r.Counts) > 2*len(index) {
				return fmt.Errorf("restore: %w: token %x has values of classes the header lacks", ErrInconsistent, r.Hash)
			}
			if allZero(r.Counts) {
				continue
			}
			start := len(rows)
			rows = append(rows, make([]uint64, mod.width)...)
			for c, i := range index {
				rows[start+2*i], rows[start+2*i+1] = r.Counts.Count(c), uint64(r.Counts.Weight(c))
			}
			hashes, days = append(hashes, r.Hash), append(days, r.Day)
		case r.Class != "":
			if err := ValidClass(r.Class); err != nil {
				return fmt.Errorf("restore: %w", err)
			}
			if _, dup := mod.seen[r.Digest]; dup {
				return fmt.Errorf("restore: %w: message %x twice", ErrInconsistent, r.Digest)
			}
			if err := ValidValues(r.Values); err != nil {
				return fmt.Errorf("restore: message %x: %w", r.Digest, err)
			}
			rec := seenRec{class: m.classIndex(r.Class), values: slices.Clone(r.Values), day: r.Day, mark: r.Mark}
			mod.lastDay = max(mod.lastDay, r.Day)
			for _, s := range r.Steps {
				if err := ValidClass(s.Class); err != nil {
					return fmt.Errorf("restore: %w", err)
				}
				c := m.classIndex(s.Class)
				if need := 2 * (c + 1); len(rec.steps) < need {
					rec.steps = append(rec.steps, make([]int64, need-len(rec.steps))...)
				}
				rec.steps[2*c], rec.steps[2*c+1] = s.Head, s.Body
			}
			mod.seen[r.Digest] = rec
		default:
			return fmt.Errorf("restore: %w: record %d is neither a token nor a seen record", ErrInconsistent, n)
		}
	}
	mod.rows.reserve(len(hashes))
	for k, h := range hashes {
		i, dup := mod.rows.at(h)
		if dup {
			return fmt.Errorf("restore: %w: token %x twice", ErrInconsistent, h)
		}
		w := mod.width
		mod.rows.set(i, h, rows[k*w:(k+1)*w], days[k])
		mod.lastDay = max(mod.lastDay, days[k])
	}
	mod.grow(len(m.classes))
	copy(mod.messages, mod.forgot)
	for _, rec := range mod.seen {
		mod.messages[rec.class]++
		mod.changeSamples(rec.class, rec.values, 1)
	}
	mod.tokens, mod.vocab = mod.recount()
	if mod.rows.len() > 0 || len(mod.seen) > 0 || slices.ContainsFunc(mod.forgot, func(n uint64) bool { return n != 0 }) {
		if old := m.users[user]; old != nil {
			old.rows.release()
		}
		m.users[user] = mod
		kept = true
	}
	return nil
}

// DeleteUser drops user's model.
func (m *Memory) DeleteUser(_ context.Context, user string) error {
	if err := ValidUser(user); err != nil {
		return fmt.Errorf("delete user: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("delete user: %w", ErrClosed)
	}
	if mod := m.users[user]; mod != nil {
		mod.rows.release()
		delete(m.users, user)
	}
	return nil
}

// Prune deletes what rule selects from user's model, under the write
// lock.
func (m *Memory) Prune(ctx context.Context, user string, rule PruneRule) (PruneResult, error) {
	if err := ValidUser(user); err != nil {
		return PruneResult{}, fmt.Errorf("prune: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return PruneResult{}, fmt.Errorf("prune: %w", ErrClosed)
	}
	mod := m.users[user]
	if mod == nil {
		return PruneResult{}, nil
	}
	var census PruneCensus
	if rule.MaxTokens != 0 {
		mod.rows.each(mod.scratch, func(_ bow.Hash, row []uint64, day Day) {
			census.Add(rule, row, day)
		})
	}
	plan := rule.Plan(&census)
	var res PruneResult
	if rule.Tokens() {
		// Rows move when one before them goes: the plan is made whole
		// first, then carried out.
		var drop []bow.Hash
		mod.rows.each(mod.scratch, func(h bow.Hash, row []uint64, day Day) {
			if plan.Drop(row, day) {
				drop = append(drop, h)
			}
		})
		row := mod.scratch
		for _, h := range drop {
			if err := ctx.Err(); err != nil {
				// What went is gone whole, row by row, with its totals.
				res.Vocabulary = mod.vocab
				return res, fmt.Errorf("prune: %w", err)
			}
			r, _ := mod.rows.find(h)
			mod.rows.row(r, row)
			if countsAny(row) {
				mod.vocab--
			}
			for c := 0; c < len(row); c += 2 {
				mod.tokens[c/2] -= row[c]
			}
			mod.rows.remove(r)
			res.Tokens++
		}
	}
	for d, rec := range mod.seen {
		if !plan.DropSeen(rec.day) {
			continue
		}
		mod.changeSamples(rec.class, rec.values, -1)
		mod.forgot[rec.class]++
		delete(mod.seen, d)
		res.Seen++
	}
	res.Vocabulary = mod.vocab
	return res, nil
}
