package main

// Badger admits one process per store, so while spamd runs, train,
// forget, classify, stats and the maintenance commands (check, compact,
// dump, restore, delete-user, users, reset) go through its control API instead of
// opening the store. A Redis model (--redis, $SPAMD_REDIS, or a
// configuration whose [store] backend is redis) admits any number of
// processes, and commands use it directly. The daemon is found by, in
// order:
//
//  1. --api ADDR on the command line;
//  2. $SPAMD_API;
//  3. the [api] socket of the daemon's configuration ($SPAMD_CONFIG, else
//     /etc/spamd/config.toml, else spamd's default /run/spamd/api.sock),
//     used when it answers and no store was named with --db or $SPAMD_DB.
//
// ADDR is unix:/PATH (or /PATH) or tcp://HOST:PORT; over TCP the bearer
// token is taken from $SPAMD_API_TOKEN. A command given a store the
// daemon holds goes through the daemon if it serves that very store, and
// otherwise says which process to stop or which address to use.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/internal/parallel"
	"github.com/spamd/spamd/nb"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/badgerstore"
)

// remoteRun runs a command through a daemon's control API.
type remoteRun func(ctx context.Context, e *env, c *control.Client, args []string) error

// remoteRuns are the commands that work through the daemon.
var remoteRuns = map[string]remoteRun{
	"train":       remoteTrain,
	"forget":      remoteForget,
	"classify":    remoteClassify,
	"stats":       remoteStats,
	"check":       remoteCheck,
	"compact":     remoteCompact,
	"dump":        remoteDump,
	"restore":     remoteRestore,
	"delete-user": remoteDeleteUser,
	"users":       remoteUsers,
	"prune":       remotePrune,
	"reset":       remoteReset,
	"filter":      remoteFilter,
}

// locals are the commands' runs before they were made to go through the
// daemon where they can; gendoc reads their flags.
var locals = map[string]func(context.Context, *env, []string) error{}

func init() {
	for i := range commands {
		locals[commands[i].name] = commands[i].run
		if r, ok := remoteRuns[commands[i].name]; ok {
			commands[i].run = viaDaemon(r, commands[i].run)
		}
		if commands[i].name == "filter" {
			commands[i].run = passOnFailure(commands[i].run)
		}
	}
}

// errStoreLocked is wrapped by the error of opening a store another
// process holds.
var errStoreLocked = errors.New("the store is in use by another process")

// storeOpenError explains a failure to open the store at dir: when
// another process holds it, what to do about it.
func storeOpenError(dir string, err error) error {
	if !errors.Is(err, badgerstore.ErrLocked) {
		return err
	}
	return fmt.Errorf("%w: %s is held by another process, most likely a running spamd, or else a spamtrain "+
		"(commands that only read share a store with each other, not with one that writes). "+
		"While spamd runs, spamtrain works through its control API: leave out --db (and $SPAMD_DB) "+
		"to find it by its configuration, or name it with --api ADDR or SPAMD_API=ADDR, e.g. unix:/run/spamd/api.sock",
		errStoreLocked, dir)
}

// viaDaemon returns a command that runs remote when a daemon is to be
// used, else local; when the daemon named does not answer, it fails.
func viaDaemon(remote remoteRun, local func(context.Context, *env, []string) error) func(context.Context, *env, []string) error {
	return func(ctx context.Context, e *env, args []string) error {
		args, addr, err := cutAPIFlag(args)
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		if addr == "" {
			addr = os.Getenv("SPAMD_API")
		}
		if addr != "" {
			c, err := dialDaemon(ctx, addr)
			if err != nil {
				return err
			}
			return remote(ctx, e, c, args)
		}
		db := dbFlag(args)
		if redisChosen(args, db) {
			// Redis admits every node and spamtrain at once: no need
			// of the daemon.
			return local(ctx, e, args)
		}
		if db == "" {
			if c := findDaemon(ctx, e); c != nil {
				return remote(ctx, e, c, args)
			}
			return local(ctx, e, args)
		}
		err = local(ctx, e, args)
		if !errors.Is(err, errStoreLocked) {
			return err
		}
		// The store is held: if by the daemon, go through it.
		c := findDaemon(ctx, e)
		if c == nil {
			return err
		}
		st, serr := c.Stats(ctx)
		if abs, aerr := filepath.Abs(db); serr == nil && aerr == nil && st.Dir == abs {
			return remote(ctx, e, c, args)
		}
		return fmt.Errorf("%w (spamd at %s serves %s)", err, c.Addr(), st.Dir)
	}
}

