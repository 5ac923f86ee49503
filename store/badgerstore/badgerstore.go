// Package badgerstore is the default store.Store backend: an embedded
// Badger key-value store, one directory, owned by one process.
//
// # Layout
//
// Every key starts with a one-byte kind. A user's keys continue with the
// user name and a 0x00 byte, which ValidUser guarantees cannot occur in a
// name, so no user's key can be spelled through another user's name:
//
//	"m"                          schema version, class list, day of the upgrade to schema 4 (JSON)
//	"u" user 0x00                totals: per-class messages, tokens and forgotten messages, vocabulary, last day
//	"T" user 0x00 hash           one token's day and row; hash is 8 bytes big-endian
//	"M" user 0x00 digest         seen record of a trained message
//	"h" user 0x00 measure class  a measure's sample in a class; class a uvarint
//
// Totals are uvarints: the vocabulary, the number of classes, per class
// the messages and the tokens, the last day trained on, and per class the
// messages forgotten (those whose seen records Prune deleted, which the
// messages still count). Days are store.Day; in rows and seen records
// they are zigzag varints counted from 2025-01-01, two bytes from 2002 to
// 2047. A token's row is the day it was last trained on, then its values
// laid out as store.Counts, a pair per class index: the count as a
// uvarint, the weight as a zigzag varint, trailing zeros dropped, so a
// token of a two-class model takes a few bytes. A row whose counts and
// weights all reach zero is deleted; the vocabulary counts the rows with
// a count, not those a weight alone keeps. A seen record is the class
// index, the day the message was trained on, the number of steps and the
// steps the message's training added, a head and a body step per class
// index as zigzag varints, trailing zero pairs dropped, the number of
// values and the measure and level of each as uvarints (untraining
// subtracts exactly those), and the message's mark (store.Op.Mark) as 8
// bytes, or nothing when it has none. Weights are added and subtracted in
// wrapping 64-bit arithmetic, which makes taking back exact whatever came
// between. A sample is its count, sum and sum of squares and, per level
// with values, the distance from the level before and the count, as
// uvarints; it is rewritten whole by each transaction that changes it, a
// few hundred bytes for a class of thousands of messages, and deleted
// once empty. The samples are read with the totals and cached with them.
// Classes are registered store-wide, on first use, and never renumbered.
//
// No row's day and no seen record's is later than the totals' last day,
// which Check verifies. Apply relies on it: the cache keeps rows without
// their days, and a message trained on a day no earlier than the last
// sets the day of each of its rows without reading the old one. Only an
// op that untrains alone, or trains on an earlier day, reads the days of
// the cached rows it changes.
//
// # Sealed rows
//
// The token rows of the models a Load writes, a first training in bulk,
// are not Badger keys but one file beside Badger's, sealed-buckets (package
// sealed): each user's rows sorted by hash into buckets by the hash's top
// bits, as a row above, each behind the hash's other bits. The file is
// mapped and read in place. A row takes some 13 bytes there, where
// Badger's tables took 35 with its key, version and indexes, and a read
// is two memory accesses that the hash alone addresses, so that a
// lookup of a model Badger holds no keys of reads the file for all its
// tokens at once and skips the cache (readSealed). Badger's "T" keys of
// a sealed user lie over the file: a key is the row, and a key with an
// empty value, which no row encodes to, a tombstone that says the row is
// gone. Training a sealed model writes the rows it changes, as for any
// model (seal.go says more).
//
// # Older schemas
//
// Schema 1 had no weights and no steps: token counts under kind "t", one
// uvarint per class, and seen records of the class index alone. Schema 2
// had no measures: seen records under kind "s", the class index and the
// steps, and no samples. Schema 3 had no days and no marks: token rows
// under kind "r", seen records under kind "S", and totals without the
// last day and the forgotten messages. Open converts such a store in
// place, one schema after the other; see convert for how a crash during a
// conversion is survived. In short: the keys whose values change encoding
// live under a kind of their own in the next schema, each transaction
// moves a run of keys to it and deletes the old ones, and the meta record
// says the next schema only once none is left, so an Open that finds the
// old schema resumes where the last one stopped. Records of schema 1 and
// 2 become records without values, and the samples start empty: the
// measures learn from the messages trained after. Rows and seen records
// of schema 3 get the day of the upgrade, which the meta record keeps
// from the start of the conversion, so that a prune by age the day after
// takes nothing for ancient; seen records get no mark, and the totals
// that day as their last day. Converting rewrites every key: the model of
// the SpamAssassin corpus, 636,000 keys, took 5 seconds, and the store
// 2.6 times its size until compacted (Compact, spamtrain compact).
// Schema 4 had no sealed file; its conversion rewrites the meta record
// alone. A build that reads an older schema only refuses a converted
// store.
//
// # Atomicity and durability
//
// Apply carries out its ops on an in-memory overlay of the keys they
// touch and then writes each changed key once, in one Badger transaction,
// however many ops changed it. Only when the changed keys would not fit in
// one transaction (Badger takes at most 15% of the memtable, about 26,000
// keys at the default 16 MiB; a batch of 256 messages of bigram features
// changes some 60,000) is the call split, at op boundaries, into several;
// an op is never split. The split is planned from Badger's limits as ops
// are applied, not found by hitting them; while Badger writes one
// transaction, Apply carries out the ops of the next, and it sends a
// transaction only once the one before is written, so that a failed
// commit leaves a prefix of the ops committed. A single mutex serializes
// writers, so transactions never conflict; readers use read-only
// transactions and are never blocked by a writer.
//
// Prune finds what its rule deletes in a read-only snapshot, without the
// mutex, and deletes it in transactions of a few thousand keys, each
// taking the mutex, reading its keys again and writing the totals with
// them: training waits for one such transaction at a time, never for a
// whole prune, and each is atomic like an op.
//
// Load writes a whole model into a store that holds none, the first
// training of a new store: its token rows into the sealed file (below),
// the rest into Badger in a write batch. It is all or nothing through a
// marker file: written before Load writes anything, removed once the
// model is whole; Open empties a store that still has it.
//
// SyncWrites is off by default, and that is safe against the process
// being killed at any instant (kill -9, OOM killer, a crash): before
// Commit returns, Badger has copied the transaction into its write-ahead
// log, a memory-mapped file, so the bytes are in the kernel's page cache
// and reach the disk without the process. On reopening, Badger replays the
// log up to the last complete transaction and drops a partial one, found
// by its missing end marker. So every Apply that returned is there and
// every op is there whole or not at all; Check recounts to prove it, and
// a test kills a training process at random moments to check that. What
// SyncWrites off gives up is power loss and kernel crashes: then the
// commits of the last half minute or so (Linux's default write-back delay)
// can be lost, and replay's checksums should still cut the log at a whole
// transaction, but that is Badger's promise, not tested here. Set
// Options.SyncWrites to fsync every commit, at a large cost in training
// throughput. A kill can also leave an empty log file that makes Badger's
// Open fail once (Badger issue #2207); Open retries past it.
//
// # Reads
//
// Lookup and Totals go through a bounded in-memory cache of token rows
// and totals which Apply and Prune update after each commit, before they
// return, so the cache never serves a value older than the last Apply or
// Prune; misses are
// read in one read-only transaction per call. Apply reads through the same
// cache, and skips reading tokens that a per-user Bloom filter of stored
// tokens says are new (see presence), which most uncached tokens are when
// training a corpus.
//
// # Faults
//
// Badger fails badly where storage does. When it cannot create its next
// memtable (the directory unwritable or removed), it leaves the memtable
// nil: every later read panics, and the next write ends the process
// through a failed assertion, which no recover catches. It writes through
// memory maps of sparse files, so a write that finds the disk full kills
// the process with SIGBUS, in Badger's own goroutines. And it retries a
// failed memtable flush forever, so that closing it never returns while
// the fault lasts.
//
// So the store keeps Badger away from faults rather than catching them:
//
//   - Before each transaction it makes sure its directory is still the
//     one it opened, and, at most once per CheckInterval, that a file can
//     be created in it and that its free space is above the reserve
//     (Options.ReserveBytes). If not, the store is degraded: writes fail
//     with store.ErrReadOnly before they reach Badger, reads go on.
//   - A panic of Badger in a call is recovered at the call's boundary,
//     turned into an error wrapping store.ErrFailed, and the store is
//     failed; so is it when a write fails and a read then panics (the
//     nil memtable), or a commit does not end within WriteTimeout. Failed,
//     it touches Badger no more: reads the cache can answer are answered,
//     others fail with store.ErrFailed.
//   - A goroutine looks again every CheckInterval. A degraded store whose
//     fault cleared writes a probe and is ok again. A failed one is
//     reopened in process: Badger is closed in the background (which may
//     wait for the fault to clear), opened again, which replays its
//     write-ahead log, and the cache is started afresh. Until that works,
//     the store stays failed, for the daemon's watchdog to see.
//   - When the directory is removed, Badger still holds its files open:
//     the store copies every key into a new directory beside it, and once
//     the old database is closed moves the copy to the store's path, so
//     that nothing acknowledged is lost.
//   - Close waits at most CloseTimeout for Badger, and does not close it
//     at all on a disk too full to flush its memtables into: the
//     write-ahead log holds every acknowledged write for the next Open.
//   - Open on a disk below the reserve, or a directory that cannot be
//     written, opens Badger read-only, if it was closed cleanly; with a
//     write-ahead log to replay, it fails with store.ErrReadOnly, since
//     replaying writes.
//
// Store.Health reports the state, its reason and the faults counted by
// kind (the Fault constants); Options.OnHealth hears of changes. What
// the reserve cannot do: a disk filled by another process faster than
// the store looks (within CheckInterval), down to less than Badger
// writes in the meantime, still ends in SIGBUS.
//
// # Limits
//
// One process at a time (Badger locks the directory; Open fails with
// ErrLocked). Each token is a key of its own, so training costs Badger a
// memtable insert (a skiplist search of 2 to 3 microseconds, mostly cache
// misses, in Badger's single writer goroutine) per distinct token per
// transaction. With the default bigram features a transaction holds some
// 80 messages' changes before Badger's limit of 15% of the memtable, and
// the writer caps training near 1,000 messages a second on two cores,
// however fast the tokenizer. Bigger memtables allow bigger transactions
// but make each insert slower; grouping many tokens into one key makes
// every message rewrite hundreds of groups, which the same limit then
// confines to a handful of messages a transaction. An op must fit in a
// transaction by itself, or Apply fails with ErrOpTooLarge.
// Counts are 64-bit and not checked for overflow; weights wrap around.
package badgerstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/ristretto/v2/z"
	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/badgerstore/sealed"
	"golang.org/x/sys/unix"
)

