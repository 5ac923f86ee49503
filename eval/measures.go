package eval

import (
	"context"
	"math"

	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/nb"
	"github.com/spamd/spamd/tokenize"
)

// MeasureReport is what one measure tells of spam and ham on its own,
// trained on the train side of a corpus (its first Options.Split, in index
// order) and tested on the rest.
type MeasureReport struct {
	Measure tokenize.Measure `json:"-"`
	Name    string           `json:"name"`
	// Coverage is the share of the messages that have the measure.
	Coverage float64 `json:"coverage"`
	// H is the Parzen kernel width the train side's leave-one-out
	// likelihood chose, in levels.
	H float64 `json:"h_levels"`
	// Gaussian and Parzen are (1-AUC)% of the measure's log density ratio
	// alone, log p(x|spam) − log p(x|ham), ranking the test side's
	// messages that have it: 50 tells nothing, 0 is perfect.
	Gaussian float64 `json:"one_minus_auc_pct_gaussian"`
	Parzen   float64 `json:"one_minus_auc_pct_parzen"`
	// GaussianLL and ParzenLL are the test side's mean log-likelihood
	// per value of each density, in nats, the densities being of levels;
	// the larger the better the fit.
	GaussianLL float64 `json:"held_out_ll_gaussian"`
	ParzenLL   float64 `json:"held_out_ll_parzen"`
	// Curve gives the likelihoods of the widths the search tried: of the
	// train side itself, left one out, and of the test side.
	Curve []nb.BandwidthPoint `json:"curve"`
	// Train and Test are the samples of each side, by class (ham, spam).
	Train, Test []nb.Sample `json:"-"`
}

// Measures reports what each measure of cfg's tokenizer tells on its own
// on the train and test sides of c (o.Split; o.Part restricts the corpus
// first, as Run does). It needs no model of tokens: it parses the
// messages, bins each class's values, and scores the test side with the
// Gaussian and Parzen densities of the train side.
func Measures(ctx context.Context, c *Corpus, cfg filter.Config, o Options) ([]MeasureReport, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	src, err := c.source(ctx, cfg, o.Workers, false)
	if err != nil {
		return nil, err
	}
	idx := o.part(len(c.Messages))
	cut := int(math.Round(float64(len(idx)) * o.Split))
	defs := tokenize.Measures()
	type seen struct {
		spam bool
		vals [tokenize.NumMeasures]float64
	}
	msgs := make([]seen, 0, len(idx))
	err = each(ctx, o.Workers, idx, src, func(i int, p filter.Prepared) error {
		msgs = append(msgs, seen{spam: c.Messages[i].Spam, vals: p.Measures})
		return nil
	})
	if err != nil {
		return nil, err
	}
	class := func(spam bool) int {
		if spam {
			return 1
		}
		return 0
	}
	alpha := cfg.NB.MeasureAlpha
	if alpha <= 0 {
		alpha = 1
	}
	reports := make([]MeasureReport, len(defs))
	for m, def := range defs {
		var train, test [2][]int
		have := 0
		for k, msg := range msgs {
			v := msg.vals[m]
			if math.IsNaN(v) {
				continue
			}
			have++
			side := &train
			if k >= cut {
				side = &test
			}
			side[class(msg.spam)] = append(side[class(msg.spam)], def.Level(v))
		}
		r := MeasureReport{Measure: def, Name: def.Name, Coverage: float64(have) / float64(max(len(msgs), 1))}
		r.Train = []nb.Sample{nb.SampleOf(train[0]...), nb.SampleOf(train[1]...)}
		r.Test = []nb.Sample{nb.SampleOf(test[0]...), nb.SampleOf(test[1]...)}
		r.H, r.Curve = nb.ChooseBandwidth(r.Train, r.Test, def.Levels, alpha)
		for _, kind := range []nb.DensityKind{nb.DensityGaussian, nb.DensityParzen} {
			p := cfg.NB
			p.Density = kind
			d := nb.NewDensity(p, def.Levels, nb.NewKernel(r.H, def.Levels), r.Train, nil)
			var rs []Record
			ll, n := 0.0, 0
			out := make([]float64, 2)
			for c, levels := range test {
				for _, l := range levels {
					d.LogDensity(l, out)
					rs = append(rs, Record{Spam: c == 1, Score: out[1] - out[0]})
					ll += out[c]
					n++
				}
			}
			auc := 100 * (1 - AUC(rs))
			if kind == nb.DensityGaussian {
				r.Gaussian, r.GaussianLL = auc, ll/float64(max(n, 1))
			} else {
				r.Parzen, r.ParzenLL = auc, ll/float64(max(n, 1))
			}
		}
		reports[m] = r
	}
	return reports, nil
}
