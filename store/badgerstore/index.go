package badgerstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/badgerstore/sealed"
)

// A sealed model that Badger holds no rows over is read, once its
// lookups have come to cost what doing so does (Options.WarmByNeed), from
// an index of its rows in memory (store.RowIndex) instead of through the
// cache: its rows are decoded from the file once, in hash order, into an
// array that they fill from start to end, and a lookup is then one probe
// of it, taken without a lock, where a lookup through the cache probed
// the cache under its lock and, on a miss, searched the file's block
// index, decoded half a block, and put the row in the cache under its
// write lock. The index holds the rows in some 20 bytes each, where the
// cache took over 40.
//
// The index is built in the background, while lookups go on through the
// cache. It is of one section of one sealed file: when the file is
// replaced, or Badger comes to hold rows of the user, it is not used
// again, and its memory goes once no lookup reads it.

// sealedIndex is a user's index and the section it was read from.
type sealedIndex struct {
	sec  *sealed.Section
	rows *store.RowIndex
}

// index returns user's index of sec, nil if it has none.
func (s *Store) index(user string, sec *sealed.Section) *store.RowIndex {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	x, ok := s.indexes[user]
	if !ok {
		return nil
	}
	if x.sec != sec {
		delete(s.indexes, user)
		return nil
	}
	return x.rows
}

// buildIndex reads user's section sec into an index and keeps it, in
// place of any other user's if both would not fit in the cache's budget.
func (s *Store) buildIndex(ctx context.Context, user string, sec *sealed.Section) (*store.RowIndex, error) {
	rows := store.NewRowIndex(int(sec.Rows()))
	var (
		buf  []uint64
		ferr error
		n    int
	)
	err := sec.Scan(func(h uint64, row []byte) bool {
		if n++; n%(1<<16) == 0 && ctx.Err() != nil {
			ferr = ctx.Err()
			return false
		}
		vals, day, err := decodeRow(buf[:0], row)
		if err != nil {
			ferr = fmt.Errorf("token %x: %w: %w", h, store.ErrInconsistent, err)
			return false
		}
		rows.Add(bow.Hash(h), vals, day)
		buf = vals
		return true
	})
	if err == nil {
		err = ferr
	}
	if err != nil {
		return nil, fmt.Errorf("index %q: %w", user, err)
	}
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	var total int64
	for _, x := range s.indexes {
		total += x.rows.Bytes()
	}
	if s.indexes == nil || total+rows.Bytes() > s.opts.CacheBytes {
		s.indexes = make(map[string]sealedIndex)
	}
	s.indexes[user] = sealedIndex{sec: sec, rows: rows}
	return rows, nil
}

// lookupIndex sets out[i] to the row of hashes[i] in rows, at least width
// values long; all share one array.
func lookupIndex(rows *store.RowIndex, hashes []bow.Hash, out []store.Counts, width int) {
	rows.Touch(hashes)
	arena := make([]uint64, len(hashes)*width)
	for i, h := range hashes {
		row := arena[i*width : (i+1)*width : (i+1)*width]
		if rows.Get(h, row) {
			out[i] = row
		}
	}
}

// indexPoint returns how many tokens of a model of vocabulary rows in the
// sealed file alone its lookups read through the cache before an index
// pays: where what those lookups cost beyond the index's comes to what
// building it does. On SpamAssassin's first 4,837 messages (545,204
// rows), building took 86 nanoseconds a row in BenchmarkLookupSealed and
// about 150 in a process of its own, whose pages are new; a lookup
// through the cache cost classifying the corpus's last 1,209 messages
// 0.38 microseconds a token on average, hits and misses, and one in the
// index 0.05 to 0.1 (BenchmarkLookupSealed: 45 nanoseconds). A third.
func indexPoint(vocabulary uint64) uint64 { return (vocabulary + 2) / 3 }

// indexDue counts n more tokens of user's looked up through the cache
// and reports whether an index now pays (indexPoint): its model's
// vocabulary, which the cache holds from the Totals that scoring reads
// first, fits in the cache's budget, and the tokens looked up since the
// last index come to indexPoint of it. The count starts over when it says
// so.
func (s *Store) indexDue(user string, n int) bool {
	t, ok, _ := s.cache.getTotals(user)
	if !ok || t.vocabulary == 0 || t.vocabulary > uint64(s.cache.room()) {
		return false
	}
	s.missMu.Lock()
	defer s.missMu.Unlock()
	if s.looked == nil || len(s.looked) >= maxMissed {
		s.looked = make(map[string]uint64)
	}
	s.looked[user] += uint64(n)
	if s.looked[user] < indexPoint(t.vocabulary) {
		return false
	}
	delete(s.looked, user)
	return true
}

// startIndex builds user's index of sec in the background, unless one is
// being built. The build holds the store open, as a call does, and stops
// when Close begins.
func (s *Store) startIndex(user string, sec *sealed.Section) {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if s.building {
		return
	}
	s.building = true
	s.idxWG.Add(1)
	go func() {
		defer s.idxWG.Done()
		defer func() {
			s.idxMu.Lock()
			s.building = false
			s.idxMu.Unlock()
		}()
		if err := s.enter(); err != nil {
			return
		}
		defer s.life.RUnlock()
		// The section is read only while it is the user's: a file
		// replaced since is unmapped once the store is held.
		if s.section(user) != sec {
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-s.stopGC:
				cancel()
			case <-ctx.Done():
			}
		}()
		if _, err := s.buildIndex(ctx, user, sec); err != nil && ctx.Err() == nil {
			s.log.Warn("badgerstore: indexing a sealed model", "user", user, "err", err)
		}
	}()
}

// indexState is what Store keeps of the indexes.
type indexState struct {
	idxMu    sync.Mutex
	indexes  map[string]sealedIndex
	building bool
	// idxWG counts the builds running, for tests.
	idxWG sync.WaitGroup
}
