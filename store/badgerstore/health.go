package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/spamd/spamd/store"
	"golang.org/x/sys/unix"
)

// Fault kinds, the keys of store.Health.Faults. Each counts the times the
// store met the fault since Open.
const (
	// FaultLowSpace: writes were stopped because the free space fell
	// below the reserve.
	FaultLowSpace = "low_space"
	// FaultUnwritable: writes were stopped because no file could be
	// created in the directory.
	FaultUnwritable = "unwritable"
	// FaultDirRemoved: the directory was removed, or replaced by another,
	// while the store had it open.
	FaultDirRemoved = "dir_removed"
	// FaultWrite: Badger failed to write a transaction.
	FaultWrite = "write_error"
	// FaultRead: Badger failed to read, for another reason than the
	// caller's context.
	FaultRead = "read_error"
	// FaultPanic: Badger panicked in a call; the panic was recovered and
	// the store failed.
	FaultPanic = "panic"
	// FaultStall: a commit did not finish within WriteTimeout.
	FaultStall = "stall"
	// FaultRefused: a write was refused because the store was not ok.
	FaultRefused = "refused_write"
	// FaultReopen: the store reopened Badger in process.
	FaultReopen = "reopen"
	// FaultReopenFailed: an attempt to reopen Badger failed.
	FaultReopenFailed = "reopen_failed"
	// FaultSalvage: the model was copied out of a removed directory into
	// a new one.
	FaultSalvage = "salvage"
	// FaultClose: Badger did not close within CloseTimeout, or was left
	// open for lack of space to flush into.
	FaultClose = "close_incomplete"
)

// fault is what a look at the directory found: a kind of fault and why,
// or kind "" for none.
type fault struct {
	kind, reason string
	// gone says that the directory does not exist any more.
	gone bool
}

// health is the store's state and its fault counters.
type health struct {
	state atomic.Int32 // a store.State, read without mu on every call

	mu     sync.Mutex
	kind   string // the fault kind that made the state, "" when ok
	reason string
	since  time.Time
	faults map[string]uint64
	// changed has an element when the state changed since OnHealth was
	// last called.
	changed chan struct{}
}

func (h *health) init() {
	h.since = time.Now()
	h.faults = make(map[string]uint64)
	h.changed = make(chan struct{}, 1)
}

func (h *health) load() store.State { return store.State(h.state.Load()) }

// Health returns the store's state as it last found it, and the faults
// it counted since Open, by kind (the Fault constants).
func (s *Store) Health() store.Health {
	h := &s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	return store.Health{
		State:  h.load(),
		Reason: h.reason,
		Since:  h.since,
		Faults: maps.Clone(h.faults),
	}
}

var _ store.HealthReporter = (*Store)(nil)

// count counts a fault of kind.
func (s *Store) count(kind string) {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	if s.health.faults == nil {
		s.health.faults = make(map[string]uint64)
	}
	s.health.faults[kind]++
}

// setState moves the store to state for a fault of kind, unless it is
// in a worse state already and not forced, and counts the fault unless
// the store was in a bad state for that kind already: a fault that goes
// from degrading the store to failing it is one. Ok is always forced:
// only what recovers sets it. A failed store keeps the reason it failed
// for, unless forced: the first cause says most, later ones are counted
// and logged where they happen.
func (s *Store) setState(state store.State, kind, reason string, force bool) {
	h := &s.health
	h.mu.Lock()
	cur := h.load()
	if !force && state != store.StateOK && state < cur {
		h.mu.Unlock()
		return
	}
	if h.faults == nil {
		h.faults = make(map[string]uint64)
	}
	if state != store.StateOK && (cur == store.StateOK || kind != h.kind) {
		h.faults[kind]++
	}
	if !force && state == store.StateFailed && cur == store.StateFailed {
		h.mu.Unlock()
		return
	}
	if state == cur && kind == h.kind && reason == h.reason {
		h.mu.Unlock()
		return
	}
	if state != cur {
		h.since = time.Now()
	}
	// A reason that only updates a figure is no change to report.
	changed := state != cur || kind != h.kind
	h.state.Store(int32(state))
	h.kind, h.reason = kind, reason
	h.mu.Unlock()
	if changed {
		select {
		case h.changed <- struct{}{}:
		default:
		}
	}
	if state == cur {
		return
	}
	switch state {
	case store.StateOK:
		s.log.Info("badgerstore: store is ok again", "dir", s.dir, "was", cur.String())
	case store.StateDegraded:
		s.log.Warn("badgerstore: store is read-only", "dir", s.dir, "fault", kind, "reason", reason)
	case store.StateFailed:
		s.log.Error("badgerstore: store has failed", "dir", s.dir, "fault", kind, "reason", reason)
	}
}

