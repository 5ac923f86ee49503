package nb

import (
	"math"
	"testing"
)

// TestDiscriminativeScore works the discriminative score of method.md's
// d5 by hand: half the log-likelihood plus the weights over the message's
// length.
func TestDiscriminativeScore(t *testing.T) {
	const ham, spam = 0, 1
	m := spamExample()
	m.Params.Discriminative = true
	m.Params.Mix = 0.5
	fs := d5()
	fs[0].Weight = []float64{-0.2, 0.2} // money
	fs[1].Weight = []float64{0.5, -0.5} // work
	r := m.Score(fs)

	nbOdds := math.Log(3.0/4) - math.Log(1.0/4) + 3*(math.Log(6.0/14)-math.Log(2.0/9)) + 2*(math.Log(1.0/14)-math.Log(2.0/9))
	learned := (3*0.4 + 1*(-1.0)) / math.Sqrt(3*3+1+1)
	want := (math.Log(3.0/4) - math.Log(1.0/4)) + 0.5*(nbOdds-(math.Log(3.0/4)-math.Log(1.0/4))) + learned
	if got := r.LogOdds("spam"); !near(got, want, 1e-12) {
		t.Errorf("LogOdds = %v, want %v", got, want)
	}
	if p := r.Posterior[spam] + r.Posterior[ham]; !near(p, 1, 1e-12) {
		t.Errorf("posteriors sum to %v", p)
	}

	t.Run("weights ignored unless discriminative", func(t *testing.T) {
		plain := spamExample()
		if got, want := plain.Score(fs).LogOdds("spam"), plain.Score(d5()).LogOdds("spam"); got != want {
			t.Errorf("LogOdds with weights %v, without %v", got, want)
		}
	})
	t.Run("user weights only with user data", func(t *testing.T) {
		user := append([]Feature(nil), fs...)
		user[1].UserWeight = []float64{5, -5}
		if got := m.Score(user).LogOdds("spam"); got != r.LogOdds("spam") {
			t.Errorf("LogOdds %v with user weights and no user data, want %v", got, r.LogOdds("spam"))
		}
		mu := spamExample()
		mu.Params = m.Params
		mu.User = &Totals{Messages: []float64{1, 1}, Tokens: []float64{5, 5}}
		base := mu.Score(fs).LogOdds("spam")
		if got, want := mu.Score(user).LogOdds("spam"), base-10/math.Sqrt(11); !near(got, want, 1e-12) {
			t.Errorf("LogOdds %v with the user's weights, want %v", got, want)
		}
	})
	t.Run("non-finite weights are bounded", func(t *testing.T) {
		bad := append([]Feature(nil), fs...)
		bad[2].Weight = []float64{math.NaN(), math.Inf(1)}
		if got := m.Score(bad).LogOdds("spam"); math.IsNaN(got) {
			t.Errorf("LogOdds = %v", got)
		}
	})
}

// TestStep checks the step against the gradient of the log-loss, taken
// numerically: each weight moves by −Rate times the derivative of
// −log P(class|x) per occurrence of its feature.
func TestStep(t *testing.T) {
	m := withUser(benchModel(Params{Discriminative: true, Rate: 0.7, Normalize: 0.85, MinSpread: 1}))
	fs := benchMessages(1, 60)[0]
	for i := range fs {
		fs[i].Part = i % 2
		fs[i].Weight = []float64{float64(i%7) / 10, -float64(i%5) / 10}
		fs[i].UserWeight = []float64{0.1, float64(i%3) / 10}
	}
	for _, class := range []int{0, 1} {
		r := m.Score(fs)
		step := r.Step(class)
		loss := func() float64 { return -m.Score(fs).LogPosterior[class] }
		for _, fi := range []int{0, 1, 7, 30} {
			f := &fs[fi]
			for c := range 2 {
				const eps = 1e-6
				f.UserWeight[c] += eps
				up := loss()
				f.UserWeight[c] -= 2 * eps
				down := loss()
				f.UserWeight[c] += eps
				grad := (up - down) / (2 * eps)
				if got, want := step[f.Part][c]*f.Count, -0.7*grad; !near(got, want, 1e-6) {
					t.Errorf("class %d, feature %d, weight %d: step·count %v, want %v", class, fi, c, got, want)
				}
			}
		}
	}
	t.Run("nil unless discriminative", func(t *testing.T) {
		r := benchModel(Params{}).Score(fs)
		if s := r.Step(1); s[0] != nil || s[1] != nil {
			t.Errorf("Step = %v, want nils", s)
		}
	})
	t.Run("unknown class", func(t *testing.T) {
		r := m.Score(fs)
		if s := r.Step(2); s[0] != nil {
			t.Errorf("Step(2) = %v, want nils", s)
		}
	})
}

// TestStepLearns trains a mailing list's message that naive Bayes calls
// spam, and checks that the weights alone make it ham within a few
// steps, while a spam sharing its body stays spam.
func TestStepLearns(t *testing.T) {
	const ham, spam = 0, 1
	m := &Model{
		Classes: []string{"ham", "spam"},
		Params:  Params{Alpha: 0.01, Prior: PriorUniform, Normalize: 0.85, Discriminative: true},
		Global:  Totals{Messages: []float64{100, 100}, Tokens: []float64{5000, 5000}},
	}
	body := func() []Feature {
		fs := make([]Feature, 40)
		for i := range fs {
			fs[i] = Feature{Hash: uint64(100 + i), Count: 1, Global: []float64{1, 30}, Part: 1}
		}
		return fs
	}
	listMsg := append([]Feature{{Hash: 1, Count: 1, Global: []float64{20, 0}}, {Hash: 2, Count: 1, Global: []float64{1, 1}}}, body()...)
	spamMsg := append([]Feature{{Hash: 3, Count: 1, Global: []float64{0, 20}}, {Hash: 2, Count: 1, Global: []float64{1, 1}}}, body()...)
	weights := map[uint64][]float64{}
	apply := func(fs []Feature) {
		for i := range fs {
			fs[i].Weight = weights[fs[i].Hash]
		}
	}
	train := func(fs []Feature, class int) {
		apply(fs)
		step := m.Score(fs).Step(class)
		for _, f := range fs {
			w := weights[f.Hash]
			if w == nil {
				w = make([]float64, 2)
				weights[f.Hash] = w
			}
			for c := range w {
				w[c] += step[f.Part][c] * f.Count
			}
		}
	}
	apply(listMsg)
	if odds := m.Score(listMsg).LogOdds("spam"); odds <= 0 {
		t.Fatalf("naive Bayes alone gives the list's message log-odds %v; the test needs it to err", odds)
	}
	for range 10 {
		train(listMsg, ham)
		train(spamMsg, spam)
	}
	apply(listMsg)
	apply(spamMsg)
	if odds := m.Score(listMsg).LogOdds("spam"); odds >= 0 {
		t.Errorf("after training, the list's message has spam log-odds %v, want < 0", odds)
	}
	if odds := m.Score(spamMsg).LogOdds("spam"); odds <= 0 {
		t.Errorf("after training, the spam has log-odds %v, want > 0", odds)
	}
}
