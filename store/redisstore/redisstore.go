// Package redisstore is the store.Store backend for many spamd nodes on
// one shared model, in Redis 7+ or Valkey 8+ (one server, Sentinel or
// Cluster), through github.com/redis/rueidis.
//
// # Keys
//
// Every key starts with a prefix (Options.Prefix, "spamd:" by default).
// All of a user's keys carry the hash tag {user:}, {:} for the global
// model (a bare {} does not tag), so they share one Cluster slot and a
// script may change any of them atomically:
//
//	P meta             hash: schema, the class list ("spam,ham"), the day of the upgrade from schema 2
//	P{user:}t          hash: the user's totals, its last day trained, its forgotten messages, its bucket layout and version
//	P{user:}s          hash: digest (32 bytes) → seen record, "CLASS [HEAD BODY]...;[MEASURE LEVEL]...;DAY[ MARK]"
//	P{user:}d          hash: the measures' samples, "CLASS.MEASURE.LEVEL" → count, and their moments
//	P{user:}b:<hex>    hash: a bucket of token rows, hash (8 bytes) → row
//
// # Memory
//
// Token rows live in bucket hashes rather than a key each: a key costs
// Redis some 70 bytes before its value, a field of a small hash a few.
// The top bits of a token's hash pick its bucket by linear hashing (see
// layout): a new user has one bucket, and the apply script splits one
// bucket in two each time the user's rows outnumber 48 per bucket, so a
// bucket keeps some 24 to 96 tokens at any model size and stays
// listpack-encoded (hash-max-listpack-entries, 128 by default, must not be
// lowered). A row is a count and a weight per class, in a header byte and
// a few bytes a value, then the last day the token was trained on in two
// bytes (see appendRow); a token of a two-class model takes some 21 to 25
// bytes of Redis memory in all, where a hash per token, as rspamd keeps,
// takes 117 to 121 (TestMemory and TestModelMemory measure both).
// UserSize tells what one user's model takes.
//
// # Training
//
// Apply runs the apply script (lua/apply.lua) over its ops, some thousands
// of features' worth a call: it reads each op's seen record and rows,
// computes and checks every new value before changing anything, and only
// once all ops ran writes each changed row, seen record and the totals,
// once each. An op is whole or not at all, and an op that fails stops the
// call with the ops before it applied, which Apply reports as their
// results: the applied ops are always a prefix of the batch. Scripts are
// declared with "#!lua" flags, so a Redis over maxmemory refuses a whole
// call rather than failing in its middle. An op on a message already
// trained as its class changes nothing, so an Apply retried after a lost
// connection, whatever part of it had been applied, counts nothing twice;
// the one call in flight when the connection went may have been applied
// without its results being returned. A training op sets each row it adds
// to to the latest of the row's day and its own (Op.Day), and the totals'
// last day likewise; its seen record keeps its day and mark.
//
// Classes are registered store-wide in the meta hash, in a call of their
// own before the ops that use them (a user's script cannot reach a key of
// another Cluster slot); a class registered by an Apply that fails later
// stays registered, which is harmless.
//
// # Pruning
//
// Prune runs beside training nodes, in calls of some thousands of rows,
// each one atomic script (lua/prune.lua) that judges every row of a range
// of hashes as it is then and deletes those the plan selects, with their
// counts from the totals. A plan with a budget needs the whole model's
// census first, read the same way (lua/census.lua); the script gets the
// rule and where the budget cuts, and judges as store.PrunePlan.Drop does
// (TestPruneJudge). Seen records older than the rule's day go through
// lua/prune_seen.lua, counted as forgotten. The prune scripts may run on
// a Redis at maxmemory, which they relieve. A node's cache drops what a
// prune call changed before the next call; other nodes drop it when Redis
// tells them, as for training.
//
// # Reads and the node cache
//
// Lookup answers from the node's cache (see nodeCache), and asks Redis
// for the tokens it misses in one script call, one round trip, which also
// brings the user's totals. RESP3 client tracking in broadcast mode on the
// prefix makes Redis send every node the name of every key anyone changes,
// and the node drops what it held of it: a report trained on one node
// changes the next verdict on every other within milliseconds. A node
// also drops what its own Apply changed before Apply returns, so it always
// reads its own writes.
//
// # Redis down
//
// A read that Redis does not answer within Options.ReadTimeout, or that
// fails for want of a connection, is answered from the cache, current or
// stale (the cache keeps, when a connection is lost, what it held then:
// see nodeCache), tokens it does not hold counting as unseen; Stale then
// reports true and the store logs it, once. A user of whom the cache holds
// no totals cannot be answered, and the error goes to the caller, whose
// failure action applies. For a second after a failure reads do not wait
// for Redis at all. Apply and Seen never answer from the cache: they fail,
// wrapping ErrUnavailable, and the daemon's report queue keeps the reports
// they were applying until Redis is back.
//
// No key has a TTL and the store must not be evicted from: either would
// break the totals. Run Redis with maxmemory-policy noeviction; see
// docs/cluster.md.
//
// # Older schemas
//
// The store is of schema 3. Open upgrades a store of schema 1 (before
// measures) or 2 (before days and marks) by marking it schema 3, in one
// atomic step, and recording the day it did, once: nothing is rewritten.
// What the old schema lacks reads as empty (values, samples, marks,
// forgotten messages), and a row or a seen record without a day reads as
// trained on the day of the upgrade, so that nothing old is pruned as
// ancient the day after; training dates the rows it touches. Nodes of an
// older build then refuse to open the store, and those running fail to
// read the rows newer nodes write: upgrade every node together.
//
// # Limits
//
// A user's model lives in one Cluster slot: Cluster spreads users, not
// one user's tokens. Counts, weights, totals and samples are exact up to
// 2^53 (the scripts compute in Lua's doubles); an op that would pass that
// fails. A sample's sum of squares reaches 2^53 after some 8 billion
// messages of one class.
// Check reads a model in many calls, not in one snapshot, and retries
// while training changes it. A prune deletes rows but merges no bucket:
// a model pruned to a fraction of its size keeps its buckets, sparser,
// until training fills them again.
package redisstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
)

