package nb

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// resultOf returns the Result of a message with likelihoods p(x|c) under
// priors P(c).
func resultOf(classes []string, likelihood, prior []float64) Result {
	var r Result
	r.reset(classes)
	for c := range classes {
		r.LogPrior[c] = math.Log(prior[c])
		r.LogJoint[c] = math.Log(likelihood[c]) + r.LogPrior[c]
	}
	r.normalize()
	return r
}

// TestLossMatchesRiskFormula checks Decide against method.md's rule:
// decide c1 when p(x|c1)/p(x|c2) > [(ℓ12 − ℓ22)/(ℓ21 − ℓ11)]·P(c2)/P(c1).
func TestLossMatchesRiskFormula(t *testing.T) {
	classes := []string{"c1", "c2"}
	formula := func(l Loss, px, prior []float64) string {
		if px[0]/px[1] > (l[0][1]-l[1][1])/(l[1][0]-l[0][0])*prior[1]/prior[0] {
			return "c1"
		}
		return "c2"
	}
	type example struct {
		name  string
		loss  Loss
		px    []float64
		prior []float64
	}
	d5 := []float64{math.Pow(6.0/14, 3) * math.Pow(1.0/14, 2), math.Pow(2.0/9, 5)}
	cases := []example{
		// method.md's d5 as c1 = spam, c2 = ham: P(spam|d5) ≈ 0.690.
		{"d5 0-1 loss", Loss{{0, 1}, {1, 0}}, d5, []float64{0.75, 0.25}},
		{"d5 false positive twice as bad", Loss{{0, 2}, {1, 0}}, d5, []float64{0.75, 0.25}},
		{"d5 false positive thrice as bad", Loss{{0, 3}, {1, 0}}, d5, []float64{0.75, 0.25}},
		{"d5 false negative costly", Loss{{0, 1}, {5, 0}}, d5, []float64{0.1, 0.9}},
		{"costs on the diagonal", Loss{{1, 4}, {3, 2}}, []float64{0.2, 0.1}, []float64{0.5, 0.5}},
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 500 {
		l := Loss{{rng.Float64(), 0}, {0, rng.Float64()}}
		l[0][1] = l[1][1] + 0.01 + 10*rng.Float64()
		l[1][0] = l[0][0] + 0.01 + 10*rng.Float64()
		p := rng.Float64()
		cases = append(cases, example{"random " + strconv.Itoa(i), l,
			[]float64{math.Exp(-50 * rng.Float64()), math.Exp(-50 * rng.Float64())}, []float64{p, 1 - p}})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lhs := tc.px[0] / tc.px[1]
			rhs := (tc.loss[0][1] - tc.loss[1][1]) / (tc.loss[1][0] - tc.loss[0][0]) * tc.prior[1] / tc.prior[0]
			if near(lhs, rhs, 1e-9) {
				t.Skip("too close to the threshold to tell rounding from error")
			}
			r := resultOf(classes, tc.px, tc.prior)
			want := formula(tc.loss, tc.px, tc.prior)
			if got := (Decider{Loss: tc.loss}).Decide(r); got.Class != want {
				t.Errorf("Decide = %s, formula %s (P(c1|x) = %v)", got.Class, want, r.Posterior[0])
			}
			// The same rule as a threshold on the posterior.
			if got := r.Posterior[0] > tc.loss.Threshold(0, 1); got != (want == "c1") {
				t.Errorf("P(c1|x) = %v > Threshold %v is %v, formula says %s", r.Posterior[0], tc.loss.Threshold(0, 1), got, want)
			}
		})
	}
}

