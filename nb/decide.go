package nb

import (
	"fmt"
	"math"
	"slices"
)

// Loss is a loss matrix: Loss[i][k] is ℓ(i|k), the cost of deciding class i
// when the truth is class k, indexed like Model.Classes. An entry that is
// missing, or outside [0, 1e100] where an expected loss could overflow,
// counts as in the 0-1 loss (0 on the diagonal, 1 off it), so the nil Loss
// is the 0-1 loss; Validate reports such entries.
type Loss [][]float64

// at returns ℓ(i|k).
func (l Loss) at(i, k int) float64 {
	if i < len(l) && k < len(l[i]) {
		if v := l[i][k]; v >= 0 && v <= maxCount {
			return v
		}
	}
	if i == k {
		return 0
	}
	return 1
}

// CostRatio returns the 0-1 loss over classes except that deciding
// positive when the truth is negative (a false positive) costs fpCost, and
// deciding negative when the truth is positive (a false negative) costs
// fnCost. With spam as positive and ham as negative, fpCost 9 and fnCost 1
// make losing a legitimate message nine times as bad as letting a spam
// through, which moves the threshold on P(spam|x) from 1/2 to 9/10 (see
// Loss.Threshold).
func CostRatio(classes []string, positive, negative string, fpCost, fnCost float64) (Loss, error) {
	p, n := slices.Index(classes, positive), slices.Index(classes, negative)
	switch {
	case p < 0:
		return nil, fmt.Errorf("%w: positive class %q is not one of %q", ErrInvalid, positive, classes)
	case n < 0:
		return nil, fmt.Errorf("%w: negative class %q is not one of %q", ErrInvalid, negative, classes)
	case p == n:
		return nil, fmt.Errorf("%w: class %q is both positive and negative", ErrInvalid, positive)
	}
	l := make(Loss, len(classes))
	for i := range l {
		l[i] = make([]float64, len(classes))
		for k := range l[i] {
			if i != k {
				l[i][k] = 1
			}
		}
	}
	l[p][n], l[n][p] = fpCost, fnCost
	if err := l.Validate(len(classes)); err != nil {
		return nil, err
	}
	return l, nil
}

// Validate reports, wrapping ErrInvalid, whether l is not a k×k matrix of
// costs in [0, 1e100] in which every wrong decision costs more than the
// right one, ℓ(i|k) > ℓ(k|k) for i ≠ k. That last condition keeps every
// Threshold strictly between 0 and 1.
func (l Loss) Validate(k int) error {
	if len(l) != k {
		return fmt.Errorf("%w: loss matrix has %d rows for %d classes", ErrInvalid, len(l), k)
	}
	for i, row := range l {
		if len(row) != k {
			return fmt.Errorf("%w: loss matrix row %d has %d entries for %d classes", ErrInvalid, i, len(row), k)
		}
		for j, v := range row {
			if !(v >= 0 && v <= maxCount) {
				return fmt.Errorf("%w: loss ℓ(%d|%d) is %v, not in [0, %g]", ErrInvalid, i, j, v, maxCount)
			}
		}
	}
	for i := range l {
		for j := range l {
			if i != j && !(l[i][j] > l[j][j]) {
				return fmt.Errorf("%w: loss ℓ(%d|%d) = %v is not more than ℓ(%d|%d) = %v", ErrInvalid, i, j, l[i][j], j, j, l[j][j])
			}
		}
	}
	return nil
}

// Threshold returns p*, the posterior above which deciding class i is
// preferred to deciding class k:
//
//	p* = (ℓ_ik − ℓ_kk) / ((ℓ_ik − ℓ_kk) + (ℓ_ki − ℓ_ii))
//
// Class i is preferred when P(c_i|x) / (P(c_i|x) + P(c_k|x)) > p*, which is
// p(x|c_i)/p(x|c_k) > [(ℓ_ik − ℓ_kk)/(ℓ_ki − ℓ_ii)] · P(c_k)/P(c_i), the
// risk-minimizing rule written for posteriors. For two classes p* is the
// threshold on P(c_i|x) itself, and Logit(p*) that on the log-odds. It is
// 1/2 when neither choice costs more than the other.
func (l Loss) Threshold(i, k int) float64 {
	a := max(l.at(i, k)-l.at(k, k), 0)
	b := max(l.at(k, i)-l.at(i, i), 0)
	if a+b == 0 {
		return 0.5
	}
	return a / (a + b)
}

