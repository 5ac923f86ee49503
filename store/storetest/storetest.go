// Package storetest holds the conformance suite every store.Store backend
// runs in its tests, and the benchmarks they share, so that the memory and
// Badger backends (and a later Redis one) are held to the same behaviour.
//
// Run checks the semantics spelled out in package store scenario by
// scenario, then replays thousands of random operations against both the
// backend and a plain reference model kept here, and compares every count.
// It checks what any backend must do; crash safety, reopening and size
// limits are a backend's own business and stay in its tests.
package storetest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
)

// Opener returns a new, empty store; Run closes it when a test ends.
type Opener func(t *testing.T) store.Store

// Run runs the conformance suite against the stores open returns.
func Run(t *testing.T, open Opener) {
	t.Run("scenarios", func(t *testing.T) { testScenarios(t, open) })
	t.Run("weights", func(t *testing.T) { testWeights(t, open) })
	t.Run("measures", func(t *testing.T) { testMeasures(t, open) })
	t.Run("dump and restore", func(t *testing.T) { testDumpRestore(t, open) })
	t.Run("restore refuses and undoes", func(t *testing.T) { testRestoreFails(t, open) })
	t.Run("delete user", func(t *testing.T) { testDeleteUser(t, open) })
	t.Run("days and marks", func(t *testing.T) { testDays(t, open) })
	t.Run("prune", func(t *testing.T) { testPrune(t, open) })
	t.Run("prune of what has no day", func(t *testing.T) { testPruneNoDay(t, open) })
	t.Run("prune while training", func(t *testing.T) { testPruneConcurrent(t, open) })
	t.Run("class order", func(t *testing.T) { testClassOrder(t, open) })
	t.Run("users are isolated", func(t *testing.T) { testIsolation(t, open) })
	t.Run("invalid users", func(t *testing.T) { testInvalidUsers(t, open) })
	t.Run("invalid classes", func(t *testing.T) { testInvalidClasses(t, open) })
	t.Run("lookup", func(t *testing.T) { testLookup(t, open) })
	t.Run("random ops match reference", func(t *testing.T) { testRandom(t, open) })
	t.Run("readers never see stale counts", func(t *testing.T) { testReaders(t, open) })
	t.Run("canceled context", func(t *testing.T) { testCanceled(t, open) })
	t.Run("closed", func(t *testing.T) { testClosed(t, open) })
}

// D returns the digest named name, for readable tests.
func D(name string) store.Digest { return sha256.Sum256([]byte(name)) }

// Train returns an op training message name as class with bag, all of
// it the message's body.
func Train(name, class string, bag map[bow.Hash]uint32) store.Op {
	return store.Op{Digest: D(name), Class: class, Bag: bow.FromMaps(nil, bag)}
}

// Forget returns an op forgetting message name, whose bag is bag.
func Forget(name string, bag map[bow.Hash]uint32) store.Op {
	return store.Op{Digest: D(name), Bag: bow.FromMaps(nil, bag)}
}

// TrainSteps returns an op training message name as class, with the bag
// of its header and of its body and the weight steps of its training.
func TrainSteps(name, class string, head, body map[bow.Hash]uint32, steps ...store.Step) store.Op {
	return store.Op{Digest: D(name), Class: class, Bag: bow.FromMaps(head, body), Steps: steps}
}

// State is what a test expects of one user's model, by class name so that
// it does not depend on class indices.
type State struct {
	Messages   map[string]uint64
	Tokens     map[string]uint64
	Vocabulary uint64
	// Counts lists tokens and their counts; a nil map means no row.
	Counts map[bow.Hash]map[string]uint64
	// Weights lists tokens and their weights, for tokens also in Counts;
	// a class it does not name has weight zero.
	Weights map[bow.Hash]map[string]int64
	// Seen maps message names to the class they are trained as ("" none).
	Seen map[string]string
	// Values lists, by class and measure, the levels of the values the
	// class's samples hold, in any order; every sample not listed must be
	// empty.
	Values map[string]map[uint8][]uint16
}

// SampleOf returns the sample of the levels ls.
func SampleOf(ls ...uint16) store.Sample {
	h := make([]uint64, store.MaxLevels)
	for _, l := range ls {
		h[l]++
	}
	return store.SampleOfHistogram(h)
}

// Expect fails t unless user's model in s is in state want and passes Check.
func Expect(t *testing.T, s store.Store, user string, want State) {
	t.Helper()
	ctx := context.Background()
	tot, err := s.Totals(ctx, user)
	if err != nil {
		t.Fatalf("Totals(%q): %v", user, err)
	}
	if len(tot.Messages) > len(tot.Classes) || len(tot.Tokens) > len(tot.Classes) {
		t.Errorf("Totals(%q): %d classes, %d messages, %d tokens", user, len(tot.Classes), len(tot.Messages), len(tot.Tokens))
	}
	for i, c := range tot.Classes {
		if got, want := at(tot.Messages, i), want.Messages[c]; got != want {
			t.Errorf("Totals(%q).Messages[%s] = %d, want %d", user, c, got, want)
		}
		if got, want := at(tot.Tokens, i), want.Tokens[c]; got != want {
			t.Errorf("Totals(%q).Tokens[%s] = %d, want %d", user, c, got, want)
		}
	}
	for c, n := range want.Messages {
		if tot.Index(c) < 0 && n != 0 {
			t.Errorf("Totals(%q) has no class %q", user, c)
		}
	}
	if tot.Vocabulary != want.Vocabulary {
		t.Errorf("Totals(%q).Vocabulary = %d, want %d", user, tot.Vocabulary, want.Vocabulary)
	}
	hashes := make([]bow.Hash, 0, len(want.Counts))
	for h := range want.Counts {
		hashes = append(hashes, h)
	}
	slices.Sort(hashes)
	counts, err := s.Lookup(ctx, user, hashes)
	if err != nil {
		t.Fatalf("Lookup(%q): %v", user, err)
	}
	for i, h := range hashes {
		w := want.Counts[h]
		if w == nil {
			if counts[i] != nil {
				t.Errorf("Lookup(%q, %x) = %v, want nil", user, h, counts[i])
			}
			continue
		}
		if counts[i] == nil {
			t.Errorf("Lookup(%q, %x) = nil, want %v", user, h, w)
			continue
		}
		for j, c := range tot.Classes {
			if got := counts[i].Count(j); got != w[c] {
				t.Errorf("Lookup(%q, %x)[%s] = %d, want %d", user, h, c, got, w[c])
			}
			if got, want := counts[i].Weight(j), want.Weights[h][c]; got != want {
				t.Errorf("Lookup(%q, %x) weight of %s = %d, want %d", user, h, c, got, want)
			}
		}
		if len(counts[i]) > 2*len(tot.Classes) {
			t.Errorf("Lookup(%q, %x) = %v: more values than %d classes have", user, h, counts[i], len(tot.Classes))
		}
	}
	expectSamples(t, user, tot, want.Values)
	for name, class := range want.Seen {
		got, err := s.Seen(ctx, user, D(name))
		if err != nil {
			t.Fatalf("Seen(%q, %s): %v", user, name, err)
		}
		if got != class {
			t.Errorf("Seen(%q, %s) = %q, want %q", user, name, got, class)
		}
	}
	if err := s.Check(ctx, user); err != nil {
		t.Errorf("Check(%q): %v", user, err)
	}
}

// expectSamples fails t unless tot's samples are those of want.
func expectSamples(t *testing.T, user string, tot store.Totals, want map[string]map[uint8][]uint16) {
	t.Helper()
	for class, byMeasure := range want {
		if c := tot.Index(class); c < 0 {
			t.Errorf("Totals(%q) has no class %q for its values", user, class)
			continue
		}
		for m := range byMeasure {
			if int(m) >= len(tot.Samples) {
				t.Errorf("Totals(%q).Samples has no measure %d", user, m)
			}
		}
	}
	for m, byClass := range tot.Samples {
		for c, got := range byClass {
			var w store.Sample
			if c < len(tot.Classes) {
				w = SampleOf(want[tot.Classes[c]][uint8(m)]...)
			}
			if !got.Equal(w) {
				t.Errorf("Totals(%q).Samples[%d][%d] = %+v, want %+v", user, m, c, got, w)
			}
		}
	}
}

