// Package badgerstore is the default store.Store backend: an embedded
// Badger key-value store, one directory, owned by one process.
//
// # Layout
//
// Every key starts with a one-byte kind. A user's keys continue with the
// user name and a 0x00 byte, which ValidUser guarantees cannot occur in a
// name, so no user's key can be spelled through another user's name:
//
//	"m"                          schema version and class list (JSON)
//	"u" user 0x00                totals: per-class messages and tokens, vocabulary
//	"r" user 0x00 hash           one token's row; hash is 8 bytes big-endian
//	"s" user 0x00 digest         seen record of a trained message
//
// Totals are uvarints. A token's row is laid out as store.Counts, a pair
// per class index: the count as a uvarint, the weight as a zigzag varint,
// trailing zeros dropped, so a token of a two-class model takes a few
// bytes. A row whose counts and weights all reach zero is deleted; the
// vocabulary counts the rows with a count, not those a weight alone
// keeps. A seen record is the class index as a uvarint, then the steps
// the message's training added, a head and a body step per class index as
// zigzag varints, trailing zero pairs dropped: untraining subtracts
// exactly those. Weights are added and subtracted in wrapping 64-bit
// arithmetic, which makes taking back exact whatever came between.
// Classes are registered store-wide, on first use, and never renumbered.
//
// # Schema 1
//
// Schema 1 had no weights and no steps: token counts under kind "t", one
// uvarint per class, and seen records of the class index alone. Open
// converts such a store in place; see convert for how a crash during the
// conversion is survived. In short: rows of schema 2 live under a kind of
// their own, each transaction moves a run of keys to it and deletes the
// old ones, and the meta record says schema 2 only once none is left, so
// an Open that finds schema 1 resumes where the last one stopped. Seen
// records of schema 1 read as records without steps and stay as they are.
// A build that reads schema 1 only refuses a converted store.
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
// and totals which Apply updates after each commit, before it returns, so
// the cache never serves a value older than the last Apply; misses are
// read in one read-only transaction per call. Apply reads through the same
// cache, and skips reading tokens that a per-user Bloom filter of stored
// tokens says are new (see presence), which most uncached tokens are when
// training a corpus.
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
	// gcDiscardRatio is the share of a value-log file that must be garbage
	// for it to be rewritten, as Badger recommends.
	gcDiscardRatio = 0.5
)

