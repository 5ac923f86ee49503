package nb

import (
	"cmp"
	"math"
	"slices"
	"sync/atomic"
)

// Feature is one distinct token of a message with its training counts.
type Feature struct {
	// Hash identifies the token. It breaks ties between features, so that
	// results do not depend on their order, and Explain reports it.
	Hash uint64
	// Name is the token's text, for Explain; it may be empty.
	Name string
	// Count is the number of times the token occurs in the message.
	Count float64
	// Global[c] is n_cw, the token's count in class c of the global model.
	// Nil, or a slice shorter than Model.Classes, means zero for the
	// classes it lacks.
	Global []float64
	// User[c] is the token's count in class c of the user's model, like
	// Global. It is ignored when the model has no user data.
	User []float64
	// Weight[c] is the feature's learned weight for class c in the global
	// model, per occurrence, used when Params.Discriminative is set. Nil,
	// or a slice shorter than Model.Classes, means zero for the classes
	// it lacks.
	Weight []float64
	// UserWeight[c] is the user's own weight, added to Weight when the
	// model has user data.
	UserWeight []float64
	// Part is the part of the message the feature came from, 0 or 1 (a
	// mail's header and body): under Params.Normalize each part's
	// log-likelihood is divided by its own n^β. A body of thousands of
	// tokens then cannot drown the few header tokens that tell who sent
	// the message to whom, and a part's correlated tokens count as one
	// witness, not as hundreds. Values above 1 count as 1.
	Part int
}

// parts is the number of message parts Feature.Part distinguishes.
const parts = 2

// partOf returns the part of f, in [0, parts).
func partOf(f *Feature) int { return min(max(f.Part, 0), parts-1) }

// Result is the outcome of scoring one message. Its slices are indexed like
// Classes.
type Result struct {
	// Classes are the model's class names.
	Classes []string
	// LogPrior[c] is log P(c).
	LogPrior []float64
	// LogJoint[c] is log P(c) + Σ_w count_w · log p(w|c) over the features
	// scored, plus Σ_v Weight_v · log p(x_v|c) over the measures given:
	// log p(x, c) up to a constant, the score of the method. With
	// Params.Normalize the sum over each part of the message
	// (Feature.Part) is divided by that part's n^β; with Params.Complement
	// each log p(w|c) is replaced by −log p̃(w|¬c).
	LogJoint []float64
	// LogPosterior[c] is log P(c|x), LogJoint normalized.
	LogPosterior []float64
	// Posterior[c] is P(c|x). It may round to 0 or 1 where LogJoint still
	// orders messages, so rank and threshold on LogOdds.
	Posterior []float64
	// Used is the number of features scored: those seen in training, at
	// least Params.MinCount times, telling classes apart by at least
	// Params.MinSpread, and within Params.TopN.
	Used int
	// Tokens is n, the sum of the counts of the features scored.
	Tokens float64
	// Measures is the number of measures (Values) scored.
	Measures int

	norm  [parts]float64   // n^β of each part, what its log-likelihood was divided by
	sums  [parts][]float64 // per-class log-likelihood of each part
	wsums [parts][]float64 // per-class sum of count · weight of each part, when discriminative
	scale [parts]float64   // 1/‖x_p‖ of each part, when discriminative
	mix   float64          // what the log-likelihood was multiplied by
	rate  float64          // Params.Rate, when discriminative
	n     [parts]float64   // token occurrences scored in each part
	buf   []float64        // backing array of the per-class slices
	cand  []candidate      // features scored, when recorded
	terms []float64        // their per-class terms, at candidate.at
}

// Index returns the index of class in r.Classes, or -1.
func (r Result) Index(class string) int {
	return slices.Index(r.Classes, class)
}

// LogOdds returns log P(class|x) − log P(other|x) for the most probable
// other class: for spam and ham, log P(spam|x) − log P(ham|x). Positive
// means class is the most probable. It is 0 when class is not one of
// r.Classes or has no other class to compare with.
func (r Result) LogOdds(class string) float64 {
	i := r.Index(class)
	if i < 0 {
		return 0
	}
	j := r.rival(i)
	if j < 0 {
		return 0
	}
	return at(r.LogJoint, i) - at(r.LogJoint, j)
}

