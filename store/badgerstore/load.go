package badgerstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/dgraph-io/badger/v4"

	"github.com/spamd/spamd/store"
)

// loadMarker is the file Load writes into the store's directory before it
// drops anything, and removes once what it loads is whole. A store that
// still has it was cut off in a load: Open drops everything in it, which
// leaves it as empty as Load found it.
const loadMarker = "spamd-loading"

// ErrNotEmpty is returned by Load for a store that holds a model.
var ErrNotEmpty = errors.New("the store holds a model")

// Load writes every model of src into s, which must hold no model: the
// first training of a new store, which spamtrain learns in memory. The
// token rows, most of a model, go into the sealed file (seal.go), in one
// sequential write; the seen records, samples and totals into Badger, in
// a write batch.
//
// A src that is a store.Drainer is drained, so that a model is not held
// twice: each model the load reaches is gone from src after, whether the
// load then succeeds or not.
//
// A load is all or nothing, across a crash too: before it writes anything
// it writes loadMarker, which it removes once the model is whole, and Open
// drops everything in a store that still has the marker. Load holds the
// store to itself while it runs: every other call waits for it.
func (s *Store) Load(ctx context.Context, src store.Store) (err error) {
	defer s.recoverFault(&err, "load")
	s.life.Lock()
	defer s.life.Unlock()
	if s.closed {
		return fmt.Errorf("load: %w", store.ErrClosed)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writable(true); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	if has, err := s.hasAnyModel(); err != nil || has {
		if err == nil {
			err = ErrNotEmpty
		}
		return fmt.Errorf("load: %w", err)
	}
	users, err := src.Users(ctx)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	slices.Sort(users)
	srcTot, err := src.Totals(ctx, "")
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	// The store's classes keep their indexes; src's new ones follow.
	names := slices.Clone(s.classes.Load().names)
	for _, c := range srcTot.Classes {
		if err := store.ValidClass(c); err != nil {
			return fmt.Errorf("load: %w", err)
		}
		if !slices.Contains(names, c) {
			names = append(names, c)
		}
	}
	cl := newClassList(names)
	if !s.inMemory {
		if err := writeSynced(filepath.Join(s.dir, loadMarker)); err != nil {
			return fmt.Errorf("load: mark the store: %w", s.writeError(err))
		}
	}
	loaded := false
	defer func() {
		if !loaded {
			err = errors.Join(err, s.unload())
		}
	}()
	// Void keys name sections of the file this load replaces.
	if err := s.dropVoid(); err != nil {
		return fmt.Errorf("load: %w", s.writeError(err))
	}
	rows, err := s.createSealed()
	if err != nil {
		return fmt.Errorf("load: sealed rows: %w", s.writeError(err))
	}
	if err := s.write(ctx, src, users, cl, rows); err != nil {
		rows.abort()
		return fmt.Errorf("load: %w", err)
	}
	old, err := rows.commit()
	if err != nil {
		return fmt.Errorf("load: sealed rows: %w", s.writeError(err))
	}
	if err := old.release(); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	if err := s.writeMeta(cl); err != nil {
		return fmt.Errorf("load: %w", s.writeError(err))
	}
	if !s.inMemory {
		if err := os.Remove(filepath.Join(s.dir, loadMarker)); err != nil {
			return fmt.Errorf("load: %w", err)
		}
		if err := syncDir(s.dir); err != nil {
			return fmt.Errorf("load: %w", err)
		}
	}
	loaded = true
	s.overMu.Lock()
	s.over = nil
	s.overMu.Unlock()
	for _, u := range users {
		s.cache.forget(u)
		s.present.drop(u)
	}
	return nil
}

// write writes users' models of src: their rows to rows, the rest to
// Badger, one model after the other, each in the one pass over it that
// Dump (or Drain) makes.
func (s *Store) write(ctx context.Context, src store.Store, users []string, cl *classList, rows *sealedWrite) error {
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	lookup := func(ns []string) (*classList, error) {
		for _, n := range ns {
			if _, ok := cl.index[n]; !ok {
				return nil, fmt.Errorf("%w: class %q is not in the model's header", store.ErrInconsistent, n)
			}
		}
		return cl, nil
	}
	// Bytes handed to the batch since the disk was last looked at.
	pending := 0
	put := func(key, val []byte) error {
		if pending += len(key) + len(val); pending >= 1<<20 {
			// Badger's memtables and logs are mapped files too.
			if err := s.spaceFor(2 * int64(pending)); err != nil {
				return err
			}
			pending = 0
		}
		return wb.Set(slices.Clone(key), slices.Clone(val))
	}
	for _, u := range users {
		set := func(key, val []byte) error {
			if key[0] == kindToken {
				return rows.add(u, binary.BigEndian.Uint64(key[len(key)-8:]), val)
			}
			return put(key, val)
		}
		enc := &encoder{user: u, names: lookup, sorted: true, set: set}
		dump := src.Dump
		if d, ok := src.(store.Drainer); ok {
			dump = d.Drain
		}
		n := 0
		err := dump(ctx, u, func(r store.Record) error {
			if n++; n%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			return enc.add(r)
		})
		if err == nil {
			err = enc.writeSamples()
		}
		if err == nil {
			err = put(totalsKey(u), appendTotals(nil, &enc.tot))
		}
		if err != nil {
			return fmt.Errorf("model %q: %w", u, err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	// What the batch wrote must be on disk before the marker goes.
	if s.inMemory {
		return nil
	}
	if err := s.db.Sync(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// writeMeta writes the schema version and classes cl and makes cl the
// store's class list.
func (s *Store) writeMeta(cl *classList) error {
	if err := s.writeMetaRecord(s.metaRecord(cl.names)); err != nil {
		return err
	}
	s.classes.Store(cl)
	return nil
}

// unload empties the database after a load failed, writes the class list
// back and removes the marker. Where it cannot, the marker stays, and the
// next Open drops what the load wrote.
func (s *Store) unload() error {
	cl := s.classes.Load()
	err := s.dropSealed()
	if err == nil {
		err = s.db.DropAll()
	}
	if err == nil {
		err = s.writeMeta(cl)
	}
	if err == nil && !s.inMemory {
		err = os.Remove(filepath.Join(s.dir, loadMarker))
	}
	if err != nil {
		return fmt.Errorf("drop what the load wrote (the next open drops it): %w", err)
	}
	return nil
}

// finishLoad drops everything in a store that a load was cut off in: one
// whose directory still holds loadMarker. Load writes only into a store
// that held no model, so that leaves the store as the load found it.
func (s *Store) finishLoad() error {
	if s.inMemory {
		return nil
	}
	marker := filepath.Join(s.dir, loadMarker)
	if _, err := os.Stat(marker); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	if s.dbReadOnly {
		return fmt.Errorf("%w: a load into this store was cut off, and what it wrote can only be dropped once the store can be written", store.ErrReadOnly)
	}
	s.log.Warn("badgerstore: dropping what a cut-off load wrote; the store is empty again", "dir", s.dir)
	if err := s.dropSealed(); err != nil {
		return fmt.Errorf("drop a cut-off load: %w", err)
	}
	if err := s.db.DropAll(); err != nil {
		return fmt.Errorf("drop a cut-off load: %w", err)
	}
	if err := os.Remove(marker); err != nil {
		return fmt.Errorf("drop a cut-off load: %w", err)
	}
	return syncDir(s.dir)
}

// dropSealed removes the sealed file, and the one being written; s.life
// is held exclusively, or the store is not open yet.
func (s *Store) dropSealed() error {
	if err := s.sealed.Swap(nil).release(); err != nil {
		return err
	}
	if s.inMemory {
		return nil
	}
	for _, name := range []string{sealedTemp, sealedName, sealedV2Name} {
		if err := os.Remove(filepath.Join(s.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return syncDir(s.dir)
}

// hasAnyModel reports whether the store has sealed rows that are not
// void, or any user a key of a model or one that a restore or delete is
// writing.
func (s *Store) hasAnyModel() (bool, error) {
	found := s.sealed.Load().live()
	err := s.db.View(func(txn *badger.Txn) error {
		for _, kind := range slices.Concat(userKinds, oldKinds, []byte{kindBusy}) {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{kind}})
			it.Rewind()
			found = found || it.Valid()
			it.Close()
		}
		return nil
	})
	return found, err
}
