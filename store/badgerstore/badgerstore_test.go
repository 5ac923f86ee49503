package badgerstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/storetest"
)

func open(t testing.TB, dir string, o Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), dir, o)
	if err != nil {
		t.Fatalf("Open(%q): %v", dir, err)
	}
	// A store a test leaves open keeps looking at its directory after
	// the test: once a fault test's tmpfs is unmounted, it finds the
	// directory gone and salvages its model into the test's temporary
	// directory while that is being removed. Close is idempotent, so a
	// test that closes the store itself is unaffected.
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	tests := []struct {
		name string
		open storetest.Opener
	}{
		{"in memory", func(t *testing.T) store.Store { return open(t, "", Options{InMemory: true}) }},
		{"on disk", func(t *testing.T) store.Store { return open(t, t.TempDir(), Options{}) }},
		{"on disk without cache", func(t *testing.T) store.Store { return open(t, t.TempDir(), Options{CacheBytes: -1}) }},
		// A cache of a few entries evicts all the time.
		{"tiny cache", func(t *testing.T) store.Store { return open(t, "", Options{InMemory: true, CacheBytes: 2000}) }},
		// Transactions of a few hundred keys split most batches.
		{"tiny transactions", func(t *testing.T) store.Store {
			return open(t, "", Options{InMemory: true, MemTableBytes: 1 << 20})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { storetest.Run(t, tt.open) })
	}
}

// train applies ops for user and fails t on error.
func train(t testing.TB, s store.Store, user string, ops ...store.Op) []store.Result {
	t.Helper()
	res, err := s.Apply(context.Background(), user, ops)
	if err != nil {
		t.Fatalf("Apply(%q): %v", user, err)
	}
	return res
}

func TestReopen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	train(t, s, "", storetest.TrainSteps("m1", "spam", map[bow.Hash]uint32{1: 2}, map[bow.Hash]uint32{2: 1},
		store.Step{Class: "spam", Head: 5, Body: -3}, store.Step{Class: "ham", Head: -5}))
	train(t, s, "alice",
		storetest.Train("m1", "ham", map[bow.Hash]uint32{1: 1, 3: 5}),
		storetest.Train("m2", "newsletter", map[bow.Hash]uint32{3: 1}),
		storetest.Train("m3", "spam", map[bow.Hash]uint32{4: 1}),
		storetest.Forget("m3", map[bow.Hash]uint32{4: 1}),
	)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, Options{})
	defer s.Close()
	tot, err := s.Totals(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"spam", "ham", "newsletter"}; !slices.Equal(tot.Classes, want) {
		t.Errorf("Classes = %q, want %q", tot.Classes, want)
	}
	storetest.Expect(t, s, "", storetest.State{
		Messages: map[string]uint64{"spam": 1}, Tokens: map[string]uint64{"spam": 3}, Vocabulary: 2,
		Counts:  map[bow.Hash]map[string]uint64{1: {"spam": 2}, 2: {"spam": 1}},
		Weights: map[bow.Hash]map[string]int64{1: {"spam": 10, "ham": -10}, 2: {"spam": -3}},
		Seen:    map[string]string{"m1": "spam"},
	})
	storetest.Expect(t, s, "alice", storetest.State{
		Messages: map[string]uint64{"ham": 1, "newsletter": 1}, Tokens: map[string]uint64{"ham": 6, "newsletter": 1}, Vocabulary: 2,
		Counts: map[bow.Hash]map[string]uint64{1: {"ham": 1}, 3: {"ham": 5, "newsletter": 1}, 4: nil},
		Seen:   map[string]string{"m1": "ham", "m2": "newsletter", "m3": ""},
	})
	users, err := s.Users(context.Background())
	if err != nil || !slices.Equal(users, []string{"", "alice"}) {
		t.Errorf("Users = %q, %v", users, err)
	}
	// The steps recorded before the reopening are taken back exactly.
	train(t, s, "", store.Op{Digest: storetest.D("m1"), Bag: bow.FromMaps(map[bow.Hash]uint32{1: 2}, map[bow.Hash]uint32{2: 1})})
	storetest.Expect(t, s, "", storetest.State{Counts: map[bow.Hash]map[string]uint64{1: nil, 2: nil}})
	// The class list grows on from where it was.
	train(t, s, "", storetest.Train("m2", "phish", nil))
	if tot, _ := s.Totals(context.Background(), ""); tot.Index("phish") != 3 {
		t.Errorf("Classes after reopening = %q", tot.Classes)
	}
}

// corrupt writes key = value behind Apply's back, as a damaged disk or a
// bug would, and empties the cache so that readers see it.
func corrupt(t *testing.T, s *Store, key, value []byte) {
	t.Helper()
	err := s.db.Update(func(txn *badger.Txn) error {
		if value == nil {
			return txn.Delete(key)
		}
		return txn.Set(key, value)
	})
	if err != nil {
		t.Fatal(err)
	}
	s.cache = newCache(defaultCacheBytes)
}

