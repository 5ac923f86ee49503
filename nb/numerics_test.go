package nb

import (
	"math"
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
