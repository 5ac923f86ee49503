package nb

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

// Contribution is one feature's share of the log-odds of a class against
// its rival.
type Contribution struct {
	// Hash and Name identify the feature, as the caller gave them.
	Hash uint64
	Name string
	// Count is the feature's count in the message.
	Count float64
	// LogRatio is log p(w|c) − log p(w|rival) for one occurrence; in
	// complement mode, the difference of the complement weights. It is 0
	// for a feature naive Bayes left out.
	LogRatio float64
	// Learned is the feature's learned weight for c minus its weight for
	// the rival, per occurrence, when the model is discriminative.
	Learned float64
	// Weight is the feature's share of Result.LogOdds: Count · LogRatio,
	// divided by n^β of its part (Feature.Part) under length
	// normalization (and times Params.Mix when discriminative), plus
	// Count · Learned scaled as its part is.
	Weight float64
}

// Explanation tells which features and measures pushed a message toward
// each class. For every class i,
//
//	LogOdds(Classes[i]) = LogPrior[i] − LogPrior[Rival[i]] + Σ Weight
//
// summed over all features and measures scored. For two classes, the
// features that favour one class are exactly those that disfavour the
// other, so the two lists of Toward together hold every feature that made
// a difference.
type Explanation struct {
	// Result is the scoring the contributions add up to.
	Result Result
	// Rival[i] is the class Classes[i] is compared with: the most probable
	// other class, as in Result.LogOdds.
	Rival []int
	// Toward[i] lists the features with a positive Weight for Classes[i]
	// against Rival[i], largest first, ties by Hash.
	Toward [][]Contribution
	// Measures[i] lists the measures scored, for Classes[i] against
	// Rival[i], that weighed most either way: the largest |Weight| first,
	// ties by name.
	Measures [][]MeasureContribution
}

// MeasureContribution is one measure's share of the log-odds of a class
// against its rival.
type MeasureContribution struct {
	// Name names the measure and Text writes its value, as the Value
	// said.
	Name, Text string
	// LogRatio is log p(x|c) − log p(x|rival).
	LogRatio float64
	// Weight is its share of Result.LogOdds: Value.Weight · LogRatio.
	Weight float64
}

// Explain scores the message whose features are fs and whose measures
// are vs, as Score does, and returns for each class the n features that
// favoured it most against its rival, and the n measures that weighed most
// either way; n ≤ 0 returns them all. It allocates, so it is meant for
// reports, not for every message.
func (m *Model) Explain(fs []Feature, n int, vs ...Value) Explanation {
	var r Result
	m.score(&r, fs, vs, true)
	k := len(r.Classes)
	ex := Explanation{Result: r, Rival: make([]int, k), Toward: make([][]Contribution, k), Measures: make([][]MeasureContribution, k)}
	// Where each feature's naive Bayes terms are, if it was scored.
	terms := make([]int, len(fs))
	for i := range terms {
		terms[i] = -1
	}
	for _, c := range r.cand {
		terms[c.feat] = c.at
	}
	user := m.userData()
	for i := range k {
		j := r.rival(i)
		ex.Rival[i] = j
		if j < 0 {
			continue
		}
		var list []Contribution
		for fi := range fs {
			f := &fs[fi]
			count := clean(f.Count)
			p := partOf(f)
			var ratio, learned, w float64
			if at := terms[fi]; at >= 0 {
				ratio = r.terms[at+i] - r.terms[at+j]
				w = r.mix * count * ratio / r.norm[p]
			}
			if r.rate > 0 {
				learned = weight(f.Weight, i) - weight(f.Weight, j)
				if user {
					learned += weight(f.UserWeight, i) - weight(f.UserWeight, j)
				}
				w += r.scale[p] * count * learned
			}
			if w <= 0 {
				continue
			}
			list = keepTop(list, Contribution{Hash: f.Hash, Name: f.Name, Count: count, LogRatio: ratio, Learned: learned, Weight: w}, n)
		}
		if n <= 0 {
			slices.SortFunc(list, func(a, b Contribution) int {
				switch {
				case a.before(b):
					return -1
				case b.before(a):
					return 1
				}
				return 0
			})
		}
		ex.Toward[i] = list
		ex.Measures[i] = measuresToward(vs, k, i, j, n, m.Params.settings().measureClip)
	}
	return ex
}

// String writes c as explanations show it, "links=41 (+1.90)": the
// measure, its value and its weight toward the class.
func (c MeasureContribution) String() string {
	w := strconv.FormatFloat(c.Weight, 'f', 2, 64)
	if c.Weight >= 0 {
		w = "+" + w
	}
	return c.Name + "=" + c.Text + " (" + w + ")"
}

// measuresToward returns the contributions of the measures of vs that a
// model of k classes scores, each clipped by bound as Score clips it, to
// the log-odds of class i against j, the n largest in size first (all
// when n ≤ 0), leaving out those that are as likely in both.
func measuresToward(vs []Value, k, i, j, n int, bound float64) []MeasureContribution {
	var out []MeasureContribution
	for _, v := range vs {
		if !usable(&v, k) {
			continue
		}
		top := slices.Max(v.LogDensity)
		ratio := clip(v.LogDensity[i], top, bound) - clip(v.LogDensity[j], top, bound)
		if ratio == 0 {
			continue // what tells nothing explains nothing
		}
		out = append(out, MeasureContribution{Name: v.Name, Text: v.Text, LogRatio: ratio, Weight: v.Weight * ratio})
	}
	slices.SortFunc(out, func(a, b MeasureContribution) int {
		if x, y := math.Abs(a.Weight), math.Abs(b.Weight); x != y {
			if x > y {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

// before reports whether c weighs more than d, ties broken by Hash.
func (c Contribution) before(d Contribution) bool {
	if c.Weight != d.Weight {
		return c.Weight > d.Weight
	}
	return c.Hash < d.Hash
}

// keepTop adds c to list, which holds at most n contributions (all when
// n ≤ 0) in order, best first. A message has hundreds of features and an
// explanation a handful, so keeping a short sorted list costs far less than
// sorting them all.
func keepTop(list []Contribution, c Contribution, n int) []Contribution {
	if n <= 0 {
		return append(list, c)
	}
	if len(list) == n && !c.before(list[n-1]) {
		return list
	}
	at := len(list)
	for at > 0 && c.before(list[at-1]) {
		at--
	}
	if len(list) < n {
		list = append(list, Contribution{})
	}
	copy(list[at+1:], list[at:len(list)-1])
	list[at] = c
	return list
}