// Store is a store.Store kept in Badger. Its methods are safe for
// concurrent use.
type Store struct {
	db       *badger.DB
	log      *slog.Logger
	dir      string
	inMemory bool
	cache    *cache

	// life is held shared by every call that uses db and exclusively by
	// Close, so that Close never pulls the database from under a call.
	life   sync.RWMutex
	closed bool
	close  sync.Once
	stopGC chan struct{}
	gcDone sync.WaitGroup
	gcMu   sync.Mutex // Badger rejects a value-log GC while another runs

	// wmu serializes Apply and Compact: a single writer never conflicts.
	wmu     sync.Mutex
	// busy holds the users whose model a restore or a delete is writing,
	// which readers see as having none; nBusy counts them.
	busyMu sync.Mutex
	busy   map[string]bool
	nBusy  atomic.Int32
	classes atomic.Pointer[classList]
	present *presence // guarded by wmu
	// txnShare is the share, in percent, of Badger's transaction limits
	// Apply fills; tests raise it past 100 to make Badger refuse commits.
	txnShare int64
	// commitErr, if set by a test, is called with the first op of each
	// transaction Apply commits, and an error it returns fails the
	// commit in Badger's place.
	commitErr func(start int) error
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

var _ store.Store = (*Store)(nil)

// Open opens the store in dir, creating it if needed, and starts the
// value-log garbage collector. Close releases it.
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
	bo := badger.DefaultOptions(dir)
	if o.InMemory {
		bo = badger.DefaultOptions("").WithInMemory(true)
	}
	bo = bo.
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
		// wmu already makes Apply the only writer.
		WithDetectConflicts(false).
		// Badger's metrics are process-wide expvars; Size reads the
		// directory instead.
		WithMetricsEnabled(false)
	db, err := badger.Open(bo)
	// A process killed between Badger creating a log file and writing its
	// header leaves an empty .mem or .vlog file, on which Open fails with
	// z.NewFile (Badger issue #2207), but only after writing the header:
	// the next attempt opens it. Such a file held nothing, so nothing is
	// lost. Badger flattens the error to text, so the text is matched.
	for retry := 0; err != nil && retry < 3 && strings.Contains(err.Error(), z.NewFile.Error()); retry++ {
		o.Logger.Warn("badgerstore: reopening after a crash left an empty log file", "dir", dir, "err", err)
		db, err = badger.Open(bo)
	}
	if err != nil && lockedError(err) {
		return nil, fmt.Errorf("open store %s: %w: %w", dir, ErrLocked, err)
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	s := &Store{
		db:       db,
		log:      o.Logger,
		dir:      dir,
		inMemory: o.InMemory,
		cache:    newCache(o.CacheBytes),
		present:  newPresence(maxPresenceBytes),
		txnShare: defaultTxnShare,
		stopGC:   make(chan struct{}),
	}
	if err := s.loadMeta(ctx, o); err != nil {
		return nil, errors.Join(fmt.Errorf("open store %s: %w", dir, err), db.Close())
	}
	if err := s.finishBusy(); err != nil {
		return nil, errors.Join(fmt.Errorf("open store %s: %w", dir, err), db.Close())
	}
	if !o.InMemory && o.GCInterval > 0 {
		s.gcDone.Add(1)
		go s.gcLoop(o.GCInterval)
	}
	return s, nil
}

// lockedError reports whether err, from badger.Open, says that another
// process holds the directory lock. Badger says so only in text.
func lockedError(err error) bool {
	return strings.Contains(err.Error(), "Cannot acquire directory lock")
}

// loadMeta reads the schema version and classes, writing them into a new,
// empty database, and converts a store of schema 1.
func (s *Store) loadMeta(ctx context.Context, o Options) error {
	var m meta
	err := s.db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(metaKey)
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
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		m, err = decodeMeta(v)
		return err
	})
	if err != nil {
		return fmt.Errorf("read meta record: %w", err)
	}
	if m.Schema == 1 {
		if err := s.convert(ctx, m, o); err != nil {
			return fmt.Errorf("convert from schema 1: %w", err)
		}
		m.Schema = schemaVersion
	}
	if m.Schema != schemaVersion {
		return fmt.Errorf("%w: schema %d, this build reads %d", ErrSchema, m.Schema, schemaVersion)
	}
	s.classes.Store(newClassList(m.Classes))
	return nil
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
func (s *Store) Totals(ctx context.Context, user string) (store.Totals, error) {
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
		txn := s.db.NewTransaction(false)
		defer txn.Discard()
		var err error
		if t, err = readTotals(txn, user); err != nil {
			return store.Totals{}, fmt.Errorf("totals %q: %w", user, err)
		}
		s.cache.fillTotals(gen, user, t)
	}
	// Loaded after the totals, so that it names every class they count.
	classes := s.classes.Load().names
	n := max(len(classes), len(t.messages), len(t.tokens))
	out := store.Totals{
		Classes:    slices.Clone(classes),
		Messages:   make([]uint64, n),
		Tokens:     make([]uint64, n),
		Vocabulary: t.vocabulary,
	}
	copy(out.Messages, t.messages)
	copy(out.Tokens, t.tokens)
	return out, nil
}

func readTotals(txn *badger.Txn, user string) (*totals, error) {
	item, err := txn.Get(totalsKey(user))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return &totals{}, nil
	}
	if err != nil {
		return nil, err
	}
	var t totals
	err = item.Value(func(v []byte) error {
		t, err = decodeTotals(v)
		return err
	})
	return &t, err
}

