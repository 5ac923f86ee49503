package eval

import "math"

// calibrationBins is the number of bins of Metrics.CalibrationError and of
// the reliability plot.
const calibrationBins = 10

// Bin is one bin of a reliability diagram: the messages whose predicted
// spam probability fell in [Lo, Hi).
type Bin struct {
	Lo, Hi float64
	// N is the number of messages in the bin.
	N int
	// Predicted is their mean predicted probability of spam.
	Predicted float64
	// Observed is the share of them that is spam.
	Observed float64
}

// Reliability sorts records into n equal bins of the spam probability their
// log-odds stand for, 1/(1+e^−score), the last bin closed at 1. A
// calibrated filter's bins lie on the diagonal, Observed = Predicted; naive
// Bayes, which counts correlated tokens as independent evidence, puts
// nearly every message in the first or last bin whatever its odds.
func Reliability(rs []Record, n int) []Bin {
	n = max(n, 1)
	bins := make([]Bin, n)
	for i := range bins {
		bins[i].Lo, bins[i].Hi = float64(i)/float64(n), float64(i+1)/float64(n)
	}
	for _, r := range rs {
		p := 1 / (1 + math.Exp(-r.Score))
		i := min(int(p*float64(n)), n-1)
		b := &bins[i]
		b.N++
		b.Predicted += p
		if r.Spam {
			b.Observed++
		}
	}
	for i := range bins {
		if b := &bins[i]; b.N > 0 {
			b.Predicted /= float64(b.N)
			b.Observed /= float64(b.N)
		}
	}
	return bins
}

// CalibrationError is the expected calibration error of bins: the mean
// over messages of |Observed − Predicted| of their bin.
func CalibrationError(bins []Bin) float64 {
	var sum float64
	var n int
	for _, b := range bins {
		sum += float64(b.N) * math.Abs(b.Observed-b.Predicted)
		n += b.N
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}