// Logit returns log(p/(1−p)), the log-odds of probability p, to express
// bounds on a posterior as bounds on Result.LogOdds. It is −Inf at 0 and
// +Inf at 1.
func Logit(p float64) float64 {
	return math.Log(p) - math.Log1p(-p)
}

// Decider turns a Result into a Decision.
type Decider struct {
	// Loss is the loss matrix; nil is the 0-1 loss, which decides the most
	// probable class.
	Loss Loss
	// Positive names the classes whose joint log-odds, Result.GroupLogOdds,
	// the unsure band applies to, such as spam (and phishing).
	Positive []string
	// UnsureLow and UnsureHigh bound the unsure band [UnsureLow,
	// UnsureHigh) on Result.GroupLogOdds(Positive). Logit of bounds on
	// the posterior of the Positive classes gives the same band; bands
	// are set on log-odds because posteriors round to 0 and 1 where
	// log-odds still differ. An empty band (UnsureLow ≥ UnsureHigh, as in
	// the zero value) is off.
	UnsureLow, UnsureHigh float64
}

// Validate reports, wrapping ErrInvalid, a Loss that is not valid for
// classes, or a non-empty unsure band whose Positive classes are not some
// of classes or whose bounds are NaN.
func (d Decider) Validate(classes []string) error {
	if d.Loss != nil {
		if err := d.Loss.Validate(len(classes)); err != nil {
			return err
		}
	}
	if math.IsNaN(d.UnsureLow) || math.IsNaN(d.UnsureHigh) {
		return fmt.Errorf("%w: unsure band [%v, %v)", ErrInvalid, d.UnsureLow, d.UnsureHigh)
	}
	if d.UnsureLow < d.UnsureHigh {
		if len(d.Positive) == 0 {
			return fmt.Errorf("%w: an unsure band needs positive classes", ErrInvalid)
		}
		for _, c := range d.Positive {
			if !slices.Contains(classes, c) {
				return fmt.Errorf("%w: positive class %q is not one of %q", ErrInvalid, c, classes)
			}
		}
	}
	return nil
}

// Decision is what a Decider concluded about one message.
type Decision struct {
	// Class is the class of least expected loss, "" when there are no
	// classes. When Unsure is set it is only the better guess.
	Class string
	// Index is the index of Class in Result.Classes, or -1.
	Index int
	// Risk is the expected loss Σ_k ℓ(Class|k)·P(k|x) of deciding Class.
	Risk float64
	// Unsure is set when the log-odds of the positive class fall inside
	// the unsure band: the message should go to a person, or to a folder
	// a person reads.
	Unsure bool
}

// Decide returns the class i of least expected loss Σ_k ℓ(i|k)·P(k|x),
// the first on a tie, flagged Unsure when the joint log-odds of the
// d.Positive classes lie in the unsure band.
func (d Decider) Decide(r Result) Decision {
	dec := Decision{Index: -1}
	for i := range r.Classes {
		var risk float64
		for k := range r.Classes {
			risk += d.Loss.at(i, k) * at(r.Posterior, k)
		}
		if dec.Index < 0 || risk < dec.Risk {
			dec.Index, dec.Risk = i, risk
		}
	}
	if dec.Index >= 0 {
		dec.Class = r.Classes[dec.Index]
	}
	if d.UnsureLow < d.UnsureHigh && slices.ContainsFunc(d.Positive, func(c string) bool { return r.Index(c) >= 0 }) {
		lo := r.GroupLogOdds(d.Positive)
		dec.Unsure = lo >= d.UnsureLow && lo < d.UnsureHigh
	}
	return dec
}
