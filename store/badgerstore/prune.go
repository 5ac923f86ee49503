package badgerstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
)

// pruneBatchKeys bounds the keys one transaction of Prune deletes: Prune
// holds wmu while it reads them again and commits, and training waits
// meanwhile, some tens of milliseconds for a batch this size.
const pruneBatchKeys = 8192

// Prune deletes from user's model what rule selects, while training goes
// on. When the rule has a budget, a first pass over the rows of one
// read-only snapshot counts them (store.PruneCensus) to plan where the
// budget cuts. Then it goes over the rows, and the seen records if the
// rule deletes some, in the same snapshot, gathering those the plan drops,
// and deletes them in transactions of up to pruneBatchKeys keys. Each
// holds wmu, like Apply, so that no write comes between its reads and its
// commit, and is atomic: it reads each key again and judges it as it is
// then (training may have changed or deleted it since the snapshot),
// deletes it, and writes the totals with what it deleted taken out: a
// row's counts from the class token totals and the vocabulary, a seen
// record counted as forgotten and its values taken out of the samples.
// The cache learns each commit before wmu is released, as from Apply, so
// that no reader sees a count the store no longer has.
//
// Rows trained for the first time after the snapshot are not judged: they
// are new, and the next prune sees them. A rule with a budget judges rows
// by the census of the snapshot, so with training going on a model may
// end slightly above the budget; once training pauses, a prune keeps it.
//
// Like Apply, it refuses with store.ErrReadOnly (or store.ErrFailed) when
// the store may not write, before each transaction too. Canceling ctx
// stops it between transactions: what it deleted is gone whole, with its
// totals, and what it returns counts it.
func (s *Store) Prune(ctx context.Context, user string, rule store.PruneRule) (res store.PruneResult, err error) {
	defer s.recoverFault(&err, "prune")
	if err := store.ValidUser(user); err != nil {
		return res, fmt.Errorf("prune: %w", err)
	}
	if err := s.enter(); err != nil {
		return res, fmt.Errorf("prune: %w", err)
	}
	defer s.life.RUnlock()
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("prune %q: %w", user, err)
	}
	if err := s.refusal(); err != nil {
		return res, fmt.Errorf("prune %q: %w", user, err)
	}
	if s.isBusy(user) {
		return res, nil // no model, as readers see it
	}
	snap := s.db.NewTransaction(false)
	defer snap.Discard()
	p := &pruner{
		s:        s,
		user:     user,
		maxCount: s.db.MaxBatchCount() * s.txnShare / 100,
		maxSize:  s.db.MaxBatchSize() * s.txnShare / 100,
		limit:    pruneBatchKeys,
	}
	var census store.PruneCensus
	if rule.MaxTokens != 0 {
		var row []uint64
		err := s.scanTokens(ctx, snap, user, func(key, v []byte) bool {
			var day store.Day
			var err error
			// An undecodable row is left alone, for Check to report.
			if row, day, err = decodeRow(row[:0], v); err == nil && len(key) == len(user)+2+8 {
				census.Add(rule, row, day)
			}
			return true
		})
		if err != nil {
			s.readFailed(ctx, err)
			return res, fmt.Errorf("prune %q: count the tokens: %w", user, err)
		}
	}
	p.plan = rule.Plan(&census)
	var perr error
	if rule.Tokens() {
		if err := p.pass(ctx, snap, kindToken); err != nil {
			perr = fmt.Errorf("prune %q: tokens: %w", user, err)
		}
	}
	if rule.SeenBefore != 0 && perr == nil {
		if err := p.pass(ctx, snap, kindSeen); err != nil {
			perr = fmt.Errorf("prune %q: seen records: %w", user, err)
		}
	}
	// What was deleted is gone whole, even when the prune stopped early:
	// the vocabulary says what is left.
	res = store.PruneResult{Tokens: p.tokens, Seen: p.seen}
	err = s.db.View(func(txn *badger.Txn) error {
		t, err := readTotals(txn, user)
		if err == nil {
			res.Vocabulary = t.vocabulary
		}
		return err
	})
	if perr != nil {
		return res, perr
	}
	if err != nil {
		s.readFailed(ctx, err)
		return res, fmt.Errorf("prune %q: totals: %w", user, err)
	}
	return res, nil
}

