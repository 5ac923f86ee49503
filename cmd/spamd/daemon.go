package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/decide"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/history"
	"github.com/spamd/spamd/identity"
	"github.com/spamd/spamd/junkwatch"
	"github.com/spamd/spamd/milter"
	"github.com/spamd/spamd/prefs"
	"github.com/spamd/spamd/relabel"
	"github.com/spamd/spamd/reportq"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/badgerstore"
	"github.com/spamd/spamd/store/redisstore"
)

// daemon is a running spamd.
type daemon struct {
	opts   options
	getenv func(string) string
	log    *slog.Logger
	level  *slog.LevelVar

	// path is the configuration file, "" when running on the defaults;
	// raw is its content as last loaded. Both, and cfg, belong to the
	// goroutine that reloads.
	path string
	raw  []byte
	cfg  config.Config

	st  modelStore
	ms  *milter.Server
	api *control.Server
	met *metrics
	// hist is the milter's latest verdicts, nil when none are kept;
	// histFile is where they are saved, "" when they are not; console
	// is the web console, nil when off.
	hist     *history.Ring
	histFile string
	console  *control.Console
	// current is the configuration in force, for the console.
	current atomic.Pointer[config.Config]
	// reports is the queue of misclassification reports, applied by
	// applier; watcher, if the configuration names Junk folders, feeds it.
	reports *reportq.Queue
	applier *relabel.Applier
	watcher *junkwatch.Watcher
	// prefs keeps the preferences set through the API; setMu orders the
	// changes of the milter's settings that a reload and the API make.
	prefs *prefs.File
	setMu sync.Mutex
}

// configPath returns the configuration file to read, "" for none.
func configPath(o options, getenv func(string) string) (string, error) {
	switch {
	case o.config != "":
		return o.config, nil
	case getenv("SPAMD_CONFIG") != "":
		return getenv("SPAMD_CONFIG"), nil
	}
	if _, err := os.Stat(config.DefaultPath); err == nil {
		return config.DefaultPath, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("configuration: %w", err)
	}
	return "", nil
}

// load reads the configuration file (the defaults when path is "") and
// applies the flags over it.
func load(path string, o options, getenv func(string) string) (config.Config, []byte, error) {
	cfg := config.Default(getenv)
	var raw []byte
	if path != "" {
		var err error
		if raw, err = os.ReadFile(path); err != nil {
			return config.Config{}, nil, fmt.Errorf("read configuration: %w", err)
		}
		if cfg, err = config.Decode(strings.NewReader(string(raw)), cfg); err != nil {
			return config.Config{}, nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	if o.db != "" {
		cfg.Store.Dir = o.db
	}
	if abs, err := filepath.Abs(cfg.Store.Dir); err == nil {
		cfg.Store.Dir = abs
	}
	if cfg.Reports.Spool == "" {
		cfg.Reports.Spool = filepath.Join(cfg.Store.Dir, "reports")
	}
	if cfg.History.File == "" {
		cfg.History.File = filepath.Join(cfg.Store.Dir, "history.jsonl")
	}
	if cfg.Prefs.File == "" {
		cfg.Prefs.File = filepath.Join(cfg.Store.Dir, "prefs.json")
	}
	if o.milter != "" {
		cfg.Milter.Listen = o.milter
	}
	switch {
	case strings.HasPrefix(o.api, "tcp://"):
		cfg.API.TCP = strings.TrimPrefix(o.api, "tcp://")
	case o.api != "":
		cfg.API.Socket = strings.TrimPrefix(o.api, "unix:")
	}
	if err := cfg.Validate(); err != nil {
		return config.Config{}, nil, fmt.Errorf("with the command line: %w", err)
	}
	fc, err := filterConfig(cfg.Filter)
	if err != nil {
		return config.Config{}, nil, err
	}
	if err := decide.ValidActions(cfg.Actions, fc); err != nil {
		return config.Config{}, nil, err
	}
	return cfg, raw, nil
}

// filterConfig applies the [filter] table over the filter's defaults.
func filterConfig(table map[string]string) (filter.Config, error) {
	c := filter.DefaultConfig()
	for _, k := range slices.Sorted(maps.Keys(table)) {
		if err := c.Set(k, table[k]); err != nil {
			return c, fmt.Errorf("[filter] %s: %w", k, err)
		}
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("[filter]: %w", err)
	}
	return c, nil
}

// newLogger returns the daemon's logger, writing to w, and its level.
func newLogger(c config.Log, w io.Writer) (*slog.Logger, *slog.LevelVar) {
	level := new(slog.LevelVar)
	level.Set(logLevel(c.Level))
	o := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, o)), level
	}
	return slog.New(slog.NewTextHandler(w, o)), level
}

