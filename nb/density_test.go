package nb

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The continuous worked example of docs/method.md: one feature, "links in
// the message", spam values {4, 6, 8, 10}, ham values {1, 2, 2, 3},
// classify x = 5 with equal priors. The values are put on a grid of step
// 0.1 starting at -10 (value v at level 10v+100), far enough from the
// grid's ends that no kernel reaches them: a density of levels is one of
// values times the step, and log ratios and posteriors are the same.
const (
	exStep   = 0.1
	exLevels = 1024
)

func exLevel(v float64) int { return int(math.Round(v/exStep)) + 100 }

func exSample(vs ...float64) Sample {
	ls := make([]int, len(vs))
	for i, v := range vs {
		ls[i] = exLevel(v)
	}
	return SampleOf(ls...)
}

var (
	exHam  = exSample(1, 2, 2, 3)
	exSpam = exSample(4, 6, 8, 10)
)

// exPosterior scores x = 5 by the density alone, uniform priors, and
// returns the log ratio spam:ham and P(spam|x).
func exPosterior(d *Density) (logRatio, pSpam float64) {
	v := d.Value(exLevel(5), "links", "5", 1)
	m := &Model{Classes: []string{"ham", "spam"}, Params: Params{Prior: PriorUniform}}
	r := m.Score(nil, v)
	return v.LogDensity[1] - v.LogDensity[0], r.Posterior[1]
}

func TestGaussianWorkedExample(t *testing.T) {
	d := newDensity(DensityGaussian, exLevels, Kernel{}, 0, 10, []Sample{exHam, exSpam}, nil)
	if got := d.gMean[1]*exStep - 100*exStep; math.Abs(got-7) > 1e-12 {
		t.Errorf("spam mean %v, want 7", got)
	}
	if got := d.gVar[1] * exStep * exStep; math.Abs(got-5) > 1e-9 {
		t.Errorf("spam variance %v, want 5", got)
	}
	if got := d.gVar[0] * exStep * exStep; math.Abs(got-0.5) > 1e-9 {
		t.Errorf("ham variance %v, want 0.5", got)
	}
	out := make([]float64, 2)
	d.LogDensity(exLevel(5), out)
	for _, tt := range []struct {
		name string
		got  float64
		want string
	}{
		{"p(5|spam)", math.Exp(out[1]) / exStep, "0.1196"},
		{"p(5|ham)", math.Exp(out[0]) / exStep, "6.963e-5"},
	} {
		if !roundsTo(tt.got, tt.want) {
			t.Errorf("%s = %.6g, want %s", tt.name, tt.got, tt.want)
		}
	}
	ratio, p := exPosterior(d)
	if !roundsTo(ratio, "7.449") {
		t.Errorf("log ratio %.6g, want 7.449", ratio)
	}
	if !roundsTo(p, "0.99942") {
		t.Errorf("P(spam|x) = %.8g, want 0.99942", p)
	}
}

func TestParzenWorkedExample(t *testing.T) {
	for _, tt := range []struct {
		h                float64
		spam, ham, pSpam string
	}{
		{0.5, "0.05399", "6.692e-5", "0.99876"},
		{1, "0.1221", "0.01575", "0.88576"},
		{2, "0.1064", "0.06937", "0.60531"},
	} {
		d := newDensity(DensityParzen, exLevels, NewKernel(tt.h/exStep, exLevels), 0, 10, []Sample{exHam, exSpam}, nil)
		out := make([]float64, 2)
		d.LogDensity(exLevel(5), out)
		if got := math.Exp(out[1]) / exStep; !roundsTo(got, tt.spam) {
			t.Errorf("h=%v: p(5|spam) = %.6g, want %s", tt.h, got, tt.spam)
		}
		if got := math.Exp(out[0]) / exStep; !roundsTo(got, tt.ham) {
			t.Errorf("h=%v: p(5|ham) = %.6g, want %s", tt.h, got, tt.ham)
		}
		if _, p := exPosterior(d); !roundsTo(p, tt.pSpam) {
			t.Errorf("h=%v: P(spam|x) = %.8g, want %s", tt.h, p, tt.pSpam)
		}
	}
}

// TestParzenWorkedLikelihoods checks method.md's choice of h on the spam
// values: the training log-likelihood rises as h shrinks, the
// leave-one-out one peaks near h = 3. A log density of values is one of
// levels plus log(1/step) per value.
func TestParzenWorkedLikelihoods(t *testing.T) {
	perValue := exSpam.N * math.Log(1/exStep)
	for _, tt := range []struct {
		h          float64
		train, loo string
	}{
		{0.5, "-6.446", "-35.91"},
		{1, "-8.487", "-14.68"},
		{2, "-9.163", "-10.81"},
		{3, "", "-10.47"},
		{4, "-10.266", "-10.70"},
	} {
		pt := Likelihoods([]Sample{exSpam}, nil, exLevels, 0, tt.h/exStep)
		if tt.train != "" && !roundsTo(pt.Train+perValue, tt.train) {
			t.Errorf("h=%v: training LL %.6g, want %s", tt.h, pt.Train+perValue, tt.train)
		}
		if !roundsTo(pt.LeaveOneOut+perValue, tt.loo) {
			t.Errorf("h=%v: leave-one-out LL %.6g, want %s", tt.h, pt.LeaveOneOut+perValue, tt.loo)
		}
	}
}

