package badgerstore

import (
	"context"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/spamd/spamd/store"
)

// migration is how a store of one schema becomes one of the next: the
// values of one kind of key change encoding, and the next schema keeps
// them under a kind of its own.
type migration struct {
	from, to byte // the kinds of key
	what     string
	// recode appends v, a value of kind from, as a value of kind to,
	// giving what had no day the day of the upgrade; it reports false
	// for a value that does not decode.
	recode func(dst, v []byte, upgraded store.Day) ([]byte, bool)
}

// migrations holds, by schema, the migrations to the next one.
var migrations = map[int][]migration{
	// Schema 6 laid the sealed file out in buckets, under a name of its
	// own; Open writes it from the earlier file before it converts
	// (rewriteSealed).
	5: nil,
	// Schema 5 added the sealed file, which an older store does not have.
	4: nil,
	// Schema 2 added weights to the token rows.
	1: {{from: kindTokenV1, to: kindTokenV3, what: "tokens", recode: func(dst, v []byte, _ store.Day) ([]byte, bool) {
		row, err := decodeCountsV1(nil, v)
		return appendRowV3(dst, row), err == nil
	}}},
	// Schema 3 added the measures' values to the seen records.
	2: {{from: kindSeenV2, to: kindSeenV3, what: "seen records", recode: func(dst, v []byte, _ store.Day) ([]byte, bool) {
		rec, err := decodeSeenV2(v, nil)
		return appendSeenV3(dst, rec), err == nil
	}}},
	// Schema 4 added days to the token rows and days and marks to the
	// seen records: what was there gets the day of the upgrade, so that
	// a prune by age the day after takes nothing for ancient, and no
	// mark.
	3: {
		{from: kindTokenV3, to: kindToken, what: "tokens", recode: func(dst, v []byte, day store.Day) ([]byte, bool) {
			row, err := decodeRowV3(nil, v)
			return appendRow(dst, day, row), err == nil
		}},
		{from: kindSeenV3, to: kindSeen, what: "seen records", recode: func(dst, v []byte, day store.Day) ([]byte, bool) {
			rec, err := decodeSeenV3(v, nil)
			rec.day = day
			return appendSeen(dst, rec), err == nil
		}},
	},
}

// keysAsTheyAre reports whether converting a store of schema from to
// this one changes no key.
func keysAsTheyAre(from int) bool {
	for sc := from; sc < schemaVersion; sc++ {
		if len(migrations[sc]) > 0 {
			return false
		}
	}
	return true
}

// undecodablePrefix goes before a value that a conversion found
// undecodable, which keeps its bytes: no decoder reads past it (it is a
// varint that never ends), so Check reports the value whatever its bytes
// would read as in the new encoding.
var undecodablePrefix = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// convert turns a store of schema m.Schema into one of the next, by its
// migrations, and sets m to the meta record it wrote: each transaction
// moves a run of an old kind's keys to the new kind, recoding their
// values and deleting the old keys, and the meta record says the next
// schema only once no old key is left. Each step is whole or not there,
// so a process killed anywhere leaves a store with every key under one
// kind or the other, never both, and meta at the old schema until the
// end: the next Open picks up where this one stopped. A store several
// schemas old goes through each conversion in turn.
//
// The conversion to schema 4 first records the day it starts in the meta
// record, so that one resumed on a later day gives every key the same
// day, and ends by rewriting the totals with their last day.
//
// A value that does not decode is moved behind undecodablePrefix, to be
// reported by Check as it would have been before.
func (s *Store) convert(ctx context.Context, m *meta, o Options) error {
	migs, ok := migrations[m.Schema]
	if !ok {
		return fmt.Errorf("%w: schema %d, this build reads %d", ErrSchema, m.Schema, schemaVersion)
	}
	if m.Schema == 3 && m.Upgraded == 0 {
		m.Upgraded = store.DayOf(time.Now())
		if err := s.writeMetaRecord(*m); err != nil {
			return fmt.Errorf("write meta record: %w", err)
		}
	}
	start := time.Now()
	s.log.Info("badgerstore: converting the store", "dir", s.dir, "from_schema", m.Schema)
	maxCount := s.db.MaxBatchCount() * s.txnShare / 100
	maxSize := s.db.MaxBatchSize() * s.txnShare / 100
	txns := 0
	for _, mig := range migs {
		from := []byte{mig.from}
		var moved, undecodable int
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			n, bad, next, err := s.convertRun(mig, m.Upgraded, from, maxCount, maxSize, o.convertKeys)
			if err != nil {
				return fmt.Errorf("after %d %s: %w", moved, mig.what, err)
			}
			if n == 0 {
				break
			}
			moved, undecodable, txns = moved+n, undecodable+bad, txns+1
			if o.convertErr != nil {
				if err := o.convertErr(txns); err != nil {
					return err
				}
			}
			from = next
		}
		s.log.Info("badgerstore: converted", "dir", s.dir, "to_schema", m.Schema+1, mig.what, moved)
		if undecodable > 0 {
			s.log.Warn("badgerstore: values that did not decode were moved behind a prefix that marks them so, their bytes kept; run a check", "dir", s.dir, mig.what, undecodable)
		}
	}
	if m.Schema == 3 {
		n, err := s.convertTotals(ctx, m.Upgraded, maxCount, maxSize)
		if err != nil {
			return fmt.Errorf("totals: %w", err)
		}
		s.log.Info("badgerstore: converted", "dir", s.dir, "to_schema", m.Schema+1, "totals", n)
	}
	next := meta{Schema: m.Schema + 1, Classes: m.Classes, Upgraded: m.Upgraded}
	err := s.db.Update(func(txn *badger.Txn) error {
		for _, mig := range migs {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{mig.from}})
			it.Rewind()
			left := it.Valid()
			it.Close()
			if left {
				// Nothing else writes while Open runs; this would be a bug.
				return fmt.Errorf("%w: %s of schema %d left after the conversion", store.ErrInconsistent, mig.what, m.Schema)
			}
		}
		v, err := encodeMeta(next)
		if err != nil {
			return err
		}
		return txn.Set(metaKey, v)
	})
	if err != nil {
		return fmt.Errorf("write meta record: %w", err)
	}
	*m = next
	s.log.Info("badgerstore: converted the store", "dir", s.dir, "to_schema", m.Schema, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// convertTotals gives every user's totals the day of the upgrade as their
// last day, unless they have a later one, rewriting them in the encoding
// of schema 4, in transactions of at most maxCount entries and maxSize
// bytes; it returns how many it rewrote. Doing it again changes nothing,
// so a conversion cut off in it just does it again.
func (s *Store) convertTotals(ctx context.Context, day store.Day, maxCount, maxSize int64) (int, error) {
	from := []byte{kindTotals}
	n := 0
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		var last []byte
		var count, size int64
		more, rewrote := false, 0
		err := s.db.Update(func(txn *badger.Txn) error {
			var keys, vals [][]byte
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{kindTotals}})
			for it.Seek(from); it.Valid(); it.Next() {
				item := it.Item()
				var v []byte
				err := item.Value(func(b []byte) error {
					t, err := decodeTotals(b)
					if err != nil {
						return nil // left for Check to report
					}
					t.lastDay = max(t.lastDay, day)
					v = appendTotals(nil, &t)
					return nil
				})
				if err != nil {
					it.Close()
					return err
				}
				key := item.KeyCopy(nil)
				cost := int64(len(key)+len(v)) + 2 + 10
				if count+1 >= maxCount || size+cost >= maxSize {
					more = true
					break
				}
				count, size, last = count+1, size+cost, key
				if v != nil {
					keys, vals = append(keys, key), append(vals, v)
				}
			}
			it.Close()
			for i := range keys {
				if err := txn.Set(keys[i], vals[i]); err != nil {
					return err
				}
			}
			rewrote = len(keys)
			return nil
		})
		if err == nil {
			n += rewrote
		}
		if err != nil || !more {
			return n, err
		}
		from = append(last, 0)
	}
}

