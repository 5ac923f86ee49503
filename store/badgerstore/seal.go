package badgerstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/sys/unix"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/badgerstore/sealed"
)

// A Load writes the token rows of the models it loads not into Badger but
// into one sealed file beside it (package sealed), which the store maps
// and reads in place: a row there takes some 13 bytes where Badger's
// tables took 35, and a read is two memory accesses where Badger's walks
// its levels. The seen records, samples and totals stay in Badger. A file
// of the layout before this one is rewritten in it when the store opens
// (rewriteSealed).
//
// The sealed file is the bottom of the user's rows, and Badger's token
// keys of the user lie over it, as the levels of Badger's own tree lie
// over each other: a key in Badger is the row, whatever the file says,
// and a key with an empty value (a tombstone, which no row encodes to)
// says that the row is gone. Training a sealed model writes the rows it
// changes into Badger, one transaction a batch as for any model, and a
// row it takes to zero becomes a tombstone where the file has one, so
// that nothing but Badger's own commits is needed for a crash to leave
// every message counted whole or not at all. Deleting a model (DeleteUser,
// a failed Restore, a busy mark found by Open) writes a void key for the
// user into Badger (kindVoid), under the model's busy mark, before the
// user's keys go: from then on the user's section is no model's rows.
// Compact rewrites the file without void sections, with the store to
// itself, and then deletes the void keys; a crash between the two leaves
// void keys of users the file no longer has, which mean nothing. A
// rewrite is written to sealedTemp and renamed over sealedName, so that
// the directory holds one or the other, whole.
//
// The file of the layout before schema 6 is sealedV2Name; a store that
// holds one rewrites it as sealedName when it opens (rewriteSealed), and
// removes it once the meta record says schema 6 (dropEarlierSealed).
// Until then the earlier file is the rows, for the next open as for a
// build of schema 5, which finds no other file of its name; from then
// on that build refuses the store for its schema.
const (
	sealedName   = "sealed-buckets"
	sealedTemp   = sealedName + ".new"
	sealedV2Name = "sealed-rows"
)

// sealedRows is the sealed file a store reads: mapped, or held in memory
// by an in-memory store; and the users whose sections are void. A user
// made void replaces it with a copy, whose void map is new and whose
// file and unmap are the same: only the last is released.
type sealedRows struct {
	file  *sealed.File
	unmap func() error // nil for one in memory
	void  map[string]bool
}

// section returns user's section, nil if none or void.
func (r *sealedRows) section(user string) *sealed.Section {
	if r == nil || r.void[user] {
		return nil
	}
	return r.file.Section(user)
}

// live reports whether any section is not void.
func (r *sealedRows) live() bool {
	if r == nil {
		return false
	}
	for _, u := range r.file.Users() {
		if !r.void[u] {
			return true
		}
	}
	return false
}

func (r *sealedRows) release() error {
	if r == nil || r.unmap == nil {
		return nil
	}
	return r.unmap()
}

// releaseAll unmaps the sealed file; s.life is held exclusively, or the
// store is not open yet.
func (s *Store) releaseAll() error { return s.sealed.Swap(nil).release() }

// section returns user's section of the sealed file, nil if it has none
// or it is void.
func (s *Store) section(user string) *sealed.Section { return s.sealed.Load().section(user) }

// sectionAt is section as txn sees it: nil also where txn has the user's
// void key, which a delete after txn began may have written since.
func (s *Store) sectionAt(txn *badger.Txn, user string) *sealed.Section {
	sec := s.section(user)
	if sec == nil {
		return nil
	}
	if _, err := txn.Get(userPrefix(kindVoid, user)); err == nil {
		return nil
	}
	return sec
}