// Errors of this backend, besides those of package store.
var (
	// ErrSchema means the directory holds a Badger database that is not
	// a store of the schema this build reads.
	ErrSchema = errors.New("not a spamd store of a known schema")
	// ErrOpTooLarge means one op alone was too big for a transaction.
	ErrOpTooLarge = errors.New("op too large for one transaction")
	// ErrLocked means another process holds the store's directory: a
	// running spamd, or another spamtrain.
	ErrLocked = errors.New("store is in use by another process")
)

// Options configure Open. The zero value is a sensible default.
type Options struct {
	// InMemory keeps everything in memory and ignores the directory; for
	// tests.
	InMemory bool
	// Logger receives Badger's warnings and errors, and panics of the
	// value-log garbage collector. Nil discards them.
	Logger *slog.Logger
	// CacheBytes bounds, roughly, the cache of token rows and totals.
	// Zero means 128 MiB, enough for the some 600,000 features of a model
	// trained on a few thousand messages; negative turns the cache off.
	CacheBytes int64
	// GCInterval is how often the value log is garbage-collected. Zero
	// means every 10 minutes; negative never, except through Compact.
	GCInterval time.Duration
	// MemTableBytes is the size of Badger's memtables, which also bounds
	// a transaction at about 15% of it. Zero means 16 MiB.
	MemTableBytes int64
	// SyncWrites fsyncs every commit, so that commits survive a power loss
	// or kernel crash too, not only the death of the process.
	SyncWrites bool
	// ReadOnly opens the store for reading only, as a command that writes
	// nothing does: every write fails with store.ErrReadOnly. A store
	// that was closed cleanly is opened in Badger's read-only mode, which
	// writes nothing at open or close, where a writer's open creates a
	// value log and a write-ahead log and its close flushes and syncs
	// them: with the SpamAssassin corpus's model, open and close took 1.7
	// ms in all against 9. Such readers share the directory with each
	// other and with a spamd that a fault keeps read-only, not with a
	// writer, which they find before they do anything else (ErrLocked). A
	// store that takes writing to open (a write-ahead log left by a
	// process killed, a cut-off load, an older schema) is opened as a
	// writer would open it, to put it right, and then refuses writes all
	// the same. The store does not watch its directory or collect the
	// value log: it is for a command's short run.
	ReadOnly bool
	// WarmByNeed has Lookup read a user's whole model into the cache, as
	// Warm does, once its lookups have missed the cache for a share of
	// as many tokens as the model has (warmPoint), if the model fits in
	// the cache: the rule of renting until the rent paid would have
	// bought, so that a run that goes on reading pays a bounded multiple
	// of the cheaper of the two. A miss reads Badger at some 3
	// microseconds a token and a warm reads a row at some 0.75, which
	// would put the point at a quarter; but a warm also spares the misses
	// of tokens the model lacks, and on SpamAssassin's corpus a quarter
	// warmed too late to pay back in a run of a thousand messages, where
	// an eighth did. A sealed model that Badger holds no keys over is
	// read without the cache. It is for batch work such as spamtrain's;
	// a daemon warms at start instead, and would not want a lookup in a
	// mail's path to wait for a warm.
	WarmByNeed bool

	// ReserveBytes is the free space the store leaves on its filesystem.
	// Below it the store turns read-only: writes fail with
	// store.ErrReadOnly, reads go on, and writes resume once space is
	// back. It must hold what Badger writes without being asked: the
	// memtables it flushes (up to four of MemTableBytes), the compactions
	// that follow, and the log pages written between two checks. Badger
	// writes through memory maps, and a write into a map that finds the
	// disk full kills the process with SIGBUS, so this is what stands
	// between a full disk and a crash. Zero means the larger of 256 MiB
	// and eight memtables; negative turns the check off.
	ReserveBytes int64
	// CheckInterval is how often the store looks at its directory and its
	// free space: before a write, when the last look is older, and in the
	// background, to notice a fault and its end. Zero means a second.
	CheckInterval time.Duration
	// WriteTimeout bounds how long Apply waits for Badger to write one
	// transaction; past it the store is failed and reopened, since a
	// write that never ends means Badger is stuck. Zero means a minute.
	WriteTimeout time.Duration
	// CloseTimeout bounds how long Close waits for Badger to close; past
	// it Close returns an error and leaves Badger to the process's end.
	// Nothing acknowledged is lost: Badger's write-ahead log holds it,
	// and the next Open replays it. Zero means 30 seconds.
	CloseTimeout time.Duration
	// OnHealth, if set, is called with the store's health after it
	// changes, one call at a time, from a goroutine of the store; a burst
	// of changes may be reported once, with the last.
	OnHealth func(store.Health)

	// convertKeys, if set by a test, bounds the keys of a schema-1 store
	// that one transaction of the conversion moves, so that a small store
	// takes several.
	convertKeys int
	// convertErr, if set by a test, is called after each transaction of
	// the conversion commits, with the number committed so far; an error
	// it returns stops the conversion, as a crash would.
	convertErr func(txns int) error
}