func TestCheck(t *testing.T) {
	user := "alice"
	steps4 := []int64{4, 1, -4, -1}
	sampleKeyOf := func(m uint8, c int) []byte { return appendSampleKey(nil, user, sampleKey{measure: m, class: c}) }
	tokenKey := appendTokenKey(nil, user, 1)
	seenKey := appendSeenKey(nil, user, storetest.D("m1"))
	v1Key := binary.BigEndian.AppendUint64(userPrefix(kindTokenV1, user), 1)
	v3Key := binary.BigEndian.AppendUint64(userPrefix(kindTokenV3, user), 1)
	seenKey3 := appendSeenKey(nil, user, storetest.D("m3"))
	m1Values := []store.Value{{Measure: 0, Level: 100}, {Measure: 3, Level: 7}}
	day0 := slices.Clip(appendDay(nil, 0)) // appended to in several places
	d9 := storetest.D("m9")
	tests := []struct {
		name  string
		key   []byte
		value []byte // nil deletes the key
		want  string // in the report; "" means consistent
	}{
		{"untouched", nil, nil, ""},
		{"weight changed", tokenKey, appendRow(nil, 0, []uint64{3, 12345}), ""},
		{"token trained after the last day", tokenKey, appendRow(nil, 5, []uint64{3, 9}), "last trained on 1970-01-06, after the last day trained on, 1970-01-01"},
		{"messages off", totalsKey(user), appendTotals(nil, &totals{messages: []uint64{3, 1}, tokens: []uint64{6, 1}, vocabulary: 3}), `class "spam": totals say 3 messages, 2 seen records`},
		{"tokens off", totalsKey(user), appendTotals(nil, &totals{messages: []uint64{2, 1}, tokens: []uint64{7, 1}, vocabulary: 3}), `class "spam": totals say 7 tokens, token counts sum to 6`},
		{"vocabulary off", totalsKey(user), appendTotals(nil, &totals{messages: []uint64{2, 1}, tokens: []uint64{6, 1}, vocabulary: 4}), "totals say vocabulary 4, 3 tokens with a count"},
		{"forgotten off", totalsKey(user), appendTotals(nil, &totals{messages: []uint64{2, 1}, tokens: []uint64{6, 1}, vocabulary: 3, forgotten: []uint64{1}}), `class "spam": totals say 2 messages, 2 seen records and 1 forgotten`},
		{"forgotten counted", totalsKey(user), appendTotals(nil, &totals{messages: []uint64{3, 1}, tokens: []uint64{6, 1}, vocabulary: 3, forgotten: []uint64{1}}), ""},
		{"forgotten of unknown class", totalsKey(user), appendTotals(nil, &totals{messages: []uint64{2, 1}, tokens: []uint64{6, 1}, vocabulary: 3, forgotten: []uint64{0, 0, 1}}), "totals count 3 classes, the store has 2"},
		{"totals lost", totalsKey(user), nil, `class "ham": totals say 0 messages, 1 seen records`},
		{"totals undecodable", totalsKey(user), []byte{0xff}, "totals: store is inconsistent: undecodable value"},
		{"token count changed", tokenKey, appendRow(nil, 0, []uint64{5}), `class "spam": totals say 6 tokens, token counts sum to 8`},
		{"token lost", tokenKey, nil, "totals say vocabulary 3, 2 tokens with a count"},
		{"token with a weight only", tokenKey, appendRow(nil, 0, []uint64{0, 7}), "totals say vocabulary 3, 2 tokens with a count"},
		{"token all zero", tokenKey, append(day0, 0, 0), "all zero, not deleted"},
		{"token of unknown class", tokenKey, appendRow(nil, 0, []uint64{2, 0, 0, 0, 1}), "counts of unknown classes"},
		{"token undecodable", tokenKey, []byte{0x80}, "undecodable"},
		{"token weight undecodable", tokenKey, append(day0, 3, 0x80), "undecodable"},
		{"token left in schema 1", v1Key, []byte{1}, "of schema 1"},
		{"token left in schema 3", v3Key, appendRowV3(nil, []uint64{1}), "of schema 3"},
		{"seen record lost", seenKey, nil, `class "spam": totals say 2 messages, 1 seen records`},
		{"seen record moved", seenKey, appendSeen(nil, seenRec{class: 1}), `class "ham": totals say 1 messages, 2 seen records`},
		{"seen record without steps", seenKey, appendSeen(nil, seenRec{class: 0, values: m1Values}), ""},
		{"seen record trained after the last day", seenKey, appendSeen(nil, seenRec{class: 0, steps: steps4, values: m1Values, day: 5}), "trained on 1970-01-06, after the last day trained on, 1970-01-01"},
		{"message trained as two classes", seenKey3, appendSeen(nil, seenRec{class: 1, mark: 0xabc}), `message 0000000000000abc trained as "ham" (digest`},
		{"message trained twice as one class", seenKey3, appendSeen(nil, seenRec{class: 0, mark: 0xabc}), `class "spam": totals say 2 messages, 3 seen records`},
		{"seen record of unknown class", seenKey, appendSeen(nil, seenRec{class: 7}), "unknown class 7"},
		{"seen record with steps of unknown classes", seenKey, appendSeen(nil, seenRec{class: 0, steps: []int64{1, 1, 1, 1, 1, 1}}), "steps of unknown classes"},
		{"seen record with a step undecodable", seenKey, append(append([]byte{0}, day0...), 2, 2, 0x80), "undecodable"},
		{"seen record with a head step alone", seenKey, append(append([]byte{0}, day0...), 1, 2, 0), "undecodable"},
		{"seen record's value changed", seenKey, appendSeen(nil, seenRec{class: 0, steps: steps4, values: []store.Value{{Measure: 0, Level: 101}, {Measure: 3, Level: 7}}}), `measure 0 of class "spam": stored n=2 sum=300`},
		{"seen record's value lost", seenKey, appendSeen(nil, seenRec{class: 0, steps: steps4, values: []store.Value{{Measure: 0, Level: 100}}}), `measure 3 of class "spam": stored n=1`},
		{"seen record left in schema 2", appendSeenKeyV2(nil, user, storetest.D("m9")), appendSeenV2(nil, seenRec{class: 0}), "of schema 2"},
		{"seen record left in schema 3", append(userPrefix(kindSeenV3, user), d9[:]...), appendSeenV3(nil, seenRec{class: 0}), "of schema 3"},
		{"sample count changed", sampleKeyOf(0, 0), appendSample(nil, storetest.SampleOf(100, 200, 200)), `measure 0 of class "spam": stored n=3`},
		{"sample level moved", sampleKeyOf(0, 0), appendSample(nil, storetest.SampleOf(100, 201)), `measure 0 of class "spam": stored n=2 sum=301`},
		{"sample lost", sampleKeyOf(3, 0), nil, `measure 3 of class "spam": stored n=0`},
		{"sample added", sampleKeyOf(5, 1), appendSample(nil, storetest.SampleOf(9)), `measure 5 of class "ham": stored n=1`},
		{"sample of unknown class", sampleKeyOf(0, 7), appendSample(nil, storetest.SampleOf(9)), "unknown class 7"},
		{"sample empty", sampleKeyOf(5, 1), appendSample(nil, store.Sample{}), "empty, not deleted"},
		{"sample undecodable", sampleKeyOf(0, 0), []byte{0x80}, "undecodable"},
		{"sample moments off its levels", sampleKeyOf(0, 0), []byte{2, 45, 1, 100, 1, 100, 1}, "sum of squares"},
		{"malformed sample key", append(userPrefix(kindSample, user), 1), appendSample(nil, storetest.SampleOf(9)), "malformed sample key"},
		{"malformed token key", append(userPrefix(kindToken, user), 1, 2, 3), appendRow(nil, 0, []uint64{1}), "malformed token key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t, "", Options{InMemory: true})
			defer s.Close()
			steps := []store.Step{{Class: "spam", Head: 4, Body: 1}, {Class: "ham", Head: -4, Body: -1}}
			m1 := storetest.TrainSteps("m1", "spam", map[bow.Hash]uint32{1: 2}, map[bow.Hash]uint32{2: 1}, steps...)
			m1.Values = m1Values
			m1.Mark = 0xabc
			m2 := storetest.TrainSteps("m2", "spam", nil, map[bow.Hash]uint32{1: 1, 3: 2}, steps...)
			m2.Values = []store.Value{{Measure: 0, Level: 200}}
			train(t, s, user,
				m1,
				m2,
				storetest.Train("m3", "ham", map[bow.Hash]uint32{3: 1}),
				storetest.Train("m4", "ham", map[bow.Hash]uint32{9: 1}),
				storetest.Forget("m4", map[bow.Hash]uint32{9: 1}),
			)
			// Another user's model, the same but for one message, must
			// neither disturb alice's check nor be disturbed by it.
			train(t, s, "alice2", storetest.TrainSteps("m1", "spam", map[bow.Hash]uint32{1: 2}, map[bow.Hash]uint32{2: 1}, steps...))
			if tt.key != nil {
				corrupt(t, s, tt.key, tt.value)
			}
			err := s.Check(context.Background(), user)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
			} else {
				if !errors.Is(err, store.ErrInconsistent) {
					t.Fatalf("Check: error %v, want ErrInconsistent", err)
				}
				if !strings.Contains(err.Error(), tt.want) {
					t.Errorf("Check: %v\nwant it to say %s", err, tt.want)
				}
			}
			if err := s.Check(context.Background(), "alice2"); err != nil {
				t.Errorf("Check(alice2): %v", err)
			}
		})
	}
}

