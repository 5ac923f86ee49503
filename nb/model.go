package nb

import (
	"errors"
	"fmt"
	"math"
)

// ErrInvalid is wrapped by the errors the Validate methods return.
var ErrInvalid = errors.New("invalid naive Bayes setting")

// Ranges that keep every sum Score computes finite; see the package
// comment.
const (
	maxCount  = 1e100
	minSmooth = 1e-9
	maxSmooth = 1e9
	// maxSpread exceeds any difference of two log-probabilities Score
	// computes within the ranges above (about 300 nats).
	maxSpread = 1e3
)

// Defaults of the Params fields whose zero value would be meaningless.
const (
	defaultAlpha       = 1
	defaultPriorAlpha  = 1
	defaultLambda      = 1000
	defaultLambdaPrior = 10
	defaultMix         = 0.3
	defaultRate        = 1
	// maxRate bounds Mix and Rate: beyond it one message's step or the
	// generative part would swamp everything else.
	maxRate = 1e3
)

// PriorKind selects how the class priors P(c) are estimated.
type PriorKind int

const (
	// PriorML is the maximum-likelihood prior N_c/N. While some class has
	// no messages it is replaced by add-one (PriorMAP with a = 1), since a
	// zero prior would rule that class out whatever a message says.
	PriorML PriorKind = iota
	// PriorMAP is (N_c+a)/(N+K·a), the MAP estimate under a symmetric
	// Dirichlet prior with a = Params.PriorAlpha.
	PriorMAP
	// PriorUniform is 1/K, for users too: decisions rest on the message
	// alone, whatever the mix of classes the models were trained with.
	PriorUniform
)

var priorNames = [...]string{PriorML: "ml", PriorMAP: "map", PriorUniform: "uniform"}

// String returns "ml", "map" or "uniform".
func (k PriorKind) String() string {
	if k >= 0 && int(k) < len(priorNames) {
		return priorNames[k]
	}
	return fmt.Sprintf("PriorKind(%d)", int(k))
}

// MarshalText encodes k as its String.
func (k PriorKind) MarshalText() ([]byte, error) {
	if k < 0 || int(k) >= len(priorNames) {
		return nil, fmt.Errorf("%w: prior %d", ErrInvalid, int(k))
	}
	return []byte(priorNames[k]), nil
}

// UnmarshalText decodes "ml", "map" or "uniform", so that a configuration
// file can name the prior.
func (k *PriorKind) UnmarshalText(text []byte) error {
	for i, name := range priorNames {
		if string(text) == name {
			*k = PriorKind(i)
			return nil
		}
	}
	return fmt.Errorf("%w: prior %q is not one of ml, map, uniform", ErrInvalid, text)
}