func at(s []uint64, i int) uint64 {
	if i < len(s) {
		return s[i]
	}
	return 0
}

func openClosing(t *testing.T, open Opener) store.Store {
	t.Helper()
	s := open(t)
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

type call struct {
	ops  []store.Op
	want []store.Result
}

// scenario is a sequence of Apply calls on user "u" of a new store, with
// their results and the state they leave.
type scenario struct {
	name  string
	calls []call
	want  State
}

func runScenarios(t *testing.T, open Opener, tests []scenario) {
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openClosing(t, open)
			for i, c := range tt.calls {
				got, err := s.Apply(context.Background(), "u", c.ops)
				if err != nil {
					t.Fatalf("Apply #%d: %v", i, err)
				}
				if !slices.Equal(got, c.want) {
					t.Errorf("Apply #%d = %+v, want %+v", i, got, c.want)
				}
			}
			Expect(t, s, "u", tt.want)
		})
	}
}

func testScenarios(t *testing.T, open Opener) {
	bag12 := map[bow.Hash]uint32{1: 2, 2: 1}
	bag23 := map[bow.Hash]uint32{2: 1, 3: 4}
	tests := []scenario{
		{
			name:  "train",
			calls: []call{{[]store.Op{Train("m1", "spam", bag12)}, []store.Result{{Changed: true}}}},
			want: State{
				Messages: map[string]uint64{"spam": 1}, Tokens: map[string]uint64{"spam": 3}, Vocabulary: 2,
				Counts: map[bow.Hash]map[string]uint64{1: {"spam": 2}, 2: {"spam": 1}, 3: nil},
				Seen:   map[string]string{"m1": "spam", "m2": ""},
			},
		},
		{
			name: "retrain same class is a no-op",
			calls: []call{
				{[]store.Op{Train("m1", "spam", bag12)}, []store.Result{{Changed: true}}},
				{[]store.Op{Train("m1", "spam", bag12)}, []store.Result{{Prev: "spam"}}},
			},
			want: State{
				Messages: map[string]uint64{"spam": 1}, Tokens: map[string]uint64{"spam": 3}, Vocabulary: 2,
				Counts: map[bow.Hash]map[string]uint64{1: {"spam": 2}, 2: {"spam": 1}},
				Seen:   map[string]string{"m1": "spam"},
			},
		},
		{
			name: "relabel moves counts",
			calls: []call{
				{[]store.Op{Train("m1", "spam", bag12), Train("m2", "spam", bag23)}, []store.Result{{Changed: true}, {Changed: true}}},
				{[]store.Op{Train("m1", "ham", bag12)}, []store.Result{{Prev: "spam", Changed: true}}},
			},
			want: State{
				Messages: map[string]uint64{"spam": 1, "ham": 1}, Tokens: map[string]uint64{"spam": 5, "ham": 3}, Vocabulary: 3,
				Counts: map[bow.Hash]map[string]uint64{1: {"ham": 2}, 2: {"spam": 1, "ham": 1}, 3: {"spam": 4}},
				Seen:   map[string]string{"m1": "ham", "m2": "spam"},
			},
		},
		{
			name: "forget",
			calls: []call{
				{[]store.Op{Train("m1", "spam", bag12), Train("m2", "spam", bag23)}, []store.Result{{Changed: true}, {Changed: true}}},
				{[]store.Op{Forget("m1", bag12)}, []store.Result{{Prev: "spam", Changed: true}}},
			},
			want: State{
				Messages: map[string]uint64{"spam": 1}, Tokens: map[string]uint64{"spam": 5}, Vocabulary: 2,
				Counts: map[bow.Hash]map[string]uint64{1: nil, 2: {"spam": 1}, 3: {"spam": 4}},
				Seen:   map[string]string{"m1": "", "m2": "spam"},
			},
		},
		{
			name: "forget unknown is a no-op",
			calls: []call{
				{[]store.Op{Train("m1", "spam", bag12)}, []store.Result{{Changed: true}}},
				{[]store.Op{Forget("m9", bag23)}, []store.Result{{}}},
			},
			want: State{
				Messages: map[string]uint64{"spam": 1}, Tokens: map[string]uint64{"spam": 3}, Vocabulary: 2,
				Counts: map[bow.Hash]map[string]uint64{1: {"spam": 2}, 2: {"spam": 1}, 3: nil},
				Seen:   map[string]string{"m1": "spam", "m9": ""},
			},
		},
		{
			name: "same digest several times in one batch",
			calls: []call{{
				[]store.Op{Train("m1", "spam", bag12), Train("m1", "spam", bag12), Train("m1", "ham", bag12), Train("m2", "ham", bag23)},
				[]store.Result{{Changed: true}, {Prev: "spam"}, {Prev: "spam", Changed: true}, {Changed: true}},
			}},
			want: State{
				Messages: map[string]uint64{"ham": 2}, Tokens: map[string]uint64{"ham": 8}, Vocabulary: 3,
				Counts: map[bow.Hash]map[string]uint64{1: {"ham": 2}, 2: {"ham": 2}, 3: {"ham": 4}},
				Seen:   map[string]string{"m1": "ham", "m2": "ham"},
			},
		},
		{
			name: "train and forget in one batch",
			calls: []call{{
				[]store.Op{Train("m1", "spam", bag12), Forget("m1", bag12), Forget("m1", bag12)},
				[]store.Result{{Changed: true}, {Prev: "spam", Changed: true}, {}},
			}},
			want: State{
				Counts: map[bow.Hash]map[string]uint64{1: nil, 2: nil},
				Seen:   map[string]string{"m1": ""},
			},
		},
		{
			name: "counts clamp at zero",
			calls: []call{
				{[]store.Op{Train("m1", "spam", map[bow.Hash]uint32{1: 1})}, []store.Result{{Changed: true}}},
				// Relabeling with a bigger bag than was trained takes what is there.
				{[]store.Op{Train("m1", "ham", map[bow.Hash]uint32{1: 5, 2: 3})}, []store.Result{{Prev: "spam", Changed: true}}},
				{[]store.Op{Forget("m1", map[bow.Hash]uint32{1: 9, 4: 1})}, []store.Result{{Prev: "ham", Changed: true}}},
			},
			want: State{
				Messages: map[string]uint64{"spam": 0, "ham": 0}, Tokens: map[string]uint64{"spam": 0, "ham": 3}, Vocabulary: 1,
				Counts: map[bow.Hash]map[string]uint64{1: nil, 2: {"ham": 3}, 4: nil},
				Seen:   map[string]string{"m1": ""},
			},
		},
		{
			name: "vocabulary counts a token once across classes",
			calls: []call{
				{[]store.Op{Train("m1", "spam", map[bow.Hash]uint32{1: 1}), Train("m2", "ham", map[bow.Hash]uint32{1: 1, 2: 1})}, []store.Result{{Changed: true}, {Changed: true}}},
				{[]store.Op{Forget("m1", map[bow.Hash]uint32{1: 1})}, []store.Result{{Prev: "spam", Changed: true}}},
			},
			want: State{
				Messages: map[string]uint64{"ham": 1}, Tokens: map[string]uint64{"ham": 2}, Vocabulary: 2,
				Counts: map[bow.Hash]map[string]uint64{1: {"ham": 1}, 2: {"ham": 1}},
			},
		},
		{
			name: "vocabulary drops to zero",
			calls: []call{
				{[]store.Op{Train("m1", "spam", map[bow.Hash]uint32{1: 1}), Train("m2", "ham", map[bow.Hash]uint32{1: 1, 2: 1})}, []store.Result{{Changed: true}, {Changed: true}}},
				{[]store.Op{Forget("m2", map[bow.Hash]uint32{1: 1, 2: 1}), Forget("m1", map[bow.Hash]uint32{1: 1})}, []store.Result{{Prev: "ham", Changed: true}, {Prev: "spam", Changed: true}}},
			},
			want: State{Counts: map[bow.Hash]map[string]uint64{1: nil, 2: nil}},
		},
		{
			name:  "zero counts in a bag are ignored",
			calls: []call{{[]store.Op{Train("m1", "spam", map[bow.Hash]uint32{1: 0, 2: 1})}, []store.Result{{Changed: true}}}},
			want: State{
				Messages: map[string]uint64{"spam": 1}, Tokens: map[string]uint64{"spam": 1}, Vocabulary: 1,
				Counts: map[bow.Hash]map[string]uint64{1: nil, 2: {"spam": 1}},
			},
		},
		{
			name:  "empty bag",
			calls: []call{{[]store.Op{Train("m1", "spam", nil)}, []store.Result{{Changed: true}}}},
			want: State{
				Messages: map[string]uint64{"spam": 1},
				Seen:     map[string]string{"m1": "spam"},
			},
		},
	}
	runScenarios(t, open, tests)
}

