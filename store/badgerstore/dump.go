package badgerstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/dgraph-io/badger/v4"
	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
)

// Dump reads user's model from one read-only transaction, so that it is a
// consistent snapshot while Apply and Prune go on: the header, with the
// forgotten messages of the totals, then the token rows in key order,
// which is ascending hash order, then the seen records in digest order.
func (s *Store) Dump(ctx context.Context, user string, fn func(store.Record) error) (err error) {
	defer s.recoverFault(&err, "dump")
	if err := store.ValidUser(user); err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	if err := s.enter(); err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	defer s.life.RUnlock()
	if err := s.usable(); err != nil {
		return fmt.Errorf("dump %q: %w", user, err)
	}
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	// Loaded after the snapshot was taken, so that it names every class
	// the snapshot refers to.
	classes := s.classes.Load().names
	head := store.Record{Classes: slices.Clone(classes)}
	busy := s.isBusy(user)
	if !busy {
		tot, err := readTotals(txn, user)
		if err != nil {
			s.readFailed(ctx, err)
			return fmt.Errorf("dump %q: totals: %w", user, err)
		}
		if len(tot.forgotten) > len(classes) {
			return fmt.Errorf("dump %q: %w: forgotten messages of unknown classes", user, store.ErrInconsistent)
		}
		if slices.ContainsFunc(tot.forgotten, func(n uint64) bool { return n != 0 }) {
			head.Forgotten = make([]uint64, len(classes))
			copy(head.Forgotten, tot.forgotten)
		}
	}
	if err := fn(head); err != nil {
		return err
	}
	if busy {
		return nil
	}
	var ferr error
	err = s.scanTokens(ctx, txn, user, func(key, v []byte) bool {
		row, day, err := decodeRow(nil, v)
		if err == nil && len(row) > 2*len(classes) {
			err = fmt.Errorf("%w: values of unknown classes", store.ErrInconsistent)
		}
		if err != nil {
			ferr = fmt.Errorf("dump %q: token key %x: %w", user, key, err)
			return false
		}
		ferr = fn(store.Record{Hash: bow.Hash(binary.BigEndian.Uint64(key[len(key)-8:])), Counts: row, Day: day})
		return ferr == nil
	})
	if err == nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	err = scan(ctx, txn, userPrefix(kindSeen, user), func(key, v []byte) bool {
		rec, err := decodeSeen(v, nil)
		if err == nil && (rec.class >= len(classes) || len(rec.steps) > 2*len(classes)) {
			err = fmt.Errorf("%w: record of unknown classes", store.ErrInconsistent)
		}
		if err != nil {
			ferr = fmt.Errorf("dump %q: seen key %x: %w", user, key, err)
			return false
		}
		r := store.Record{Class: classes[rec.class], Values: rec.values, Day: rec.day, Mark: rec.mark}
		copy(r.Digest[:], key[len(key)-len(r.Digest):])
		for c := 0; 2*c+1 < len(rec.steps); c++ {
			if rec.steps[2*c] != 0 || rec.steps[2*c+1] != 0 {
				r.Steps = append(r.Steps, store.Step{Class: classes[c], Head: rec.steps[2*c], Body: rec.steps[2*c+1]})
			}
		}
		ferr = fn(r)
		return ferr == nil
	})
	if err == nil {
		err = ferr
	}
	return err
}

