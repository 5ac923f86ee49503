package badgerstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/spamd/spamd/store"
)

// maxProblems bounds how many problems Check spells out; a store damaged
// in a million keys needs no million-line error.
const maxProblems = 20

// Check recounts user's seen records and token rows in one snapshot and
// compares the result with the stored totals: per class, messages with the
// seen records and the messages forgotten, and tokens with the sum of the
// token counts, and the vocabulary with the number of tokens that have a
// count; and the samples with those of the values the seen records hold.
// It finds messages trained as two classes under two digests by their
// marks (store.MarkSet), and days later than the last day trained on.
// Weights have no totals to agree with; Check only makes sure they
// decode, as the steps of seen records must. It reads all of the user's
// keys, without the cache, while Apply, Prune and readers go on.
func (s *Store) Check(ctx context.Context, user string) (err error) {
	defer s.recoverFault(&err, "check")
	if err := store.ValidUser(user); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	if err := s.enter(); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	defer s.life.RUnlock()
	if err := s.usable(); err != nil {
		return fmt.Errorf("check %q: %w", user, err)
	}
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	// Loaded after the snapshot was taken, so it names every class the
	// snapshot refers to.
	classes := s.classes.Load().names
	var r report
	stored, err := readTotals(txn, user)
	if err != nil {
		r.addf("totals: %v", err)
		stored = &totals{}
	}
	k := len(classes)
	messages := make([]uint64, k)
	tokens := make([]uint64, k)
	var vocabulary uint64

	var steps []int64
	var recount store.SampleSet
	var marks store.MarkSet
	err = scan(ctx, txn, userPrefix(kindSeen, user), func(key, v []byte) bool {
		if len(key) != len(user)+2+len(store.Digest{}) {
			r.addf("malformed seen key %x", key)
			return true
		}
		rec, err := decodeSeen(v, steps[:0])
		switch {
		case err != nil:
			r.addf("seen record %x: %v", key, err)
		case rec.class >= k:
			r.addf("seen record %x: unknown class %d", key, rec.class)
		case len(rec.steps) > 2*k:
			r.addf("seen record %x: steps of unknown classes", key)
		default:
			messages[rec.class]++
			recount.Add(rec.class, rec.values, 1)
			var d store.Digest
			copy(d[:], key[len(key)-len(d):])
			marks.Add(rec.mark, classes[rec.class], d)
			if rec.day > stored.lastDay {
				r.addf("seen record %x: trained on %s, after the last day trained on, %s", key, rec.day, stored.lastDay)
			}
		}
		steps = rec.steps
		return true
	})
	if err != nil {
		return fmt.Errorf("check %q: %w", user, err)
	}
	if sr := s.sealed.Load(); sr.section(user) != nil {
		if err := sr.file.Verify(); err != nil {
			r.addf("sealed rows: %v", err)
		}
	}
	var row []uint64
	err = s.scanTokens(ctx, txn, user, func(key, v []byte) bool {
		if len(key) != len(user)+2+8 {
			r.addf("malformed token key %x", key)
			return true
		}
		var err error
		var day store.Day
		if row, day, err = decodeRow(row[:0], v); err != nil {
			r.addf("token key %x: %v", key, err)
			return true
		}
		if day > stored.lastDay {
			r.addf("token key %x: last trained on %s, after the last day trained on, %s", key, day, stored.lastDay)
		}
		if len(row) > 2*k {
			r.addf("token key %x: counts of unknown classes", key)
			return true
		}
		if allZero(row) {
			r.addf("token key %x: all zero, not deleted", key)
			return true
		}
		for c := 0; c < len(row); c += 2 {
			tokens[c/2] += row[c]
		}
		if countsAny(row) {
			vocabulary++
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("check %q: %w", user, err)
	}
	// A store of this schema has none: the conversions moved them all.
	for kind, what := range map[byte]string{kindTokenV1: "token key %x of schema 1", kindSeenV2: "seen key %x of schema 2",
		kindTokenV3: "token key %x of schema 3", kindSeenV3: "seen key %x of schema 3"} {
		err = scan(ctx, txn, userPrefix(kind, user), func(key, _ []byte) bool {
			r.addf(what, key)
			return true
		})
		if err != nil {
			return fmt.Errorf("check %q: %w", user, err)
		}
	}
	var samples store.Samples
	err = scan(ctx, txn, userPrefix(kindSample, user), func(key, v []byte) bool {
		k, ok := parseSampleKey(key, user)
		if !ok {
			r.addf("malformed sample key %x", key)
			return true
		}
		smp, err := decodeSample(v)
		switch {
		case err != nil:
			r.addf("sample key %x: %v", key, err)
		case k.class >= len(classes):
			r.addf("sample key %x: unknown class %d", key, k.class)
		case smp.N == 0:
			r.addf("sample key %x: empty, not deleted", key)
		default:
			samples = withSample(samples, k, smp)
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("check %q: %w", user, err)
	}
	for _, d := range samples.Differences(recount.Samples(), classes) {
		r.addf("%s", d)
	}
	for _, p := range marks.Problems() {
		r.addf("%s", p)
	}

	if n := max(len(stored.messages), len(stored.tokens), len(stored.forgotten)); n > k {
		r.addf("totals count %d classes, the store has %d", n, k)
	}
	for c, name := range classes {
		if got, seen, forgot := at(stored.messages, c), messages[c], at(stored.forgotten, c); got != seen+forgot {
			r.addf("class %q: totals say %d messages, %d seen records and %d forgotten", name, got, seen, forgot)
		}
		if got, want := at(stored.tokens, c), tokens[c]; got != want {
			r.addf("class %q: totals say %d tokens, token counts sum to %d", name, got, want)
		}
	}
	if stored.vocabulary != vocabulary {
		r.addf("totals say vocabulary %d, %d tokens with a count", stored.vocabulary, vocabulary)
	}
	if r.n > 0 {
		return fmt.Errorf("check %q: %w: %s", user, store.ErrInconsistent, r)
	}
	return nil
}

// scan calls f with the key and value of every key with prefix, in key
// order, until f returns false.
func scan(ctx context.Context, txn *badger.Txn, prefix []byte, f func(key, v []byte) bool) error {
	// Values are kept in the tree with their keys (the value threshold is
	// above a row's or a seen record's size), where an item's value is at
	// hand.
	// Prefetching them, which Badger does with a goroutine for each item,
	// doubled the time of a warm.
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	n := 0
	for it.Rewind(); it.Valid(); it.Next() {
		if n++; n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		item := it.Item()
		more := true
		if err := item.Value(func(v []byte) error { more = f(item.Key(), v); return nil }); err != nil {
			return err
		}
		if !more {
			return nil
		}
	}
	return ctx.Err()
}

// report collects Check's findings.
type report struct {
	lines []string
	n     int
}

func (r *report) addf(format string, args ...any) {
	r.n++
	if len(r.lines) < maxProblems {
		r.lines = append(r.lines, fmt.Sprintf(format, args...))
	}
}

func (r report) String() string {
	s := strings.Join(r.lines, "; ")
	if r.n > len(r.lines) {
		s += fmt.Sprintf("; and %d more", r.n-len(r.lines))
	}
	return s
}
