package nb

import (
	"fmt"
	"math"
	"slices"
	"sort"
)

// DensityKind selects how the class-conditional density of a measure, a
// continuous feature of a message, is estimated.
type DensityKind int

const (
	// DensityOff leaves measures out of the score.
	DensityOff DensityKind = iota
	// DensityGaussian fits a normal density per class by maximum
	// likelihood from the sample's count, sum and sum of squares.
	DensityGaussian
	// DensityParzen estimates a Parzen window density per class: a
	// Gaussian kernel of width h on every training value.
	DensityParzen
)

var densityNames = [...]string{DensityOff: "off", DensityGaussian: "gaussian", DensityParzen: "parzen"}

// String returns "off", "gaussian" or "parzen".
func (k DensityKind) String() string {
	if k >= 0 && int(k) < len(densityNames) {
		return densityNames[k]
	}
	return fmt.Sprintf("DensityKind(%d)", int(k))
}

// MarshalText encodes k as its String.
func (k DensityKind) MarshalText() ([]byte, error) {
	if k < 0 || int(k) >= len(densityNames) {
		return nil, fmt.Errorf("%w: density %d", ErrInvalid, int(k))
	}
	return []byte(densityNames[k]), nil
}

// UnmarshalText decodes "off", "gaussian" or "parzen".
func (k *DensityKind) UnmarshalText(text []byte) error {
	for i, name := range densityNames {
		if string(text) == name {
			*k = DensityKind(i)
			return nil
		}
	}
	return fmt.Errorf("%w: density %q is not one of off, gaussian, parzen", ErrInvalid, text)
}

// Bin is the number of training values at one level of a measure.
type Bin struct {
	Level int
	Count float64
}

// Sample is the training sample of one measure in one class, binned: its
// values are levels of a grid (integers from 0 to the measure's number of
// levels less one) and each level has the number of values at it. A
// density of levels is one of the values up to the grid's step, which
// cancels between classes; fine levels lose nothing of what a density
// of this much data can show. N, Sum and SumSq, the Gaussian's sufficient
// statistics, are kept beside the bins, which they must agree with.
type Sample struct {
	N, Sum, SumSq float64
	// Bins lists the levels with values, ascending, each once, with a
	// positive count.
	Bins []Bin
}

// SampleOf returns the sample of the levels ls, for tests and plots.
func SampleOf(ls ...int) Sample {
	var s Sample
	sorted := slices.Sorted(slices.Values(ls))
	for _, l := range sorted {
		s.N++
		s.Sum += float64(l)
		s.SumSq += float64(l) * float64(l)
		if n := len(s.Bins); n > 0 && s.Bins[n-1].Level == l {
			s.Bins[n-1].Count++
		} else {
			s.Bins = append(s.Bins, Bin{Level: l, Count: 1})
		}
	}
	return s
}

// Value is one measure of a message as Score takes it: its log density
// under each class, from Density.Value.
type Value struct {
	// Name names the measure and Text writes its value, for Explain.
	Name, Text string
	// Weight multiplies the measure's log density in the score: a few
	// measures must neither drown the evidence of hundreds of tokens nor
	// be drowned by it, and measures of one family (say, a message's size
	// and its number of words) tell of one thing, which independent
	// evidence would count twice.
	Weight float64
	// LogDensity[c] is log p(x|c), indexed like Model.Classes. A Value
	// whose LogDensity is not as long as Classes or not finite is left
	// out.
	LogDensity []float64
}

// Defaults and bounds of the density settings.
const (
	defaultMeasureAlpha  = 1
	defaultMeasureLambda = 10
	// minWidth is the narrowest Gaussian or kernel, in levels: the grid's
	// resolution. It is also the Gaussian's variance floor, which a class
	// whose few values are all one level would otherwise make zero.
	minWidth = 1.0
	// kernelReach is how many bandwidths a kernel reaches: beyond 5h it
	// holds less than 6e-7 of its mass.
	kernelReach = 5
)