func testWeights(t *testing.T, open Opener) {
	head1 := map[bow.Hash]uint32{1: 1}
	body23 := map[bow.Hash]uint32{2: 2, 3: 1}
	spamStep := []store.Step{{Class: "spam", Head: 10, Body: 3}, {Class: "ham", Head: -10, Body: -3}}
	hamStep := []store.Step{{Class: "spam", Head: -7, Body: -2}, {Class: "ham", Head: 7, Body: 2}}
	tests := []scenario{
		{
			name:  "steps by part, times the count",
			calls: []call{{[]store.Op{TrainSteps("m1", "spam", head1, body23, spamStep...)}, []store.Result{{Changed: true}}}},
			want: State{
				Messages: map[string]uint64{"spam": 1}, Tokens: map[string]uint64{"spam": 4}, Vocabulary: 3,
				Counts:  map[bow.Hash]map[string]uint64{1: {"spam": 1}, 2: {"spam": 2}, 3: {"spam": 1}},
				Weights: map[bow.Hash]map[string]int64{1: {"spam": 10, "ham": -10}, 2: {"spam": 6, "ham": -6}, 3: {"spam": 3, "ham": -3}},
			},
		},
		{
			name: "retraining as the same class keeps the first steps",
			calls: []call{
				{[]store.Op{TrainSteps("m1", "spam", head1, body23, spamStep...)}, []store.Result{{Changed: true}}},
				{[]store.Op{TrainSteps("m1", "spam", head1, body23, hamStep...)}, []store.Result{{Prev: "spam"}}},
			},
			want: State{
				Messages: map[string]uint64{"spam": 1}, Tokens: map[string]uint64{"spam": 4}, Vocabulary: 3,
				Counts:  map[bow.Hash]map[string]uint64{1: {"spam": 1}, 2: {"spam": 2}, 3: {"spam": 1}},
				Weights: map[bow.Hash]map[string]int64{1: {"spam": 10, "ham": -10}, 2: {"spam": 6, "ham": -6}, 3: {"spam": 3, "ham": -3}},
			},
		},
		{
			name: "relabel takes back the old steps and adds the new",
			calls: []call{
				{[]store.Op{
					TrainSteps("m1", "spam", head1, body23, spamStep...),
					TrainSteps("m2", "spam", nil, map[bow.Hash]uint32{1: 1}, store.Step{Class: "spam", Body: 100}),
				}, []store.Result{{Changed: true}, {Changed: true}}},
				{[]store.Op{TrainSteps("m1", "ham", head1, body23, hamStep...)}, []store.Result{{Prev: "spam", Changed: true}}},
			},
			want: State{
				Messages: map[string]uint64{"spam": 1, "ham": 1}, Tokens: map[string]uint64{"spam": 1, "ham": 4}, Vocabulary: 3,
				Counts:  map[bow.Hash]map[string]uint64{1: {"spam": 1, "ham": 1}, 2: {"ham": 2}, 3: {"ham": 1}},
				Weights: map[bow.Hash]map[string]int64{1: {"spam": 93, "ham": 7}, 2: {"spam": -4, "ham": 4}, 3: {"spam": -2, "ham": 2}},
			},
		},
		{
			name: "forget takes back exactly and drops emptied rows",
			calls: []call{
				{[]store.Op{TrainSteps("m1", "spam", head1, body23, spamStep...)}, []store.Result{{Changed: true}}},
				{[]store.Op{{Digest: D("m1"), Bag: bow.FromMaps(head1, body23)}}, []store.Result{{Prev: "spam", Changed: true}}},
				{[]store.Op{TrainSteps("m2", "ham", head1, body23, hamStep...)}, []store.Result{{Changed: true}}},
				{[]store.Op{{Digest: D("m2"), Bag: bow.FromMaps(head1, body23)}}, []store.Result{{Prev: "ham", Changed: true}}},
			},
			want: State{
				Messages: map[string]uint64{"spam": 0, "ham": 0},
				Counts:   map[bow.Hash]map[string]uint64{1: nil, 2: nil, 3: nil},
				Seen:     map[string]string{"m1": "", "m2": ""},
			},
		},
		{
			name: "steps are ignored when forgetting",
			calls: []call{
				{[]store.Op{TrainSteps("m1", "", head1, body23, spamStep...)}, []store.Result{{}}},
			},
			want: State{Counts: map[bow.Hash]map[string]uint64{1: nil, 2: nil, 3: nil}},
		},
		{
			name: "a bag bigger than trained leaves a weight outside the vocabulary",
			calls: []call{
				{[]store.Op{TrainSteps("m1", "spam", nil, map[bow.Hash]uint32{1: 1}, store.Step{Class: "spam", Body: 5})}, []store.Result{{Changed: true}}},
				{[]store.Op{Forget("m1", map[bow.Hash]uint32{1: 3})}, []store.Result{{Prev: "spam", Changed: true}}},
			},
			want: State{
				Messages: map[string]uint64{"spam": 0},
				Counts:   map[bow.Hash]map[string]uint64{1: {}},
				Weights:  map[bow.Hash]map[string]int64{1: {"spam": -10}},
			},
		},
		{
			name: "a step registers its class",
			calls: []call{
				{[]store.Op{TrainSteps("m1", "spam", nil, map[bow.Hash]uint32{1: 1}, store.Step{Class: "ham", Body: -2})}, []store.Result{{Changed: true}}},
			},
			want: State{
				Messages: map[string]uint64{"spam": 1, "ham": 0}, Tokens: map[string]uint64{"spam": 1}, Vocabulary: 1,
				Counts:  map[bow.Hash]map[string]uint64{1: {"spam": 1}},
				Weights: map[bow.Hash]map[string]int64{1: {"ham": -2}},
			},
		},
	}
	runScenarios(t, open, tests)
}

// TrainValues returns an op training message name as class, with the
// body bag and the measures' values given.
func TrainValues(name, class string, body map[bow.Hash]uint32, values ...store.Value) store.Op {
	return store.Op{Digest: D(name), Class: class, Bag: bow.FromMaps(nil, body), Values: values}
}