const (
	defaultCacheBytes    = 128 << 20
	defaultGCInterval    = 10 * time.Minute
	defaultMemTableBytes = 16 << 20
	// DefaultReserveBytes is the least free-space reserve when
	// Options.ReserveBytes is zero.
	DefaultReserveBytes  = 256 << 20
	defaultCheckInterval = time.Second
	defaultWriteTimeout  = time.Minute
	defaultCloseTimeout  = 30 * time.Second
	// gcDiscardRatio is the share of a value-log file that must be garbage
	// for it to be rewritten, as Badger recommends.
	gcDiscardRatio = 0.5
)

// Store is a store.Store kept in Badger. Its methods are safe for
// concurrent use.
type Store struct {
	// db, cache and present are replaced when the store reopens Badger,
	// under life held exclusively; calls read them holding it shared.
	db       *badger.DB
	log      *slog.Logger
	dir      string
	inMemory bool
	cache    *cache
	opts     Options // as Open completed them, to open Badger again

	// dbReadOnly says that db was opened in Badger's read-only mode,
	// because the disk was below the reserve or the directory could not
	// be written when it was opened.
	dbReadOnly bool
	// dbClosing, when not nil, yields the result of closing db, which the
	// store is reopening; calls must not use db any more.
	dbClosing <-chan error
	// dirID identifies the directory Open found, to tell it removed or
	// replaced.
	dirID dirIdentity

	health   health
	checkMu  sync.Mutex   // one look at the directory at a time
	lastLook atomic.Int64 // when the last one was, in Unix nanoseconds
	stopMon  chan struct{}
	monDone  sync.WaitGroup
	// blind, set by tests, keeps the store from looking at its directory
	// while it is ok, so that Badger meets a fault itself.
	blind atomic.Bool

	// life is held shared by every call that uses db and exclusively by
	// Close, so that Close never pulls the database from under a call.
	life   sync.RWMutex
	closed bool
	close  sync.Once
	stopGC chan struct{}
	gcDone sync.WaitGroup
	gcMu   sync.Mutex // Badger rejects a value-log GC while another runs

	// wmu serializes Apply, Prune, Restore, DeleteUser and Compact: a
	// single writer never conflicts.
	wmu sync.Mutex
	// busy holds the users whose model a restore or a delete is writing,
	// which readers see as having none; nBusy counts them.
	busyMu  sync.Mutex
	busy    map[string]bool
	nBusy   atomic.Int32
	classes atomic.Pointer[classList]
	// upgraded is the meta record's day of the conversion to schema 4,
	// which every write of the record keeps.
	upgraded store.Day
	present  *presence // guarded by wmu
	// spare is the memory of the last Apply's batch, for the next
	// (batch.release); guarded by wmu.
	spare *batch
	// sealed is the sealed file of token rows a Load wrote (seal.go), nil
	// if none; it is replaced by another file only with s.life held
	// exclusively, and by a copy with a user made void under s.wmu.
	sealed atomic.Pointer[sealedRows]
	// over holds, for users whose rows are sealed, whether Badger may
	// hold token keys of theirs (overlaid).
	overMu sync.RWMutex
	over   map[string]bool
	// missed counts, per user, the tokens Lookup read from Badger since
	// the last warm, for Options.WarmByNeed.
	missMu sync.Mutex
	missed map[string]uint64
	// flushWait, if set by a test, replaces defaultFlushWait.
	flushWait time.Duration
	// txnShare is the share, in percent, of Badger's transaction limits
	// Apply fills; tests raise it past 100 to make Badger refuse commits.
	txnShare int64
	// commitErr, if set by a test, is called with the first op of each
	// transaction Apply commits, and an error it returns fails the
	// commit in Badger's place; errCommitHangs makes it never end.
	commitErr func(start int) error
	// pruned, if set by a test, is called after each transaction Prune
	// commits, with the number committed so far.
	pruned func(txns int)
}

// classList is an immutable snapshot of the registered classes.
type classList struct {
	names []string
	index map[string]int
}

func newClassList(names []string) *classList {
	l := &classList{names: names, index: make(map[string]int, len(names))}
	for i, n := range names {
		l.index[n] = i
	}
	return l
}

var (
	_ store.Store          = (*Store)(nil)
	_ store.Sizer          = (*Store)(nil)
	_ store.HealthReporter = (*Store)(nil)
)

// Open opens the store in dir, creating it if needed, and, unless
// Options.ReadOnly, starts the value-log garbage collector and the watch
// over the directory. Close releases it.
//
// When the disk is below the reserve, or the directory cannot be
// written, Open opens the store read-only, in Badger's read-only mode,
// and the store is degraded until the fault clears, when it reopens
// Badger for writing by itself. Badger's read-only mode cannot replay a
// write-ahead log, which a process that was killed leaves behind; then
// Open fails with store.ErrReadOnly rather than write on a full disk.
func Open(ctx context.Context, dir string, o Options) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = defaultCacheBytes
	}
	if o.GCInterval == 0 {
		o.GCInterval = defaultGCInterval
	}
	if o.MemTableBytes == 0 {
		o.MemTableBytes = defaultMemTableBytes
	}
	if o.ReserveBytes == 0 {
		o.ReserveBytes = max(DefaultReserveBytes, 8*o.MemTableBytes)
	}
	if o.CheckInterval <= 0 {
		o.CheckInterval = defaultCheckInterval
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = defaultWriteTimeout
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = defaultCloseTimeout
	}
	s := &Store{
		log:      o.Logger,
		dir:      dir,
		inMemory: o.InMemory,
		opts:     o,
		cache:    newCache(o.CacheBytes),
		present:  newPresence(maxPresenceBytes),
		txnShare: defaultTxnShare,
		stopGC:   make(chan struct{}),
		stopMon:  make(chan struct{}),
	}
	s.health.init()
	if o.ReadOnly && !o.InMemory {
		if err := heldByWriter(dir); err != nil {
			return nil, fmt.Errorf("open store %s: %w", dir, err)
		}
	}
	if !o.InMemory {
		if err := s.finishSalvage(); err != nil {
			return nil, fmt.Errorf("open store %s: %w", dir, err)
		}
	}
	readOnly := o.ReadOnly && s.closedCleanly()
	fault, err := s.openAll(ctx, readOnly)
	if readOnly && errors.Is(err, errNeedsWriting) {
		s.log.Debug("badgerstore: opening for writing what takes writing to open", "dir", dir, "err", err)
		fault, err = s.openAll(ctx, false)
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	if !o.InMemory {
		id, err := identify(dir)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("open store %s: %w", dir, err), s.releaseAll(), s.db.Close())
		}
		s.dirID = id
		s.lastLook.Store(time.Now().UnixNano())
	}
	if fault.kind != "" {
		s.degrade(fault.kind, fault.reason+"; opened read-only")
	}
	if o.ReadOnly {
		return s, nil
	}
	if !o.InMemory && o.GCInterval > 0 {
		s.gcDone.Add(1)
		go s.gcLoop(o.GCInterval)
	}
	s.monDone.Add(1)
	go s.monitor()
	return s, nil
}

