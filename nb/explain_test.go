package nb

import (
	"cmp"
	"math"
	"slices"
	"testing"
)

func TestExplain(t *testing.T) {
	m := spamExample()
	ex := m.Explain(d5(), 0)
	const ham, spam = 0, 1
	moneyRatio := math.Log(6.0/14) - math.Log(2.0/9)
	rareRatio := math.Log(2.0/9) - math.Log(1.0/14)

	if ex.Rival[ham] != spam || ex.Rival[spam] != ham {
		t.Errorf("Rival %v, want [1 0]", ex.Rival)
	}
	for _, tc := range []struct {
		class int
		want  []Contribution
	}{
		{spam, []Contribution{{Hash: 1, Name: "money", Count: 3, LogRatio: moneyRatio, Weight: 3 * moneyRatio}}},
		// work and lunch tie; the lower Hash comes first.
		{ham, []Contribution{
			{Hash: 2, Name: "work", Count: 1, LogRatio: rareRatio, Weight: rareRatio},
			{Hash: 3, Name: "lunch", Count: 1, LogRatio: rareRatio, Weight: rareRatio},
		}},
	} {
		t.Run(m.Classes[tc.class], func(t *testing.T) {
			got := ex.Toward[tc.class]
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i, w := range tc.want {
				g := got[i]
				if g.Hash != w.Hash || g.Name != w.Name || g.Count != w.Count || !near(g.LogRatio, w.LogRatio, 1e-12) || !near(g.Weight, w.Weight, 1e-12) {
					t.Errorf("got %+v, want %+v", g, w)
				}
			}
		})
	}
	t.Run("top 1", func(t *testing.T) {
		if got := m.Explain(d5(), 1).Toward[ham]; len(got) != 1 || got[0].Name != "work" {
			t.Errorf("got %+v, want work alone", got)
		}
	})
}

// TestExplainAddsUp checks that the weights and the prior add up to the
// log-odds whatever the options, and that Explain scores as Score does.
func TestExplainAddsUp(t *testing.T) {
	msg := benchMessages(1, 200)[0]
	for _, tc := range []struct {
		name string
		m    *Model
	}{
		{"plain", benchModel(Params{})},
		{"normalized", benchModel(Params{Normalize: 0.7})},
		{"top 20", benchModel(Params{TopN: 20})},
		{"top 500", benchModel(Params{TopN: 500})},
		{"complement", benchModel(Params{Complement: true})},
		{"user", withUser(benchModel(Params{Normalize: 1, MinCount: 3}))},
		{"discriminative", benchModel(Params{Normalize: 0.85, MinSpread: 2, Discriminative: true})},
		{"discriminative user", withUser(benchModel(Params{Normalize: 0.85, TopN: 30, Discriminative: true, Mix: 0.2}))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := append([]Feature(nil), msg...)
			for i := range msg {
				msg[i].Part = i % 2
				if i%3 > 0 {
					msg[i].Weight = []float64{float64(i%5) / 7, -float64(i%4) / 7}
					msg[i].UserWeight = []float64{-0.1, 0.2}
				}
			}
			ex := tc.m.Explain(msg, 0)
			r := tc.m.Score(msg)
			if !slices.Equal(ex.Result.LogJoint, r.LogJoint) || ex.Result.Used != r.Used {
				t.Errorf("Explain scored %v, Score %v", ex.Result.LogJoint, r.LogJoint)
			}
			const ham, spam = 0, 1
			sum := ex.Result.LogPrior[spam] - ex.Result.LogPrior[ham]
			for _, c := range ex.Toward[spam] {
				sum += c.Weight
			}
			for _, c := range ex.Toward[ham] {
				sum -= c.Weight
			}
			if want := r.LogOdds("spam"); !near(sum, want, 1e-9) {
				t.Errorf("prior and weights add up to %v, log-odds %v", sum, want)
			}
			if n := len(ex.Toward[spam]) + len(ex.Toward[ham]); n > r.Used && !tc.m.Params.Discriminative {
				t.Errorf("%d contributions from %d features scored", n, r.Used)
			}
			for _, list := range ex.Toward {
				if !slices.IsSortedFunc(list, func(a, b Contribution) int { return cmp.Compare(b.Weight, a.Weight) }) {
					t.Errorf("not largest first: %+v", list)
				}
			}
		})
	}
}

func TestExplainThreeClasses(t *testing.T) {
	m := &Model{
		Classes:    []string{"a", "b", "c"},
		Global:     Totals{Messages: []float64{2, 3, 4}, Tokens: []float64{10, 20, 30}},
		Vocabulary: 7,
	}
	msg := []Feature{
		{Hash: 1, Name: "x", Count: 2, Global: []float64{5, 1, 1}},
		{Hash: 2, Name: "y", Count: 1, Global: []float64{0, 8, 1}},
	}
	ex := m.Explain(msg, 0)
	r := ex.Result
	for i := range r.Classes {
		j := ex.Rival[i]
		if want := slices.Index(r.LogJoint, maxExcept(r.LogJoint, i)); j != want {
			t.Errorf("Rival[%d] = %d, want %d", i, j, want)
		}
		lp := func(f Feature, c int) float64 {
			return math.Log((f.Global[c] + 1) / (m.Global.Tokens[c] + 7))
		}
		for _, c := range ex.Toward[i] {
			f := msg[c.Hash-1]
			if want := lp(f, i) - lp(f, j); !near(c.LogRatio, want, 1e-12) || c.Weight <= 0 {
				t.Errorf("%s toward %s: %+v, want LogRatio %v", f.Name, r.Classes[i], c, want)
			}
		}
	}
}

func maxExcept(s []float64, i int) float64 {
	best := math.Inf(-1)
	for k, v := range s {
		if k != i {
			best = max(best, v)
		}
	}
	return best
}