func testMeasures(t *testing.T, open Opener) {
	bag := map[bow.Hash]uint32{1: 1}
	v := func(m uint8, l uint16) store.Value { return store.Value{Measure: m, Level: l} }
	one := State{Messages: map[string]uint64{"spam": 1}, Tokens: map[string]uint64{"spam": 1}, Vocabulary: 1,
		Counts: map[bow.Hash]map[string]uint64{1: {"spam": 1}}}
	tests := []scenario{
		{
			name: "training adds each value to its class and measure",
			calls: []call{{[]store.Op{
				TrainValues("m1", "spam", bag, v(0, 10), v(3, 1023)),
				TrainValues("m2", "spam", nil, v(0, 10), v(2, 0)),
				TrainValues("m3", "ham", nil, v(0, 700)),
			}, []store.Result{{Changed: true}, {Changed: true}, {Changed: true}}}},
			want: State{
				Messages: map[string]uint64{"spam": 2, "ham": 1}, Tokens: map[string]uint64{"spam": 1}, Vocabulary: 1,
				Counts: map[bow.Hash]map[string]uint64{1: {"spam": 1}},
				Values: map[string]map[uint8][]uint16{"spam": {0: {10, 10}, 2: {0}, 3: {1023}}, "ham": {0: {700}}},
			},
		},
		{
			name: "relabel takes back the values recorded and adds the op's",
			calls: []call{
				{[]store.Op{TrainValues("m1", "spam", bag, v(0, 10), v(3, 5))}, []store.Result{{Changed: true}}},
				{[]store.Op{TrainValues("m1", "ham", bag, v(0, 99))}, []store.Result{{Prev: "spam", Changed: true}}},
			},
			want: State{
				Messages: map[string]uint64{"spam": 0, "ham": 1}, Tokens: map[string]uint64{"ham": 1}, Vocabulary: 1,
				Counts: map[bow.Hash]map[string]uint64{1: {"ham": 1}},
				Values: map[string]map[uint8][]uint16{"ham": {0: {99}}},
			},
		},
		{
			name: "forgetting takes back the values recorded, not the op's",
			calls: []call{
				{[]store.Op{TrainValues("m1", "spam", bag, v(0, 10), v(3, 5)), TrainValues("m2", "spam", nil, v(0, 11))}, []store.Result{{Changed: true}, {Changed: true}}},
				{[]store.Op{{Digest: D("m1"), Bag: bow.FromMaps(nil, bag), Values: []store.Value{v(0, 11)}}}, []store.Result{{Prev: "spam", Changed: true}}},
			},
			want: State{
				Messages: map[string]uint64{"spam": 1}, Counts: map[bow.Hash]map[string]uint64{1: nil},
				Values: map[string]map[uint8][]uint16{"spam": {0: {11}}},
			},
		},
		{
			name: "retraining as the same class keeps the first values",
			calls: []call{
				{[]store.Op{TrainValues("m1", "spam", bag, v(0, 10))}, []store.Result{{Changed: true}}},
				{[]store.Op{TrainValues("m1", "spam", bag, v(0, 500), v(1, 1))}, []store.Result{{Prev: "spam"}}},
			},
			want: func() State {
				s := one
				s.Values = map[string]map[uint8][]uint16{"spam": {0: {10}}}
				return s
			}(),
		},
		{
			name: "a message without values adds none",
			calls: []call{
				{[]store.Op{TrainValues("m1", "spam", bag)}, []store.Result{{Changed: true}}},
			},
			want: one,
		},
	}
	runScenarios(t, open, tests)

	t.Run("untraining restores the samples exactly", func(t *testing.T) {
		s := openClosing(t, open)
		ctx := context.Background()
		rng := rand.New(rand.NewPCG(5, 6))
		values := func() []store.Value {
			var out []store.Value
			for m := range uint8(11) {
				if rng.IntN(5) > 0 {
					out = append(out, v(m, uint16(rng.IntN(store.MaxLevels))))
				}
			}
			return out
		}
		var base []store.Op
		for i := range 50 {
			base = append(base, TrainValues(fmt.Sprint("base", i), []string{"spam", "ham"}[i%2], bag, values()...))
		}
		if _, err := s.Apply(ctx, "u", base); err != nil {
			t.Fatal(err)
		}
		before := samplesOf(t, s, "u")
		var more, forget []store.Op
		for i := range 40 {
			op := TrainValues(fmt.Sprint("more", i), []string{"spam", "ham"}[rng.IntN(2)], bag, values()...)
			more = append(more, op)
			forget = append(forget, store.Op{Digest: op.Digest, Bag: op.Bag})
		}
		// Relabel some of the base messages there and back too.
		for i := range 10 {
			other := []string{"ham", "spam"}[i%2]
			more = append(more, TrainValues(fmt.Sprint("base", i), other, bag, values()...))
			forget = append(forget, base[i])
		}
		if _, err := s.Apply(ctx, "u", more); err != nil {
			t.Fatal(err)
		}
		if during := samplesOf(t, s, "u"); samplesEqual(during, before) {
			t.Fatal("training 50 more messages left the samples as they were")
		}
		if _, err := s.Apply(ctx, "u", forget); err != nil {
			t.Fatal(err)
		}
		if after := samplesOf(t, s, "u"); !samplesEqual(after, before) {
			t.Errorf("after untraining, the samples are\n%+v\nnot as before\n%+v", after, before)
		}
		if err := s.Check(ctx, "u"); err != nil {
			t.Error(err)
		}
	})

	t.Run("invalid values apply nothing", func(t *testing.T) {
		s := openClosing(t, open)
		ctx := context.Background()
		for _, vs := range [][]store.Value{
			{v(3, 1), v(2, 1)},
			{v(3, 1), v(3, 2)},
			{v(store.MaxMeasures, 0)},
			{v(0, store.MaxLevels)},
		} {
			ops := []store.Op{TrainValues("ok", "spam", bag, v(0, 1)), TrainValues("bad", "spam", bag, vs...)}
			res, err := s.Apply(ctx, "u", ops)
			if !errors.Is(err, store.ErrInvalidValue) || len(res) != 0 {
				t.Errorf("values %v: Apply = %v, %v; want no result and ErrInvalidValue", vs, res, err)
			}
		}
		Expect(t, s, "u", State{Counts: map[bow.Hash]map[string]uint64{1: nil}, Seen: map[string]string{"ok": ""}})
	})
}

// samplesOf returns user's samples, by class name and measure.
func samplesOf(t *testing.T, s store.Store, user string) map[string]map[int]store.Sample {
	t.Helper()
	tot, err := s.Totals(context.Background(), user)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[int]store.Sample{}
	for m, byClass := range tot.Samples {
		for c, smp := range byClass {
			if smp.Empty() {
				continue
			}
			if out[tot.Classes[c]] == nil {
				out[tot.Classes[c]] = map[int]store.Sample{}
			}
			out[tot.Classes[c]][m] = smp
		}
	}
	return out
}

func samplesEqual(a, b map[string]map[int]store.Sample) bool {
	return maps.EqualFunc(a, b, func(x, y map[int]store.Sample) bool {
		return maps.EqualFunc(x, y, store.Sample.Equal)
	})
}

func testClassOrder(t *testing.T, open Opener) {
	s := openClosing(t, open)
	ctx := context.Background()
	ops := []store.Op{
		Train("m1", "spam", map[bow.Hash]uint32{1: 1}),
		Train("m2", "ham", map[bow.Hash]uint32{1: 2}),
		Train("m3", "newsletter", map[bow.Hash]uint32{1: 3}),
	}
	if _, err := s.Apply(ctx, "", ops); err != nil {
		t.Fatal(err)
	}
	// Classes are store-wide: another user sees all of them, in the order
	// of first use, and its counts are indexed the same way.
	if _, err := s.Apply(ctx, "other", []store.Op{Train("m1", "ham", map[bow.Hash]uint32{1: 7})}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		user   string
		counts []uint64
	}{
		{"", []uint64{1, 2, 3}},
		{"other", []uint64{0, 7, 0}},
	} {
		t.Run(tt.user, func(t *testing.T) {
			tot, err := s.Totals(ctx, tt.user)
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{"spam", "ham", "newsletter"}; !slices.Equal(tot.Classes, want) {
				t.Errorf("Classes = %q, want %q", tot.Classes, want)
			}
			c, err := s.Lookup(ctx, tt.user, []bow.Hash{1})
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range tt.counts {
				if got := c[0].Count(i); got != want {
					t.Errorf("count of %s = %d, want %d", tot.Classes[i], got, want)
				}
			}
		})
	}
}