// Params are the settings of a model. The zero value is plain multinomial
// naive Bayes with Laplace smoothing and maximum-likelihood priors.
//
// Score does not fail on invalid Params: a zero, negative or NaN value
// stands for the field's default, a value beyond the range Validate
// accepts is clamped into it, and an unknown Prior acts as PriorML.
type Params struct {
	// Alpha is α in p(w|c) = (n_cw+α)/(n_c+α·V): 1 is Laplace smoothing,
	// other values Lidstone. Zero means 1; valid values lie in [1e-9, 1e9].
	Alpha float64
	// Prior selects the estimate of the class priors.
	Prior PriorKind
	// PriorAlpha is a, the pseudo-count per class of PriorMAP. Zero means
	// 1; valid values lie in [1e-9, 1e9].
	PriorAlpha float64
	// Lambda is λ, how many tokens the global model's p(w|c) is worth in a
	// user's estimate. Zero means 1000, a few messages' worth, so that a
	// user's own counts take over once the user has trained some dozens of
	// messages; valid values lie in [1e-9, 1e9].
	Lambda float64
	// LambdaPrior is λ', how many messages the global model's P(c) is
	// worth in a user's class priors. Zero means 10; valid values lie in
	// [1e-9, 1e9].
	LambdaPrior float64
	// Normalize is β of length normalization: when positive, the summed
	// log-likelihood (not the prior) is divided by n^β, n being the number
	// of token occurrences scored. Naive Bayes counts correlated tokens as
	// independent evidence, so its log-odds grow with message length; with
	// normalization a long message weighs like n^(1−β) tokens, and β = 1
	// scores the average token, against which the prior weighs as much as
	// one token. Posteriors become less extreme but are no longer the
	// model's probabilities, nor calibrated ones: thresholds must be chosen
	// again for each β. Zero turns it off; valid values lie in [0, 1].
	Normalize float64
	// TopN, when positive, scores a message by the TopN features that tell
	// classes apart best: those whose log p(w|c) spread most between
	// classes (max − min over c; |log p(w|spam) − log p(w|ham)| for two
	// classes). Ties are broken by Hash, so that the selection does not
	// depend on the order of the features. Zero scores all features.
	TopN int
	// Complement estimates each class's parameters from the counts of all
	// other classes, p̃(w|¬c), and scores c by
	// log P(c) − Σ_w count_w · log p̃(w|¬c) (Rennie et al., 2003). It
	// helps when some classes have much less training than others, since
	// each complement pools several classes. For two classes the log-odds
	// are exactly those of the plain model. The softmax of complement
	// scores is not a probability.
	Complement bool
	// MinCount leaves out features whose training count, summed over all
	// classes (and over the user and global models), is below it: the
	// estimates of a token seen once or twice are mostly noise. Zero leaves
	// out only tokens never seen.
	MinCount float64
	// MinSpread leaves out features whose log p(w|c) spread less than it
	// between classes (in nats, max − min over c; with Complement, the
	// spread of the complement weights that replace them): tokens about as
	// likely in every class, such as common words. They carry almost no evidence,
	// yet under Normalize each one still counts in n and so dilutes the
	// telling ones; a long spam written in plain prose then scores like
	// ham. Dropping them is SpamBayes's minimum probability strength in
	// log-likelihood terms. Zero scores every feature.
	MinSpread float64
	// Mu, when positive, smooths each class's estimate toward the
	// distribution of tokens pooled over all classes instead of toward the
	// uniform one: p(w|c) = (n_cw + μ·q(w))/(n_c + μ), with the pooled
	// q(w) = (n_w + α)/(n + α·V) itself additively smoothed. This is MAP
	// estimation with a Dirichlet prior centred on q (Dirichlet-prior
	// smoothing): a token seen a few times in one class only is pulled
	// toward "as common in every class" in proportion to how little it was
	// seen, so rare tokens no longer swing a verdict. μ is the prior's
	// weight in tokens. Zero uses plain additive smoothing.
	Mu float64
	// Discriminative adds learned weights to the score. Each class's
	// score becomes
	//
	//	log P(c) + Mix · Σ_parts (log-likelihood of the part) + Σ_parts s_p · Σ_{w∈p} count_w · θ_wc
	//
	// where θ_wc is the feature's weight for class c (Feature.Weight, plus
	// Feature.UserWeight for a user) and s_p = 1/‖x_p‖ scales each part of
	// the message to unit length, so that a long body and a short header
	// weigh alike. The weights are those of a logistic regression on the
	// same features whose offset is naive Bayes's score: trained online by
	// Step, they learn what the counts get wrong, such as a mailing list's
	// route that marks all its mail as wanted, or the one address a
	// newsletter is wanted at, which naive Bayes, adding hundreds of
	// correlated tokens as independent evidence, cannot weigh enough.
	// Trained with the log-loss, the posterior becomes a calibrated
	// probability, not naive Bayes's overconfident one.
	Discriminative bool
	// Mix is how much naive Bayes's log-likelihood weighs in a
	// discriminative score: it scales length-normalized log-likelihoods
	// to the log-odds the weights are trained in. Zero means 0.3; valid
	// values lie in [0, 1000].
	Mix float64
	// Rate is the learning rate of Step: the change of the log-odds of a
	// message's true class, in nats per unit of error, that training it
	// makes, spread over its parts. Zero means 1; valid values lie in
	// [0, 1000].
	Rate float64
	// Density selects the class-conditional densities of measures, the
	// continuous features of a message (see Density). Score adds each
	// Value it is given whatever Density says; it is for the caller
	// building the Values with NewDensity.
	Density DensityKind
	// MeasureAlpha is how many values, spread evenly over a measure's
	// grid, smooth each class's density (see Density). Zero means 1;
	// valid values lie in [1e-9, 1e9].
	MeasureAlpha float64
	// MeasureLambda is how many values the global model's density is
	// worth in a user's. Zero means 10; valid values lie in [1e-9, 1e9].
	MeasureLambda float64
	// MeasureClip, when positive, bounds what one measure may say: each
	// class's log density is raised to at least the largest one's less
	// MeasureClip, so that no log ratio between two classes exceeds it.
	// A density's tails are where a sample says least, yet where one
	// value far from a class's makes its ratio largest. Zero clips
	// nothing; valid values lie in [0, 1000].
	MeasureClip float64
}