// TestDensitiesSumToOne checks that each class's density, smoothed and
// with kernels reflected at the grid's ends, is a distribution over the
// levels: its sum over the grid, the integral of a density of levels, is
// 1 within 1e-3 (in fact within 1e-6).
func TestDensitiesSumToOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const levels = 300
	var edge, spread []int
	for range 500 {
		edge = append(edge, min(int(math.Abs(rng.NormFloat64())*3), levels-1)) // piled at level 0
		spread = append(spread, rng.IntN(levels))
	}
	edge = append(edge, levels-1, levels-1, levels-2)
	global := []Sample{SampleOf(edge...), SampleOf(spread...), {}}
	user := []Sample{SampleOf(3, 5, 299), {}, SampleOf(100, 150)}
	for _, kind := range []DensityKind{DensityParzen, DensityGaussian} {
		for _, h := range []float64{1, 2.5, 17, 80} {
			for _, u := range [][]Sample{nil, user} {
				d := newDensity(kind, levels, NewKernel(h, levels), 1, 10, global, u)
				sum := make([]float64, 3)
				out := make([]float64, 3)
				for l := range levels {
					d.LogDensity(l, out)
					for c := range out {
						sum[c] += math.Exp(out[c])
					}
				}
				for c, s := range sum {
					if kind == DensityGaussian && c < 2 {
						// A Gaussian is not reflected: a class near an
						// end loses what lies past it.
						continue
					}
					if math.Abs(s-1) > 1e-3 {
						t.Errorf("%v h=%v user=%v: class %d sums to %.9f", kind, h, u != nil, c, s)
					}
				}
			}
		}
	}
}

// TestChooseBandwidth draws normal values, for which the width that best
// fits a Parzen estimate is known: Silverman's rule 1.06·σ·n^(−1/5) is the
// optimum for normal data. The search, which knows nothing of normality,
// must find it within a fifth; the training likelihood must fall as h
// grows and the held-out and leave-one-out ones must peak inside the
// range searched.
func TestChooseBandwidth(t *testing.T) {
	const levels, sigma = 1024, 30.0
	for seed := range uint64(5) {
		rng := rand.New(rand.NewPCG(seed, 7))
		draw := func(n int, mean float64) Sample {
			ls := make([]int, n)
			for i := range ls {
				ls[i] = int(math.Round(mean + sigma*rng.NormFloat64()))
			}
			return SampleOf(ls...)
		}
		const n = 20000
		train := []Sample{draw(n, 400), draw(n, 600)}
		test := []Sample{draw(n, 400), draw(n, 600)}
		h, pts := ChooseBandwidth(train, test, levels, 1)
		want := 1.06 * sigma * math.Pow(n, -0.2)
		t.Logf("seed %d: h = %.2f, optimum %.2f", seed, h, want)
		if math.Abs(h-want)/want > 0.2 {
			t.Errorf("seed %d: chose h = %.2f, the optimum for normal data is %.2f", seed, h, want)
		}
		best, bestHeld := 0, 0
		for i, p := range pts {
			if i > 0 && !(p.Train < pts[i-1].Train) {
				t.Errorf("seed %d: training LL %v at h=%.2f does not fall from %v at h=%.2f", seed, p.Train, p.H, pts[i-1].Train, pts[i-1].H)
			}
			if p.LeaveOneOut > pts[best].LeaveOneOut {
				best = i
			}
			if p.HeldOut > pts[bestHeld].HeldOut {
				bestHeld = i
			}
		}
		if best == 0 || best == len(pts)-1 || bestHeld == 0 || bestHeld == len(pts)-1 {
			t.Errorf("seed %d: peaks at the edge of the search: leave-one-out at %d, held-out at %d of %d", seed, best, bestHeld, len(pts))
		}
	}
}

func TestSilverman(t *testing.T) {
	if got := Silverman(Sample{}); got != 1 {
		t.Errorf("empty sample: %v, want the floor 1", got)
	}
	if got := Silverman(SampleOf(5, 5, 5, 5)); got != 1 {
		t.Errorf("one level: %v, want the floor 1", got)
	}
	// Mostly zeros: the interquartile range is 0, and σ stands alone.
	s := SampleOf(0, 0, 0, 0, 0, 0, 100, 200)
	_, v := moments(s)
	if got, want := Silverman(s), 0.9*math.Sqrt(v)*math.Pow(8, -0.2); math.Abs(got-want) > 1e-9 {
		t.Errorf("zeros: %v, want %v", got, want)
	}
}