// openAll opens Badger, read-only if readOnly, and what the store keeps
// beside it, and finishes what a crash cut short; it returns the fault
// that had Badger opened read-only without being asked. On an error
// nothing is left open.
func (s *Store) openAll(ctx context.Context, readOnly bool) (fault, error) {
	db, fault, err := s.openDB(readOnly)
	if err != nil {
		return fault, err
	}
	s.db = db
	s.dbReadOnly = readOnly || fault.kind != ""
	if err := s.finishLoad(); err != nil {
		return fault, errors.Join(err, db.Close())
	}
	if err := s.openSealed(readOnly); err != nil {
		return fault, errors.Join(err, db.Close())
	}
	if err := s.loadMeta(ctx, s.opts, readOnly); err != nil {
		return fault, errors.Join(err, s.releaseAll(), db.Close())
	}
	if err := s.dropEarlierSealed(); err != nil {
		return fault, errors.Join(err, s.releaseAll(), db.Close())
	}
	if err := s.finishBusy(); err != nil {
		return fault, errors.Join(err, s.releaseAll(), db.Close())
	}
	return fault, nil
}

// errNeedsWriting is what a store opened read-only returns for what
// only a writer can do at open: convert an older schema.
var errNeedsWriting = errors.New("the store takes writing to open")

// heldByWriter returns ErrLocked if a process that writes the store
// holds its directory: Badger's lock, tried shared as a reader's Badger
// takes it, before anything else, so that a command that only reads finds
// a running spamd at once, having written nothing.
func heldByWriter(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return nil // the open that follows says what is wrong
	}
	defer f.Close() // and so lets go of the lock
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); errors.Is(err, unix.EWOULDBLOCK) {
		return fmt.Errorf("%w: %s is held by a process that writes it", ErrLocked, dir)
	}
	return nil
}

// closedCleanly reports whether the store's directory holds a store that
// its last writer closed, with nothing to replay or finish: one that
// Badger's read-only mode opens as a writer would.
func (s *Store) closedCleanly() bool {
	if s.inMemory || !exists(filepath.Join(s.dir, badger.ManifestFilename)) ||
		exists(filepath.Join(s.dir, loadMarker)) || exists(filepath.Join(s.dir, sealedTemp)) {
		return false
	}
	logs, err := filepath.Glob(filepath.Join(s.dir, "*.mem"))
	return err == nil && len(logs) == 0
}

// badgerOptions returns the options Badger is opened with in dir.
func (s *Store) badgerOptions(dir string) badger.Options {
	o := s.opts
	bo := badger.DefaultOptions(dir)
	if o.InMemory {
		bo = badger.DefaultOptions("").WithInMemory(true)
	}
	// Badger makes tables deeper in the tree larger, and sizes a table
	// builder for the level it writes: at the deepest, which Compact
	// writes, 64 MiB tables and a 128 MiB buffer. Tables of the base
	// size at every level cost a model of tens of megabytes a few more
	// files and nothing else.
	bo.TableSizeMultiplier = 1
	return bo.
		WithLogger(badgerLogger{o.Logger}).
		WithSyncWrites(o.SyncWrites).
		WithMemTableSize(o.MemTableBytes).
		// One memtable being written and two waiting to be flushed absorb
		// a burst of training without stalling it.
		WithNumMemtables(3).
		WithNumCompactors(2).
		// Values are a few bytes: all of them belong in the LSM tree,
		// none in the value log, whose files can then be the smallest
		// Badger allows. Badger preallocates twice a file's size while the
		// store is open: at 64 MiB a store of a few megabytes looked like
		// 160 to anything that reads file lengths.
		WithValueThreshold(1 << 10).
		WithValueLogFileSize(1 << 20).
		// Keys are random hashes and values a few bytes: on 10,000
		// messages of 300 tokens, ZSTD shrank the tables from 45 to 20 MB
		// but cost a third of training speed and more of cold lookups.
		// Without compression Badger reads blocks straight from its memory
		// maps and needs no block cache.
		WithCompression(options.None).
		WithBlockCacheSize(0).
		WithNumVersionsToKeep(1).
		// wmu already makes its holder the only writer.
		WithDetectConflicts(false).
		// Badger's metrics are process-wide expvars; Size reads the
		// directory instead.
		WithMetricsEnabled(false)
}

// openDB opens Badger in the store's directory: read-only if readOnly;
// else for writing, or, when the directory shows a fault that writing
// would crash into, read-only, returning that fault.
func (s *Store) openDB(readOnly bool) (*badger.DB, fault, error) {
	bo := s.badgerOptions(s.dir)
	if s.inMemory {
		db, err := badger.Open(bo)
		return db, fault{}, err
	}
	if readOnly {
		db, err := badger.Open(bo.WithReadOnly(true))
		if err != nil && lockedError(err) {
			return nil, fault{}, fmt.Errorf("%w: %w", ErrLocked, err)
		}
		return db, fault{}, err
	}
	f := s.inspect(false)
	if f.kind != "" {
		if _, err := os.Stat(filepath.Join(s.dir, badger.ManifestFilename)); err != nil {
			return nil, f, fmt.Errorf("%w: %s, and there is no store to open read-only", store.ErrReadOnly, f.reason)
		}
		// Badger's read-only mode refuses a write-ahead log to replay,
		// but only after reading it whole, holes included, and on a
		// full tmpfs reading a hole of a mapped file is SIGBUS too.
		// Closing cleanly leaves no log; a process killed leaves one.
		if logs, _ := filepath.Glob(filepath.Join(s.dir, "*.mem")); len(logs) > 0 {
			return nil, f, fmt.Errorf("%w: %s, and the store has a write-ahead log to replay, which takes writing: free space, or make the directory writable, and open it again", store.ErrReadOnly, f.reason)
		}
		db, err := badger.Open(bo.WithReadOnly(true))
		if err != nil && lockedError(err) {
			return nil, f, fmt.Errorf("%w: %w", ErrLocked, err)
		}
		if err != nil {
			return nil, f, fmt.Errorf("%w: %s, and opening it read-only failed (a write-ahead log to replay needs it writable): %w", store.ErrReadOnly, f.reason, err)
		}
		return db, f, nil
	}
	db, err := badger.Open(bo)
	// A process killed between Badger creating a log file and writing its
	// header leaves an empty .mem or .vlog file, on which Open fails with
	// z.NewFile (Badger issue #2207), but only after writing the header:
	// the next attempt opens it. Such a file held nothing, so nothing is
	// lost. Badger flattens the error to text, so the text is matched.
	for retry := 0; err != nil && retry < 3 && strings.Contains(err.Error(), z.NewFile.Error()); retry++ {
		s.log.Warn("badgerstore: reopening after a crash left an empty log file", "dir", s.dir, "err", err)
		db, err = badger.Open(bo)
	}
	if err != nil && lockedError(err) {
		return nil, fault{}, fmt.Errorf("%w: %w", ErrLocked, err)
	}
	return db, fault{}, err
}