func TestCheckReportIsBounded(t *testing.T) {
	s := open(t, "", Options{InMemory: true})
	defer s.Close()
	train(t, s, "", storetest.Train("m1", "spam", nil))
	for i := range 100 {
		corrupt(t, s, append(userPrefix(kindToken, ""), byte(i)), []byte{1})
	}
	err := s.Check(context.Background(), "")
	if !errors.Is(err, store.ErrInconsistent) || !strings.Contains(err.Error(), "and 80 more") {
		t.Errorf("Check: %v", err)
	}
}

// TestSplit applies batches far bigger than Badger's transactions at a
// 1 MiB memtable and compares the result with the memory store's: with
// the split planned from Badger's limits, and with a plan ten times too
// generous, so that Badger refuses the commits and Apply falls back to
// taking the ops back out and doing them again in smaller transactions.
func TestSplit(t *testing.T) {
	for _, share := range []int64{defaultTxnShare, 1000} {
		t.Run(fmt.Sprintf("%d%%", share), func(t *testing.T) { testSplit(t, share) })
	}
}

func testSplit(t *testing.T, share int64) {
	ctx := context.Background()
	s := open(t, t.TempDir(), Options{MemTableBytes: 1 << 20})
	defer s.Close()
	s.txnShare = share
	m := store.NewMemory()
	rng := rand.New(rand.NewPCG(7, 8))
	bags := make([]bow.Bag, 200)
	for i := range bags {
		bags[i] = splitBag(storetest.RandomBagOf(rng, 300, 5000))
	}
	var hashes []bow.Hash
	for _, bag := range bags {
		hashes = append(hashes, bag.Hashes()...)
	}
	for round := range 4 {
		ops := make([]store.Op, 150)
		for i := range ops {
			j := rng.IntN(len(bags))
			ops[i] = store.Op{Digest: storetest.D(fmt.Sprint(j)), Class: []string{"spam", "ham", ""}[rng.IntN(3)], Bag: bags[j], Steps: randomSteps(rng)}
		}
		// The same message more than once, in different transactions.
		ops[149] = ops[0]
		ops[148].Digest = ops[1].Digest
		got, err := s.Apply(ctx, "u", ops)
		if err != nil {
			t.Fatalf("round %d: Apply: %v", round, err)
		}
		want, err := m.Apply(ctx, "u", ops)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: results differ from the memory store's", round)
		}
	}
	if err := s.Check(ctx, "u"); err != nil {
		t.Fatal(err)
	}
	gotT, _ := s.Totals(ctx, "u")
	wantT, _ := m.Totals(ctx, "u")
	if fmt.Sprint(gotT) != fmt.Sprint(wantT) {
		t.Errorf("Totals = %v, memory store has %v", gotT, wantT)
	}
	// Again without the cache, from Badger alone.
	s.cache = newCache(-1)
	gotC, _ := s.Lookup(ctx, "u", hashes)
	wantC, _ := m.Lookup(ctx, "u", hashes)
	if fmt.Sprint(gotC) != fmt.Sprint(wantC) {
		t.Errorf("Lookup differs from the memory store's")
	}
}

// splitBag makes a bag of bag, about a third of whose features, picked
// by hash, are the header's.
func splitBag(bag map[bow.Hash]uint32) bow.Bag {
	head, body := map[bow.Hash]uint32{}, map[bow.Hash]uint32{}
	for h, n := range bag {
		if h%3 == 0 {
			head[h] = n
		} else {
			body[h] = n
		}
	}
	return bow.FromMaps(head, body)
}