// Density estimates p(level|c) for one measure, from the samples of the
// global model's classes and, for a user, the user's.
//
// Whatever the kind, the estimate is smoothed toward the uniform density
// over the grid with Alpha pseudo-values, as token counts are with α:
//
//	p(l|c) = (N_c·f_c(l) + Alpha/Levels) / (N_c + Alpha)
//
// so that a value far from all of a class's training values has a small
// probability, not zero, and no single measure can swing a verdict
// without bound. f_c is the Gaussian N(μ_c, σ_c²) (σ_c at least one
// level), or the Parzen estimate (1/N_c) Σ_i K_h(l, l_i) with a Gaussian
// kernel of width h reflected at the grid's ends, so that values at an
// end (no links, say) keep all their mass on the grid.
//
// A user's density takes the global one as its prior, worth Lambda
// values, as a user's token estimates take the global ones: for the
// Gaussian, Lambda values drawn from the global class density join the
// user's (their moments add), for Parzen the two densities mix in
// proportion N_u,c : Lambda.
type Density struct {
	kind   DensityKind
	levels int
	alpha  float64
	lambda float64
	global []Sample
	user   []Sample
	// Parzen: the kernel at distances 0 to len-1 levels.
	kernel []float64
	// Gaussian: per class, mean and variance of the global and of the
	// user's (pooled) estimate.
	gMean, gVar []float64
	uMean, uVar []float64
}

// Kernel is a Gaussian kernel of one width on a grid, tabulated once for
// the many densities of that width.
type Kernel struct {
	h float64
	k []float64
}

// NewKernel tabulates the Gaussian kernel of width h levels (at least
// one) on a grid of levels levels.
func NewKernel(h float64, levels int) Kernel {
	return Kernel{h: max(h, minWidth), k: kernel(h, max(levels, 1))}
}

// Width returns the kernel's width in levels.
func (k Kernel) Width() float64 { return k.h }

// NewDensity returns the density of a measure on a grid of levels levels,
// of kind p.Density, estimated from the global model's samples by class
// and, unless user is nil, a user's. k is the Parzen kernel, of the width
// ChooseBandwidth chose, tabulated on the measure's grid; it is ignored
// for the Gaussian. The samples and the kernel are the caller's and must
// not change while the Density is used.
func NewDensity(p Params, levels int, k Kernel, global, user []Sample) *Density {
	s := p.settings()
	return newDensity(s.density, levels, k, s.measureAlpha, s.measureLambda, global, user)
}

// newDensity is NewDensity with its settings spelled out, alpha possibly
// zero (which only tests want: a value far from every training value
// then has no probability).
func newDensity(kind DensityKind, levels int, k Kernel, alpha, lambda float64, global, user []Sample) *Density {
	d := &Density{kind: kind, levels: max(levels, 1), alpha: alpha, lambda: lambda, global: global, user: user}
	switch d.kind {
	case DensityParzen:
		d.kernel = k.k
		if len(d.kernel) == 0 {
			d.kernel = kernel(minWidth, d.levels)
		}
	case DensityGaussian:
		k := len(global)
		d.gMean, d.gVar = make([]float64, k), make([]float64, k)
		for c := range global {
			d.gMean[c], d.gVar[c] = moments(global[c])
		}
		if user != nil {
			d.uMean, d.uVar = make([]float64, len(user)), make([]float64, len(user))
			for c := range user {
				d.uMean[c], d.uVar[c] = d.pooled(c)
			}
		}
	}
	return d
}

// moments returns the mean and the maximum-likelihood variance of s, the
// variance at least minWidth².
func moments(s Sample) (mean, variance float64) {
	n := clean(s.N)
	if n == 0 {
		return 0, 0
	}
	mean = s.Sum / n
	variance = s.SumSq/n - mean*mean
	return mean, max(variance, minWidth*minWidth)
}

// pooled returns the mean and variance of class c's user sample joined by
// Lambda values of the global Gaussian.
func (d *Density) pooled(c int) (mean, variance float64) {
	u := d.user[c]
	n := clean(u.N)
	var sum, sq float64
	if n > 0 {
		sum, sq = u.Sum, u.SumSq
	}
	w := 0.0
	if c < len(d.global) && clean(d.global[c].N) > 0 {
		w = d.lambda
		m, v := d.gMean[c], d.gVar[c]
		sum += w * m
		sq += w * (v + m*m)
	}
	if n+w == 0 {
		return 0, 0
	}
	mean = sum / (n + w)
	variance = sq/(n+w) - mean*mean
	return mean, max(variance, minWidth*minWidth)
}

// kernel returns the Gaussian kernel of width h (at least minWidth) at
// distances 0 to kernelReach·h levels, and no further than levels.
func kernel(h float64, levels int) []float64 {
	h = max(h, minWidth)
	if math.IsInf(h, 0) || math.IsNaN(h) {
		h = float64(levels)
	}
	n := min(int(math.Ceil(kernelReach*h)), levels) + 1
	k := make([]float64, n)
	for i := range k {
		z := float64(i) / h
		k[i] = math.Exp(-z*z/2) / (h * math.Sqrt(2*math.Pi))
	}
	return k
}