// lockedError reports whether err, from badger.Open, says that another
// process holds the directory lock. Badger says so only in text.
func lockedError(err error) bool {
	return strings.Contains(err.Error(), "Cannot acquire directory lock")
}

// loadMeta reads the schema version and classes, writing them into a new,
// empty database, and converts a store of an older schema; readOnly says
// that the store was asked to open read-only, not kept from writing by a
// fault.
func (s *Store) loadMeta(ctx context.Context, o Options, readOnly bool) error {
	var m meta
	err := s.db.Update(func(txn *badger.Txn) error {
		var err error
		m, err = metaIn(txn)
		if errors.Is(err, badger.ErrKeyNotFound) {
			it := txn.NewIterator(badger.IteratorOptions{})
			defer it.Close()
			if it.Rewind(); it.Valid() {
				return fmt.Errorf("%w: keys but no meta record", ErrSchema)
			}
			m = meta{Schema: schemaVersion, Classes: []string{}}
			v, err := encodeMeta(m)
			if err != nil {
				return err
			}
			return txn.Set(metaKey, v)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("read meta record: %w", err)
	}
	if m.Schema >= 1 && m.Schema < schemaVersion && s.dbReadOnly {
		switch {
		case readOnly:
			return fmt.Errorf("%w: schema %d, to convert to %d", errNeedsWriting, m.Schema, schemaVersion)
		case keysAsTheyAre(m.Schema):
			// A fault keeps the store from writing the meta record
			// of conversions that change no key: its keys are read
			// as they are, and the record written once it can be.
			s.log.Warn("badgerstore: the store's schema is converted once it can be written", "dir", s.dir, "schema", m.Schema)
			m.Schema = schemaVersion
		}
	}
	for m.Schema >= 1 && m.Schema < schemaVersion {
		if err := s.convert(ctx, &m, o); err != nil {
			return fmt.Errorf("convert from schema %d: %w", m.Schema, err)
		}
	}
	if m.Schema != schemaVersion {
		return fmt.Errorf("%w: schema %d, this build reads %d", ErrSchema, m.Schema, schemaVersion)
	}
	s.upgraded = m.Upgraded
	s.classes.Store(newClassList(m.Classes))
	return nil
}

// metaIn reads the meta record in txn.
func metaIn(txn *badger.Txn) (meta, error) {
	item, err := txn.Get(metaKey)
	if err != nil {
		return meta{}, err
	}
	var m meta
	err = item.Value(func(v []byte) error {
		m, err = decodeMeta(v)
		return err
	})
	return m, err
}

// metaRecord returns the meta record of this schema with classes.
func (s *Store) metaRecord(classes []string) meta {
	return meta{Schema: schemaVersion, Classes: classes, Upgraded: s.upgraded}
}

// writeMetaRecord writes m as the meta record, in a transaction of its
// own.
func (s *Store) writeMetaRecord(m meta) error {
	v, err := encodeMeta(m)
	if err != nil {
		return err
	}
	return s.db.Update(func(txn *badger.Txn) error { return txn.Set(metaKey, v) })
}

// enter holds the store open for a call; the caller must s.life.RUnlock.
func (s *Store) enter() error {
	s.life.RLock()
	if s.closed {
		s.life.RUnlock()
		return store.ErrClosed
	}
	return nil
}

// Totals returns the per-class totals of user's model.
func (s *Store) Totals(ctx context.Context, user string) (_ store.Totals, err error) {
	defer s.recoverFault(&err, "totals")
	if err := store.ValidUser(user); err != nil {
		return store.Totals{}, fmt.Errorf("totals: %w", err)
	}
	if err := s.enter(); err != nil {
		return store.Totals{}, fmt.Errorf("totals: %w", err)
	}
	defer s.life.RUnlock()
	t, ok, gen := s.cache.getTotals(user)
	if s.isBusy(user) {
		t, ok = &totals{}, true
	}
	if !ok {
		if err := ctx.Err(); err != nil {
			return store.Totals{}, fmt.Errorf("totals %q: %w", user, err)
		}
		if err := s.usable(); err != nil {
			return store.Totals{}, fmt.Errorf("totals %q: %w", user, err)
		}
		txn := s.db.NewTransaction(false)
		defer txn.Discard()
		if t, err = readTotals(txn, user); err != nil {
			s.readFailed(ctx, err)
			return store.Totals{}, fmt.Errorf("totals %q: %w", user, err)
		}
		s.cache.fillTotals(gen, user, t)
	}
	// Loaded after the totals, so that it names every class they count.
	classes := s.classes.Load().names
	n := max(len(classes), len(t.messages), len(t.tokens), len(t.forgotten))
	out := store.Totals{
		Classes:    slices.Clone(classes),
		Messages:   make([]uint64, n),
		Tokens:     make([]uint64, n),
		Vocabulary: t.vocabulary,
	}
	copy(out.Messages, t.messages)
	copy(out.Tokens, t.tokens)
	out.Samples = t.samples
	out.LastDay = t.lastDay
	if slices.ContainsFunc(t.forgotten, func(n uint64) bool { return n != 0 }) {
		out.Forgotten = make([]uint64, n)
		copy(out.Forgotten, t.forgotten)
	}
	return out, nil
}

// readTotals reads user's totals and samples.
func readTotals(txn *badger.Txn, user string) (*totals, error) {
	var t totals
	item, err := txn.Get(totalsKey(user))
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
	case err != nil:
		return nil, err
	default:
		err = item.Value(func(v []byte) error {
			t, err = decodeTotals(v)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	t.samples, err = readSamples(txn, user)
	return &t, err
}

// readSamples reads user's samples.
func readSamples(txn *badger.Txn, user string) (store.Samples, error) {
	var out store.Samples
	var ferr error
	err := scan(context.Background(), txn, userPrefix(kindSample, user), func(key, v []byte) bool {
		k, ok := parseSampleKey(key, user)
		if !ok {
			ferr = fmt.Errorf("%w: malformed sample key %x", store.ErrInconsistent, key)
			return false
		}
		smp, err := decodeSample(v)
		if err != nil {
			ferr = fmt.Errorf("sample key %x: %w", key, err)
			return false
		}
		out = withSample(out, k, smp)
		return true
	})
	if err == nil {
		err = ferr
	}
	return out, err
}

// withSample returns samples with the sample of k set to smp, sharing
// what it does not change with samples, which it leaves as it was.
func withSample(samples store.Samples, k sampleKey, smp store.Sample) store.Samples {
	m := int(k.measure)
	out := samples
	if m >= len(out) {
		out = make(store.Samples, m+1)
		copy(out, samples)
	} else {
		out = slices.Clone(samples)
	}
	byClass := slices.Clone(out[m])
	for len(byClass) <= k.class {
		byClass = append(byClass, store.Sample{})
	}
	byClass[k.class] = smp
	out[m] = byClass
	return out
}

// Lookup returns the row of each hash for user: its count and weight
// per class, two values for each registered class at least. The rows are
// the caller's; those of that length share one array.
//
// A sealed model that Badger holds no token keys over is read from the
// sealed file alone. Otherwise a failed store still answers from its
// cache, but only a call whose every token is cached: never a partial
// answer.
func (s *Store) Lookup(ctx context.Context, user string, hashes []bow.Hash) ([]store.Counts, error) {
	return s.lookup(ctx, user, hashes, nil)
}

// LookupInto is Lookup in b's memory (store.Filler): all of it for a
// model read from the sealed file alone, the rows slice otherwise.
func (s *Store) LookupInto(ctx context.Context, user string, hashes []bow.Hash, b *store.LookupBuffer) ([]store.Counts, error) {
	return s.lookup(ctx, user, hashes, b)
}

// lookup is Lookup, in b's memory where b is not nil.
func (s *Store) lookup(ctx context.Context, user string, hashes []bow.Hash, b *store.LookupBuffer) (_ []store.Counts, err error) {
	defer s.recoverFault(&err, "lookup")
	if err := store.ValidUser(user); err != nil {
		return nil, fmt.Errorf("lookup: %w", err)
	}
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("lookup: %w", err)
	}
	defer s.life.RUnlock()
	// A row of a class registered from here on is longer than width,
	// and comes in an array of its own.
	width := 2 * len(s.classes.Load().names)
	var out []store.Counts
	if b != nil {
		out = b.Rows(len(hashes))
	} else {
		out = make([]store.Counts, len(hashes))
	}
	if s.isBusy(user) {
		return out, nil
	}
	if sec := s.section(user); sec != nil && s.usable() == nil && !s.overlaid(user) {
		var arena []uint64
		if b != nil {
			arena = b.Values(len(hashes) * width)
		} else {
			arena = make([]uint64, len(hashes)*width)
		}
		if err := readSealed(sec, hashes, out, width, arena); err != nil {
			s.readFailed(ctx, err)
			return nil, fmt.Errorf("lookup %q: %w", user, err)
		}
		return out, nil
	}
	miss, old, gen := s.cache.getTokens(user, hashes, out, width, nil)
	if len(miss) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("lookup %q: %w", user, err)
		}
		if err := s.usable(); err != nil {
			return nil, fmt.Errorf("lookup %q: %d of %d tokens not cached: %w", user, len(miss), len(hashes), err)
		}
		// A warm that fails has reported its fault; the reads below
		// meet it again, or succeed without the warm.
		if s.opts.WarmByNeed && s.warmDue(user, len(miss)) {
			if _, err := s.warm(ctx, user); err == nil {
				miss, old, gen = s.cache.getTokens(user, hashes, out, width, nil)
			}
		}
		if err := s.readTokens(user, hashes, out, miss, width); err != nil {
			s.readFailed(ctx, err)
			return nil, fmt.Errorf("lookup %q: %w", user, err)
		}
	}
	if len(miss)+len(old) > 0 {
		s.cache.fillTokens(gen, user, hashes, out, append(miss, old...))
	}
	return out, nil
}

// Warm reads user's token rows into the cache, as many as one cache
// generation holds, and returns how many it read, so that the first
// messages classified find them there instead of reading Badger a token
// at a time: a store is scanned in key order at under a microsecond a
// token, where a lookup of one token costs several. What it puts may push
// other users' tokens toward eviction, as any reads would. It stops early,
// without error, when a commit changes the store meanwhile, since what it
// read may then be stale; the cache fills as usual from there.
func (s *Store) Warm(ctx context.Context, user string) (_ int, err error) {
	defer s.recoverFault(&err, "warm")
	if err := store.ValidUser(user); err != nil {
		return 0, fmt.Errorf("warm: %w", err)
	}
	if err := s.enter(); err != nil {
		return 0, fmt.Errorf("warm: %w", err)
	}
	defer s.life.RUnlock()
	if err := s.usable(); err != nil {
		return 0, fmt.Errorf("warm %q: %w", user, err)
	}
	// A model being restored or deleted is no model yet, nor a whole one.
	if s.isBusy(user) {
		return 0, nil
	}
	return s.warm(ctx, user)
}

// maxMissed bounds the users whose misses are counted; past it, the
// counts start over.
const maxMissed = 1 << 12

// warmDue counts n more tokens of user's read from the store and reports
// whether they make a warm pay (Options.WarmByNeed): its model's
// vocabulary, which the cache holds from the Totals that scoring reads
// first, fits in the cache, and the misses since the last warm come to
// warmPoint of it. The count starts over when it says so, so that of
// lookups running at once, one warms.
func (s *Store) warmDue(user string, n int) bool {
	t, ok, _ := s.cache.getTotals(user)
	if !ok || t.vocabulary == 0 || t.vocabulary > uint64(s.cache.room()) {
		return false
	}
	s.missMu.Lock()
	defer s.missMu.Unlock()
	if s.missed == nil || len(s.missed) >= maxMissed {
		s.missed = make(map[string]uint64)
	}
	s.missed[user] += uint64(n)
	if s.missed[user] < warmPoint(t.vocabulary) {
		return false
	}
	delete(s.missed, user)
	return true
}

// warmPoint returns how many tokens of a model of vocabulary rows its
// lookups miss before a warm pays (Options.WarmByNeed). It is where the
// misses' cost comes to the warm's: a miss reads Badger at some 3
// microseconds and a warm a row at some 0.75, a quarter, halved, since a
// warm also spares the misses of tokens the model lacks. A sealed model
// that Badger holds no keys over is read without the cache, and never
// warmed by need.
func warmPoint(vocabulary uint64) uint64 { return (vocabulary + 7) / 8 }

// warm is Warm for a caller that holds s.life shared and has checked that
// the store is usable and user's model not busy.
func (s *Store) warm(ctx context.Context, user string) (_ int, err error) {
	room := s.cache.room()
	if room == 0 {
		return 0, nil
	}
	_, _, gen := s.cache.getTotals(user)
	rotations := s.cache.rotations()
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	if t, err := readTotals(txn, user); err == nil {
		s.cache.reserve(min(int(t.vocabulary), room))
	}
	const chunk = 4096
	hashes := make([]bow.Hash, 0, chunk)
	vals := make([]store.Counts, 0, chunk)
	idx := make([]int, chunk)
	for i := range idx {
		idx[i] = i
	}
	// whole stays true while every row read goes into the cache.
	stale, filled, whole := false, 0, true
	flush := func() {
		if !stale && len(hashes) > 0 {
			s.cache.touch(user, hashes)
			if stale = !s.cache.fillTokens(gen, user, hashes, vals, idx[:len(hashes)]); !stale {
				filled += len(hashes)
			}
		}
		hashes, vals = hashes[:0], vals[:0]
	}
	prefix := userPrefix(kindToken, user)
	var arena []uint64
	n := 0
	err = s.scanTokens(ctx, txn, user, func(key, v []byte) bool {
		if stale || n >= room {
			whole = false
			return false
		}
		if len(key) != len(prefix)+8 {
			whole = false
			return true // Check reports it
		}
		start := len(arena)
		var err error
		if arena, _, err = decodeRow(arena, v); err != nil {
			arena = arena[:start]
			whole = false
			return true
		}
		hashes = append(hashes, bow.Hash(binary.BigEndian.Uint64(key[len(prefix):])))
		vals = append(vals, arena[start:len(arena):len(arena)])
		if n++; len(hashes) == chunk {
			// The cache keeps copies, so the rows' array serves again.
			flush()
			arena = arena[:0]
		}
		return true
	})
	flush()
	if err != nil {
		s.readFailed(ctx, err)
		return filled, fmt.Errorf("warm %q: %w", user, err)
	}
	if whole && !stale {
		s.cache.warmed(gen, user, rotations)
	}
	return filled, nil
}

// WarmInBackground warms the models of users, one after the other, in a
// goroutine, logging to the store's logger what it read and what failed,
// and returns a function that stops it and waits for it: call that before
// Close, which would otherwise wait for the warming to finish.
func (s *Store) WarmInBackground(ctx context.Context, users ...string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				s.log.Error("badgerstore: warming the cache panicked", "dir", s.dir, "panic", r, "stack", string(debug.Stack()))
			}
		}()
		for _, u := range users {
			start := time.Now()
			n, err := s.Warm(ctx, u)
			switch {
			case err != nil && ctx.Err() == nil:
				s.log.Warn("badgerstore: warming the cache", "dir", s.dir, "user", u, "err", err)
			case err == nil && n > 0:
				s.log.Info("badgerstore: model read into the cache", "dir", s.dir, "user", u, "tokens", n, "took", time.Since(start).Round(time.Millisecond))
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// readTokens reads the rows of hashes[i] for each i in idx into vals[i],
// at least width values long, in one read-only transaction, leaving nil
// for tokens not stored: from Badger, and for a sealed user's hashes not
// there, from the sealed file; Badger is not asked at all while it holds
// none of the sealed user's keys.
func (s *Store) readTokens(user string, hashes []bow.Hash, vals []store.Counts, idx []int, width int) error {
	sec := s.section(user)
	var txn *badger.Txn
	if sec == nil || s.overlaid(user) {
		txn = s.db.NewTransaction(false)
		defer txn.Discard()
	}
	key := make([]byte, 0, len(user)+10)
	// One array backs all rows read, unless one is longer than width.
	arena := make([]uint64, len(idx)*width)
	for k, i := range idx {
		row := arena[k*width : k*width : (k+1)*width]
		inBadger, stored := false, false
		if txn != nil {
			key = appendTokenKey(key[:0], user, hashes[i])
			item, err := txn.Get(key)
			switch {
			case errors.Is(err, badger.ErrKeyNotFound):
			case err != nil:
				return err
			default:
				inBadger = true
				err = item.Value(func(v []byte) error {
					if len(v) == 0 {
						return nil // a tombstone over a sealed row
					}
					var err error
					row, _, err = decodeRow(row, v)
					stored = true
					return err
				})
				if err != nil {
					return fmt.Errorf("token %x: %w", hashes[i], err)
				}
			}
		}
		if !inBadger && sec != nil {
			var err error
			if row, _, stored, err = sealedRow(sec, hashes[i], row); err != nil {
				return fmt.Errorf("token %x: %w", hashes[i], err)
			}
		}
		if stored {
			vals[i] = row[:max(len(row), width)]
		}
	}
	return nil
}

// readSealed reads the rows of hashes into vals, at least width values
// long, from sec alone, leaving nil for tokens it does not hold; arena,
// len(hashes)·width zero values, backs all rows, unless one is longer
// than width. It is how a model that Badger holds no token keys of is
// read: the file's layout puts a row two independent memory accesses from
// its hash, which Touch makes for all of hashes at once, where the
// cache's probe and the copy into it that a miss costs would take longer.
func readSealed(sec *sealed.Section, hashes []bow.Hash, vals []store.Counts, width int, arena []uint64) error {
	sealed.Touch(sec, hashes)
	// sealedRow's work, without its call for each token.
	for i, h := range hashes {
		head, shared, rest, ok, err := sec.Find(uint64(h))
		if err != nil {
			return fmt.Errorf("token %x: %w: %w", h, store.ErrInconsistent, err)
		}
		if !ok {
			continue
		}
		row, _, err := decodeSealedRow(arena[i*width:i*width:(i+1)*width], head, shared, rest)
		if err != nil {
			return fmt.Errorf("token %x: %w", h, err)
		}
		vals[i] = row[:max(len(row), width)]
	}
	return nil
}

// Seen returns the class message d was trained as for user, "" if none.
func (s *Store) Seen(ctx context.Context, user string, d store.Digest) (_ string, err error) {
	defer s.recoverFault(&err, "seen")
	if err := store.ValidUser(user); err != nil {
		return "", fmt.Errorf("seen: %w", err)
	}
	if err := s.enter(); err != nil {
		return "", fmt.Errorf("seen: %w", err)
	}
	defer s.life.RUnlock()
	if s.isBusy(user) {
		return "", nil
	}
	if err := s.usable(); err != nil {
		return "", fmt.Errorf("seen %q %x: %w", user, d[:8], err)
	}
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	rec, err := readSeen(txn, user, d, nil)
	if err != nil {
		s.readFailed(ctx, err)
		return "", fmt.Errorf("seen %q %x: %w", user, d[:8], err)
	}
	if rec.class < 0 {
		return "", nil
	}
	// A class is registered before any record refers to it, so the list
	// loaded after the read names it unless the store is damaged.
	classes := s.classes.Load().names
	if rec.class >= len(classes) {
		return "", fmt.Errorf("seen %q %x: %w: record of unknown class %d", user, d[:8], store.ErrInconsistent, rec.class)
	}
	return classes[rec.class], nil
}

// readSeen returns d's seen record for user, its steps appended to steps,
// or a record of class -1 if there is none. The caller checks the record
// against its class list.
func readSeen(txn *badger.Txn, user string, d store.Digest, steps []int64) (seenRec, error) {
	item, err := txn.Get(appendSeenKey(nil, user, d))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return seenRec{class: -1}, nil
	}
	if err != nil {
		return seenRec{}, err
	}
	var rec seenRec
	err = item.Value(func(v []byte) error {
		rec, err = decodeSeen(v, steps)
		return err
	})
	return rec, err
}

// Users lists the users with a totals record, sorted.
func (s *Store) Users(ctx context.Context) (_ []string, err error) {
	defer s.recoverFault(&err, "users")
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("users: %w", err)
	}
	defer s.life.RUnlock()
	if err := s.usable(); err != nil {
		return nil, fmt.Errorf("users: %w", err)
	}
	var users []string
	err = s.db.View(func(txn *badger.Txn) (err error) {
		users, err = usersOf(ctx, txn, kindTotals)
		return err
	})
	if err != nil {
		s.readFailed(ctx, err)
		return nil, fmt.Errorf("users: %w", err)
	}
	return users, nil
}

