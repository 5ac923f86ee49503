package eval

import (
	"cmp"
	"maps"
	"math"
	"slices"
)

// Record is the outcome of testing one message.
type Record struct {
	// Pos is the message's position in the input (0-based index order).
	Pos int
	// Spam is the gold label as spam or not: true for a class that
	// counts as spam.
	Spam bool
	// Score is the filter's log-odds of spam; higher is spammier.
	Score float64
	// Verdict is the filter's label: the class decided, or "unsure".
	Verdict string
	// Flagged is set when the verdict is a class that counts as spam:
	// the message is called spam (an unsure one is not).
	Flagged bool
	// Gold is the message's class and Class the class decided, unsure
	// or not; "" when the record does not say (then Spam and Flagged
	// alone count).
	Gold, Class string
}

// gold returns the message's class: Gold, or spam or ham as Spam says.
func (r Record) gold() string {
	if r.Gold != "" {
		return r.Gold
	}
	return classOf(r.Spam)
}

// Metrics summarizes a set of Records. Rates are fractions in [0, 1];
// fields ending in Pct are percentages.
type Metrics struct {
	N    int `json:"n"`
	Spam int `json:"spam"`
	Ham  int `json:"ham"`
	// The confusion matrix at the filter's decision; an unsure verdict
	// counts as not spam.
	TP int `json:"tp"`
	FP int `json:"fp"`
	TN int `json:"tn"`
	FN int `json:"fn"`
	// Unsure is the number of unsure verdicts.
	Unsure     int     `json:"unsure"`
	UnsureRate float64 `json:"unsure_rate"`

	Accuracy    float64 `json:"accuracy"`
	Precision   float64 `json:"precision"`
	Recall      float64 `json:"recall"`
	Specificity float64 `json:"specificity"`
	F1          float64 `json:"f1"`
	FPRate      float64 `json:"fp_rate"`
	FNRate      float64 `json:"fn_rate"`
	// ExpectedFPRate is the false positive rate the scores themselves
	// predict, without the labels: the sum of P(ham|x) over the messages
	// decided spam, over its sum over all messages. With calibrated
	// probabilities it is close to FPRate, and it is what a running
	// filter can tell of its own mail.
	ExpectedFPRate float64 `json:"expected_fp_rate"`

	// OneMinusAUCPct is (1 − area under the ROC curve) in percent, tied
	// scores counting half.
	OneMinusAUCPct float64 `json:"one_minus_auc_pct"`
	// LamPct is the logistic average misclassification of the TREC spam
	// track, in percent.
	LamPct float64 `json:"lam_pct"`
	// FNRateAtFP01Pct and FNRateAtFP001Pct are the FN rates at the lowest
	// threshold whose FP rate is at most 0.1% and 0.01%.
	FNRateAtFP01Pct  float64 `json:"fn_rate_at_fp_0_1pct"`
	FNRateAtFP001Pct float64 `json:"fn_rate_at_fp_0_01pct"`
	// LogLik is the mean held-out log-likelihood of the gold labels,
	// log P(gold|x) in nats per message, from the scores.
	LogLik float64 `json:"log_likelihood"`
	// CalibrationError is the expected calibration error of the spam
	// probabilities the scores stand for, over 10 bins (see Reliability).
	CalibrationError float64 `json:"calibration_error"`
	// Classes holds the figures per class when the messages are of more
	// than two classes; the figures above are then of the classes that
	// count as spam against all the others.
	Classes *ClassMetrics `json:"classes,omitempty"`
}

// ClassMetrics are the figures of a run over more than two classes, at
// the filter's decision: the class of least expected loss, unsure or
// not.
type ClassMetrics struct {
	// Classes are the classes, sorted; the matrix is indexed like them.
	Classes []string `json:"classes"`
	// Confusion[g][d] counts the messages of class Classes[g] decided as
	// Classes[d].
	Confusion [][]int `json:"confusion"`
	// Unsure[g] counts the messages of class Classes[g] whose verdict was
	// unsure.
	Unsure []int `json:"unsure"`
	// PerClass holds each class's figures, in the order of Classes.
	PerClass []ClassFigures `json:"per_class"`
	// Accuracy is the share of messages decided as their class, and
	// MacroF1 the mean of the classes' F1.
	Accuracy float64 `json:"accuracy"`
	MacroF1  float64 `json:"macro_f1"`
}

