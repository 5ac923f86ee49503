package redisstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/spamd/spamd/store"
)

var _ store.Sizer = (*Store)(nil)

// pruneBuckets is the number of buckets, at the layout Prune starts
// from, whose rows one census or prune call reads: some thousands of rows,
// a few milliseconds of Redis.
const pruneBuckets = 64

// pruneSeenBatch bounds the seen records one prune_seen call judges.
const pruneSeenBatch = 512

// hashRange is a range of the top 32 bits of token hashes, [lo, hi):
// what one census or prune call covers. A range, not a list of buckets,
// because training may split buckets between two calls: a call finds the
// buckets of the range at the layout it reads.
type hashRange struct{ lo, hi uint64 }

// ranges cuts the hash space into ranges of about n buckets of l each,
// along the buckets' bounds, in ascending order.
func ranges(l layout, n int) []hashRange {
	var out []hashRange
	i := 0
	var lo uint64
	l.each(func(b uint64) bool {
		i++
		if i%n == 0 {
			_, hi := bucketBounds(b)
			out = append(out, hashRange{lo, hi})
			lo = hi
		}
		return true
	})
	if lo < 1<<32 {
		out = append(out, hashRange{lo, 1 << 32})
	}
	return out
}

// bucketBounds returns the range of the top 32 bits of the hashes bucket
// b holds: bucket x of level l holds [x, x+1) times 2^(32-l).
func bucketBounds(b uint64) (lo, hi uint64) {
	lv := 0
	for b>>(lv+1) != 0 {
		lv++
	}
	x := b &^ (1 << lv)
	size := uint64(1) << (32 - lv)
	return x * size, (x + 1) * size
}

// pruneCut is a prune plan as the prune script takes it: the rule's age
// part and, when the budget deletes rows, the last (total, day) it
// deletes.
type pruneCut struct {
	rule      store.PruneRule
	budget    bool
	total     uint64
	day       store.Day
	dayOfNone store.Day // the day of a row of schema 2
}

// cutOf returns plan, of rule, as the prune script takes it.
func cutOf(rule store.PruneRule, plan store.PrunePlan) pruneCut {
	pc := pruneCut{rule: rule}
	pc.total, pc.day, pc.budget = plan.Cut()
	return pc
}

// args returns the plan as the scripts' read_plan reads it.
func (p pruneCut) args() []string {
	b := func(v bool) string {
		if v {
			return "1"
		}
		return "0"
	}
	// Past 2^53 the scripts' doubles round, and no count gets that far:
	// a larger MaxCount means any count, as 2^53 does.
	maxCount := min(p.rule.MaxCount, maxExact)
	return []string{b(p.rule.Tokens()), strconv.FormatUint(maxCount, 10), strconv.FormatUint(uint64(p.rule.Before), 10),
		b(p.budget), strconv.FormatUint(p.total, 10), strconv.FormatUint(uint64(p.day), 10)}
}

