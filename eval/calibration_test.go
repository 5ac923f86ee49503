package eval

import (
	"math"
	"testing"
)

func TestReliability(t *testing.T) {
	logit := func(p float64) float64 { return math.Log(p / (1 - p)) }
	rs := []Record{
		// Two messages at p = 0.05: one spam.
		{Score: logit(0.05), Spam: true}, {Score: logit(0.05)},
		// Four at p = 0.8: three spam.
		{Score: logit(0.8), Spam: true}, {Score: logit(0.8), Spam: true},
		{Score: logit(0.8), Spam: true}, {Score: logit(0.8)},
		// Certain spam lands in the last bin, closed at 1.
		{Score: 800, Spam: true},
	}
	bins := Reliability(rs, 4)
	want := []Bin{
		{Lo: 0, Hi: 0.25, N: 2, Predicted: 0.05, Observed: 0.5},
		{Lo: 0.25, Hi: 0.5},
		{Lo: 0.5, Hi: 0.75},
		{Lo: 0.75, Hi: 1, N: 5, Predicted: (4*0.8 + 1) / 5, Observed: 0.8},
	}
	for i, b := range bins {
		w := want[i]
		if b.N != w.N || b.Lo != w.Lo || b.Hi != w.Hi || math.Abs(b.Predicted-w.Predicted) > 1e-12 || math.Abs(b.Observed-w.Observed) > 1e-12 {
			t.Errorf("bin %d = %+v, want %+v", i, b, w)
		}
	}
	// (2·|0.5−0.05| + 5·|0.8−0.84|) / 7
	if got, want := CalibrationError(bins), (2*0.45+5*0.04)/7; math.Abs(got-want) > 1e-12 {
		t.Errorf("CalibrationError = %v, want %v", got, want)
	}
	if got := CalibrationError(Reliability(nil, 10)); got != 0 {
		t.Errorf("CalibrationError of nothing = %v, want 0", got)
	}
}
