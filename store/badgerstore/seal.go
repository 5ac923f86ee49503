package badgerstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/sys/unix"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/badgerstore/sealed"
)

// A Load writes the token rows of the models it loads not into Badger but
// into one sealed file beside it (package sealed), which the store maps
// and reads in place: a row there takes some 14 bytes where Badger's
// tables took 35, and a read is a search of one array where Badger's
// walks its levels. The seen records, samples and totals stay in Badger.
//
// A user's rows are in the sealed file or in Badger, never both: while
// the file holds a section for the user, that section is the user's
// rows, and any of the user's token keys in Badger are ignored. Before a
// user's rows change (Apply, Prune), the store dissolves the section: it
// writes its rows into Badger, syncs, and then replaces the file with one
// without the section. A process killed before the replace leaves keys
// in Badger that the section hides and the next dissolve writes again,
// with the same values; one killed after it leaves the rows in Badger.
// Deleting a user's model (DeleteUser, a failed Restore) replaces the
// file without the section before Badger's keys go, under the model's
// busy mark. The file is written to sealedTemp and renamed over
// sealedName, so that a reader of the directory finds one or the other,
// whole.
const (
	sealedName = "sealed-rows"
	sealedTemp = sealedName + ".new"
)

// sealedRows is the sealed file a store reads: mapped, or held in memory
// by an in-memory store.
type sealedRows struct {
	file  *sealed.File
	unmap func() error // nil for one in memory
}

func (r *sealedRows) release() error {
	if r == nil || r.unmap == nil {
		return nil
	}
	return r.unmap()
}

// releaseAll unmaps the sealed file and those it replaced; s.life is
// held exclusively, or the store is not open yet.
func (s *Store) releaseAll() error {
	err := s.sealed.Swap(nil).release()
	for _, r := range s.retired {
		err = errors.Join(err, r.release())
	}
	s.retired = nil
	return err
}

// section returns user's section of the sealed file, nil if it has none.
func (s *Store) section(user string) *sealed.Section {
	if r := s.sealed.Load(); r != nil {
		return r.file.Section(user)
	}
	return nil
}

// openSealed maps the sealed file, if the directory has one, dropping a
// replacement that a crash left unfinished.
func (s *Store) openSealed() error {
	if s.inMemory {
		return nil
	}
	if !s.dbReadOnly {
		if err := os.Remove(filepath.Join(s.dir, sealedTemp)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("sealed rows: %w", err)
		}
	}
	path := filepath.Join(s.dir, sealedName)
	if !exists(path) {
		return nil
	}
	r, err := mapSealed(path)
	if err != nil {
		return fmt.Errorf("sealed rows: %w", err)
	}
	s.sealed.Store(r)
	return nil
}

// mapSealed maps the sealed file at path and opens it.
func mapSealed(path string) (*sealedRows, error) {
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
	file, err := sealed.Open(data)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("%w: %s: %w", store.ErrInconsistent, path, err), unix.Munmap(data))
	}
	return &sealedRows{file: file, unmap: func() error { return unix.Munmap(data) }}, nil
}

// sealedWrite is a sealed file being written.
type sealedWrite struct {
	s    *Store
	w    *sealed.Writer
	f    *os.File      // the temporary file, or nil in memory
	buf  *bytes.Buffer // in memory
	rows int
}

// createSealed starts a sealed file.
func (s *Store) createSealed() (*sealedWrite, error) {
	sw := &sealedWrite{s: s}
	var w io.Writer
	if s.inMemory {
		sw.buf = new(bytes.Buffer)
		w = sw.buf
	} else {
		f, err := os.OpenFile(filepath.Join(s.dir, sealedTemp), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, err
		}
		sw.f, w = f, spaceWriter{s, f}
	}
	sw.w = sealed.NewWriter(w)
	return sw, nil
}

// spaceWriter writes to w while the store's reserve stays free: Badger,
// which shares the disk, does not survive finding it full.
type spaceWriter struct {
	s *Store
	w io.Writer
}