func TestCostRatio(t *testing.T) {
	classes := []string{"ham", "spam"}
	for _, tc := range []struct {
		fp, fn    float64
		threshold float64 // on P(spam|x)
	}{
		{1, 1, 0.5},
		{9, 1, 0.9},
		{999, 1, 0.999},
		{1, 3, 0.25},
	} {
		t.Run(fmt.Sprintf("fp %v fn %v", tc.fp, tc.fn), func(t *testing.T) {
			l, err := CostRatio(classes, "spam", "ham", tc.fp, tc.fn)
			if err != nil {
				t.Fatal(err)
			}
			if want := (Loss{{0, tc.fn}, {tc.fp, 0}}); !nearAll(l[0], want[0], 0) || !nearAll(l[1], want[1], 0) {
				t.Errorf("loss %v, want %v", l, want)
			}
			if got := l.Threshold(1, 0); !near(got, tc.threshold, 1e-12) {
				t.Errorf("Threshold(spam, ham) = %v, want %v", got, tc.threshold)
			}
			if got := l.Threshold(0, 1); !near(got, 1-tc.threshold, 1e-12) {
				t.Errorf("Threshold(ham, spam) = %v, want %v", got, 1-tc.threshold)
			}
			d := Decider{Loss: l}
			for _, p := range []float64{tc.threshold * 0.99, (tc.threshold + 1) / 2} {
				want := "ham"
				if p > tc.threshold {
					want = "spam"
				}
				if got := d.Decide(resultOf(classes, []float64{1 - p, p}, []float64{0.5, 0.5})); got.Class != want {
					t.Errorf("P(spam|x) = %v: %s, want %s", p, got.Class, want)
				}
			}
		})
	}
	t.Run("three classes", func(t *testing.T) {
		l, err := CostRatio([]string{"ham", "spam", "phish"}, "spam", "ham", 9, 2)
		if err != nil {
			t.Fatal(err)
		}
		want := Loss{{0, 2, 1}, {9, 0, 1}, {1, 1, 0}}
		for i := range want {
			if !nearAll(l[i], want[i], 0) {
				t.Errorf("loss %v, want %v", l, want)
			}
		}
	})
	for _, tc := range []struct {
		name               string
		positive, negative string
		fp, fn             float64
	}{
		{"unknown positive", "eggs", "ham", 1, 1},
		{"unknown negative", "spam", "eggs", 1, 1},
		{"same class", "spam", "spam", 1, 1},
		{"free false positive", "spam", "ham", 0, 1},
		{"negative cost", "spam", "ham", 1, -1},
		{"NaN cost", "spam", "ham", math.NaN(), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := CostRatio(classes, tc.positive, tc.negative, tc.fp, tc.fn); !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v, want ErrInvalid", err)
			}
		})
	}
}

func TestThreeClassLoss(t *testing.T) {
	classes := []string{"ham", "spam", "phish"}
	// Losing ham costs 10, missing phish 5, other mistakes 1.
	loss := Loss{{0, 1, 5}, {10, 0, 1}, {10, 1, 0}}
	for _, tc := range []struct {
		name      string
		posterior []float64
		want      string
	}{
		// Risks: ham 0.3+5·0.3 = 1.8, spam 10·0.4+0.3 = 4.3, phish 10·0.4+0.3 = 4.3.
		{"ham is cheapest", []float64{0.4, 0.3, 0.3}, "ham"},
		// Risks: ham 0.1+5·0.85 = 4.35, spam 0.5+0.85 = 1.35, phish 0.5+0.1 = 0.6.
		{"phish", []float64{0.05, 0.1, 0.85}, "phish"},
		// Risks: ham 0.9+0.25 = 1.15, spam 0.5+0.05 = 0.55, phish 0.5+0.9 = 1.4.
		{"spam", []float64{0.05, 0.9, 0.05}, "spam"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := resultOf(classes, tc.posterior, []float64{1, 1, 1})
			if got := (Decider{Loss: loss}).Decide(r); got.Class != tc.want {
				t.Errorf("Decide = %+v, want %s", got, tc.want)
			}
		})
	}
}

