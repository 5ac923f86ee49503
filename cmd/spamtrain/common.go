package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/badgerstore"
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
	user    string
	sets    listFlag
	workers int
}

func (m *modelFlags) register(fs *flag.FlagSet, withUser bool) {
	fs.StringVar(&m.db, "db", os.Getenv("SPAMD_DB"), "store directory (default $SPAMD_DB)")
	if withUser {
		fs.StringVar(&m.user, "user", "", "user whose model to use (default: the global model)")
	}
	fs.Var(&m.sets, "set", "filter setting KEY=VALUE, repeatable (see 'spamtrain settings')")
	fs.IntVar(&m.workers, "workers", runtime.GOMAXPROCS(0), "messages parsed in parallel")
}

// config returns the filter configuration with the --set flags applied.
func (m *modelFlags) config() (filter.Config, error) {
	cfg := filter.DefaultConfig()
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

// open opens the store and a filter over it. The caller closes the store.
func (m *modelFlags) open(ctx context.Context, e *env) (*filter.Filter, *badgerstore.Store, error) {
	if m.db == "" {
		return nil, nil, fmt.Errorf("%w: no store: give --db DIR or set SPAMD_DB", errUsage)
	}
	if err := store.ValidUser(m.user); err != nil {
		return nil, nil, fmt.Errorf("%w: --user: %v", errUsage, err)
	}
	cfg, err := m.config()
	if err != nil {
		return nil, nil, err
	}
	st, err := badgerstore.Open(ctx, m.db, badgerstore.Options{Logger: e.log})
	if err != nil {
		return nil, nil, storeOpenError(m.db, err)
	}
	f, err := filter.New(st, cfg)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// newProgress returns a progress bar on w counting messages, shown only
// when w is a terminal; total < 0 means unknown.
func newProgress(w io.Writer, total int64, what string) *progressbar.ProgressBar {
	visible := false
	if f, ok := w.(*os.File); ok {
		visible = term.IsTerminal(int(f.Fd()))
	}
	return progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetVisibility(visible),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("msg"),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
}