// usersOf lists, sorted, the users of the keys of kind, which are the
// kind, the user and 0x00.
func usersOf(ctx context.Context, txn *badger.Txn, kind byte) ([]string, error) {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{kind}})
	defer it.Close()
	var users []string
	for it.Rewind(); it.Valid(); it.Next() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		k := it.Item().Key()
		if len(k) < 2 || k[len(k)-1] != 0 {
			return nil, fmt.Errorf("%w: malformed key %q", store.ErrInconsistent, k)
		}
		users = append(users, string(k[1:len(k)-1]))
	}
	return users, nil
}

// Size returns the bytes on disk of the LSM tree (its tables) and of the
// logs (value log and memtable write-ahead logs). Tables are counted as
// Badger reports them. Badger preallocates its log files as sparse files,
// so logs are counted by the disk blocks they occupy, not by their length,
// which would overstate a small store several times over. An in-memory
// store has no logs.
func (s *Store) Size() (lsm, vlog int64) {
	defer func() {
		if r := recover(); r != nil {
			_ = s.panicked("size", r)
			lsm, vlog = 0, 0
		}
	}()
	if s.enter() != nil {
		return 0, 0
	}
	defer s.life.RUnlock()
	if s.usable() != nil {
		return 0, 0
	}
	for _, t := range s.db.Tables() {
		lsm += int64(t.OnDiskSize)
	}
	if r := s.sealed.Load(); r != nil {
		lsm += r.file.Len()
	}
	if s.inMemory {
		return lsm, 0
	}
	for _, pattern := range []string{"*.vlog", "*.mem"} {
		files, _ := filepath.Glob(filepath.Join(s.dir, pattern))
		for _, f := range files {
			if fi, err := os.Stat(f); err == nil {
				vlog += onDisk(fi)
			}
		}
	}
	return lsm, vlog
}