func (s *Store) degrade(kind, reason string) { s.setState(store.StateDegraded, kind, reason, false) }
func (s *Store) fail(kind, reason string)    { s.setState(store.StateFailed, kind, reason, false) }
func (s *Store) ok()                         { s.setState(store.StateOK, "", "", true) }

// note replaces the reason of the current state, without counting a
// fault or reporting a change.
func (s *Store) note(reason string) {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	s.health.reason = reason
}

// faultKind returns the kind of fault behind the current state and why.
func (s *Store) faultKind() (kind, reason string) {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	return s.health.kind, s.health.reason
}

// stateErr returns the error a call gets in the current state for an
// operation of the kind it is, nil if it may go on.
func (s *Store) stateErr(write bool) error {
	switch s.health.load() {
	case store.StateFailed:
		_, reason := s.faultKind()
		return fmt.Errorf("%w: %s", store.ErrFailed, reason)
	case store.StateDegraded:
		if write {
			_, reason := s.faultKind()
			return fmt.Errorf("%w: %s", store.ErrReadOnly, reason)
		}
	}
	return nil
}

// usable returns nil if reads may use Badger, or the error that says why
// not. It is called holding s.life.
func (s *Store) usable() error { return s.stateErr(false) }

// writable returns nil if a write may go to Badger now, or the error that
// says why not, counting the write refused. It looks at the directory
// first if fresh or if the last look is older than CheckInterval. It is
// called holding s.life, and s.wmu.
func (s *Store) writable(fresh bool) error {
	if err := s.refusal(); err != nil {
		return err
	}
	if s.inMemory || s.blind.Load() {
		return nil
	}
	// Between full looks, a stat tells a removed directory: a write into
	// one is lost with the files, and once Badger fails to create a
	// memtable in it, nothing it holds can be read to salvage it.
	if fresh || time.Since(time.Unix(0, s.lastLook.Load())) >= s.opts.CheckInterval || !s.sameDir() {
		s.look()
		return s.refusal()
	}
	return nil
}

// refusal returns the error the current state gives writes, counting the
// write refused, or nil if the state lets it go on. Unlike writable, it
// does not look at the directory.
func (s *Store) refusal() error {
	if s.opts.ReadOnly {
		return fmt.Errorf("%w: opened for reading only", store.ErrReadOnly)
	}
	err := s.stateErr(true)
	if err != nil {
		s.count(FaultRefused)
	}
	return err
}

// look looks at the directory now and degrades or fails the store for
// what it finds; it returns that.
func (s *Store) look() fault {
	s.checkMu.Lock()
	defer s.checkMu.Unlock()
	f := s.inspect(true)
	s.lastLook.Store(time.Now().UnixNano())
	if f.kind != "" {
		s.degradeFor(f)
	}
	return f
}

// degradeFor puts the store in the state fault f calls for: degraded,
// except for a directory replaced by another, which fails it, so that it
// reopens the new one, as a restart would. A removed directory degrades
// it: what Badger holds open can still be read, and is salvaged.
func (s *Store) degradeFor(f fault) {
	if f.kind == FaultDirRemoved && !f.gone {
		s.fail(f.kind, f.reason)
		return
	}
	s.degrade(f.kind, f.reason)
}

// dirGone is the reason of a store whose directory was removed.
const dirGone = "the store's directory was removed"

// sameDir reports whether the store's path still names the directory
// it opened.
func (s *Store) sameDir() bool {
	fi, err := os.Stat(s.dir)
	return err == nil && identityOf(fi).same(s.dirID)
}

// dirIdentity tells one directory from another at the same path.
type dirIdentity struct {
	dev, ino uint64
	mode     fs.FileMode
	uid, gid int
}

func identify(dir string) (dirIdentity, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return dirIdentity{}, err
	}
	return identityOf(fi), nil
}

