package filter

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/spamd/spamd/nb"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/tokenize"
)

// measures is what scoring the measures of a message needs beside the
// store's samples: their definitions, the global samples as nb takes
// them (converted once per version of the store's), and the Parzen
// kernels of the widths chosen on them.
type measures struct {
	defs []tokenize.Measure

	mu     sync.Mutex // one conversion or choice of widths at a time
	global atomic.Pointer[globalSamples]
	widths atomic.Pointer[widths]
}

// globalSamples are the global model's samples as nb takes them, by
// measure and configured class, and the store's samples they were made
// of, by identity.
type globalSamples struct {
	from    store.Samples // the store's
	idx     []int         // the class map they were converted with
	samples [][]nb.Sample
}

// widths are the Parzen kernels of each measure and the number of values
// they were chosen on.
type widths struct {
	n       [tokenize.NumMeasures]float64
	kernels [tokenize.NumMeasures]nb.Kernel
}

// rechoose is how far the number of values may move, as a ratio, before
// a measure's kernel width is chosen again: the best width changes as
// n^(-1/5), 2% for a tenth more values.
const rechoose = 1.1

func newMeasures() *measures {
	return &measures{defs: tokenize.Measures()}
}

// levels returns the values of the measures tokenize took, as a store
// keeps them: the level of each measure the message has.
func levels(ms [tokenize.NumMeasures]float64, defs []tokenize.Measure) []store.Value {
	var vs []store.Value
	for i, v := range ms {
		if !math.IsNaN(v) {
			vs = append(vs, store.Value{Measure: uint8(i), Level: uint16(defs[i].Level(v))})
		}
	}
	return vs
}

// convert returns samples, of the store's class indices, as nb takes
// them: by measure and configured class (idx maps one to the other).
// Where prev, converted from prevFrom with the same idx, has a sample
// the store has not changed since (a store shares the samples it did not
// change), that one is taken rather than converted again.
func convert(samples store.Samples, idx []int, prevFrom store.Samples, prev [][]nb.Sample) [][]nb.Sample {
	out := make([][]nb.Sample, len(samples))
	for m, byClass := range samples {
		out[m] = make([]nb.Sample, len(idx))
		for i, j := range idx {
			if j < 0 || j >= len(byClass) {
				continue
			}
			s := byClass[j]
			if m < len(prev) && m < len(prevFrom) && j < len(prevFrom[m]) && same(s, prevFrom[m][j]) {
				out[m][i] = prev[m][i]
				continue
			}
			bins := make([]nb.Bin, len(s.Bins))
			for k, b := range s.Bins {
				bins[k] = nb.Bin{Level: int(b.Level), Count: float64(b.Count)}
			}
			out[m][i] = nb.Sample{N: float64(s.N), Sum: float64(s.Sum), SumSq: float64(s.SumSq), Bins: bins}
		}
	}
	return out
}

// same reports whether a and b are one sample of a store: the same
// moments over the same bins.
func same(a, b store.Sample) bool {
	return a.N == b.N && a.Sum == b.Sum && a.SumSq == b.SumSq && len(a.Bins) == len(b.Bins) &&
		(len(a.Bins) == 0 || &a.Bins[0] == &b.Bins[0])
}

// globalOf returns the global samples as nb takes them, converting them
// when the store's changed since the last call.
func (ms *measures) globalOf(samples store.Samples, idx []int) [][]nb.Sample {
	g := ms.global.Load()
	if g != nil && slices.Equal(g.idx, idx) {
		if len(samples) == len(g.from) && (len(samples) == 0 || &samples[0] == &g.from[0]) {
			return g.samples
		}
	} else {
		g = &globalSamples{}
	}
	next := &globalSamples{from: samples, idx: idx, samples: convert(samples, idx, g.from, g.samples)}
	ms.global.Store(next)
	return next.samples
}

