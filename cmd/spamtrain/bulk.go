package main

import (
	"context"
	"fmt"

	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/store"
)

// empty reports whether st holds no model at all: the first run of
// spamtrain train on a new store, which bulkTrain serves.
func empty(ctx context.Context, st store.Store) (bool, error) {
	users, err := st.Users(ctx)
	if err != nil {
		return false, fmt.Errorf("list the store's models: %w", err)
	}
	return len(users) == 0, nil
}

// bulkTrain trains sources for user into st, which holds no model, in one
// piece: the model is learned in memory, exactly as it would be learned in
// st (the same batches scored against the same model), then written whole:
// by Badger's Load, its rows as one sealed file beside Badger's tables, or
// else by the store's Restore. A whole model is written that way several
// times faster than applied batch by batch, which inserts each distinct
// feature of each batch into Badger's memtable. The price is memory, 32 bytes
// a distinct feature in a table kept between half and three quarters
// full, and that an interrupted run leaves nothing trained rather than
// what its finished batches trained.
func bulkTrain(ctx context.Context, e *env, f *filter.Filter, st *modelStore, user string, a *trainArgs) (*tally, error) {
	mem := store.NewMemory()
	defer mem.Close()
	mf, err := filter.New(mem, f.Config())
	if err != nil {
		return nil, err
	}
	t, err := trainSources(ctx, e, mf, user, a.sources, a.recursive, a.mf.workers, a.batch)
	if err != nil {
		return t, fmt.Errorf("%w; nothing was written to the store", err)
	}
	if st.badger != nil {
		if err := st.badger.Load(ctx, store.Draining(mem)); err != nil {
			return t, fmt.Errorf("%w; nothing was written to the store", err)
		}
		return t, nil
	}
	users, err := mem.Users(ctx)
	if err != nil {
		return t, err
	}
	for _, u := range users {
		if err := store.Copy(ctx, st, mem, u); err != nil {
			return t, fmt.Errorf("%w; nothing of it was written to the store", err)
		}
	}
	return t, nil
}