// TestUserDensity checks that a user's density starts as the global one
// and moves to the user's own values as they come.
func TestUserDensity(t *testing.T) {
	const levels = 200
	global := []Sample{SampleOf(10, 12, 14, 16, 18), SampleOf(150, 160, 170)}
	for _, kind := range []DensityKind{DensityGaussian, DensityParzen} {
		alone := newDensity(kind, levels, NewKernel(4, levels), 1, 10, global, nil)
		none := newDensity(kind, levels, NewKernel(4, levels), 1, 10, global, []Sample{{}, {}})
		var many []int
		for range 1000 {
			many = append(many, 100)
		}
		mine := newDensity(kind, levels, NewKernel(4, levels), 1, 10, global, []Sample{SampleOf(many...), {}})
		a, b, c := make([]float64, 2), make([]float64, 2), make([]float64, 2)
		for _, l := range []int{14, 100, 160} {
			alone.LogDensity(l, a)
			none.LogDensity(l, b)
			mine.LogDensity(l, c)
			if a[0] != b[0] || a[1] != b[1] {
				t.Errorf("%v: level %d: a user without values scores %v, the global model %v", kind, l, b, a)
			}
			if c[1] != a[1] {
				t.Errorf("%v: level %d: a class the user has no values of scores %v, not the global %v", kind, l, c[1], a[1])
			}
		}
		alone.LogDensity(100, a)
		mine.LogDensity(100, c)
		if !(c[0] > a[0]+2) {
			t.Errorf("%v: 1000 values at level 100 of the user's moved log p(100|ham) only from %v to %v", kind, a[0], c[0])
		}
	}
}

func TestScoreWithMeasures(t *testing.T) {
	m := &Model{Classes: []string{"ham", "spam"}, Params: Params{Prior: PriorUniform}}
	vs := []Value{
		{Name: "links", Text: "41", Weight: 0.5, LogDensity: []float64{-6, -2}},
		{Name: "size", Text: "800", Weight: 1, LogDensity: []float64{-3, -4}},
		{Name: "bad", Weight: 1, LogDensity: []float64{math.Inf(-1), 0}},
		{Name: "short", Weight: 1, LogDensity: []float64{1}},
		{Name: "unweighted", Weight: 0, LogDensity: []float64{1, 5}},
	}
	r := m.Score(nil, vs...)
	if got, want := r.LogOdds("spam"), 0.5*4+1*-1.0; math.Abs(got-want) > 1e-12 {
		t.Errorf("log-odds %v, want %v", got, want)
	}
	if r.Measures != 2 {
		t.Errorf("%d measures scored, want 2", r.Measures)
	}
	ex := m.Explain(nil, 0, vs...)
	got := ex.Measures[1]
	if len(got) != 2 || got[0].Name != "links" || got[0].Weight != 2 || got[0].LogRatio != 4 || got[1].Name != "size" || got[1].Weight != -1 {
		t.Errorf("measures toward spam: %+v", got)
	}
	if got[0].String() != "links=41 (+2.00)" || got[1].String() != "size=800 (-1.00)" {
		t.Errorf("written as %q and %q", got[0], got[1])
	}
	if ex.Result.LogOdds("spam") != r.LogOdds("spam") {
		t.Errorf("Explain scores %v, Score %v", ex.Result.LogOdds("spam"), r.LogOdds("spam"))
	}
	if one := m.Explain(nil, 1, vs...).Measures[0]; len(one) != 1 || one[0].Name != "links" || one[0].Weight != -2 {
		t.Errorf("the one measure weighing most for ham: %+v", one)
	}
}

func TestDensityOff(t *testing.T) {
	d := NewDensity(Params{}, 100, NewKernel(3, 100), []Sample{SampleOf(1, 2), SampleOf(50)}, nil)
	v := d.Value(50, "x", "50", 1)
	if v.LogDensity[0] != 0 || v.LogDensity[1] != 0 {
		t.Errorf("off: log densities %v, want zeros", v.LogDensity)
	}
}

func TestMeasureClip(t *testing.T) {
	m := &Model{Classes: []string{"ham", "spam"}, Params: Params{Prior: PriorUniform, MeasureClip: 1.5}}
	vs := []Value{
		{Name: "links", Text: "41", Weight: 0.5, LogDensity: []float64{-6, -2}},
		{Name: "size", Text: "800", Weight: 1, LogDensity: []float64{-3, -4}},
	}
	if got, want := m.Score(nil, vs...).LogOdds("spam"), 0.5*1.5-1; math.Abs(got-want) > 1e-12 {
		t.Errorf("log-odds %v, want %v: a ratio of 4 nats clipped to 1.5, one of 1 kept", got, want)
	}
	ex := m.Explain(nil, 0, vs...).Measures[1]
	if len(ex) != 2 || ex[0].Name != "size" || ex[0].Weight != -1 || ex[1].LogRatio != 1.5 || ex[1].Weight != 0.75 {
		t.Errorf("explained as %+v", ex)
	}
	if err := (Params{MeasureClip: -1}).Validate(); err == nil {
		t.Error("a negative clip is valid")
	}
}