func identityOf(fi fs.FileInfo) dirIdentity {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return dirIdentity{mode: fi.Mode().Perm()}
	}
	return dirIdentity{dev: uint64(st.Dev), ino: uint64(st.Ino), mode: fi.Mode().Perm(), uid: int(st.Uid), gid: int(st.Gid)}
}

// same reports whether id and o are the same directory.
func (id dirIdentity) same(o dirIdentity) bool { return id.dev == o.dev && id.ino == o.ino }

// probeName is the file a look creates and removes to learn whether the
// directory takes new files, as Badger's next memtable needs. Badger
// ignores files of names it does not give.
const probeName = ".spamd-probe"

// inspect looks at the store's directory: whether it is the one Open
// found (if identity), whether a file can be created in it, and whether
// its filesystem has the reserve free. A directory that does not exist
// yet is judged by the free space of the nearest one above it.
func (s *Store) inspect(identity bool) fault {
	var f fault
	fi, err := os.Stat(s.dir)
	switch {
	case errors.Is(err, fs.ErrNotExist) && identity:
		return fault{kind: FaultDirRemoved, reason: dirGone, gone: true}
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fault{kind: FaultUnwritable, reason: fmt.Sprintf("cannot look at the directory: %v", err)}
	case identity:
		if !identityOf(fi).same(s.dirID) {
			return fault{kind: FaultDirRemoved, reason: "the store's directory was replaced by another; reopening the new one, as a restart would"}
		}
	}
	exists := err == nil && fi.IsDir()
	where := s.dir
	for !exists {
		up := filepath.Dir(where)
		if up == where {
			break
		}
		where = up
		if _, err := os.Stat(where); err == nil {
			break
		}
	}
	if s.opts.ReserveBytes > 0 {
		var st unix.Statfs_t
		if err := unix.Statfs(where, &st); err == nil {
			if free := freeBytes(&st); free < s.opts.ReserveBytes {
				f.kind = FaultLowSpace
				f.reason = fmt.Sprintf("free space %s on %s is below the reserve of %s", mib(free), where, mib(s.opts.ReserveBytes))
				return f
			}
		}
	}
	if exists {
		p := filepath.Join(s.dir, probeName)
		pf, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err == nil {
			err = errors.Join(pf.Close(), os.Remove(p))
		}
		switch {
		case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
			f.kind, f.reason = FaultLowSpace, fmt.Sprintf("no space to create a file: %v", err)
		case err != nil:
			f.kind, f.reason = FaultUnwritable, fmt.Sprintf("cannot create a file in the directory: %v", err)
		}
	}
	return f
}

// freeBytes returns the space st says an unprivileged process may still
// use: the blocks kept for root are no margin to count on.
func freeBytes(st *unix.Statfs_t) int64 { return int64(uint64(st.Bavail) * uint64(st.Bsize)) }

// freeSpace returns the free space of dir's filesystem, -1 if unknown.
func freeSpace(dir string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1
	}
	return freeBytes(&st)
}

// spaceFor returns nil if writing n bytes more leaves the reserve free,
// or else store.ErrReadOnly, wrapped, having looked at the directory. A
// load, which writes gigabytes of a large model at once, asks before each
// chunk it writes: Badger writes tables through memory maps, and a table
// written past the end of the disk's space is SIGBUS, not an error.
func (s *Store) spaceFor(n int64) error {
	err := s.roomFor(n)
	if err == nil {
		return nil
	}
	s.look()
	if err := s.refusal(); err != nil {
		return err
	}
	s.count(FaultRefused)
	return err
}

