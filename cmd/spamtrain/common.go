package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/mailbox"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/badgerstore"
	"github.com/spamd/spamd/store/redisstore"
)

// listFlag collects every value of a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// expandMulti rewrites "--spam a b --ham c" as "--spam a --spam b --ham c"
// for the flags named in multi, so that a flag may take several paths as
// its documentation promises.
func expandMulti(args []string, multi ...string) []string {
	isMulti := func(a string) bool {
		for _, m := range multi {
			if a == "-"+m || a == "--"+m {
				return true
			}
		}
		return false
	}
	var out []string
	cur := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(out, args[i:]...)
		case isMulti(a):
			cur = a
			if i+1 < len(args) {
				out = append(out, a, args[i+1])
				i++
			}
		case cur != "" && (a == "-" || !strings.HasPrefix(a, "-")):
			out = append(out, cur, a)
		default:
			cur = ""
			out = append(out, a)
		}
	}
	return out
}

// modelFlags are the flags that choose the store, the user and the filter
// settings.
type modelFlags struct {
	db      string
	redis   string
	cfgPath string
	user    string
	sets    listFlag
	workers int
	// readsOnly is set by a command that writes nothing to the store,
	// which is then opened with a small memtable (smallMemTableBytes).
	readsOnly bool
	// loadsIfNew is set by train: a Badger store it makes can only be
	// loaded in bulk (bulkTrain), which writes nothing through the
	// memtable, and so is opened with the small one from the start.
	loadsIfNew bool
}

func (m *modelFlags) register(fs *flag.FlagSet, withUser bool) {
	m.registerStore(fs)
	if withUser {
		fs.StringVar(&m.user, "user", "", "user whose model to use (default: the global model)")
	}
	fs.Var(&m.sets, "set", "filter setting KEY=VALUE, repeatable (see 'spamtrain settings')")
	fs.IntVar(&m.workers, "workers", runtime.GOMAXPROCS(0), "messages parsed in parallel")
}

// registerStore registers the flags that choose the store alone, for the
// commands that read or write it without a filter.
func (m *modelFlags) registerStore(fs *flag.FlagSet) {
	fs.StringVar(&m.db, "db", os.Getenv("SPAMD_DB"), "store directory (default $SPAMD_DB)")
	fs.StringVar(&m.redis, "redis", os.Getenv("SPAMD_REDIS"), "a Redis model's server, or Cluster seeds or Sentinels, comma-separated (default $SPAMD_REDIS; the other [store.redis] settings come from the configuration)")
	fs.StringVar(&m.cfgPath, "config", "", "spamd's configuration, whose [store] and [filter] a Redis model is used with (default $SPAMD_CONFIG, else "+config.DefaultPath+" if it exists)")
}

// config returns the filter configuration with the --set flags applied.
func (m *modelFlags) config() (filter.Config, error) { return m.filterConfig(nil) }

// filterConfig returns the filter configuration: the defaults, under the
// [filter] table of spamd's configuration when the model is a Redis one
// (the nodes that share it tokenize that way), and the --set flags over
// both.
func (m *modelFlags) filterConfig(table map[string]string) (filter.Config, error) {
	cfg := filter.DefaultConfig()
	for _, k := range slices.Sorted(maps.Keys(table)) {
		if err := cfg.Set(k, table[k]); err != nil {
			return cfg, fmt.Errorf("[filter] %s: %w", k, err)
		}
	}
	if err := applySets(&cfg, m.sets); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

func applySets(cfg *filter.Config, sets []string) error {
	for _, s := range sets {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return fmt.Errorf("%w: --set %q: want KEY=VALUE", errUsage, s)
		}
		if err := cfg.Set(k, v); err != nil {
			return fmt.Errorf("%w: --set %s", errUsage, err)
		}
	}
	return nil
}

// modelStore is the store a command opened, Badger or Redis, with what
// the commands ask of either.
type modelStore struct {
	store.Store
	badger *badgerstore.Store // nil for Redis
	// opts are the options badger was opened with.
	opts badgerstore.Options
	dir  string
}

// Close closes the store m holds when it is called: reopenForLoad may
// have replaced the one it held when the call was deferred.
func (m *modelStore) Close() error { return m.Store.Close() }

// LookupInto looks up hashes in b's memory where the store can fill it
// (store.Filler), as Badger's can; the embedded store.Store would hide
// that it can.
func (m *modelStore) LookupInto(ctx context.Context, user string, hashes []bow.Hash, b *store.LookupBuffer) ([]store.Counts, error) {
	if fl, ok := m.Store.(store.Filler); ok {
		return fl.LookupInto(ctx, user, hashes, b)
	}
	return m.Store.Lookup(ctx, user, hashes)
}

