package nb

import (
	"math"
	"testing"
)

func TestPool(t *testing.T) {
	run := func(logOdds float64) Result {
		r := Result{Classes: []string{"ham", "spam"}, LogJoint: []float64{0, logOdds}, LogPosterior: make([]float64, 2), Posterior: make([]float64, 2)}
		r.normalize()
		return r
	}
	for _, tc := range []struct {
		name string
		runs []float64
		want float64
	}{
		{"one run is itself", []float64{2.5}, 2.5},
		{"equal runs", []float64{-1, -1, -1}, -1},
		{"a payload among padding", []float64{8, -6, -6}, 8 + math.Log((1+2*math.Exp(-14))/3)},
		{"two runs", []float64{1, 3}, math.Log((math.E + math.Exp(3)) / 2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := make([]Result, len(tc.runs))
			for i, lo := range tc.runs {
				rs[i] = run(lo)
			}
			r := Pool(rs, "spam")
			if got := r.LogOdds("spam"); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("pooled log-odds %v, want %v", got, tc.want)
			}
			if s := r.Posterior[0] + r.Posterior[1]; math.Abs(s-1) > 1e-12 {
				t.Errorf("posteriors sum to %v", s)
			}
		})
	}
	if r := Pool(nil, "spam"); r.Classes != nil {
		t.Error("no runs gave a result")
	}
	if r := Pool([]Result{run(1)}, "eggs"); r.Classes != nil {
		t.Error("an unknown class gave a result")
	}
}
