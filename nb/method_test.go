package nb

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// The worked examples of docs/method.md, reproduced to the digits printed
// there and, where it prints fewer, to three significant digits computed
// from the exact fractions.

// roundsTo reports whether got, rounded to as many significant digits as
// want is written with, equals want.
func roundsTo(got float64, want string) bool {
	mantissa, _, _ := strings.Cut(strings.ToLower(want), "e")
	digits := len(strings.TrimLeft(strings.NewReplacer("-", "", "+", "", ".", "").Replace(mantissa), "0"))
	g, err := strconv.ParseFloat(strconv.FormatFloat(got, 'g', digits, 64), 64)
	if err != nil {
		return false
	}
	w, err := strconv.ParseFloat(want, 64)
	return err == nil && g == w
}

func TestRoundsTo(t *testing.T) {
	for _, tc := range []struct {
		got  float64
		want string
		ok   bool
	}{
		{0.68968, "0.690", true},
		{0.68968, "0.69", true},
		{0.68968, "0.689", false},
		{3.0121e-4, "3.012e-4", true},
		{0.005291, "0.0053", true},
		{0.005291, "0.00529", true},
		{0.005291, "0.00530", false},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := roundsTo(tc.got, tc.want); got != tc.ok {
				t.Errorf("roundsTo(%v, %q) = %v", tc.got, tc.want, got)
			}
		})
	}
}

// spamExample is method.md's multinomial example: d1 "money click money",
// d2 "money money discount", d3 "money link" spam, d4 "work lunch money"
// ham, V = 6, α = 1.
func spamExample() *Model {
	return &Model{
		Classes:    []string{"ham", "spam"},
		Params:     Params{Alpha: 1, Prior: PriorML},
		Global:     Totals{Messages: []float64{1, 3}, Tokens: []float64{3, 8}},
		Vocabulary: 6,
	}
}

// Training counts of method.md's spam example, ham then spam.
var (
	money = Feature{Hash: 1, Name: "money", Global: []float64{1, 5}}
	work  = Feature{Hash: 2, Name: "work", Global: []float64{1, 0}}
	lunch = Feature{Hash: 3, Name: "lunch", Global: []float64{1, 0}}
)

// times returns f occurring n times in a message.
func times(f Feature, n float64) Feature {
	f.Count = n
	return f
}

// d5 is "money money money work lunch".
func d5() []Feature {
	return []Feature{times(money, 3), times(work, 1), times(lunch, 1)}
}

// logLikelihood returns log p(w|c) for each class, read off the score of a
// one-token message.
func logLikelihood(m *Model, f Feature) []float64 {
	r := m.Score([]Feature{times(f, 1)})
	out := make([]float64, len(r.Classes))
	for c := range out {
		out[c] = r.LogJoint[c] - r.LogPrior[c]
	}
	return out
}

func TestMultinomialSpamExample(t *testing.T) {
	m := spamExample()
	const ham, spam = 0, 1

	for _, tc := range []struct {
		name  string
		f     Feature
		class int
		want  float64
	}{
		{"p(money|spam)", money, spam, 6.0 / 14},
		{"p(work|spam)", work, spam, 1.0 / 14},
		{"p(lunch|spam)", lunch, spam, 1.0 / 14},
		{"p(money|ham)", money, ham, 2.0 / 9},
		{"p(work|ham)", work, ham, 2.0 / 9},
		{"p(lunch|ham)", lunch, ham, 2.0 / 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := math.Exp(logLikelihood(m, tc.f)[tc.class]); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}

	r := m.Score(d5())
	for _, tc := range []struct {
		name string
		got  float64
		want string
	}{
		{"P(spam)", math.Exp(r.LogPrior[spam]), "0.75"},
		{"score(spam)", math.Exp(r.LogJoint[spam]), "3.012e-4"},
		{"score(ham)", math.Exp(r.LogJoint[ham]), "1.355e-4"},
		{"P(spam|d5)", r.Posterior[spam], "0.690"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !roundsTo(tc.got, tc.want) {
				t.Errorf("got %v, want %s", tc.got, tc.want)
			}
		})
	}
	t.Run("decision", func(t *testing.T) {
		if got := (Decider{}).Decide(r); got.Class != "spam" || got.Unsure {
			t.Errorf("got %+v, want spam", got)
		}
	})
}

