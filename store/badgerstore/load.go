package badgerstore

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/ristretto/v2/z"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/spamd/spamd/store"
)

// loadMarker is the file Load writes into the store's directory before it
// drops anything, and removes once what it loads is whole. A store that
// still has it was cut off in a load: Open drops everything in it, which
// leaves it as empty as Load found it.
const loadMarker = "spamd-loading"

// loadChunk is how many bytes of keys and values Load hands Badger at a
// time.
const loadChunk = 4 << 20

// ErrNotEmpty is returned by Load for a store that holds a model.
var ErrNotEmpty = errors.New("the store holds a model")

// Load writes every model of src into s, which must hold no model: the
// first training of a new store, which spamtrain learns in memory. Apply
// and Restore insert each key into a memtable, which Badger then writes
// out and compacts; Load hands Badger the keys sorted, and Badger writes
// them as tables straight into the bottom of its tree (a StreamWriter),
// with no memtable, write-ahead log or compaction.
//
// A src that is a store.Drainer is drained in the pass that writes its
// rows, so that a model is not held twice: each model whose rows that
// pass reaches is gone from src after, whether the load then succeeds or
// not.
//
// A load is all or nothing, across a crash too: before it drops anything
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
	rows, err := s.createSealed()
	if err != nil {
		return fmt.Errorf("load: sealed rows: %w", s.writeError(err))
	}
	if err := s.stream(ctx, src, users, cl, rows); err != nil {
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

// appendKV puts into buf what badger.KVToBuffer puts for a pb.KV of key
// and val at version 1 in stream 1, the only fields a load sets, in the
// protocol buffer's wire format: the fields in order and those of zero
// value left out. Badger's generic marshaller took 0.85 of the 1.9
// seconds of processor that a first training of 2 million tokens spent
// writing its model.
func appendKV(buf *z.Buffer, key, val []byte) {
	const (
		fieldKey      = 1
		fieldValue    = 2
		fieldVersion  = 4
		fieldStreamID = 10
	)
	n := protowire.SizeTag(fieldKey) + protowire.SizeBytes(len(key)) +
		protowire.SizeTag(fieldVersion) + protowire.SizeVarint(1) +
		protowire.SizeTag(fieldStreamID) + protowire.SizeVarint(1)
	if len(val) > 0 {
		n += protowire.SizeTag(fieldValue) + protowire.SizeBytes(len(val))
	}
	b := buf.SliceAllocate(n)[:0]
	b = protowire.AppendBytes(protowire.AppendTag(b, fieldKey, protowire.BytesType), key)
	if len(val) > 0 {
		b = protowire.AppendBytes(protowire.AppendTag(b, fieldValue, protowire.BytesType), val)
	}
	b = protowire.AppendVarint(protowire.AppendTag(b, fieldVersion, protowire.VarintType), 1)
	_ = protowire.AppendVarint(protowire.AppendTag(b, fieldStreamID, protowire.VarintType), 1)
}

// stream drops everything in the database and writes users' models of src
// into it through a StreamWriter, with their totals. It writes one stream,
// whose keys must ascend, kind by kind: every user's seen records, then
// every user's token rows, then every user's samples (which the seen
// records' values add up to), then every user's totals, reading each
// model twice. A stream of its own for each would cost a table builder each,
// which Badger sizes for its largest tables: 128 MiB of buffer.
func (s *Store) stream(ctx context.Context, src store.Store, users []string, cl *classList, rows *sealedWrite) error {
	sw := s.db.NewStreamWriter()
	if err := sw.Prepare(); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	flushed := false
	defer func() {
		if !flushed {
			sw.Cancel()
		}
	}()
	// Badger takes a chunk in on one goroutine while the next is encoded
	// on this one: two buffers go round between them.
	bufs := [2]*z.Buffer{z.NewBuffer(loadChunk+loadChunk/4, "spamd.load"), z.NewBuffer(loadChunk+loadChunk/4, "spamd.load")}
	free, full := make(chan *z.Buffer, 2), make(chan *z.Buffer)
	free <- bufs[1]
	buf := bufs[0]
	written := make(chan error, 1)
	go func(full <-chan *z.Buffer) {
		defer close(written)
		defer func() {
			if r := recover(); r != nil {
				written <- s.panicked("load", r)
			}
		}()
		for b := range full {
			if err := sw.Write(b); err != nil {
				written <- fmt.Errorf("write: %w", err)
				return
			}
			b.Reset()
			free <- b
		}
	}(full)
	var failed error
	// wait waits for the writer to finish, after its last chunk or a
	// failure, and returns the failure; the buffers are then unused.
	waited := false
	wait := func() error {
		if waited {
			return failed
		}
		waited = true
		close(full)
		if err, ok := <-written; ok && failed == nil {
			failed = err
		}
		for _, b := range bufs {
			b.Release()
		}
		return failed
	}
	defer func() { _ = wait() }()
	// writerDone notes why the writer stopped: the first failure, once.
	writerDone := func(err error, ok bool) error {
		if ok && failed == nil {
			failed = err
		}
		return cmp.Or(failed, errors.New("write: the writer stopped"))
	}
	send := func(force bool) error {
		if failed != nil {
			return failed
		}
		if buf.LenNoPadding() == 0 || !force && buf.LenNoPadding() < loadChunk {
			return nil
		}
		// Badger's tables take the records and a little more.
		if err := s.spaceFor(2 * int64(buf.LenNoPadding())); err != nil {
			return err
		}
		select {
		case full <- buf:
		case err, ok := <-written:
			return writerDone(err, ok)
		}
		select {
		case buf = <-free:
		case err, ok := <-written:
			return writerDone(err, ok)
		}
		return nil
	}
	put := func(key, val []byte) error {
		appendKV(buf, key, val)
		return send(false)
	}
	lookup := func(ns []string) (*classList, error) {
		for _, n := range ns {
			if _, ok := cl.index[n]; !ok {
				return nil, fmt.Errorf("%w: class %q is not in the model's header", store.ErrInconsistent, n)
			}
		}
		return cl, nil
	}
	encs := make([]*encoder, len(users))
	for i, u := range users {
		set := func(key, val []byte) error {
			if key[0] == kindToken {
				return rows.add(u, binary.BigEndian.Uint64(key[len(key)-8:]), val)
			}
			return put(key, val)
		}
		encs[i] = &encoder{user: u, names: lookup, sorted: true, set: set}
	}
	// The first pass writes the seen records, the second the rows, and
	// then come the samples; the header goes to each encoder once, first.
	for pass := range 2 {
		for i, u := range users {
			n := 0
			dump := src.Dump
			if d, ok := src.(store.Drainer); ok && pass == 1 {
				dump = d.Drain
			}
			err := dump(ctx, u, func(r store.Record) error {
				if n++; n%4096 == 0 {
					if err := ctx.Err(); err != nil {
						return err
					}
				}
				switch {
				case r.Classes != nil && pass == 0, r.Class != "" && pass == 0, r.Counts != nil && pass == 1:
					return encs[i].add(r)
				case r.Classes == nil && r.Counts == nil && r.Class == "":
					return encs[i].add(r) // neither: add says so
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("model %q: %w", u, err)
			}
		}
		if pass == 1 {
			for i, u := range users {
				if err := encs[i].writeSamples(); err != nil {
					return fmt.Errorf("model %q: %w", u, err)
				}
			}
		}
	}
	for i, u := range users {
		if err := put(totalsKey(u), appendTotals(nil, &encs[i].tot)); err != nil {
			return err
		}
	}
	if err := send(true); err != nil {
		return err
	}
	if err := wait(); err != nil {
		return err
	}
	flushed = true
	if err := sw.Flush(); err != nil {
		return fmt.Errorf("flush: %w", err)
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
	for _, name := range []string{sealedTemp, sealedName} {
		if err := os.Remove(filepath.Join(s.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return syncDir(s.dir)
}

// hasAnyModel reports whether the store has sealed rows, or any user a
// key of a model or one that a restore or delete is writing.
func (s *Store) hasAnyModel() (bool, error) {
	found := s.sealed.Load() != nil
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