// pruner is one Prune call.
type pruner struct {
	s    *Store
	user string
	plan store.PrunePlan
	// The transaction budget, as Apply's, and the keys a transaction
	// takes at most, halved should Badger find one too big after all.
	maxCount, maxSize int64
	limit             int
	// The transactions committed, and what they deleted.
	txns         int
	tokens, seen uint64
	row          []uint64 // scratch
}

// errModelGone stops a prune whose model a restore or a delete hides.
var errModelGone = errors.New("the model is being restored or deleted")

// pass goes over the user's keys of kind (token rows or seen records) in
// snap, and deletes those the plan drops, in batches.
func (p *pruner) pass(ctx context.Context, snap *badger.Txn, kind byte) error {
	prefix := userPrefix(kind, p.user)
	keyLen := len(prefix) + 8
	if kind == kindSeen {
		keyLen = len(prefix) + len(store.Digest{})
	}
	var keys [][]byte
	flush := func() error {
		for len(keys) > 0 {
			used, err := p.batch(ctx, kind, keys)
			if err != nil {
				return err
			}
			keys = keys[used:]
		}
		return nil
	}
	var flushErr error
	scanKind := func(f func(key, v []byte) bool) error { return scan(ctx, snap, prefix, f) }
	if kind == kindToken {
		// With the sealed rows under Badger's keys.
		scanKind = func(f func(key, v []byte) bool) error { return p.s.scanTokens(ctx, snap, p.user, f) }
	}
	err := scanKind(func(key, v []byte) bool {
		// A malformed key is left for Check to report.
		if len(key) != keyLen || !p.drops(kind, v) {
			return true
		}
		keys = append(keys, bytes.Clone(key))
		if len(keys) >= p.limit {
			flushErr = flush()
		}
		return flushErr == nil
	})
	if flushErr != nil {
		return flushErr
	}
	if err != nil {
		p.s.readFailed(ctx, err)
		return err
	}
	return flush()
}

// drops reports whether the plan drops v, a value of kind. A value that
// does not decode is left alone, for Check to report.
func (p *pruner) drops(kind byte, v []byte) bool {
	if kind == kindSeen {
		rec, err := decodeSeen(v, nil)
		return err == nil && p.plan.DropSeen(rec.day)
	}
	row, day, err := decodeRow(p.row[:0], v)
	p.row = row
	return err == nil && p.plan.Drop(row, day)
}