// convertRun moves, in one transaction, the keys of mig's old kind from key
// from on, as many as fit in maxCount entries and maxSize bytes, counted
// as Badger's Txn.checkSize counts (or maxKeys keys, if not 0), and
// returns how many it moved, how many of their values did not decode, and
// the key the next run starts from.
func (s *Store) convertRun(mig migration, upgraded store.Day, from []byte, maxCount, maxSize int64, maxKeys int) (moved, bad int, next []byte, err error) {
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	// Keys and values stay referenced by txn until it ends; buf may move
	// as it grows, which leaves what was taken from it where it was.
	var buf []byte
	var keys, vals [][]byte
	var count, size int64
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{mig.from}, PrefetchValues: true, PrefetchSize: 256})
	for it.Seek(from); it.Valid(); it.Next() {
		item := it.Item()
		start := len(buf)
		buf = append(buf, mig.to)
		buf = append(buf, item.Key()[1:]...)
		key := buf[start:len(buf):len(buf)]
		start = len(buf)
		undecodable := false
		err = item.Value(func(v []byte) error {
			recoded, ok := mig.recode(buf, v, upgraded)
			if !ok {
				undecodable = true
				recoded = append(append(buf, undecodablePrefix...), v...)
			}
			buf = recoded
			return nil
		})
		if err != nil {
			it.Close()
			return 0, 0, nil, err
		}
		val := buf[start:len(buf):len(buf)]
		// The new key with its value and the old key's deletion, each
		// with 2 bytes of meta and 10 of version.
		cost := 2*int64(len(key)) + int64(len(val)) + 2*(2+10)
		if count+2 >= maxCount || size+cost >= maxSize || maxKeys > 0 && len(keys) == maxKeys {
			break
		}
		count, size = count+2, size+cost
		keys, vals = append(keys, key), append(vals, val)
		if undecodable {
			bad++
		}
	}
	it.Close()
	if len(keys) == 0 {
		return 0, 0, nil, nil
	}
	for i, key := range keys {
		old := append([]byte{mig.from}, key[1:]...)
		if err := txn.Set(key, vals[i]); err != nil {
			return 0, 0, nil, err
		}
		if err := txn.Delete(old); err != nil {
			return 0, 0, nil, err
		}
	}
	if err := txn.Commit(); err != nil {
		return 0, 0, nil, fmt.Errorf("commit: %w", err)
	}
	// The successor of the last key moved: keys before it are gone, and
	// seeking past their deletions saves the next run stepping over them.
	last := keys[len(keys)-1]
	next = append([]byte{mig.from}, last[1:]...)
	return len(keys), bad, append(next, 0), nil
}