// Errors of this backend, besides those of package store.
var (
	// ErrUnavailable is wrapped by the errors of calls that Redis did not
	// answer: it is down, unreachable, loading, or too slow.
	ErrUnavailable = errors.New("redis is unavailable")
	// ErrSchema means the prefix holds a store this build cannot read.
	ErrSchema = errors.New("not a spamd store of a known schema")
)

// Options configure Open.
type Options struct {
	// Addresses are the servers: one, as "unix:/PATH" (or "/PATH"),
	// "tcp://HOST:PORT" or "HOST:PORT"; several seeds of a Cluster; or,
	// with SentinelMaster, the Sentinels.
	Addresses []string
	// SentinelMaster is the name of the master set Sentinels watch; when
	// set, Addresses are those of the Sentinels.
	SentinelMaster string
	// Username and Password authenticate (an ACL user; Username "" is
	// the default user).
	Username, Password string
	// SentinelUsername and SentinelPassword authenticate to the Sentinels.
	SentinelUsername, SentinelPassword string
	// TLS, if not nil, encrypts TCP connections.
	TLS *tls.Config
	// DB selects a database of a single server (not Cluster).
	DB int
	// Prefix starts every key; "" means "spamd:". It must not contain
	// '{' or '}'.
	Prefix string
	// CacheBytes bounds, roughly, the node's cache of token rows. Zero
	// means 128 MiB; negative turns caching off, and with it answering
	// from the cache when Redis is down.
	CacheBytes int64
	// ReadTimeout bounds each read from Redis; past it, the read is
	// answered from the cache. Zero means 1 second.
	ReadTimeout time.Duration
	// Logger receives the store's warnings (Redis unreachable, answering
	// from the cache) and notices. Nil discards them.
	Logger *slog.Logger
	// NoStaleReads makes reads fail, wrapping ErrUnavailable, when Redis
	// does not answer, rather than answer from the cache: for tools,
	// whose answers must be current, unlike a mail server's verdicts.
	NoStaleReads bool
	// BucketLoad is the number of rows per bucket past which buckets are
	// split; zero means 48. Only tests and measurements change it.
	BucketLoad int
}

// Defaults of Options.
const (
	DefaultPrefix      = "spamd:"
	defaultCacheBytes  = 128 << 20
	defaultReadTimeout = time.Second
	defaultBucketLoad  = 48
	// retryAfter is how long reads answer from the cache without trying
	// Redis after a failure.
	retryAfter = time.Second
	// maxSplits bounds the buckets one apply call splits; the features a
	// call carries bound it first.
	maxSplits = 4096
	// lookupChunk bounds the tokens one lookup call reads, a few
	// milliseconds' work for Redis.
	lookupChunk = 4096
)