func TestUnsureBand(t *testing.T) {
	classes := []string{"ham", "spam"}
	d := Decider{Positive: []string{"spam"}, UnsureLow: Logit(0.2), UnsureHigh: Logit(0.9)}
	for _, tc := range []struct {
		p      float64 // P(spam|x)
		class  string
		unsure bool
	}{
		{0.01, "ham", false},
		{0.19, "ham", false},
		{0.21, "ham", true},
		{0.6, "spam", true},
		{0.89, "spam", true},
		{0.91, "spam", false},
		{1 - 1e-12, "spam", false},
	} {
		t.Run(fmt.Sprint(tc.p), func(t *testing.T) {
			r := resultOf(classes, []float64{1 - tc.p, tc.p}, []float64{0.5, 0.5})
			if got := d.Decide(r); got.Class != tc.class || got.Unsure != tc.unsure {
				t.Errorf("P(spam|x) = %v: %+v, want %s, unsure %v", tc.p, got, tc.class, tc.unsure)
			}
		})
	}
	t.Run("band bounds", func(t *testing.T) {
		var r Result
		r.reset(classes)
		for _, tc := range []struct {
			logOdds float64
			unsure  bool
		}{{-1, true}, {0.999, true}, {1, false}, {-1.001, false}} {
			r.LogJoint[0], r.LogJoint[1] = 0, tc.logOdds
			r.normalize()
			if got := (Decider{Positive: []string{"spam"}, UnsureLow: -1, UnsureHigh: 1}).Decide(r); got.Unsure != tc.unsure {
				t.Errorf("log-odds %v: unsure %v, want %v", tc.logOdds, got.Unsure, tc.unsure)
			}
		}
	})
	t.Run("off", func(t *testing.T) {
		r := resultOf(classes, []float64{0.5, 0.5}, []float64{0.5, 0.5})
		for _, d := range []Decider{{}, {Positive: []string{"spam"}}, {Positive: []string{"eggs"}, UnsureLow: -1, UnsureHigh: 1}, {Positive: []string{"spam"}, UnsureLow: 1, UnsureHigh: -1}} {
			if got := d.Decide(r); got.Unsure {
				t.Errorf("%+v: unsure", d)
			}
		}
	})
	t.Run("no classes", func(t *testing.T) {
		if got := d.Decide(Result{}); got.Index != -1 || got.Class != "" || got.Unsure {
			t.Errorf("got %+v", got)
		}
	})
}

// TestGroupBand checks the unsure band on the joint log-odds of several
// classes: spam and phishing against ham and newsletters.
func TestGroupBand(t *testing.T) {
	classes := []string{"ham", "spam", "phish", "news"}
	d := Decider{Positive: []string{"spam", "phish"}, UnsureLow: Logit(0.2), UnsureHigh: Logit(0.9)}
	for _, tc := range []struct {
		name      string
		posterior []float64
		unsure    bool
	}{
		// P(spam or phish) = 0.5: unsure, though neither is more likely than ham.
		{"split between two positive classes", []float64{0.3, 0.25, 0.25, 0.2}, true},
		{"positive", []float64{0.02, 0.5, 0.45, 0.03}, false},
		{"negative", []float64{0.5, 0.05, 0.05, 0.4}, false},
		{"newsletter", []float64{0.05, 0.1, 0.1, 0.75}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := resultOf(classes, tc.posterior, []float64{1, 1, 1, 1})
			if got := d.Decide(r); got.Unsure != tc.unsure {
				t.Errorf("%+v, want unsure %v", got, tc.unsure)
			}
		})
	}
}

func TestGroupLogOdds(t *testing.T) {
	classes := []string{"ham", "spam", "phish"}
	r := resultOf(classes, []float64{0.2, 0.5, 0.3}, []float64{1, 1, 1})
	for _, tc := range []struct {
		group []string
		want  float64
	}{
		{[]string{"spam"}, math.Log(0.5 / 0.5)},
		{[]string{"spam", "phish"}, math.Log(0.8 / 0.2)},
		{[]string{"phish", "eggs"}, math.Log(0.3 / 0.7)},
		{nil, math.Inf(-1)},
		{classes, math.Inf(1)},
	} {
		if got := r.GroupLogOdds(tc.group); !(got == tc.want || near(got, tc.want, 1e-12)) {
			t.Errorf("GroupLogOdds(%q) = %v, want %v", tc.group, got, tc.want)
		}
	}
	// For two classes and a group of one it is LogOdds.
	two := resultOf([]string{"ham", "spam"}, []float64{0.003, 0.7}, []float64{0.4, 0.6})
	if g, l := two.GroupLogOdds([]string{"spam"}), two.LogOdds("spam"); !near(g, l, 1e-12) {
		t.Errorf("GroupLogOdds %v, LogOdds %v", g, l)
	}
	// Far beyond what a posterior can show, it still orders.
	var far Result
	far.reset(classes)
	far.LogJoint[0], far.LogJoint[1], far.LogJoint[2] = 0, 900, 899
	far.normalize()
	if got, want := far.GroupLogOdds([]string{"spam", "phish"}), 900+math.Log1p(math.Exp(-1)); !near(got, want, 1e-9) {
		t.Errorf("GroupLogOdds far out = %v, want %v", got, want)
	}
}