func testIsolation(t *testing.T, open Opener) {
	s := openClosing(t, open)
	ctx := context.Background()
	// Names chosen so that one is a prefix of another, or differs by a
	// byte that a careless key layout could confuse with a separator.
	users := []string{"", "a", "ab", "a.b", "A", "a@b", "b"}
	private := func(u string) bow.Hash { return bow.HashOf("private:" + u) }
	for i, u := range users {
		bag := map[bow.Hash]uint32{private(u): 1, 100: uint32(i + 1)}
		if _, err := s.Apply(ctx, u, []store.Op{Train("shared", "spam", bag)}); err != nil {
			t.Fatalf("Apply(%q): %v", u, err)
		}
	}
	state := func(i int, u string) State {
		counts := map[bow.Hash]map[string]uint64{100: {"spam": uint64(i + 1)}}
		for _, v := range users {
			counts[private(v)] = nil
		}
		counts[private(u)] = map[string]uint64{"spam": 1}
		return State{
			Messages: map[string]uint64{"spam": 1}, Tokens: map[string]uint64{"spam": uint64(i + 2)}, Vocabulary: 2,
			Counts: counts, Seen: map[string]string{"shared": "spam"},
		}
	}
	for i, u := range users {
		t.Run(fmt.Sprintf("user %q", u), func(t *testing.T) { Expect(t, s, u, state(i, u)) })
	}
	got, err := s.Users(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(slices.Values(users))
	if !slices.Equal(got, want) {
		t.Errorf("Users = %q, want %q", got, want)
	}
	// Forgetting the shared digest for one user leaves every other alone.
	if _, err := s.Apply(ctx, "a", []store.Op{Forget("shared", map[bow.Hash]uint32{private("a"): 1, 100: 2})}); err != nil {
		t.Fatal(err)
	}
	Expect(t, s, "a", State{
		Counts: map[bow.Hash]map[string]uint64{100: nil, private("a"): nil},
		Seen:   map[string]string{"shared": ""},
	})
	for i, u := range users {
		if u != "a" {
			t.Run(fmt.Sprintf("after forget, user %q", u), func(t *testing.T) { Expect(t, s, u, state(i, u)) })
		}
	}
}

func testInvalidUsers(t *testing.T, open Opener) {
	s := openClosing(t, open)
	ctx := context.Background()
	names := []struct{ name, user string }{
		{"dot dot slash", "../x"},
		{"slash", "a/b"},
		{"10 kB", strings.Repeat("a", 10<<10)},
		{"NUL", "\x00"},
		{"NUL inside", "a\x00b"},
		{"leading dot", ".a"},
		{"leading dash", "-a"},
		{"space", "a b"},
		{"non-ASCII", "é"},
	}
	for _, tt := range names {
		t.Run(tt.name, func(t *testing.T) {
			calls := map[string]func() error{
				"Totals": func() error { _, err := s.Totals(ctx, tt.user); return err },
				"Lookup": func() error { _, err := s.Lookup(ctx, tt.user, []bow.Hash{1}); return err },
				"Seen":   func() error { _, err := s.Seen(ctx, tt.user, D("m1")); return err },
				"Apply": func() error {
					_, err := s.Apply(ctx, tt.user, []store.Op{Train("m1", "spam", map[bow.Hash]uint32{1: 1})})
					return err
				},
				"Check": func() error { return s.Check(ctx, tt.user) },
			}
			for name, f := range calls {
				if err := f(); !errors.Is(err, store.ErrInvalidUser) {
					t.Errorf("%s: error %v, want ErrInvalidUser", name, err)
				}
			}
		})
	}
	users, err := s.Users(ctx)
	if err != nil || len(users) != 0 {
		t.Errorf("Users = %q, %v; want none", users, err)
	}
}

func testInvalidClasses(t *testing.T, open Opener) {
	s := openClosing(t, open)
	ctx := context.Background()
	for _, class := range []string{"Spam", "sp am", "spam!", "spam/ham", strings.Repeat("x", store.MaxClassLen+1), "é", "a\x00"} {
		t.Run(fmt.Sprintf("%.20q", class), func(t *testing.T) {
			for _, bad := range []store.Op{
				Train("m2", class, map[bow.Hash]uint32{2: 1}),
				TrainSteps("m2", "ham", nil, map[bow.Hash]uint32{2: 1}, store.Step{Class: class, Body: 1}),
			} {
				ops := []store.Op{Train("m1", "spam", map[bow.Hash]uint32{1: 1}), bad}
				res, err := s.Apply(ctx, "u", ops)
				if !errors.Is(err, store.ErrInvalidClass) {
					t.Errorf("Apply: error %v, want ErrInvalidClass", err)
				}
				if len(res) != 0 {
					t.Errorf("Apply: results %+v, want none", res)
				}
			}
			Expect(t, s, "u", State{Counts: map[bow.Hash]map[string]uint64{1: nil, 2: nil}, Seen: map[string]string{"m1": ""}})
		})
	}
	if _, err := s.Apply(ctx, "u", []store.Op{Train("m1", strings.Repeat("x", store.MaxClassLen), nil)}); err != nil {
		t.Errorf("Apply with a class of MaxClassLen bytes: %v", err)
	}
}

func testLookup(t *testing.T, open Opener) {
	s := openClosing(t, open)
	ctx := context.Background()
	if _, err := s.Apply(ctx, "u", []store.Op{Train("m1", "spam", map[bow.Hash]uint32{1: 1, 2: 2})}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		user   string
		hashes []bow.Hash
		want   []uint64 // spam count per hash; 0 means a nil Counts
	}{
		{"none", "u", nil, nil},
		{"order kept", "u", []bow.Hash{2, 3, 1}, []uint64{2, 0, 1}},
		{"duplicates", "u", []bow.Hash{1, 1, 2, 1}, []uint64{1, 1, 2, 1}},
		{"unknown user", "nobody", []bow.Hash{1, 2}, []uint64{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for round := range 2 { // the second round may come from a cache
				got, err := s.Lookup(ctx, tt.user, tt.hashes)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(tt.hashes) {
					t.Fatalf("round %d: %d results for %d hashes", round, len(got), len(tt.hashes))
				}
				for i, w := range tt.want {
					if w == 0 {
						if got[i] != nil {
							t.Errorf("round %d: [%d] = %v, want nil", round, i, got[i])
						}
						continue
					}
					if len(got[i]) == 0 || got[i][0] != w {
						t.Errorf("round %d: [%d] = %v, want [%d]", round, i, got[i], w)
					}
					// The caller owns what it gets: scribbling on it must
					// not reach the store or its cache.
					got[i][0] = 999
				}
			}
		})
	}
}

// reference is the plain model the random test compares a backend with.
type reference struct {
	seen     map[store.Digest]string
	steps    map[store.Digest][]store.Step
	values   map[store.Digest][]store.Value
	counts   map[bow.Hash]map[string]uint64
	weights  map[bow.Hash]map[string]int64
	messages map[string]uint64
	tokens   map[string]uint64
}

func newReference() *reference {
	return &reference{
		seen:     map[store.Digest]string{},
		steps:    map[store.Digest][]store.Step{},
		values:   map[store.Digest][]store.Value{},
		counts:   map[bow.Hash]map[string]uint64{},
		weights:  map[bow.Hash]map[string]int64{},
		messages: map[string]uint64{},
		tokens:   map[string]uint64{},
	}
}

// vocabulary counts the tokens with a non-zero count.
func (r *reference) vocabulary() uint64 {
	var n uint64
	for _, c := range r.counts {
		for _, v := range c {
			if v != 0 {
				n++
				break
			}
		}
	}
	return n
}

func (r *reference) apply(op store.Op) store.Result {
	prev := r.seen[op.Digest]
	if prev == op.Class {
		return store.Result{Prev: prev}
	}
	hashes, counts := op.Bag.Hashes(), op.Bag.Counts()
	if prev != "" {
		for i, h := range hashes {
			n := counts[i]
			if r.counts[h] == nil {
				continue
			}
			d := min(r.counts[h][prev], uint64(n))
			r.counts[h][prev] -= d
			r.tokens[prev] -= d
			r.step(h, i < op.Bag.Head(), r.steps[op.Digest], -int64(n))
		}
		if r.messages[prev] > 0 {
			r.messages[prev]--
		}
		delete(r.seen, op.Digest)
		delete(r.steps, op.Digest)
		delete(r.values, op.Digest)
	}
	if op.Class != "" {
		for i, h := range hashes {
			n := counts[i]
			if n == 0 {
				continue
			}
			if r.counts[h] == nil {
				r.counts[h] = map[string]uint64{}
				r.weights[h] = map[string]int64{}
			}
			r.counts[h][op.Class] += uint64(n)
			r.tokens[op.Class] += uint64(n)
			r.step(h, i < op.Bag.Head(), op.Steps, int64(n))
		}
		r.messages[op.Class]++
		r.seen[op.Digest] = op.Class
		r.steps[op.Digest] = op.Steps
		r.values[op.Digest] = op.Values
	}
	// A row goes once everything in it is zero.
	for _, h := range hashes {
		if c := r.counts[h]; c != nil && allZero(c) && allZero(r.weights[h]) {
			delete(r.counts, h)
			delete(r.weights, h)
		}
	}
	return store.Result{Prev: prev, Changed: true}
}

// levels returns the levels of the values of the messages trained, by
// class and measure.
func (r *reference) levels() map[string]map[uint8][]uint16 {
	out := map[string]map[uint8][]uint16{}
	for d, class := range r.seen {
		for _, v := range r.values[d] {
			if out[class] == nil {
				out[class] = map[uint8][]uint16{}
			}
			out[class][v.Measure] = append(out[class][v.Measure], v.Level)
		}
	}
	return out
}

// step adds steps times n to the weights of token h, in the head or body.
func (r *reference) step(h bow.Hash, head bool, steps []store.Step, n int64) {
	for _, s := range steps {
		d := s.Body
		if head {
			d = s.Head
		}
		r.weights[h][s.Class] += d * n
	}
}

func allZero[V comparable](m map[string]V) bool {
	var zero V
	for _, v := range m {
		if v != zero {
			return false
		}
	}
	return true
}

func testRandom(t *testing.T, open Opener) {
	s := openClosing(t, open)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	users := []string{"", "alice", "bob"}
	classes := []string{"", "spam", "ham", "spam", "ham", "unsure"}
	refs := map[string]*reference{}
	for _, u := range users {
		refs[u] = newReference()
	}
	const messages = 300
	bags := make([]bow.Bag, messages)
	for i := range bags {
		// About a third of a message's tokens are its header's.
		head, body := map[bow.Hash]uint32{}, map[bow.Hash]uint32{}
		for h, n := range RandomBag(rng, 1+rng.IntN(40), 500) {
			if h%3 == 0 {
				head[h] = n
			} else {
				body[h] = n
			}
		}
		bags[i] = bow.FromMaps(head, body)
	}
	steps := func() []store.Step {
		var out []store.Step
		for _, c := range []string{"spam", "ham", "unsure"} {
			if rng.IntN(3) > 0 {
				out = append(out, store.Step{Class: c, Head: rng.Int64N(2001) - 1000, Body: rng.Int64N(2001) - 1000})
			}
		}
		return out
	}
	values := func() []store.Value {
		var out []store.Value
		for m := range uint8(6) {
			if rng.IntN(4) > 0 {
				out = append(out, store.Value{Measure: 3 * m, Level: uint16(rng.IntN(store.MaxLevels))})
			}
		}
		return out
	}
	allHashes := make([]bow.Hash, 500)
	for i := range allHashes {
		allHashes[i] = bow.Hash(i)
	}
	for round := range 60 {
		u := users[rng.IntN(len(users))]
		ops := make([]store.Op, rng.IntN(30))
		for i := range ops {
			m := rng.IntN(messages)
			bag := bags[m]
			if rng.IntN(20) == 0 { // a caller passing the wrong bag
				bag = bags[rng.IntN(messages)]
			}
			ops[i] = store.Op{Digest: D(fmt.Sprint(m)), Class: classes[rng.IntN(len(classes))], Bag: bag, Steps: steps(), Values: values()}
		}
		got, err := s.Apply(ctx, u, ops)
		if err != nil {
			t.Fatalf("round %d: Apply: %v", round, err)
		}
		for i, op := range ops {
			if want := refs[u].apply(op); got[i] != want {
				t.Fatalf("round %d: op %d = %+v, want %+v", round, i, got[i], want)
			}
		}
	}
	for _, u := range users {
		ref := refs[u]
		want := State{
			Messages: ref.messages, Tokens: ref.tokens, Vocabulary: ref.vocabulary(),
			Counts: map[bow.Hash]map[string]uint64{}, Weights: ref.weights, Seen: map[string]string{},
			Values: ref.levels(),
		}
		for _, h := range allHashes {
			want.Counts[h] = ref.counts[h]
		}
		for m := range messages {
			want.Seen[fmt.Sprint(m)] = ref.seen[D(fmt.Sprint(m))]
		}
		t.Run(fmt.Sprintf("user %q", u), func(t *testing.T) { Expect(t, s, u, want) })
	}
}

// testReaders hammers Lookup and Totals while another goroutine trains,
// and fails if a reader ever sees a count go backwards or the writer reads
// anything but its own last write, the symptoms of a stale cache.
func testReaders(t *testing.T, open Opener) {
	s := openClosing(t, open)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const token = bow.Hash(42)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 4 {
		wg.Go(func() {
			var last, lastMsgs uint64
			for ctx.Err() == nil {
				c, err := s.Lookup(ctx, "u", []bow.Hash{token, token + 1})
				if err != nil {
					errs <- err
					return
				}
				n := at(c[0], 0)
				if n < last {
					errs <- fmt.Errorf("reader saw count %d after %d", n, last)
					return
				}
				last = n
				tot, err := s.Totals(ctx, "u")
				if err != nil {
					errs <- err
					return
				}
				m := at(tot.Messages, 0)
				if m < lastMsgs {
					errs <- fmt.Errorf("reader saw %d messages after %d", m, lastMsgs)
					return
				}
				lastMsgs = m
			}
		})
	}
	deadline := time.Now().Add(2 * time.Second)
	for i := 1; i <= 300 && time.Now().Before(deadline); i++ {
		op := Train(fmt.Sprint(i), "spam", map[bow.Hash]uint32{token: 1, bow.Hash(1000 + i): 1})
		if _, err := s.Apply(ctx, "u", []store.Op{op}); err != nil {
			t.Fatal(err)
		}
		c, err := s.Lookup(ctx, "u", []bow.Hash{token})
		if err != nil {
			t.Fatal(err)
		}
		if got := at(c[0], 0); got != uint64(i) {
			t.Fatalf("after Apply #%d, Lookup = %d", i, got)
		}
		tot, err := s.Totals(ctx, "u")
		if err != nil {
			t.Fatal(err)
		}
		if got := at(tot.Messages, 0); got != uint64(i) || tot.Vocabulary != uint64(i+1) {
			t.Fatalf("after Apply #%d, Totals = %+v", i, tot)
		}
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Error(err)
		}
	}
}