// Size returns the Badger store's size on disk; a Redis store's is the
// server's business (INFO memory).
func (m *modelStore) Size() (lsm, vlog int64) {
	if m.badger == nil {
		return 0, 0
	}
	return m.badger.Size()
}

// Compact compacts a Badger store.
func (m *modelStore) Compact(ctx context.Context) (store.Compaction, error) {
	if m.badger == nil {
		return store.Compaction{}, errors.New("a Redis model has nothing to compact: Redis frees what it no longer holds")
	}
	return m.badger.Compact(ctx)
}

// storeChoice is the store a command line names: a Badger directory, or a
// Redis model with the settings of spamd's configuration.
type storeChoice struct {
	redis  bool
	db     string
	cfg    config.Store      // the cache's size; for Redis, the server
	filter map[string]string // spamd's [filter], for Redis
}

// choose decides the store: --redis (or $SPAMD_REDIS) names a Redis
// model, --db (or $SPAMD_DB) a Badger one; with neither, the [store] of
// spamd's configuration.
func (m *modelFlags) choose() (storeChoice, error) {
	if m.redis == "" && m.db != "" {
		return storeChoice{db: m.db, cfg: config.Default(os.Getenv).Store}, nil
	}
	cfg, found, err := loadConfig(m.cfgPath)
	if err != nil {
		return storeChoice{}, err
	}
	if m.redis != "" {
		cfg.Store.Backend = "redis"
		cfg.Store.Redis.Address = strings.Split(m.redis, ",")
		if err := cfg.Validate(); err != nil {
			return storeChoice{}, fmt.Errorf("%w: --redis: %v", errUsage, err)
		}
	} else if !found {
		return storeChoice{}, fmt.Errorf("%w: no store: give --db DIR (or set SPAMD_DB) for a Badger store, --redis ADDR (or SPAMD_REDIS) for a Redis one, or spamd's configuration with --config FILE (or SPAMD_CONFIG; %s is read when it exists)", errUsage, config.DefaultPath)
	} else if cfg.Store.Backend != "redis" {
		// The store spamd's configuration names, as spamd finds it;
		// spamd creates it, owned by its own user, so a command run
		// before must not.
		if _, err := os.Stat(filepath.Join(cfg.Store.Dir, "MANIFEST")); err != nil {
			return storeChoice{}, fmt.Errorf("%w: no store: spamd's configuration names the store %s, which does not exist yet (spamd creates it when it starts); give --db DIR (or set SPAMD_DB) to use another", errUsage, cfg.Store.Dir)
		}
		return storeChoice{db: cfg.Store.Dir, cfg: cfg.Store}, nil
	}
	return storeChoice{redis: true, cfg: cfg.Store, filter: cfg.Filter}, nil
}

// loadConfig reads spamd's configuration: path, else $SPAMD_CONFIG, else
// the default file if it exists. found is false when there is none to
// read, and the defaults are returned.
func loadConfig(path string) (cfg config.Config, found bool, err error) {
	cfg = config.Default(os.Getenv)
	explicit := true
	if path == "" {
		path = os.Getenv("SPAMD_CONFIG")
	}
	if path == "" {
		path, explicit = config.DefaultPath, false
	}
	c, err := config.Load(path, cfg)
	switch {
	case err == nil:
		return c, true, nil
	case !explicit && errors.Is(err, os.ErrNotExist):
		return cfg, false, nil
	}
	return cfg, false, err
}

// open opens the store and a filter over it. The caller closes the store.
func (m *modelFlags) open(ctx context.Context, e *env) (*filter.Filter, *modelStore, error) {
	if err := store.ValidUser(m.user); err != nil {
		return nil, nil, fmt.Errorf("%w: --user: %v", errUsage, err)
	}
	ch, err := m.choose()
	if err != nil {
		return nil, nil, err
	}
	cfg, err := m.filterConfig(ch.filter)
	if err != nil {
		return nil, nil, err
	}
	ms, err := openStore(ctx, e, ch, m.readsOnly, m.loadsIfNew)
	if err != nil {
		return nil, nil, err
	}
	f, err := filter.New(ms, cfg)
	if err != nil {
		ms.Close()
		return nil, nil, err
	}
	return f, ms, nil
}

