package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
)

// TrainOn returns Train's op with a day and a mark.
func TrainOn(name, class string, day store.Day, mark uint64, bag map[bow.Hash]uint32) store.Op {
	op := Train(name, class, bag)
	op.Day, op.Mark = day, mark
	return op
}

// testDays checks that rows keep the latest day they were trained on and
// seen records their own day and mark, and that the totals know the last
// day trained.
func testDays(t *testing.T, open Opener) {
	ctx := context.Background()
	s := openClosing(t, open)
	ops := []store.Op{
		TrainOn("m1", "spam", 20, 0xfeed, map[bow.Hash]uint32{1: 1, 2: 3}),
		TrainOn("m2", "ham", 10, 0, map[bow.Hash]uint32{2: 1, 3: 5}),
	}
	if _, err := s.Apply(ctx, "alice", ops); err != nil {
		t.Fatal(err)
	}
	d := dumpOf(t, s, "alice")
	if want := map[bow.Hash]store.Day{1: 20, 2: 20, 3: 10}; fmt.Sprint(d.days) != fmt.Sprint(want) {
		t.Errorf("token days %v, want %v", d.days, want)
	}
	if got, want := d.marks[D("m1")], "1970-01-21 000000000000feed"; got != want {
		t.Errorf("seen record of m1: %q, want %q", got, want)
	}
	tot, err := s.Totals(ctx, "alice")
	if err != nil || tot.LastDay != 20 {
		t.Errorf("Totals: last day %d, %v; want 20", tot.LastDay, err)
	}
	// Untraining moves no day back.
	if _, err := s.Apply(ctx, "alice", []store.Op{Forget("m1", map[bow.Hash]uint32{1: 1, 2: 3})}); err != nil {
		t.Fatal(err)
	}
	if d := dumpOf(t, s, "alice"); d.days[2] != 20 || d.days[3] != 10 {
		t.Errorf("after a forget: token days %v", d.days)
	}
	if tot, _ := s.Totals(ctx, "bob"); tot.LastDay != 0 {
		t.Errorf("a user without a model has last day %d", tot.LastDay)
	}

	// One message trained as two classes under two digests, as a store
	// written before digests ignored what delivery adds could hold: the
	// marks tell, and Check says so. Twice as one class, or two messages
	// without a mark, are no problem.
	if _, err := s.Apply(ctx, "carol", []store.Op{
		TrainOn("delivered", "ham", 30, 0xabc, map[bow.Hash]uint32{7: 1}),
		TrainOn("copy", "ham", 30, 0xabc, map[bow.Hash]uint32{7: 1}),
		TrainOn("x", "ham", 30, 0, map[bow.Hash]uint32{8: 1}),
		TrainOn("y", "spam", 30, 0, map[bow.Hash]uint32{8: 1}),
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx, "carol"); err != nil {
		t.Errorf("Check: %v", err)
	}
	if _, err := s.Apply(ctx, "carol", []store.Op{TrainOn("reported", "spam", 31, 0xabc, map[bow.Hash]uint32{7: 1})}); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx, "carol"); !errors.Is(err, store.ErrInconsistent) || !strings.Contains(err.Error(), "0000000000000abc trained as") {
		t.Errorf("Check of a message trained as two classes: %v", err)
	}
}