// openSealed maps the sealed file, if the directory has one, dropping a
// replacement that a crash left unfinished; readOnly says that the store
// was asked to open read-only, not kept from writing by a fault.
func (s *Store) openSealed(readOnly bool) error {
	if s.inMemory {
		return nil
	}
	if !s.dbReadOnly {
		if err := os.Remove(filepath.Join(s.dir, sealedTemp)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("sealed rows: %w", err)
		}
	}
	path, v2 := filepath.Join(s.dir, sealedName), filepath.Join(s.dir, sealedV2Name)
	var r *sealedRows
	var err error
	switch {
	case exists(path) && (!exists(v2) || s.schemaCurrent()):
		// An earlier file beside it is one a rewrite keeps until the
		// meta record says this schema (dropEarlierSealed).
		r, err = mapSealed(path)
	case exists(v2):
		// At an older schema the earlier file holds the rows, whatever
		// file of this layout lies beside it: a rewrite cut short
		// before the meta record, or one that an older build's
		// training has made stale since.
		r, err = s.rewriteSealed(v2, readOnly)
	default:
		return nil
	}
	if err != nil {
		return fmt.Errorf("sealed rows: %w", err)
	}
	if r == nil {
		return nil // a file of no rows, rewritten as none
	}
	err = s.db.View(func(txn *badger.Txn) error {
		users, err := usersOf(context.Background(), txn, kindVoid)
		for _, u := range users {
			r.void[u] = true
		}
		return err
	})
	if err != nil {
		// A rewrite has made r the store's already.
		s.sealed.Store(nil)
		return errors.Join(fmt.Errorf("sealed rows: void users: %w", err), r.release())
	}
	s.sealed.Store(r)
	return nil
}

// schemaCurrent reports whether the meta record says this schema; a
// record that does not read says not.
func (s *Store) schemaCurrent() bool {
	var m meta
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		m, err = metaIn(txn)
		return err
	})
	return err == nil && m.Schema >= schemaVersion
}

// dropEarlierSealed removes the earlier layout's file, which a rewrite
// leaves until the store reads its rows from a file of this layout and
// the meta record says this schema, as loadMeta leaves it for a store
// that can write: until then an older build, and the next open, read the
// earlier file.
func (s *Store) dropEarlierSealed() error {
	if s.inMemory || s.dbReadOnly {
		return nil
	}
	if r := s.sealed.Load(); r != nil && r.unmap == nil {
		return nil // rewritten in memory
	}
	v2 := filepath.Join(s.dir, sealedV2Name)
	if !exists(v2) {
		return nil
	}
	if err := errors.Join(os.Remove(v2), syncDir(s.dir)); err != nil {
		return fmt.Errorf("sealed rows: remove %s: %w", sealedV2Name, err)
	}
	return nil
}

// mapSealed maps the sealed file at path and opens it.
func mapSealed(path string) (*sealedRows, error) {
	data, err := mapFile(path)
	if err != nil {
		return nil, err
	}
	file, err := sealed.Open(data)
	if err != nil {
		return nil, errors.Join(unreadable(path, err), unix.Munmap(data))
	}
	return &sealedRows{file: file, unmap: func() error { return unix.Munmap(data) }, void: map[string]bool{}}, nil
}

// unreadable is the error of a sealed file at path that err says does
// not read.
func unreadable(path string, err error) error {
	return fmt.Errorf("%w: %s: %w; it holds the token rows of the models a first training loaded: restore the store from a dump (spamtrain restore into a new directory) or train it again", store.ErrInconsistent, path, err)
}

// mapFile maps the file at path, which is not empty, read-only.
func mapFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() == 0 || int64(int(fi.Size())) != fi.Size() {
		return nil, fmt.Errorf("%w: %w: %s is %d bytes", store.ErrInconsistent, sealed.ErrCorrupt, path, fi.Size())
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	return data, nil
}