// batch deletes, in one transaction, those of keys (of kind) the plan
// still drops, as many as the budget lets it, and returns how many of keys
// it went through. It holds wmu, so that nothing writes between its reads
// and its commit; the cache learns what it committed before it returns.
func (p *pruner) batch(ctx context.Context, kind byte, keys [][]byte) (used int, err error) {
	s := p.s
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := s.writable(false); err != nil {
		return 0, err
	}
	if s.isBusy(p.user) {
		return 0, errModelGone
	}
	classes := s.classes.Load().names
	k := len(classes)
	sec := s.section(p.user)
	if sec != nil && kind == kindToken {
		s.overlay(p.user)
	}
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	stored, err := readTotals(txn, p.user)
	if err != nil {
		return 0, fmt.Errorf("read totals: %w", err)
	}
	if max(len(stored.messages), len(stored.tokens), len(stored.forgotten)) > k {
		return 0, fmt.Errorf("%w: totals of unknown classes", store.ErrInconsistent)
	}
	// A copy: what readTotals returns may be cached already.
	tot := totals{
		messages:   make([]uint64, k),
		tokens:     make([]uint64, k),
		forgotten:  make([]uint64, k),
		vocabulary: stored.vocabulary,
		lastDay:    stored.lastDay,
		samples:    stored.samples,
	}
	copy(tot.messages, stored.messages)
	copy(tot.tokens, stored.tokens)
	copy(tot.forgotten, stored.forgotten)

	// What a transaction is charged, as Txn.checkSize counts it: the
	// totals, and for seen records every sample as it is now, which
	// taking values out only shrinks.
	const overhead = 2 + 10
	count := int64(1)
	size := int64(len(totalsKey(p.user))+len(appendTotals(nil, &tot))) + overhead
	if kind == kindSeen {
		for m, byClass := range tot.samples {
			for c, smp := range byClass {
				if smp.N != 0 {
					count++
					size += int64(len(appendSampleKey(nil, p.user, sampleKey{measure: uint8(m), class: c}))+len(appendSample(nil, smp))) + overhead
				}
			}
		}
	}
	var deleted []bow.Hash
	var seen uint64
	samp := map[sampleKey]*dense{}
	for _, key := range keys[:min(len(keys), p.limit)] {
		cost := int64(len(key)) + overhead
		if used > 0 && (count+1 > p.maxCount || size+cost > p.maxSize) {
			break
		}
		used++
		// inFile says that the key is a sealed row's, or lies over one;
		// v is then that row, unless Badger has the key.
		var v []byte
		inFile := false
		if kind == kindToken && sec != nil {
			if v, inFile, err = sec.Get(binary.BigEndian.Uint64(key[len(key)-8:]), nil); err != nil {
				return 0, fmt.Errorf("read key %x: %w: %w", key, store.ErrInconsistent, err)
			}
		}
		item, err := txn.Get(key)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound) && inFile:
			// The sealed row, v.
		case errors.Is(err, badger.ErrKeyNotFound):
			continue // untrained or pruned since
		case err != nil:
			return 0, fmt.Errorf("read key %x: %w", key, err)
		default:
			if v, err = item.ValueCopy(nil); err != nil {
				return 0, fmt.Errorf("read key %x: %w", key, err)
			}
		}
		var row []uint64
		var rec seenRec
		drop := false
		if kind == kindSeen {
			if rec, err = decodeSeen(v, nil); err == nil && rec.class < k {
				drop = p.plan.DropSeen(rec.day)
			}
		} else {
			var day store.Day
			if row, day, err = decodeRow(nil, v); err == nil && len(row) <= 2*k {
				drop = p.plan.Drop(row, day)
			}
		}
		if !drop {
			continue // trained since, a tombstone, or undecodable
		}
		// Over a sealed row, a tombstone; a key deleted would let the
		// row show through.
		if inFile {
			err = txn.Set(key, nil)
		} else {
			err = txn.Delete(key)
		}
		if err != nil {
			return p.tooBig(err)
		}
		count, size = count+1, size+cost
		if kind == kindSeen {
			tot.forgotten[rec.class]++
			for _, v := range rec.values {
				sk := sampleKey{measure: v.Measure, class: rec.class}
				if samp[sk] == nil {
					samp[sk] = newDense(tot.samples.Of(int(v.Measure), rec.class))
				}
				samp[sk].add(v.Level, -1)
			}
			seen++
			continue
		}
		for c := 0; c < len(row); c += 2 {
			tot.tokens[c/2] = subClamp(tot.tokens[c/2], row[c])
		}
		if countsAny(row) {
			tot.vocabulary = subClamp(tot.vocabulary, 1)
		}
		deleted = append(deleted, bow.Hash(binary.BigEndian.Uint64(key[len(key)-8:])))
	}
	if len(deleted) == 0 && seen == 0 {
		return used, nil
	}
	for sk, d := range samp {
		smp := d.sample()
		tot.samples = withSample(tot.samples, sk, smp)
		key := appendSampleKey(nil, p.user, sk)
		if d.n == 0 {
			err = txn.Delete(key)
		} else {
			err = txn.Set(key, appendSample(nil, smp))
		}
		if err != nil {
			return p.tooBig(err)
		}
	}
	if err := txn.Set(totalsKey(p.user), appendTotals(nil, &tot)); err != nil {
		return p.tooBig(err)
	}
	if err := txn.Commit(); err != nil {
		if errors.Is(err, badger.ErrTxnTooBig) {
			return p.tooBig(err)
		}
		return 0, fmt.Errorf("commit: %w", s.writeError(err))
	}
	s.cache.committed(p.user, deleted, make([][]uint64, len(deleted)), &tot)
	s.present.add(p.user, deleted)
	p.tokens += uint64(len(deleted))
	p.seen += seen
	if p.txns++; s.pruned != nil {
		s.pruned(p.txns)
	}
	return used, nil
}

// tooBig handles err, from a write to a transaction: Badger refusing it
// as too big halves the keys a transaction takes, for the batch to be
// done again smaller; any other error ends the prune.
func (p *pruner) tooBig(err error) (int, error) {
	if !errors.Is(err, badger.ErrTxnTooBig) {
		return 0, err
	}
	if p.limit == 1 {
		return 0, fmt.Errorf("one deletion alone: %w", err)
	}
	p.limit /= 2
	return 0, nil
}
