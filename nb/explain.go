package nb

import (
	"cmp"
	"slices"
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
	// complement mode, the difference of the complement weights.
	LogRatio float64
	// Weight is the feature's share of Result.LogOdds: Count · LogRatio,
	// divided by n^β under length normalization.
	Weight float64
}

// Explanation tells which features pushed a message toward each class.
// For every class i,
//
//	LogOdds(Classes[i]) = LogPrior[i] − LogPrior[Rival[i]] + Σ Weight
//
// summed over all features scored. For two classes, the features that
// favour one class are exactly those that disfavour the other, so the two
// lists of Toward together hold every feature that made a difference.
type Explanation struct {
	// Result is the scoring the contributions add up to.
	Result Result
	// Rival[i] is the class Classes[i] is compared with: the most probable
	// other class, as in Result.LogOdds.
	Rival []int
	// Toward[i] lists the features with a positive Weight for Classes[i]
	// against Rival[i], largest first, ties by Hash.
	Toward [][]Contribution
}

// Explain scores the message whose features are fs, as Score does, and
// returns for each class the n features that favoured it most against its
// rival; n ≤ 0 returns them all. It allocates, so it is meant for
// reports, not for every message.
func (m *Model) Explain(fs []Feature, n int) Explanation {
	var r Result
	m.score(&r, fs, true)
	k := len(r.Classes)
	ex := Explanation{Result: r, Rival: make([]int, k), Toward: make([][]Contribution, k)}
	for i := range k {
		j := r.rival(i)
		ex.Rival[i] = j
		if j < 0 {
			continue
		}
		var list []Contribution
		for _, c := range r.cand {
			ratio := r.terms[c.at+i] - r.terms[c.at+j]
			if w := c.count * ratio / r.norm; w > 0 {
				f := &fs[c.feat]
				list = append(list, Contribution{Hash: f.Hash, Name: f.Name, Count: c.count, LogRatio: ratio, Weight: w})
			}
		}
		slices.SortFunc(list, func(a, b Contribution) int {
			if c := cmp.Compare(b.Weight, a.Weight); c != 0 {
				return c
			}
			return cmp.Compare(a.Hash, b.Hash)
		})
		if n > 0 && len(list) > n {
			list = list[:n]
		}
		ex.Toward[i] = list
	}
	return ex
}
