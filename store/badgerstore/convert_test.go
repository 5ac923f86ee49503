package badgerstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/ristretto/v2/z"
	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/storetest"
)

// v1Model is one user's model as a schema-1 store held it.
type v1Model struct {
	counts map[bow.Hash][]uint64 // per class index
	seen   map[string]int        // message name → class index
}

// appendCountsV1 appends counts as schema 1 stored them: a uvarint per
// class index, trailing zeros dropped.
func appendCountsV1(dst []byte, counts []uint64) []byte {
	n := len(counts)
	for n > 0 && counts[n-1] == 0 {
		n--
	}
	for _, v := range counts[:n] {
		dst = binary.AppendUvarint(dst, v)
	}
	return dst
}

// appendTokenKeyV3 returns the key of a token row of schemas 2 and 3.
func appendTokenKeyV3(user string, h bow.Hash) []byte {
	return binary.BigEndian.AppendUint64(userPrefix(kindTokenV3, user), uint64(h))
}

// appendSeenKeyV2 appends the key of a seen record of schemas 1 and 2.
func appendSeenKeyV2(dst []byte, user string, d store.Digest) []byte {
	return append(appendUserPrefix(dst, kindSeenV2, user), d[:]...)
}

// appendSeenV2 appends a seen record of schema 2: the class index as a
// uvarint, then the steps as zigzag varints.
func appendSeenV2(dst []byte, r seenRec) []byte {
	dst = binary.AppendUvarint(dst, uint64(r.class))
	n := len(r.steps) &^ 1
	for n > 0 && r.steps[n-1] == 0 && r.steps[n-2] == 0 {
		n -= 2
	}
	for _, s := range r.steps[:n] {
		dst = binary.AppendVarint(dst, s)
	}
	return dst
}

// appendTotalsV3 appends totals as schemas 1 to 3 stored them: the
// vocabulary, the number of classes and a pair of message and token totals
// per class, as uvarints.
func appendTotalsV3(dst []byte, t *totals) []byte {
	dst = binary.AppendUvarint(dst, t.vocabulary)
	dst = binary.AppendUvarint(dst, uint64(len(t.messages)))
	for i := range t.messages {
		dst = binary.AppendUvarint(dst, t.messages[i])
		dst = binary.AppendUvarint(dst, t.tokens[i])
	}
	return dst
}

// writeV1 writes a schema-1 store of classes and models into dir, key by
// key, as a build of schema 1 left it; extra keys and values go in too.
func writeV1(t *testing.T, dir string, classes []string, models map[string]v1Model, extra map[string][]byte) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	wb := db.NewWriteBatch()
	set := func(k, v []byte) {
		if err := wb.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	m, err := encodeMeta(meta{Schema: 1, Classes: classes})
	if err != nil {
		t.Fatal(err)
	}
	set(metaKey, m)
	for user, mod := range models {
		tot := totals{messages: make([]uint64, len(classes)), tokens: make([]uint64, len(classes))}
		for h, counts := range mod.counts {
			key := binary.BigEndian.AppendUint64(userPrefix(kindTokenV1, user), uint64(h))
			set(key, appendCountsV1(nil, counts))
			for c, n := range counts {
				tot.tokens[c] += n
			}
			tot.vocabulary++
		}
		for name, c := range mod.seen {
			set(appendSeenKeyV2(nil, user, storetest.D(name)), binary.AppendUvarint(nil, uint64(c)))
			tot.messages[c]++
		}
		set(totalsKey(user), appendTotalsV3(nil, &tot))
	}
	for k, v := range extra {
		set([]byte(k), v)
	}
	if err := wb.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// expectV1 fails t unless s holds models as writeV1 wrote them, with
// weights all zero, and passes Check.
func expectV1(t *testing.T, s store.Store, classes []string, models map[string]v1Model) {
	t.Helper()
	for user, mod := range models {
		want := storetest.State{
			Messages: map[string]uint64{}, Tokens: map[string]uint64{},
			Counts: map[bow.Hash]map[string]uint64{}, Seen: map[string]string{},
		}
		for h, counts := range mod.counts {
			want.Counts[h] = map[string]uint64{}
			for c, n := range counts {
				want.Counts[h][classes[c]] = n
				want.Tokens[classes[c]] += n
			}
			want.Vocabulary++
		}
		for name, c := range mod.seen {
			want.Seen[name] = classes[c]
			want.Messages[classes[c]]++
		}
		storetest.Expect(t, s, user, want)
	}
}

// randomV1 returns models of users, of classes classes, with tokens
// tokens each.
func randomV1(rng *rand.Rand, users []string, classes, tokens int) map[string]v1Model {
	models := map[string]v1Model{}
	for _, u := range users {
		mod := v1Model{counts: map[bow.Hash][]uint64{}, seen: map[string]int{}}
		for len(mod.counts) < tokens {
			counts := make([]uint64, 1+rng.IntN(classes))
			counts[len(counts)-1] = 1 + rng.Uint64N(1000) // none all zero
			for c := range counts[:len(counts)-1] {
				counts[c] = rng.Uint64N(3)
			}
			mod.counts[bow.Hash(rng.Uint64())] = counts
		}
		for m := range tokens / 10 {
			mod.seen[fmt.Sprint("m", m)] = rng.IntN(classes)
		}
		models[u] = mod
	}
	return models
}

// kinds counts the keys of dir's store by kind, and returns its schema.
func kinds(t *testing.T, dir string) (map[byte]int, int) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	// A kill can leave an empty log file, as Open knows.
	for retry := 0; err != nil && retry < 3 && strings.Contains(err.Error(), z.NewFile.Error()); retry++ {
		db, err = badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	}
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := map[byte]int{}
	var m meta
	err = db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n[it.Item().Key()[0]]++
		}
		var err error
		m, err = metaIn(txn)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n, m.Schema
}