// store opens the store the flags choose, for commands that work on the
// store itself rather than through a filter.
func (m *modelFlags) store(ctx context.Context, e *env) (*modelStore, error) {
	ch, err := m.choose()
	if err != nil {
		return nil, err
	}
	return openStore(ctx, e, ch, m.readsOnly, false)
}

// openStore opens the store ch names, for a command that writes nothing
// to it if readsOnly, and that loads it in bulk if it is new if
// loadsIfNew.
func openStore(ctx context.Context, e *env, ch storeChoice, readsOnly, loadsIfNew bool) (*modelStore, error) {
	var ms *modelStore
	if ch.redis {
		o, err := redisOptions(ch.cfg.Redis)
		if err != nil {
			return nil, err
		}
		// A tool's answers must be current: fail rather than answer
		// from a stale cache, as a mail server does.
		o.Logger, o.NoStaleReads = e.log, true
		if ch.cfg.CacheMB > 0 {
			o.CacheBytes = int64(ch.cfg.CacheMB) << 20
		}
		st, err := redisstore.Open(ctx, o)
		if err != nil {
			return nil, err
		}
		ms = &modelStore{Store: st}
	} else {
		// The cache's budget is spamd's, so that a command that reads
		// the whole model (classify of many messages) stays in it. A
		// command warms a model once its reads have cost what a warm
		// does, so that one message reads only its own tokens and
		// thousands read the model once.
		o := badgerstore.Options{Logger: e.log, CacheBytes: int64(ch.cfg.CacheMB) << 20, WarmByNeed: true}
		if ch.cfg.CacheMB == 0 {
			o.CacheBytes = -1
		}
		switch {
		case readsOnly:
			o.MemTableBytes = smallMemTableBytes
			o.ReadOnly = true
		case loadsIfNew && absentOrEmpty(ch.db):
			o.MemTableBytes = smallMemTableBytes
		}
		st, err := badgerstore.Open(ctx, ch.db, o)
		if err != nil {
			return nil, storeOpenError(ch.db, err)
		}
		ms = &modelStore{Store: st, badger: st, opts: o, dir: ch.db}
	}
	return ms, nil
}

// redisOptions turns [store.redis] into the store's options, reading the
// password and TLS files.
func redisOptions(c config.Redis) (redisstore.Options, error) {
	pass, err := c.LoadPassword()
	if err != nil {
		return redisstore.Options{}, err
	}
	tc, err := c.LoadTLS()
	if err != nil {
		return redisstore.Options{}, err
	}
	return redisstore.Options{
		Addresses:        c.Address,
		SentinelMaster:   c.SentinelMaster,
		Username:         c.Username,
		Password:         pass,
		SentinelUsername: c.Username,
		SentinelPassword: pass,
		TLS:              tc,
		DB:               c.DB,
		Prefix:           c.Prefix,
		ReadTimeout:      c.Timeout.Duration,
	}, nil
}

// newProgress returns a progress bar on the command's stderr counting
// messages, shown only when stderr is a terminal; total < 0 means
// unknown, shown as a count and a rate until ChangeMax64 gives the total,
// after which the bar shows the share done and the time left.
func newProgress(e *env, total int64, what string) *progressbar.ProgressBar {
	return progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(e.stderr),
		progressbar.OptionSetVisibility(e.tty),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("msg"),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
}

// countSources counts the messages in sources in the background, while
// they are walked (mailbox.Count: a listing per folder, and a read of each
// mbox), and gives the total to set, for a progress bar to show the time
// left. An index's entries count one each. It reports whether it counts:
// not when progress is not shown, nor when a source is standard input,
// which cannot be counted.
func countSources(ctx context.Context, e *env, sources []source, recursive bool, set func(total int64)) bool {
	if !e.tty || slices.ContainsFunc(sources, func(s source) bool { return s.path == mailbox.Stdin }) {
		return false
	}
	go func() {
		defer func() {
			if v := recover(); v != nil {
				e.log.Error("counting the messages: panic", "panic", v)
			}
		}()
		var total int64
		for _, s := range sources {
			if s.indexed {
				total++
				continue
			}
			n, err := mailbox.Count(ctx, s.path, mailbox.Options{Recursive: recursive})
			if err != nil {
				return // the walk reports it
			}
			total += int64(n)
		}
		if ctx.Err() == nil {
			set(total)
		}
	}()
	return true
}

// absentOrEmpty reports whether dir does not exist or holds nothing: a
// Badger store not made yet.
func absentOrEmpty(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	return errors.Is(err, io.EOF)
}