// Value returns the measure of a message at level l, with its log
// density under each class (0 for each when the kind is DensityOff),
// named and weighted for Score.
func (d *Density) Value(l int, name, text string, weight float64) Value {
	v := Value{Name: name, Text: text, Weight: weight, LogDensity: make([]float64, len(d.global))}
	d.LogDensity(l, v.LogDensity)
	return v
}

// LogDensity sets out[c] to log p(l|c) for every class, out being as long
// as the global samples. A level off the grid counts as its nearest end.
func (d *Density) LogDensity(l int, out []float64) {
	l = min(max(l, 0), d.levels-1)
	for c := range out {
		if d.kind == DensityOff {
			out[c] = 0
			continue
		}
		out[c] = math.Log(d.prob(c, l))
	}
}

// prob returns p(l|c), smoothed.
func (d *Density) prob(c, l int) float64 {
	uniform := 1 / float64(d.levels)
	var g Sample
	if c < len(d.global) {
		g = d.global[c]
	}
	ng := clean(g.N)
	var global float64
	switch d.kind {
	case DensityGaussian:
		f := 0.0
		if ng > 0 {
			f = normal(float64(l), d.gMean[c], d.gVar[c])
		}
		global = (ng*f + d.alpha*uniform) / (ng + d.alpha)
	default:
		global = (d.window(g, l) + d.alpha*uniform) / (ng + d.alpha)
	}
	if d.user == nil || c >= len(d.user) {
		return global
	}
	u := d.user[c]
	nu := clean(u.N)
	if nu == 0 {
		return global
	}
	if d.kind == DensityGaussian {
		w := nu
		if ng > 0 {
			w += d.lambda
		}
		f := normal(float64(l), d.uMean[c], d.uVar[c])
		return (w*f + d.alpha*uniform) / (w + d.alpha)
	}
	return (d.window(u, l) + d.lambda*global) / (nu + d.lambda)
}

func normal(x, mean, variance float64) float64 {
	z := x - mean
	return math.Exp(-z*z/(2*variance)) / math.Sqrt(2*math.Pi*variance)
}

// window returns Σ_i K_h(l, l_i) over the values of s, the kernel
// reflected at both ends of the grid: a value at level b also stands at
// −1−b and 2·levels−1−b, mirrored about the grid's edges.
func (d *Density) window(s Sample, l int) float64 {
	k := d.kernel
	w := len(k) - 1
	bins := s.Bins
	sum := 0.0
	i := sort.Search(len(bins), func(i int) bool { return bins[i].Level >= l-w })
	for ; i < len(bins) && bins[i].Level <= l+w; i++ {
		dist := bins[i].Level - l
		if dist < 0 {
			dist = -dist
		}
		sum += clean(bins[i].Count) * k[dist]
	}
	// Mirror images below level 0: distance l+b+1.
	for i := 0; i < len(bins) && l+bins[i].Level+1 <= w; i++ {
		sum += clean(bins[i].Count) * k[l+bins[i].Level+1]
	}
	// Mirror images past the last level: distance 2·levels−1−b−l.
	top := 2*d.levels - 1 - l
	for i := len(bins) - 1; i >= 0 && top-bins[i].Level <= w; i-- {
		if dist := top - bins[i].Level; dist >= 0 {
			sum += clean(bins[i].Count) * k[dist]
		}
	}
	return sum
}

// self returns what one value at level l adds to the kernel sum at l
// itself: its kernel's peak and its mirror images'.
func (d *Density) self(l int) float64 {
	k := d.kernel
	sum := k[0]
	if dist := 2*l + 1; dist < len(k) {
		sum += k[dist]
	}
	if dist := 2*d.levels - 1 - 2*l; dist >= 0 && dist < len(k) {
		sum += k[dist]
	}
	return sum
}

// BandwidthPoint is the fit of a Parzen density of one bandwidth to its
// samples: the log-likelihood of the training values themselves, which
// only grows as h shrinks, since every value sits on its own kernel; of
// each training value left out of its own density (leave-one-out), which
// peaks where h fits the data; and, when ChooseBandwidth's caller gave
// them, of held-out values.
type BandwidthPoint struct {
	H           float64 `json:"h"`
	Train       float64 `json:"train"`
	LeaveOneOut float64 `json:"leave_one_out"`
	HeldOut     float64 `json:"held_out"`
}

// Silverman returns Silverman's rule of thumb for the kernel width of a
// sample, 0.9·min(σ, IQR/1.34)·n^(−1/5), in levels, at least one level;
// where more than half the values share a level (IQR 0), σ alone.
func Silverman(s Sample) float64 {
	n := clean(s.N)
	if n < 2 {
		return minWidth
	}
	_, v := moments(s)
	sigma := math.Sqrt(v)
	if iqr := quantile(s, 0.75) - quantile(s, 0.25); iqr > 0 {
		sigma = min(sigma, iqr/1.34)
	}
	return max(minWidth, 0.9*sigma*math.Pow(n, -0.2))
}

