package main

import (
	"context"
	"errors"
	"time"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/store"
)

// pruneLoop prunes every model as c says, every c.Every, until ctx is
// done; it returns at once when c prunes nothing.
func (d *daemon) pruneLoop(ctx context.Context, c config.Prune) {
	if c.Days == 0 && c.SeenDays == 0 {
		return
	}
	t := time.NewTicker(c.Every.Duration)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			d.pruneAll(ctx, store.AgeRule(store.DayOf(now), uint64(c.Count), c.Days, c.SeenDays, 0))
		}
	}
}

// pruneAll prunes every model by rule, logging what each lost. A store
// that refuses writes for now (a full disk) is left for the next round.
func (d *daemon) pruneAll(ctx context.Context, rule store.PruneRule) {
	users, err := d.st.Users(ctx)
	if err != nil {
		d.log.Warn("spamd: prune: list the models", "err", err)
		return
	}
	start := time.Now()
	var tokens, seen uint64
	for _, u := range users {
		res, err := d.st.Prune(ctx, u, rule)
		if errors.Is(err, context.Canceled) {
			return
		}
		if err != nil {
			d.log.Warn("spamd: prune: a model left as it was until the next round", "user", u, "err", err)
			continue
		}
		tokens, seen = tokens+res.Tokens, seen+res.Seen
		if res.Tokens > 0 || res.Seen > 0 {
			d.log.Info("spamd: model pruned", "user", u, "tokens", res.Tokens, "seen", res.Seen, "vocabulary", res.Vocabulary)
		}
	}
	d.log.Info("spamd: prune done", "rule", rule.String(), "models", len(users), "tokens", tokens, "seen", seen, "took", time.Since(start).Round(time.Millisecond))
}