// testPrune checks the age rule, the budget and the seen records' age,
// that what goes leaves the totals exact, and that untraining a message
// whose tokens went brings back no row.
func testPrune(t *testing.T, open Opener) {
	ctx := context.Background()
	// tokens: 1 (spam 1, day 10), 2 (spam 3 + ham 1 = 4, day 20),
	// 3 (ham 5, day 20), 4 (ham 1, day 20), 5 (ham 4, day 20).
	base := []store.Op{
		TrainOn("m1", "spam", 10, 1, map[bow.Hash]uint32{1: 1, 2: 3}),
		TrainOn("m2", "ham", 20, 2, map[bow.Hash]uint32{2: 1, 3: 5, 4: 1, 5: 4}),
	}
	base[0].Steps = []store.Step{{Class: "spam", Head: 0, Body: 100}}
	base[0].Values = []store.Value{{Measure: 1, Level: 7}}
	base[1].Values = []store.Value{{Measure: 1, Level: 9}}
	tests := []struct {
		name   string
		rule   store.PruneRule
		result store.PruneResult
		rows   []bow.Hash // the tokens left
		seen   map[string]string
		forgot map[string]uint64
	}{
		{"nothing", store.PruneRule{}, store.PruneResult{Vocabulary: 5}, []bow.Hash{1, 2, 3, 4, 5}, map[string]string{"m1": "spam", "m2": "ham"}, nil},
		{"age rule: old and rare", store.PruneRule{MaxCount: 1, Before: 15}, store.PruneResult{Tokens: 1, Vocabulary: 4}, []bow.Hash{2, 3, 4, 5}, map[string]string{"m1": "spam", "m2": "ham"}, nil},
		{"age rule: rare, all old", store.PruneRule{MaxCount: 1, Before: 21}, store.PruneResult{Tokens: 2, Vocabulary: 3}, []bow.Hash{2, 3, 5}, map[string]string{"m1": "spam", "m2": "ham"}, nil},
		{"age rule: up to 4", store.PruneRule{MaxCount: 4, Before: 21}, store.PruneResult{Tokens: 4, Vocabulary: 1}, []bow.Hash{3}, map[string]string{"m1": "spam", "m2": "ham"}, nil},
		{"budget, least used first", store.PruneRule{MaxTokens: 3}, store.PruneResult{Tokens: 2, Vocabulary: 3}, []bow.Hash{2, 3, 5}, map[string]string{"m1": "spam", "m2": "ham"}, nil},
		// 2 and 5 tie at 4 on day 20: both go.
		{"budget, ties go together", store.PruneRule{MaxTokens: 2}, store.PruneResult{Tokens: 4, Vocabulary: 1}, []bow.Hash{3}, map[string]string{"m1": "spam", "m2": "ham"}, nil},
		{"budget already kept", store.PruneRule{MaxTokens: 5}, store.PruneResult{Vocabulary: 5}, []bow.Hash{1, 2, 3, 4, 5}, map[string]string{"m1": "spam", "m2": "ham"}, nil},
		{"age rule and budget", store.PruneRule{MaxCount: 1, Before: 15, MaxTokens: 3}, store.PruneResult{Tokens: 2, Vocabulary: 3}, []bow.Hash{2, 3, 5}, map[string]string{"m1": "spam", "m2": "ham"}, nil},
		{"seen records", store.PruneRule{SeenBefore: 15}, store.PruneResult{Seen: 1, Vocabulary: 5}, []bow.Hash{1, 2, 3, 4, 5}, map[string]string{"m2": "ham"}, map[string]uint64{"spam": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openClosing(t, open)
			for _, u := range []string{"alice", "bob"} {
				if _, err := s.Apply(ctx, u, base); err != nil {
					t.Fatal(err)
				}
			}
			before := dumpOf(t, s, "alice")
			res, err := s.Prune(ctx, "alice", tt.rule)
			if err != nil || res != tt.result {
				t.Fatalf("Prune(%v) = %+v, %v; want %+v", tt.rule, res, err, tt.result)
			}
			want := State{Counts: map[bow.Hash]map[string]uint64{}, Weights: map[bow.Hash]map[string]int64{}, Tokens: map[string]uint64{},
				Messages: map[string]uint64{"spam": 1, "ham": 1}, Seen: map[string]string{"m1": "", "m2": ""}, Values: map[string]map[uint8][]uint16{}}
			for _, h := range tt.rows {
				want.Counts[h], want.Weights[h] = map[string]uint64{}, map[string]int64{}
				for class, v := range before.rows[h] {
					want.Counts[h][class], want.Weights[h][class] = uint64(v[0]), v[1]
					want.Tokens[class] += uint64(v[0])
				}
			}
			want.Vocabulary = uint64(len(tt.rows))
			for name, class := range tt.seen {
				want.Seen[name] = class
				want.Values[class] = map[uint8][]uint16{1: {map[string]uint16{"m1": 7, "m2": 9}[name]}}
			}
			Expect(t, s, "alice", want)
			tot, _ := s.Totals(ctx, "alice")
			for i, c := range tot.Classes {
				if got := at(tot.Forgotten, i); got != tt.forgot[c] {
					t.Errorf("forgotten %s: %d, want %d", c, got, tt.forgot[c])
				}
			}
			// Bob's model is untouched.
			equalDumps(t, dumpOf(t, s, "bob"), before)

			// Untraining what was pruned brings back no row, and the
			// totals stay exact.
			if _, err := s.Apply(ctx, "alice", []store.Op{Forget("m1", map[bow.Hash]uint32{1: 1, 2: 3}), Forget("m2", map[bow.Hash]uint32{2: 1, 3: 5, 4: 1, 5: 4})}); err != nil {
				t.Fatal(err)
			}
			if err := s.Check(ctx, "alice"); err != nil {
				t.Errorf("Check after untraining: %v", err)
			}
			after := dumpOf(t, s, "alice")
			for h := range after.rows {
				if !contains(tt.rows, h) {
					t.Errorf("token %d, pruned, came back as %v", h, after.rows[h])
				}
			}

			// A pruned model dumps and restores whole, its forgotten
			// messages too.
			pruned := openClosing(t, open)
			if _, err := pruned.Apply(ctx, "carol", base); err != nil {
				t.Fatal(err)
			}
			if _, err := pruned.Prune(ctx, "carol", tt.rule); err != nil {
				t.Fatal(err)
			}
			dst := openClosing(t, open)
			if err := dst.Restore(ctx, "carol", records(t, pruned, "carol", 0, nil)); err != nil {
				t.Fatal(err)
			}
			equalDumps(t, dumpOf(t, dst, "carol"), dumpOf(t, pruned, "carol"))
			a, _ := pruned.Totals(ctx, "carol")
			b, _ := dst.Totals(ctx, "carol")
			if fmt.Sprint(a.Messages, a.Tokens, a.Vocabulary, a.Forgotten, a.LastDay) != fmt.Sprint(b.Messages, b.Tokens, b.Vocabulary, b.Forgotten, b.LastDay) {
				t.Errorf("restored totals %+v, want %+v", b, a)
			}
			if err := dst.Check(ctx, "carol"); err != nil {
				t.Error(err)
			}
		})
	}

	t.Run("no model", func(t *testing.T) {
		s := openClosing(t, open)
		if res, err := s.Prune(ctx, "nobody", store.PruneRule{MaxTokens: 1, SeenBefore: 100}); err != nil || res != (store.PruneResult{}) {
			t.Errorf("Prune of no model: %+v, %v", res, err)
		}
		if _, err := s.Prune(ctx, "../bob", store.PruneRule{MaxTokens: 1}); !errors.Is(err, store.ErrInvalidUser) {
			t.Errorf("Prune of an invalid user: %v", err)
		}
	})
}