// cutAPIFlag removes --api ADDR (or -api, --api=ADDR) from args, up to a
// "--", and returns ADDR.
func cutAPIFlag(args []string) (rest []string, addr string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(rest, args[i:]...), addr, nil
		case a == "--api" || a == "-api":
			if i+1 == len(args) {
				return nil, "", errors.New("--api needs an address")
			}
			addr = args[i+1]
			i++
		case strings.HasPrefix(a, "--api=") || strings.HasPrefix(a, "-api="):
			_, addr, _ = strings.Cut(a, "=")
		default:
			rest = append(rest, a)
		}
	}
	return rest, addr, nil
}

// dbFlag returns the store the command line or $SPAMD_DB names, "" if
// none.
func dbFlag(args []string) string {
	db := os.Getenv("SPAMD_DB")
	for i, a := range args {
		switch {
		case a == "--":
			return db
		case (a == "--db" || a == "-db") && i+1 < len(args):
			db = args[i+1]
		case strings.HasPrefix(a, "--db=") || strings.HasPrefix(a, "-db="):
			_, db, _ = strings.Cut(a, "=")
		}
	}
	return db
}

// redisChosen reports whether the command line, or else spamd's
// configuration, names a Redis model: --redis or $SPAMD_REDIS, or, with
// no --db given, a configuration whose [store] backend is redis.
func redisChosen(args []string, db string) bool {
	if peekFlag(args, "redis", os.Getenv("SPAMD_REDIS")) != "" {
		return true
	}
	if db != "" {
		return false
	}
	cfg, found, err := loadConfig(peekFlag(args, "config", ""))
	return err == nil && found && cfg.Store.Backend == "redis"
}

// peekFlag returns the value of --name in args, up to a "--", else def.
func peekFlag(args []string, name, def string) string {
	v := def
	for i, a := range args {
		switch {
		case a == "--":
			return v
		case (a == "--"+name || a == "-"+name) && i+1 < len(args):
			v = args[i+1]
		case strings.HasPrefix(a, "--"+name+"=") || strings.HasPrefix(a, "-"+name+"="):
			_, v, _ = strings.Cut(a, "=")
		}
	}
	return v
}

// dialDaemon returns a client of the daemon at addr, checking that it
// answers.
func dialDaemon(ctx context.Context, addr string) (*control.Client, error) {
	c, err := control.NewClient(addr, os.Getenv("SPAMD_API_TOKEN"))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Health(ctx); err != nil {
		return nil, fmt.Errorf("no spamd answers at %s: %w", addr, err)
	}
	return c, nil
}

// findDaemon returns a client of the daemon named by its configuration,
// nil if none answers there.
func findDaemon(ctx context.Context, e *env) *control.Client {
	cfg := config.Default(os.Getenv)
	path := os.Getenv("SPAMD_CONFIG")
	if path == "" {
		path = config.DefaultPath
	}
	if c, err := config.Load(path, cfg); err == nil {
		cfg = c
	} else if !errors.Is(err, os.ErrNotExist) {
		e.log.Warn("reading spamd's configuration to find it; trying its default socket", "err", err)
	}
	c, err := dialDaemon(ctx, "unix:"+cfg.API.Socket)
	if err != nil {
		e.log.Debug("no spamd found", "err", err)
		return nil
	}
	return c
}

// checkRemote checks the model flags for a command run through the
// daemon. They are all accepted, so that a command line works alike with
// and without it, but --db is not used and --set cannot apply.
func checkRemote(m *modelFlags) error {
	if err := store.ValidUser(m.user); err != nil {
		return fmt.Errorf("%w: --user: %v", errUsage, err)
	}
	if len(m.sets) > 0 {
		return fmt.Errorf("%w: --set: spamd classifies and trains with its own settings; change them in the [filter] table of its configuration", errUsage)
	}
	return nil
}

// maxBatchBytes bounds the messages of one training request.
const maxBatchBytes = 16 << 20

func remoteTrain(ctx context.Context, e *env, c *control.Client, args []string) error {
	return remoteTrainOrForget(ctx, e, c, args, false)
}

func remoteForget(ctx context.Context, e *env, c *control.Client, args []string) error {
	return remoteTrainOrForget(ctx, e, c, args, true)
}

func remoteTrainOrForget(ctx context.Context, e *env, c *control.Client, args []string, forget bool) error {
	a, err := parseTrainArgs(e, args, forget)
	if err != nil {
		return err
	}
	if err := checkRemote(&a.mf); err != nil {
		return err
	}
	if !forget {
		st, err := c.Stats(ctx)
		if err != nil {
			return err
		}
		if err := checkClasses(a.sources, st.Classes, false); err != nil {
			return err
		}
	}
	t, err := trainRemote(ctx, e, c, a.mf.user, a.sources, a.recursive, a.batch)
	if forget {
		printForget(e, t)
	} else {
		fmt.Fprintf(e.stdout, "train: %s\n", t)
	}
	if err != nil {
		return err
	}
	return t.err()
}