// Store is a store.Store kept in Redis. Its methods are safe for
// concurrent use.
type Store struct {
	client  rueidis.Client
	keys    keys
	scripts scripts
	cache   *nodeCache
	log     *slog.Logger
	opts    Options
	classes atomic.Pointer[classList]
	// upgraded is the day the store was upgraded from schema 2 or 1, 0 if
	// it was created of schema 3: the day of a token row or a seen record
	// written before, which has none.
	upgraded store.Day
	// classesOld is set when another node may have registered classes.
	classesOld atomic.Bool

	// life is held shared by every call and exclusively by Close.
	life   sync.RWMutex
	closed bool

	healthMu  sync.Mutex
	down      bool
	downSince time.Time
	retryAt   time.Time
	stale     atomic.Uint64 // reads answered from the cache with Redis down
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

// Open connects to Redis and reads the store's class list. Close releases
// the connections.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if strings.ContainsAny(o.Prefix, "{}") {
		return nil, fmt.Errorf("open redis store: prefix %q has a brace, which would break the hash tags", o.Prefix)
	}
	if len(o.Addresses) == 0 {
		return nil, errors.New("open redis store: no address")
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = defaultCacheBytes
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = defaultReadTimeout
	}
	if o.BucketLoad <= 0 {
		o.BucketLoad = defaultBucketLoad
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		keys:    keys{prefix: o.Prefix},
		scripts: newScripts(),
		cache:   newNodeCache(o.CacheBytes),
		log:     o.Logger,
		opts:    o,
	}
	s.classes.Store(newClassList(nil))
	addrs := make([]string, len(o.Addresses))
	for i, a := range o.Addresses {
		var err error
		if addrs[i], err = dialAddress(a); err != nil {
			return nil, fmt.Errorf("open redis store: %w", err)
		}
	}
	co := rueidis.ClientOption{
		InitAddress: addrs,
		Username:    o.Username,
		Password:    o.Password,
		TLSConfig:   o.TLS,
		SelectDB:    o.DB,
		ClientName:  "spamd",
		DialCtxFn:   dial,
		Dialer:      net.Dialer{Timeout: 2 * time.Second, KeepAlive: time.Second},
		// A connection that does not answer for this long is closed,
		// which ends every call waiting on it.
		ConnWriteTimeout: 5 * time.Second,
		// Retrying belongs to the callers here: a read falls back to the
		// cache at once, a write is retried by whoever queued it.
		DisableRetry: true,
		// Tracking in broadcast mode: every change under the prefix, by
		// anyone, is announced to every node (see nodeCache).
		ClientTrackingOptions: trackingOptions(o.Prefix),
		OnInvalidations:       s.invalidated,
		// rueidis's own cache, for DoCache, which this store does not use.
		CacheSizeEachConn: 1 << 16,
	}
	if o.SentinelMaster != "" {
		co.Sentinel = rueidis.SentinelOption{
			MasterSet: o.SentinelMaster,
			Username:  o.SentinelUsername,
			Password:  o.SentinelPassword,
			TLSConfig: o.TLS,
			Dialer:    co.Dialer,
			// Topology is otherwise followed by events alone.
			TopologyRefreshInterval: 5 * time.Second,
		}
	}
	client, err := rueidis.NewClient(co)
	if err != nil {
		return nil, fmt.Errorf("open redis store %s: %w: %w", strings.Join(o.Addresses, ","), ErrUnavailable, err)
	}
	s.client = client
	if err := s.loadMeta(ctx); err != nil {
		client.Close()
		return nil, fmt.Errorf("open redis store %s: %w", strings.Join(o.Addresses, ","), err)
	}
	return s, nil
}

func trackingOptions(prefix string) []string {
	return []string{"BCAST", "PREFIX", prefix}
}