// ClassFigures are one class's figures, that class against the others.
type ClassFigures struct {
	Class string `json:"class"`
	// N counts the messages of the class, Decided those decided as it.
	N       int `json:"n"`
	Decided int `json:"decided"`
	// Precision is the share of those decided as the class that are of
	// it, Recall the share of those of the class decided as it, F1 their
	// harmonic mean.
	Precision float64 `json:"precision"`
	Recall    float64 `json:"recall"`
	F1        float64 `json:"f1"`
}

// classMetrics returns the per-class figures of rs, nil unless their
// gold and decided classes number more than two.
func classMetrics(rs []Record) *ClassMetrics {
	seen := map[string]bool{}
	for _, r := range rs {
		if r.Gold != "" && r.Class != "" {
			seen[r.Gold], seen[r.Class] = true, true
		}
	}
	if len(seen) <= 2 {
		return nil
	}
	cm := &ClassMetrics{Classes: slices.Sorted(maps.Keys(seen))}
	k := len(cm.Classes)
	cm.Confusion = make([][]int, k)
	for i := range cm.Confusion {
		cm.Confusion[i] = make([]int, k)
	}
	cm.Unsure = make([]int, k)
	n, right := 0, 0
	for _, r := range rs {
		if r.Gold == "" || r.Class == "" {
			continue
		}
		g, d := slices.Index(cm.Classes, r.Gold), slices.Index(cm.Classes, r.Class)
		cm.Confusion[g][d]++
		if r.Verdict == "unsure" {
			cm.Unsure[g]++
		}
		n++
		if g == d {
			right++
		}
	}
	cm.Accuracy = ratio(right, n)
	for c, name := range cm.Classes {
		f := ClassFigures{Class: name}
		for o := range k {
			f.N += cm.Confusion[c][o]
			f.Decided += cm.Confusion[o][c]
		}
		f.Precision = ratio(cm.Confusion[c][c], f.Decided)
		f.Recall = ratio(cm.Confusion[c][c], f.N)
		if f.Precision+f.Recall > 0 {
			f.F1 = 2 * f.Precision * f.Recall / (f.Precision + f.Recall)
		}
		cm.MacroF1 += f.F1 / float64(k)
		cm.PerClass = append(cm.PerClass, f)
	}
	return cm
}

// Compute returns the metrics of rs.
func Compute(rs []Record) Metrics {
	var m Metrics
	m.N = len(rs)
	var ll, ham, hamFlagged float64
	for _, r := range rs {
		isSpam := r.Flagged
		pHam := math.Exp(logSigmoid(-r.Score))
		ham += pHam
		if isSpam {
			hamFlagged += pHam
		}
		switch {
		case r.Spam && isSpam:
			m.TP++
		case r.Spam:
			m.FN++
		case isSpam:
			m.FP++
		default:
			m.TN++
		}
		if r.Verdict == "unsure" {
			m.Unsure++
		}
		if r.Spam {
			m.Spam++
			ll += logSigmoid(r.Score)
		} else {
			m.Ham++
			ll += logSigmoid(-r.Score)
		}
	}
	m.Accuracy = ratio(m.TP+m.TN, m.N)
	m.Precision = ratio(m.TP, m.TP+m.FP)
	m.Recall = ratio(m.TP, m.Spam)
	m.Specificity = ratio(m.TN, m.Ham)
	if m.Precision+m.Recall > 0 {
		m.F1 = 2 * m.Precision * m.Recall / (m.Precision + m.Recall)
	}
	m.FPRate = ratio(m.FP, m.Ham)
	m.FNRate = ratio(m.FN, m.Spam)
	if ham > 0 {
		m.ExpectedFPRate = hamFlagged / ham
	}
	m.UnsureRate = ratio(m.Unsure, m.N)
	m.OneMinusAUCPct = 100 * (1 - AUC(rs))
	m.LamPct = 100 * Lam(m.FP, m.Ham, m.FN, m.Spam)
	m.FNRateAtFP01Pct = 100 * FNRateAtFP(rs, 0.001)
	m.FNRateAtFP001Pct = 100 * FNRateAtFP(rs, 0.0001)
	if m.N > 0 {
		m.LogLik = ll / float64(m.N)
	}
	m.CalibrationError = CalibrationError(Reliability(rs, calibrationBins))
	m.Classes = classMetrics(rs)
	return m
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// logSigmoid returns log(1/(1+e^−x)) without overflow.
func logSigmoid(x float64) float64 {
	if x >= 0 {
		return -math.Log1p(math.Exp(-x))
	}
	return x - math.Log1p(math.Exp(x))
}

// AUC returns the area under the ROC curve of rs's scores, spam being the
// positive class: the probability that a random spam scores above a random
// ham, ties counting half (the Mann–Whitney statistic with mid-ranks). It
// is 0.5 when either class is empty.
func AUC(rs []Record) float64 {
	s := sortedByScore(rs)
	var nspam, nham float64
	var rankSum float64 // sum of the mid-ranks of the spams, ascending
	for i := 0; i < len(s); {
		j := i
		var spams float64
		for j < len(s) && s[j].Score == s[i].Score {
			if s[j].Spam {
				spams++
			}
			j++
		}
		mid := float64(i+j+1) / 2 // ranks i+1..j
		rankSum += spams * mid
		nspam += spams
		nham += float64(j-i) - spams
		i = j
	}
	if nspam == 0 || nham == 0 {
		return 0.5
	}
	return (rankSum - nspam*(nspam+1)/2) / (nspam * nham)
}

// sortedByScore returns a copy of rs sorted by ascending score.
func sortedByScore(rs []Record) []Record {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b Record) int { return cmp.Compare(a.Score, b.Score) })
	return s
}