// Restore writes user's model under a busy mark: the rows and seen
// records in write batches, then the totals and the mark's removal in
// one transaction, so that the model appears whole or not at all. While
// it runs, readers see no model of user; if it fails, what it wrote is
// dropped, and if the process dies, the next Open drops it; if the store
// is not ok by then, what it wrote stays hidden under the mark until the
// store reopens or the next Open, which drop it.
func (s *Store) Restore(ctx context.Context, user string, next func() (store.Record, error)) (err error) {
	defer s.recoverFault(&err, "restore")
	if err := store.ValidUser(user); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := s.enter(); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer s.life.RUnlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writable(true); err != nil {
		return fmt.Errorf("restore %q: %w", user, err)
	}
	if exists, err := s.hasModel(user); err != nil || exists {
		if err == nil {
			err = store.ErrExists
		}
		return fmt.Errorf("restore %q: %w", user, err)
	}
	// While the mark is in Badger, what is under it is half written:
	// readers keep not seeing it until it is dropped.
	s.setBusy(user, true)
	marked := false
	defer func() {
		if !marked {
			s.setBusy(user, false)
		}
	}()
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(userPrefix(kindBusy, user), nil) }); err != nil {
		return fmt.Errorf("restore %q: mark: %w", user, s.writeError(err))
	}
	marked = true
	defer func() {
		s.cache.forget(user)
		s.present.drop(user)
		if err == nil {
			marked = false
			return
		}
		// Dropping writes too: not into a store that is not ok.
		if serr := s.stateErr(true); serr != nil {
			err = errors.Join(err, fmt.Errorf("what was restored stays hidden until the store recovers or opens again, which drops it: %w", serr))
			return
		}
		if derr := s.dropUser(user); derr != nil {
			err = errors.Join(err, fmt.Errorf("drop what was restored (it stays hidden; the next open drops it): %w", s.writeError(derr)))
			return
		}
		// A read between the forget above and the drop may have cached
		// rows the drop deleted.
		s.cache.forget(user)
		marked = false
	}()
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	set := func(key, val []byte) error {
		if err := wb.Set(slices.Clone(key), slices.Clone(val)); err != nil {
			return s.writeError(err)
		}
		return nil
	}
	enc := &encoder{user: user, set: set, names: s.registerNames}
	for n := 0; ; n++ {
		if n%4096 == 0 {
			if err = ctx.Err(); err != nil {
				break
			}
			// The write batch commits as it fills: look at the disk
			// as Apply does before each transaction.
			if err = s.writable(false); err != nil {
				break
			}
		}
		var r store.Record
		if r, err = next(); err != nil {
			break
		}
		if err = enc.add(r); err != nil {
			break
		}
	}
	if errors.Is(err, io.EOF) {
		if err = enc.writeSamples(); err == nil {
			err = io.EOF
		}
	}
	if errors.Is(err, io.EOF) {
		if err = wb.Flush(); err != nil {
			err = s.writeError(err)
		}
	}
	if err != nil {
		return fmt.Errorf("restore %q: %w", user, err)
	}
	err = s.db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(totalsKey(user), appendTotals(nil, &enc.tot)); err != nil {
			return err
		}
		return txn.Delete(userPrefix(kindBusy, user))
	})
	if err != nil {
		return fmt.Errorf("restore %q: totals: %w", user, s.writeError(err))
	}
	return nil
}

// encoder turns the records of user's model, as Dump gives them, into the
// store's keys and values, which it hands to set in key order within each
// kind (token rows, seen records), and adds up the totals and the measures'
// samples: writeSamples writes the samples, the caller the totals. The
// totals' last day is the latest day of a row or a seen record, and their
// messages the seen records and the header's forgotten messages.
type encoder struct {
	user string
	// set takes a key and its value, in buffers the encoder uses again:
	// it copies what it keeps.
	set func(key, val []byte) error
	// names gives the store's class list with names in it, registering
	// them if need be.
	names func([]string) (*classList, error)
	// sorted says that the rows and the seen records each come in key
	// order, as Dump gives them: a duplicate is then one that does not
	// ascend, where records in any order need a set of what came.
	sorted bool

	n       int
	index   []int // the store's index of each class of the header
	tot     totals
	samples store.SampleSet
	tokens  map[bow.Hash]struct{}
	seen    map[store.Digest]struct{}
	// The keys of the last row and of the last seen record, when sorted.
	lastRow, lastSeen []byte
	key               []byte
	row               []uint64
	buf               []byte
}