// kernel returns the Parzen kernel of measure m, whose global samples by
// class are global, choosing its width again when the number of values
// moved by more than rechoose since it was chosen. While one caller
// chooses, the others score with the kernel before.
func (ms *measures) kernel(m int, global []nb.Sample, alpha float64) nb.Kernel {
	n := 0.0
	for _, s := range global {
		n += s.N
	}
	w := ms.widths.Load()
	if w != nil && w.n[m] > 0 && n <= w.n[m]*rechoose && n >= w.n[m]/rechoose {
		return w.kernels[m]
	}
	if n == 0 {
		return nb.Kernel{}
	}
	if !ms.mu.TryLock() {
		if w != nil {
			return w.kernels[m]
		}
		ms.mu.Lock()
	}
	defer ms.mu.Unlock()
	// Another caller may have chosen meanwhile.
	if w = ms.widths.Load(); w != nil && w.n[m] > 0 && n <= w.n[m]*rechoose && n >= w.n[m]/rechoose {
		return w.kernels[m]
	}
	next := &widths{}
	if w != nil {
		*next = *w
	}
	levels := ms.defs[m].Levels
	h, _ := nb.ChooseBandwidth(global, nil, levels, alpha)
	next.n[m], next.kernels[m] = n, nb.NewKernel(h, levels)
	ms.widths.Store(next)
	return next.kernels[m]
}

// values returns the measures of p as nb scores them for a model whose
// global samples are gt's and whose user's, when user is set, are ut's,
// and whose classes are those of scope: each measure the message has and
// the configuration weighs, with its log density under each class. It
// returns nil when measures are off.
func (f *Filter) values(p *Prepared, gt, ut store.Totals, user bool, scope []int) []nb.Value {
	params := f.cfg.NB
	if params.Density == nb.DensityOff || len(p.Values) == 0 {
		return nil
	}
	global := f.meas.globalOf(gt.Samples, f.classMap(gt, scope))
	var own [][]nb.Sample
	if user {
		own = convert(ut.Samples, f.classMap(ut, scope), nil, nil)
	}
	alpha := params.MeasureAlpha
	if alpha <= 0 {
		alpha = 1
	}
	k := len(scope)
	vs := make([]nb.Value, 0, len(p.Values))
	logs := make([]float64, k*len(p.Values))
	for _, v := range p.Values {
		m := int(v.Measure)
		if m >= len(f.meas.defs) || f.cfg.MeasureWeights[m] == 0 {
			continue
		}
		def := f.meas.defs[m]
		g := make([]nb.Sample, k)
		if m < len(global) {
			g = global[m]
		}
		var u []nb.Sample
		if user && m < len(own) {
			u = own[m]
		}
		var kern nb.Kernel
		if params.Density == nb.DensityParzen {
			if hasValues(g) {
				kern = f.meas.kernel(m, g, alpha)
			} else if hasValues(u) {
				// No global values to choose on: the user's own, of
				// which there are few, and which are not kept.
				h, _ := nb.ChooseBandwidth(u, nil, def.Levels, alpha)
				kern = nb.NewKernel(h, def.Levels)
			}
		}
		d := nb.NewDensity(params, def.Levels, kern, g, u)
		val := nb.Value{Name: def.Name, Text: def.Text(p.Measures[m]), Weight: f.cfg.MeasureWeights[m], LogDensity: logs[:k:k]}
		logs = logs[k:]
		d.LogDensity(int(v.Level), val.LogDensity)
		vs = append(vs, val)
	}
	return vs
}

// hasValues reports whether any of samples has values.
func hasValues(samples []nb.Sample) bool {
	for _, s := range samples {
		if s.N > 0 {
			return true
		}
	}
	return false
}

// Bandwidths returns, by measure, the Parzen kernel width in levels the
// filter scores with and the number of global values it was chosen on;
// 0 for a measure not chosen yet.
func (f *Filter) Bandwidths() (h, n [tokenize.NumMeasures]float64) {
	if w := f.meas.widths.Load(); w != nil {
		for m := range w.kernels {
			if w.n[m] > 0 {
				h[m], n[m] = w.kernels[m].Width(), w.n[m]
			}
		}
	}
	return h, n
}

// Samples returns user's samples by measure and configured class, as nb
// takes them, for plots and diagnostics.
func (f *Filter) Samples(ctx context.Context, user string) ([][]nb.Sample, error) {
	t, err := f.st.Totals(ctx, user)
	if err != nil {
		return nil, err
	}
	return convert(t.Samples, f.classMap(t, f.all), nil, nil), nil
}
