package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/badgerstore/sealed"
	"github.com/spamd/spamd/store/storetest"
)

// loaded returns a store in a new directory loaded with users' models,
// each with lone among its messages, and a memory store that holds the
// same.
func loaded(t *testing.T, users []string) (*Store, *store.Memory, string) {
	t.Helper()
	model := func() *store.Memory {
		m := memoryModel(t, users, 200, 11)
		for _, u := range users {
			if _, err := m.Apply(context.Background(), u, []store.Op{storetest.Train("lone", "spam", lone)}); err != nil {
				t.Fatal(err)
			}
		}
		return m
	}
	dir := t.TempDir()
	s := open(t, dir, Options{})
	if err := s.Load(context.Background(), model()); err != nil {
		t.Fatal(err)
	}
	return s, model(), dir
}

// lone is the bag of a message whose tokens no other message has.
var lone = map[bow.Hash]uint32{1 << 60: 1, 1<<60 + 1: 2}

// tokenKeys counts user's token keys in Badger.
func tokenKeys(t *testing.T, s *Store, user string) int {
	t.Helper()
	return countKeys(t, s, userPrefix(kindToken, user))
}

// TestSealed follows a loaded store's sealed rows: a load writes them to
// the sealed file only; training and forgetting lay keys in Badger over
// them, a row taken to zero a tombstone; deleting a user drops the
// user's section; all of it as a memory store given the same calls, and
// across a reopen too.
func TestSealed(t *testing.T) {
	ctx := context.Background()
	users := []string{"", "alice", "bob"}
	s, src, dir := loaded(t, users)
	for _, u := range users {
		if s.section(u) == nil || tokenKeys(t, s, u) != 0 || s.overlaid(u) {
			t.Fatalf("user %q after the load: sealed %v, %d token keys in Badger", u, s.section(u) != nil, tokenKeys(t, s, u))
		}
	}
	if lsm, _ := s.Size(); lsm < s.sealed.Load().file.Len() {
		t.Errorf("size %d is less than the sealed file's %d", lsm, s.sealed.Load().file.Len())
	}
	if n, err := s.Warm(ctx, "alice"); err != nil || uint64(n) != s.section("alice").Rows() {
		t.Errorf("warm: %d rows, %v; want %d", n, err, s.section("alice").Rows())
	}
	// A model's size is that of its keys and values in Badger, sealed or
	// not.
	restored := open(t, t.TempDir(), Options{})
	defer restored.Close()
	if err := store.Copy(ctx, restored, s, "bob"); err != nil {
		t.Fatal(err)
	}
	if a, err := s.UserSize(ctx, "bob"); err != nil || restored.section("bob") != nil {
		t.Fatal(err)
	} else if b, err := restored.UserSize(ctx, "bob"); err != nil || a != b {
		t.Errorf("bob's model takes %d sealed, %d in Badger (%v)", a, b, err)
	}

	// A message of two tokens the load has and a new one, trained; and
	// the message whose tokens no other has forgotten, which leaves
	// tombstones over their rows.
	const fresh = 1<<61 + 5
	var probe []bow.Hash
	if err := s.section("alice").Scan(func(h uint64, _ []byte) bool {
		probe = append(probe, bow.Hash(h))
		return len(probe) < 2
	}); err != nil {
		t.Fatal(err)
	}
	later := map[bow.Hash]uint32{probe[0]: 2, probe[1]: 1, fresh: 3}
	probe = append(probe, fresh)
	for h := range lone {
		probe = append(probe, h)
	}
	for _, st := range []store.Store{s, src} {
		if _, err := st.Apply(ctx, "alice", []store.Op{storetest.Train("later", "spam", later), storetest.Forget("lone", lone)}); err != nil {
			t.Fatal(err)
		}
		if err := st.DeleteUser(ctx, "bob"); err != nil {
			t.Fatal(err)
		}
	}
	if s.section("alice") == nil || tokenKeys(t, s, "alice") != 5 || !s.overlaid("alice") {
		t.Errorf("alice after training: sealed %v, %d token keys", s.section("alice") != nil, tokenKeys(t, s, "alice"))
	}
	if s.section("bob") != nil || s.section("") == nil {
		t.Errorf("after deleting bob: bob sealed %v, \"\" sealed %v", s.section("bob") != nil, s.section("") != nil)
	}
	check := func(when string) {
		t.Helper()
		sameModels(t, when, s, src, users, probe)
	}
	check("after training and deleting")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, Options{})
	defer s.Close()
	check("after reopening")
	for _, st := range []store.Store{s, src} {
		if _, err := st.Apply(ctx, "alice", []store.Op{storetest.Forget("later", later), storetest.Train("lone", "ham", lone)}); err != nil {
			t.Fatal(err)
		}
	}
	check("after training over the tombstones")

	// Every model deleted, their sections are void, across a reopen;
	// Compact drops the file and the void keys.
	for _, u := range users {
		if err := s.DeleteUser(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, Options{})
	defer s.Close()
	for _, u := range users {
		if s.section(u) != nil || lookup(t, s, u, probe) != lookup(t, store.NewMemory(), u, probe) {
			t.Errorf("%q's deleted model still has sealed rows", u)
		}
	}
	if has, err := s.hasAnyModel(); has || err != nil {
		t.Errorf("a store of deleted models holds a model: %v", err)
	}
	if _, err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, sealedName)); !errors.Is(err, os.ErrNotExist) || s.sealed.Load() != nil {
		t.Errorf("the sealed file with no rows left after a compaction: %v", err)
	}
	if n := countKeys(t, s, []byte{kindVoid}); n != 0 {
		t.Errorf("%d void keys left after a compaction", n)
	}
}