// rewriteSealed rewrites the sealed file at path, of the earlier layout,
// in this one, which a store reads without its cache (readSealed): as
// sealedName, through sealedTemp as a reseal writes it, leaving path to
// dropEarlierSealed; or, where a fault keeps the store from writing, or
// the rows cannot be written (no space, an I/O error), in memory, for as
// long as the store is open. A store opened read-only leaves it to a
// writer.
func (s *Store) rewriteSealed(path string, readOnly bool) (*sealedRows, error) {
	if readOnly {
		return nil, fmt.Errorf("%w: sealed file of the earlier layout", errNeedsWriting)
	}
	old, err := mapFile(path)
	if err != nil {
		return nil, err
	}
	w, err := s.scanEarlier(old, path, s.dbReadOnly)
	var wrote *writeFailed
	if errors.As(err, &wrote) && !s.dbReadOnly {
		s.log.Warn("badgerstore: the sealed file of the earlier layout could not be rewritten on disk; it is read from memory until the store opens again", "dir", s.dir, "err", wrote.err)
		w, err = s.scanEarlier(old, path, true)
	}
	err = errors.Join(err, unix.Munmap(old))
	if err != nil {
		if w != nil {
			w.abort()
		}
		return nil, err
	}
	if _, err := w.commit(); err != nil {
		return nil, err
	}
	r := s.sealed.Load()
	s.log.Info("badgerstore: sealed file rewritten in the current layout", "dir", s.dir, "rows", w.rows, "in_memory", w.f == nil)
	return r, nil
}

// writeFailed is an error of writing a rewritten sealed file, not of
// reading the earlier one.
type writeFailed struct{ err error }

func (e *writeFailed) Error() string { return e.err.Error() }
func (e *writeFailed) Unwrap() error { return e.err }

// scanEarlier writes the rows of old, the earlier file at path, into a
// new sealed file, in memory if inMemory, and returns it to be committed.
// An error of the writing is a writeFailed; of the reading, the
// inconsistency unreadable says.
func (s *Store) scanEarlier(old []byte, path string, inMemory bool) (*sealedWrite, error) {
	w, err := s.createSealedIn(inMemory, s.roomFor)
	if err != nil {
		return nil, &writeFailed{err}
	}
	var werr error
	err = sealed.ScanV2(old, func(user string, h uint64, row []byte) error {
		werr = w.add(user, h, row)
		return werr
	})
	if err == nil {
		// Its last bytes, the offsets, are most of what is left.
		werr = w.close()
		err = werr
	}
	switch {
	case err == nil:
		return w, nil
	case werr != nil:
		w.abort()
		return nil, &writeFailed{werr}
	default:
		w.abort()
		return nil, unreadable(path, err)
	}
}

// sealedWrite is a sealed file being written.
type sealedWrite struct {
	s      *Store
	w      *sealed.Writer
	f      *os.File      // the temporary file, or nil in memory
	buf    *bytes.Buffer // in memory
	rows   int
	closed bool // its bytes are all written
}

// close writes the file's last bytes, once.
func (w *sealedWrite) close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	return w.w.Close()
}

// createSealed starts a sealed file.
func (s *Store) createSealed() (*sealedWrite, error) { return s.createSealedIn(s.inMemory, s.spaceFor) }

// createSealedIn starts a sealed file, in memory if inMemory, whose
// writes room allows.
func (s *Store) createSealedIn(inMemory bool, room func(n int64) error) (*sealedWrite, error) {
	sw := &sealedWrite{s: s}
	var w io.Writer
	if inMemory {
		sw.buf = new(bytes.Buffer)
		w = sw.buf
	} else {
		f, err := os.OpenFile(filepath.Join(s.dir, sealedTemp), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, err
		}
		sw.f, w = f, spaceWriter{room, f}
	}
	sw.w = sealed.NewWriter(w)
	return sw, nil
}

// spaceWriter writes to w while room says the store's reserve stays
// free: Badger, which shares the disk, does not survive finding it full.
type spaceWriter struct {
	room func(n int64) error
	w    io.Writer
}

func (w spaceWriter) Write(p []byte) (int, error) {
	if err := w.room(int64(len(p))); err != nil {
		return 0, err
	}
	return w.w.Write(p)
}

// add appends user's row of h.
func (w *sealedWrite) add(user string, h uint64, row []byte) error {
	w.rows++
	return w.w.Add(user, h, row)
}

// abort drops the file.
func (w *sealedWrite) abort() {
	if w.f != nil {
		_ = w.f.Close()
		_ = os.Remove(w.f.Name())
	}
}

