package nb

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// FuzzScore checks that no counts or settings make Score, Explain or
// Decide return NaN or an infinity.
func FuzzScore(f *testing.F) {
	f.Add(1.0, 6.0, 1.0, 3.0, 3.0, 8.0, 1.0, 5.0, 3.0, 0.0, 0.0, 0.0, 0, false, 0, 1.0)
	f.Add(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0, false, 0, 0.0)
	f.Add(1e-300, 1e300, 1e308, math.MaxFloat64, math.Inf(1), math.NaN(), -1.0, 1e300, 1e300, 1e300, math.Inf(1), 1.0, 1, true, 2, 5e-324)
	f.Add(1e9, 5e-324, 5e-324, 0.0, 5e-324, 0.0, 5e-324, 0.0, 5e-324, 5e-324, 0.0, 0.5, 2, true, 1, 1e9)
	f.Fuzz(func(t *testing.T, alpha, vocab, nHam, nSpam, tHam, tSpam, cHam, cSpam, count, uHam, uSpam, beta float64, topN int, complement bool, prior int, lambda float64) {
		m := &Model{
			Classes: []string{"ham", "spam"},
			Params: Params{
				Alpha: alpha, Prior: PriorKind(prior), PriorAlpha: alpha, Lambda: lambda, LambdaPrior: lambda,
				Normalize: beta, TopN: topN, Complement: complement, MinCount: count,
			},
			Global:     Totals{Messages: []float64{nHam, nSpam}, Tokens: []float64{tHam, tSpam}},
			Vocabulary: vocab,
		}
		msg := []Feature{
			{Hash: 1, Count: count, Global: []float64{cHam, cSpam}},
			{Hash: 2, Count: 1, Global: []float64{cSpam, cHam}, User: []float64{uHam, uSpam}},
			{Hash: 3, Count: count, User: []float64{uSpam}},
		}
		for _, user := range []*Totals{nil, {Messages: []float64{uHam, uSpam}, Tokens: []float64{tSpam, uHam}}} {
			m.User = user
			r := m.Score(msg)
			if !finite(r) {
				t.Fatalf("not finite: %+v", r)
			}
			ex := m.Explain(msg, 0)
			if !slices.Equal(ex.Result.LogJoint, r.LogJoint) {
				t.Fatalf("Explain scored %v, Score %v", ex.Result.LogJoint, r.LogJoint)
			}
			for _, list := range ex.Toward {
				for _, c := range list {
					if math.IsNaN(c.Weight) || math.IsInf(c.Weight, 0) {
						t.Fatalf("contribution %+v", c)
					}
				}
			}
			loss := Loss{{0, math.Abs(alpha)}, {math.Abs(lambda), 0}}
			d := Decider{Loss: loss, Positive: []string{"spam"}, UnsureLow: -1, UnsureHigh: 1}.Decide(r)
			if d.Index < 0 || math.IsNaN(d.Risk) || math.IsInf(d.Risk, 0) {
				t.Fatalf("decision %+v", d)
			}
			if lo := r.LogOdds("spam"); math.IsNaN(lo) || math.IsInf(lo, 0) {
				t.Fatalf("log-odds %v", lo)
			}
		}
	})
}

func TestScoreInto(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    *Model
	}{
		{"global", benchModel(Params{})},
		{"user", withUser(benchModel(Params{}))},
		{"top 15", benchModel(Params{TopN: 15})},
		{"everything", withUser(benchModel(Params{TopN: 15, Complement: true, Normalize: 0.5, MinCount: 2, Prior: PriorMAP}))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs := benchMessages(4, 300)
			var r Result
			for _, msg := range msgs {
				tc.m.ScoreInto(&r, msg)
				want := tc.m.Score(msg)
				if !slices.Equal(r.LogJoint, want.LogJoint) || !slices.Equal(r.Posterior, want.Posterior) || r.Used != want.Used {
					t.Errorf("ScoreInto %v, Score %v", r.LogJoint, want.LogJoint)
				}
			}
			allocs := testing.AllocsPerRun(100, func() { tc.m.ScoreInto(&r, msgs[0]) })
			if allocs != 0 {
				t.Errorf("ScoreInto allocates %v times per message", allocs)
			}
		})
	}
}

// FuzzScoreTwoClasses checks that Score, which sums the features of a
// two-class global model on a path of its own, gives the bits that the
// general path Explain takes gives: the same log-joint, posteriors,
// features used, tokens and steps, whatever counts, weights and parts the
// features hold, finite or not.
func FuzzScoreTwoClasses(f *testing.F) {
	f.Add(uint64(1), 2.0, 0.0, 0.85, 0.01, true)
	f.Add(uint64(2), 0.0, 0.0, 0.0, 1.0, false)
	f.Add(uint64(3), 0.5, 3.0, 1.0, 0.5, true)
	f.Add(uint64(4), 1e3, 1e100, 0.5, 1e-9, true)
	f.Fuzz(func(t *testing.T, seed uint64, minSpread, minCount, beta, alpha float64, disc bool) {
		m := benchModel(Params{Alpha: alpha, MinSpread: minSpread, MinCount: minCount, Normalize: beta, Discriminative: disc})
		// Values that take each branch of clean, the table of logarithms
		// and weight.
		odd := []float64{0, 1, 2, 3, 7, 1023, 1024, 1e6, 2.5, -1, -0.0, 1 << 62, 1e100, 1e300, 5e-324, math.Inf(1), math.Inf(-1), math.NaN()}
		rng := rand.New(rand.NewPCG(seed, 5))
		pick := func() float64 {
			if rng.IntN(3) == 0 {
				return odd[rng.IntN(len(odd))]
			}
			return float64(rng.IntN(40))
		}
		row := func() []float64 {
			switch rng.IntN(6) {
			case 0:
				return nil
			case 1:
				return []float64{pick()}
			case 2:
				return []float64{pick(), pick(), pick()}
			}
			return []float64{pick(), pick()}
		}
		fs := make([]Feature, rng.IntN(200))
		for i := range fs {
			fs[i] = Feature{Hash: rng.Uint64(), Count: pick(), Global: row(), Weight: row(), User: row(), Part: rng.IntN(4) - 1}
		}
		got := m.Score(fs)
		want := m.Explain(fs, 0).Result
		same := func(a, b []float64) bool {
			return slices.EqualFunc(a, b, func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) })
		}
		if !same(got.LogJoint, want.LogJoint) || !same(got.LogPosterior, want.LogPosterior) || got.Used != want.Used || math.Float64bits(got.Tokens) != math.Float64bits(want.Tokens) {
			t.Fatalf("Score: %v, %d used, %v tokens; Explain: %v, %d used, %v tokens", got.LogJoint, got.Used, got.Tokens, want.LogJoint, want.Used, want.Tokens)
		}
		for c := range 2 {
			gs, ws := got.Step(c), want.Step(c)
			for p := range gs {
				if !same(gs[p], ws[p]) {
					t.Fatalf("Step(%d): Score's %v, Explain's %v", c, gs, ws)
				}
			}
		}
	})
}
