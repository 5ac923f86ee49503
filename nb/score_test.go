package nb

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func near(a, b, tol float64) bool {
	return math.Abs(a-b) <= tol*max(1, math.Abs(a), math.Abs(b))
}

func nearAll(a, b []float64, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !near(a[i], b[i], tol) {
			return false
		}
	}
	return true
}

func TestPriors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		params   Params
		messages []float64
		want     []float64 // P(c)
	}{
		{"ml", Params{Prior: PriorML}, []float64{1, 3}, []float64{1.0 / 4, 3.0 / 4}},
		{"map default a", Params{Prior: PriorMAP}, []float64{1, 3}, []float64{2.0 / 6, 4.0 / 6}},
		{"map a=2", Params{Prior: PriorMAP, PriorAlpha: 2}, []float64{1, 3}, []float64{3.0 / 8, 5.0 / 8}},
		{"uniform", Params{Prior: PriorUniform}, []float64{1, 3}, []float64{0.5, 0.5}},
		{"ml with an empty class is add-one", Params{Prior: PriorML}, []float64{10, 0}, []float64{11.0 / 12, 1.0 / 12}},
		{"ml untrained is uniform", Params{Prior: PriorML}, nil, []float64{0.5, 0.5}},
		{"map untrained is uniform", Params{Prior: PriorMAP}, []float64{0, 0}, []float64{0.5, 0.5}},
		{"ml three classes", Params{}, []float64{1, 2, 5}, []float64{1.0 / 8, 2.0 / 8, 5.0 / 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Model{Classes: []string{"a", "b", "c"}[:len(tc.want)], Params: tc.params, Global: Totals{Messages: tc.messages}}
			r := m.Score(nil)
			for c, want := range tc.want {
				if got := math.Exp(r.LogPrior[c]); !near(got, want, 1e-12) {
					t.Errorf("P(%s) = %v, want %v", m.Classes[c], got, want)
				}
				// With nothing to score, the posterior is the prior.
				if !near(r.Posterior[c], want, 1e-12) {
					t.Errorf("P(%s|x) = %v, want the prior %v", m.Classes[c], r.Posterior[c], want)
				}
			}
		})
	}
}

func TestSmoothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		alpha float64
		want  []float64 // p(money|ham), p(money|spam)
	}{
		{"default is laplace", 0, []float64{2.0 / 9, 6.0 / 14}},
		{"laplace", 1, []float64{2.0 / 9, 6.0 / 14}},
		{"lidstone", 0.5, []float64{1.5 / 6, 5.5 / 11}},
		{"invalid is laplace", -1, []float64{2.0 / 9, 6.0 / 14}},
		{"tiny is clamped", 1e-300, []float64{1.0 / 3, 5.0 / 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := spamExample()
			m.Params.Alpha = tc.alpha
			got := logLikelihood(m, money)
			for c := range got {
				got[c] = math.Exp(got[c])
			}
			if !nearAll(got, tc.want, 1e-8) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDirichletSmoothing(t *testing.T) {
	// In the spam example money occurs 6 times in 11 tokens, so with α = 1
	// the pooled q(money) = (6+1)/(11+6) = 7/17.
	for _, tc := range []struct {
		name string
		mu   float64
		want []float64 // p(money|ham), p(money|spam)
	}{
		{"off is additive", 0, []float64{2.0 / 9, 6.0 / 14}},
		// (1 + 17·7/17)/(3+17) and (5 + 7)/(8+17).
		{"mu 17", 17, []float64{8.0 / 20, 12.0 / 25}},
		// A huge prior mass makes both classes the pooled distribution.
		{"mu huge", 1e9, []float64{7.0 / 17, 7.0 / 17}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := spamExample()
			m.Params.Mu = tc.mu
			got := logLikelihood(m, money)
			for c := range got {
				got[c] = math.Exp(got[c])
			}
			if !nearAll(got, tc.want, 1e-6) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// userExample is the spam example's global model with a user who trained
// 2 ham messages of 10 tokens and 1 spam of 4.
func userExample(lambda, lambdaPrior float64) *Model {
	m := spamExample()
	m.Params.Lambda, m.Params.LambdaPrior = lambda, lambdaPrior
	m.User = &Totals{Messages: []float64{2, 1}, Tokens: []float64{10, 4}}
	return m
}

func TestUserModel(t *testing.T) {
	const lambda, lambdaPrior = 5, 2
	m := userExample(lambda, lambdaPrior)
	pg := [][]float64{ // p_g(w|c) of the global model: ham, spam
		{2.0 / 9, 6.0 / 14}, // money
		{1.0 / 9, 1.0 / 14}, // unseen by the global model
	}
	for _, tc := range []struct {
		name string
		f    Feature
		want []float64
	}{
		{"seen by both", Feature{Global: []float64{1, 5}, User: []float64{1, 2}},
			[]float64{(1 + lambda*pg[0][0]) / (10 + lambda), (2 + lambda*pg[0][1]) / (4 + lambda)}},
		{"unseen by the user", Feature{Global: []float64{1, 5}},
			[]float64{lambda * pg[0][0] / (10 + lambda), lambda * pg[0][1] / (4 + lambda)}},
		{"seen by the user only", Feature{User: []float64{3, 0}},
			[]float64{(3 + lambda*pg[1][0]) / (10 + lambda), lambda * pg[1][1] / (4 + lambda)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := logLikelihood(m, tc.f)
			for c := range got {
				got[c] = math.Exp(got[c])
			}
			if !nearAll(got, tc.want, 1e-12) {
				t.Errorf("p_u(w|c) = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("prior", func(t *testing.T) {
		// P_g = (1/4, 3/4); P_u(c) = (N_u,c + λ'·P_g(c)) / (N_u + λ').
		want := []float64{(2 + lambdaPrior*0.25) / (3 + lambdaPrior), (1 + lambdaPrior*0.75) / (3 + lambdaPrior)}
		r := m.Score(nil)
		got := []float64{math.Exp(r.LogPrior[0]), math.Exp(r.LogPrior[1])}
		if !nearAll(got, want, 1e-12) {
			t.Errorf("P_u(c) = %v, want %v", got, want)
		}
	})
	t.Run("uniform prior", func(t *testing.T) {
		m := userExample(lambda, lambdaPrior)
		m.Params.Prior = PriorUniform
		r := m.Score(nil)
		if got := []float64{math.Exp(r.LogPrior[0]), math.Exp(r.LogPrior[1])}; !nearAll(got, []float64{0.5, 0.5}, 1e-12) {
			t.Errorf("P_u(c) = %v, want uniform", got)
		}
	})
}

func TestUserModelLimits(t *testing.T) {
	global := spamExample().Score(d5())
	// The user's counts would move the scores, if they were used.
	msg := d5()
	msg[0].User = []float64{0, 7}
	msg[1].User = []float64{4, 0}

	for _, tc := range []struct {
		name string
		user *Totals
	}{
		{"nil user is the global model", nil},
		{"user with zero totals is the global model", &Totals{Messages: []float64{0, 0}, Tokens: []float64{0, 0}}},
		{"user with nil totals is the global model", &Totals{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := spamExample()
			m.User = tc.user
			r := m.Score(msg)
			if !slices.Equal(r.LogJoint, global.LogJoint) || !slices.Equal(r.Posterior, global.Posterior) {
				t.Errorf("LogJoint %v, want %v", r.LogJoint, global.LogJoint)
			}
		})
	}
	t.Run("huge lambda tends to the global model", func(t *testing.T) {
		r := userExample(1e9, 1e9).Score(msg)
		if !nearAll(r.LogJoint, global.LogJoint, 1e-6) {
			t.Errorf("LogJoint %v, want about %v", r.LogJoint, global.LogJoint)
		}
	})
	t.Run("tiny lambda tends to the user's estimates", func(t *testing.T) {
		m := userExample(1e-9, 1e-9)
		got := logLikelihood(m, Feature{Global: []float64{1, 5}, User: []float64{4, 2}})
		want := []float64{math.Log(4.0 / 10), math.Log(2.0 / 4)}
		if !nearAll(got, want, 1e-6) {
			t.Errorf("log p_u = %v, want about %v", got, want)
		}
	})
}

func TestNormalize(t *testing.T) {
	plain := spamExample().Score(d5())
	for _, tc := range []struct {
		name string
		beta float64
		div  float64 // what the log-likelihood of 5 tokens is divided by
	}{
		{"off", 0, 1},
		{"average", 1, 5},
		{"square root", 0.5, math.Sqrt(5)},
		{"beyond 1 is 1", 3, 5},
		{"NaN is off", math.NaN(), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := spamExample()
			m.Params.Normalize = tc.beta
			r := m.Score(d5())
			for c := range r.LogJoint {
				want := plain.LogPrior[c] + (plain.LogJoint[c]-plain.LogPrior[c])/tc.div
				if !near(r.LogJoint[c], want, 1e-12) {
					t.Errorf("LogJoint[%d] = %v, want %v", c, r.LogJoint[c], want)
				}
			}
			if r.Tokens != 5 || r.Used != 3 {
				t.Errorf("Tokens %v, Used %d, want 5, 3", r.Tokens, r.Used)
			}
		})
	}
}

func TestParts(t *testing.T) {
	// d5 is "money money money work lunch": money (count 3) is put in
	// part 0, work and lunch in part 1.
	split := func() []Feature {
		fs := d5()
		for i := range fs {
			if fs[i].Name != "money" {
				fs[i].Part = 1
			}
		}
		return fs
	}
	plain := spamExample()
	plain.Params.Normalize = 1
	for _, tc := range []struct {
		name string
		beta float64
		fs   func() []Feature
		// want returns LogJoint[c] from the per-part log-likelihoods
		// of class c.
		want func(money, rest float64) float64
	}{
		{"one part", 1, d5, func(m, r float64) float64 { return (m + r) / 5 }},
		{"two parts, average token", 1, split, func(m, r float64) float64 { return m/3 + r/2 }},
		{"two parts, square root", 0.5, split, func(m, r float64) float64 { return m/math.Sqrt(3) + r/math.Sqrt(2) }},
		{"two parts, no normalization", 0, split, func(m, r float64) float64 { return m + r }},
		{"part beyond 1 is 1", 1, func() []Feature {
			fs := split()
			for i := range fs {
				fs[i].Part *= 7
			}
			return fs
		}, func(m, r float64) float64 { return m/3 + r/2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := spamExample()
			m.Params.Normalize = tc.beta
			r := m.Score(tc.fs())
			ex := m.Explain(tc.fs(), 0)
			for c := range r.LogJoint {
				// Per-part log-likelihoods from single-feature scores
				// without normalization.
				var money, rest float64
				for _, f := range d5() {
					m0 := spamExample()
					one := m0.Score([]Feature{f})
					ll := one.LogJoint[c] - one.LogPrior[c]
					if f.Name == "money" {
						money += ll
					} else {
						rest += ll
					}
				}
				want := r.LogPrior[c] + tc.want(money, rest)
				if !near(r.LogJoint[c], want, 1e-12) {
					t.Errorf("LogJoint[%d] = %v, want %v", c, r.LogJoint[c], want)
				}
			}
			// Explain's weights still add up to the log-odds.
			for i := range r.Classes {
				sum := r.LogPrior[i] - r.LogPrior[ex.Rival[i]]
				for _, w := range ex.Toward[i] {
					sum += w.Weight
				}
				j := ex.Rival[i]
				for _, w := range ex.Toward[j] {
					sum -= w.Weight
				}
				if !near(sum, r.LogOdds(r.Classes[i]), 1e-12) {
					t.Errorf("weights toward %s add to %v, log-odds %v", r.Classes[i], sum, r.LogOdds(r.Classes[i]))
				}
			}
			if r.Tokens != 5 || r.Used != 3 {
				t.Errorf("Tokens %v, Used %d, want 5, 3", r.Tokens, r.Used)
			}
		})
	}
}

func TestTopN(t *testing.T) {
	// Spreads: money |log(6/14) − log(2/9)| ≈ 0.66, work and lunch
	// |log(1/14) − log(2/9)| ≈ 1.14; work wins the tie by its lower Hash.
	lp := func(f Feature) []float64 { return logLikelihood(spamExample(), f) }
	for _, tc := range []struct {
		name   string
		topN   int
		used   int
		tokens float64
		terms  [][]float64 // log p(w|c) of the features scored, per occurrence
		counts []float64
	}{
		{"all", 0, 3, 5, [][]float64{lp(money), lp(work), lp(lunch)}, []float64{3, 1, 1}},
		{"top 1", 1, 1, 1, [][]float64{lp(work)}, []float64{1}},
		{"top 2", 2, 2, 2, [][]float64{lp(work), lp(lunch)}, []float64{1, 1}},
		{"top 3", 3, 3, 5, [][]float64{lp(money), lp(work), lp(lunch)}, []float64{3, 1, 1}},
		{"top 9", 9, 3, 5, [][]float64{lp(money), lp(work), lp(lunch)}, []float64{3, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := spamExample()
			m.Params.TopN = tc.topN
			msg := d5()
			// Features of a message come in any order; the result must not
			// depend on it, nor be thrown off by unseen features.
			msg = append(msg, Feature{Hash: 0, Count: 4}, Feature{Hash: 9, Count: 1, Global: []float64{0, 0}})
			rng := rand.New(rand.NewPCG(1, 2))
			for range 5 {
				rng.Shuffle(len(msg), func(i, j int) { msg[i], msg[j] = msg[j], msg[i] })
				r := m.Score(msg)
				if r.Used != tc.used || r.Tokens != tc.tokens {
					t.Fatalf("Used %d, Tokens %v, want %d, %v", r.Used, r.Tokens, tc.used, tc.tokens)
				}
				for c := range r.LogJoint {
					want := r.LogPrior[c]
					for i, f := range tc.terms {
						want += tc.counts[i] * f[c]
					}
					if !near(r.LogJoint[c], want, 1e-12) {
						t.Errorf("LogJoint[%d] = %v, want %v", c, r.LogJoint[c], want)
					}
				}
			}
		})
	}
}

func TestMinCount(t *testing.T) {
	for _, tc := range []struct {
		name     string
		minCount float64
		user     bool
		used     int
	}{
		{"off", 0, false, 3},
		{"1 changes nothing", 1, false, 3},
		{"2 drops work and lunch", 2, false, 1},
		{"6 keeps money", 6, false, 1},
		{"7 drops everything", 7, false, 0},
		{"user counts add up", 2, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := spamExample()
			m.Params.MinCount = tc.minCount
			msg := d5()
			if tc.user {
				m.User = &Totals{Messages: []float64{1, 0}, Tokens: []float64{5, 0}}
				msg[1].User = []float64{1, 0} // work: 1 global + 1 user
			}
			if r := m.Score(msg); r.Used != tc.used {
				t.Errorf("Used %d, want %d", r.Used, tc.used)
			}
		})
	}
}

func TestMinSpread(t *testing.T) {
	// In the spam example (α = 1, V = 6), money's log p(w|c) spreads
	// log((6/14)/(2/9)) = 0.657 nats between the classes, work's and
	// lunch's log((2/9)/(1/14)) = 1.135.
	for _, tc := range []struct {
		name   string
		spread float64
		keep   []Feature // the message it must score like, without the setting
	}{
		{"off", 0, d5()},
		{"0.5 keeps all", 0.5, d5()},
		{"1 drops money", 1, []Feature{times(work, 1), times(lunch, 1)}},
		{"1.2 drops all", 1.2, nil},
	} {
		for _, beta := range []float64{0, 0.85} {
			t.Run(fmt.Sprintf("%s/β=%v", tc.name, beta), func(t *testing.T) {
				m := spamExample()
				m.Params.Normalize = beta
				want := m.Score(tc.keep)
				m.Params.MinSpread = tc.spread
				got := m.Score(d5())
				if got.Used != len(tc.keep) || got.Tokens != want.Tokens {
					t.Errorf("Used %d, Tokens %v; want %d, %v", got.Used, got.Tokens, len(tc.keep), want.Tokens)
				}
				if !nearAll(got.LogJoint, want.LogJoint, 1e-12) {
					t.Errorf("LogJoint %v, want %v", got.LogJoint, want.LogJoint)
				}
				e := m.Explain(d5(), 0)
				if !near(e.Result.LogOdds("spam"), got.LogOdds("spam"), 1e-12) {
					t.Errorf("Explain log-odds %v, Score %v", e.Result.LogOdds("spam"), got.LogOdds("spam"))
				}
				if n := len(e.Toward[0]) + len(e.Toward[1]); n != len(tc.keep) {
					t.Errorf("Explain lists %d features, want %d", n, len(tc.keep))
				}
			})
		}
	}
}

func TestComplement(t *testing.T) {
	t.Run("two classes are the plain model", func(t *testing.T) {
		for _, user := range []bool{false, true} {
			var plain, comp *Model
			if user {
				plain, comp = userExample(5, 2), userExample(5, 2)
			} else {
				plain, comp = spamExample(), spamExample()
			}
			comp.Params.Complement = true
			msg := d5()
			msg[0].User = []float64{1, 2}
			p, c := plain.Score(msg), comp.Score(msg)
			if !nearAll(p.Posterior, c.Posterior, 1e-12) || !near(p.LogOdds("spam"), c.LogOdds("spam"), 1e-12) {
				t.Errorf("user %v: complement posterior %v, plain %v", user, c.Posterior, p.Posterior)
			}
		}
	})
	t.Run("three classes", func(t *testing.T) {
		m := &Model{
			Classes:    []string{"a", "b", "c"},
			Params:     Params{Complement: true, Prior: PriorUniform},
			Global:     Totals{Messages: []float64{2, 3, 4}, Tokens: []float64{10, 20, 30}},
			Vocabulary: 7,
		}
		f := Feature{Count: 2, Global: []float64{1, 4, 0}}
		// w_c = −log p̃(w|¬c) = −log((Σ_{k≠c} n_kw + 1) / (Σ_{k≠c} n_k + 7)).
		want := []float64{
			-math.Log((4.0 + 0 + 1) / (20 + 30 + 7)),
			-math.Log((1.0 + 0 + 1) / (10 + 30 + 7)),
			-math.Log((1.0 + 4 + 1) / (10 + 20 + 7)),
		}
		r := m.Score([]Feature{f})
		for c := range want {
			if got := r.LogJoint[c] - r.LogPrior[c]; !near(got, 2*want[c], 1e-12) {
				t.Errorf("score[%s] − prior = %v, want %v", m.Classes[c], got, 2*want[c])
			}
		}
		if r.Index("b") != slices.Index(r.LogJoint, slices.Max(r.LogJoint)) {
			t.Errorf("b, where the token is most common, is not the best class: %v", r.LogJoint)
		}
	})
}

func TestLogOdds(t *testing.T) {
	r := spamExample().Score(d5())
	want := math.Log(0.75*math.Pow(6.0/14, 3)*math.Pow(1.0/14, 2)) - math.Log(0.25*math.Pow(2.0/9, 5))
	for _, tc := range []struct {
		class string
		want  float64
	}{
		{"spam", want},
		{"ham", -want},
		{"eggs", 0},
	} {
		t.Run(tc.class, func(t *testing.T) {
			if got := r.LogOdds(tc.class); !near(got, tc.want, 1e-12) {
				t.Errorf("LogOdds = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("three classes", func(t *testing.T) {
		var r Result
		r.reset([]string{"a", "b", "c"})
		copy(r.LogJoint, []float64{-1, -3, -2})
		r.normalize()
		for class, want := range map[string]float64{"a": 1, "b": -2, "c": -1} {
			if got := r.LogOdds(class); !near(got, want, 1e-12) {
				t.Errorf("LogOdds(%s) = %v, want %v", class, got, want)
			}
		}
	})
}

// finite reports whether every number r holds is finite and the posterior a
// distribution.
func finite(r Result) bool {
	var sum float64
	for _, s := range [][]float64{r.LogPrior, r.LogJoint, r.LogPosterior, r.Posterior} {
		for _, v := range s {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return false
			}
		}
	}
	for _, p := range r.Posterior {
		if p < 0 || p > 1 {
			return false
		}
		sum += p
	}
	return !math.IsNaN(r.Tokens) && !math.IsInf(r.Tokens, 0) && (len(r.Posterior) == 0 || math.Abs(sum-1) < 1e-9)
}

func TestEdgeCases(t *testing.T) {
	nan, inf, ninf := math.NaN(), math.Inf(1), math.Inf(-1)
	two := []string{"ham", "spam"}
	for _, tc := range []struct {
		name  string
		m     Model
		msg   []Feature
		used  int
		prior bool // whether the posterior must be the prior
	}{
		{"untrained", Model{Classes: two}, d5(), 3, false},
		{"untrained unseen tokens", Model{Classes: two}, []Feature{{Count: 3}, {Count: 1, Global: []float64{}}}, 0, true},
		{"empty message", *spamExample(), nil, 0, true},
		{"unseen tokens only", *spamExample(), []Feature{{Count: 3}, {Count: 2, Global: []float64{0, 0}}}, 0, true},
		{"zero counts in message", *spamExample(), []Feature{times(money, 0), times(work, -1), times(lunch, nan)}, 0, true},
		{"zero totals", Model{Classes: two, Global: Totals{Messages: []float64{0, 0}, Tokens: []float64{0, 0}}}, d5(), 3, false},
		{"vocabulary 0", Model{Classes: two, Global: spamExample().Global}, d5(), 3, false},
		{"one class without data", Model{Classes: two, Global: Totals{Messages: []float64{10, 0}, Tokens: []float64{300, 0}}, Vocabulary: 100}, d5(), 3, false},
		{"huge counts", Model{Classes: two, Global: Totals{Messages: []float64{1e300, math.MaxFloat64}, Tokens: []float64{inf, 1e308}}, Vocabulary: inf},
			[]Feature{{Count: math.MaxFloat64, Global: []float64{inf, 1}}, {Count: 1e300, Global: []float64{1e300, math.MaxFloat64}}}, 2, false},
		{"huge message", *spamExample(), []Feature{times(money, inf), times(work, 1e300), times(lunch, math.MaxFloat64)}, 3, false},
		{"tiny counts", Model{Classes: two, Params: Params{Normalize: 1}, Global: Totals{Messages: []float64{5e-324, 1}, Tokens: []float64{5e-324, 5e-324}}, Vocabulary: 5e-324},
			[]Feature{{Count: 5e-324, Global: []float64{5e-324, 0}}}, 1, false},
		{"NaN and negative counts", Model{Classes: two, Global: Totals{Messages: []float64{nan, -1}, Tokens: []float64{ninf, nan}}, Vocabulary: nan},
			[]Feature{{Count: 2, Global: []float64{nan, 1}}, {Count: 1, Global: []float64{-5, 0}}}, 1, false},
		{"invalid params", Model{Classes: two, Params: Params{Alpha: nan, Prior: 42, PriorAlpha: -1, Lambda: inf, LambdaPrior: nan, Normalize: ninf, TopN: -3, MinCount: nan}, Global: spamExample().Global, Vocabulary: 6}, d5(), 3, false},
		{"extreme params", Model{Classes: two, Params: Params{Alpha: 1e300, Prior: PriorMAP, PriorAlpha: 1e-300, Normalize: 1, TopN: 1 << 40}, Global: spamExample().Global, Vocabulary: 6}, d5(), 3, false},
		{"totals longer than classes", Model{Classes: two, Global: Totals{Messages: []float64{1, 3, 5}, Tokens: []float64{3, 8, 1}}, Vocabulary: 6}, []Feature{{Count: 1, Global: []float64{1, 2, 3, 4}}}, 1, false},
		{"user with huge counts", Model{Classes: two, Global: spamExample().Global, Vocabulary: 6, User: &Totals{Messages: []float64{inf, 0}, Tokens: []float64{1e300, nan}}},
			[]Feature{{Count: 1, Global: []float64{1, 5}, User: []float64{inf, 1e300}}, {Count: 7, User: []float64{0, 1e-300}}}, 2, false},
		{"user only", Model{Classes: two, User: &Totals{Messages: []float64{1, 1}, Tokens: []float64{3, 3}}}, []Feature{{Count: 1, User: []float64{1, 0}}}, 1, false},
		{"one class", Model{Classes: []string{"ham"}, Global: Totals{Messages: []float64{3}, Tokens: []float64{10}}}, []Feature{{Count: 1, Global: []float64{2}}}, 1, true},
		{"no classes", Model{}, d5(), 0, true},
	} {
		for _, topN := range []int{0, 1} {
			for _, complement := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/top %d complement %v", tc.name, topN, complement), func(t *testing.T) {
					m := tc.m
					if m.Params.TopN == 0 {
						m.Params.TopN = topN
					}
					m.Params.Complement = complement
					r := m.Score(tc.msg)
					ex := m.Explain(tc.msg, 0)
					if !finite(r) || !finite(ex.Result) {
						t.Errorf("not finite: %+v", r)
					}
					for _, list := range ex.Toward {
						for _, c := range list {
							if math.IsNaN(c.Weight) || math.IsInf(c.Weight, 0) || math.IsNaN(c.LogRatio) || math.IsInf(c.LogRatio, 0) {
								t.Errorf("contribution %+v", c)
							}
						}
					}
					want := tc.used
					if n := max(m.Params.TopN, 0); n > 0 {
						want = min(want, n)
					}
					if r.Used != want {
						t.Errorf("Used %d, want %d", r.Used, want)
					}
					if tc.prior {
						for c := range r.Posterior {
							if !near(r.Posterior[c], math.Exp(r.LogPrior[c]), 1e-12) {
								t.Errorf("posterior %v, want the prior %v", r.Posterior, r.LogPrior)
							}
						}
					}
					if d := (Decider{}).Decide(r); math.IsNaN(d.Risk) || len(r.Classes) > 0 && d.Index < 0 {
						t.Errorf("decision %+v", d)
					}
				})
			}
		}
	}
	t.Run("untrained is uniform", func(t *testing.T) {
		r := (&Model{Classes: []string{"a", "b", "c"}}).Score([]Feature{{Count: 1}})
		for _, p := range r.Posterior {
			if !near(p, 1.0/3, 1e-12) {
				t.Errorf("posterior %v, want uniform", r.Posterior)
			}
		}
	})
}

// TestLogCount checks the table of log(k+α) against math.Log, to the bit,
// inside the table and past it, for whole and fractional counts, and that
// a new α makes a new table.
func TestLogCount(t *testing.T) {
	for _, alpha := range []float64{0.01, 1, 0.5, 0.01, 0} {
		e := estimator{alpha: alpha, logs: logTableFor(alpha)}
		for _, n := range []float64{0, 1, 2, 3, 1000, logTableSize - 1, logTableSize, logTableSize + 1, 1 << 40, 0.5, 2.25, 1023.5} {
			want := math.Log(n + alpha)
			if got := e.logCount(n); math.Float64bits(got) != math.Float64bits(want) {
				t.Errorf("α %v: logCount(%v) = %v, want %v", alpha, n, got, want)
			}
		}
	}
}
