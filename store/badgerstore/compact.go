package badgerstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/spamd/spamd/store"
)

// defaultFlushWait bounds how long Compact tries to get the store to
// itself to write the memtables out; see flush.
const defaultFlushWait = 5 * time.Second

// Compact gives back the disk space of what the store no longer holds, in
// three steps, and reports what it did. Measured on the SpamAssassin
// corpus's model (docs/maintenance.md), each step reclaims a kind of
// garbage the others leave:
//
//  1. The memtables are written into tables and their write-ahead logs
//     deleted, by closing Badger and opening it again: Badger has no
//     other way to flush them short of DropPrefix, which deletes keys.
//     In a running daemon the last 16 MiB memtable of changes (counts a
//     forget or a relabel rewrote, deletion markers) otherwise stays out
//     of the next step, with its log of up to twice that on disk.
//  2. Flatten rewrites the tables into one level, which drops every
//     superseded version of a key and every deletion marker: training
//     rewrites a token's row at each message, and forgetting messages
//     leaves a marker per token dropped. A store of half the corpus
//     forgotten shrank from 46.6 to 12.2 MiB, the size of a restore of
//     its dump into a new store.
//  3. The value log is garbage-collected until no file is worth
//     rewriting; the store keeps few values there.
//
// DeleteUser needs none of this for Badger's keys: its DropPrefix drops
// them at once. In step 1, with the store to itself, Compact also
// rewrites the sealed file (seal.go) with every model's token rows, those
// Badger holds folded in and dropped from it, and without a deleted
// model's: a row takes some 13 bytes there against some 35 in Badger's
// tables, and a model with no keys in Badger is read from the file alone.
//
// Writers wait while it runs, readers only during step 1, for as long as
// Badger takes to close and open and the sealed file to be written, which
// grows with the store's rows: all of a compaction of trec07-late's model
// of 2.1 million rows, 500 messages trained over the file, took 0.7 s. Step 1 needs
// the store to itself: a call that holds it longer than 5 seconds, such
// as a dump being read, makes Compact skip the step rather than keep
// readers waiting, and say so. A store that is not ok refuses to
// compact, since Badger's compaction writes new tables before it deletes
// the old ones.
func (s *Store) Compact(ctx context.Context) (c store.Compaction, err error) {
	defer s.recoverFault(&err, "compact")
	c.LSMBefore, c.LogsBefore = s.Size()
	c.TablesBefore, c.LevelsBefore = s.tables()
	if !s.inMemory {
		if err := s.flush(ctx, &c); err != nil {
			return c, fmt.Errorf("compact: %w", err)
		}
	}
	if err := s.flatten(ctx, &c); err != nil {
		return c, fmt.Errorf("compact: %w", err)
	}
	c.LSMAfter, c.LogsAfter = s.Size()
	c.TablesAfter, c.LevelsAfter = s.tables()
	return c, nil
}

// tables counts the LSM tree's tables and the levels that hold them.
func (s *Store) tables() (tables, levels int) {
	if s.enter() != nil {
		return 0, 0
	}
	defer s.life.RUnlock()
	if s.usable() != nil {
		return 0, 0
	}
	seen := map[int]bool{}
	for _, t := range s.db.Tables() {
		tables++
		seen[t.Level] = true
	}
	return tables, len(seen)
}

// flush writes the memtables into tables by closing Badger and opening
// it again, holding the store exclusively. It tries to get hold of it
// for defaultFlushWait without making readers queue behind the attempt (as
// waiting on the lock would), and gives up on the step, noting why in c,
// if some call holds the store all that time.
func (s *Store) flush(ctx context.Context, c *store.Compaction) error {
	wait := cmp.Or(s.flushWait, defaultFlushWait)
	deadline := time.Now().Add(wait)
	for !s.life.TryLock() {
		if time.Now().After(deadline) {
			c.FlushSkipped = fmt.Sprintf("the store was busy for %v (a dump, restore or check in progress)", wait)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	defer s.life.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writable(true); err != nil {
		return err
	}
	if s.dbReadOnly {
		return fmt.Errorf("%w: opened read-only", store.ErrReadOnly)
	}
	// Flatten leaves alone a tree whose tables all lie in level 0, as
	// those of a small store do, with every version of a key that each
	// memtable flushed; only Badger's compaction on close moves them
	// down, which drops the versions superseded.
	l0 := true
	for _, t := range s.db.Tables() {
		l0 = l0 && t.Level == 0
	}
	// Closing writes the memtables out: it needs the space flushing
	// them takes, which writable checked against the reserve.
	if err := <-closeDB(s.db); err != nil {
		s.dbClosing = closedChan
		s.fail(FaultClose, fmt.Sprintf("closing Badger to write its memtables out: %v", err))
		return fmt.Errorf("close to flush the memtables: %w", err)
	}
	var err error
	if l0 {
		err = s.compactL0()
	}
	var db *badger.DB
	var f fault
	if err == nil {
		db, f, err = s.openDB(false)
	}
	if err == nil && f.kind != "" {
		// The directory turned read-only since writable looked.
		err = errors.Join(fmt.Errorf("%w: %s", store.ErrReadOnly, f.reason), db.Close())
	}
	if err != nil {
		// Nothing is open: failed, the monitor opens it again.
		s.dbClosing = closedChan
		s.fail(FaultReopenFailed, fmt.Sprintf("reopening after writing the memtables out: %v", err))
		return fmt.Errorf("reopen after flushing the memtables: %w", err)
	}
	// Nothing was written in between, so the cache and the presence
	// filters still hold.
	s.db = db
	c.Flushed = true
	// With the store to itself, the sealed file can be rewritten with
	// every model's rows and without deleted models', and the old one
	// unmapped.
	if err := s.reseal(ctx); err != nil {
		if ctx.Err() == nil {
			err = s.writeError(err)
		}
		return fmt.Errorf("fold the token rows into the sealed file: %w", err)
	}
	return nil
}

// compactL0 opens the closed database to close it again at once with
// Badger's compaction of level 0 on close, which merges its tables into
// the next level.
func (s *Store) compactL0() error {
	db, err := badger.Open(s.badgerOptions(s.dir).WithCompactL0OnClose(true))
	if err != nil {
		return fmt.Errorf("open to compact level 0: %w", err)
	}
	if err := <-closeDB(db); err != nil {
		return fmt.Errorf("compact level 0 on close: %w", err)
	}
	return nil
}

// flatten rewrites the LSM tree into one level and garbage-collects the
// value log until nothing is left to reclaim.
func (s *Store) flatten(ctx context.Context, c *store.Compaction) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.life.RUnlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.writable(true); err != nil {
		return err
	}
	// One worker: with more, they race for the same tables and all but
	// one log Badger's "Unable to fill tables" for nothing.
	if err := s.db.Flatten(1); err != nil {
		return fmt.Errorf("flatten: %w", err)
	}
	if s.inMemory {
		return nil
	}
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := s.db.RunValueLogGC(gcDiscardRatio)
		if errors.Is(err, badger.ErrNoRewrite) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("value-log GC: %w", err)
		}
		c.Rewritten++
	}
}