// Validate reports the first field of p that is out of range, wrapping
// ErrInvalid.
func (p Params) Validate() error {
	smooth := []struct {
		name   string
		v, def float64
	}{
		{"Alpha", p.Alpha, defaultAlpha},
		{"PriorAlpha", p.PriorAlpha, defaultPriorAlpha},
		{"Lambda", p.Lambda, defaultLambda},
		{"LambdaPrior", p.LambdaPrior, defaultLambdaPrior},
		{"MeasureAlpha", p.MeasureAlpha, defaultMeasureAlpha},
		{"MeasureLambda", p.MeasureLambda, defaultMeasureLambda},
	}
	for _, f := range smooth {
		if f.v != 0 && !(f.v >= minSmooth && f.v <= maxSmooth) {
			// Zero is no one's default but this package's: say what it
			// stands for here, not what a caller's default may be.
			return fmt.Errorf("%w: %s %v is not in [%g, %g] (0 means %g)", ErrInvalid, f.name, f.v, minSmooth, maxSmooth, f.def)
		}
	}
	if p.Prior < 0 || int(p.Prior) >= len(priorNames) {
		return fmt.Errorf("%w: Prior %d is not one of PriorML, PriorMAP, PriorUniform", ErrInvalid, int(p.Prior))
	}
	if p.Density < 0 || int(p.Density) >= len(densityNames) {
		return fmt.Errorf("%w: Density %d is not one of DensityOff, DensityGaussian, DensityParzen", ErrInvalid, int(p.Density))
	}
	if !(p.Normalize >= 0 && p.Normalize <= 1) {
		return fmt.Errorf("%w: Normalize %v is not in [0, 1]", ErrInvalid, p.Normalize)
	}
	if p.TopN < 0 {
		return fmt.Errorf("%w: TopN %d is negative", ErrInvalid, p.TopN)
	}
	if !(p.MinSpread >= 0 && p.MinSpread <= maxSpread) {
		return fmt.Errorf("%w: MinSpread %v is not in [0, %g]", ErrInvalid, p.MinSpread, maxSpread)
	}
	if !(p.MinCount >= 0 && p.MinCount <= maxCount) {
		return fmt.Errorf("%w: MinCount %v is not in [0, %g]", ErrInvalid, p.MinCount, maxCount)
	}
	if !(p.Mix >= 0 && p.Mix <= maxRate) {
		return fmt.Errorf("%w: Mix %v is not in [0, %g]", ErrInvalid, p.Mix, maxRate)
	}
	if !(p.MeasureClip >= 0 && p.MeasureClip <= maxSpread) {
		return fmt.Errorf("%w: MeasureClip %v is not in [0, %g]", ErrInvalid, p.MeasureClip, maxSpread)
	}
	if !(p.Rate >= 0 && p.Rate <= maxRate) {
		return fmt.Errorf("%w: Rate %v is not in [0, %g]", ErrInvalid, p.Rate, maxRate)
	}
	return nil
}

// settings are Params with defaults filled in and values clamped.
type settings struct {
	alpha, priorAlpha   float64
	lambda, lambdaPrior float64
	prior               PriorKind
	beta                float64
	topN                int
	complement          bool
	minCount            float64
	minSpread           float64
	mu                  float64
	// mix scales the naive Bayes log-likelihood: 1, or Mix when
	// discriminative.
	mix            float64
	discriminative bool
	rate           float64
	density        DensityKind
	measureAlpha   float64
	measureLambda  float64
	measureClip    float64
}

func (p Params) settings() settings {
	s := settings{
		alpha:         smoothing(p.Alpha, defaultAlpha),
		priorAlpha:    smoothing(p.PriorAlpha, defaultPriorAlpha),
		lambda:        smoothing(p.Lambda, defaultLambda),
		lambdaPrior:   smoothing(p.LambdaPrior, defaultLambdaPrior),
		prior:         p.Prior,
		beta:          min(clean(p.Normalize), 1),
		topN:          max(p.TopN, 0),
		complement:    p.Complement,
		minCount:      clean(p.MinCount),
		minSpread:     min(clean(p.MinSpread), maxSpread),
		mu:            clean(p.Mu),
		mix:           1,
		density:       p.Density,
		measureAlpha:  smoothing(p.MeasureAlpha, defaultMeasureAlpha),
		measureLambda: smoothing(p.MeasureLambda, defaultMeasureLambda),
		measureClip:   min(clean(p.MeasureClip), maxSpread),
	}
	if s.density < 0 || int(s.density) >= len(densityNames) {
		s.density = DensityOff
	}
	if p.Discriminative {
		s.discriminative = true
		s.mix = bounded(p.Mix, defaultMix)
		s.rate = bounded(p.Rate, defaultRate)
	}
	return s
}

// bounded returns v, or def when v is not positive, at most maxRate.
func bounded(v, def float64) float64 {
	if !(v > 0) {
		return def
	}
	return min(v, maxRate)
}

// smoothing returns a smoothing parameter v, or def when v is not
// positive.
func smoothing(v, def float64) float64 {
	if !(v > 0) {
		return def
	}
	return min(max(v, minSmooth), maxSmooth)
}

// clean maps a count to [0, maxCount]: negative and NaN counts are zero.
func clean(x float64) float64 {
	if x > 0 {
		return min(x, maxCount)
	}
	return 0
}

