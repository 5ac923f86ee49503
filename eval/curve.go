package eval

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/spamd/spamd/filter"
)

// CurvePoint is the learning curve at one training-set size, averaged over
// several random draws of the training messages.
type CurvePoint struct {
	// Size is the number of training messages.
	Size int `json:"size"`
	// TrainError and TestError are the error rates (FP+FN)/N at the
	// filter's decision on the training messages themselves and on the
	// held-out test side.
	TrainError float64 `json:"train_error"`
	TestError  float64 `json:"test_error"`
	// TestErrorSD is the standard deviation of TestError across draws.
	TestErrorSD float64 `json:"test_error_sd"`
	// TestOneMinusAUCPct is the test side's (1-AUC)%.
	TestOneMinusAUCPct float64 `json:"test_one_minus_auc_pct"`
}

// LearningCurve trains on random subsets of the train side (the first
// o.Split of c, in index order) of each size in sizes, draws times with
// different seeds, and measures the error on those messages and on the
// test side.
func LearningCurve(ctx context.Context, c *Corpus, cfg filter.Config, o Options, sizes []int, draws int) ([]CurvePoint, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	src, err := c.source(ctx, cfg, o.Workers, true)
	if err != nil {
		return nil, err
	}
	o.Part = "train"
	trainSide := o.part(len(c.Messages))
	o.Part = "test"
	testSide := o.part(len(c.Messages))
	draws = max(draws, 1)
	var pts []CurvePoint
	for _, n := range sizes {
		if n <= 0 || n > len(trainSide) {
			return nil, fmt.Errorf("%w: learning-curve size %d: want 1 to %d", ErrOptions, n, len(trainSide))
		}
		pt := CurvePoint{Size: n}
		var errs []float64
		for d := range draws {
			r := rand.New(rand.NewPCG(o.Seed+uint64(d), 0xc0de))
			pick := slices.Clone(trainSide)
			r.Shuffle(len(pick), func(i, j int) { pick[i], pick[j] = pick[j], pick[i] })
			pick = pick[:n]
			slices.Sort(pick)
			f, err := o.newFilter(ctx, cfg)
			if err != nil {
				return nil, err
			}
			if err := trainAll(ctx, f, c, src, o.Workers, pick); err != nil {
				return nil, err
			}
			trainRecs, err := testAll(ctx, f, c, src, o.Workers, pick)
			if err != nil {
				return nil, err
			}
			testRecs, err := testAll(ctx, f, c, src, o.Workers, testSide)
			f.Store().Close()
			if err != nil {
				return nil, err
			}
			tm, sm := Compute(trainRecs), Compute(testRecs)
			pt.TrainError += 1 - tm.Accuracy
			errs = append(errs, 1-sm.Accuracy)
			pt.TestOneMinusAUCPct += sm.OneMinusAUCPct
		}
		k := float64(draws)
		pt.TrainError /= k
		pt.TestOneMinusAUCPct /= k
		for _, e := range errs {
			pt.TestError += e
		}
		pt.TestError /= k
		for _, e := range errs {
			pt.TestErrorSD += (e - pt.TestError) * (e - pt.TestError)
		}
		if draws > 1 {
			pt.TestErrorSD = math.Sqrt(pt.TestErrorSD / (k - 1))
		} else {
			pt.TestErrorSD = 0
		}
		pts = append(pts, pt)
	}
	return pts, nil
}