func (w spaceWriter) Write(p []byte) (int, error) {
	if err := w.s.spaceFor(int64(len(p))); err != nil {
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
	if err := w.w.Close(); err != nil {
		w.abort()
		return nil, err
	}
	var r *sealedRows
	switch {
	case w.rows == 0:
		w.abort()
		if !s.inMemory {
			if err := os.Remove(filepath.Join(s.dir, sealedName)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
			if err := syncDir(s.dir); err != nil {
				return nil, err
			}
		}
	case s.inMemory:
		file, err := sealed.Open(w.buf.Bytes())
		if err != nil {
			return nil, err
		}
		r = &sealedRows{file: file}
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

// unseal replaces the sealed file with one without user's section, if it
// has one. What it replaces stays mapped until Close, for readers that
// may still be in it. The caller holds s.wmu.
func (s *Store) unseal(user string) error {
	cur := s.sealed.Load()
	if cur == nil || cur.file.Section(user) == nil {
		return nil
	}
	w, err := s.createSealed()
	if err != nil {
		return fmt.Errorf("sealed rows: %w", err)
	}
	for _, u := range cur.file.Users() {
		if u == user {
			continue
		}
		var aerr error
		err := cur.file.Section(u).Scan(func(h uint64, row []byte) bool {
			aerr = w.add(u, h, row)
			return aerr == nil
		})
		if err = errors.Join(err, aerr); err != nil {
			w.abort()
			return fmt.Errorf("sealed rows of %q: %w", u, err)
		}
	}
	old, err := w.commit()
	if err != nil {
		return fmt.Errorf("sealed rows: %w", err)
	}
	s.retired = append(s.retired, old)
	return nil
}

// dissolve moves user's rows out of the sealed file into Badger, before
// they change. The caller holds s.wmu.
func (s *Store) dissolve(ctx context.Context, user string) error {
	sec := s.section(user)
	if sec == nil {
		return nil
	}
	if err := s.writable(true); err != nil {
		return err
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	// Keys for many rows at once: WriteBatch keeps them until it writes.
	var keys []byte
	n := 0
	var serr error
	err := sec.Scan(func(h uint64, row []byte) bool {
		if n++; n%4096 == 0 {
			if serr = ctx.Err(); serr != nil {
				return false
			}
		}
		if cap(keys)-len(keys) < len(user)+10 {
			keys = make([]byte, 0, 4096*(len(user)+10))
		}
		start := len(keys)
		keys = appendTokenKey(keys, user, bow.Hash(h))
		serr = wb.Set(keys[start:len(keys):len(keys)], row)
		return serr == nil
	})
	if err = errors.Join(err, serr); err != nil {
		return fmt.Errorf("move the sealed rows of %q into Badger: %w", user, s.writeError(err))
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("move the sealed rows of %q into Badger: %w", user, s.writeError(err))
	}
	// The rows must be on disk before the file that hid them goes.
	if !s.inMemory {
		if err := s.db.Sync(); err != nil {
			return fmt.Errorf("move the sealed rows of %q into Badger: %w", user, s.writeError(err))
		}
	}
	if err := s.unseal(user); err != nil {
		return s.writeError(err)
	}
	s.log.Info("badgerstore: a model's sealed rows moved into Badger, to be trained", "dir", s.dir, "user", user, "tokens", sec.Rows())
	return nil
}

// scanTokens calls f with the key and value of each of user's token rows
// in ascending hash order, from the sealed file if it holds them, else
// from txn, until f returns false. Keys of rows from the sealed file are
// made as Badger's would be.
func (s *Store) scanTokens(ctx context.Context, txn *badger.Txn, user string, f func(key, v []byte) bool) error {
	sec := s.section(user)
	if sec == nil {
		return scan(ctx, txn, userPrefix(kindToken, user), f)
	}
	key := appendTokenKey(nil, user, 0)
	n := 0
	var cerr error
	err := sec.Scan(func(h uint64, v []byte) bool {
		if n++; n%4096 == 0 {
			if cerr = ctx.Err(); cerr != nil {
				return false
			}
		}
		binary.BigEndian.PutUint64(key[len(key)-8:], h)
		return f(key, v)
	})
	return errors.Join(cerr, err)
}

// readSealed is readTokens for a user whose rows are in sec.
func readSealed(sec *sealed.Section, hashes []bow.Hash, vals []store.Counts, idx []int, width int) error {
	arena := make([]uint64, len(idx)*width)
	for k, i := range idx {
		v, ok, err := sec.Get(uint64(hashes[i]))
		if err != nil {
			return fmt.Errorf("token %x: %w: %w", hashes[i], store.ErrInconsistent, err)
		}
		if !ok {
			continue
		}
		row := arena[k*width : k*width : (k+1)*width]
		if row, _, err = decodeRow(row, v); err != nil {
			return fmt.Errorf("token %x: %w", hashes[i], err)
		}
		vals[i] = row[:max(len(row), width)]
	}
	return nil
}
