package redisstore

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
)

// dumpBuckets is the number of buckets one dump call reads: some
// thousands of rows.
const dumpBuckets = 64

// errChanged says that a model changed while it was being read in
// several calls.
var errChanged = errors.New("the model changed while it was read")

// bucketDump is the content of one bucket.
type bucketDump struct {
	bucket uint64
	fields []string
	values []string
}

// dump reads buckets of user in one atomic call, with the totals.
func (s *Store) dump(ctx context.Context, user string, buckets []uint64) (*totals, []bucketDump, error) {
	args := make([]string, 0, 1+len(buckets))
	args = append(args, s.keys.base(user))
	for _, b := range buckets {
		args = append(args, strconv.FormatUint(b, 16))
	}
	reply, err := s.scripts.dump.Exec(ctx, s.client, []string{s.keys.totals(user)}, args).ToArray()
	if err != nil {
		return nil, nil, s.wrap(err)
	}
	if len(reply) != 2 {
		return nil, nil, fmt.Errorf("dump script: %d values", len(reply))
	}
	tv, err := reply[0].ToArray()
	if err != nil {
		return nil, nil, err
	}
	t, err := totalsOf(tv)
	if err != nil {
		return nil, nil, err
	}
	bs, err := reply[1].ToArray()
	if err != nil && !rueidis.IsRedisNil(err) {
		return nil, nil, err
	}
	out := make([]bucketDump, len(buckets))
	for i, b := range buckets {
		out[i].bucket = b
		if i >= len(bs) {
			continue
		}
		flat, err := bs[i].AsStrSlice()
		if err != nil {
			return nil, nil, err
		}
		for j := 0; j+1 < len(flat); j += 2 {
			out[i].fields = append(out[i].fields, flat[j])
			out[i].values = append(out[i].values, flat[j+1])
		}
	}
	return t, out, nil
}

// maxProblems bounds how many problems Check spells out.
const maxProblems = 20

// checkAttempts is how many times Check reads a model that training keeps
// changing before it gives up.
const checkAttempts = 5

// Check recounts user's seen records and token rows and compares them
// with the stored totals: per class, messages with the seen records plus
// those Prune forgot, tokens with the sum of the token counts, the
// vocabulary with the tokens that have a count, and the rows with the
// fields of the buckets; and the samples with those of the values the
// seen records hold. It also checks that every row decodes, is in the
// bucket its hash belongs to and is not all zero, and that the samples'
// fields are well formed, and it reports any message trained as two
// classes under two digests: seen records of one mark (store.MarkSet).
// It reads the buckets some at a time, each batch in one call with the
// totals' version, and starts again when the version moved, up to a few
// times: a model trained all the while cannot be checked.
func (s *Store) Check(ctx context.Context, user string) error {
	if err := store.ValidUser(user); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	if err := s.enter(); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	defer s.life.RUnlock()
	var err error
	for range checkAttempts {
		if err = s.checkOnce(ctx, user); !errors.Is(err, errChanged) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("check %q: %w", user, err)
	}
	return nil
}