// TestPlayTennis reproduces method.md's categorical example with the
// multinomial arithmetic. Each day is a message holding one token per
// attribute (outlook=sunny, ...), so a class of N_c days holds n_c = 4·N_c
// tokens and, unsmoothed, p(v|c) = count/(4·N_c): the categorical estimate
// divided by 4. That factor is the same for every class, so the posterior
// is the categorical one and the joint is off by 4^4.
func TestPlayTennis(t *testing.T) {
	m := &Model{
		Classes:    []string{"yes", "no"},
		Params:     Params{Alpha: minSmooth},
		Global:     Totals{Messages: []float64{9, 5}, Tokens: []float64{36, 20}},
		Vocabulary: 10,
	}
	x := []Feature{
		{Name: "outlook=sunny", Count: 1, Global: []float64{2, 3}},
		{Name: "temperature=cool", Count: 1, Global: []float64{3, 1}},
		{Name: "humidity=high", Count: 1, Global: []float64{3, 4}},
		{Name: "wind=strong", Count: 1, Global: []float64{3, 3}},
	}
	r := m.Score(x)
	const yes, no = 0, 1
	joint := func(c int) float64 { return math.Exp(r.LogJoint[c] + 4*math.Log(4)) }
	for _, tc := range []struct {
		name string
		got  float64
		want string
	}{
		{"P(yes)", math.Exp(r.LogPrior[yes]), strconv.FormatFloat(9.0/14, 'g', 3, 64)},
		{"P(no)", math.Exp(r.LogPrior[no]), strconv.FormatFloat(5.0/14, 'g', 3, 64)},
		{"g_yes", joint(yes), "0.0053"},
		{"g_yes 3 digits", joint(yes), "0.00529"},
		{"g_no", joint(no), "0.0206"},
		{"P(no|x)", r.Posterior[no], "0.795"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !roundsTo(tc.got, tc.want) {
				t.Errorf("got %v, want %s", tc.got, tc.want)
			}
		})
	}

	// Laplace smoothing of Outlook alone: one token per day, three values.
	outlook := &Model{
		Classes:    []string{"yes", "no"},
		Params:     Params{Alpha: 1},
		Global:     Totals{Messages: []float64{9, 5}, Tokens: []float64{9, 5}},
		Vocabulary: 3,
	}
	for _, tc := range []struct {
		name string
		f    Feature
		want float64
	}{
		{"sunny", Feature{Global: []float64{2, 3}}, 4.0 / 8},
		{"overcast", Feature{Global: []float64{4, 0}}, 1.0 / 8},
		{"rain", Feature{Global: []float64{3, 2}}, 3.0 / 8},
	} {
		t.Run("laplace "+tc.name, func(t *testing.T) {
			if got := math.Exp(logLikelihood(outlook, tc.f)[no]); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("p(%s|no) = %v, want %v", tc.name, got, tc.want)
			}
		})
	}
}

// bernoulli returns p(x|c) under the Bernoulli model with unsmoothed
// maximum-likelihood estimates from docs: the product over the vocabulary
// of p(w|c) for the words of x and 1 − p(w|c) for the others. Words of x
// outside the vocabulary are left out.
func bernoulli(vocabulary []string, docs [][]string, x []string) float64 {
	has := func(doc []string, w string) bool {
		for _, v := range doc {
			if v == w {
				return true
			}
		}
		return false
	}
	p := 1.0
	for _, w := range vocabulary {
		var n float64
		for _, d := range docs {
			if has(d, w) {
				n++
			}
		}
		pw := n / float64(len(docs))
		if has(x, w) {
			p *= pw
		} else {
			p *= 1 - pw
		}
	}
	return p
}

// TestBernoulliExample reproduces method.md's Bernoulli example; the
// likelihoods come from the helper above, the posterior and decision from
// the package.
func TestBernoulliExample(t *testing.T) {
	vocabulary := strings.Fields("password review send us your account")
	spam := [][]string{
		strings.Fields("send us your password"),
		strings.Fields("review us"),
		strings.Fields("send your password"),
		strings.Fields("send us your account"),
	}
	valid := [][]string{
		strings.Fields("send us review"),
		strings.Fields("review your password"),
	}
	x := strings.Fields("review us now")
	pSpam, pValid := bernoulli(vocabulary, spam, x), bernoulli(vocabulary, valid, x)
	prior := 4.0 / 6

	var r Result
	r.reset([]string{"valid", "spam"})
	r.LogJoint[0] = math.Log(pValid * (1 - prior))
	r.LogJoint[1] = math.Log(pSpam * prior)
	r.normalize()

	for _, tc := range []struct {
		name string
		got  float64
		want string
	}{
		{"p(x|spam)", pSpam, "0.0044"},
		{"p(x|spam) 3 digits", pSpam, "0.00439"},
		{"p(x|valid)", pValid, "0.0625"},
		{"p(x|spam)P(spam)", pSpam * prior, "0.0029"},
		{"p(x|spam)P(spam) 3 digits", pSpam * prior, "0.00293"},
		{"p(x|valid)P(valid)", pValid * (1 - prior), "0.0208"},
		// Not printed in method.md: (1/48) / (1/48 + 0.00439453125·2/3).
		{"P(valid|x)", r.Posterior[0], "0.877"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !roundsTo(tc.got, tc.want) {
				t.Errorf("got %v, want %s", tc.got, tc.want)
			}
		})
	}
	t.Run("decision", func(t *testing.T) {
		if got := (Decider{}).Decide(r); got.Class != "valid" {
			t.Errorf("got %+v, want valid", got)
		}
	})
}