func TestConvert(t *testing.T) {
	ctx := context.Background()
	classes := []string{"spam", "ham", "unsure"}
	models := map[string]v1Model{
		"": {
			counts: map[bow.Hash][]uint64{1: {2, 1}, 2: {0, 3}, 3: {1}, 4: {0, 0, 5}, 1 << 63: {1 << 40}},
			seen:   map[string]int{"m1": 0, "m2": 1, "m3": 2},
		},
		"alice": {
			counts: map[bow.Hash][]uint64{1: {1}, 5: {0, 1}},
			seen:   map[string]int{"m1": 1},
		},
	}
	dir := t.TempDir()
	writeV1(t, dir, classes, models, nil)
	s := open(t, dir, Options{Logger: testLogger(t)})
	expectV1(t, s, classes, models)
	// Messages trained in schema 1 untrain with no steps, and train anew
	// with theirs.
	train(t, s, "alice",
		store.Op{Digest: storetest.D("m1"), Class: "spam", Bag: bow.FromMaps(nil, map[bow.Hash]uint32{5: 1}), Steps: []store.Step{{Class: "spam", Body: 7}}},
	)
	storetest.Expect(t, s, "alice", storetest.State{
		Messages: map[string]uint64{"spam": 1}, Tokens: map[string]uint64{"spam": 2}, Vocabulary: 2,
		Counts:  map[bow.Hash]map[string]uint64{1: {"spam": 1}, 5: {"spam": 1}},
		Weights: map[bow.Hash]map[string]int64{5: {"spam": 7}},
		Seen:    map[string]string{"m1": "spam"},
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	n, schema := kinds(t, dir)
	if schema != schemaVersion || n[kindTokenV1]+n[kindTokenV3] != 0 || n[kindToken] != 7 || n[kindSeenV2]+n[kindSeenV3] != 0 || n[kindSeen] != 4 {
		t.Errorf("after the conversion: schema %d, keys by kind %v", schema, n)
	}
	// Opening again converts nothing.
	s = open(t, dir, Options{convertErr: func(int) error { return errors.New("converted again") }})
	defer s.Close()
	tot, err := s.Totals(ctx, "")
	if err != nil || strings.Join(tot.Classes, ",") != "spam,ham,unsure" {
		t.Errorf("Totals = %+v, %v", tot, err)
	}
}

// TestConvertUndecodable checks that a schema-1 value that does not decode
// is moved as it is, for Check to report, and does not stop the Open.
func TestConvertUndecodable(t *testing.T) {
	dir := t.TempDir()
	classes := []string{"spam"}
	models := map[string]v1Model{"u": {counts: map[bow.Hash][]uint64{1: {1}}, seen: map[string]int{"m1": 0}}}
	bad := string(binary.BigEndian.AppendUint64(userPrefix(kindTokenV1, "u"), 2))
	writeV1(t, dir, classes, models, map[string][]byte{bad: {0x80}})
	s := open(t, dir, Options{})
	defer s.Close()
	err := s.Check(context.Background(), "u")
	if !errors.Is(err, store.ErrInconsistent) || !strings.Contains(err.Error(), "undecodable") {
		t.Errorf("Check: %v, want it to report the undecodable value", err)
	}
}

// TestConvertInterrupted stops the conversion after each of its
// transactions in turn, as a crash between two would, and checks that the
// store is left with every token and every seen record under one kind,
// never two, at schema 1 while tokens move to schema 2, at 2 while seen
// records move to schema 3, and at 3 while both move to schema 4, and
// that the next Open goes on from there to a correct store.
func TestConvertInterrupted(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	classes := []string{"spam", "ham", "unsure"}
	models := randomV1(rng, []string{"", "alice", "bob"}, len(classes), 300)
	dir := t.TempDir()
	writeV1(t, dir, classes, models, nil)
	crash := errors.New("killed")
	const perTxn = 64
	tokenTxns, seenTxns := (900+perTxn-1)/perTxn, (90+perTxn-1)/perTxn
	// The runs, in order, and the schema the store says during each.
	type run struct {
		kind   byte
		keys   int
		schema int
	}
	var runs []run
	for _, r := range []run{{kindTokenV3, 900, 1}, {kindSeenV3, 90, 2}, {kindToken, 900, 3}, {kindSeen, 90, 3}} {
		for range (r.keys + perTxn - 1) / perTxn {
			runs = append(runs, r)
		}
	}
	for opens := 1; ; opens++ {
		s, err := Open(context.Background(), dir, Options{
			convertKeys: perTxn,
			convertErr: func(txns int) error {
				if txns == 1 {
					return crash
				}
				return nil
			},
		})
		if err == nil {
			// The last run moved the rest, and stopped once nothing was
			// left, before the hook was called again.
			if want := 2*tokenTxns + 2*seenTxns; opens != want+1 {
				t.Errorf("%d opens, want one a transaction, %d, and one to finish", opens, want)
			}
			expectV1(t, s, classes, models)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			break
		}
		if !errors.Is(err, crash) {
			t.Fatalf("Open #%d: %v", opens, err)
		}
		if opens > len(runs) {
			t.Fatalf("Open #%d still converting", opens)
		}
		n, schema := kinds(t, dir)
		r := runs[opens-1]
		// The keys moved by this run's kind so far.
		done := 0
		for _, prev := range runs[:opens] {
			if prev.kind == r.kind {
				done += perTxn
			}
		}
		ok := n[kindTokenV1]+n[kindTokenV3]+n[kindToken] == 900 && n[kindSeenV2]+n[kindSeenV3]+n[kindSeen] == 90 &&
			schema == r.schema && n[r.kind] == min(done, r.keys)
		if !ok {
			t.Fatalf("after %d interrupted opens: schema %d, keys by kind %v", opens, schema, n)
		}
	}
	n, schema := kinds(t, dir)
	if schema != schemaVersion || n[kindToken] != 900 || n[kindSeen] != 90 || n[kindTokenV1]+n[kindTokenV3]+n[kindSeenV2]+n[kindSeenV3] != 0 {
		t.Errorf("after the conversion: schema %d, keys by kind %v", schema, n)
	}
}

// convertCrashEnv, set in the environment of a re-executed test binary,
// makes TestConvertCrash open the store in that directory, converting it.
const convertCrashEnv = "SPAMD_BADGERSTORE_CONVERT_CRASH"

// TestConvertCrash kills processes converting a schema-1 store at random
// moments until one finishes, checking after each kill that every token
// is under one kind, never both, and at the end that the store is right.
func TestConvertCrash(t *testing.T) {
	if dir := os.Getenv(convertCrashEnv); dir != "" {
		// Transactions of a few keys, so that kills land between them
		// too, not only in Badger's replay.
		childOpen(dir, Options{convertKeys: 4})
	}
	if testing.Short() {
		t.Skip("kills child processes")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	classes := []string{"spam", "ham"}
	models := randomV1(rng, []string{"", "alice"}, len(classes), 3000)
	dir := t.TempDir()
	writeV1(t, dir, classes, models, nil)
	kills := 0
	for done := false; !done; {
		if kills > 200 {
			t.Fatal("no child finished converting")
		}
		cmd, out := startChild(t, "TestConvertCrash", convertCrashEnv+"="+dir)
		opened := make(chan bool, 1)
		go func() {
			sc := bufio.NewScanner(out)
			ok := false
			for sc.Scan() {
				ok = ok || sc.Text() == "opened"
			}
			opened <- ok
		}()
		// The window grows with the kills: under -race on a loaded
		// machine a child may spend most of 300 ms starting, and the
		// conversion must finish some time.
		time.Sleep(time.Duration(rng.IntN(300+20*kills)) * time.Millisecond)
		cmd.Process.Kill()
		done = <-opened
		cmd.Wait()
		if !done {
			kills++
		}
		n, schema := kinds(t, dir)
		if n[kindToken]+n[kindTokenV3]+n[kindTokenV1] != 6000 || schema > 1 && n[kindTokenV1] != 0 ||
			n[kindSeen]+n[kindSeenV3]+n[kindSeenV2] != 600 || schema > 2 && n[kindSeenV2] != 0 ||
			schema == schemaVersion && n[kindTokenV3]+n[kindSeenV3] != 0 {
			t.Fatalf("after %d kills: schema %d, keys by kind %v", kills, schema, n)
		}
		t.Logf("after %d kills, finished %v: schema %d, %d of 6000 tokens converted", kills, done, schema, n[kindToken])
	}
	s := open(t, dir, Options{})
	defer s.Close()
	expectV1(t, s, classes, models)
}

// TestConvertSchema2 opens a store of schema 2, whose seen records hold
// steps and no values: they move to schema 3 with their steps, untrain
// exactly, and messages trained after the conversion add their values.
func TestConvertSchema2(t *testing.T) {
	dir := t.TempDir()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := encodeMeta(meta{Schema: 2, Classes: []string{"spam", "ham"}})
	err = db.Update(func(txn *badger.Txn) error {
		for k, v := range map[string][]byte{
			string(metaKey): m,
			// m1 trained as spam with a body step of 5 (spam) and -5 (ham)
			// on token 1, twice in its body.
			string(appendTokenKeyV3("u", 1)):                     appendRowV3(nil, []uint64{2, 10, 0, uint64(1<<64 - 10)}),
			string(appendSeenKeyV2(nil, "u", storetest.D("m1"))): appendSeenV2(nil, seenRec{class: 0, steps: []int64{0, 5, 0, -5}}),
			string(totalsKey("u")):                               appendTotalsV3(nil, &totals{messages: []uint64{1}, tokens: []uint64{2}, vocabulary: 1}),
		} {
			if err := txn.Set([]byte(k), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir, Options{})
	defer s.Close()
	storetest.Expect(t, s, "u", storetest.State{
		Messages: map[string]uint64{"spam": 1}, Tokens: map[string]uint64{"spam": 2}, Vocabulary: 1,
		Counts:  map[bow.Hash]map[string]uint64{1: {"spam": 2}},
		Weights: map[bow.Hash]map[string]int64{1: {"spam": 10, "ham": -10}},
		Seen:    map[string]string{"m1": "spam"},
	})
	train(t, s, "u",
		store.Op{Digest: storetest.D("m1"), Bag: bow.FromMaps(nil, map[bow.Hash]uint32{1: 2})},
		storetest.TrainValues("m2", "ham", map[bow.Hash]uint32{1: 1}, store.Value{Measure: 4, Level: 500}),
	)
	storetest.Expect(t, s, "u", storetest.State{
		Messages: map[string]uint64{"ham": 1}, Tokens: map[string]uint64{"ham": 1}, Vocabulary: 1,
		Counts: map[bow.Hash]map[string]uint64{1: {"ham": 1}},
		Seen:   map[string]string{"m1": "", "m2": "ham"},
		Values: map[string]map[uint8][]uint16{"ham": {4: {500}}},
	})
}

// writeV3 writes a schema-3 store into dir, as a build of schema 3 left
// it: alice's model of two messages with steps and values, and upgraded
// in the meta record if not 0, as a conversion to schema 4 cut off after
// it began leaves it; extra keys and values go in too, a nil value
// deleting the key.
func writeV3(t *testing.T, dir string, upgraded store.Day, extra map[string][]byte) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := encodeMeta(meta{Schema: 3, Classes: []string{"spam", "ham"}, Upgraded: upgraded})
	d1, d2 := storetest.D("m1"), storetest.D("m2")
	err = db.Update(func(txn *badger.Txn) error {
		for k, v := range map[string][]byte{
			string(metaKey): m,
			// m1 spam: token 1 twice in its body with a body step of 5,
			// token 2 once; m2 ham: token 2 once, token 3 three times.
			string(appendTokenKeyV3("alice", 1)):                                   appendRowV3(nil, []uint64{2, 10}),
			string(appendTokenKeyV3("alice", 2)):                                   appendRowV3(nil, []uint64{1, 5, 1}),
			string(appendTokenKeyV3("alice", 3)):                                   appendRowV3(nil, []uint64{0, 0, 3}),
			string(append(userPrefix(kindSeenV3, "alice"), d1[:]...)):              appendSeenV3(nil, seenRec{class: 0, steps: []int64{0, 5}, values: []store.Value{{Measure: 2, Level: 40}}}),
			string(append(userPrefix(kindSeenV3, "alice"), d2[:]...)):              appendSeenV3(nil, seenRec{class: 1}),
			string(appendSampleKey(nil, "alice", sampleKey{measure: 2, class: 0})): appendSample(nil, storetest.SampleOf(40)),
			string(totalsKey("alice")):                                             appendTotalsV3(nil, &totals{messages: []uint64{1, 1}, tokens: []uint64{3, 4}, vocabulary: 3}),
		} {
			if err := txn.Set([]byte(k), v); err != nil {
				return err
			}
		}
		for k, v := range extra {
			if v == nil {
				err = txn.Delete([]byte(k))
			} else {
				err = txn.Set([]byte(k), v)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// v3Days is what dayDump gives for the model writeV3 writes, every row
// and seen record on day d.
func v3Days(d store.Day) string {
	d1, d2 := storetest.D("m1"), storetest.D("m2")
	if bytes.Compare(d1[:], d2[:]) > 0 {
		d1, d2 = d2, d1
	}
	return fmt.Sprintf("T1 %[1]s T2 %[1]s T3 %[1]s M%[2]x %[1]s 0 M%[3]x %[1]s 0 ", d, d1, d2)
}

// TestConvertSchema3 opens a store of schema 3, whose rows and seen
// records have no day: they get the day of the upgrade, which the meta
// record keeps, as does the totals' last day, and no mark; nothing is
// then old enough for a prune by age, and training goes on from there.
func TestConvertSchema3(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeV3(t, dir, 0, nil)
	before := store.DayOf(time.Now())
	s := open(t, dir, Options{})
	after := store.DayOf(time.Now())
	up := s.upgraded
	if up < before || up > after {
		t.Fatalf("upgraded on day %s, between %s and %s", up, before, after)
	}
	want := storetest.State{
		Messages: map[string]uint64{"spam": 1, "ham": 1}, Tokens: map[string]uint64{"spam": 3, "ham": 4}, Vocabulary: 3,
		Counts:  map[bow.Hash]map[string]uint64{1: {"spam": 2}, 2: {"spam": 1, "ham": 1}, 3: {"ham": 3}},
		Weights: map[bow.Hash]map[string]int64{1: {"spam": 10}, 2: {"spam": 5}},
		Seen:    map[string]string{"m1": "spam", "m2": "ham"},
		Values:  map[string]map[uint8][]uint16{"spam": {2: {40}}},
	}
	storetest.Expect(t, s, "alice", want)
	if got, want := dayDump(t, s, "alice"), v3Days(up); got != want {
		t.Errorf("days and marks after the upgrade:\n%s\nwant\n%s", got, want)
	}
	if tot, _ := s.Totals(ctx, "alice"); tot.LastDay != up {
		t.Errorf("last day %s, want the day of the upgrade, %s", tot.LastDay, up)
	}
	// Nothing is older than the upgrade, so a prune of what was last
	// trained before it takes nothing.
	if res, err := s.Prune(ctx, "alice", store.PruneRule{MaxCount: 1000, Before: up, SeenBefore: up}); err != nil || res.Tokens+res.Seen != 0 {
		t.Errorf("Prune before the day of the upgrade: %+v, %v", res, err)
	}

	// Training later moves the days on; an op of an older day moves none
	// back; untraining m1, which took token 1 whole, leaves token 2 its
	// day, and m1's steps and values are taken back exactly.
	train(t, s, "alice", storetest.TrainOn("m3", "spam", up+3, 7, map[bow.Hash]uint32{2: 1}))
	train(t, s, "alice", storetest.TrainOn("m4", "ham", up-10, 0, map[bow.Hash]uint32{2: 1, 3: 1}))
	train(t, s, "alice", store.Op{Digest: storetest.D("m1"), Bag: bow.FromMaps(nil, map[bow.Hash]uint32{1: 2, 2: 1})})
	if got, want := dayDump(t, s, "alice"), fmt.Sprintf("T2 %s T3 %s ", up+3, up); !strings.HasPrefix(got, want) {
		t.Errorf("days after training: %s, want them to start with %s", got, want)
	}
	if err := s.Check(ctx, "alice"); err != nil {
		t.Error(err)
	}
	if tot, _ := s.Totals(ctx, "alice"); tot.LastDay != up+3 {
		t.Errorf("last day %s, want %s", tot.LastDay, up+3)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Opening again converts nothing, and the meta record keeps the day.
	s = open(t, dir, Options{convertErr: func(int) error { return errors.New("converted again") }})
	defer s.Close()
	if s.upgraded != up {
		t.Errorf("reopened: upgraded on %s, want %s", s.upgraded, up)
	}
}

// TestConvertSchema3Resumed opens a store whose conversion to schema 4
// began on an earlier day and was cut off, leaving one row converted: the
// rest get the day it began, not today's.
func TestConvertSchema3Resumed(t *testing.T) {
	const began = store.Day(19000)
	dir := t.TempDir()
	// Token 1 was moved, with its day, before the cut.
	writeV3(t, dir, began, map[string][]byte{
		string(appendTokenKeyV3("alice", 1)):    nil,
		string(appendTokenKey(nil, "alice", 1)): appendRow(nil, began, []uint64{2, 10}),
	})
	s := open(t, dir, Options{})
	defer s.Close()
	if got, want := dayDump(t, s, "alice"), v3Days(began); got != want {
		t.Errorf("days after the resumed upgrade:\n%s\nwant\n%s", got, want)
	}
	if tot, _ := s.Totals(context.Background(), "alice"); tot.LastDay != began || s.upgraded != began {
		t.Errorf("last day %s, upgraded on %s; want %s", tot.LastDay, s.upgraded, began)
	}
	if err := s.Check(context.Background(), "alice"); err != nil {
		t.Error(err)
	}
}

// dayDump lists user's rows and seen records as Dump gives them, by their
// days and marks: "T<hash> <day> " and "M<digest> <day> <mark> ".
func dayDump(t *testing.T, s store.Store, user string) string {
	t.Helper()
	var b strings.Builder
	err := s.Dump(context.Background(), user, func(r store.Record) error {
		switch {
		case r.Counts != nil:
			fmt.Fprintf(&b, "T%x %s ", uint64(r.Hash), r.Day)
		case r.Class != "":
			fmt.Fprintf(&b, "M%x %s %x ", r.Digest, r.Day, r.Mark)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