// Prune deletes what rule selects from user's model, while other nodes
// train. With a budget (rule.MaxTokens), a first pass reads every row,
// some buckets a call, into a census, which says where the budget cuts.
// Then it walks the rows again, some buckets a call, each call one atomic
// script that judges each row as it is then, by the rule's age part and
// the cut, deletes those selected and takes their counts from the totals
// and the vocabulary; then it walks the seen records, deleting those of
// messages trained before rule.SeenBefore a batch a call in the same way,
// each counted as forgotten and its values taken from the samples. A row
// or seen record of schema 2 is judged as of the day the store was
// upgraded. It stops between two calls when ctx is done: what went is
// gone whole, with its totals. The node's cache drops the buckets each
// call changed before the next: a read on this node after Prune returns
// never sees a row deleted; other nodes drop them when Redis tells them,
// within milliseconds, as for training.
func (s *Store) Prune(ctx context.Context, user string, rule store.PruneRule) (store.PruneResult, error) {
	if err := store.ValidUser(user); err != nil {
		return store.PruneResult{}, fmt.Errorf("prune: %w", err)
	}
	if err := s.enter(); err != nil {
		return store.PruneResult{}, fmt.Errorf("prune: %w", err)
	}
	defer s.life.RUnlock()
	var res store.PruneResult
	t0, err := s.readTotals(ctx, user)
	if err != nil {
		return res, fmt.Errorf("prune %q: %w", user, s.wrap(err))
	}
	if t0.version == 0 {
		return res, nil // no model
	}
	res.Vocabulary = t0.vocabulary
	var census store.PruneCensus
	if rule.MaxTokens != 0 {
		err := s.censusPass(ctx, user, t0.layout, func(row store.Counts, day store.Day) {
			census.Add(rule, row, day)
		})
		if err != nil {
			return res, fmt.Errorf("prune %q: census: %w", user, err)
		}
	}
	cut := cutOf(rule, rule.Plan(&census))
	cut.dayOfNone = s.upgraded
	if rule.Tokens() {
		for _, r := range ranges(t0.layout, pruneBuckets) {
			if err := ctx.Err(); err != nil {
				return res, fmt.Errorf("prune %q: %w", user, err)
			}
			n, tot, err := s.pruneRange(ctx, user, r, cut)
			if err != nil {
				return res, fmt.Errorf("prune %q: %w", user, err)
			}
			res.Tokens += n
			if tot != nil {
				res.Vocabulary = tot.vocabulary
			}
		}
	}
	if rule.SeenBefore != 0 {
		n, err := s.pruneSeen(ctx, user, rule.SeenBefore)
		res.Seen += n
		if err != nil {
			return res, fmt.Errorf("prune %q: seen records: %w", user, err)
		}
	}
	t1, err := s.readTotals(ctx, user)
	if err != nil {
		return res, fmt.Errorf("prune %q: %w", user, s.wrap(err))
	}
	res.Vocabulary = t1.vocabulary
	return res, nil
}

// censusPass calls fn with every row of user and its day, reading the
// rows of some buckets of l a call.
func (s *Store) censusPass(ctx context.Context, user string, l layout, fn func(store.Counts, store.Day)) error {
	var row []uint64
	for _, r := range ranges(l, pruneBuckets) {
		if err := ctx.Err(); err != nil {
			return err
		}
		reply, err := s.scripts.census.Exec(ctx, s.client, []string{s.keys.totals(user)},
			[]string{s.keys.base(user), strconv.FormatUint(r.lo, 10), strconv.FormatUint(r.hi, 10)}).ToArray()
		if err != nil {
			return s.wrap(err)
		}
		if len(reply) != 2 {
			return fmt.Errorf("census script: %d values", len(reply))
		}
		flat, err := reply[1].AsStrSlice()
		if err != nil && !rueidis.IsRedisNil(err) {
			return fmt.Errorf("census script: %w", err)
		}
		for i := 0; i+1 < len(flat); i += 2 {
			var day store.Day
			var dated bool
			if row, day, dated, err = decodeRow(row[:0], flat[i+1]); err != nil {
				return fmt.Errorf("token %x: %w", flat[i], err)
			}
			fn(row, s.day(day, dated))
		}
	}
	return nil
}

// pruneRange runs the prune script on the rows of r, and drops from the
// node's cache the buckets it deleted rows from. It returns the rows
// deleted and the totals the call left (nil when it deleted none).
func (s *Store) pruneRange(ctx context.Context, user string, r hashRange, cut pruneCut) (uint64, *totals, error) {
	args := append([]string{s.keys.base(user), strconv.FormatUint(uint64(cut.dayOfNone), 10),
		strconv.FormatUint(r.lo, 10), strconv.FormatUint(r.hi, 10)}, cut.args()...)
	reply, err := s.scripts.prune.Exec(ctx, s.client, []string{s.keys.totals(user)}, args).ToArray()
	if err != nil {
		// Whatever the call did, this node reads the user's buckets of
		// the range and totals afresh.
		s.cache.forgetUser(user)
		return 0, nil, s.wrap(err)
	}
	if len(reply) != 3 {
		s.cache.forgetUser(user)
		return 0, nil, fmt.Errorf("prune script: %d values", len(reply))
	}
	n, err := reply[0].AsInt64()
	if err != nil {
		s.cache.forgetUser(user)
		return 0, nil, fmt.Errorf("prune script: %w", err)
	}
	if n == 0 {
		return 0, nil, nil
	}
	ids, err := reply[1].AsIntSlice()
	tv, err2 := reply[2].ToArray()
	var tot *totals
	if err == nil && err2 == nil {
		tot, err = totalsOf(tv)
	}
	if err != nil || err2 != nil {
		s.cache.forgetUser(user)
		return uint64(n), nil, fmt.Errorf("prune script: %v %v", err, err2)
	}
	buckets := make([]uint64, len(ids))
	for i, id := range ids {
		buckets[i] = uint64(id)
	}
	s.cache.pruned(user, buckets, tot)
	return uint64(n), tot, nil
}