// TestCompactSeals compacts models trained message by message: Compact
// folds their rows into the sealed file and drops their token keys from
// Badger; training lays keys over the file again, forgetting tombstones,
// and the next Compact folds those. Each time, and across a reopen, the
// models are those a memory store given the same calls holds.
func TestCompactSeals(t *testing.T) {
	ctx := context.Background()
	users := []string{"", "alice", "bob"}
	dir := t.TempDir()
	s := open(t, dir, Options{})
	defer func() { s.Close() }()
	mem := store.NewMemory()
	defer mem.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	var probe []bow.Hash
	ops := map[string][]store.Op{}
	var first map[bow.Hash]uint32 // alice's first message
	for i, u := range users {
		for j := range 30 {
			bag := storetest.RandomBagOf(rng, 100, 1<<20)
			if u == "alice" && j == 0 {
				first = bag
			}
			ops[u] = append(ops[u], storetest.Train(fmt.Sprint(u, j), []string{"spam", "ham"}[(i+j)%2], bag))
		}
		for _, st := range []store.Store{s, mem} {
			if _, err := st.Apply(ctx, u, ops[u]); err != nil {
				t.Fatal(err)
			}
		}
		probe = append(probe, hashesOf(ops[u])...)
	}
	probe = append(probe, 1<<62+7) // in no model
	check := func(when string, sealed []string) {
		t.Helper()
		sameModels(t, when, s, mem, users, probe)
		for _, u := range users {
			if want := slices.Contains(sealed, u); (s.section(u) != nil) != want || want && tokenKeys(t, s, u) != 0 {
				t.Errorf("%s: %q sealed %v, %d token keys in Badger; want sealed %v and none", when, u, s.section(u) != nil, tokenKeys(t, s, u), want)
			}
		}
	}
	check("trained", nil)
	if _, err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	check("compacted", users)

	// Alice forgets a message and learns one; bob is deleted.
	later := storetest.Train("later", "spam", storetest.RandomBagOf(rng, 100, 1<<20))
	probe = append(probe, hashesOf([]store.Op{later})...)
	for _, st := range []store.Store{s, mem} {
		if _, err := st.Apply(ctx, "alice", []store.Op{later, storetest.Forget("alice0", first)}); err != nil {
			t.Fatal(err)
		}
		if err := st.DeleteUser(ctx, "bob"); err != nil {
			t.Fatal(err)
		}
	}
	if tokenKeys(t, s, "alice") == 0 {
		t.Fatal("training a sealed model wrote no key over the file")
	}
	if _, err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	check("trained over the file and compacted", []string{"", "alice"})
	if n := countKeys(t, s, []byte{kindVoid}); n != 0 {
		t.Errorf("%d void keys left after a compaction", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, Options{})
	check("reopened", []string{"", "alice"})
}

// TestResealCut cuts a compaction's fold short where a crash could, and
// reopens the store: after the new sealed file is in place, and after the
// void keys are gone too, with Badger's token keys still there. Alice
// was deleted and trained again, so the new file has a section of hers
// while her void key is still in Badger at the first cut; bob was trained
// over the file; and a tombstone of alice's lies over nothing, as a fold
// cut short leaves behind for a model the new file has no section of.
// Each time the models are as a memory store given the same calls holds,
// and the next compaction folds what is left.
func TestResealCut(t *testing.T) {
	ctx := context.Background()
	users := []string{"", "alice", "bob"}
	const nothing = 1<<62 + 9
	for _, cut := range []string{"renamed", "void keys dropped"} {
		t.Run(cut, func(t *testing.T) {
			s, src, dir := loaded(t, users)
			extra := storetest.Train("extra", "ham", storetest.RandomBagOf(rand.New(rand.NewPCG(9, 10)), 50, 1<<20))
			for _, st := range []store.Store{s, src} {
				if err := st.DeleteUser(ctx, "alice"); err != nil {
					t.Fatal(err)
				}
				for _, u := range []string{"alice", "bob"} {
					if _, err := st.Apply(ctx, u, []store.Op{extra}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(appendTokenKey(nil, "alice", nothing), nil) }); err != nil {
				t.Fatal(err)
			}
			probe := append(hashesOf([]store.Op{extra}), nothing, 1<<60)
			if _, _, err := s.foldSealed(ctx); err != nil {
				t.Fatal(err)
			}
			if cut == "void keys dropped" {
				if err := s.dropVoid(); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = open(t, dir, Options{})
			defer s.Close()
			sameModels(t, cut, s, src, users, probe)
			if _, err := s.Compact(ctx); err != nil {
				t.Fatal(err)
			}
			sameModels(t, cut+", then compacted", s, src, users, probe)
			for _, u := range users {
				if s.section(u) == nil || tokenKeys(t, s, u) != 0 {
					t.Errorf("%s, then compacted: %q sealed %v, %d token keys in Badger", cut, u, s.section(u) != nil, tokenKeys(t, s, u))
				}
			}
		})
	}
}

// TestSealedDeleteAndLoad deletes one of two sealed models, and then, with
// the void key still there, the other, and loads a new model of the same
// users: the void keys of the old file do not hide the new one's rows.
// Compact with one model deleted keeps the other's.
func TestSealedDeleteAndLoad(t *testing.T) {
	ctx := context.Background()
	users := []string{"", "alice"}
	s, src, dir := loaded(t, users)
	if err := s.DeleteUser(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := src.DeleteUser(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	if s.section("") == nil || s.sealed.Load().file.Section("alice") != nil || countKeys(t, s, []byte{kindVoid}) != 0 {
		t.Error("after a compaction: \"\" not sealed, or alice's rows or void key kept")
	}
	for _, u := range users {
		if dumpText(t, s, u) != dumpText(t, src, u) {
			t.Errorf("after a compaction: model %q differs", u)
		}
	}
	if err := s.DeleteUser(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if countKeys(t, s, []byte{kindVoid}) != 1 {
		t.Fatal("no void key")
	}
	if err := s.Load(ctx, memoryModel(t, users, 50, 5)); err != nil {
		t.Fatal(err)
	}
	want := memoryModel(t, users, 50, 5)
	for _, u := range users {
		if s.section(u) == nil || dumpText(t, s, u) != dumpText(t, want, u) {
			t.Errorf("model %q after loading over a deleted one: sealed %v", u, s.section(u) != nil)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, Options{})
	defer s.Close()
	for _, u := range users {
		if dumpText(t, s, u) != dumpText(t, want, u) {
			t.Errorf("model %q after reopening differs", u)
		}
	}
}

// countKeys counts the store's keys that start with prefix.
func countKeys(t *testing.T, s *Store, prefix []byte) int {
	t.Helper()
	n := 0
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// sameModels checks that s holds users' models as src does: the same
// dumps and rows of probe, and that Check finds them whole.
func sameModels(t *testing.T, when string, s *Store, src store.Store, users []string, probe []bow.Hash) {
	t.Helper()
	for _, u := range users {
		if got, want := dumpText(t, s, u), dumpText(t, src, u); got != want {
			t.Errorf("%s: model %q differs from the memory store's", when, u)
		}
		if err := s.Check(context.Background(), u); err != nil {
			t.Errorf("%s: %v", when, err)
		}
		if got, want := lookup(t, s, u, probe), lookup(t, src, u, probe); got != want {
			t.Errorf("%s: %q's rows %s, want %s", when, u, got, want)
		}
	}
}

// lookup returns user's rows of hashes in s, printed.
func lookup(t *testing.T, s store.Store, user string, hashes []bow.Hash) string {
	t.Helper()
	rows, err := s.Lookup(context.Background(), user, hashes)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		// Both stores' rows are as long as the classes at least.
		rows[i] = r[:min(len(r), 6)]
	}
	return fmt.Sprint(rows)
}

// TestLookupInto looks up one hash set after another in one buffer,
// which grows and shrinks under them: from a sealed model, from one with
// keys laid over it in Badger, and from one Badger alone holds. Each
// answer is Lookup's.
func TestLookupInto(t *testing.T) {
	ctx := context.Background()
	s, _, _ := loaded(t, []string{"a", "b"})
	if _, err := s.Apply(ctx, "b", []store.Op{storetest.Train("more", "ham", map[bow.Hash]uint32{3: 1, 1 << 61: 2})}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctx, "c", []store.Op{storetest.Train("m", "spam", map[bow.Hash]uint32{1: 1, 2: 2})}); err != nil {
		t.Fatal(err)
	}
	storetest.CheckLookupInto(t, s, []storetest.LookupCase{
		{Name: "sealed", User: "a", Hashes: storetest.Span(0, 3000)},
		{Name: "sealed, fewer", User: "a", Hashes: storetest.Span(10, 40)},
		{Name: "sealed, lone after others", User: "a", Hashes: append(storetest.Span(4990, 5010), 1<<60, 1<<60+1)},
		{Name: "overlaid", User: "b", Hashes: storetest.Span(0, 3000)},
		{Name: "in Badger alone", User: "c", Hashes: storetest.Span(0, 5)},
		{Name: "no hashes", User: "a", Hashes: nil},
		{Name: "a user without a model", User: "nobody", Hashes: storetest.Span(0, 3)},
	})
}

// TestSealedOverlay lays keys in Badger over sealed rows by hand: a row
// changed, one deleted by a tombstone, one new. Readers see them over the
// sealed file, once the store knows Badger holds the user's keys.
func TestSealedOverlay(t *testing.T) {
	ctx := context.Background()
	s, _, _ := loaded(t, []string{""})
	want := map[bow.Hash]string{}
	if err := s.Dump(ctx, "", func(r store.Record) error {
		if r.Counts != nil {
			want[r.Hash] = fmt.Sprint(r.Counts)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var changed, gone bow.Hash
	for h := range want {
		switch {
		case changed == 0:
			changed = h
		case gone == 0:
			gone = h
		}
	}
	const added = 12345
	if _, ok := want[added]; ok {
		t.Fatal("the model has the hash meant to be new")
	}
	err := s.db.Update(func(txn *badger.Txn) error {
		return errors.Join(
			txn.Set(appendTokenKey(nil, "", changed), appendRow(nil, 20000, []uint64{7, 0, 8})),
			txn.Set(appendTokenKey(nil, "", gone), nil),
			txn.Set(appendTokenKey(nil, "", added), appendRow(nil, 20000, []uint64{1})),
		)
	})
	if err != nil {
		t.Fatal(err)
	}
	s.overlay("")
	s.cache.forget("")
	want[changed], want[added] = "[7 0 8]", "[1]"
	delete(want, gone)
	got := map[bow.Hash]string{}
	var last bow.Hash
	if err := s.Dump(ctx, "", func(r store.Record) error {
		if r.Counts != nil {
			if r.Hash <= last && len(got) > 0 {
				t.Errorf("dump: %x after %x", r.Hash, last)
			}
			got[r.Hash], last = fmt.Sprint(r.Counts), r.Hash
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("dump: %d rows, want %d; changed %s, added %s, gone %q", len(got), len(want), got[changed], got[added], got[gone])
	}
	rows, err := s.Lookup(ctx, "", []bow.Hash{changed, gone, added})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(rows[0][:3], rows[1], rows[2][:1]) != "[7 0 8] [] [1]" {
		t.Errorf("lookup %v", rows)
	}
	if n, err := s.Warm(ctx, ""); err != nil || n != len(want) {
		t.Errorf("warm: %d rows, %v; want %d", n, err, len(want))
	}
}

// TestSealedCorrupt opens a store whose sealed file is damaged: Open
// fails, saying so, rather than read a model without its rows; Check of
// one whose rows alone are damaged reports it.
func TestSealedCorrupt(t *testing.T) {
	s, _, dir := loaded(t, []string{""})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, sealedName)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		at      int
		atCheck bool
	}{
		{"footer", len(data) - 3, false},
		{"a row", len(data) / 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := append([]byte(nil), data...)
			bad[tc.at] ^= 0x40
			if err := os.WriteFile(path, bad, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(context.Background(), dir, Options{})
			if !tc.atCheck {
				if !errors.Is(err, store.ErrInconsistent) {
					t.Fatalf("open: %v, want ErrInconsistent", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Check(context.Background(), ""); !errors.Is(err, store.ErrInconsistent) {
				t.Errorf("check: %v, want ErrInconsistent", err)
			}
		})
	}
}

// TestSealedPrune prunes a loaded model: tombstones over the sealed rows
// it drops, as a memory store's prune drops them, and the model stays
// sealed.
func TestSealedPrune(t *testing.T) {
	ctx := context.Background()
	s, src, _ := loaded(t, []string{""})
	for _, tc := range []struct {
		name string
		rule store.PruneRule
		none bool
	}{
		// memoryModel trains on days from 20000 on.
		{"nothing that old", store.AgeRule(20030, 1, 100, 0, 0), true},
		{"rare and old", store.AgeRule(20030, 1, 10, 0, 0), false},
		{"to a budget", store.PruneRule{MaxTokens: 1000}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Prune(ctx, "", tc.rule)
			if err != nil {
				t.Fatal(err)
			}
			want, err := src.Prune(ctx, "", tc.rule)
			if err != nil {
				t.Fatal(err)
			}
			if (want.Tokens == 0) != tc.none {
				t.Fatalf("the memory store pruned %+v", want)
			}
			if got != want || s.section("") == nil {
				t.Errorf("pruned %+v, sealed %v; the memory store pruned %+v", got, s.section("") != nil, want)
			}
			if dumpText(t, s, "") != dumpText(t, src, "") {
				t.Error("the model differs from the memory store's")
			}
			if err := s.Check(ctx, ""); err != nil {
				t.Error(err)
			}
		})
	}
	// Training after, over the tombstones.
	op := storetest.Train("after", "ham", map[bow.Hash]uint32{1: 1, 2: 1})
	for _, st := range []store.Store{s, src} {
		if _, err := st.Apply(ctx, "", []store.Op{op}); err != nil {
			t.Fatal(err)
		}
	}
	if dumpText(t, s, "") != dumpText(t, src, "") {
		t.Error("after training: the model differs from the memory store's")
	}
}

// BenchmarkLookupSealed looks up messages' worth of tokens, half of them in the
// model, without the cache, in a model of 500,000 rows: sealed, as a
// first training loads it, and in Badger, as training message by message
// leaves it. It reports the time of a token's lookup.
func BenchmarkLookupSealed(b *testing.B) {
	ctx := context.Background()
	const rows, perMessage = 500_000, 300
	rng := rand.New(rand.NewPCG(1, 2))
	bag := make(map[bow.Hash]uint32, rows)
	stored := make([]bow.Hash, 0, rows)
	for len(bag) < rows {
		h := bow.Hash(rng.Uint64())
		bag[h] = 1 + rng.Uint32N(3)
		stored = append(stored, h)
	}
	model := func() *store.Memory {
		m := store.NewMemory()
		if _, err := m.Apply(ctx, "", []store.Op{storetest.Train("all", "spam", bag), storetest.Train("none", "ham", map[bow.Hash]uint32{1: 1})}); err != nil {
			b.Fatal(err)
		}
		return m
	}
	sealed := open(b, b.TempDir(), Options{CacheBytes: -1})
	defer sealed.Close()
	if err := sealed.Load(ctx, store.Draining(model())); err != nil {
		b.Fatal(err)
	}
	// The rows copied are written out to Badger's tables by a close and
	// merged into one level, as a compacted store's were; Compact itself
	// would fold them into the sealed file.
	dir := b.TempDir()
	inBadger := open(b, dir, Options{CacheBytes: -1})
	if err := store.Copy(ctx, inBadger, model(), ""); err != nil {
		b.Fatal(err)
	}
	if err := inBadger.Close(); err != nil {
		b.Fatal(err)
	}
	inBadger = open(b, dir, Options{CacheBytes: -1})
	defer inBadger.Close()
	if err := inBadger.flatten(ctx, &store.Compaction{}); err != nil {
		b.Fatal(err)
	}
	if inBadger.section("") != nil {
		b.Fatal("the rows copied into Badger are in a sealed file")
	}
	messages := make([][]bow.Hash, 64)
	for i := range messages {
		for range perMessage / 2 {
			messages[i] = append(messages[i], stored[rng.IntN(rows)], bow.Hash(rng.Uint64()))
		}
	}
	for _, tc := range []struct {
		name string
		s    *Store
	}{{"sealed", sealed}, {"badger", inBadger}} {
		b.Run(tc.name, func(b *testing.B) {
			for i := range b.N {
				if _, err := tc.s.Lookup(ctx, "", messages[i%len(messages)]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perMessage), "ns/token")
		})
	}
}

// BenchmarkWarm reads a sealed model of 500,000 rows into an empty cache,
// as spamd does for each model at start. It reports the time of a row.
func BenchmarkWarm(b *testing.B) {
	ctx := context.Background()
	const rows = 500_000
	rng := rand.New(rand.NewPCG(1, 2))
	bag := make(map[bow.Hash]uint32, rows)
	for len(bag) < rows {
		bag[bow.Hash(rng.Uint64())] = 1 + rng.Uint32N(3)
	}
	m := store.NewMemory()
	if _, err := m.Apply(ctx, "", []store.Op{storetest.Train("all", "spam", bag)}); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	s := open(b, dir, Options{CacheBytes: -1})
	if err := s.Load(ctx, store.Draining(m)); err != nil {
		b.Fatal(err)
	}
	if s.section("") == nil {
		b.Fatal("the model loaded is not sealed")
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		s := open(b, dir, Options{CacheBytes: 64 << 20, ReadOnly: true})
		b.StartTimer()
		n, err := s.Warm(ctx, "")
		if err != nil || n != rows {
			b.Fatalf("Warm: %d rows, %v; want %d", n, err, rows)
		}
		b.StopTimer()
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/row")
}

// earlierLayout is a store of schema 5, whose sealed file is of the
// earlier layout: 12 messages of the global model and 5 of alice's,
// trained and compacted by the build before this layout.
const earlierLayout = "testdata/v2store"

// earlierRows returns the rows of earlierLayout's sealed file, by user
// and hash, as the file has them.
func earlierRows(t *testing.T) map[string]map[uint64][]byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(earlierLayout, sealedV2Name))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]map[uint64][]byte{}
	err = sealed.ScanV2(data, func(u string, h uint64, row []byte) error {
		if rows[u] == nil {
			rows[u] = map[uint64][]byte{}
		}
		rows[u][h] = slices.Clone(row)
		return nil
	})
	if err != nil || len(rows) != 2 {
		t.Fatalf("%s: %d users, %v", earlierLayout, len(rows), err)
	}
	return rows
}

// readsRows checks that s answers every row of rows, and that its
// models check.
func readsRows(t *testing.T, s *Store, rows map[string]map[uint64][]byte) {
	t.Helper()
	ctx := context.Background()
	for u, byHash := range rows {
		hashes := make([]bow.Hash, 0, len(byHash))
		for h := range byHash {
			hashes = append(hashes, bow.Hash(h))
		}
		got, err := s.Lookup(ctx, u, hashes)
		if err != nil {
			t.Fatalf("%q: %v", u, err)
		}
		for i, h := range hashes {
			want, _, err := decodeRow(nil, byHash[uint64(h)])
			if err != nil {
				t.Fatal(err)
			}
			if len(got[i]) < len(want) || !slices.Equal(got[i][:len(want)], want) || slices.ContainsFunc(got[i][len(want):], func(v uint64) bool { return v != 0 }) {
				t.Fatalf("%q: row of %x is %v, want %v", u, h, got[i], want)
			}
		}
		if err := s.Check(ctx, u); err != nil {
			t.Errorf("%q: %v", u, err)
		}
	}
}

// TestSealedEarlierLayout opens a store whose sealed file is of the
// earlier layout, read-only as spamtrain's reading commands do: it is
// opened for writing instead, its file rewritten in place, and read as
// the old file had it; the next read-only open writes nothing.
func TestSealedEarlierLayout(t *testing.T) {
	rows := earlierRows(t)
	dir := copyDir(t, earlierLayout)
	s := open(t, dir, Options{ReadOnly: true})
	readsRows(t, s, rows)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.ReadFile(filepath.Join(dir, sealedName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sealed.Open(f); err != nil {
		t.Fatalf("the file rewritten: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, sealedV2Name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the earlier file is still there: %v", err)
	}
	if _, schema := kinds(t, dir); schema != schemaVersion {
		t.Errorf("schema %d after the rewrite, want %d", schema, schemaVersion)
	}
	before := listing(t, dir)
	s = open(t, dir, Options{ReadOnly: true})
	readsRows(t, s, rows)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if after := listing(t, dir); !slices.Equal(before, after) {
		t.Errorf("a read-only open of the rewritten store wrote:\n%q\nthen\n%q", before, after)
	}
}

// TestSealedRewriteCut opens a store of this schema with the earlier
// layout's file beside its own, as a rewrite leaves them when cut short
// after the meta record: it reads its own and removes the earlier.
func TestSealedRewriteCut(t *testing.T) {
	rows := earlierRows(t)
	dir := copyDir(t, earlierLayout)
	s := open(t, dir, Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(filepath.Join(earlierLayout, sealedV2Name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, sealedV2Name), old, 0o600); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, Options{})
	readsRows(t, s, rows)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, sealedV2Name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the earlier file is still there: %v", err)
	}
}

// TestSealedEarlierCorrupt opens a store whose sealed file of the
// earlier layout does not check: Open fails, says the store is
// inconsistent, and leaves the file as it was, with no other beside it.
func TestSealedEarlierCorrupt(t *testing.T) {
	dir := copyDir(t, earlierLayout)
	path := filepath.Join(dir, sealedV2Name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/3] ^= 1
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{true, false} {
		s, err := Open(context.Background(), dir, Options{ReadOnly: ro})
		if err == nil {
			s.Close()
			t.Fatalf("read-only %v: opened", ro)
		}
		if !errors.Is(err, store.ErrInconsistent) {
			t.Errorf("read-only %v: %v, want ErrInconsistent", ro, err)
		}
	}
	after, err := os.ReadFile(path)
	if err != nil || !slices.Equal(after, data) {
		t.Errorf("the file changed: %v", err)
	}
	for _, name := range []string{sealedName, sealedTemp} {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %v, want none", name, err)
		}
	}
}

// TestSealedEarlierSchemaBoth opens a store of schema 5 with a file of
// this layout beside its earlier one, as a rewrite cut short before the
// meta record leaves them, or a build of schema 5 that trained the store
// since: the earlier file holds the rows, and the other is written anew
// from it.
func TestSealedEarlierSchemaBoth(t *testing.T) {
	rows := earlierRows(t)
	dir := copyDir(t, earlierLayout)
	var stale bytes.Buffer
	w := sealed.NewWriter(&stale)
	if err := w.Add("", 1, appendRow(nil, 20100, []uint64{9, 0})); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, sealedName), stale.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir, Options{ReadOnly: true})
	readsRows(t, s, rows)
	if got, err := s.Lookup(context.Background(), "", []bow.Hash{1}); err != nil || got[0] != nil {
		t.Errorf("the stale file's row: %v, %v", got, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, sealedV2Name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the earlier file is still there: %v", err)
	}
}

// rewriteCrashEnv, set in the environment of a re-executed test binary,
// makes TestRewriteCrash open the store in that directory, which
// rewrites its earlier sealed file.
const rewriteCrashEnv = "SPAMD_BADGERSTORE_REWRITE_CRASH"

// TestRewriteCrash kills processes opening a store whose sealed file is
// of the earlier layout at random moments of the rewrite and conversion:
// each time, a store still at schema 5 has the earlier file as it was,
// for a build of schema 5, and the next open reads every row.
func TestRewriteCrash(t *testing.T) {
	if dir := os.Getenv(rewriteCrashEnv); dir != "" {
		fmt.Println("opening")
		childOpen(dir, Options{})
	}
	if testing.Short() {
		t.Skip("kills child processes")
	}
	rows := earlierRows(t)
	old, err := os.ReadFile(filepath.Join(earlierLayout, sealedV2Name))
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	// The first round is not killed: it times the open (timedOrKilled).
	var took time.Duration
	earlier := 0
	for round := range 1 + kills(t, 6) {
		dir := copyDir(t, earlierLayout)
		took = timedOrKilled(t, "TestRewriteCrash", rewriteCrashEnv+"="+dir, rng, took, "opening", "opened")
		if _, schema := kinds(t, dir); schema < schemaVersion {
			earlier++
			if got, err := os.ReadFile(filepath.Join(dir, sealedV2Name)); err != nil || !bytes.Equal(got, old) {
				t.Fatalf("round %d: schema %d, and the earlier file is not as it was: %v", round, schema, err)
			}
		}
		s := open(t, dir, Options{})
		readsRows(t, s, rows)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("an open took %v; after a kill, %d stores were still at the earlier schema", took, earlier)
}