// add encodes record r.
func (e *encoder) add(r store.Record) error {
	n := e.n
	e.n++
	switch {
	case n == 0:
		if r.Classes == nil {
			return fmt.Errorf("%w: no header", store.ErrInconsistent)
		}
		cl, err := e.names(r.Classes)
		if err != nil {
			return err
		}
		for _, c := range r.Classes {
			e.index = append(e.index, cl.index[c])
		}
		if len(r.Forgotten) > len(r.Classes) {
			return fmt.Errorf("%w: forgotten messages of classes the header lacks", store.ErrInconsistent)
		}
		width := len(cl.names)
		e.tot.messages, e.tot.tokens, e.tot.forgotten = make([]uint64, width), make([]uint64, width), make([]uint64, width)
		// The messages are the seen records to come and those
		// forgotten.
		for c, n := range r.Forgotten {
			e.tot.forgotten[e.index[c]] = n
			e.tot.messages[e.index[c]] = n
		}
		if !e.sorted {
			e.tokens, e.seen = make(map[bow.Hash]struct{}), make(map[store.Digest]struct{})
		}
	case r.Counts != nil:
		if len(r.Counts) > 2*len(e.index) {
			return fmt.Errorf("%w: token %x has values of classes the header lacks", store.ErrInconsistent, r.Hash)
		}
		e.key = appendTokenKey(e.key[:0], e.user, r.Hash)
		if err := e.once(r.Hash); err != nil {
			return err
		}
		row := e.row[:0]
		for range 2 * len(e.tot.tokens) {
			row = append(row, 0)
		}
		e.row = row
		for c, i := range e.index {
			row[2*i], row[2*i+1] = r.Counts.Count(c), uint64(r.Counts.Weight(c))
			e.tot.tokens[i] += r.Counts.Count(c)
		}
		if allZero(row) {
			return nil
		}
		if countsAny(row) {
			e.tot.vocabulary++
		}
		e.tot.lastDay = max(e.tot.lastDay, r.Day)
		e.buf = appendRow(e.buf[:0], r.Day, row)
		return e.set(e.key, e.buf)
	case r.Class != "":
		e.key = appendSeenKey(e.key[:0], e.user, r.Digest)
		if err := e.onceSeen(r.Digest); err != nil {
			return err
		}
		if err := store.ValidValues(r.Values); err != nil {
			return fmt.Errorf("message %x: %w", r.Digest, err)
		}
		cl, err := e.names(append([]string{r.Class}, stepClasses(r.Steps)...))
		if err != nil {
			return err
		}
		rec := seenRec{class: cl.index[r.Class], values: r.Values, day: r.Day, mark: r.Mark}
		for _, st := range r.Steps {
			c := cl.index[st.Class]
			if need := 2 * (c + 1); len(rec.steps) < need {
				rec.steps = append(rec.steps, make([]int64, need-len(rec.steps))...)
			}
			rec.steps[2*c], rec.steps[2*c+1] = st.Head, st.Body
		}
		for len(e.tot.messages) <= rec.class {
			e.tot.messages, e.tot.tokens = append(e.tot.messages, 0), append(e.tot.tokens, 0)
		}
		e.tot.messages[rec.class]++
		e.tot.lastDay = max(e.tot.lastDay, rec.day)
		e.samples.Add(rec.class, rec.values, 1)
		e.buf = appendSeen(e.buf[:0], rec)
		return e.set(e.key, e.buf)
	default:
		return fmt.Errorf("%w: record %d is neither a token nor a seen record", store.ErrInconsistent, n)
	}
	return nil
}

// writeSamples hands set the keys and values of the samples the seen
// records added up to, in key order.
func (e *encoder) writeSamples() error {
	type kv struct{ key, val []byte }
	var out []kv
	for m, byClass := range e.samples.Samples() {
		for c, smp := range byClass {
			if smp.N == 0 {
				continue
			}
			k := sampleKey{measure: uint8(m), class: c}
			out = append(out, kv{appendSampleKey(nil, e.user, k), appendSample(nil, smp)})
		}
	}
	// A class index is a uvarint, whose bytes do not sort as numbers do.
	slices.SortFunc(out, func(a, b kv) int { return bytes.Compare(a.key, b.key) })
	for _, x := range out {
		if err := e.set(x.key, x.val); err != nil {
			return err
		}
	}
	return nil
}

// once fails for a token row that came before.
func (e *encoder) once(h bow.Hash) error {
	if e.sorted {
		if !e.ascends(&e.lastRow) {
			return fmt.Errorf("%w: token %x out of order or twice", store.ErrInconsistent, h)
		}
		return nil
	}
	if _, dup := e.tokens[h]; dup {
		return fmt.Errorf("%w: token %x twice", store.ErrInconsistent, h)
	}
	e.tokens[h] = struct{}{}
	return nil
}

// onceSeen fails for a seen record that came before.
func (e *encoder) onceSeen(d store.Digest) error {
	if e.sorted {
		if !e.ascends(&e.lastSeen) {
			return fmt.Errorf("%w: message %x out of order or twice", store.ErrInconsistent, d)
		}
		return nil
	}
	if _, dup := e.seen[d]; dup {
		return fmt.Errorf("%w: message %x twice", store.ErrInconsistent, d)
	}
	e.seen[d] = struct{}{}
	return nil
}

// ascends reports whether e.key comes after *last, the last key of its
// kind, in a sorted run, and makes it the last.
func (e *encoder) ascends(last *[]byte) bool {
	if *last != nil && bytes.Compare(e.key, *last) <= 0 {
		return false
	}
	*last = append((*last)[:0], e.key...)
	return true
}

func stepClasses(steps []store.Step) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.Class
	}
	return out
}

// registerNames registers the classes of names not registered yet, after
// checking them all, and returns the class list that has them.
func (s *Store) registerNames(names []string) (*classList, error) {
	for _, c := range names {
		if err := store.ValidClass(c); err != nil {
			return nil, err
		}
	}
	ops := make([]store.Op, len(names))
	for i, c := range names {
		ops[i].Class = c
	}
	return s.register(ops)
}