// commit finishes the file, puts it in place of the store's and makes it
// the one the store reads, returning the one it replaces. A file of no
// rows removes the store's instead. The caller holds s.wmu, or s.life
// exclusively.
func (w *sealedWrite) commit() (old *sealedRows, err error) {
	s := w.s
	if err := w.close(); err != nil {
		w.abort()
		return nil, err
	}
	var r *sealedRows
	switch {
	case w.rows == 0:
		w.abort()
		if w.f != nil {
			if err := os.Remove(filepath.Join(s.dir, sealedName)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
			if err := syncDir(s.dir); err != nil {
				return nil, err
			}
		}
	case w.f == nil:
		file, err := sealed.Open(w.buf.Bytes())
		if err != nil {
			return nil, err
		}
		r = &sealedRows{file: file, void: map[string]bool{}}
	default:
		if err := errors.Join(w.f.Sync(), w.f.Close()); err != nil {
			_ = os.Remove(w.f.Name())
			return nil, err
		}
		path := filepath.Join(s.dir, sealedName)
		if err := os.Rename(w.f.Name(), path); err != nil {
			_ = os.Remove(w.f.Name())
			return nil, err
		}
		if err := syncDir(s.dir); err != nil {
			return nil, err
		}
		if r, err = mapSealed(path); err != nil {
			return nil, err
		}
	}
	return s.sealed.Swap(r), nil
}

// void makes user's section void, if the file has one that is not: it
// writes the user's void key, then shows readers the file without the
// section. The caller holds s.wmu.
func (s *Store) void(user string) error {
	cur := s.sealed.Load()
	if cur.section(user) == nil {
		return nil
	}
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(userPrefix(kindVoid, user), nil) }); err != nil {
		return err
	}
	next := &sealedRows{file: cur.file, unmap: cur.unmap, void: maps.Clone(cur.void)}
	next.void[user] = true
	s.sealed.Store(next)
	return nil
}

// reseal rewrites the sealed file with every model's token rows, and
// then drops from Badger the token keys it folded in and the void keys.
// A model's rows are its section's, without a void one, merged with the
// keys Badger holds over them, or Badger's alone for a model never loaded
// (scanTokens): Badger keeps a row in some 35 bytes of its tables, the
// file in some 13, and a lookup of a model that Badger holds no keys of
// reads the file alone. s.life and s.wmu are held exclusively: the file
// it replaces is unmapped at once.
//
// A crash between the new file's rename and the drop leaves Badger's
// keys over rows of the same values, tombstones over rows the file no
// longer has, or, for a model the file has no section of, tombstones
// over nothing, which readers and scanTokens pass over: the store answers
// as before, and the next reseal folds them again.
func (s *Store) reseal(ctx context.Context) error {
	folded, wrote, err := s.foldSealed(ctx)
	if err != nil || !wrote {
		return err
	}
	// The void keys go first: the new file may have a section for a user
	// deleted and trained again since, which a void key left behind would
	// hide once Badger no longer holds the user's rows.
	if err := s.dropVoid(); err != nil {
		return err
	}
	return s.dropFolded(folded)
}

