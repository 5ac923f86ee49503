package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/badgerstore"
)

// bulkGCPercent is the collector's GOGC while bulkTrain learns.
const bulkGCPercent = 50

// smallMemTableBytes is the memtable size a Badger store is opened with
// by a command that writes little or nothing through it: a bulk load,
// which writes only the seen records and totals (a few megabytes for
// tens of thousands of messages), and the commands that only read.
// Badger allocates its memtable at open, 21 MB at the default 16 MiB, in
// the Go heap: it is never touched, but counts towards the collector's
// goal all the same, which lets that much more garbage pile up, each
// page of it new to the process. Classifying SpamAssassin's last 1,209
// messages in one process took 30% fewer page faults with the small
// one, and peaked at 20 MB less.
const smallMemTableBytes = 1 << 20

// reopenForLoad opens a Badger store again with the memtable of a bulk
// load, unless it was opened with it (modelFlags.loadsIfNew). Between the
// close and the open another process could take the store; it then fails
// with badgerstore.ErrLocked, or, if a model was trained into it
// meanwhile, Load with ErrNotEmpty, before anything is written.
func (m *modelStore) reopenForLoad(ctx context.Context) error {
	if m.badger == nil || m.opts.MemTableBytes == smallMemTableBytes {
		return nil
	}
	if err := m.badger.Close(); err != nil {
		return fmt.Errorf("close the store to open it for a bulk load: %w", err)
	}
	o := m.opts
	o.MemTableBytes = smallMemTableBytes
	st, err := badgerstore.Open(ctx, m.dir, o)
	if err != nil {
		return storeOpenError(m.dir, err)
	}
	m.Store, m.badger, m.opts = st, st, o
	return nil
}

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
// feature of each batch into Badger's memtable. The price is memory, 16
// bytes a distinct feature in a table kept between 64% and 80% full, and
// that an interrupted run leaves nothing trained rather than what its
// finished batches trained.
func bulkTrain(ctx context.Context, e *env, f *filter.Filter, st *modelStore, user string, a *trainArgs) (*tally, error) {
	if err := st.reopenForLoad(ctx); err != nil {
		return nil, err
	}
	// The model's rows, most of what the training holds, are outside the
	// Go heap (the memory store's row table), and the heap is mostly the
	// garbage of tokenizing messages, which the collector lets grow to
	// GOGC percent of what is live before it runs. A first training of
	// trec07-late's 30,167 messages peaked at 158 MB at the default of
	// 100 and at 137 MB at 50, the collector's processor time going from
	// 1.6 to 3.5 s; allocating less (the filter's spare learners,
	// Tokenizer.Recycle, mailbox's pooled readers) then made the whole
	// training faster than it had been at 100. A GOGC the user set is
	// left alone.
	if os.Getenv("GOGC") == "" {
		defer setGCPercent(setGCPercent(bulkGCPercent))
	}
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