func (s *Store) checkOnce(ctx context.Context, user string) error {
	t0, err := s.readTotals(ctx, user)
	if err != nil {
		return s.wrap(err)
	}
	var r report
	cl, err := s.classList(ctx, max(len(t0.messages), len(t0.tokens)))
	if err != nil {
		r.addf("%v", err)
		cl, _ = s.classList(ctx, 0)
	}
	k := len(cl.names)
	messages := make([]uint64, k)
	tokens := make([]uint64, k)
	var vocabulary, rows uint64

	var recount store.SampleSet
	var marks store.MarkSet
	var row []uint64
	onRow := func(b uint64, f, v string) error {
		rows++
		if len(f) != 8 {
			r.addf("bucket %x: malformed field %x", b, f)
			return nil
		}
		h := bow.Hash(uint64FromField(f))
		if !holds(b, h) {
			r.addf("bucket %x: token %016x belongs elsewhere", b, uint64(h))
		}
		var err error
		if row, _, _, err = decodeRow(row[:0], v); err != nil {
			r.addf("bucket %x: token %016x: %v", b, uint64(h), err)
			return nil
		}
		if len(row) > 2*k {
			r.addf("bucket %x: token %016x: counts of unknown classes", b, uint64(h))
			return nil
		}
		if allZero(row) {
			r.addf("bucket %x: token %016x: all zero, not deleted", b, uint64(h))
			return nil
		}
		for c := 0; c < len(row); c += 2 {
			tokens[c/2] += row[c]
		}
		if countsAny(row) {
			vocabulary++
		}
		return nil
	}
	onSeen := func(d, v string) error {
		if len(d) != len(store.Digest{}) {
			r.addf("malformed seen field %x", d)
			return nil
		}
		rec, err := parseSeen(v)
		switch {
		case err != nil:
			r.addf("seen record %x: %v", d, err)
		case rec.class >= k:
			r.addf("seen record %x: unknown class %d", d, rec.class)
		case len(rec.steps) > 2*k:
			r.addf("seen record %x: steps of unknown classes", d)
		default:
			messages[rec.class]++
			recount.Add(rec.class, rec.values, 1)
			var dg store.Digest
			copy(dg[:], d)
			marks.Add(rec.mark, cl.names[rec.class], dg)
		}
		return nil
	}
	var samples store.Samples
	onSamples := func(fv map[string]string) error {
		var err error
		if samples, err = parseSamples(fv); err != nil {
			r.addf("samples: %v", err)
		}
		for m, byClass := range samples {
			for c := len(cl.names); c < len(byClass); c++ {
				if !byClass[c].Empty() {
					r.addf("samples: measure %d of unknown class %d", m, c)
				}
			}
		}
		return nil
	}
	if err := s.readModel(ctx, user, t0, onRow, onSeen, onSamples); err != nil {
		return err
	}
	for _, d := range samples.Differences(recount.Samples(), cl.names) {
		r.addf("%s", d)
	}
	for _, p := range marks.Problems() {
		r.addf("%s", p)
	}

	if len(t0.messages) > k || len(t0.tokens) > k || len(t0.forgotten) > k {
		r.addf("totals count %d classes, the store has %d", max(len(t0.messages), len(t0.tokens), len(t0.forgotten)), k)
	}
	for c, name := range cl.names {
		if got, seen, forgot := at(t0.messages, c), messages[c], at(t0.forgotten, c); got != seen+forgot {
			r.addf("class %q: totals say %d messages, %d seen records and %d forgotten", name, got, seen, forgot)
		}
		if got, want := at(t0.tokens, c), tokens[c]; got != want {
			r.addf("class %q: totals say %d tokens, token counts sum to %d", name, got, want)
		}
	}
	if t0.vocabulary != vocabulary {
		r.addf("totals say vocabulary %d, %d tokens with a count", t0.vocabulary, vocabulary)
	}
	if t0.rows != rows {
		r.addf("totals say %d rows, the buckets hold %d", t0.rows, rows)
	}
	if r.n > 0 {
		return fmt.Errorf("%w: %s", store.ErrInconsistent, r)
	}
	return nil
}