// roomFor returns nil if n more bytes leave the reserve free, or the
// error that says they do not. Unlike spaceFor it changes nothing: Open
// calls it, before the store knows its directory to look at.
func (s *Store) roomFor(n int64) error {
	if s.inMemory || s.opts.ReserveBytes <= 0 || s.blind.Load() {
		return nil
	}
	free := freeSpace(s.dir)
	if free < 0 || free-n >= s.opts.ReserveBytes {
		return nil
	}
	return fmt.Errorf("%w: free space %s, and %s more would leave less than the reserve of %s", store.ErrReadOnly, mib(free), mib(n), mib(s.opts.ReserveBytes))
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// recoverFault turns a panic in a call into an error for *errp, wrapping
// store.ErrFailed, and fails the store: Badger panics when its state is
// broken (a memtable it could not replace is nil from then on), and the
// next call would panic again. It must be deferred directly.
func (s *Store) recoverFault(errp *error, op string) {
	if r := recover(); r != nil {
		*errp = s.panicked(op, r)
	}
}

// panicked logs the panic r of operation op, fails the store and returns
// the error the call gets.
func (s *Store) panicked(op string, r any) error {
	s.log.Error("badgerstore: panic in a call", "dir", s.dir, "op", op, "panic", r, "stack", string(debug.Stack()))
	s.fail(FaultPanic, fmt.Sprintf("Badger panicked in %s: %v", op, r))
	return fmt.Errorf("%s: %w: Badger panicked: %v", op, store.ErrFailed, r)
}

// readFailed counts a failed Badger read, unless the caller's context
// ended it.
func (s *Store) readFailed(ctx context.Context, err error) {
	if err != nil && ctx.Err() == nil && !errors.Is(err, store.ErrInconsistent) {
		s.count(FaultRead)
	}
}

// writeFailed judges a failed Badger write, holding s.life and s.wmu: a
// read that panics then means Badger lost its memtable, and the store
// fails; a fault of the directory degrades it; otherwise the store goes
// on, the fault counted. It returns the error the state gives writes,
// nil if the store is still ok.
func (s *Store) writeFailed(err error) error {
	if broken, perr := s.probeRead(); broken {
		s.fail(FaultWrite, fmt.Sprintf("Badger is unusable after a failed write (%v): %v", err, perr))
		return s.stateErr(true)
	}
	s.count(FaultWrite)
	if !s.inMemory {
		if f := s.look(); f.kind != "" {
			return s.stateErr(true)
		}
	}
	s.log.Warn("badgerstore: a write failed; the store looks sound and goes on", "dir", s.dir, "err", err)
	return nil
}

// writeError returns err, a failed Badger write, with the error the
// store's state gives writes after judging it (writeFailed), if any.
func (s *Store) writeError(err error) error {
	if serr := s.writeFailed(err); serr != nil {
		return fmt.Errorf("%w (%w)", err, serr)
	}
	return err
}

// probeRead reads a key, and reports whether Badger panicked doing it.
func (s *Store) probeRead() (broken bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			broken, err = true, fmt.Errorf("a read panicked: %v", r)
		}
	}()
	return false, s.db.View(func(txn *badger.Txn) error {
		_, err := txn.Get(metaKey)
		return err
	})
}

// probeWrite rewrites the meta record as it is, to learn that Badger
// writes again, holding s.life and s.wmu.
func (s *Store) probeWrite() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("a write panicked: %v", r)
		}
	}()
	return s.writeMetaRecord(s.metaRecord(s.classes.Load().names))
}

// monitor looks at the directory every CheckInterval, recovers from what
// it finds, and reports changes to OnHealth, until Close.
func (s *Store) monitor() {
	defer s.monDone.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stopMon:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTicker(s.opts.CheckInterval)
	defer t.Stop()
	var retry time.Time // the earliest next reopen, after one failed
	backoff := s.opts.CheckInterval
	for {
		select {
		case <-s.stopMon:
			return
		case <-s.health.changed:
			s.report()
		case <-t.C:
			if s.inMemory {
				continue
			}
			if !s.tick(ctx, &retry, &backoff) {
				return
			}
		}
	}
}

// report calls OnHealth, recovering from its panics.
func (s *Store) report() {
	if s.opts.OnHealth == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("badgerstore: OnHealth panicked", "dir", s.dir, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	s.opts.OnHealth(s.Health())
}

// tick is one round of the monitor; it returns false once the store is
// closed.
func (s *Store) tick(ctx context.Context, retry *time.Time, backoff *time.Duration) (more bool) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("badgerstore: the store's watch panicked", "dir", s.dir, "panic", r, "stack", string(debug.Stack()))
			s.fail(FaultPanic, fmt.Sprintf("the store's watch panicked: %v", r))
			more = true
		}
	}()
	switch s.health.load() {
	case store.StateOK:
		if !s.blind.Load() {
			s.look()
		}
	case store.StateDegraded:
		s.recoverDegraded(ctx)
	case store.StateFailed:
		if time.Now().Before(*retry) {
			return true
		}
		err := s.reopen(ctx)
		switch {
		case errors.Is(err, store.ErrClosed):
			return false
		case errors.Is(err, errStillClosing):
		case err != nil:
			s.count(FaultReopenFailed)
			s.log.Error("badgerstore: reopening the store failed", "dir", s.dir, "err", err, "next_attempt_in", *backoff)
			*retry = time.Now().Add(*backoff)
			*backoff = min(2**backoff, time.Minute)
		default:
			*retry, *backoff = time.Time{}, s.opts.CheckInterval
		}
	}
	return true
}