func testCanceled(t *testing.T, open Opener) {
	s := openClosing(t, open)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := s.Apply(ctx, "u", []store.Op{Train("m1", "spam", map[bow.Hash]uint32{1: 1})})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Apply: error %v, want context.Canceled", err)
	}
	if len(res) != 0 {
		t.Errorf("Apply: results %+v, want none", res)
	}
	Expect(t, s, "u", State{Counts: map[bow.Hash]map[string]uint64{1: nil}, Seen: map[string]string{"m1": ""}})
}

func testClosed(t *testing.T, open Opener) {
	s := open(t)
	ctx := context.Background()
	if _, err := s.Apply(ctx, "u", []store.Op{Train("m1", "spam", map[bow.Hash]uint32{1: 1})}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	calls := map[string]func() error{
		"Totals": func() error { _, err := s.Totals(ctx, "u"); return err },
		"Lookup": func() error { _, err := s.Lookup(ctx, "u", []bow.Hash{1}); return err },
		"Seen":   func() error { _, err := s.Seen(ctx, "u", D("m1")); return err },
		"Apply":  func() error { _, err := s.Apply(ctx, "u", []store.Op{Forget("m1", nil)}); return err },
		"Users":  func() error { _, err := s.Users(ctx); return err },
		"Check":  func() error { return s.Check(ctx, "u") },
	}
	for name, f := range calls {
		t.Run(name, func(t *testing.T) {
			if err := f(); !errors.Is(err, store.ErrClosed) {
				t.Errorf("error %v, want ErrClosed", err)
			}
		})
	}
}

// BenchLookup trains s with a few thousand messages, then measures Lookup
// of 300-token messages drawn from the same vocabulary, in messages/s.
func BenchLookup(b *testing.B, s store.Store) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	bags := benchBags(rng, 1000)
	for i := 0; i < 2000; i += 100 {
		ops := make([]store.Op, 100)
		for j := range ops {
			ops[j] = Train(fmt.Sprint("bench", i+j), []string{"spam", "ham"}[j%2], bags[rng.IntN(len(bags))])
		}
		if _, err := s.Apply(ctx, "", ops); err != nil {
			b.Fatal(err)
		}
	}
	queries := make([][]bow.Hash, 256)
	for i := range queries {
		queries[i] = slices.Collect(maps.Keys(RandomBagOf(rng, 300, benchVocab)))
	}
	// One pass before timing, so that a cache is as warm as it gets.
	for _, q := range queries {
		if _, err := s.Lookup(ctx, "", q); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := s.Lookup(ctx, "", queries[i%len(queries)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchApply measures Apply of batches of 100 new 300-token messages, in
// messages/s.
func BenchApply(b *testing.B, s store.Store) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 6))
	bags := benchBags(rng, 1000)
	const batch = 100
	ops := make([]store.Op, batch)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		for j := range ops {
			ops[j] = Train(fmt.Sprint("bench", n), []string{"spam", "ham"}[rng.IntN(2)], bags[rng.IntN(len(bags))])
			ops[j].Values = benchValues(rng)
			n++
		}
		if _, err := s.Apply(ctx, "", ops); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
}

// benchValues returns the values of a message's eleven measures, the
// levels drawn around a few hundred, as a message's are.
func benchValues(rng *rand.Rand) []store.Value {
	vs := make([]store.Value, 11)
	for m := range vs {
		vs[m] = store.Value{Measure: uint8(m), Level: uint16(min(store.MaxLevels-1, max(0, 400+int(100*rng.NormFloat64()))))}
	}
	return vs
}

// benchVocab is the number of distinct tokens benchmark messages draw from,
// about what a personal model of a few thousand messages holds.
const benchVocab = 200_000

func benchBags(rng *rand.Rand, n int) []map[bow.Hash]uint32 {
	bags := make([]map[bow.Hash]uint32, n)
	for i := range bags {
		bags[i] = RandomBagOf(rng, 300, benchVocab)
	}
	return bags
}

// RandomBagOf returns a bag of exactly n distinct tokens drawn like
// RandomBag's, n well below vocab. Unlike RandomBag's, its hashes are
// spread over the 64-bit range like real ones, so that a backend keyed by
// hash gets no locality a real model would not have.
func RandomBagOf(rng *rand.Rand, n int, vocab uint64) map[bow.Hash]uint32 {
	z := rand.NewZipf(rng, 1.1, 2, vocab-1)
	bag := make(map[bow.Hash]uint32, n)
	for len(bag) < n {
		// An odd multiplier is a bijection on 64 bits: distinct stay distinct.
		bag[bow.Hash(z.Uint64()*0x9e3779b97f4a7c15)]++
	}
	return bag
}

// RandomBag returns a bag of n draws from a Zipf distribution over vocab
// tokens, which is roughly how words in mail are spread: a few very
// common, most rare.
func RandomBag(rng *rand.Rand, n int, vocab uint64) map[bow.Hash]uint32 {
	z := rand.NewZipf(rng, 1.1, 2, vocab-1)
	bag := make(map[bow.Hash]uint32, n)
	for range n {
		bag[bow.Hash(z.Uint64())]++
	}
	return bag
}

// trainSome gives user a model of a few messages in three classes, with
// steps, one of them relabeled and one forgotten, and returns the ops.
func trainSome(t *testing.T, s store.Store, user string, seed uint64) []store.Op {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 9))
	var ops []store.Op
	for i := range 40 {
		head, body := map[bow.Hash]uint32{}, map[bow.Hash]uint32{}
		for h, n := range RandomBag(rng, 20, 300) {
			if h%4 == 0 {
				head[h] = n
			} else {
				body[h] = n
			}
		}
		class := []string{"spam", "ham", "news"}[i%3]
		op := TrainSteps(fmt.Sprint(user, i), class, head, body,
			store.Step{Class: "spam", Head: rng.Int64N(2000) - 1000, Body: rng.Int64N(2000) - 1000},
			store.Step{Class: "ham", Head: rng.Int64N(2000) - 1000})
		op.Day, op.Mark = store.Day(20000+i/4), rng.Uint64()
		for m := range uint8(5) {
			if rng.IntN(3) > 0 {
				op.Values = append(op.Values, store.Value{Measure: 2 * m, Level: uint16(rng.IntN(store.MaxLevels))})
			}
		}
		if class == "ham" {
			// Values all at level 0: a sample whose sum is 0.
			op.Values = append(op.Values, store.Value{Measure: 9, Level: 0})
		}
		ops = append(ops, op)
	}
	relabel := ops[3]
	relabel.Class, relabel.Steps = "spam", []store.Step{{Class: "ham", Body: 7}}
	forget := ops[4]
	forget.Class = ""
	ops = append(ops, relabel, forget)
	if _, err := s.Apply(context.Background(), user, ops); err != nil {
		t.Fatal(err)
	}
	return ops
}