// trainRemote sends every message of sources to the daemon to be trained
// for user (forgotten for sources with class ""), in batches of at most
// batchSize messages and maxBatchBytes bytes.
func trainRemote(ctx context.Context, e *env, c *control.Client, user string, sources []source, recursive bool, batchSize int) (*tally, error) {
	ctx, r, in := startTraining(ctx, e, sources, recursive)
	var items []control.Item
	var paths []string
	bytes := 0
	flush := func() error {
		if len(items) == 0 {
			return nil
		}
		res, err := c.Train(ctx, user, items)
		if err != nil {
			return err
		}
		for i, res := range res {
			if res.Error != "" {
				r.report(paths[i], errors.New(res.Error))
				continue
			}
			r.t.count(items[i].Class, res.Changed, res.Prev)
		}
		items, paths, bytes = items[:0], paths[:0], 0
		return nil
	}
	var err error
	for it := range in {
		r.tick()
		if len(items) > 0 && bytes+len(it.msg.Raw) > maxBatchBytes {
			if err = flush(); err != nil {
				break
			}
		}
		items = append(items, control.Item{Class: it.src.class, Message: it.msg.Raw})
		paths = append(paths, it.msg.Path)
		bytes += len(it.msg.Raw)
		if len(items) >= batchSize {
			if err = flush(); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = flush()
	}
	return r.t, r.finish(err)
}

func remoteClassify(ctx context.Context, e *env, c *control.Client, args []string) error {
	a, err := parseClassifyArgs(e, args)
	if err != nil {
		return err
	}
	if err := checkRemote(&a.mf); err != nil {
		return err
	}
	pr := newPrinter(e, a)
	in, walkErr := walkSources(ctx, e, a.sources, a.recursive, pr.unreadable)
	type answer struct {
		path string
		v    control.Verdict
		err  error
	}
	// Requests run side by side; answers are printed in order.
	err = parallel.MapWindow(ctx, a.mf.workers, reorderWindow, in, func(it item) answer {
		v, err := c.Classify(ctx, a.mf.user, it.msg.Raw, a.explain)
		return answer{it.msg.Path, v, err}
	}, func(ans answer) error {
		var ae *control.Error
		switch {
		case errors.As(ans.err, &ae) && ae.Status < 500:
			return pr.fail(ans.path, ae.Message)
		case ans.err != nil:
			return fmt.Errorf("%s: %w", ans.path, ans.err)
		}
		v := ans.v
		cl := classification{Path: ans.path, Verdict: v.Verdict, Class: v.Class, Probability: v.Probability, Score: v.Score,
			Posterior: v.Posterior, Used: v.Used, TrainedAs: v.TrainedAs, Problems: v.Problems}
		if a.explain > 0 {
			for class, ws := range v.Toward {
				if class == v.Positive {
					cl.TowardSpam = remoteWeights(ws)
				} else {
					cl.TowardHam, cl.TowardOther = remoteWeights(ws), otherThanHam(class)
				}
			}
			var ms []nb.MeasureContribution
			for _, m := range v.Measures {
				ms = append(ms, nb.MeasureContribution{Name: m.Name, Text: m.Value, LogRatio: m.LogRatio, Weight: m.Weight})
			}
			cl.Measures = measures(ms)
		}
		return pr.print(cl)
	})
	return pr.end(err, walkErr())
}

func remoteWeights(ws []control.Weight) []weight {
	out := make([]weight, len(ws))
	for i, w := range ws {
		out[i] = weight{Token: w.Token, Count: w.Count, Weight: w.Weight}
	}
	return out
}

func remoteStats(ctx context.Context, e *env, c *control.Client, args []string) error {
	fs := e.flagSet("stats")
	var rf modelFlags
	rf.register(fs, false)
	asJSON := fs.Bool("json", false, "print one JSON document")
	if err := fs.Parse(args); err != nil {
		return usageError(err)
	}
	if err := checkRemote(&rf); err != nil {
		return err
	}
	st, err := c.Stats(ctx)
	if err != nil {
		return err
	}
	out := storeStats{LSMBytes: st.LSMBytes, LogBytes: st.LogBytes, Classified: st.Classified}
	for _, u := range st.Users {
		out.Users = append(out.Users, userStats{User: u.User, Messages: u.Messages, Tokens: u.Tokens, Vocabulary: u.Vocabulary, Unread: u.Unread})
	}
	return printStats(e, out, *asJSON, ", served by spamd at "+c.Addr())
}