// at returns s[i], or 0 past the end of s: a short or nil slice of counts
// means zero for the classes it lacks.
func at(s []float64, i int) float64 {
	if i < len(s) {
		return s[i]
	}
	return 0
}

// Totals are a model's per-class training totals, indexed like
// Model.Classes. A slice shorter than Classes means zero for the classes it
// lacks.
type Totals struct {
	// Messages[c] is N_c, the number of messages trained as class c.
	Messages []float64
	// Tokens[c] is n_c, the sum of the counts of all tokens trained as
	// class c.
	Tokens []float64
}

// empty reports whether t has no training at all.
func (t *Totals) empty() bool {
	for _, v := range t.Messages {
		if clean(v) > 0 {
			return false
		}
	}
	for _, v := range t.Tokens {
		if clean(v) > 0 {
			return false
		}
	}
	return true
}

// Model is a naive Bayes model as Score sees it: the class names, the
// settings and the training totals. Per-token counts come with each
// message's features.
type Model struct {
	// Classes names the K ≥ 2 classes; every per-class slice is indexed
	// like it. No class is special to the arithmetic.
	Classes []string
	// Params are the settings.
	Params Params
	// Global holds the totals of the global model.
	Global Totals
	// Vocabulary is V, the number of distinct tokens of the global model.
	// Values below 1 count as 1: V only matters once some token was seen.
	Vocabulary float64
	// User holds the totals of a user's model, scored with the global model
	// as its prior. Nil, or all zero, scores by the global model alone and
	// ignores Feature.User.
	User *Totals
}

// Validate reports the first problem that makes m unfit for scoring,
// wrapping ErrInvalid: fewer than two classes, empty or duplicate class
// names, totals that are negative, not finite or indexed beyond Classes, or
// invalid Params.
func (m *Model) Validate() error {
	if len(m.Classes) < 2 {
		return fmt.Errorf("%w: %d classes, need at least 2", ErrInvalid, len(m.Classes))
	}
	for i, c := range m.Classes {
		if c == "" {
			return fmt.Errorf("%w: class %d has no name", ErrInvalid, i)
		}
		for _, d := range m.Classes[:i] {
			if c == d {
				return fmt.Errorf("%w: class %q appears twice", ErrInvalid, c)
			}
		}
	}
	if err := checkTotals("Global", m.Global, len(m.Classes)); err != nil {
		return err
	}
	if m.User != nil {
		if err := checkTotals("User", *m.User, len(m.Classes)); err != nil {
			return err
		}
	}
	if !(m.Vocabulary >= 0 && m.Vocabulary <= maxCount) {
		return fmt.Errorf("%w: Vocabulary is %v", ErrInvalid, m.Vocabulary)
	}
	return m.Params.Validate()
}

func checkTotals(name string, t Totals, k int) error {
	for _, f := range []struct {
		name string
		v    []float64
	}{{"Messages", t.Messages}, {"Tokens", t.Tokens}} {
		if len(f.v) > k {
			return fmt.Errorf("%w: %s.%s has %d entries for %d classes", ErrInvalid, name, f.name, len(f.v), k)
		}
		for i, v := range f.v {
			if !(v >= 0 && v <= maxCount) {
				return fmt.Errorf("%w: %s.%s[%d] is %v", ErrInvalid, name, f.name, i, v)
			}
		}
	}
	return nil
}

// userData reports whether m has a user model with any training, that is
// whether scoring must compute more than the global model.
func (m *Model) userData() bool {
	return m.User != nil && !m.User.empty()
}

// logPriors sets out[c] to log P(c), the user's prior when user is set and
// the prior is not uniform.
func (m *Model) logPriors(s settings, user bool, out []float64) {
	switch s.prior {
	case PriorUniform:
		for c := range out {
			out[c] = -math.Log(float64(len(out)))
		}
		return
	case PriorMAP:
		dirichlet(out, m.Global.Messages, s.priorAlpha)
	default:
		a := 0.0
		for c := range out {
			if clean(at(m.Global.Messages, c)) == 0 {
				a = 1
				break
			}
		}
		dirichlet(out, m.Global.Messages, a)
	}
	if !user {
		return
	}
	var total float64
	for c := range out {
		total += clean(at(m.User.Messages, c))
	}
	den := math.Log(total + s.lambdaPrior)
	for c := range out {
		out[c] = math.Log(clean(at(m.User.Messages, c))+s.lambdaPrior*math.Exp(out[c])) - den
	}
}

// dirichlet sets out[c] to log((n_c+a)/(N+K·a)). When a is 0 every n_c is
// positive, so no logarithm is of zero.
func dirichlet(out, n []float64, a float64) {
	var total float64
	for c := range out {
		total += clean(at(n, c))
	}
	den := math.Log(total + a*float64(len(out)))
	for c := range out {
		out[c] = math.Log(clean(at(n, c))+a) - den
	}
}