func logLevel(s string) slog.Level {
	var l slog.Level
	l.UnmarshalText([]byte(s)) // config.Validate admits only valid names
	return l
}

// modelStore is what the daemon needs of its store: a store.Store whose
// cache it can warm at start. The Badger store also reports its size on
// disk (sizer); the Redis store whether it answers from a stale cache
// (staler).
type modelStore interface {
	store.Store
	WarmInBackground(ctx context.Context, users ...string) (stop func())
}

type sizer interface{ Size() (lsm, vlog int64) }

// warnIdentity says at start when the watcher's folders and the milter
// can never name the same user, so that Junk moves would train models
// nothing classifies with (they are then not reported).
func warnIdentity(log *slog.Logger, pat junkwatch.Pattern, rule identity.Rule, domain string) {
	if rule == identity.Global {
		log.Warn("junkwatch: [milter] users = \"global\" gives no user a model of their own: Junk folder moves are not learned")
		return
	}
	if rule != identity.Address || domain != "" {
		return
	}
	users, _, err := pat.Users()
	if err != nil || len(users) == 0 {
		return
	}
	for _, u := range users {
		if strings.Contains(u, "@") {
			return
		}
	}
	log.Warn("junkwatch: the Junk folders are named by account (such as "+users[0]+"), the milter names users by address: "+
		"set [watch] domain, or [milter] users = \"localpart\"; until then Junk folder moves are not learned",
		"pattern", pat.String())
}

