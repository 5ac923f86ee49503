package badgerstore

import (
	"context"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/spamd/spamd/store"
)

// convert turns a store of schema 1, whose meta record m says so, into one
// of schema 2. Only token values changed encoding, and schema 2 keeps them
// under a kind of its own: each transaction moves a run of schema-1 token
// keys to the new kind, deleting the old keys, and the meta record says
// schema 2 only once no old key is left. Each step is whole or not there,
// so a process killed anywhere leaves a store with every token under one
// kind or the other, never both, and meta still at schema 1 until the
// end: the next Open picks up where this one stopped. Seen records of
// schema 1 are schema-2 records without steps and stay as they are.
//
// A value that does not decode is moved as it is, to be reported by Check
// as it would have been before: uvarints and zigzag varints fail on the
// same bytes.
func (s *Store) convert(ctx context.Context, m meta, o Options) error {
	start := time.Now()
	s.log.Info("badgerstore: converting the store from schema 1", "dir", s.dir)
	maxCount := s.db.MaxBatchCount() * s.txnShare / 100
	maxSize := s.db.MaxBatchSize() * s.txnShare / 100
	from := []byte{kindTokenV1}
	var moved, undecodable, txns int
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, bad, next, err := s.convertRun(from, maxCount, maxSize, o.convertKeys)
		if err != nil {
			return fmt.Errorf("after %d tokens: %w", moved, err)
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
	err := s.db.Update(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{kindTokenV1}})
		it.Rewind()
		left := it.Valid()
		it.Close()
		if left {
			// Nothing else writes while Open runs; this would be a bug.
			return fmt.Errorf("%w: schema-1 token keys left after the conversion", store.ErrInconsistent)
		}
		v, err := encodeMeta(meta{Schema: schemaVersion, Classes: m.Classes})
		if err != nil {
			return err
		}
		return txn.Set(metaKey, v)
	})
	if err != nil {
		return fmt.Errorf("write meta record: %w", err)
	}
	s.log.Info("badgerstore: converted the store from schema 1", "dir", s.dir, "tokens", moved, "took", time.Since(start).Round(time.Millisecond))
	if undecodable > 0 {
		s.log.Warn("badgerstore: token values that did not decode were moved as they were; run a check", "dir", s.dir, "tokens", undecodable)
	}
	return nil
}

// convertRun moves, in one transaction, the schema-1 token keys from key
// from on, as many as fit in maxCount entries and maxSize bytes, counted
// as Badger's Txn.checkSize counts (or maxKeys keys, if not 0), and
// returns how many it moved, how many of their values did not decode, and
// the key the next run starts from.
func (s *Store) convertRun(from []byte, maxCount, maxSize int64, maxKeys int) (moved, bad int, next []byte, err error) {
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	// Keys and values stay referenced by txn until it ends; buf may move
	// as it grows, which leaves what was taken from it where it was.
	var buf []byte
	var keys, vals [][]byte
	var row []uint64
	var count, size int64
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{kindTokenV1}, PrefetchValues: true, PrefetchSize: 256})
	for it.Seek(from); it.Valid(); it.Next() {
		item := it.Item()
		start := len(buf)
		buf = append(buf, kindToken)
		buf = append(buf, item.Key()[1:]...)
		key := buf[start:len(buf):len(buf)]
		start = len(buf)
		undecodable := false
		err = item.Value(func(v []byte) error {
			var derr error
			if row, derr = decodeCountsV1(row[:0], v); derr != nil {
				undecodable = true
				buf = append(buf, v...)
			} else {
				buf = appendRow(buf, row)
			}
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
		old := append([]byte{kindTokenV1}, key[1:]...)
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
	next = append([]byte{kindTokenV1}, last[1:]...)
	return len(keys), bad, append(next, 0), nil
}