// Lam is the logistic average misclassification rate of the TREC spam
// track: invlogit((logit(fpr) + logit(fnr))/2), with each rate smoothed as
// (errors+0.5)/(n+1) so that 0% and 100% stay finite.
func Lam(fp, ham, fn, spam int) float64 {
	fpr := (float64(fp) + 0.5) / (float64(ham) + 1)
	fnr := (float64(fn) + 0.5) / (float64(spam) + 1)
	logit := func(p float64) float64 { return math.Log(p / (1 - p)) }
	x := (logit(fpr) + logit(fnr)) / 2
	return 1 / (1 + math.Exp(-x))
}

// FNRateAtFP returns the spam miss rate at the lowest score threshold whose
// ham false-positive rate is at most target: a message is called spam when
// its score is at or above the threshold. Tied scores are never split, so
// a ham tied with spams takes them all below the threshold with it. It is
// 0 when there is no spam, and 1 when no threshold flags any spam within
// the target.
func FNRateAtFP(rs []Record, target float64) float64 {
	s := sortedByScore(rs)
	var nspam, nham int
	for _, r := range s {
		if r.Spam {
			nspam++
		} else {
			nham++
		}
	}
	if nspam == 0 {
		return 0
	}
	// Walk thresholds from the top down, one distinct score at a time,
	// keeping the last one whose FP rate is within the target.
	caught, fps, best := 0, 0, 0
	for i := len(s) - 1; i >= 0; {
		j := i
		for j >= 0 && s[j].Score == s[i].Score {
			if s[j].Spam {
				caught++
			} else {
				fps++
			}
			j--
		}
		if nham > 0 && float64(fps)/float64(nham) > target {
			break
		}
		best = caught
		i = j
	}
	return float64(nspam-best) / float64(nspam)
}

// ROC returns the points of the ROC curve of rs, from (0,0) to (1,1): the
// FP rate and TP rate at each distinct score used as a threshold.
func ROC(rs []Record) (fpr, tpr []float64) {
	s := sortedByScore(rs)
	var nspam, nham float64
	for _, r := range s {
		if r.Spam {
			nspam++
		} else {
			nham++
		}
	}
	fpr, tpr = []float64{0}, []float64{0}
	var tp, fp float64
	for i := len(s) - 1; i >= 0; {
		j := i
		for j >= 0 && s[j].Score == s[i].Score {
			if s[j].Spam {
				tp++
			} else {
				fp++
			}
			j--
		}
		fpr = append(fpr, safeDiv(fp, nham))
		tpr = append(tpr, safeDiv(tp, nspam))
		i = j
	}
	return fpr, tpr
}

func safeDiv(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