// foldSealed is reseal's first part: it writes the new sealed file and
// puts it in place, and returns the users whose token keys in Badger it
// folded in; wrote is false if it had nothing to do.
func (s *Store) foldSealed(ctx context.Context) (folded []string, wrote bool, err error) {
	cur := s.sealed.Load()
	// The models with token keys in Badger: every model has totals.
	var inBadger []string
	err = s.db.View(func(txn *badger.Txn) error {
		users, err := usersOf(ctx, txn, kindTotals)
		for _, u := range users {
			// A model being restored or deleted is no model yet, nor a
			// whole one.
			if s.isBusy(u) {
				continue
			}
			it := txn.NewIterator(badger.IteratorOptions{Prefix: userPrefix(kindToken, u), PrefetchValues: false})
			if it.Rewind(); it.Valid() {
				inBadger = append(inBadger, u)
			}
			it.Close()
		}
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("list the models in Badger: %w", err)
	}
	if len(inBadger) == 0 && (cur == nil || len(cur.void) == 0) {
		return nil, false, nil
	}
	users := slices.Clone(inBadger)
	if cur != nil {
		for _, u := range cur.file.Users() {
			if !cur.void[u] && !s.isBusy(u) {
				users = append(users, u)
			}
		}
	}
	slices.Sort(users)
	users = slices.Compact(users)
	w, err := s.createSealed()
	if err != nil {
		return nil, false, fmt.Errorf("sealed rows: %w", err)
	}
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	for _, u := range users {
		var aerr error
		n := len(userPrefix(kindToken, u)) + 8
		err := s.scanTokens(ctx, txn, u, func(key, v []byte) bool {
			if len(key) != n {
				aerr = fmt.Errorf("%w: malformed token key %x", store.ErrInconsistent, key)
				return false
			}
			aerr = w.add(u, binary.BigEndian.Uint64(key[n-8:]), v)
			return aerr == nil
		})
		if err = errors.Join(err, aerr); err != nil {
			w.abort()
			return nil, false, fmt.Errorf("sealed rows of %q: %w", u, err)
		}
	}
	old, err := w.commit()
	if err != nil {
		return nil, false, fmt.Errorf("sealed rows: %w", err)
	}
	if err := old.release(); err != nil {
		return nil, false, fmt.Errorf("sealed rows: %w", err)
	}
	return inBadger, true, nil
}

// dropFolded is reseal's last part: it drops from Badger the token keys
// of users, whose rows the sealed file now holds.
func (s *Store) dropFolded(users []string) error {
	if len(users) == 0 {
		return nil
	}
	var prefixes [][]byte
	for _, u := range users {
		prefixes = append(prefixes, userPrefix(kindToken, u))
	}
	if err := s.db.DropPrefix(prefixes...); err != nil {
		return fmt.Errorf("drop the token keys folded into the sealed file: %w", err)
	}
	// The folded users are sealed now, and Badger holds none of their
	// token keys: their presence filters are those of a sealed model,
	// built anew, and overlaid looks again.
	s.overMu.Lock()
	s.over = nil
	s.overMu.Unlock()
	for _, u := range users {
		s.present.drop(u)
	}
	return nil
}

// dropVoid deletes every void key.
func (s *Store) dropVoid() error {
	return s.db.Update(func(txn *badger.Txn) error {
		users, err := usersOf(context.Background(), txn, kindVoid)
		for _, u := range users {
			err = errors.Join(err, txn.Delete(userPrefix(kindVoid, u)))
		}
		return err
	})
}

// overlaid reports whether Badger may hold token keys of user, a user
// whose rows are sealed: whether a read must ask Badger before the file.
// A user's answer is looked up once, then kept; writers set it with
// overlay before they write the first key.
func (s *Store) overlaid(user string) bool {
	// Every lookup of a sealed model asks, from every worker.
	s.overMu.RLock()
	has, ok := s.over[user]
	s.overMu.RUnlock()
	if ok {
		return has
	}
	s.overMu.Lock()
	defer s.overMu.Unlock()
	if has, ok := s.over[user]; ok {
		return has
	}
	has = true // a failed look asks Badger every time
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: userPrefix(kindToken, user)})
		defer it.Close()
		it.Rewind()
		has = it.Valid()
		return nil
	})
	if err == nil {
		if s.over == nil {
			s.over = make(map[string]bool)
		}
		s.over[user] = has
	}
	return has
}

// overlay notes that Badger is about to hold token keys of user, if the
// user's rows are sealed; or, if not, forgets what it knew of them.
func (s *Store) overlay(user string) {
	s.overMu.Lock()
	defer s.overMu.Unlock()
	if s.section(user) == nil {
		delete(s.over, user)
		return
	}
	if s.over == nil {
		s.over = make(map[string]bool)
	}
	s.over[user] = true
}