// GroupLogOdds returns the log-odds of a set of classes against all the
// others: log Σ_{c∈group} P(c|x) − log Σ_{c∉group} P(c|x), the logit of
// the probability that the message is of one of them, such as spam and
// phishing against the rest. For two classes and a group of one it is
// LogOdds. Names that are not classes of r are ignored. It is +Inf when
// the group holds every class of r and −Inf when it holds none.
func (r Result) GroupLogOdds(group []string) float64 {
	in, out := math.Inf(-1), math.Inf(-1)
	for c, name := range r.Classes {
		if slices.Contains(group, name) {
			in = logAdd(in, at(r.LogJoint, c))
		} else {
			out = logAdd(out, at(r.LogJoint, c))
		}
	}
	if math.IsInf(in, -1) && math.IsInf(out, -1) {
		return math.Inf(-1)
	}
	return in - out
}

// logAdd returns log(e^a + e^b) without overflow; −Inf is log 0.
func logAdd(a, b float64) float64 {
	if a < b {
		a, b = b, a
	}
	if math.IsInf(b, -1) {
		return a
	}
	return a + math.Log1p(math.Exp(b-a))
}

// rival returns the most probable class other than i, the lowest index on
// a tie, or -1 when there is none.
func (r Result) rival(i int) int {
	j := -1
	for k := range r.Classes {
		if k != i && (j < 0 || at(r.LogJoint, k) > at(r.LogJoint, j)) {
			j = k
		}
	}
	return j
}

// Score scores the message whose features are fs and whose measures,
// if any, are vs. A measure is one more factor of naive Bayes's product:
// its weighted log density adds to each class's score.
func (m *Model) Score(fs []Feature, vs ...Value) Result {
	var r Result
	m.score(&r, fs, vs, false)
	return r
}

// ScoreInto is Score writing into r. It reuses r's slices when they are
// large enough, so that a loop scoring many messages into one Result does
// not allocate. Copies of r share its slices: a Result to be kept must not
// be passed to ScoreInto again.
func (m *Model) ScoreInto(r *Result, fs []Feature, vs ...Value) {
	m.score(r, fs, vs, false)
}

// candidate is a feature to score, with its terms recorded for TopN or
// Explain.
type candidate struct {
	feat   int // index in the message's features
	at     int // offset of its terms in Result.terms
	hash   uint64
	count  float64
	spread float64
}

// before reports whether a tells classes apart better than b: a larger
// spread, then a smaller hash, then an earlier feature, so that the order
// is total and does not depend on the order of the features.
func (a candidate) before(b candidate) bool {
	if a.spread != b.spread {
		return a.spread > b.spread
	}
	if a.hash != b.hash {
		return a.hash < b.hash
	}
	return a.feat < b.feat
}