// recoverDegraded looks whether the fault of a degraded store cleared,
// and if so, makes it ok: after a probe write, or by reopening Badger for
// writing if it was opened read-only. A removed directory is salvaged.
func (s *Store) recoverDegraded(ctx context.Context) {
	s.checkMu.Lock()
	f := s.inspect(true)
	s.lastLook.Store(time.Now().UnixNano())
	s.checkMu.Unlock()
	if f.gone {
		if err := s.salvage(ctx); err != nil {
			s.degrade(FaultDirRemoved, fmt.Sprintf("%s; copying the model out of it failed, trying again: %v", dirGone, err))
		}
		return
	}
	if f.kind != "" {
		s.degradeFor(f)
		return
	}
	if err := s.enter(); err != nil {
		return
	}
	if s.dbReadOnly {
		s.life.RUnlock()
		if err := s.reopenWritable(ctx); err != nil && !errors.Is(err, store.ErrClosed) {
			s.count(FaultReopenFailed)
			s.log.Error("badgerstore: reopening the store for writing failed", "dir", s.dir, "err", err)
		}
		return
	}
	s.wmu.Lock()
	err := s.probeWrite()
	var broken bool
	if err != nil {
		broken, _ = s.probeRead()
	} else {
		// A restore or delete the fault stopped left a mark.
		err = s.finishBusy()
	}
	s.wmu.Unlock()
	s.life.RUnlock()
	switch {
	case broken:
		s.fail(FaultWrite, fmt.Sprintf("Badger is unusable: %v", err))
	case err != nil:
		_, reason := s.faultKind()
		s.degrade(FaultWrite, fmt.Sprintf("%s; a probe write failed: %v", reason, err))
	default:
		s.ok()
	}
}

// errStillClosing says that the database being replaced is still
// closing, which Badger does only once the fault that broke it clears.
var errStillClosing = errors.New("the broken database is still closing")

// reopen replaces a failed store's database by a new one on the same
// directory. Calls in progress finish first; from then on, the old one
// is closed in the background, which can take until the fault clears:
// while it does, reopen returns errStillClosing, to be called again.
// Then a salvaged copy is moved in place, if there is one, and Badger
// is opened, read-only if the directory still calls for it.
func (s *Store) reopen(ctx context.Context) error {
	s.life.Lock()
	if s.closed {
		s.life.Unlock()
		return store.ErrClosed
	}
	if s.dbClosing == nil {
		s.dbClosing = closeDB(s.db)
		_, reason := s.faultKind()
		s.note(reason + "; reopening: Badger closes the broken database first, once the fault clears")
	}
	closing := s.dbClosing
	s.life.Unlock()
	select {
	case err := <-closing:
		if err != nil {
			s.log.Warn("badgerstore: closing the broken database", "dir", s.dir, "err", err)
		}
		// The result is read once; later attempts find it closed.
		s.life.Lock()
		s.dbClosing = closedChan
		s.life.Unlock()
	case <-ctx.Done():
		return store.ErrClosed
	default:
		return errStillClosing
	}
	if err := s.finishSalvage(); err != nil {
		return err
	}
	db, f, err := s.openDB(false)
	if err != nil {
		return err
	}
	s.life.Lock()
	defer s.life.Unlock()
	return s.attach(ctx, db, f)
}

// closedChan is a closed channel, the dbClosing of a database closed.
var closedChan = func() chan error { c := make(chan error); close(c); return c }()