// UserSize returns the bytes of user's keys and values as stored: the sum
// of their lengths over the user's key range, read in one read-only
// transaction. It is the model's size before compression (which the store
// does not use) and without what Badger adds to each key, a version and a
// share of the tables' indexes and filters: the tables of the SpamAssassin
// corpus's model took 17 bytes a key more, twice what UserSize counts. So
// it is an estimate of the model's share of the store's files, not of
// what deleting it would free. Sealed rows count as the keys and values
// they are in Badger once trained, though the sealed file holds them in
// some 13 bytes each. A model being restored or deleted, which readers do
// not see, has size 0.
func (s *Store) UserSize(ctx context.Context, user string) (_ int64, err error) {
	defer s.recoverFault(&err, "user size")
	if err := store.ValidUser(user); err != nil {
		return 0, fmt.Errorf("user size: %w", err)
	}
	if err := s.enter(); err != nil {
		return 0, fmt.Errorf("user size: %w", err)
	}
	defer s.life.RUnlock()
	if s.isBusy(user) {
		return 0, nil
	}
	if err := s.usable(); err != nil {
		return 0, fmt.Errorf("user size %q: %w", user, err)
	}
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	var size int64
	n := 0
	for _, kind := range userKinds {
		if kind == kindToken && s.section(user) != nil {
			// Counted as the keys and values they would be in Badger,
			// so that the size does not change when they move there.
			err := s.scanTokens(ctx, txn, user, func(key, v []byte) bool {
				size += int64(len(key) + len(v))
				return true
			})
			if err != nil {
				return 0, fmt.Errorf("user size %q: %w", user, err)
			}
			continue
		}
		// Keys only: ValueSize needs no value read.
		it := txn.NewIterator(badger.IteratorOptions{Prefix: userPrefix(kind, user)})
		for it.Rewind(); it.Valid(); it.Next() {
			if n++; n%4096 == 0 {
				if err := ctx.Err(); err != nil {
					it.Close()
					return 0, fmt.Errorf("user size %q: %w", user, err)
				}
			}
			item := it.Item()
			size += int64(len(item.Key())) + item.ValueSize()
		}
		it.Close()
	}
	return size, nil
}

