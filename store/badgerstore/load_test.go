package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/dump"
	"github.com/spamd/spamd/store/storetest"
)

// memoryModel trains a memory store with users' models: messages of
// three classes with steps, days and marks, a relabel and a forget each,
// and prunes the seen records of the first days, which leaves forgotten
// messages in the totals.
func memoryModel(t testing.TB, users []string, messages int, seed uint64) *store.Memory {
	t.Helper()
	m := store.NewMemory()
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, u := range users {
		var ops []store.Op
		for i := range messages {
			head, body := map[bow.Hash]uint32{}, map[bow.Hash]uint32{}
			for h, n := range storetest.RandomBag(rng, 60, 5000) {
				if h%4 == 0 {
					head[h] = n
				} else {
					body[h] = n
				}
			}
			op := storetest.TrainSteps(fmt.Sprint(u, i), []string{"spam", "ham", "news"}[i%3], head, body,
				store.Step{Class: "spam", Head: rng.Int64N(2000) - 1000, Body: rng.Int64N(2000) - 1000})
			// Not in order of day, and some without a mark.
			op.Day = store.Day(20000 + rng.IntN(30))
			if rng.IntN(4) > 0 {
				op.Mark = rng.Uint64()
			}
			ops = append(ops, op)
		}
		relabel, forget := ops[3], ops[4]
		relabel.Class, forget.Class = "ham", "" // ops[3] is spam
		relabel.Day = 20031
		if _, err := m.Apply(context.Background(), u, append(ops, relabel, forget)); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Prune(context.Background(), u, store.PruneRule{SeenBefore: 20003}); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// dumpText returns user's model in s as the dump format writes it.
func dumpText(t testing.TB, s store.Store, user string) string {
	t.Helper()
	var b bytes.Buffer
	w := dump.NewWriter(&b)
	if err := dump.Model(context.Background(), w, s, user); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestLoad loads a memory store's models into a new store, which must
// then hold them exactly and go on like any store; a second load, or a
// load into a store with a model, is refused.
func TestLoad(t *testing.T) {
	ctx := context.Background()
	users := []string{"", "alice", "bob"}
	src := memoryModel(t, users, 300, 1)
	dir := t.TempDir()
	s := open(t, dir, Options{})
	defer s.Close()
	// Lookups before the load cache tokens as absent, which the load
	// must forget.
	probe := []bow.Hash{}
	if err := src.Dump(ctx, "alice", func(r store.Record) error {
		if r.Counts != nil && len(probe) < 50 {
			probe = append(probe, r.Hash)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lookup(ctx, "alice", probe); err != nil {
		t.Fatal(err)
	}
	if err := s.Load(ctx, src); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, loadMarker)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the load marker is still there: %v", err)
	}
	for _, u := range users {
		if got, want := dumpText(t, s, u), dumpText(t, src, u); got != want {
			t.Errorf("model %q differs after the load", u)
		}
		if err := s.Check(ctx, u); err != nil {
			t.Error(err)
		}
		// The totals the load added up are those training kept.
		got, _ := s.Totals(ctx, u)
		want, _ := src.Totals(ctx, u)
		if fmt.Sprint(got.Messages, got.Tokens, got.Vocabulary, got.Forgotten, got.LastDay) != fmt.Sprint(want.Messages, want.Tokens, want.Vocabulary, want.Forgotten, want.LastDay) ||
			len(want.Forgotten) == 0 || want.LastDay != 20031 {
			t.Errorf("model %q: totals after the load %+v, trained %+v", u, got, want)
		}
	}
	got, err := s.Lookup(ctx, "alice", probe)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := src.Lookup(ctx, "alice", probe)
	for i := range probe {
		if !bytes.Equal(fmt.Append(nil, got[i]), fmt.Append(nil, want[i])) {
			t.Fatalf("token %x: %v after the load, want %v", probe[i], got[i], want[i])
		}
	}
	if err := s.Load(ctx, src); !errors.Is(err, ErrNotEmpty) {
		t.Errorf("a second load: %v, want ErrNotEmpty", err)
	}

	// The loaded store trains like any other, and keeps what it loaded
	// after reopening.
	more := storetest.Train("later", "ham", map[bow.Hash]uint32{probe[0]: 2, 77: 1})
	for _, st := range []store.Store{s, src} {
		if _, err := st.Apply(ctx, "alice", []store.Op{more}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, Options{})
	for _, u := range users {
		if got, want := dumpText(t, s, u), dumpText(t, src, u); got != want {
			t.Errorf("model %q differs after training more and reopening", u)
		}
	}
}

// failingDump is a store whose Dump fails after some records.
type failingDump struct {
	store.Store
	after int
}

var errDumpFailed = errors.New("dump failed")

func (f failingDump) Dump(ctx context.Context, user string, fn func(store.Record) error) error {
	n := 0
	return f.Store.Dump(ctx, user, func(r store.Record) error {
		if n++; n > f.after {
			return errDumpFailed
		}
		return fn(r)
	})
}

// TestLoadDrains loads a drained memory store: the store holds the
// models the memory store held, which is left without them.
func TestLoadDrains(t *testing.T) {
	ctx := context.Background()
	users := []string{"", "alice", "bob"}
	src := memoryModel(t, users, 300, 2)
	want := map[string]string{}
	for _, u := range users {
		want[u] = dumpText(t, src, u)
	}
	s := open(t, t.TempDir(), Options{})
	defer s.Close()
	if err := s.Load(ctx, store.Draining(src)); err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		if got := dumpText(t, s, u); got != want[u] {
			t.Errorf("model %q differs after the load", u)
		}
		if err := s.Check(ctx, u); err != nil {
			t.Error(err)
		}
	}
	if left, err := src.Users(ctx); err != nil || len(left) != 0 {
		t.Errorf("the drained store still has users %q (%v)", left, err)
	}
}

// TestLoadFails checks that a load that fails leaves the store as empty
// as it found it, and usable.
func TestLoadFails(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, Options{})
	defer s.Close()
	src := memoryModel(t, []string{"", "alice"}, 100, 2)
	if err := s.Load(ctx, failingDump{src, 500}); !errors.Is(err, errDumpFailed) {
		t.Fatalf("Load: %v, want the dump's error", err)
	}
	if users, err := s.Users(ctx); err != nil || len(users) != 0 {
		t.Fatalf("after a failed load the store holds %q (%v)", users, err)
	}
	for _, name := range []string{loadMarker, sealedName, sealedTemp} {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is there after a failed load: %v", name, err)
		}
	}
	if _, err := s.Apply(ctx, "alice", []store.Op{storetest.Train("m", "spam", map[bow.Hash]uint32{1: 1})}); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	// A store with a model is refused, and not touched.
	if err := s.Load(ctx, src); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("Load into a store with a model: %v", err)
	}
	if err := s.Check(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
}

// loadCrashEnv, set in the environment of a re-executed test binary,
// makes TestLoadCrash load a model into the store in that directory, and
// train each user once more.
const loadCrashEnv = "SPAMD_BADGERSTORE_LOAD_CRASH"

// TestLoadCrash kills processes loading a model, then training it once
// more, at random moments: each time, the store must open either empty,
// with no marker, or with each user's whole model as loaded or as trained
// after, which lays keys in Badger over its sealed rows.
func TestLoadCrash(t *testing.T) {
	users := []string{"", "alice"}
	if dir := os.Getenv(loadCrashEnv); dir != "" {
		src := memoryModel(t, users, 600, 3)
		s, err := Open(context.Background(), dir, Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println("loading")
		if err := s.Load(context.Background(), src); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println("loaded")
		// Training after the load moves each user's sealed rows into
		// Badger: a kill may land in that too.
		for _, u := range users {
			if _, err := s.Apply(context.Background(), u, []store.Op{crashLater}); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
		}
		fmt.Println("trained")
		s.Close()
		os.Exit(0)
	}
	if testing.Short() {
		t.Skip("kills child processes")
	}
	src := memoryModel(t, users, 600, 3)
	want, trained := map[string]string{}, map[string]string{}
	for _, u := range users {
		want[u] = dumpText(t, src, u)
		if _, err := src.Apply(context.Background(), u, []store.Op{crashLater}); err != nil {
			t.Fatal(err)
		}
		trained[u] = dumpText(t, src, u)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	whole, empty, more := 0, 0, 0
	// The first round is not killed: it times a load and the training
	// after, so that the kills of the others land anywhere in them,
	// however slow the machine (the race detector makes it thirty times
	// slower).
	var took time.Duration
	for round := range 1 + kills(t, 6) {
		dir := t.TempDir()
		took = timedOrKilled(t, "TestLoadCrash", loadCrashEnv+"="+dir, rng, took, "loading", "loaded", "trained")
		s := open(t, dir, Options{})
		got, err := s.Users(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		// Users are trained in order: once one is, those before it are.
		wasTrained := true
		switch {
		case len(got) == 0:
			empty++
		case dumpText(t, s, users[0]) == trained[users[0]]:
			more++
		default:
			whole++
		}
		for _, u := range users {
			switch d := dumpText(t, s, u); {
			case len(got) == 0:
			case d == trained[u] && wasTrained:
			case d == want[u]:
				wasTrained = false
			default:
				t.Errorf("round %d: model %q is neither what was loaded nor that trained once more", round, u)
			}
		}
		for _, u := range users {
			if err := s.Check(context.Background(), u); err != nil {
				t.Errorf("round %d: %v", round, err)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, loadMarker)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("round %d: the marker is still there after opening: %v", round, err)
		}
		s.Close()
	}
	t.Logf("a load and training took %v; after a kill, %d stores were empty, %d as loaded, %d trained after", took, empty, whole, more-1)
}

// crashLater is what TestLoadCrash trains after its load.
var crashLater = storetest.Train("later", "ham", map[bow.Hash]uint32{1: 2, 77: 1})