// dialAddress turns an address as Options takes it into one rueidis
// passes to dial: a unix socket's path, or HOST:PORT.
func dialAddress(a string) (string, error) {
	switch {
	case strings.HasPrefix(a, "unix:"):
		a = strings.TrimPrefix(a, "unix:")
		if !strings.HasPrefix(a, "/") {
			return "", fmt.Errorf("address %q: a unix socket's path must be absolute", "unix:"+a)
		}
		return a, nil
	case strings.HasPrefix(a, "/"):
		return a, nil
	case strings.HasPrefix(a, "tcp://"):
		a = strings.TrimPrefix(a, "tcp://")
	}
	if _, _, err := net.SplitHostPort(a); err != nil {
		return "", fmt.Errorf("address %q: want unix:/PATH, tcp://HOST:PORT or HOST:PORT", a)
	}
	return a, nil
}

// dial connects to a unix socket for a path, else over TCP, with TLS if
// configured.
func dial(ctx context.Context, dst string, d *net.Dialer, tc *tls.Config) (net.Conn, error) {
	if strings.HasPrefix(dst, "/") {
		return d.DialContext(ctx, "unix", dst)
	}
	if tc != nil {
		td := tls.Dialer{NetDialer: d, Config: tc}
		return td.DialContext(ctx, "tcp", dst)
	}
	return d.DialContext(ctx, "tcp", dst)
}

// loadMeta reads the schema version, the day the store was upgraded and
// the class list, upgrading a store of an old schema.
func (s *Store) loadMeta(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.ReadTimeout*5)
	defer cancel()
	vals, err := s.client.Do(ctx, s.client.B().Hmget().Key(s.keys.meta()).Field("schema", "classes", "upgraded").Build()).ToArray()
	if err != nil {
		return fmt.Errorf("read the meta hash: %w", s.wrap(err))
	}
	if len(vals) != 3 {
		return fmt.Errorf("read the meta hash: %d values", len(vals))
	}
	upgraded, _ := vals[2].ToString()
	if schema, err := vals[0].ToString(); err == nil && slices.Contains(oldSchemas, schema) {
		today := strconv.FormatUint(uint64(store.DayOf(time.Now())), 10)
		reply, err := s.scripts.upgrade.Exec(ctx, s.client, []string{s.keys.meta()}, append([]string{schemaVersion, today}, oldSchemas...)).AsStrSlice()
		if err != nil || len(reply) != 2 {
			return fmt.Errorf("convert from schema %s: %w", schema, s.wrap(err))
		}
		upgraded = reply[1]
		s.log.Info("redisstore: converted the store", "from_schema", schema, "to_schema", reply[0], "upgraded", upgraded)
		if reply[0] != schemaVersion {
			return fmt.Errorf("%w: schema %q, this build reads %q", ErrSchema, reply[0], schemaVersion)
		}
	} else if err == nil && schema != schemaVersion {
		return fmt.Errorf("%w: schema %q, this build reads %q", ErrSchema, schema, schemaVersion)
	}
	if upgraded != "" {
		d, err := strconv.ParseUint(upgraded, 10, 32)
		if err != nil {
			return fmt.Errorf("%w: the meta hash's upgraded day %q", ErrSchema, upgraded)
		}
		s.upgraded = store.Day(d)
	}
	names, _ := vals[1].ToString()
	return s.setClasses(names)
}

func (s *Store) setClasses(list string) error {
	var names []string
	if list != "" {
		names = strings.Split(list, ",")
	}
	for _, n := range names {
		if err := store.ValidClass(n); err != nil {
			return fmt.Errorf("%w: class list %q: %w", ErrSchema, list, err)
		}
	}
	for {
		cur := s.classes.Load()
		if len(cur.names) >= len(names) {
			// Calls that raced may answer in any order: a list that the
			// one known extends was read before it.
			if !slices.Equal(cur.names[:len(names)], names) {
				return fmt.Errorf("%w: class list %q and %q differ", store.ErrInconsistent, list, cur.names)
			}
			if len(cur.names) == len(names) {
				s.classesOld.Store(false)
			}
			return nil
		}
		if !slices.Equal(cur.names, names[:len(cur.names)]) {
			return fmt.Errorf("%w: class list %q does not extend %q", store.ErrInconsistent, list, cur.names)
		}
		if s.classes.CompareAndSwap(cur, newClassList(names)) {
			s.classesOld.Store(false)
			return nil
		}
	}
}