// randomSteps returns steps for some of the classes spam and ham.
func randomSteps(rng *rand.Rand) []store.Step {
	var steps []store.Step
	for _, c := range []string{"spam", "ham"} {
		if rng.IntN(3) > 0 {
			steps = append(steps, store.Step{Class: c, Head: rng.Int64N(2001) - 1000, Body: rng.Int64N(2001) - 1000})
		}
	}
	return steps
}

func TestOpTooLarge(t *testing.T) {
	for _, share := range []int64{defaultTxnShare, 1000} {
		t.Run(fmt.Sprintf("%d%%", share), func(t *testing.T) { testOpTooLarge(t, share) })
	}
}

func testOpTooLarge(t *testing.T, share int64) {
	ctx := context.Background()
	s := open(t, "", Options{InMemory: true, MemTableBytes: 1 << 20})
	defer s.Close()
	s.txnShare = share
	huge := make(map[bow.Hash]uint32)
	for i := range 20000 {
		huge[bow.Hash(i)] = 1
	}
	ops := []store.Op{
		storetest.Train("small", "spam", map[bow.Hash]uint32{1: 1}),
		storetest.Train("huge", "spam", huge),
		storetest.Train("after", "spam", map[bow.Hash]uint32{2: 1}),
	}
	res, err := s.Apply(ctx, "", ops)
	if !errors.Is(err, ErrOpTooLarge) || !errors.Is(err, badger.ErrTxnTooBig) {
		t.Fatalf("Apply: error %v, want ErrOpTooLarge", err)
	}
	if len(res) != 1 {
		t.Fatalf("Apply: %d results, want 1 for the op before", len(res))
	}
	storetest.Expect(t, s, "", storetest.State{
		Messages: map[string]uint64{"spam": 1}, Tokens: map[string]uint64{"spam": 1}, Vocabulary: 1,
		Counts: map[bow.Hash]map[string]uint64{1: {"spam": 1}, 2: nil, 3: nil},
		Seen:   map[string]string{"small": "spam", "huge": "", "after": ""},
	})
}

// TestApplyReuse runs Applies one after another on a store, each in the
// memory the one before left (Store.spare), however that one ended:
// failed on an op too large, cancelled after its first commit, failed
// in a commit, for another user, with a class more. Each must leave the
// models the memory store has.
func TestApplyReuse(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir(), Options{MemTableBytes: 1 << 20})
	defer s.Close()
	m := store.NewMemory()
	rng := rand.New(rand.NewPCG(21, 22))
	var all []store.Op
	var users []string
	ops := func(n int, classes ...string) []store.Op {
		o := make([]store.Op, n)
		for i := range o {
			// Some messages again, in another class or forgotten.
			name := fmt.Sprint(rng.IntN(len(all) + n))
			o[i] = store.Op{
				Digest: storetest.D(name), Class: classes[rng.IntN(len(classes))],
				Bag: splitBag(storetest.RandomBagOf(rng, 300, 5000)), Steps: randomSteps(rng),
				Values: []store.Value{{Measure: 0, Level: uint16(rng.IntN(8))}, {Measure: 3, Level: uint16(rng.IntN(8))}},
			}
			if o[i].Class == "" {
				o[i].Steps, o[i].Values = nil, nil
			}
		}
		all = append(all, o...)
		return o
	}
	// apply runs ops on both stores, the memory store only those s
	// reports done, and compares the results and the models.
	apply := func(ctx context.Context, user string, ops []store.Op, wantErr error) {
		t.Helper()
		got, err := s.Apply(ctx, user, ops)
		if !errors.Is(err, wantErr) {
			t.Fatalf("Apply(%q): error %v, want %v", user, err, wantErr)
		}
		want, err := m.Apply(context.Background(), user, ops[:len(got)])
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("Apply(%q): results differ from the memory store's", user)
		}
		if s.spare == nil || len(s.spare.hashes) != 0 || len(s.spare.seen) != 0 || s.spare.tot != nil || s.spare.s != nil {
			t.Fatalf("Apply(%q) left no spare memory, or not emptied", user)
		}
		if !slices.Contains(users, user) {
			users = append(users, user)
		}
		hashes := hashesOf(all)
		for _, u := range users {
			if err := s.Check(context.Background(), u); err != nil {
				t.Fatal(err)
			}
			gotT, _ := s.Totals(context.Background(), u)
			wantT, _ := m.Totals(context.Background(), u)
			gotC, _ := s.Lookup(context.Background(), u, hashes)
			wantC, _ := m.Lookup(context.Background(), u, hashes)
			if fmt.Sprint(gotT, gotC) != fmt.Sprint(wantT, wantC) {
				t.Fatalf("after Apply(%q): user %q's model differs from the memory store's", user, u)
			}
		}
	}

	apply(ctx, "u", ops(60, "spam", "ham"), nil)
	if len(s.spare.free) == 0 {
		t.Error("no transaction's memory kept")
	}
	huge := store.Op{Digest: storetest.D("huge"), Class: "spam", Bag: splitBag(storetest.RandomBagOf(rng, 20000, 1<<40))}
	apply(ctx, "u", append(ops(40, "spam", "ham", ""), huge), ErrOpTooLarge)
	apply(ctx, "v", ops(50, "ham", "spam"), nil)

	cctx, cancel := context.WithCancel(ctx)
	s.commitErr = func(int) error { cancel(); return nil }
	apply(cctx, "u", ops(60, "spam", "ham", ""), context.Canceled)
	boom := errors.New("disk on fire")
	s.commitErr = func(start int) error {
		if start > 0 {
			return boom
		}
		return nil
	}
	apply(ctx, "v", ops(60, "spam", "ham"), boom)
	s.commitErr = nil

	apply(ctx, "u", ops(60, "spam", "ham", "other"), nil)
	apply(ctx, "v", ops(60, "other", "ham", ""), nil)

	// The memory of an Apply far larger than usual is not kept.
	var big []store.Op
	for i := range maxSpareRows/1000 + 1 {
		bag := map[bow.Hash]uint32{}
		for j := range 1000 {
			bag[bow.Hash(1<<40+i*1000+j)] = 1
		}
		big = append(big, storetest.Train(fmt.Sprint("big", i), "spam", bag))
	}
	train(t, s, "w", big...)
	if s.spare != nil {
		t.Errorf("the memory of an Apply of %d tokens kept", len(big)*1000)
	}
}