// Lookup returns the row of each hash for user: its count and weight
// per class, two values for each registered class at least. The rows are
// the caller's; those of that length share one array.
func (s *Store) Lookup(ctx context.Context, user string, hashes []bow.Hash) ([]store.Counts, error) {
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
	out := make([]store.Counts, len(hashes))
	if s.isBusy(user) {
		return out, nil
	}
	miss, old, gen := s.cache.getTokens(user, hashes, out, width)
	if len(miss) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("lookup %q: %w", user, err)
		}
		if err := s.readTokens(user, hashes, out, miss, width); err != nil {
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
// at a time: a store is scanned in key order at some 0.3 microseconds a
// token, where a lookup of one token costs several. What it puts may push
// other users' tokens toward eviction, as any reads would. It stops early,
// without error, when a commit changes the store meanwhile, since what it
// read may then be stale; the cache fills as usual from there.
func (s *Store) Warm(ctx context.Context, user string) (int, error) {
	if err := store.ValidUser(user); err != nil {
		return 0, fmt.Errorf("warm: %w", err)
	}
	if err := s.enter(); err != nil {
		return 0, fmt.Errorf("warm: %w", err)
	}
	defer s.life.RUnlock()
	room := s.cache.room()
	if room == 0 {
		return 0, nil
	}
	_, _, gen := s.cache.getTotals(user)
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	const chunk = 4096
	hashes := make([]bow.Hash, 0, chunk)
	vals := make([]store.Counts, 0, chunk)
	idx := make([]int, chunk)
	for i := range idx {
		idx[i] = i
	}
	stale, filled := false, 0
	flush := func() {
		if !stale && len(hashes) > 0 {
			if stale = !s.cache.fillTokens(gen, user, hashes, vals, idx[:len(hashes)]); !stale {
				filled += len(hashes)
			}
		}
		hashes, vals = hashes[:0], vals[:0]
	}
	prefix := userPrefix(kindToken, user)
	var arena []uint64
	n := 0
	err := scan(ctx, txn, prefix, func(key, v []byte) bool {
		if stale || n >= room {
			return false
		}
		if len(key) != len(prefix)+8 {
			return true // Check reports it
		}
		start := len(arena)
		var err error
		if arena, err = decodeRow(arena, v); err != nil {
			arena = arena[:start]
			return true
		}
		hashes = append(hashes, bow.Hash(binary.BigEndian.Uint64(key[len(prefix):])))
		vals = append(vals, arena[start:len(arena):len(arena)])
		if n++; len(hashes) == chunk {
			flush()
			arena = nil
		}
		return true
	})
	flush()
	if err != nil {
		return filled, fmt.Errorf("warm %q: %w", user, err)
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
// for tokens not stored.
func (s *Store) readTokens(user string, hashes []bow.Hash, vals []store.Counts, idx []int, width int) error {
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	key := make([]byte, 0, len(user)+10)
	// One array backs all rows read, unless one is longer than width.
	arena := make([]uint64, len(idx)*width)
	for k, i := range idx {
		key = appendTokenKey(key[:0], user, hashes[i])
		item, err := txn.Get(key)
		if errors.Is(err, badger.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		row := arena[k*width : k*width : (k+1)*width]
		err = item.Value(func(v []byte) error {
			row, err = decodeRow(row, v)
			return err
		})
		if err != nil {
			return fmt.Errorf("token %x: %w", hashes[i], err)
		}
		vals[i] = row[:max(len(row), width)]
	}
	return nil
}

// Seen returns the class message d was trained as for user, "" if none.
func (s *Store) Seen(_ context.Context, user string, d store.Digest) (string, error) {
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
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	rec, err := readSeen(txn, user, d, nil)
	if err != nil {
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
func (s *Store) Users(ctx context.Context) ([]string, error) {
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("users: %w", err)
	}
	defer s.life.RUnlock()
	var users []string
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{kindTotals}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			k := it.Item().Key()
			if len(k) < 2 || k[len(k)-1] != 0 {
				return fmt.Errorf("%w: malformed totals key %q", store.ErrInconsistent, k)
			}
			users = append(users, string(k[1:len(k)-1]))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("users: %w", err)
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
	if s.enter() != nil {
		return 0, 0
	}
	defer s.life.RUnlock()
	for _, t := range s.db.Tables() {
		lsm += int64(t.OnDiskSize)
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

// onDisk returns the bytes fi occupies on disk: its allocated blocks where
// the system reports them, else its length.
func onDisk(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return min(fi.Size(), st.Blocks*512)
	}
	return fi.Size()
}

// Compact rewrites the LSM tree into one level and garbage-collects the
// value log until nothing is left to reclaim, for maintenance by the CLI.
// Writers wait while it runs; readers do not.
func (s *Store) Compact(ctx context.Context) error {
	if err := s.enter(); err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	defer s.life.RUnlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	if err := s.db.Flatten(2); err != nil {
		return fmt.Errorf("compact: flatten: %w", err)
	}
	if s.inMemory {
		return nil
	}
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("compact: %w", err)
		}
		err := s.db.RunValueLogGC(gcDiscardRatio)
		if errors.Is(err, badger.ErrNoRewrite) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("compact: value-log GC: %w", err)
		}
	}
}

// Close stops the garbage collector, waits for calls in progress and
// closes the database. Calls after the first return nil.
func (s *Store) Close() error {
	var err error
	s.close.Do(func() {
		close(s.stopGC)
		s.gcDone.Wait()
		s.life.Lock()
		defer s.life.Unlock()
		s.closed = true
		if err = s.db.Close(); err != nil {
			err = fmt.Errorf("close store %s: %w", s.dir, err)
		}
	})
	return err
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
func (s *Store) collectGarbage() {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("badgerstore: value-log GC panicked", "dir", s.dir, "panic", r, "stack", string(debug.Stack()))
		}
	}()
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