// reopenWritable reopens a database opened read-only for writing, once
// the fault that made it so cleared. Closing a read-only database writes
// nothing, so it is done holding s.life, and calls wait rather than fail.
func (s *Store) reopenWritable(ctx context.Context) error {
	s.life.Lock()
	defer s.life.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	closing := closeDB(s.db)
	s.dbClosing = closing
	select {
	case err := <-closing:
		s.dbClosing = closedChan
		if err != nil {
			s.log.Warn("badgerstore: closing the read-only database", "dir", s.dir, "err", err)
		}
	case <-time.After(s.opts.CloseTimeout):
		s.fail(FaultClose, fmt.Sprintf("the read-only database did not close within %v", s.opts.CloseTimeout))
		return errStillClosing
	}
	db, f, err := s.openDB(false)
	if errors.Is(err, ErrLocked) {
		// A command that only reads (Options.ReadOnly) shares the
		// directory with a database opened read-only: read-only again,
		// until a later look finds it gone.
		kind, reason := s.faultKind()
		ro, _, roErr := s.openDB(true)
		if roErr == nil {
			return s.attach(ctx, ro, fault{kind: kind, reason: reason + "; another process is reading the store"})
		}
		err = errors.Join(err, fmt.Errorf("and read-only: %w", roErr))
	}
	if err != nil {
		// Nothing is open any more: failed, the store retries.
		s.fail(FaultReopenFailed, fmt.Sprintf("reopening for writing: %v", err))
		return err
	}
	return s.attach(ctx, db, f)
}

// attach makes db, just opened after the fault f, the store's database,
// with an empty cache and presence filters, since what was written while
// the old one broke is known only to the new; s.life is held. If the
// meta record cannot be read, db is closed and the store stays failed.
func (s *Store) attach(ctx context.Context, db *badger.DB, f fault) error {
	if s.closed {
		return errors.Join(store.ErrClosed, db.Close())
	}
	s.db, s.dbReadOnly, s.dbClosing = db, f.kind != "", nil
	s.cache, s.present = newCache(s.opts.CacheBytes), newPresence(maxPresenceBytes)
	err := s.finishLoad()
	if err == nil {
		err = s.loadMeta(ctx, s.opts, false)
	}
	if err == nil {
		err = s.finishBusy()
	}
	var id dirIdentity
	if err == nil {
		id, err = identify(s.dir)
	}
	if err != nil {
		s.dbClosing = closedChan
		s.fail(FaultReopenFailed, fmt.Sprintf("reopened, but: %v", err))
		return errors.Join(err, db.Close())
	}
	s.dirID = id
	s.lastLook.Store(time.Now().UnixNano())
	s.count(FaultReopen)
	s.log.Warn("badgerstore: reopened the store in process", "dir", s.dir, "read_only", s.dbReadOnly)
	if f.kind != "" {
		s.setState(store.StateDegraded, f.kind, f.reason+"; reopened read-only", true)
	} else {
		s.ok()
	}
	return nil
}

// closeDB closes db in a goroutine and returns where its result comes.
func closeDB(db *badger.DB) <-chan error {
	ch := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				ch <- fmt.Errorf("Badger panicked closing: %v", r)
			}
		}()
		ch <- db.Close()
	}()
	return ch
}

// salvageSuffix names the directory beside the store's that salvage
// copies the model into; salvagedName the file that says the copy is
// complete, and movingName, which replaces it, that the copy is being
// moved into the store's directory.
const (
	salvageSuffix = ".salvage"
	salvagedName  = "SALVAGED"
	movingName    = "MOVING"
)