// scanTokens calls f with the key and value of each of user's token rows
// in ascending hash order, until f returns false: the sealed rows and the
// keys in txn over them, without tombstones. Keys of rows from the
// sealed file are made as Badger's would be. A malformed key in Badger is
// passed as it is, for the caller to report.
func (s *Store) scanTokens(ctx context.Context, txn *badger.Txn, user string, f func(key, v []byte) bool) error {
	prefix := userPrefix(kindToken, user)
	sec := s.sectionAt(txn, user)
	if sec == nil {
		// Tombstones outlive the section they lay over when a crash
		// cuts a reseal short after its rename.
		return scan(ctx, txn, prefix, func(k, v []byte) bool {
			return len(v) == 0 && len(k) == len(prefix)+8 || f(k, v)
		})
	}
	it := sec.Iter()
	more := it.Next()
	key := appendTokenKey(nil, user, 0)
	stopped := false
	var cerr error
	n := 0
	fromFile := func() {
		if n++; n%4096 == 0 {
			if cerr = ctx.Err(); cerr != nil {
				stopped = true
				return
			}
		}
		binary.BigEndian.PutUint64(key[len(prefix):], it.Hash())
		stopped = !f(key, it.Row())
		more = it.Next()
	}
	err := scan(ctx, txn, prefix, func(k, v []byte) bool {
		if len(k) != len(prefix)+8 {
			stopped = !f(k, v)
			return !stopped
		}
		h := binary.BigEndian.Uint64(k[len(prefix):])
		for more && it.Hash() < h && !stopped {
			fromFile()
		}
		if more && it.Hash() == h {
			more = it.Next()
		}
		if len(v) > 0 && !stopped {
			stopped = !f(k, v)
		}
		return !stopped
	})
	for err == nil && more && !stopped {
		fromFile()
	}
	err = errors.Join(err, cerr)
	if it.Err() != nil {
		err = errors.Join(err, fmt.Errorf("%w: %w", store.ErrInconsistent, it.Err()))
	}
	return err
}

// sealedRow reads sec's row of h into row, as load and resolveDays read
// Badger's: it reports false if there is none.
func sealedRow(sec *sealed.Section, h bow.Hash, row []uint64) ([]uint64, store.Day, bool, error) {
	head, shared, rest, ok, err := sec.Find(uint64(h))
	if err != nil {
		return row, 0, false, fmt.Errorf("%w: %w", store.ErrInconsistent, err)
	}
	if !ok {
		return row, 0, false, nil
	}
	row, day, err := decodeSealedRow(row, head, shared, rest)
	return row, day, true, err
}

// decodeSealedRow is decodeRow of the row that the sealed file holds as
// head's low shared bytes and rest (sealed.Section.Find). A model's rows
// share none of their bytes, or their day, two bytes, and perhaps the
// first byte of their first value: it decodes those where they are,
// without copying them together or calling decodeDay, which took a
// fifth of a lookup's instructions, and copies only a row whose day or
// value runs on from the bytes shared into rest.
func decodeSealedRow(dst []uint64, head uint32, shared int, rest []byte) ([]uint64, store.Day, error) {
	// A day of two bytes has its first byte's top bit set and its
	// second's clear; decodeDay reads it as below, always in range.
	const twoBytes, two = 0x8080, 0x80
	i := 0
	switch {
	case shared == 0 && len(rest) >= 2 && (uint32(rest[0])|uint32(rest[1])<<8)&twoBytes == two:
		head, rest = uint32(rest[0])|uint32(rest[1])<<8, rest[2:]
	case shared == 2 && head&twoBytes == two:
	case shared == 3 && head&(0x80<<16|twoBytes) == two:
		dst, i = append(dst, uint64(head>>16&0xff)), 1
	default:
		var buf [32]byte
		b := binary.LittleEndian.AppendUint32(buf[:0], head)[:shared]
		return decodeRow(dst, append(b, rest...))
	}
	u := uint64(head&0x7f) | uint64(head>>8&0x7f)<<7
	day := store.Day(int64(u>>1) ^ -int64(u&1) + int64(dayEpoch))
	dst, err := decodeRowTail(dst, rest, i)
	return dst, day, err
}