// hasModel reports whether user has sealed rows or any key of a model.
func (s *Store) hasModel(user string) (bool, error) {
	found := s.section(user) != nil
	err := s.db.View(func(txn *badger.Txn) error {
		for _, kind := range userKinds {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: userPrefix(kind, user)})
			it.Rewind()
			found = found || it.Valid()
			it.Close()
		}
		return nil
	})
	return found, err
}

// DeleteUser drops user's model under a busy mark, which the next Open
// finishes if the process dies first.
//
// Badger's DropPrefix waits for its memtables to be flushed, which never
// ends while the directory cannot be written, so the directory is looked
// at right before.
func (s *Store) DeleteUser(ctx context.Context, user string) (err error) {
	defer s.recoverFault(&err, "delete user")
	if err := store.ValidUser(user); err != nil {
		return fmt.Errorf("delete user: %w", err)
	}
	if err := s.enter(); err != nil {
		return fmt.Errorf("delete user: %w", err)
	}
	defer s.life.RUnlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete user %q: %w", user, err)
	}
	if err := s.writable(true); err != nil {
		return fmt.Errorf("delete user %q: %w", user, err)
	}
	// Once the mark is in Badger, the model may be half deleted: it
	// stays hidden until the mark goes, with the rest of it.
	s.setBusy(user, true)
	marked := false
	defer func() {
		s.cache.forget(user)
		s.present.drop(user)
		if !marked {
			s.setBusy(user, false)
		}
	}()
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(userPrefix(kindBusy, user), nil) }); err != nil {
		return fmt.Errorf("delete user %q: mark: %w", user, s.writeError(err))
	}
	marked = true
	if err := s.dropUser(user); err != nil {
		return fmt.Errorf("delete user %q: %w (it stays hidden until the store recovers or opens again, which finish the delete)", user, s.writeError(err))
	}
	marked = false
	return nil
}

// dropUser makes user's sealed rows void and deletes every key of user's
// model, then the busy mark.
// Badger's DropPrefix holds writes back while it runs, which Apply,
// waiting for wmu, does anyway.
func (s *Store) dropUser(user string) error {
	if err := s.void(user); err != nil {
		return err
	}
	s.overlay(user)
	var prefixes [][]byte
	for _, kind := range slices.Concat(userKinds, oldKinds) {
		prefixes = append(prefixes, userPrefix(kind, user))
	}
	if err := s.db.DropPrefix(prefixes...); err != nil {
		return err
	}
	return s.db.Update(func(txn *badger.Txn) error { return txn.Delete(userPrefix(kindBusy, user)) })
}

// finishBusy drops the model of every user Open finds marked busy: a
// restore or a delete that a crash or a fault interrupted. It runs again
// when the store recovers from a fault; s.wmu or s.life is held
// exclusively, so that no restore or delete is under way. A database opened
// read-only cannot drop them: they are hidden from readers instead,
// until it is reopened for writing.
func (s *Store) finishBusy() error {
	var users []string
	err := s.db.View(func(txn *badger.Txn) (err error) {
		users, err = usersOf(context.Background(), txn, kindBusy)
		return err
	})
	if err != nil {
		return err
	}
	for _, u := range users {
		if s.dbReadOnly {
			s.log.Warn("badgerstore: hiding the model a restore or delete left half written, until the store can write", "user", u, "dir", s.dir)
			s.setBusy(u, true)
			continue
		}
		s.log.Warn("badgerstore: dropping the model a restore or delete left half written", "user", u, "dir", s.dir)
		if err := s.dropUser(u); err != nil {
			return fmt.Errorf("drop %q: %w", u, err)
		}
		s.cache.forget(u)
		s.present.drop(u)
		s.setBusy(u, false)
	}
	return nil
}

// setBusy hides user's model from readers, or shows it again.
func (s *Store) setBusy(user string, busy bool) {
	s.busyMu.Lock()
	defer s.busyMu.Unlock()
	if s.busy == nil {
		s.busy = make(map[string]bool)
	}
	if busy {
		s.busy[user] = true
	} else {
		delete(s.busy, user)
	}
	s.nBusy.Store(int32(len(s.busy)))
}

// isBusy reports whether user's model is being restored or deleted; the
// common case, nothing busy, costs one atomic load.
func (s *Store) isBusy(user string) bool {
	if s.nBusy.Load() == 0 {
		return false
	}
	s.busyMu.Lock()
	defer s.busyMu.Unlock()
	return s.busy[user]
}