// readModel reads user's model as it was when the caller read its totals
// t0: the buckets of t0's layout, dumpBuckets a call, each call with the
// totals' version, then the seen records and the samples; it fails with
// errChanged when the version moved meanwhile. It calls row with each
// bucket's fields and values, seen with each seen record and samples with
// the samples hash, and stops at their first error.
func (s *Store) readModel(ctx context.Context, user string, t0 *totals,
	row func(bucket uint64, f, v string) error, seen func(d, v string) error, samples func(map[string]string) error) error {
	err := eachBatch(t0.layout, func(batch []uint64) error {
		t, dumps, err := s.dump(ctx, user, batch)
		if err != nil {
			return err
		}
		if t.version != t0.version {
			return errChanged
		}
		for _, d := range dumps {
			for i, f := range d.fields {
				if err := row(d.bucket, f, d.values[i]); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	key := s.keys.seen(user)
	for cursor := uint64(0); ; {
		e, err := s.client.Do(ctx, s.client.B().Hscan().Key(key).Cursor(cursor).Count(1000).Build()).AsScanEntry()
		if err != nil {
			return s.wrap(err)
		}
		for j := 0; j+1 < len(e.Elements); j += 2 {
			if err := seen(e.Elements[j], e.Elements[j+1]); err != nil {
				return err
			}
		}
		if cursor = e.Cursor; cursor == 0 {
			break
		}
	}
	fv, err := s.client.Do(ctx, s.client.B().Hgetall().Key(s.keys.samples(user)).Build()).AsStrMap()
	if err != nil {
		return s.wrap(err)
	}
	if err := samples(fv); err != nil {
		return err
	}
	// HSCAN reads in steps too: the version must not have moved.
	t1, err := s.readTotals(ctx, user)
	if err != nil {
		return s.wrap(err)
	}
	if t1.version != t0.version {
		return errChanged
	}
	return nil
}

// eachBatch calls fn with the buckets of l, dumpBuckets at a time, until
// fn fails.
func eachBatch(l layout, fn func(batch []uint64) error) error {
	batch := make([]uint64, 0, dumpBuckets)
	var err error
	l.each(func(b uint64) bool {
		if batch = append(batch, b); len(batch) == dumpBuckets {
			err = fn(batch)
			batch = batch[:0]
		}
		return err == nil
	})
	if err == nil && len(batch) > 0 {
		err = fn(batch)
	}
	return err
}

func uint64FromField(f string) uint64 {
	var v uint64
	for i := range 8 {
		v = v<<8 | uint64(f[i])
	}
	return v
}

// Warm reads user's rows into the node's cache, as many as one generation
// of the token table holds, and returns how many it read, so that the
// first messages classified find them there, and a node whose Redis goes
// down soon after starting still has a model to classify with.
func (s *Store) Warm(ctx context.Context, user string) (int, error) {
	if err := store.ValidUser(user); err != nil {
		return 0, fmt.Errorf("warm: %w", err)
	}
	if err := s.enter(); err != nil {
		return 0, fmt.Errorf("warm: %w", err)
	}
	defer s.life.RUnlock()
	if s.opts.CacheBytes < 0 {
		return 0, nil
	}
	room := s.cache.tokens.Room()
	t, err := s.readTotals(ctx, user)
	if err != nil {
		return 0, fmt.Errorf("warm %q: %w", user, s.wrap(err))
	}
	filled := 0
	// errFull stops the walk once the table's generation is full.
	errFull := errors.New("full")
	err = eachBatch(t.layout, func(batch []uint64) error {
		if filled >= room {
			return errFull
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		tk, ids := s.cache.noteBuckets(user, batch)
		tot, dumps, err := s.dump(ctx, user, batch)
		if err != nil {
			return err
		}
		buckets := make([]uint64, len(dumps))
		hashes := make([][]bow.Hash, len(dumps))
		rows := make([][]store.Counts, len(dumps))
		for i, d := range dumps {
			buckets[i] = d.bucket
			for j, f := range d.fields {
				if len(f) != 8 {
					continue
				}
				row, _, _, err := decodeRow(nil, d.values[j])
				if err != nil {
					continue // Check reports it
				}
				hashes[i] = append(hashes[i], bow.Hash(uint64FromField(f)))
				rows[i] = append(rows[i], row)
			}
		}
		filled += s.cache.fillDump(user, tk, ids, tot, buckets, hashes, rows)
		return nil
	})
	if err == nil {
		err = ctx.Err()
	}
	if err != nil && !errors.Is(err, errFull) {
		return filled, fmt.Errorf("warm %q: %w", user, err)
	}
	return filled, nil
}

// WarmInBackground warms the caches of users, one after the other, in a
// goroutine, logging what it read and what failed, and returns a function
// that stops it and waits for it: call that before Close.
func (s *Store) WarmInBackground(ctx context.Context, users ...string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				s.log.Error("redisstore: warming the cache panicked", "panic", r, "stack", string(debug.Stack()))
			}
		}()
		for _, u := range users {
			start := time.Now()
			n, err := s.Warm(ctx, u)
			switch {
			case err != nil && ctx.Err() == nil:
				s.log.Warn("redisstore: warming the cache", "user", u, "err", err)
			case err == nil && n > 0:
				s.log.Info("redisstore: model read into the cache", "user", u, "tokens", n,
					"took", time.Since(start).Round(time.Millisecond))
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// report collects Check's findings.
type report struct {
	lines []string
	n     int
}

func (r *report) addf(format string, args ...any) {
	r.n++
	if len(r.lines) < maxProblems {
		r.lines = append(r.lines, fmt.Sprintf(format, args...))
	}
}

func (r report) String() string {
	s := strings.Join(r.lines, "; ")
	if r.n > len(r.lines) {
		s += fmt.Sprintf("; and %d more", r.n-len(r.lines))
	}
	return s
}

func countsAny(row []uint64) bool {
	for i := 0; i < len(row); i += 2 {
		if row[i] != 0 {
			return true
		}
	}
	return false
}

func allZero(row []uint64) bool {
	for _, v := range row {
		if v != 0 {
			return false
		}
	}
	return true
}

func at(s []uint64, i int) uint64 {
	if i < len(s) {
		return s[i]
	}
	return 0
}