func TestLogit(t *testing.T) {
	for _, tc := range []struct {
		p, want float64
	}{
		{0.5, 0},
		{0.9, math.Log(9)},
		{0.2, -math.Log(4)},
		{0, math.Inf(-1)},
		{1, math.Inf(1)},
	} {
		t.Run(fmt.Sprint(tc.p), func(t *testing.T) {
			if got := Logit(tc.p); !(got == tc.want || near(got, tc.want, 1e-12)) {
				t.Errorf("Logit(%v) = %v, want %v", tc.p, got, tc.want)
			}
		})
	}
}

func TestLossValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		loss Loss
		k    int
		ok   bool
	}{
		{"0-1", Loss{{0, 1}, {1, 0}}, 2, true},
		{"costly diagonal", Loss{{1, 4}, {3, 2}}, 2, true},
		{"nil", nil, 2, false},
		{"rows", Loss{{0, 1}, {1, 0}}, 3, false},
		{"columns", Loss{{0, 1}, {1}}, 2, false},
		{"negative", Loss{{0, 1}, {-1, 0}}, 2, false},
		{"NaN", Loss{{0, math.NaN()}, {1, 0}}, 2, false},
		{"infinite", Loss{{0, math.Inf(1)}, {1, 0}}, 2, false},
		{"free mistake", Loss{{0, 0}, {1, 0}}, 2, false},
		{"mistake cheaper than the truth", Loss{{2, 1}, {1, 0}}, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.loss.Validate(tc.k)
			if tc.ok && err != nil || !tc.ok && !errors.Is(err, ErrInvalid) {
				t.Errorf("Validate = %v, want ok %v", err, tc.ok)
			}
		})
	}
	t.Run("invalid entries decide as 0-1", func(t *testing.T) {
		r := resultOf([]string{"ham", "spam"}, []float64{0.4, 0.6}, []float64{0.5, 0.5})
		for _, l := range []Loss{{{0, math.NaN()}, {math.Inf(1), 0}}, {{0}}, {{0, -5}, {-1}}} {
			if got := (Decider{Loss: l}).Decide(r); got.Class != "spam" || math.IsNaN(got.Risk) || !near(got.Risk, 0.4, 1e-12) {
				t.Errorf("loss %v: %+v, want spam at risk 0.4", l, got)
			}
		}
	})
	t.Run("threshold of a degenerate loss", func(t *testing.T) {
		if got := (Loss{{0, 0}, {0, 0}}).Threshold(0, 1); got != 0.5 {
			t.Errorf("Threshold = %v, want 0.5", got)
		}
	})
}

func TestDeciderValidate(t *testing.T) {
	classes := []string{"ham", "spam"}
	for _, tc := range []struct {
		name string
		d    Decider
		ok   bool
	}{
		{"zero", Decider{}, true},
		{"band", Decider{Positive: []string{"spam"}, UnsureLow: -1, UnsureHigh: 2}, true},
		{"band on an unknown class", Decider{Positive: []string{"eggs"}, UnsureLow: -1, UnsureHigh: 2}, false},
		{"NaN band", Decider{Positive: []string{"spam"}, UnsureLow: math.NaN(), UnsureHigh: 2}, false},
		{"bad loss", Decider{Loss: Loss{{0, 1}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.d.Validate(classes)
			if tc.ok && err != nil || !tc.ok && !errors.Is(err, ErrInvalid) {
				t.Errorf("Validate = %v, want ok %v", err, tc.ok)
			}
		})
	}
}