// classList returns the registered classes, at least need of them,
// reading them again if another node may have registered some. When
// Redis does not answer, the list known is returned if it is long enough.
func (s *Store) classList(ctx context.Context, need int) (*classList, error) {
	cur := s.classes.Load()
	if !s.classesOld.Load() && len(cur.names) >= need {
		return cur, nil
	}
	if s.skipRedis() && len(cur.names) >= need {
		return cur, nil
	}
	rctx, cancel := context.WithTimeout(ctx, s.opts.ReadTimeout)
	defer cancel()
	list, err := s.client.Do(rctx, s.client.B().Hget().Key(s.keys.meta()).Field("classes").Build()).ToString()
	if err != nil && !rueidis.IsRedisNil(err) {
		if s.unavailable(ctx, err) && len(cur.names) >= need {
			return cur, nil
		}
		return nil, fmt.Errorf("read the class list: %w", s.wrap(err))
	}
	if err := s.setClasses(list); err != nil {
		return nil, err
	}
	cur = s.classes.Load()
	if len(cur.names) < need {
		return nil, fmt.Errorf("%w: %d classes counted, %d registered", store.ErrInconsistent, need, len(cur.names))
	}
	return cur, nil
}

// invalidated is rueidis's callback for invalidation messages; nil means
// the connection was lost, with whatever invalidations were on the way.
func (s *Store) invalidated(msgs []rueidis.RedisMessage) {
	if msgs == nil {
		s.cache.invalidate(s.keys, nil, true, func() { s.classesOld.Store(true) })
		return
	}
	names := make([]string, 0, len(msgs))
	for _, m := range msgs {
		if k, err := m.ToString(); err == nil {
			names = append(names, k)
		}
	}
	s.cache.invalidate(s.keys, names, false, func() { s.classesOld.Store(true) })
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

// unavailable reports whether err, from a call made with (a child of)
// ctx, says that Redis cannot be reached rather than that the call was
// wrong, and notes it: reads then answer from the cache for a while.
// An error of ctx itself is the caller's, not Redis's.
func (s *Store) unavailable(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil || errors.Is(err, store.ErrClosed) {
		return false
	}
	if re, ok := rueidis.IsRedisErr(err); ok {
		msg := re.Error()
		ok := false
		for _, p := range []string{"LOADING", "BUSY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "READONLY"} {
			ok = ok || strings.HasPrefix(msg, p)
		}
		if !ok {
			return false
		}
	}
	s.healthMu.Lock()
	defer s.healthMu.Unlock()
	now := time.Now()
	if !s.down {
		s.down, s.downSince = true, now
		s.log.Warn("redisstore: Redis does not answer; classifying from the node cache, learning fails until it is back", "err", err)
	}
	s.retryAt = now.Add(retryAfter)
	return true
}

// answered notes that Redis answered.
func (s *Store) answered() {
	s.healthMu.Lock()
	defer s.healthMu.Unlock()
	if s.down {
		s.log.Info("redisstore: Redis answers again", "down_for", time.Since(s.downSince).Round(time.Millisecond),
			"stale_reads", s.stale.Load())
		s.down = false
	}
}

// skipRedis reports whether reads should not try Redis yet, after a
// recent failure.
func (s *Store) skipRedis() bool {
	if s.opts.NoStaleReads {
		return false
	}
	s.healthMu.Lock()
	defer s.healthMu.Unlock()
	return s.down && time.Now().Before(s.retryAt)
}

// Stale reports whether the store is answering reads from its cache,
// which may be out of date, because Redis did not answer the last time
// it was asked, and how many reads it so answered since it was opened.
func (s *Store) Stale() (bool, uint64) {
	s.healthMu.Lock()
	defer s.healthMu.Unlock()
	return s.down, s.stale.Load()
}

// wrap marks an error that says Redis cannot be reached with
// ErrUnavailable.
func (s *Store) wrap(err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	if _, ok := rueidis.IsRedisErr(err); ok {
		msg := err.Error()
		for _, p := range []string{"LOADING", "BUSY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "READONLY", "OOM"} {
			if strings.HasPrefix(msg, p) {
				return fmt.Errorf("%w: %w", ErrUnavailable, err)
			}
		}
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: no answer in time: %w", ErrUnavailable, err)
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// readTotals reads user's totals hash.
func (s *Store) readTotals(ctx context.Context, user string) (*totals, error) {
	vals, err := s.client.Do(ctx, s.client.B().Hmget().Key(s.keys.totals(user)).Field(totalsFields...).Build()).ToArray()
	if err != nil {
		return nil, err
	}
	return totalsOf(vals)
}

// totalsOf parses the values of the totals fields, as HMGET returns them.
func totalsOf(vals []rueidis.RedisMessage) (*totals, error) {
	str := make([]string, len(vals))
	present := make([]bool, len(vals))
	for i, v := range vals {
		if v.IsNil() {
			continue
		}
		var err error
		if str[i], err = v.ToString(); err != nil {
			if n, ierr := v.AsInt64(); ierr == nil {
				str[i] = fmt.Sprint(n)
			} else {
				return nil, fmt.Errorf("%w: totals field: %v", store.ErrInconsistent, err)
			}
		}
		present[i] = true
	}
	return parseTotals(str, present)
}

// Totals returns the per-class totals of user's model: from the cache
// when it holds them current, else from Redis; when Redis does not
// answer, from the cache even if stale.
func (s *Store) Totals(ctx context.Context, user string) (store.Totals, error) {
	if err := store.ValidUser(user); err != nil {
		return store.Totals{}, fmt.Errorf("totals: %w", err)
	}
	if err := s.enter(); err != nil {
		return store.Totals{}, fmt.Errorf("totals: %w", err)
	}
	defer s.life.RUnlock()
	if err := ctx.Err(); err != nil {
		return store.Totals{}, fmt.Errorf("totals %q: %w", user, err)
	}
	t, tk := s.cache.getTotals(user)
	if t == nil {
		var err error
		t, err = s.fetchTotals(ctx, user, tk)
		if err != nil {
			return store.Totals{}, fmt.Errorf("totals %q: %w", user, err)
		}
	}
	out, err := s.publicTotals(ctx, t)
	if err != nil {
		return store.Totals{}, err
	}
	if out.Samples, err = s.samples(ctx, user); err != nil {
		return store.Totals{}, fmt.Errorf("samples %q: %w", user, err)
	}
	return out, nil
}

// samples returns user's samples: from the cache when it holds them
// current, else from Redis; when Redis does not answer, from the cache
// even if stale, or none, which leaves the measures out of the score
// rather than fail it.
func (s *Store) samples(ctx context.Context, user string) (store.Samples, error) {
	smp, tk := s.cache.getSamples(user)
	if tk == nil {
		return smp, nil
	}
	if !s.skipRedis() {
		rctx, cancel := context.WithTimeout(ctx, s.opts.ReadTimeout)
		fv, err := s.client.Do(rctx, s.client.B().Hgetall().Key(s.keys.samples(user)).Build()).AsStrMap()
		cancel()
		if err == nil {
			s.answered()
			smp, err := parseSamples(fv)
			if err != nil {
				return nil, err
			}
			s.cache.fillSamples(user, tk, smp)
			return smp, nil
		}
		if !s.unavailable(ctx, err) || s.opts.NoStaleReads {
			return nil, s.wrap(err)
		}
	}
	smp, _ = s.cache.staleSamples(user)
	return smp, nil
}

// fetchTotals reads user's totals from Redis, or from the cache, stale,
// when Redis does not answer.
func (s *Store) fetchTotals(ctx context.Context, user string, tk *ticket) (*totals, error) {
	if !s.skipRedis() {
		rctx, cancel := context.WithTimeout(ctx, s.opts.ReadTimeout)
		t, err := s.readTotals(rctx, user)
		cancel()
		if err == nil {
			s.answered()
			s.cache.fillTotals(user, tk, t)
			return t, nil
		}
		if !s.unavailable(ctx, err) || s.opts.NoStaleReads {
			return nil, s.wrap(err)
		}
		if t := s.cache.staleTotals(user); t != nil {
			s.stale.Add(1)
			return t, nil
		}
		return nil, s.wrap(err)
	}
	if t := s.cache.staleTotals(user); t != nil && !s.opts.NoStaleReads {
		s.stale.Add(1)
		return t, nil
	}
	return nil, fmt.Errorf("%w: answering from the cache, which holds nothing of this user", ErrUnavailable)
}

func (s *Store) publicTotals(ctx context.Context, t *totals) (store.Totals, error) {
	n := max(len(t.messages), len(t.tokens))
	cl, err := s.classList(ctx, n)
	if err != nil {
		return store.Totals{}, err
	}
	n = max(n, len(cl.names))
	out := store.Totals{
		Classes:    slices.Clone(cl.names),
		Messages:   make([]uint64, n),
		Tokens:     make([]uint64, n),
		Vocabulary: t.vocabulary,
		LastDay:    s.lastDay(t),
	}
	copy(out.Messages, t.messages)
	copy(out.Tokens, t.tokens)
	if slices.ContainsFunc(t.forgotten, func(n uint64) bool { return n != 0 }) {
		out.Forgotten = make([]uint64, n)
		copy(out.Forgotten, t.forgotten)
	}
	return out, nil
}

// lastDay returns the last day a model was trained on: a model of schema
// 2 not trained since the upgrade keeps none, and was trained by the
// upgrade at the latest, which its rows' days read as.
func (s *Store) lastDay(t *totals) store.Day {
	if !t.dayKnown && t.version != 0 {
		return s.upgraded
	}
	return t.lastDay
}

// day returns the day of a row or a seen record, the upgrade's for one
// written before it, which has none.
func (s *Store) day(d store.Day, dated bool) store.Day {
	if !dated {
		return s.upgraded
	}
	return d
}

// Lookup returns the row of each hash for user: its count and weight per
// class, two values for each registered class at least. Tokens the cache
// holds cost nothing; the others are read in one round trip. When Redis
// does not answer, the cache answers for them too, stale or not, and a
// token it does not hold counts as unseen. The rows are the caller's.
func (s *Store) Lookup(ctx context.Context, user string, hashes []bow.Hash) ([]store.Counts, error) {
	if err := store.ValidUser(user); err != nil {
		return nil, fmt.Errorf("lookup: %w", err)
	}
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("lookup: %w", err)
	}
	defer s.life.RUnlock()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("lookup %q: %w", user, err)
	}
	width := 2 * len(s.classes.Load().names)
	out := make([]store.Counts, len(hashes))
	tk := s.cache.getTokens(user, hashes, out, width)
	if len(tk.miss) == 0 {
		if len(tk.old) > 0 {
			s.cache.putBack(user, tk, hashes)
		}
		return out, nil
	}
	if s.skipRedis() {
		return s.lookupStale(user, hashes, out, tk, width, nil)
	}
	// A message's misses go in one call; a caller asking for more tokens
	// than a message has (a whole model) gets several, so that no call
	// holds Redis for long.
	var backing []uint64
	for start := 0; start < len(tk.miss); start += lookupChunk {
		end := min(start+lookupChunk, len(tk.miss))
		sub := *tk
		sub.miss, sub.bucket, sub.id = tk.miss[start:end], tk.bucket[start:end], tk.id[start:end]
		if start > 0 {
			sub.old = nil
		}
		packed := make([]byte, 0, 8*len(sub.miss))
		for _, i := range sub.miss {
			packed = append(packed, field(hashes[i])...)
		}
		rctx, cancel := context.WithTimeout(ctx, s.opts.ReadTimeout)
		reply, err := s.scripts.lookup.Exec(rctx, s.client, []string{s.keys.totals(user)},
			[]string{s.keys.base(user), string(packed)}).ToArray()
		cancel()
		if err != nil {
			if s.unavailable(ctx, err) {
				sub.miss = tk.miss[start:]
				return s.lookupStale(user, hashes, out, &sub, width, err)
			}
			return nil, fmt.Errorf("lookup %q: %w", user, s.wrap(err))
		}
		s.answered()
		t, rows, err := s.lookupReply(reply, len(sub.miss))
		if err != nil {
			return nil, fmt.Errorf("lookup %q: %w", user, err)
		}
		s.cache.fill(user, &sub, hashes, t, rows)
		for k, i := range sub.miss {
			r := rows[k]
			if r == nil {
				continue
			}
			if len(r) > width {
				// Another node registered classes since.
				if _, err := s.classList(ctx, (len(r)+1)/2); err != nil {
					return nil, fmt.Errorf("lookup %q: %w", user, err)
				}
				out[i] = r
				continue
			}
			if len(backing) < width {
				backing = make([]uint64, (len(sub.miss)-k)*width)
			}
			v := backing[:width:width]
			backing = backing[width:]
			copy(v, r)
			out[i] = v
		}
	}
	return out, nil
}

// lookupStale answers the misses of a Lookup from the cache, stale or
// not, after Redis failed to with err (nil when it was not asked).
func (s *Store) lookupStale(user string, hashes []bow.Hash, out []store.Counts, tk *ticket, width int, err error) ([]store.Counts, error) {
	if s.opts.CacheBytes < 0 || s.opts.NoStaleReads {
		if err == nil {
			err = errors.New("not asked after a recent failure")
		}
		return nil, fmt.Errorf("lookup %q: %w", user, s.wrap(err))
	}
	s.cache.stale(user, hashes, out, tk, width)
	s.stale.Add(1)
	return out, nil
}

// lookupReply parses the lookup script's reply: totals and n rows, each
// at least as long as the class list.
func (s *Store) lookupReply(reply []rueidis.RedisMessage, n int) (*totals, []store.Counts, error) {
	if len(reply) != 2 {
		return nil, nil, fmt.Errorf("lookup script: %d values", len(reply))
	}
	tv, err := reply[0].ToArray()
	if err != nil {
		return nil, nil, err
	}
	t, err := totalsOf(tv)
	if err != nil {
		return nil, nil, err
	}
	vals, err := reply[1].ToArray()
	if err != nil && !rueidis.IsRedisNil(err) {
		return nil, nil, err
	}
	if len(vals) > n {
		return nil, nil, fmt.Errorf("lookup script: %d rows for %d tokens", len(vals), n)
	}
	rows := make([]store.Counts, n)
	var arena []uint64
	for k, v := range vals {
		if v.IsNil() {
			continue
		}
		b, err := v.ToString()
		if err != nil {
			return nil, nil, err
		}
		start := len(arena)
		if arena, _, _, err = decodeRow(arena, b); err != nil {
			return nil, nil, err
		}
		rows[k] = arena[start:len(arena):len(arena)]
	}
	// The script leaves out the trailing missing rows of a Lua table.
	return t, rows, nil
}

// Seen returns the class message d was trained as for user, "" if none.
// It is read from Redis, never from the cache.
func (s *Store) Seen(ctx context.Context, user string, d store.Digest) (string, error) {
	if err := store.ValidUser(user); err != nil {
		return "", fmt.Errorf("seen: %w", err)
	}
	if err := s.enter(); err != nil {
		return "", fmt.Errorf("seen: %w", err)
	}
	defer s.life.RUnlock()
	if s.skipRedis() {
		return "", fmt.Errorf("seen %q %x: %w: not asked after a recent failure", user, d[:8], ErrUnavailable)
	}
	rctx, cancel := context.WithTimeout(ctx, s.opts.ReadTimeout)
	defer cancel()
	v, err := s.client.Do(rctx, s.client.B().Hget().Key(s.keys.seen(user)).Field(string(d[:])).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		s.answered()
		return "", nil
	}
	if err != nil {
		s.unavailable(ctx, err)
		return "", fmt.Errorf("seen %q %x: %w", user, d[:8], s.wrap(err))
	}
	s.answered()
	rec, err := parseSeen(v)
	if err != nil {
		return "", fmt.Errorf("seen %q %x: %w", user, d[:8], err)
	}
	cl, err := s.classList(ctx, rec.class+1)
	if err != nil {
		return "", fmt.Errorf("seen %q %x: %w", user, d[:8], err)
	}
	return cl.names[rec.class], nil
}

// Users lists the users with a model (a totals hash), sorted: it scans
// the keys of every server, which is for maintenance, not the hot path.
func (s *Store) Users(ctx context.Context) ([]string, error) {
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("users: %w", err)
	}
	defer s.life.RUnlock()
	pattern := s.keys.prefix + "{*:}" + suffixTotals
	seen := map[string]bool{}
	for _, node := range s.client.Nodes() {
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Type("hash").Build()).AsScanEntry()
			if err != nil {
				return nil, fmt.Errorf("users: %w", s.wrap(err))
			}
			for _, k := range e.Elements {
				if p := s.keys.parse(k); p.kind == 't' {
					seen[p.user] = true
				}
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	users := make([]string, 0, len(seen))
	for u := range seen {
		users = append(users, u)
	}
	slices.Sort(users)
	return users, nil
}

// Close closes the connections; calls after it return store.ErrClosed.
func (s *Store) Close() error {
	s.life.Lock()
	defer s.life.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.client.Close()
	return nil
}