// warnClasses says at start when the store holds messages of classes
// the filter does not list: they are not scored, and a message of such a
// class is not told apart, which a [filter] classes left behind on an
// upgrade or a restore from another site would cause unnoticed.
func warnClasses(ctx context.Context, log *slog.Logger, st store.Store, fc filter.Config) {
	t, err := st.Totals(ctx, "")
	if err != nil {
		return
	}
	var missing []string
	for i, c := range t.Classes {
		if !fc.HasClass(c) && t.Messages[i] > 0 {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		log.Warn("spamd: the global model has learned classes the configuration does not list; they are not scored until [filter] classes lists them",
			"classes", strings.Join(missing, "+"), "configured", strings.Join(fc.Classes, "+"))
	}
}

// reserveBytes is the store's free-space reserve for [store] reserve_mb:
// 0 the store's default, -1 none.
func reserveBytes(mb int) int64 {
	if mb < 0 {
		return -1
	}
	return int64(mb) << 20
}

// compacter is a store that can give back disk space: Badger.
type compacter interface {
	Compact(context.Context) (store.Compaction, error)
}

type staler interface{ Stale() (bool, uint64) }

// openStore opens the store the configuration chooses.
func openStore(ctx context.Context, c config.Store, log *slog.Logger) (modelStore, error) {
	cache := int64(c.CacheMB) << 20
	if c.CacheMB == 0 {
		cache = -1
	}
	if c.Backend == "redis" {
		return openRedis(ctx, c.Redis, cache, log)
	}
	return openBadger(ctx, c, cache, log)
}

// openBadger opens the Badger store, first checking that its directory
// can be written, with advice when it cannot.
func openBadger(ctx context.Context, c config.Store, cache int64, log *slog.Logger) (*badgerstore.Store, error) {
	advice := "give another with --db DIR or [store] dir in the configuration, or run spamd under systemd with StateDirectory=spamd"
	if err := os.MkdirAll(c.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("store directory %s cannot be created (%v): %s", c.Dir, err, advice)
	}
	probe, err := os.CreateTemp(c.Dir, ".write-test-*")
	if err != nil {
		return nil, fmt.Errorf("store directory %s is not writable (%v): %s", c.Dir, err, advice)
	}
	probe.Close()
	os.Remove(probe.Name())
	st, err := badgerstore.Open(ctx, c.Dir, badgerstore.Options{Logger: log, CacheBytes: cache, SyncWrites: c.SyncWrites,
		ReserveBytes: reserveBytes(c.ReserveMB)})
	if errors.Is(err, badgerstore.ErrLocked) {
		return nil, fmt.Errorf("store %s is in use by another process (another spamd, or spamtrain): stop it first: %w", c.Dir, err)
	}
	return st, err
}

// openRedis connects to the Redis store of [store.redis].
func openRedis(ctx context.Context, c config.Redis, cache int64, log *slog.Logger) (*redisstore.Store, error) {
	o, err := redisOptions(c)
	if err != nil {
		return nil, err
	}
	o.CacheBytes, o.Logger = cache, log
	return redisstore.Open(ctx, o)
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

// storeName says where the store is, for the log.
func storeName(c config.Store) string {
	if c.Backend == "redis" {
		return "redis " + strings.Join(c.Redis.Address, ",") + " " + c.Redis.Prefix
	}
	return c.Dir
}

// run runs the daemon until ctx is done, reloading on hup.
func run(ctx context.Context, o options, getenv func(string) string, stderr io.Writer, hup <-chan os.Signal) error {
	path, err := configPath(o, getenv)
	if err != nil {
		return err
	}
	cfg, raw, err := load(path, o, getenv)
	if err != nil {
		return err
	}
	logger, level := newLogger(cfg.Log, stderr)
	// go-milter reports broken connections through the standard logger.
	log.SetFlags(0)
	log.SetOutput(slog.NewLogLogger(logger.Handler(), slog.LevelWarn).Writer())
	d := &daemon{opts: o, getenv: getenv, log: logger, level: level, path: path, raw: raw, cfg: cfg}
	if path == "" {
		logger.Info("spamd: no configuration file, running on the defaults")
	}

	d.st, err = openStore(ctx, cfg.Store, logger)
	if err != nil {
		return err
	}
	// The global model is read into the cache in the background, so that
	// the first messages after a start are judged from memory; the store
	// is closed only after this stops.
	stopWarm := d.st.WarmInBackground(ctx, "")
	defer func() {
		stopWarm()
		if err := d.st.Close(); err != nil {
			logger.Error("spamd: closing the store", "err", err)
		}
	}()
	fc, _ := filterConfig(cfg.Filter) // checked by load
	f, err := filter.New(d.st, fc)
	if err != nil {
		return err
	}
	warnClasses(ctx, logger, d.st, fc)
	if d.prefs, err = prefs.OpenFile(cfg.Prefs.File); err != nil {
		return fmt.Errorf("%w (give another file with [prefs] file)", err)
	}
	d.met = newMetrics()
	d.current.Store(&cfg)
	if d.hist, d.histFile, err = openHistory(cfg.History, logger); err != nil {
		return err
	}
	d.ms = milter.New(d.settings(cfg, f), logger, d.met)
	isSpam := func(verdict string) bool { return d.ms.Settings().Filter.Config().IsSpam(verdict) }
	d.met.isSpam.Store(&isSpam)
	current := func() *filter.Filter { return d.ms.Settings().Filter }
	d.reports, err = reportq.Open(cfg.Reports.Spool, reportq.Options{MaxReports: cfg.Reports.MaxPending, Log: logger})
	if err != nil {
		return fmt.Errorf("%w (give another directory with [reports] spool)", err)
	}
	d.applier = &relabel.Applier{Filter: current, Log: logger, Applied: d.applied,
		SubjectTags: func() []string { return d.ms.Settings().Prefs.SubjectTags() }}
	// One naming rule for the milter, the watcher and the report
	// channel: a correction trains the model mail is classified with.
	rule := identity.Rule(cfg.Milter.Users)
	model := func(user string) (string, bool) { return rule.Folder(user, cfg.Watch.Domain) }
	if cfg.Watch.Junk != "" {
		pat, err := junkwatch.ParsePattern(cfg.Watch.Junk)
		if err != nil {
			return err
		}
		warnIdentity(logger, pat, rule, cfg.Watch.Domain)
		d.watcher, err = junkwatch.New(junkwatch.Options{Pattern: pat, Trash: cfg.Watch.Trash, Rescan: cfg.Watch.Rescan.Duration,
			Log: logger, Model: model, Report: func(ctx context.Context, r reportq.Report) error {
				_, err := d.reports.Enqueue(ctx, r)
				return err
			}})
		if err != nil {
			return err
		}
	}
	d.met.watch(d.st, d.ms, d.reports)
	token, err := readToken(cfg.API.TokenFile)
	if err != nil {
		return err
	}
	var size func() (lsm, vlog int64)
	if sz, ok := d.st.(sizer); ok {
		size = sz.Size
	}
	var compact func(context.Context) (store.Compaction, error)
	if c, ok := d.st.(compacter); ok {
		compact = c.Compact
	}
	d.api = control.NewServer(control.Options{
		Filter:      current,
		Size:        size,
		Compact:     compact,
		Dir:         cfg.Store.Dir,
		Rule:        func() identity.Rule { return identity.Rule(d.ms.Settings().Milter.Users) },
		ReportModel: model,
		Admins:      cfg.API.Admins,
		Reporters:   cfg.API.Reporters,
		Token:       token,
		Log:         logger,
		Observer:    d.met,
		Enqueue:     d.reports.Enqueue,
		Pending:     d.reports.Len,
		Classified:  d.met.Classified,
		Limits:      apiLimits(cfg.API),
		History:     d.hist,
		Prefs:       (*prefsService)(d),
	})
	if cfg.Console.Enabled {
		d.console, err = control.NewConsole(control.ConsoleOptions{
			API:      d.api,
			Token:    token,
			Counters: d.met.Counters,
			Relabel: func(ctx context.Context, user, class string, raw []byte, sig store.Digest) (string, bool, error) {
				o, err := d.applier.Relabel(ctx, user, class, "console", raw, sig, "")
				return o.Prev, o.Changed, err
			},
			Config: d.configText,
			Log:    logger,
		})
		if err != nil {
			return err
		}
	}
	return d.serve(ctx, hup)
}

// openHistory returns the ring of the milter's latest verdicts, nil when
// none are kept, with the verdicts of the last run when they persist,
// and the file to save them to, "" when they are not saved.
func openHistory(c config.History, log *slog.Logger) (*history.Ring, string, error) {
	if c.Size == 0 {
		return nil, "", nil
	}
	h, err := history.New(history.Options{Size: c.Size, MaxMessageBytes: int64(c.MessageMB) << 20})
	if err != nil {
		return nil, "", err
	}
	if !c.Persist {
		return h, "", nil
	}
	loaded, err := h.Load(c.File)
	switch {
	case errors.Is(err, history.ErrFormat) && !isEmpty(c.File):
		// Something else lives there, perhaps by a mistyped [history]
		// file: it is not spamd's to replace.
		log.Error("spamd: the history file is not one: it is left as it is, and the history is not saved in this run; "+
			"move it away or name another [history] file", "file", c.File, "err", err)
		return h, "", nil
	case err != nil:
		// The history is a convenience: a file it cannot read is said
		// and replaced, never a reason not to filter mail.
		log.Warn("spamd: the history of the last run is not read; it starts anew", "file", c.File, "err", err)
	case loaded.Entries > 0 || loaded.Skipped > 0:
		log.Info("spamd: history of the last run read", "file", c.File, "entries", loaded.Entries, "skipped", loaded.Skipped)
	}
	return h, c.File, nil
}

// isEmpty reports whether the file at path is empty.
func isEmpty(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Size() == 0
}

// applied counts an applied report, and notes when its model was
// trained.
func (d *daemon) applied(o relabel.Outcome) {
	d.met.applied(o)
	if o.Changed && d.hist != nil {
		d.hist.Trained(o.User, time.Now())
	}
}

// configText is the configuration in force for the console: every key,
// the [filter] table with every setting of the filter in force, secrets
// hidden.
func (d *daemon) configText() string {
	cfg := *d.current.Load()
	fc := d.ms.Settings().Filter.Config()
	cfg.Filter = map[string]string{}
	for _, k := range filter.Keys() {
		cfg.Filter[k], _ = fc.Get(k)
	}
	text, err := cfg.Text()
	if err != nil {
		return "# " + err.Error()
	}
	return text
}

// saveHistory writes the history to its file when it persists and
// changed.
func (d *daemon) saveHistory() {
	if d.histFile == "" {
		return
	}
	if _, err := d.hist.Save(d.histFile); err != nil {
		d.log.Warn("spamd: history not saved", "file", d.histFile, "err", err)
	}
}

// historyEvery is how often the history is saved while it changes.
const historyEvery = time.Minute

// settings returns what the milter judges messages by under cfg, with
// filter f and the preferences set through the API.
func (d *daemon) settings(cfg config.Config, f *filter.Filter) *milter.Settings {
	book := prefs.New(prefs.SiteOf(f.Config().Required(), cfg.Actions, cfg.Prefs),
		prefs.Layer{Users: cfg.Prefs.User, Domains: cfg.Prefs.Domain}, d.prefs.Layer())
	return &milter.Settings{Filter: f, Milter: cfg.Milter, Actions: cfg.Actions, Autolearn: cfg.Autolearn, History: d.hist, Prefs: book}
}

// prefsService is the daemon as the API sees its preferences: a change
// is kept in the file and applies from the next message on.
type prefsService daemon

func (p *prefsService) Book() *prefs.Book { return p.ms.Settings().Prefs }

func (p *prefsService) Actions() config.Actions { return p.ms.Settings().Actions }

func (p *prefsService) SetUser(user string, pref config.Pref) error {
	return p.set(func() (prefs.Layer, error) { return p.prefs.SetUser(user, pref) })
}

func (p *prefsService) SetDomain(domain string, pref config.Pref) error {
	return p.set(func() (prefs.Layer, error) { return p.prefs.SetDomain(domain, pref) })
}

// set changes the API's layer with change and puts the new layer into
// the milter's settings.
func (p *prefsService) set(change func() (prefs.Layer, error)) error {
	p.setMu.Lock()
	defer p.setMu.Unlock()
	l, err := change()
	if err != nil {
		return err
	}
	cur := p.ms.Settings()
	next := *cur
	next.Prefs = cur.Prefs.WithAPI(l)
	p.ms.Update(&next)
	return nil
}

// apiLimits are the control API's limits of the [api] section.
func apiLimits(a config.API) control.Limits {
	return control.Limits{
		MaxMessage:     a.MaxMessageBytes,
		MaxBatch:       a.MaxBatchBytes,
		MaxRequests:    a.MaxRequests,
		MaxTraining:    a.MaxTraining,
		ReadTimeout:    a.ReadTimeout.Duration,
		WriteTimeout:   a.WriteTimeout.Duration,
		IdleTimeout:    a.IdleTimeout.Duration,
		MaxConnections: a.MaxConnections,
	}
}

// readToken reads the API's bearer token, "" without a file.
func readToken(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("api token: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if len(t) < 16 || strings.ContainsAny(t, " \t\r\n") {
		return "", fmt.Errorf("api token in %s: want one line of at least 16 bytes, no spaces", path)
	}
	return t, nil
}

// serve opens the listeners, serves until ctx is done or a server fails,
// and shuts down.
func (d *daemon) serve(ctx context.Context, hup <-chan os.Signal) error {
	cfg := d.cfg
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	milterLn, err := listen(cfg.Milter.Listen, 0o660)
	if err != nil {
		return fmt.Errorf("milter: %w", err)
	}
	closers = append(closers, milterLn)
	apiLn, err := listen("unix:"+cfg.API.Socket, 0o660)
	if err != nil {
		return fmt.Errorf("control API: %w (give another socket with --api unix:/PATH)", err)
	}
	closers = append(closers, apiLn)
	httpd := []*httpServer{{name: "api", ln: apiLn, h: d.api.Handler()}}
	if cfg.API.TCP != "" {
		ln, err := net.Listen("tcp", cfg.API.TCP)
		if err != nil {
			return fmt.Errorf("control API: %w", err)
		}
		closers = append(closers, ln)
		h := d.api.Handler()
		if d.console != nil && cfg.Console.Listen == "" {
			mux, con := http.NewServeMux(), d.console.Handler()
			mux.Handle("/", h)
			mux.Handle("/console/", con)
			mux.Handle("/console", con)
			h = mux
		}
		httpd = append(httpd, &httpServer{name: "api-tcp", ln: ln, h: h})
	}
	if d.console != nil && cfg.Console.Listen != "" {
		ln, err := net.Listen("tcp", cfg.Console.Listen)
		if err != nil {
			return fmt.Errorf("console: %w", err)
		}
		closers = append(closers, ln)
		httpd = append(httpd, &httpServer{name: "console", ln: ln, h: d.console.Handler()})
	}
	if cfg.Metrics.Listen != "" {
		ln, err := net.Listen("tcp", cfg.Metrics.Listen)
		if err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		closers = append(closers, ln)
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", d.met.handler())
		mux.Handle("GET /healthz", d.api.Health())
		httpd = append(httpd, &httpServer{name: "metrics", ln: ln, h: mux})
	}

	errc := make(chan error, len(httpd)+3)
	goSafe(d.log, "milter", errc, func() error { return d.ms.Serve(milterLn) })
	for _, h := range httpd {
		// Timeouts and a bound on connections on every listener.
		h.srv = control.HTTPServer(h.h, apiLimits(cfg.API), slog.NewLogLogger(d.log.Handler(), slog.LevelWarn))
		goSafe(d.log, h.name, errc, func() error {
			if err := h.srv.Serve(control.Listener(h.ln, apiLimits(cfg.API))); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("%s: %w", h.name, err)
			}
			return nil
		})
	}
	d.log.Info("spamd: ready", "milter", cfg.Milter.Listen, "api", cfg.API.Socket, "api_tcp", cfg.API.TCP,
		"metrics", cfg.Metrics.Listen, "store", storeName(cfg.Store), "config", d.path,
		"reports", cfg.Reports.Spool, "pending_reports", d.reports.Len(), "watch", cfg.Watch.Junk,
		"history", cfg.History.Size, "console", consoleAddr(cfg))

	reloadCtx, stopReload := context.WithCancel(ctx)
	// Reports are applied, and Junk folders watched, until the daemon
	// stops; a report in the middle of being applied is applied again
	// after a restart, which changes nothing.
	var background sync.WaitGroup
	background.Add(1)
	goSafe(d.log, "reports", errc, func() error {
		defer background.Done()
		return ignoreCanceled(d.reports.Run(reloadCtx, d.applier.Apply))
	})
	if d.watcher != nil {
		background.Add(1)
		goSafe(d.log, "junkwatch", errc, func() error {
			defer background.Done()
			return ignoreCanceled(d.watcher.Run(reloadCtx))
		})
	}
	if d.console != nil {
		background.Add(1)
		goSafe(d.log, "console", errc, func() error {
			defer background.Done()
			d.console.Run(reloadCtx)
			return nil
		})
	}
	if d.histFile != "" {
		background.Add(1)
		goSafe(d.log, "history", errc, func() error {
			defer background.Done()
			t := time.NewTicker(historyEvery)
			defer t.Stop()
			for {
				select {
				case <-reloadCtx.Done():
					return nil
				case <-t.C:
					d.saveHistory()
				}
			}
		})
	}
	background.Add(1)
	goSafe(d.log, "prune", errc, func() error {
		defer background.Done()
		d.pruneLoop(reloadCtx, cfg.Prune)
		return nil
	})
	reloaded := make(chan struct{})
	go func() {
		defer close(reloaded)
		defer func() {
			if v := recover(); v != nil {
				d.log.Error("spamd: panic in the reload loop; reloading stops", "panic", v, "stack", string(debug.Stack()))
			}
		}()
		d.reloadLoop(reloadCtx, hup)
	}()
	notify(d.log, "READY=1")
	watchdogDone := make(chan struct{})
	go func() {
		defer close(watchdogDone)
		defer func() {
			if v := recover(); v != nil {
				d.log.Error("spamd: panic in the watchdog", "panic", v, "stack", string(debug.Stack()))
			}
		}()
		watchdog(reloadCtx, d.log, d.healthy)
	}()

	var failure error
	select {
	case <-ctx.Done():
		d.log.Info("spamd: stopping")
	case failure = <-errc:
		d.log.Error("spamd: a server failed; stopping", "err", failure)
	}
	notify(d.log, "STOPPING=1")
	stopReload()
	<-reloaded
	<-watchdogDone
	background.Wait()

	sctx, cancel := context.WithTimeout(context.Background(), cfg.Milter.ShutdownTimeout.Duration)
	defer cancel()
	if err := d.ms.Shutdown(sctx); err != nil {
		d.log.Warn("spamd: milter shutdown", "err", err)
	}
	for _, h := range httpd {
		if err := h.srv.Shutdown(sctx); err != nil {
			d.log.Warn("spamd: "+h.name+" shutdown", "err", err)
		}
	}
	// After the milter: the last verdicts are in.
	d.saveHistory()
	d.log.Info("spamd: stopped")
	return failure
}

// ignoreCanceled returns err, or nil if it says the context ended.
func ignoreCanceled(err error) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// consoleAddr says where the console is served, "" when it is off.
func consoleAddr(c config.Config) string {
	switch {
	case !c.Console.Enabled:
		return ""
	case c.Console.Listen != "":
		return "http://" + c.Console.Listen + "/console/"
	}
	return "http://" + c.API.TCP + "/console/"
}

// httpServer is one HTTP listener and what it serves.
type httpServer struct {
	name string
	ln   net.Listener
	h    http.Handler
	srv  *http.Server
}

// goSafe runs fn on a goroutine, sending its error, or its panic as an
// error, to errc when it is not nil.
func goSafe(log *slog.Logger, name string, errc chan<- error, fn func() error) {
	go func() {
		defer func() {
			if v := recover(); v != nil {
				log.Error("spamd: panic", "in", name, "panic", v, "stack", string(debug.Stack()))
				errc <- fmt.Errorf("%s: panic: %v", name, v)
			}
		}()
		if err := fn(); err != nil {
			errc <- err
		}
	}()
}

// healthy checks that the store answers.
func (d *daemon) healthy(ctx context.Context) error {
	if hr, ok := d.st.(store.HealthReporter); ok {
		h := hr.Health()
		if err := storeHealthy(h, time.Now()); err != nil {
			return err
		}
		// A failed store refuses reads while it reopens itself, which
		// storeHealthy gives it failedGrace for.
		if h.State == store.StateFailed {
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := d.st.Totals(ctx, "")
	return err
}

// failedGrace is how long a failed store has to reopen itself before the
// watchdog lets systemd restart spamd: longer than the store's own
// reopening, which backs off to a minute.
const failedGrace = 2 * time.Minute

// storeHealthy is the watchdog's view of the store's health at now: a
// store read-only for want of space is alive (it classifies), one failed
// for longer than failedGrace is not.
func storeHealthy(h store.Health, now time.Time) error {
	if h.State == store.StateFailed && now.Sub(h.Since) > failedGrace {
		return fmt.Errorf("the store failed %v ago and has not recovered: %s", now.Sub(h.Since).Round(time.Second), h.Reason)
	}
	return nil
}

// listen listens on addr, "tcp://HOST:PORT" or "unix:/PATH". A unix
// socket gets mode; a stale socket file left by a crash is replaced, but
// not one another process still listens on.
func listen(addr string, mode os.FileMode) (net.Listener, error) {
	network, address, err := config.SplitAddr(addr)
	if err != nil {
		return nil, err
	}
	if network == "tcp" {
		return net.Listen("tcp", address)
	}
	if err := os.MkdirAll(filepath.Dir(address), 0o755); err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	if fi, err := os.Lstat(address); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket", address)
		}
		if c, err := net.DialTimeout("unix", address, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("another process listens on %s", address)
		}
		if err := os.Remove(address); err != nil {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	ln, err := net.Listen("unix", address)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(address, mode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("socket mode: %w", err)
	}
	return ln, nil
}
