package badgerstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/storetest"
)

// loaded returns a store in a new directory loaded with users' models,
// and the memory store they came from.
func loaded(t *testing.T, users []string) (*Store, *store.Memory, string) {
	t.Helper()
	src := memoryModel(t, users, 200, 11)
	dir := t.TempDir()
	s := open(t, dir, Options{})
	t.Cleanup(func() { s.Close() })
	if err := s.Load(context.Background(), memoryModel(t, users, 200, 11)); err != nil {
		t.Fatal(err)
	}
	return s, src, dir
}

// tokenKeys counts user's token keys in Badger.
func tokenKeys(t *testing.T, s *Store, user string) int {
	t.Helper()
	n := 0
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: userPrefix(kindToken, user)})
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

// TestSealed follows a loaded store's sealed rows: a load writes them to
// the sealed file only; training a user moves that user's into Badger,
// deleting a user drops theirs, and the others stay sealed, across a
// reopen too.
func TestSealed(t *testing.T) {
	ctx := context.Background()
	users := []string{"", "alice", "bob"}
	s, src, dir := loaded(t, users)
	for _, u := range users {
		if s.section(u) == nil || tokenKeys(t, s, u) != 0 {
			t.Fatalf("user %q after the load: sealed %v, %d token keys in Badger", u, s.section(u) != nil, tokenKeys(t, s, u))
		}
	}
	// A model's size is that of its keys and values in Badger, sealed or
	// not.
	sealedSize, err := s.UserSize(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	s.wmu.Lock()
	err = s.dissolve(ctx, "bob")
	s.wmu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if size, err := s.UserSize(ctx, "bob"); err != nil || size != sealedSize || s.section("bob") != nil {
		t.Errorf("bob's size %d sealed, %d, %v in Badger", sealedSize, size, err)
	}
	if lsm, _ := s.Size(); lsm < s.sealed.Load().file.Len() {
		t.Errorf("size %d is less than the sealed file's %d", lsm, s.sealed.Load().file.Len())
	}
	if n, err := s.Warm(ctx, "alice"); err != nil || uint64(n) != s.section("alice").Rows() {
		t.Errorf("warm: %d rows, %v; want %d", n, err, s.section("alice").Rows())
	}

	op := storetest.Train("later", "spam", map[bow.Hash]uint32{1: 1, 2: 3})
	for _, st := range []store.Store{s, src} {
		if _, err := st.Apply(ctx, "alice", []store.Op{op}); err != nil {
			t.Fatal(err)
		}
		if err := st.DeleteUser(ctx, "bob"); err != nil {
			t.Fatal(err)
		}
	}
	if s.section("alice") != nil || tokenKeys(t, s, "alice") == 0 {
		t.Errorf("alice after training: sealed %v, %d token keys", s.section("alice") != nil, tokenKeys(t, s, "alice"))
	}
	if s.section("bob") != nil || s.section("") == nil {
		t.Errorf("after deleting bob: bob sealed %v, \"\" sealed %v", s.section("bob") != nil, s.section("") != nil)
	}
	check := func(when string) {
		t.Helper()
		for _, u := range users {
			if got, want := dumpText(t, s, u), dumpText(t, src, u); got != want {
				t.Errorf("%s: model %q differs from the memory store's", when, u)
			}
			if err := s.Check(ctx, u); err != nil {
				t.Errorf("%s: %v", when, err)
			}
		}
	}
	check("after training and deleting")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, Options{})
	defer s.Close()
	check("after reopening")
	if s.section("") == nil {
		t.Error("the sealed rows of \"\" are gone after reopening")
	}

	// The last sealed user trained, the file goes.
	for _, st := range []store.Store{s, src} {
		if _, err := st.Apply(ctx, "", []store.Op{op}); err != nil {
			t.Fatal(err)
		}
	}
	check("after training the last sealed user")
	if _, err := os.Stat(filepath.Join(dir, sealedName)); !errors.Is(err, os.ErrNotExist) || s.sealed.Load() != nil {
		t.Errorf("the sealed file with no rows left: %v", err)
	}
}

// TestSealedHides checks that a user's token keys in Badger, which a
// process killed while moving sealed rows leaves, are not read while the
// sealed file holds the user's rows, and that moving them writes over
// them.
func TestSealedHides(t *testing.T) {
	ctx := context.Background()
	s, src, _ := loaded(t, []string{""})
	var h bow.Hash
	if err := src.Dump(ctx, "", func(r store.Record) error {
		if r.Counts != nil && h == 0 {
			h = r.Hash
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	stale := appendRow(nil, 20000, []uint64{999, 0, 999})
	if err := s.db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(appendTokenKey(nil, "", h), stale); err != nil {
			return err
		}
		return txn.Set(appendTokenKey(nil, "", 12345), stale)
	}); err != nil {
		t.Fatal(err)
	}
	want := dumpText(t, src, "")
	if got := dumpText(t, s, ""); got != want {
		t.Error("keys in Badger show through the sealed rows")
	}
	if err := s.Check(ctx, ""); err != nil {
		t.Error(err)
	}
	got, _ := s.Lookup(ctx, "", []bow.Hash{h, 12345})
	exp, _ := src.Lookup(ctx, "", []bow.Hash{h, 12345})
	if got[0][0] != exp[0][0] || got[1] != nil {
		t.Errorf("lookup %v, want %v", got, exp)
	}
	s.wmu.Lock()
	err := s.dissolve(ctx, "")
	s.wmu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	// The stray key that no sealed row wrote over stays: a dissolve cut
	// off can only have written rows the sealed file holds.
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete(appendTokenKey(nil, "", 12345)) }); err != nil {
		t.Fatal(err)
	}
	s.cache.forget("")
	if got := dumpText(t, s, ""); got != want {
		t.Error("moving the sealed rows into Badger did not write over what was there")
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

// TestSealedPrune prunes a loaded model: a rule that drops none of its
// rows leaves them sealed; one that drops some moves them into Badger
// and deletes there, as a memory store's prune does.
func TestSealedPrune(t *testing.T) {
	ctx := context.Background()
	s, src, _ := loaded(t, []string{""})
	for _, tc := range []struct {
		name   string
		rule   store.PruneRule
		sealed bool
	}{
		// memoryModel trains on days from 20000 on.
		{"nothing that old", store.AgeRule(20030, 1, 100, 0, 0), true},
		{"rare and old", store.AgeRule(20030, 1, 10, 0, 0), false},
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
			if (want.Tokens == 0) != tc.sealed {
				t.Fatalf("the memory store pruned %+v", want)
			}
			if got != want || (s.section("") != nil) != tc.sealed {
				t.Errorf("pruned %+v, sealed %v; the memory store pruned %+v, want sealed %v", got, s.section("") != nil, want, tc.sealed)
			}
			if dumpText(t, s, "") != dumpText(t, src, "") {
				t.Error("the model differs from the memory store's")
			}
			if err := s.Check(ctx, ""); err != nil {
				t.Error(err)
			}
		})
	}
}