func TestOpenRejects(t *testing.T) {
	tests := []struct {
		name  string
		key   []byte
		value []byte
	}{
		{"foreign database", []byte("some key"), []byte("some value")},
		{"newer schema", metaKey, fmt.Appendf(nil, `{"schema":%d,"classes":[]}`, schemaVersion+1)},
		{"bad meta", metaKey, []byte(`{"schema":1,"classes":["Spam"]}`)},
		{"meta not JSON", metaKey, []byte{1, 2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Update(func(txn *badger.Txn) error { return txn.Set(tt.key, tt.value) }); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			s, err := Open(context.Background(), dir, Options{})
			if !errors.Is(err, ErrSchema) {
				t.Errorf("Open: error %v, want ErrSchema", err)
			}
			if err == nil {
				s.Close()
			}
			// The database was closed: another Open can lock it.
			db, err = badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
			if err != nil {
				t.Fatalf("reopening after a rejected Open: %v", err)
			}
			db.Close()
		})
	}
}

func TestOpenTwice(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	defer s.Close()
	s2, err := Open(context.Background(), dir, Options{})
	if err == nil {
		s2.Close()
		t.Fatal("second Open of the same directory succeeded")
	}
	if !errors.Is(err, ErrLocked) {
		t.Errorf("second Open: error %v, want ErrLocked", err)
	}
	// Other failures are not ErrLocked.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if s3, err := Open(context.Background(), file, Options{}); err == nil || errors.Is(err, ErrLocked) {
		if s3 != nil {
			s3.Close()
		}
		t.Errorf("Open of a file: error %v, want another than ErrLocked", err)
	}
}