// pruneSeen deletes user's seen records of days before before, walking
// the seen hash with HSCAN and sending those it finds old to the
// prune_seen script, which judges them again.
func (s *Store) pruneSeen(ctx context.Context, user string, before store.Day) (uint64, error) {
	var n uint64
	key := s.keys.seen(user)
	keys := []string{s.keys.totals(user), key, s.keys.samples(user)}
	head := []string{strconv.FormatUint(uint64(s.upgraded), 10), strconv.FormatUint(uint64(before), 10)}
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		reply, err := s.scripts.pruneSeen.Exec(ctx, s.client, keys, append(head, batch...)).ToArray()
		batch = batch[:0]
		if err != nil {
			s.cache.forgetUser(user)
			return s.wrap(err)
		}
		if len(reply) != 2 {
			s.cache.forgetUser(user)
			return fmt.Errorf("prune_seen script: %d values", len(reply))
		}
		k, err := reply[0].AsInt64()
		if err != nil {
			s.cache.forgetUser(user)
			return fmt.Errorf("prune_seen script: %w", err)
		}
		if k == 0 {
			return nil
		}
		n += uint64(k)
		tv, err := reply[1].ToArray()
		var tot *totals
		if err == nil {
			tot, err = totalsOf(tv)
		}
		if err != nil {
			s.cache.forgetUser(user)
			return fmt.Errorf("prune_seen script: %w", err)
		}
		s.cache.pruned(user, nil, tot)
		return nil
	}
	for cursor := uint64(0); ; {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		e, err := s.client.Do(ctx, s.client.B().Hscan().Key(key).Cursor(cursor).Count(1000).Build()).AsScanEntry()
		if err != nil {
			return n, s.wrap(err)
		}
		for j := 0; j+1 < len(e.Elements); j += 2 {
			rec, err := parseSeen(e.Elements[j+1])
			if err != nil {
				continue // Check reports it; the script fails on it
			}
			if d := s.day(rec.day, rec.dated); d != 0 && d < before {
				batch = append(batch, e.Elements[j])
			}
			if len(batch) == pruneSeenBatch {
				if err := flush(); err != nil {
					return n, err
				}
			}
		}
		if err := flush(); err != nil {
			return n, err
		}
		if cursor = e.Cursor; cursor == 0 {
			return n, nil
		}
	}
}

// UserSize returns the bytes user's model takes on the server: MEMORY
// USAGE (with SAMPLES 0, every element counted) summed over its keys, the
// totals, the seen records, the samples and every token bucket of its
// layout, each with its key, its value and Redis's bookkeeping of it. A
// user without a model takes 0. It needs the ACL's +memory|usage.
func (s *Store) UserSize(ctx context.Context, user string) (int64, error) {
	if err := store.ValidUser(user); err != nil {
		return 0, fmt.Errorf("user size: %w", err)
	}
	if err := s.enter(); err != nil {
		return 0, fmt.Errorf("user size: %w", err)
	}
	defer s.life.RUnlock()
	t, err := s.readTotals(ctx, user)
	if err != nil {
		return 0, fmt.Errorf("user size %q: %w", user, s.wrap(err))
	}
	names := []string{s.keys.totals(user), s.keys.seen(user), s.keys.samples(user)}
	var size int64
	send := func() error {
		cmds := make(rueidis.Commands, len(names))
		for i, k := range names {
			cmds[i] = s.client.B().MemoryUsage().Key(k).Samples(0).Build()
		}
		for _, r := range s.client.DoMulti(ctx, cmds...) {
			n, err := r.AsInt64()
			if err != nil && !rueidis.IsRedisNil(err) {
				return s.wrap(err)
			}
			size += n
		}
		names = names[:0]
		return nil
	}
	t.layout.each(func(b uint64) bool {
		names = append(names, s.keys.bucket(user, b))
		if len(names) == 1000 {
			err = send()
		}
		return err == nil
	})
	if err == nil {
		err = send()
	}
	if err != nil {
		return 0, fmt.Errorf("user size %q: %w", user, err)
	}
	return size, nil
}