// quantile returns the level below which a share q of s's values lie.
func quantile(s Sample, q float64) float64 {
	target := q * clean(s.N)
	acc := 0.0
	for _, b := range s.Bins {
		acc += clean(b.Count)
		if acc >= target {
			return float64(b.Level)
		}
	}
	return 0
}

// bandwidthSteps are the bandwidths ChooseBandwidth tries, as powers of
// 2^(1/4) times Silverman's rule: from an eighth of it to nearly three
// times it, each a fifth wider than the one before.
const (
	bandwidthLow  = -12
	bandwidthHigh = 6
)

// ChooseBandwidth returns the Parzen kernel width, in levels, that
// maximizes the leave-one-out log-likelihood of the samples, summed over
// the classes (each class's values under its own density; one width
// serves them all, so that a level common to two classes is not made
// likelier in one only by a narrower kernel), smoothed with alpha
// pseudo-values as Density smooths. The candidates start from
// Silverman's rule (the mean of the classes' weighted by their values)
// and go by factors of 2^(1/4) from an eighth of it to nearly three
// times it, none narrower than a level; the best of them is refined by
// the vertex of the parabola through it and its neighbours, in log h,
// when that fits better still. It returns the likelihoods of
// every candidate too, with held-out ones when test, samples by class
// like train, is given. Samples without values choose nothing: it
// returns Silverman's minimum, one level.
func ChooseBandwidth(train, test []Sample, levels int, alpha float64) (float64, []BandwidthPoint) {
	var total, h0 float64
	for _, s := range train {
		if n := clean(s.N); n > 0 {
			total += n
			h0 += n * Silverman(s)
		}
	}
	if total == 0 {
		return minWidth, nil
	}
	h0 /= total
	var pts []BandwidthPoint
	for k := bandwidthLow; k <= bandwidthHigh; k++ {
		h := max(minWidth, h0*math.Exp2(float64(k)/4))
		if n := len(pts); n > 0 && pts[n-1].H == h {
			continue
		}
		pts = append(pts, Likelihoods(train, test, levels, alpha, h))
	}
	best := 0
	for i, p := range pts {
		if p.LeaveOneOut > pts[best].LeaveOneOut {
			best = i
		}
	}
	h := pts[best].H
	if best > 0 && best < len(pts)-1 {
		// The vertex of the parabola through the best and its
		// neighbours, in log h, is nearer the peak than a grid point.
		x0, x1, x2 := math.Log(pts[best-1].H), math.Log(h), math.Log(pts[best+1].H)
		y0, y1, y2 := pts[best-1].LeaveOneOut, pts[best].LeaveOneOut, pts[best+1].LeaveOneOut
		den := (x0-x1)*(y1-y2) - (x1-x2)*(y0-y1)
		if den != 0 {
			num := (x0*x0-x1*x1)*(y1-y2) - (x1*x1-x2*x2)*(y0-y1)
			if x := num / (2 * den); x > x0 && x < x2 {
				if p := Likelihoods(train, nil, levels, alpha, math.Exp(x)); p.LeaveOneOut > y1 {
					h = p.H
				}
			}
		}
	}
	return h, pts
}

// Likelihoods returns the log-likelihoods of a Parzen density of width h
// (see BandwidthPoint), summed over the classes, smoothed with alpha
// pseudo-values over a grid of levels levels.
func Likelihoods(train, test []Sample, levels int, alpha, h float64) BandwidthPoint {
	d := &Density{kind: DensityParzen, levels: max(levels, 1), alpha: alpha, kernel: kernel(h, max(levels, 1))}
	h = max(h, minWidth)
	uniform := alpha / float64(d.levels)
	pt := BandwidthPoint{H: h}
	for c, s := range train {
		n := clean(s.N)
		if n == 0 {
			continue
		}
		for _, b := range s.Bins {
			m := clean(b.Count)
			sum := d.window(s, b.Level)
			pt.Train += m * math.Log((sum+uniform)/(n+alpha))
			// The value left out takes its kernel, mirror images
			// included, with it.
			if n-1+alpha > 0 {
				pt.LeaveOneOut += m * math.Log((max(sum-d.self(b.Level), 0)+uniform)/(n-1+alpha))
			}
		}
		if c < len(test) {
			for _, b := range test[c].Bins {
				pt.HeldOut += clean(b.Count) * math.Log((d.window(s, b.Level)+uniform)/(n+alpha))
			}
		}
	}
	return pt
}