// siftUp and siftDown restore the heap order of h, in which every
// candidate comes before its parent, after h[i] changed.
func siftUp(h []candidate, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h[p].before(h[i]) {
			return
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func siftDown(h []candidate, i int) {
	for {
		w := i
		for _, c := range []int{2*i + 1, 2*i + 2} {
			if c < len(h) && h[w].before(h[c]) {
				w = c
			}
		}
		if w == i {
			return
		}
		h[i], h[w] = h[w], h[i]
		i = w
	}
}

// score fills r. When record is set, or TopN needs them, it keeps the
// features scored in r.cand and their terms in r.terms.
func (m *Model) score(r *Result, fs []Feature, vs []Value, record bool) {
	s := m.Params.settings()
	k := len(m.Classes)
	work := r.reset(m.Classes)
	user := m.userData()
	e := newEstimator(m, s, user, work)
	m.logPriors(s, user, r.LogPrior)

	all := !record && (s.topN == 0 || len(fs) <= s.topN)
	fast := all && k == 2 && e.global()
	if fast {
		r.sumTwo(&e, fs, s.discriminative)
	} else if all {
		for i := range fs {
			n := e.terms(&fs[i])
			if n == 0 {
				continue
			}
			p := partOf(&fs[i])
			for c, t := range e.g {
				r.sums[p][c] += n * t
			}
			r.Used++
			r.n[p] += n
		}
	} else {
		// With TopN, r.cand is a heap of the best features so far, the
		// least telling at its root, and a feature that displaces the root
		// takes over its terms' slot: O(F log N) time, O(N) space.
		for i := range fs {
			n := e.terms(&fs[i])
			if n == 0 {
				continue
			}
			lo, hi := e.g[0], e.g[0]
			for _, t := range e.g {
				lo, hi = min(lo, t), max(hi, t)
			}
			f := candidate{feat: i, hash: fs[i].Hash, count: n, spread: hi - lo}
			switch {
			case s.topN == 0 || len(r.cand) < s.topN:
				f.at = len(r.terms)
				r.terms = append(r.terms, e.g...)
				r.cand = append(r.cand, f)
				if s.topN > 0 {
					siftUp(r.cand, len(r.cand)-1)
				}
			case f.before(r.cand[0]):
				f.at = r.cand[0].at
				copy(r.terms[f.at:f.at+k], e.g)
				r.cand[0] = f
				siftDown(r.cand, 0)
			}
		}
		// Summing in the order of the message gives the same bits as the
		// loop above when TopN keeps every feature.
		if s.topN > 0 {
			slices.SortFunc(r.cand, func(a, b candidate) int { return cmp.Compare(a.feat, b.feat) })
		}
		for _, f := range r.cand {
			p := partOf(&fs[f.feat])
			for c, t := range r.terms[f.at : f.at+k] {
				r.sums[p][c] += f.count * t
			}
			r.Used++
			r.n[p] += f.count
		}
	}

	if s.discriminative {
		if !fast {
			r.weigh(fs, user)
		}
		r.rate = s.rate
	}
	// Dividing rather than multiplying by n^−β keeps a tiny n from
	// overflowing: the sum shrinks with n.
	r.mix = s.mix
	for p := range parts {
		r.norm[p] = 1
		if s.beta > 0 && r.n[p] > 0 {
			r.norm[p] = math.Pow(r.n[p], s.beta)
		}
		r.Tokens += r.n[p]
		for c := range r.LogJoint {
			r.LogJoint[c] += r.mix*r.sums[p][c]/r.norm[p] + r.scale[p]*r.wsums[p][c]
		}
	}
	for c := range r.LogJoint {
		r.LogJoint[c] += r.LogPrior[c]
	}
	for i := range vs {
		if !usable(&vs[i], k) {
			continue
		}
		r.Measures++
		top := slices.Max(vs[i].LogDensity)
		for c, l := range vs[i].LogDensity {
			r.LogJoint[c] += vs[i].Weight * clip(l, top, s.measureClip)
		}
	}
	r.normalize()
}

// clip returns log density l of a measure raised to at least top, the
// largest of its classes', less bound, when bound is positive.
func clip(l, top, bound float64) float64 {
	if bound > 0 {
		return max(l, top-bound)
	}
	return l
}

// usable reports whether v can be scored in a model of k classes: a
// finite weight, and a finite log density for each class. A measure may
// push as hard as its densities say, but never to an infinity.
func usable(v *Value, k int) bool {
	if len(v.LogDensity) != k || v.Weight == 0 || math.IsNaN(v.Weight) || math.IsInf(v.Weight, 0) || math.Abs(v.Weight) > maxRate {
		return false
	}
	for _, l := range v.LogDensity {
		if math.IsNaN(l) || math.IsInf(l, 0) || math.Abs(l) > maxSpread {
			return false
		}
	}
	return true
}

// weigh sums the learned weights of every feature, seen by naive Bayes or
// not, per part and class, and the scale that makes each part's feature
// vector of unit length.
func (r *Result) weigh(fs []Feature, user bool) {
	var sq [parts]float64
	for i := range fs {
		f := &fs[i]
		n := clean(f.Count)
		if n == 0 {
			continue
		}
		p := partOf(f)
		sq[p] += n * n
		if f.Weight == nil && (!user || f.UserWeight == nil) {
			continue
		}
		for c := range r.wsums[p] {
			w := weight(f.Weight, c)
			if user {
				w += weight(f.UserWeight, c)
			}
			r.wsums[p][c] += n * w
		}
	}
	for p := range parts {
		if sq[p] > 0 {
			r.scale[p] = 1 / math.Sqrt(sq[p])
		}
	}
}

// weight returns s[c] as a usable weight: 0 past the end of s or when not
// finite, and at most maxCount in size.
func weight(s []float64, c int) float64 {
	if c >= len(s) {
		return 0
	}
	w := s[c]
	if !(w > -maxCount && w < maxCount) {
		if math.IsNaN(w) {
			return 0
		}
		return math.Copysign(maxCount, w)
	}
	return w
}

// Step returns what training the message scored in r as r.Classes[class]
// adds to its features' weights: per occurrence of a feature of part p,
// step[p][c] to its weight for class c. It is one step of stochastic
// gradient descent on the log-loss −log P(class|x), each weight moving by
// Rate · (1[c = class] − P(c|x)) · s_p: much when the message was
// misjudged, almost nothing when it was judged right with confidence. r
// must come from a discriminative model, or Step returns nils.
func (r Result) Step(class int) (step [parts][]float64) {
	if r.rate == 0 || class < 0 || class >= len(r.Posterior) {
		return step
	}
	for p := range parts {
		step[p] = make([]float64, len(r.Posterior))
		for c, pc := range r.Posterior {
			y := 0.0
			if c == class {
				y = 1
			}
			step[p][c] = r.rate * (y - pc) * r.scale[p]
		}
	}
	return step
}

// reset sizes r's per-class slices for classes, zeroed, and returns
// scratch space for the estimator.
func (r *Result) reset(classes []string) []float64 {
	k := len(classes)
	const exported, scratch = 4, estimatorSlices
	need := (exported + 2*parts + scratch) * k
	if cap(r.buf) < need {
		r.buf = make([]float64, need)
	}
	b := r.buf[:need]
	clear(b)
	r.Classes = classes
	r.LogPrior, b = b[:k:k], b[k:]
	r.LogJoint, b = b[:k:k], b[k:]
	r.LogPosterior, b = b[:k:k], b[k:]
	r.Posterior, b = b[:k:k], b[k:]
	for p := range parts {
		r.sums[p], b = b[:k:k], b[k:]
		r.wsums[p], b = b[:k:k], b[k:]
	}
	r.n = [parts]float64{}
	r.scale = [parts]float64{}
	r.rate = 0
	r.Used, r.Tokens, r.Measures = 0, 0, 0
	r.cand, r.terms = r.cand[:0], r.terms[:0]
	return b
}

// normalize sets the posteriors from LogJoint with log-sum-exp: shifting by
// the largest score makes the largest term exp(0) = 1, so the sum neither
// overflows nor underflows to zero.
func (r *Result) normalize() {
	if len(r.LogJoint) == 0 {
		return
	}
	top := slices.Max(r.LogJoint)
	var z float64
	for _, v := range r.LogJoint {
		z += math.Exp(v - top)
	}
	lse := top + math.Log(z)
	for c, v := range r.LogJoint {
		r.LogPosterior[c] = v - lse
		r.Posterior[c] = math.Exp(v - lse)
	}
}

// estimatorSlices is the number of per-class slices an estimator uses.
const estimatorSlices = 5

// estimator computes the per-class terms of features; the per-class
// constants that do not depend on the token are computed once per message.
type estimator struct {
	alpha      float64
	lambda     float64
	minCount   float64
	minSpread  float64
	complement bool
	user       bool
	mu         float64   // Dirichlet prior mass toward the pooled p(w), when > 0
	invPool    float64   // 1/(Σ_c n_c + α·V), when mu > 0
	logDen     []float64 // log(n_c + α·V), when !user; n_c when user
	inv        []float64 // 1/(n_c + α·V), when user
	logDenU    []float64 // log(n_u,c + λ), when user
	g, u       []float64 // the current feature's counts, then g its terms
	logs       *logTable // log(k + α) for small whole k
}

// logTable holds log(k + α) for the whole counts k below logTableSize,
// which are most of a global model's: the logarithms of a feature's
// counts were over a quarter of the instructions of scoring a message,
// and a value of the table is the one math.Log gives for the same
// argument, to the bit. The table
// of the α in use is kept (logTables) rather than made per message.
type logTable struct {
	alpha float64
	v     [logTableSize]float64
}

const logTableSize = 1 << 10

var logTables atomic.Pointer[logTable]

// logTableFor returns the table of alpha, making it if the one kept is of
// another α.
func logTableFor(alpha float64) *logTable {
	if t := logTables.Load(); t != nil && t.alpha == alpha {
		return t
	}
	t := &logTable{alpha: alpha}
	for k := range t.v {
		t.v[k] = math.Log(float64(k) + alpha)
	}
	logTables.Store(t)
	return t
}

// logCount returns log(n + α) for a count n, cleaned.
func (e *estimator) logCount(n float64) float64 {
	// The mask keeps k in the table; a count past it, or not whole, is
	// not its masked index.
	if k := int(n) & (logTableSize - 1); float64(k) == n {
		return e.logs.v[k]
	}
	return e.logPast(n)
}

// logPast is logCount past its table. It is a call of its own so that
// logCount, small without it, is inlined: the call was a third of what a
// feature seen in training cost.
//
//go:noinline
func (e *estimator) logPast(n float64) float64 { return math.Log(n + e.alpha) }

// newEstimator prepares the estimates of m's parameters, using work (of
// estimatorSlices per class) for its slices. In complement mode every
// count of a class stands for the sum over the other classes.
func newEstimator(m *Model, s settings, user bool, work []float64) estimator {
	k := len(m.Classes)
	e := estimator{
		alpha:      s.alpha,
		lambda:     s.lambda,
		minCount:   s.minCount,
		minSpread:  s.minSpread,
		complement: s.complement,
		user:       user,
		mu:         s.mu,
	}
	if !user && s.mu <= 0 {
		e.logs = logTableFor(s.alpha)
	}
	e.logDen, work = work[:k:k], work[k:]
	e.inv, work = work[:k:k], work[k:]
	e.logDenU, work = work[:k:k], work[k:]
	e.g, work = work[:k:k], work[k:]
	e.u = work[:k:k]

	alphaV := s.alpha * min(max(clean(m.Vocabulary), 1), maxCount)
	total := load(e.logDen, m.Global.Tokens)
	if s.complement {
		complementOf(e.logDen, total)
	}
	if e.mu > 0 {
		e.invPool = 1 / (total + alphaV)
		alphaV = e.mu
	}
	for c, n := range e.logDen {
		if user {
			e.inv[c] = 1 / (n + alphaV)
		} else {
			e.logDen[c] = math.Log(n + alphaV)
		}
	}
	if user {
		total := load(e.logDenU, m.User.Tokens)
		if s.complement {
			complementOf(e.logDenU, total)
		}
		for c, n := range e.logDenU {
			e.logDenU[c] = math.Log(n + s.lambda)
		}
	}
	return e
}

// load sets out[c] to the count of class c in n, cleaned, and returns
// their sum.
func load(out, n []float64) float64 {
	var total float64
	for c := range out {
		out[c] = clean(at(n, c))
		total += out[c]
	}
	return total
}

// complementOf replaces each class's count in out by the sum of the other
// classes', given the sum of all. None becomes negative: rounding a sum of
// non-negative numbers never makes it smaller than one of them.
func complementOf(out []float64, total float64) {
	for c := range out {
		out[c] = total - out[c]
	}
}

// terms sets e.g to the terms f adds to each class's score per occurrence,
// log p(w|c) or, in complement mode, −log p̃(w|¬c), and returns f's count;
// it returns 0 when f is not to be scored.
func (e *estimator) terms(f *Feature) float64 {
	n := clean(f.Count)
	// Most of a message's features were never trained on; their zero
	// counts would fall below any MinCount.
	if n == 0 || f.Global == nil && (!e.user || f.User == nil) {
		return 0
	}
	seen := load(e.g, f.Global)
	var seenU float64
	if e.user {
		seenU = load(e.u, f.User)
	}
	if all := seen + seenU; all == 0 || all < e.minCount {
		return 0
	}
	if e.complement {
		complementOf(e.g, seen)
		if e.user {
			complementOf(e.u, seenU)
		}
	}
	if e.mu > 0 {
		// Smoothing toward the pooled distribution q(w) instead of the
		// uniform one: p(w|c) = (n_cw + μ·q(w))/(n_c + μ).
		prior := e.mu * (seen + e.alpha) * e.invPool
		for c := range e.g {
			if e.user {
				global := (e.g[c] + prior) * e.inv[c]
				e.g[c] = math.Log(e.u[c]+e.lambda*global) - e.logDenU[c]
			} else {
				e.g[c] = math.Log(e.g[c]+prior) - e.logDen[c]
			}
		}
	} else if e.user {
		for c := range e.g {
			global := (e.g[c] + e.alpha) * e.inv[c]
			e.g[c] = math.Log(e.u[c]+e.lambda*global) - e.logDenU[c]
		}
	} else {
		for c := range e.g {
			e.g[c] = e.logCount(e.g[c]) - e.logDen[c]
		}
	}
	if e.complement {
		for c := range e.g {
			e.g[c] = -e.g[c]
		}
	}
	if e.minSpread > 0 {
		lo, hi := e.g[0], e.g[0]
		for _, t := range e.g[1:] {
			lo, hi = min(lo, t), max(hi, t)
		}
		if hi-lo < e.minSpread {
			return 0
		}
	}
	return n
}

// global reports whether e estimates by the global model's counts alone,
// additively smoothed and not complemented: the estimate of almost every
// message.
func (e *estimator) global() bool { return e.logs != nil && !e.complement }

// sumTwo is score's loop over fs, and weigh's when weights is set, for two
// classes and an estimator that is global, the shape of almost every
// message: it computes what terms and weigh would and adds it up in the
// same order, to the bit, but with the two classes' values held apart
// rather than in slices, and tests only what can apply.
func (r *Result) sumTwo(e *estimator, fs []Feature, weights bool) {
	var sums, wsums [parts][2]float64
	var sq, used [parts]float64
	logDen := [2]float64{e.logDen[0], e.logDen[1]}
	for i := range fs {
		f := &fs[i]
		n := clean(f.Count)
		if n == 0 {
			continue
		}
		p := partOf(f)
		if weights {
			sq[p] += n * n
			if f.Weight != nil {
				wsums[p][0] += n * weight(f.Weight, 0)
				wsums[p][1] += n * weight(f.Weight, 1)
			}
		}
		if f.Global == nil {
			continue
		}
		g0, g1 := clean(at(f.Global, 0)), clean(at(f.Global, 1))
		if seen := g0 + g1; seen == 0 || seen < e.minCount {
			continue
		}
		t0, t1 := e.logCount(g0)-logDen[0], e.logCount(g1)-logDen[1]
		// |t0−t1| compares with MinSpread as max − min does, whatever
		// t0 and t1 are.
		if e.minSpread > 0 && math.Abs(t0-t1) < e.minSpread {
			continue
		}
		sums[p][0] += n * t0
		sums[p][1] += n * t1
		used[p] += n
		r.Used++
	}
	for p := range parts {
		copy(r.sums[p], sums[p][:])
		copy(r.wsums[p], wsums[p][:])
		r.n[p] = used[p]
		if sq[p] > 0 {
			r.scale[p] = 1 / math.Sqrt(sq[p])
		}
	}
}

// Pool returns the result of a message judged by its runs, rs, under the
// hypothesis that one of them, each as likely as the others, carries the
// evidence for class: the likelihood ratio of class is then the mean of
// the runs' ratios, so its log-odds are the log of the mean of exp(log-odds)
// over rs. Text added to a message changes only the runs it is in, and a
// run that still carries a payload keeps the pooled log-odds within log K
// of its own, while a message that has no such run gains nothing from
// being cut into K. Pool returns the run with the largest log-odds of
// class, its score for class moved to the pooled log-odds; it changes
// that run's slices. It returns the zero Result when rs is empty or class
// is not one of their classes.
func Pool(rs []Result, class string) Result {
	if len(rs) == 0 || rs[0].Index(class) < 0 {
		return Result{}
	}
	best, top := 0, rs[0].LogOdds(class)
	for i := range rs {
		if lo := rs[i].LogOdds(class); lo > top {
			best, top = i, lo
		}
	}
	var z float64
	for i := range rs {
		z += math.Exp(rs[i].LogOdds(class) - top)
	}
	r := rs[best]
	r.LogJoint[r.Index(class)] += math.Log(z / float64(len(rs)))
	r.normalize()
	return r
}