func TestMaintenance(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := open(t, t.TempDir(), Options{Logger: logger, GCInterval: 10 * time.Millisecond, MemTableBytes: 1 << 20})
	rng := rand.New(rand.NewPCG(9, 10))
	for i := range 20 {
		ops := make([]store.Op, 50)
		for j := range ops {
			ops[j] = storetest.Train(fmt.Sprint(i, j), "spam", storetest.RandomBagOf(rng, 100, 100000))
		}
		train(t, s, "", ops...)
	}
	time.Sleep(50 * time.Millisecond) // let the collector run a few times
	if _, err := s.Compact(ctx); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	lsm, vlog := s.Size()
	if lsm <= 0 || vlog <= 0 {
		t.Errorf("Size = %d, %d; want both positive", lsm, vlog)
	}
	if err := s.Check(ctx, ""); err != nil {
		t.Error(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.Compact(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Compact after Close: %v", err)
	}
	if lsm, vlog := s.Size(); lsm != 0 || vlog != 0 {
		t.Errorf("Size after Close = %d, %d", lsm, vlog)
	}
	// Badger's informational chatter is dropped, and it had nothing worse
	// to say.
	if logs.Len() > 0 {
		t.Errorf("logged:\n%s", logs.String())
	}
}

func TestCompactInMemory(t *testing.T) {
	s := open(t, "", Options{InMemory: true})
	defer s.Close()
	train(t, s, "", storetest.Train("m1", "spam", map[bow.Hash]uint32{1: 1}))
	c, err := s.Compact(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c.Flushed || c.FlushSkipped != "" {
		t.Errorf("in-memory store: flushed %v, skipped %q; it has no memtables on disk", c.Flushed, c.FlushSkipped)
	}
	if _, vlog := s.Size(); vlog != 0 {
		t.Errorf("in-memory value log of %d bytes", vlog)
	}
}

func TestGCPanicIsLogged(t *testing.T) {
	var logs bytes.Buffer
	s := &Store{log: slog.New(slog.NewTextHandler(&logs, nil)), stopGC: make(chan struct{})}
	s.collectGarbage() // s.db is nil: RunValueLogGC panics
	if !strings.Contains(logs.String(), "value-log GC panicked") {
		t.Errorf("logged %q", logs.String())
	}
}

func TestBadgerLogger(t *testing.T) {
	var logs bytes.Buffer
	l := badgerLogger{slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	l.Errorf("disk %s\n", "full")
	l.Warningf("slow %d", 3)
	l.Infof("chatter")
	l.Debugf("more chatter")
	out := logs.String()
	for _, want := range []string{`level=ERROR msg="badger: disk full"`, `level=WARN msg="badger: slow 3"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "chatter") {
		t.Errorf("log has informational lines:\n%s", out)
	}
}

func BenchmarkLookup(b *testing.B) {
	b.Run("warm", func(b *testing.B) {
		s := open(b, b.TempDir(), Options{})
		defer s.Close()
		storetest.BenchLookup(b, s)
	})
	b.Run("cold", func(b *testing.B) {
		s := open(b, b.TempDir(), Options{CacheBytes: -1})
		defer s.Close()
		storetest.BenchLookup(b, s)
	})
}

func BenchmarkApply(b *testing.B) {
	b.Run("disk", func(b *testing.B) {
		s := open(b, b.TempDir(), Options{})
		defer s.Close()
		storetest.BenchApply(b, s)
	})
	b.Run("in memory", func(b *testing.B) {
		s := open(b, "", Options{InMemory: true})
		defer s.Close()
		storetest.BenchApply(b, s)
	})
}

// TestOpenAfterEmptyLogFile reproduces what a kill between Badger creating
// a log file and writing its header leaves behind.
func TestOpenAfterEmptyLogFile(t *testing.T) {
	for _, name := range []string{"00042.mem", "000042.vlog"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, Options{})
			train(t, s, "", storetest.Train("m1", "spam", map[bow.Hash]uint32{1: 1}))
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			s = open(t, dir, Options{Logger: testLogger(t)})
			defer s.Close()
			storetest.Expect(t, s, "", storetest.State{
				Messages: map[string]uint64{"spam": 1}, Tokens: map[string]uint64{"spam": 1}, Vocabulary: 1,
				Counts: map[bow.Hash]map[string]uint64{1: {"spam": 1}},
			})
			train(t, s, "", storetest.Train("m2", "spam", map[bow.Hash]uint32{1: 1}))
		})
	}
}

// testLogger returns a logger writing into t's log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, nil))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestOneTransaction applies a batch whose ops set its tokens ten
// thousand times, far past what a transaction takes at a 1 MiB memtable
// (some 1,600 writes), but changes only 201 keys: each changed key is
// written once, so the batch is one transaction, its keys of one version.
func TestOneTransaction(t *testing.T) {
	s := open(t, "", Options{InMemory: true, MemTableBytes: 1 << 20})
	defer s.Close()
	bag := map[bow.Hash]uint32{}
	for i := range 100 {
		bag[bow.Hash(i)] = 1
	}
	ops := make([]store.Op, 100)
	for i := range ops {
		ops[i] = storetest.Train(fmt.Sprint(i), "spam", bag)
	}
	train(t, s, "", ops...)
	versions := map[uint64]int{}
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if it.Item().Key()[0] != kindMeta {
				versions[it.Item().Version()]++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != 1 {
		t.Errorf("keys of %d versions, want 1: %v", len(versions), versions)
	}
	for _, n := range versions {
		if n != 201 {
			t.Errorf("%d keys, want 100 tokens, 100 seen records and the totals", n)
		}
	}
	storetest.Expect(t, s, "", storetest.State{
		Messages: map[string]uint64{"spam": 100}, Tokens: map[string]uint64{"spam": 10000}, Vocabulary: 100,
		Counts: map[bow.Hash]map[string]uint64{0: {"spam": 100}, 99: {"spam": 100}, 100: nil},
	})
}

// TestCommitFails fails one of the transactions of a split Apply, while
// the transaction after it is being prepared, and checks that the ops
// committed are the ops before it, all of them, and only those.
func TestCommitFails(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(13, 14))
	ops := make([]store.Op, 60)
	for i := range ops {
		ops[i] = store.Op{
			Digest: storetest.D(fmt.Sprint(i)), Class: []string{"spam", "ham"}[i%2],
			Bag: splitBag(storetest.RandomBagOf(rng, 300, 5000)), Steps: randomSteps(rng),
		}
	}
	for _, fail := range []int{0, 1, 2, 3} {
		t.Run(fmt.Sprintf("transaction %d", fail), func(t *testing.T) {
			s := open(t, t.TempDir(), Options{MemTableBytes: 1 << 20})
			defer s.Close()
			var starts []int
			boom := errors.New("disk on fire")
			s.commitErr = func(start int) error {
				starts = append(starts, start)
				if len(starts)-1 == fail {
					return boom
				}
				return nil
			}
			res, err := s.Apply(ctx, "u", ops)
			if !errors.Is(err, boom) {
				t.Fatalf("Apply: error %v, want the commit's", err)
			}
			if len(starts) != fail+1 {
				t.Fatalf("Apply went on after the failed commit: transactions from ops %v", starts)
			}
			if len(res) != starts[fail] {
				t.Fatalf("%d results, want %d for the ops of the transactions before the failed one", len(res), starts[fail])
			}
			m := store.NewMemory()
			if _, err := m.Apply(ctx, "u", ops[:len(res)]); err != nil {
				t.Fatal(err)
			}
			if err := s.Check(ctx, "u"); err != nil {
				t.Fatal(err)
			}
			gotT, _ := s.Totals(ctx, "u")
			wantT, _ := m.Totals(ctx, "u")
			if len(wantT.Classes) == 0 {
				// Apply registered the classes before it failed.
				wantT = store.Totals{Classes: gotT.Classes, Messages: []uint64{0, 0}, Tokens: []uint64{0, 0}}
			}
			if fmt.Sprint(gotT) != fmt.Sprint(wantT) {
				t.Errorf("Totals = %v, memory store has %v", gotT, wantT)
			}
			hashes := hashesOf(ops)
			for _, cache := range []string{"cached", "from Badger"} {
				if cache == "from Badger" {
					s.cache = newCache(-1)
				}
				got, _ := s.Lookup(ctx, "u", hashes)
				want, _ := m.Lookup(ctx, "u", hashes)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("Lookup %s differs from the memory store's", cache)
				}
			}
			// The store goes on from there.
			s.commitErr = nil
			res, err = s.Apply(ctx, "u", ops)
			if err != nil || len(res) != len(ops) {
				t.Fatalf("Apply again: %d results, %v", len(res), err)
			}
			if err := s.Check(ctx, "u"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestWarm(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, Options{})
	rng := rand.New(rand.NewPCG(3, 4))
	var ops []store.Op
	for i := range 50 {
		ops = append(ops, store.Op{
			Digest: storetest.D(fmt.Sprint(i)), Class: []string{"spam", "ham"}[i%2],
			Bag: splitBag(storetest.RandomBagOf(rng, 200, 20000)), Steps: randomSteps(rng),
		})
	}
	for _, user := range []string{"", "alice"} {
		if _, err := s.Apply(ctx, user, ops); err != nil {
			t.Fatal(err)
		}
	}
	want, err := s.Lookup(ctx, "", hashesOf(ops))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	// That a fill is dropped when a commit happened since the scan began
	// is TestCacheFill's; Warm goes through the same fillTokens.
	for _, tc := range []struct {
		name     string
		cache    int64
		wantWarm bool
	}{
		{"warms", 0, true},
		{"no cache", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, dir, Options{CacheBytes: tc.cache})
			defer s.Close()
			n, err := s.Warm(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantWarm != (n == len(hashesOf(ops))) {
				t.Errorf("Warm read %d tokens of %d", n, len(hashesOf(ops)))
			}
			hs := hashesOf(ops)
			checkCached(t, s, hs, want, tc.wantWarm)
			// Another user's tokens were not read in.
			if miss, _, _ := s.cache.getTokens("alice", hs[:1], make([]store.Counts, 1), 4, nil); len(miss) != 1 {
				t.Error("Warm of the global model cached alice's tokens")
			}
		})
	}
	s = open(t, dir, Options{})
	defer s.Close()
	if _, err := s.Warm(ctx, "../x"); !errors.Is(err, store.ErrInvalidUser) {
		t.Errorf("Warm of an invalid user: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Warm(cancelled, ""); !errors.Is(err, context.Canceled) {
		t.Errorf("Warm with a cancelled context: %v", err)
	}

	// A cache smaller than the model takes what one generation holds.
	small := open(t, t.TempDir(), Options{CacheBytes: 1 << 20})
	defer small.Close()
	rng = rand.New(rand.NewPCG(5, 6))
	var big []store.Op
	for i := range 100 {
		big = append(big, storetest.Train(fmt.Sprint(i), "spam", storetest.RandomBagOf(rng, 300, 1<<40)))
	}
	if _, err := small.Apply(ctx, "", big); err != nil {
		t.Fatal(err)
	}
	room := small.cache.room()
	if total := len(hashesOf(big)); total <= room {
		t.Fatalf("%d tokens fit the %d of a generation", total, room)
	}
	if n, err := small.Warm(ctx, ""); err != nil || n != room {
		t.Errorf("Warm read %d tokens (%v), want the %d a generation holds", n, err, room)
	}
}

// TestWarmByNeed checks that with Options.WarmByNeed a model is read into
// the cache whole once lookups have missed the cache for as many tokens
// as warmPoint says (an eighth of its vocabulary read from Badger, two
// thirds from the sealed file), and only then, only if it fits, and with
// what the store holds.
func TestWarmByNeed(t *testing.T) {
	ctx := context.Background()
	ops := fortyMessages(7)
	hs := hashesOf(ops)
	// The same model in Badger's keys and, loaded, in the sealed file.
	applied, sealed := t.TempDir(), t.TempDir()
	s := open(t, applied, Options{})
	if _, err := s.Apply(ctx, "", ops); err != nil {
		t.Fatal(err)
	}
	want, err := s.Lookup(ctx, "", hs)
	if err != nil {
		t.Fatal(err)
	}
	tot, err := s.Totals(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	mem := store.NewMemory()
	defer mem.Close()
	if _, err := mem.Apply(ctx, "", ops); err != nil {
		t.Fatal(err)
	}
	s = open(t, sealed, Options{})
	if err := s.Load(ctx, mem); err != nil {
		t.Fatal(err)
	}
	s.Close()
	due := int(tot.Vocabulary+7) / 8 // misses that make a warm of Badger's rows pay
	for _, tc := range []struct {
		name     string
		dir      string
		opts     Options
		misses   int
		wantWarm bool
	}{
		{"off", applied, Options{}, 2 * due, false},
		{"not yet", applied, Options{WarmByNeed: true}, due - 1, false},
		{"due", applied, Options{WarmByNeed: true}, due, true},
		{"does not fit", applied, Options{WarmByNeed: true, CacheBytes: 64 << 10}, 2 * due, false},
		// Its lookups read the file without the cache.
		{"sealed", sealed, Options{WarmByNeed: true}, 2 * int(tot.Vocabulary), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, tc.dir, tc.opts)
			defer s.Close()
			if _, err := s.Totals(ctx, ""); err != nil {
				t.Fatal(err)
			}
			// Tokens the model lacks, each a miss, in lookups of 10.
			absent := make([]bow.Hash, tc.misses)
			for i := range absent {
				absent[i] = bow.Hash(uint64(i+1)<<40 | 0xabc)
			}
			for start := 0; start < len(absent); start += 10 {
				if _, err := s.Lookup(ctx, "", absent[start:min(start+10, len(absent))]); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("%d misses, vocabulary %d", len(absent), tot.Vocabulary)
			checkCached(t, s, hs, want, tc.wantWarm)
		})
	}
}

func TestWarmInBackground(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, Options{})
	rng := rand.New(rand.NewPCG(7, 8))
	ops := []store.Op{storetest.Train("m", "spam", storetest.RandomBagOf(rng, 500, 1<<40))}
	if _, err := s.Apply(ctx, "", ops); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = open(t, dir, Options{})
	defer s.Close()
	hs := hashesOf(ops)
	stop := s.WarmInBackground(ctx, "")
	deadline := time.Now().Add(10 * time.Second)
	for {
		miss, _, _ := s.cache.getTokens("", hs, make([]store.Counts, len(hs)), 2, nil)
		if len(miss) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d tokens still not cached after 10 s", len(miss), len(hs))
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	// A warming stopped at once, before it read anything, ends too.
	s.WarmInBackground(ctx, "", "alice")()
}

// hashesOf returns the distinct hashes of ops' bags, sorted.
func hashesOf(ops []store.Op) []bow.Hash {
	set := map[bow.Hash]bool{}
	for _, op := range ops {
		for _, h := range op.Bag.Hashes() {
			set[h] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// TestUserSize checks that a model's size is the bytes of its keys and
// values, and only its own.
func TestUserSize(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir(), Options{})
	defer s.Close()
	size := func(user string) int64 {
		t.Helper()
		n, err := s.UserSize(ctx, user)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := size("alice"); n != 0 {
		t.Errorf("size of no model: %d", n)
	}
	train(t, s, "alice", storetest.TrainOn("m", "spam", dayEpoch, 0, map[bow.Hash]uint32{1: 1}))
	// "ualice\0" and the totals (vocabulary, classes, messages, tokens,
	// a day of three bytes, forgotten); "Talice\0" and a hash, and the
	// day and count; "Malice\0" and a digest, and the class, day, steps
	// and values.
	if got, want := size("alice"), int64(7+8+15+2+39+4); got != want {
		t.Errorf("size of a model of one token and one message: %d, want %d", got, want)
	}
	m := storetest.TrainValues("m2", "ham", map[bow.Hash]uint32{1: 2, 2: 1}, store.Value{Measure: 3, Level: 700})
	m.Mark = 77
	train(t, s, "alice", m)
	train(t, s, "al", storetest.Train("m", "spam", map[bow.Hash]uint32{5: 1}))
	train(t, s, "", storetest.Train("m", "spam", map[bow.Hash]uint32{5: 1}))
	// What the keys of each user add up to, counted over all of them.
	want := map[string]int64{}
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			if k[0] == kindMeta {
				continue
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			want[string(k[1:bytes.IndexByte(k, 0)])] += int64(len(k) + len(v))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"alice", "al", ""} {
		if got := size(u); got != want[u] || got == 0 {
			t.Errorf("size of %q: %d, want %d", u, got, want[u])
		}
	}
	if err := s.DeleteUser(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if got := size("alice"); got != 0 {
		t.Errorf("size of a deleted model: %d", got)
	}
	if got := size("al"); got != want["al"] {
		t.Errorf("size of %q after deleting another: %d, want %d", "al", got, want["al"])
	}
	if _, err := s.UserSize(ctx, "../al"); !errors.Is(err, store.ErrInvalidUser) {
		t.Errorf("UserSize of an invalid user: %v", err)
	}
}

// checkCached checks that the cache holds all of the global model's
// tokens hs, or not all, as warm says, and that Lookup returns want, what
// Badger holds, for them.
func checkCached(t *testing.T, s *Store, hs []bow.Hash, want []store.Counts, warm bool) {
	t.Helper()
	miss, _, _ := s.cache.getTokens("", hs, make([]store.Counts, len(hs)), 4, nil)
	if got := len(miss) == 0; got != warm {
		t.Fatalf("%d of %d tokens not cached; want warm %v", len(miss), len(hs), warm)
	}
	got, err := s.Lookup(context.Background(), "", hs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("token %x: %v from the store, %v in Badger", hs[i], got[i], want[i])
		}
	}
}

// fortyMessages returns ops training 40 messages, spam and ham in turn,
// of 200 tokens each drawn with seed.
func fortyMessages(seed uint64) []store.Op {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	var ops []store.Op
	for i := range 40 {
		ops = append(ops, storetest.Train(fmt.Sprint(i), []string{"spam", "ham"}[i%2], storetest.RandomBagOf(rng, 200, 1<<40)))
	}
	return ops
}

// TestWarmWhole follows a cache that a warm filled with a whole model:
// a token it lacks is then a token the model lacks, answered without a
// Badger read, through commits that add and delete tokens, until the
// model is replaced. A warm cut short by the cache's size does not count.
func TestWarmWhole(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, Options{})
	ops := fortyMessages(9)
	for _, user := range []string{"", "alice"} {
		if _, err := s.Apply(ctx, user, ops); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	absent := []bow.Hash{1, 2, 3} // RandomBagOf draws from far more
	misses := func(s *Store, user string, hs []bow.Hash) int {
		miss, _, _ := s.cache.getTokens(user, hs, make([]store.Counts, len(hs)), 4, nil)
		return len(miss)
	}
	s = open(t, dir, Options{})
	defer s.Close()
	if n := misses(s, "", absent); n != len(absent) {
		t.Fatalf("before the warm, %d of %d absent tokens missed", n, len(absent))
	}
	if _, err := s.Warm(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if n := misses(s, "", absent); n != 0 {
		t.Errorf("after the warm, %d absent tokens missed", n)
	}
	// alice, whose tokens the cache holds some of, but not all.
	if _, err := s.Lookup(ctx, "alice", hashesOf(ops[:1])); err != nil {
		t.Fatal(err)
	}
	if n := misses(s, "alice", absent); n != len(absent) {
		t.Errorf("alice, not warmed: %d of %d absent tokens missed", n, len(absent))
	}

	// A commit that adds tokens and one that forgets a message, deleting
	// the tokens only it had: Lookup answers from the cache as a fresh
	// store answers from Badger.
	added := storetest.Train("new", "spam", storetest.RandomBagOf(rand.New(rand.NewPCG(11, 12)), 300, 1<<40))
	if _, err := s.Apply(ctx, "", []store.Op{added, {Digest: ops[0].Digest, Bag: ops[0].Bag}}); err != nil {
		t.Fatal(err)
	}
	hs := append(slices.Concat(hashesOf(ops), hashesOf([]store.Op{added})), absent...)
	if n := misses(s, "", hs); n != 0 {
		t.Errorf("after commits, %d of %d tokens missed", n, len(hs))
	}
	got, err := s.Lookup(ctx, "", hs)
	if err != nil {
		t.Fatal(err)
	}
	fresh := open(t, t.TempDir(), Options{})
	defer fresh.Close()
	if _, err := fresh.Apply(ctx, "", ops); err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.Apply(ctx, "", []store.Op{added, {Digest: ops[0].Digest, Bag: ops[0].Bag}}); err != nil {
		t.Fatal(err)
	}
	want, err := fresh.Lookup(ctx, "", hs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range hs {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("token %x: %v from the whole cache, %v from Badger", hs[i], got[i], want[i])
		}
	}

	if err := s.DeleteUser(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if n := misses(s, "", absent); n != len(absent) {
		t.Errorf("after the model was deleted, %d of %d absent tokens missed", n, len(absent))
	}

	// A cache smaller than the model is never whole.
	small := open(t, t.TempDir(), Options{CacheBytes: 256 << 10})
	defer small.Close()
	if _, err := small.Apply(ctx, "", ops); err != nil {
		t.Fatal(err)
	}
	if room := small.cache.room(); len(hashesOf(ops)) <= room {
		t.Fatalf("%d tokens fit the %d of a generation", len(hashesOf(ops)), room)
	}
	if _, err := small.Warm(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if n := misses(small, "", absent); n != len(absent) {
		t.Errorf("after a warm cut short, %d of %d absent tokens missed", n, len(absent))
	}
}