// salvage copies the model of a store whose directory was removed into a
// new one. Badger still has every file of the old one open, so all it
// held can be read, and the copy holds every write acknowledged, since
// writes stopped when the removal was seen. The copy goes into a
// directory beside the store's; a file in it marks it complete. Then the
// store's path gets an empty directory: closing the old database flushes
// its memtables by path, and would otherwise retry forever. The store
// fails, for reopen to close the old database and, with it done, move
// the copy in place; Open does the move too, should the process die
// first.
func (s *Store) salvage(ctx context.Context) error {
	tmp := s.dir + salvageSuffix
	parent := filepath.Dir(s.dir)
	if _, err := os.Stat(parent); err != nil {
		return fmt.Errorf("the directory above it: %w", err)
	}
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if free := freeSpace(parent); s.opts.ReserveBytes > 0 && free < s.opts.ReserveBytes {
		return fmt.Errorf("free space %s is below the reserve of %s", mib(free), mib(s.opts.ReserveBytes))
	}
	keys, err := s.copyTo(ctx, tmp)
	if err != nil {
		return errors.Join(err, os.RemoveAll(tmp))
	}
	if err := writeSynced(filepath.Join(tmp, salvagedName)); err != nil {
		return errors.Join(err, os.RemoveAll(tmp))
	}
	if err := os.Mkdir(s.dir, s.dirID.mode|0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	_ = os.Chown(s.dir, s.dirID.uid, s.dirID.gid) // as it was, where allowed
	s.count(FaultSalvage)
	s.log.Error("badgerstore: the store's directory was removed while open; its model was copied out of the files Badger still held open, and replaces it", "dir", s.dir, "keys", keys)
	s.fail(FaultDirRemoved, dirGone+"; its model was copied, and is being moved in place")
	return nil
}

// copyTo writes every key of the store into a new Badger database in
// dir, from one snapshot, with writes held back, and returns how many;
// and a copy of the sealed file.
func (s *Store) copyTo(ctx context.Context, dir string) (n int, err error) {
	defer s.recoverFault(&err, "salvage")
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.life.RUnlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	ndb, err := badger.Open(s.badgerOptions(dir))
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", dir, err)
	}
	wb := ndb.NewWriteBatch()
	txn := s.db.NewTransaction(false)
	err = func() error {
		defer txn.Discard()
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 256})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if n%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			item := it.Item()
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			if err := wb.Set(item.KeyCopy(nil), v); err != nil {
				return err
			}
			n++
		}
		return wb.Flush()
	}()
	wb.Cancel()
	if cerr := ndb.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close %s: %w", dir, cerr)
	}
	if r := s.sealed.Load(); r != nil && err == nil {
		err = writeFileSynced(filepath.Join(dir, sealedName), r.file.Bytes())
	}
	return n, err
}

// writeFileSynced writes data to a new file at path and syncs it.
func writeFileSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	return errors.Join(err, f.Sync(), f.Close())
}

// finishSalvage puts a complete salvaged copy in place of the files at
// the store's path, and drops an incomplete copy. Only the files at the
// top of the directory are Badger's: subdirectories, such as the
// daemon's report spool, which lives there by default, are left as they
// are, with what was written into them while the store was salvaged.
// The copy's marker says how far this got, so that Open finishes what a
// crash cut short: salvagedName, the copy complete; movingName, the old
// files removed and the copy's being moved in.
func (s *Store) finishSalvage() error {
	tmp := s.dir + salvageSuffix
	complete := exists(filepath.Join(tmp, salvagedName))
	moving := exists(filepath.Join(tmp, movingName))
	if !complete && !moving {
		if exists(tmp) {
			s.log.Warn("badgerstore: dropping an incomplete copy of a removed store", "dir", tmp)
			return os.RemoveAll(tmp)
		}
		return nil
	}
	s.log.Warn("badgerstore: moving the model copied out of a removed directory in place", "dir", s.dir, "from", tmp)
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("finish salvage: %w", err)
	}
	if complete {
		ents, err := os.ReadDir(s.dir)
		if err != nil {
			return fmt.Errorf("finish salvage: %w", err)
		}
		for _, e := range ents {
			if e.Type().IsRegular() {
				if err := os.Remove(filepath.Join(s.dir, e.Name())); err != nil {
					return fmt.Errorf("finish salvage: %w", err)
				}
			}
		}
		if err := syncDir(s.dir); err != nil {
			return fmt.Errorf("finish salvage: %w", err)
		}
		if err := os.Rename(filepath.Join(tmp, salvagedName), filepath.Join(tmp, movingName)); err != nil {
			return fmt.Errorf("finish salvage: %w", err)
		}
		if err := syncDir(tmp); err != nil {
			return fmt.Errorf("finish salvage: %w", err)
		}
	}
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return fmt.Errorf("finish salvage: %w", err)
	}
	for _, e := range ents {
		if e.Name() == movingName {
			continue
		}
		if err := os.Rename(filepath.Join(tmp, e.Name()), filepath.Join(s.dir, e.Name())); err != nil {
			return fmt.Errorf("finish salvage: %w", err)
		}
	}
	if err := syncDir(s.dir); err != nil {
		return fmt.Errorf("finish salvage: %w", err)
	}
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("finish salvage: %w", err)
	}
	return syncDir(filepath.Dir(s.dir))
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// writeSynced creates an empty file at path and syncs it and its
// directory, so that it is there after a crash.
func writeSynced(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