func contains(hs []bow.Hash, h bow.Hash) bool {
	for _, x := range hs {
		if x == h {
			return true
		}
	}
	return false
}

// testPruneNoDay checks that rows and seen records of day 0, which is no
// day (a model restored from a dump of before days), are never old to the
// age rule, while the budget still takes such rows first among equals.
func testPruneNoDay(t *testing.T, open Opener) {
	ctx := context.Background()
	s := openClosing(t, open)
	if _, err := s.Apply(ctx, "u", []store.Op{
		TrainOn("old", "spam", 0, 0, map[bow.Hash]uint32{1: 1, 2: 1}),
		TrainOn("new", "ham", 50, 0, map[bow.Hash]uint32{3: 1}),
	}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Prune(ctx, "u", store.PruneRule{MaxCount: 10, Before: 100, SeenBefore: 100})
	if err != nil || res != (store.PruneResult{Tokens: 1, Seen: 1, Vocabulary: 2}) {
		t.Fatalf("age rule: Prune = %+v, %v; want token 3 and message new gone alone", res, err)
	}
	res, err = s.Prune(ctx, "u", store.PruneRule{MaxTokens: 1})
	if err != nil || res != (store.PruneResult{Tokens: 2, Vocabulary: 0}) {
		t.Errorf("budget: Prune = %+v, %v; want both tokens of day 0 gone (they tie)", res, err)
	}
	if err := s.Check(ctx, "u"); err != nil {
		t.Error(err)
	}
}

// testPruneConcurrent prunes a model to a budget again and again while
// two writers train and forget, and checks that the totals stay exact
// and the budget kept whenever the writers pause.
func testPruneConcurrent(t *testing.T, open Opener) {
	ctx := context.Background()
	s := openClosing(t, open)
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			var prev map[bow.Hash]uint32
			for i := range 60 {
				bag := RandomBag(rng, 30, 2000)
				op := TrainOn(fmt.Sprint(w, "-", i), []string{"spam", "ham"}[i%2], store.Day(100+i), uint64(i), bag)
				ops := []store.Op{op}
				if i%5 == 4 {
					ops = append(ops, Forget(fmt.Sprint(w, "-", i-1), prev))
				}
				prev = bag
				if _, err := s.Apply(ctx, "alice", ops); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	rule := store.PruneRule{MaxTokens: 300, MaxCount: 1, Before: 120, SeenBefore: 110}
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		if _, err := s.Prune(ctx, "alice", rule); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.Prune(ctx, "alice", rule)
	if err != nil {
		t.Fatal(err)
	}
	if res.Vocabulary > rule.MaxTokens {
		t.Errorf("vocabulary %d after a prune to %d", res.Vocabulary, rule.MaxTokens)
	}
	if tot, _ := s.Totals(ctx, "alice"); tot.Vocabulary != res.Vocabulary {
		t.Errorf("Totals say %d tokens, Prune %d", tot.Vocabulary, res.Vocabulary)
	}
	if err := s.Check(ctx, "alice"); err != nil {
		t.Error(err)
	}
}