// dumped is a dump with rows and steps by class name, so that dumps of
// stores with other class orders compare.
type dumped struct {
	rows   map[bow.Hash]map[string][2]int64
	seen   map[store.Digest]string
	step   map[store.Digest]map[string][2]int64
	values map[store.Digest]string
	days   map[bow.Hash]store.Day
	marks  map[store.Digest]string // day and mark
	forgot map[string]uint64
	keys   []string // the order records came in, to check it
}

func dumpOf(t *testing.T, s store.Store, user string) dumped {
	t.Helper()
	d := dumped{rows: map[bow.Hash]map[string][2]int64{}, seen: map[store.Digest]string{}, step: map[store.Digest]map[string][2]int64{},
		values: map[store.Digest]string{}, days: map[bow.Hash]store.Day{}, marks: map[store.Digest]string{}, forgot: map[string]uint64{}}
	var classes []string
	n := 0
	err := s.Dump(context.Background(), user, func(r store.Record) error {
		defer func() { n++ }()
		switch {
		case n == 0:
			if r.Classes == nil {
				t.Fatal("Dump: the first record is no header")
			}
			classes = r.Classes
			for c, n := range r.Forgotten {
				if n != 0 {
					d.forgot[classes[c]] = n
				}
			}
		case r.Counts != nil:
			row := map[string][2]int64{}
			for c, name := range classes {
				if r.Counts.Count(c) != 0 || r.Counts.Weight(c) != 0 {
					row[name] = [2]int64{int64(r.Counts.Count(c)), r.Counts.Weight(c)}
				}
			}
			d.rows[r.Hash] = row
			d.days[r.Hash] = r.Day
			d.keys = append(d.keys, fmt.Sprintf("1%016x", uint64(r.Hash)))
		case r.Class != "":
			d.seen[r.Digest] = r.Class
			st := map[string][2]int64{}
			for _, x := range r.Steps {
				st[x.Class] = [2]int64{x.Head, x.Body}
			}
			d.step[r.Digest] = st
			d.values[r.Digest] = fmt.Sprint(r.Values)
			d.marks[r.Digest] = fmt.Sprintf("%s %016x", r.Day, r.Mark)
			d.keys = append(d.keys, fmt.Sprintf("2%x", r.Digest))
		default:
			t.Errorf("Dump: record %d is empty: %+v", n, r)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Dump(%q): %v", user, err)
	}
	if !slices.IsSorted(d.keys) {
		t.Errorf("Dump(%q): records not in order", user)
	}
	return d
}

// records returns a Restore source that replays s's dump of user, and
// fails with errAt after n records when n > 0.
func records(t *testing.T, s store.Store, user string, n int, errAt error) func() (store.Record, error) {
	t.Helper()
	var rs []store.Record
	if err := s.Dump(context.Background(), user, func(r store.Record) error { rs = append(rs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	i := 0
	return func() (store.Record, error) {
		if n > 0 && i == n {
			return store.Record{}, errAt
		}
		if i == len(rs) {
			return store.Record{}, io.EOF
		}
		i++
		return rs[i-1], nil
	}
}

func equalDumps(t *testing.T, got, want dumped) {
	t.Helper()
	if !maps.EqualFunc(got.rows, want.rows, maps.Equal) {
		t.Errorf("rows differ: %d against %d", len(got.rows), len(want.rows))
	}
	if !maps.Equal(got.seen, want.seen) {
		t.Errorf("seen records differ: %d against %d", len(got.seen), len(want.seen))
	}
	if !maps.EqualFunc(got.step, want.step, maps.Equal) {
		t.Error("steps differ")
	}
	if !maps.Equal(got.values, want.values) {
		t.Error("values differ")
	}
	if !maps.Equal(got.days, want.days) {
		t.Error("token days differ")
	}
	if !maps.Equal(got.marks, want.marks) {
		t.Error("seen records' days or marks differ")
	}
	if !maps.Equal(got.forgot, want.forgot) {
		t.Errorf("forgotten messages differ: %v against %v", got.forgot, want.forgot)
	}
}

func testDumpRestore(t *testing.T, open Opener) {
	ctx := context.Background()
	src := openClosing(t, open)
	ops := trainSome(t, src, "alice", 1)
	trainSome(t, src, "", 2)
	want := dumpOf(t, src, "alice")
	if len(want.rows) == 0 || len(want.seen) != 39 {
		t.Fatalf("dump of %d rows and %d seen records", len(want.rows), len(want.seen))
	}
	// Every row is what Lookup says.
	hashes := slices.Sorted(maps.Keys(want.rows))
	got, err := src.Lookup(ctx, "alice", hashes)
	if err != nil {
		t.Fatal(err)
	}
	tot, _ := src.Totals(ctx, "alice")
	for i, h := range hashes {
		for c, name := range tot.Classes {
			if v := want.rows[h][name]; uint64(v[0]) != got[i].Count(c) || v[1] != got[i].Weight(c) {
				t.Fatalf("token %x: dump %v, Lookup %v", h, want.rows[h], got[i])
			}
		}
	}

	dst := openClosing(t, open)
	// Another class order in the store restored into.
	if _, err := dst.Apply(ctx, "other", []store.Op{Train("x", "news", map[bow.Hash]uint32{1: 1}), Train("y", "ham", map[bow.Hash]uint32{2: 1})}); err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"alice", "bob"} {
		if err := dst.Restore(ctx, user, records(t, src, "alice", 0, nil)); err != nil {
			t.Fatalf("Restore(%q): %v", user, err)
		}
		equalDumps(t, dumpOf(t, dst, user), want)
		a, _ := src.Totals(ctx, "alice")
		b, _ := dst.Totals(ctx, user)
		for i, c := range a.Classes {
			j := b.Index(c)
			if a.Messages[i] != at(b.Messages, j) || a.Tokens[i] != at(b.Tokens, j) {
				t.Errorf("%s: class %s: totals %d/%d, restored %d/%d", user, c, a.Messages[i], a.Tokens[i], at(b.Messages, j), at(b.Tokens, j))
			}
		}
		if a.Vocabulary != b.Vocabulary {
			t.Errorf("%s: vocabulary %d, restored %d", user, a.Vocabulary, b.Vocabulary)
		}
		if got, want := samplesOf(t, dst, user), samplesOf(t, src, "alice"); len(want) == 0 || !samplesEqual(got, want) {
			t.Errorf("%s: samples %+v, restored %+v", user, want, got)
		}
		if err := dst.Check(ctx, user); err != nil {
			t.Errorf("Check(%q) after restore: %v", user, err)
		}
		for d, class := range want.seen {
			if got, err := dst.Seen(ctx, user, d); err != nil || got != class {
				t.Errorf("Seen(%q, %x) = %q, %v; want %q", user, d, got, err, class)
			}
		}
	}
	// A restored model trains on as the original would: forgetting a
	// message takes back its counts and steps exactly in both.
	forget := ops[0]
	forget.Class = ""
	for _, s := range []store.Store{src, dst} {
		if _, err := s.Apply(ctx, "alice", []store.Op{forget}); err != nil {
			t.Fatal(err)
		}
	}
	equalDumps(t, dumpOf(t, dst, "alice"), dumpOf(t, src, "alice"))
	if !samplesEqual(samplesOf(t, dst, "alice"), samplesOf(t, src, "alice")) {
		t.Error("after forgetting a message, the samples of the restored model differ from the original's")
	}
	if err := dst.Check(ctx, "alice"); err != nil {
		t.Error(err)
	}
	if users, _ := dst.Users(ctx); !slices.Contains(users, "bob") {
		t.Errorf("Users = %q after restoring bob", users)
	}
}

func testRestoreFails(t *testing.T, open Opener) {
	ctx := context.Background()
	src := openClosing(t, open)
	trainSome(t, src, "alice", 3)
	dst := openClosing(t, open)
	boom := errors.New("reader failed")
	if err := dst.Restore(ctx, "alice", records(t, src, "alice", 25, boom)); !errors.Is(err, boom) {
		t.Errorf("Restore with a failing reader: %v", err)
	}
	Expect(t, dst, "alice", State{Counts: map[bow.Hash]map[string]uint64{}, Seen: map[string]string{"alice0": ""}})
	if users, _ := dst.Users(ctx); slices.Contains(users, "alice") {
		t.Errorf("Users = %q after a failed restore", users)
	}
	// The failed restore left nothing in the way of the next.
	if err := dst.Restore(ctx, "alice", records(t, src, "alice", 0, nil)); err != nil {
		t.Fatalf("Restore after a failed one: %v", err)
	}
	equalDumps(t, dumpOf(t, dst, "alice"), dumpOf(t, src, "alice"))
	if err := dst.Restore(ctx, "alice", records(t, src, "alice", 0, nil)); !errors.Is(err, store.ErrExists) {
		t.Errorf("Restore over a model: %v, want ErrExists", err)
	}
	for _, bad := range []struct {
		name string
		recs []store.Record
	}{
		{"no header", []store.Record{{Hash: 1, Counts: store.Counts{1}}}},
		{"token twice", []store.Record{{Classes: []string{"spam"}}, {Hash: 1, Counts: store.Counts{1}}, {Hash: 1, Counts: store.Counts{2}}}},
		{"class beyond the header", []store.Record{{Classes: []string{"spam"}}, {Hash: 1, Counts: store.Counts{1, 0, 3}}}},
		{"bad class", []store.Record{{Classes: []string{"Spam!"}}}},
	} {
		t.Run(bad.name, func(t *testing.T) {
			i := 0
			err := dst.Restore(ctx, "carol", func() (store.Record, error) {
				if i == len(bad.recs) {
					return store.Record{}, io.EOF
				}
				i++
				return bad.recs[i-1], nil
			})
			if err == nil {
				t.Fatal("Restore accepted it")
			}
			Expect(t, dst, "carol", State{Counts: map[bow.Hash]map[string]uint64{1: nil}})
		})
	}
}

func testDeleteUser(t *testing.T, open Opener) {
	ctx := context.Background()
	s := openClosing(t, open)
	trainSome(t, s, "alice", 4)
	trainSome(t, s, "alicia", 5)
	before := dumpOf(t, s, "alicia")
	if err := s.DeleteUser(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	d := dumpOf(t, s, "alice")
	if len(d.rows) != 0 || len(d.seen) != 0 {
		t.Errorf("after DeleteUser, %d rows and %d seen records", len(d.rows), len(d.seen))
	}
	Expect(t, s, "alice", State{Counts: map[bow.Hash]map[string]uint64{}, Seen: map[string]string{"alice0": ""}})
	equalDumps(t, dumpOf(t, s, "alicia"), before)
	if users, _ := s.Users(ctx); slices.Contains(users, "alice") {
		t.Errorf("Users = %q after deleting alice", users)
	}
	if err := s.DeleteUser(ctx, "nobody"); err != nil {
		t.Errorf("DeleteUser of no model: %v", err)
	}
	// A user deleted trains again from nothing.
	trainSome(t, s, "alice", 4)
	if err := s.Check(ctx, "alice"); err != nil {
		t.Error(err)
	}
	if err := s.DeleteUser(ctx, "../x"); !errors.Is(err, store.ErrInvalidUser) {
		t.Errorf("DeleteUser of a bad name: %v", err)
	}
}

// Span returns the hashes from lo up to hi.
func Span(lo, hi bow.Hash) []bow.Hash {
	var hs []bow.Hash
	for h := lo; h < hi; h++ {
		hs = append(hs, h)
	}
	return hs
}

// LookupCase is one lookup CheckLookupInto makes.
type LookupCase struct {
	Name   string
	User   string
	Hashes []bow.Hash
}

// CheckLookupInto makes the lookups of cases one after another in one
// buffer, which grows and shrinks under them, and checks each answer
// against Lookup's; then that an invalid user name is refused.
func CheckLookupInto(t *testing.T, s store.Filler, cases []LookupCase) {
	t.Helper()
	ctx := context.Background()
	var b store.LookupBuffer
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			want, err := s.Lookup(ctx, c.User, c.Hashes)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.LookupInto(ctx, c.User, c.Hashes, &b)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(got, want, func(a, b store.Counts) bool { return (a == nil) == (b == nil) && slices.Equal(a, b) }) {
				t.Errorf("LookupInto = %v, want %v", got, want)
			}
		})
	}
	if _, err := s.LookupInto(ctx, "bad/user", nil, &b); err == nil {
		t.Error("LookupInto of an invalid user name: no error")
	}
}
