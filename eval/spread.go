package eval

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Interval describes the spread of a metric: the mean and standard
// deviation across folds, or a bootstrap 95% interval [Low, High].
type Interval struct {
	Mean float64 `json:"mean"`
	SD   float64 `json:"sd,omitempty"`
	Low  float64 `json:"low,omitempty"`
	High float64 `json:"high,omitempty"`
}

// spreadMetrics are the metrics whose spread is reported.
var spreadMetrics = []struct {
	name string
	get  func(Metrics) float64
}{
	{"one_minus_auc_pct", func(m Metrics) float64 { return m.OneMinusAUCPct }},
	{"lam_pct", func(m Metrics) float64 { return m.LamPct }},
	{"fp_rate", func(m Metrics) float64 { return m.FPRate }},
	{"fn_rate", func(m Metrics) float64 { return m.FNRate }},
	{"fn_rate_at_fp_0_1pct", func(m Metrics) float64 { return m.FNRateAtFP01Pct }},
	{"accuracy", func(m Metrics) float64 { return m.Accuracy }},
}

// spreadOf returns the mean and sample standard deviation of each metric
// across folds.
func spreadOf(folds []Metrics) map[string]Interval {
	out := make(map[string]Interval, len(spreadMetrics))
	for _, sm := range spreadMetrics {
		var sum, sq float64
		for _, f := range folds {
			sum += sm.get(f)
		}
		mean := sum / float64(len(folds))
		for _, f := range folds {
			d := sm.get(f) - mean
			sq += d * d
		}
		iv := Interval{Mean: mean}
		if len(folds) > 1 {
			iv.SD = math.Sqrt(sq / float64(len(folds)-1))
		}
		out[sm.name] = iv
	}
	return out
}

// bootstrap resamples rs with replacement n times and returns each
// metric's mean and percentile 95% interval over the resamples.
func bootstrap(rs []Record, n int, seed uint64) map[string]Interval {
	r := rand.New(rand.NewPCG(seed, 0xb007))
	vals := make([][]float64, len(spreadMetrics))
	sample := make([]Record, len(rs))
	for range n {
		for i := range sample {
			sample[i] = rs[r.IntN(len(rs))]
		}
		m := Compute(sample)
		for j, sm := range spreadMetrics {
			vals[j] = append(vals[j], sm.get(m))
		}
	}
	out := make(map[string]Interval, len(spreadMetrics))
	for j, sm := range spreadMetrics {
		v := vals[j]
		slices.Sort(v)
		var sum float64
		for _, x := range v {
			sum += x
		}
		out[sm.name] = Interval{
			Mean: sum / float64(len(v)),
			Low:  v[int(0.025*float64(len(v)-1))],
			High: v[int(math.Ceil(0.975*float64(len(v)-1)))],
		}
	}
	return out
}
