package redisstore

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
)

// Keys a restore stages a model under, beside the model's own and in the
// same Cluster slot, until the commit script renames them into place.
const (
	stagedTotals  = "Rt"
	stagedSeen    = "Rs"
	stagedSamples = "Rd"
	stagedBucket  = "Rb:"
)

// Dump reads user's model as Check does, some buckets a call, each call
// with the totals' version, and starts again when the version moved, so
// that what it gives is one state of the model; it gives up after a few
// tries while training goes on. Redis keeps no order, so the rows and
// seen records are gathered and sorted before fn sees them.
func (s *Store) Dump(ctx context.Context, user string, fn func(store.Record) error) error {
	if err := store.ValidUser(user); err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	if err := s.enter(); err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	defer s.life.RUnlock()
	var m *snapshot
	var err error
	for range checkAttempts {
		if m, err = s.snapshot(ctx, user); !errors.Is(err, errChanged) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("dump %q: %w", user, err)
	}
	cl, err := s.classList(ctx, m.classes)
	if err != nil {
		return fmt.Errorf("dump %q: %w", user, err)
	}
	head := store.Record{Classes: slices.Clone(cl.names)}
	if slices.ContainsFunc(m.forgotten, func(n uint64) bool { return n != 0 }) {
		head.Forgotten = make([]uint64, len(cl.names))
		copy(head.Forgotten, m.forgotten)
	}
	if err := fn(head); err != nil {
		return err
	}
	for _, r := range m.rows {
		if err := fn(store.Record{Hash: r.hash, Counts: r.row, Day: r.day}); err != nil {
			return err
		}
	}
	for _, d := range m.seen {
		r := store.Record{Digest: d.digest, Class: cl.names[d.rec.class], Values: d.rec.values,
			Day: s.day(d.rec.day, d.rec.dated), Mark: d.rec.mark}
		for c := 0; 2*c+1 < len(d.rec.steps); c++ {
			if d.rec.steps[2*c] != 0 || d.rec.steps[2*c+1] != 0 {
				r.Steps = append(r.Steps, store.Step{Class: cl.names[c], Head: d.rec.steps[2*c], Body: d.rec.steps[2*c+1]})
			}
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// snapshot is a model read whole, sorted.
type snapshot struct {
	rows      []snapRow
	seen      []snapSeen
	forgotten []uint64
	classes   int // the classes its rows, records and totals refer to
}

type snapRow struct {
	hash bow.Hash
	row  store.Counts
	day  store.Day
}

type snapSeen struct {
	digest store.Digest
	rec    seenRec
}

func (s *Store) snapshot(ctx context.Context, user string) (*snapshot, error) {
	t0, err := s.readTotals(ctx, user)
	if err != nil {
		return nil, s.wrap(err)
	}
	m := &snapshot{classes: max(len(t0.messages), len(t0.tokens), len(t0.forgotten)), forgotten: t0.forgotten}
	onRow := func(b uint64, f, v string) error {
		if len(f) != 8 {
			return fmt.Errorf("%w: bucket %x: malformed field %x", store.ErrInconsistent, b, f)
		}
		row, day, dated, err := decodeRow(nil, v)
		if err != nil {
			return fmt.Errorf("bucket %x: %w", b, err)
		}
		m.classes = max(m.classes, (len(row)+1)/2)
		m.rows = append(m.rows, snapRow{bow.Hash(uint64FromField(f)), row, s.day(day, dated)})
		return nil
	}
	onSeen := func(d, v string) error {
		rec, err := parseSeen(v)
		if err != nil || len(d) != len(store.Digest{}) {
			return fmt.Errorf("%w: seen record %x: %q", store.ErrInconsistent, d, v)
		}
		var dg store.Digest
		copy(dg[:], d)
		m.classes = max(m.classes, rec.class+1, (len(rec.steps)+1)/2)
		m.seen = append(m.seen, snapSeen{dg, rec})
		return nil
	}
	if err := s.readModel(ctx, user, t0, onRow, onSeen, func(map[string]string) error { return nil }); err != nil {
		return nil, err
	}
	slices.SortFunc(m.rows, func(a, b snapRow) int { return cmp.Compare(a.hash, b.hash) })
	slices.SortFunc(m.seen, func(a, b snapSeen) int { return bytes.Compare(a.digest[:], b.digest[:]) })
	return m, nil
}

// Restore stages user's model under keys of its own in the user's slot,
// the totals (with the layout) first so that a later drop finds what a
// failed restore left, then puts it in place with one script that renames
// the staged keys: readers see no model until then, and all of it after.
func (s *Store) Restore(ctx context.Context, user string, next func() (store.Record, error)) (err error) {
	if err := store.ValidUser(user); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := s.enter(); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer s.life.RUnlock()
	if n, err := s.client.Do(ctx, s.client.B().Exists().Key(s.keys.totals(user), s.keys.seen(user)).Build()).AsInt64(); err != nil {
		return fmt.Errorf("restore %q: %w", user, s.wrap(err))
	} else if n > 0 {
		return fmt.Errorf("restore %q: %w", user, store.ErrExists)
	}
	// What an earlier restore left staged is in the way.
	if err := s.drop(ctx, user); err != nil {
		return fmt.Errorf("restore %q: %w", user, err)
	}
	defer func() {
		if err != nil {
			if derr := s.drop(context.WithoutCancel(ctx), user); derr != nil {
				err = errors.Join(err, fmt.Errorf("drop what was staged (the next restore or delete does): %w", derr))
			}
		}
		s.cache.forgetUser(user)
	}()
	m, err := s.readRecords(ctx, next)
	if err != nil {
		return fmt.Errorf("restore %q: %w", user, err)
	}
	if err := s.stage(ctx, user, m); err != nil {
		return fmt.Errorf("restore %q: %w", user, err)
	}
	base := s.keys.base(user)
	keys := []string{s.keys.totals(user), s.keys.seen(user), base + stagedTotals, base + stagedSeen, s.keys.samples(user), base + stagedSamples}
	if err := s.scripts.commit.Exec(ctx, s.client, keys, []string{base}).Error(); err != nil {
		if re, ok := rueidis.IsRedisErr(err); ok && strings.Contains(re.Error(), "spamd: exists") {
			return fmt.Errorf("restore %q: %w (trained while it was restored)", user, store.ErrExists)
		}
		return fmt.Errorf("restore %q: commit: %w", user, s.wrap(err))
	}
	return nil
}

// restored is a model read from a restore's records: its rows with their
// values by the store's class indices and their days, its seen records,
// its totals.
type restored struct {
	rows    map[bow.Hash][]uint64
	days    map[bow.Hash]store.Day
	seen    map[store.Digest]string // field value: the record as kept
	tot     totals
	samples store.SampleSet
}

func (s *Store) readRecords(ctx context.Context, next func() (store.Record, error)) (*restored, error) {
	m := &restored{rows: make(map[bow.Hash][]uint64), days: make(map[bow.Hash]store.Day), seen: make(map[store.Digest]string)}
	m.tot.dayKnown = true
	var index []int
	var cl *classList
	grow := func(n int) {
		for len(m.tot.messages) < n {
			m.tot.messages, m.tot.tokens = append(m.tot.messages, 0), append(m.tot.tokens, 0)
			m.tot.forgotten = append(m.tot.forgotten, 0)
		}
	}
	for n := 0; ; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		r, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		switch {
		case n == 0:
			if r.Classes == nil {
				return nil, fmt.Errorf("%w: no header", store.ErrInconsistent)
			}
			if cl, err = s.registerNames(ctx, r.Classes); err != nil {
				return nil, err
			}
			for _, c := range r.Classes {
				index = append(index, cl.index[c])
			}
			grow(len(cl.names))
			if len(r.Forgotten) > len(index) {
				return nil, fmt.Errorf("%w: forgotten messages of classes the header lacks", store.ErrInconsistent)
			}
			for c, n := range r.Forgotten {
				if n > maxExact {
					return nil, fmt.Errorf("forgotten messages of class %q: %d, past 2^53, which the scripts cannot count exactly", r.Classes[c], n)
				}
				m.tot.forgotten[index[c]] = n
				m.tot.messages[index[c]] += n
			}
		case r.Counts != nil:
			if len(r.Counts) > 2*len(index) {
				return nil, fmt.Errorf("%w: token %x has values of classes the header lacks", store.ErrInconsistent, r.Hash)
			}
			if _, dup := m.rows[r.Hash]; dup {
				return nil, fmt.Errorf("%w: token %x twice", store.ErrInconsistent, r.Hash)
			}
			row := make([]uint64, 2*len(m.tot.tokens))
			for c, i := range index {
				row[2*i], row[2*i+1] = r.Counts.Count(c), uint64(r.Counts.Weight(c))
				if row[2*i] > maxExact || int64(row[2*i+1]) > maxExact || int64(row[2*i+1]) < -maxExact {
					return nil, fmt.Errorf("token %x: a value past 2^53, which the scripts cannot count exactly", r.Hash)
				}
				m.tot.tokens[i] += row[2*i]
			}
			if allZero(row) {
				continue
			}
			if countsAny(row) {
				m.tot.vocabulary++
			}
			m.rows[r.Hash] = row
			m.days[r.Hash] = r.Day
			m.tot.lastDay = max(m.tot.lastDay, r.Day)
		case r.Class != "":
			if _, dup := m.seen[r.Digest]; dup {
				return nil, fmt.Errorf("%w: message %x twice", store.ErrInconsistent, r.Digest)
			}
			names := []string{r.Class}
			for _, st := range r.Steps {
				names = append(names, st.Class)
			}
			if cl, err = s.registerNames(ctx, names); err != nil {
				return nil, err
			}
			grow(len(cl.names))
			if err := store.ValidValues(r.Values); err != nil {
				return nil, fmt.Errorf("message %x: %w", r.Digest, err)
			}
			c := cl.index[r.Class]
			m.tot.messages[c]++
			m.samples.Add(c, r.Values, 1)
			m.seen[r.Digest] = formatSeen(c, formatSteps(r.Steps, cl.index), r.Values, r.Day, r.Mark)
			m.tot.lastDay = max(m.tot.lastDay, r.Day)
		default:
			return nil, fmt.Errorf("%w: record %d is neither a token nor a seen record", store.ErrInconsistent, n)
		}
	}
	m.tot.rows = uint64(len(m.rows))
	return m, nil
}

// registerNames registers the classes of names not registered yet, after
// checking them all.
func (s *Store) registerNames(ctx context.Context, names []string) (*classList, error) {
	ops := make([]store.Op, len(names))
	for i, c := range names {
		if err := store.ValidClass(c); err != nil {
			return nil, err
		}
		ops[i].Class = c
	}
	return s.register(ctx, ops)
}

// stage writes m under the staged keys of user, pipelined: the totals
// first, with the layout its rows need, then the buckets and the seen
// records.
func (s *Store) stage(ctx context.Context, user string, m *restored) error {
	base := s.keys.base(user)
	// As many buckets as the apply script would have split to: it splits
	// while the rows outnumber load times the buckets.
	need := max((m.tot.rows+uint64(s.opts.BucketLoad)-1)/uint64(s.opts.BucketLoad), 1)
	level := uint8(bits.Len64(need) - 1)
	m.tot.layout = layout{level: level, split: need - 1<<level}
	// A version of its own, so that no node takes a cached state of an
	// earlier model of this user for this one's.
	m.tot.version = uint64(time.Now().UnixMicro())
	cmds := rueidis.Commands{s.client.B().Hset().Key(base+stagedTotals).FieldValue().
		FieldValue("ver", strconv.FormatUint(m.tot.version, 10)).
		FieldValue("lvl", strconv.Itoa(int(level))).
		FieldValue("spl", strconv.FormatUint(m.tot.layout.split, 10)).
		FieldValue("rows", strconv.FormatUint(m.tot.rows, 10)).
		FieldValue("voc", strconv.FormatUint(m.tot.vocabulary, 10)).
		FieldValue("msg", formatList(m.tot.messages)).
		FieldValue("tok", formatList(m.tot.tokens)).
		FieldValue("day", strconv.FormatUint(uint64(m.tot.lastDay), 10)).
		FieldValue("fgt", formatList(m.tot.forgotten)).Build()}
	send := func() error {
		for _, r := range s.client.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil {
				return s.wrap(err)
			}
		}
		cmds = cmds[:0]
		return nil
	}
	buckets := make(map[uint64][]string)
	for h, row := range m.rows {
		b := m.tot.layout.bucket(h)
		buckets[b] = append(buckets[b], field(h), string(appendRow(nil, row, m.days[h])))
	}
	for b, fv := range buckets {
		kv := s.client.B().Hset().Key(base + stagedBucket + strconv.FormatUint(b, 16)).FieldValue()
		for i := 0; i < len(fv); i += 2 {
			kv = kv.FieldValue(fv[i], fv[i+1])
		}
		cmds = append(cmds, kv.Build())
		if len(cmds) == 256 {
			if err := send(); err != nil {
				return err
			}
		}
	}
	kv := s.client.B().Hset().Key(base + stagedSeen).FieldValue()
	n := 0
	for d, v := range m.seen {
		kv = kv.FieldValue(string(d[:]), v)
		if n++; n == 1000 {
			cmds = append(cmds, kv.Build())
			kv, n = s.client.B().Hset().Key(base+stagedSeen).FieldValue(), 0
		}
	}
	if n > 0 {
		cmds = append(cmds, kv.Build())
	}
	kv, n = s.client.B().Hset().Key(base+stagedSamples).FieldValue(), 0
	for m, byClass := range m.samples.Samples() {
		for c, smp := range byClass {
			if smp.N == 0 {
				continue
			}
			if smp.SumSq > maxExact {
				return fmt.Errorf("measure %d of class %d: a sum of squares past 2^53, which the scripts cannot count exactly", m, c)
			}
			mm := uint8(m)
			// As the apply script keeps them: no field of zero.
			for _, f := range []struct {
				what string
				v    uint64
			}{{"n", smp.N}, {"s", smp.Sum}, {"q", smp.SumSq}} {
				if f.v != 0 {
					kv = kv.FieldValue(sampleField(c, mm, f.what), strconv.FormatUint(f.v, 10))
					n++
				}
			}
			for _, b := range smp.Bins {
				kv = kv.FieldValue(sampleField(c, mm, strconv.Itoa(int(b.Level))), strconv.FormatUint(b.Count, 10))
				if n++; n >= 1000 {
					cmds = append(cmds, kv.Build())
					kv, n = s.client.B().Hset().Key(base+stagedSamples).FieldValue(), 0
				}
			}
		}
	}
	if n > 0 {
		cmds = append(cmds, kv.Build())
	}
	return send()
}

// formatList formats per-class totals as the totals hash keeps them.
func formatList(v []uint64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatUint(x, 10)
	}
	return strings.Join(parts, " ")
}

// DeleteUser drops user's model, and whatever a restore left staged, in
// one script.
func (s *Store) DeleteUser(ctx context.Context, user string) error {
	if err := store.ValidUser(user); err != nil {
		return fmt.Errorf("delete user: %w", err)
	}
	if err := s.enter(); err != nil {
		return fmt.Errorf("delete user: %w", err)
	}
	defer s.life.RUnlock()
	defer s.cache.forgetUser(user)
	if err := s.drop(ctx, user); err != nil {
		return fmt.Errorf("delete user %q: %w", user, err)
	}
	return nil
}

func (s *Store) drop(ctx context.Context, user string) error {
	base := s.keys.base(user)
	keys := []string{s.keys.totals(user), s.keys.seen(user), base + stagedTotals, base + stagedSeen, s.keys.samples(user), base + stagedSamples}
	if err := s.scripts.drop.Exec(ctx, s.client, keys, []string{base}).Error(); err != nil {
		return s.wrap(err)
	}
	return nil
}