// onDisk returns the bytes fi occupies on disk: its allocated blocks where
// the system reports them, else its length.
func onDisk(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return min(fi.Size(), st.Blocks*512)
	}
	return fi.Size()
}

// Close stops the garbage collector and the watch over the directory,
// waits for calls in progress and closes the database, waiting for it at
// most Options.CloseTimeout. On a disk too full for Badger to flush its
// memtables into, which would crash the process, it leaves the database
// open and says so: the write-ahead log holds every acknowledged write,
// and the next Open replays it. Calls after the first return nil.
func (s *Store) Close() error {
	var err error
	s.close.Do(func() {
		close(s.stopGC)
		close(s.stopMon)
		s.gcDone.Wait()
		s.monDone.Wait()
		s.life.Lock()
		defer s.life.Unlock()
		s.closed = true
		if err = s.closeBadger(); err != nil {
			s.log.Error("badgerstore: closing the store", "dir", s.dir, "err", err)
		}
		err = errors.Join(err, s.releaseAll())
	})
	return err
}

// closeBadger closes the database, or waits for its closing begun by a
// reopen, within CloseTimeout; s.life is held.
func (s *Store) closeBadger() error {
	closing := s.dbClosing
	if closing == nil {
		if !s.inMemory && !s.dbReadOnly {
			// Up to three memtables waiting and the one being written.
			need := 4*s.opts.MemTableBytes + 1<<20
			if free := freeSpace(s.dir); free >= 0 && free < need {
				s.count(FaultClose)
				return fmt.Errorf("close store %s: %w: free space %s, and flushing Badger's memtables may take %s: left open; its write-ahead log holds every acknowledged write for the next open", s.dir, store.ErrReadOnly, mib(free), mib(need))
			}
		}
		closing = closeDB(s.db)
	}
	select {
	case err := <-closing:
		if err != nil {
			return fmt.Errorf("close store %s: %w", s.dir, err)
		}
		return nil
	case <-time.After(s.opts.CloseTimeout):
		s.count(FaultClose)
		return fmt.Errorf("close store %s: Badger did not finish closing within %v (a flush failing, see its errors); left to the end of the process: its write-ahead log holds every acknowledged write for the next open", s.dir, s.opts.CloseTimeout)
	}
}

// gcLoop garbage-collects the value log every interval until Close.
func (s *Store) gcLoop(interval time.Duration) {
	defer s.gcDone.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stopGC:
			return
		case <-t.C:
			s.collectGarbage()
		}
	}
}

// collectGarbage rewrites value-log files as long as some are worth it.
// It writes like Apply, so only while the store is ok, and holding wmu,
// so that no write follows one that broke Badger.
func (s *Store) collectGarbage() {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("badgerstore: value-log GC panicked", "dir", s.dir, "panic", r, "stack", string(debug.Stack()))
			s.fail(FaultPanic, fmt.Sprintf("Badger panicked in the value-log GC: %v", r))
		}
	}()
	if s.enter() != nil {
		return
	}
	defer s.life.RUnlock()
	if s.health.load() != store.StateOK || s.dbReadOnly {
		return
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	for {
		select {
		case <-s.stopGC:
			return
		default:
		}
		err := s.db.RunValueLogGC(gcDiscardRatio)
		if errors.Is(err, badger.ErrNoRewrite) {
			return
		}
		if err != nil {
			s.log.Warn("badgerstore: value-log GC", "dir", s.dir, "err", err)
			return
		}
	}
}

// badgerLogger passes Badger's warnings and errors to slog and drops its
// chatty informational and debug lines.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, args ...any) {
	b.l.Error("badger: " + strings.TrimSpace(fmt.Sprintf(f, args...)))
}

func (b badgerLogger) Warningf(f string, args ...any) {
	b.l.Warn("badger: " + strings.TrimSpace(fmt.Sprintf(f, args...)))
}

func (badgerLogger) Infof(string, ...any)  {}
func (badgerLogger) Debugf(string, ...any) {}
