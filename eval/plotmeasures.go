package eval

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/spamd/spamd/nb"
)

// gridCols is the number of plots a row of a grid of measures holds.
const gridCols = 4

// saveGrid draws plots, gridCols a row, with a title above them, to
// dir/name.svg and dir/name.png.
func saveGrid(dir, name, title string, plots []*plot.Plot) error {
	return saveTiles(dir, name, title, plots, gridCols)
}

// saveTiles draws plots, cols a row, with a title above them, to
// dir/name.svg and dir/name.png.
func saveTiles(dir, name, title string, plots []*plot.Plot, gridCols int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("plot %s: %w", name, err)
	}
	rows := (len(plots) + gridCols - 1) / gridCols
	tiles := make([][]*plot.Plot, rows)
	for r := range tiles {
		tiles[r] = make([]*plot.Plot, gridCols)
		for c := range tiles[r] {
			if i := r*gridCols + c; i < len(plots) {
				tiles[r][c] = plots[i]
			}
		}
	}
	w, h := vg.Length(gridCols)*4*vg.Inch, vg.Length(rows)*3*vg.Inch+0.4*vg.Inch
	draw1 := func(c vg.CanvasSizer) {
		dc := draw.New(c)
		head := plot.New()
		head.Title.Text = title
		head.HideAxes()
		top := dc
		top.Min.Y = dc.Max.Y - 0.4*vg.Inch
		head.Draw(top)
		body := dc
		body.Max.Y = top.Min.Y
		canvases := plot.Align(tiles, draw.Tiles{Rows: rows, Cols: gridCols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
			PadTop: vg.Millimeter, PadBottom: vg.Millimeter, PadLeft: vg.Millimeter, PadRight: vg.Millimeter}, body)
		for r := range tiles {
			for c := range tiles[r] {
				if tiles[r][c] != nil {
					tiles[r][c].Draw(canvases[r][c])
				}
			}
		}
	}
	svg := vgsvg.New(w, h)
	draw1(svg)
	png := vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(96))}
	draw1(png)
	for ext, wt := range map[string]io.WriterTo{".svg": svg, ".png": png} {
		f, err := os.Create(filepath.Join(dir, name+ext))
		if err != nil {
			return fmt.Errorf("plot %s: %w", name, err)
		}
		_, werr := wt.WriteTo(f)
		if err := f.Close(); werr == nil {
			werr = err
		}
		if werr != nil {
			return fmt.Errorf("plot %s%s: %w", name, ext, werr)
		}
	}
	return nil
}

// levelRange returns the levels between which all but a thousandth of
// the samples' values at each end lie, widened a little.
func levelRange(samples []nb.Sample) (lo, hi int) {
	var all []nb.Bin
	total := 0.0
	for _, s := range samples {
		all = append(all, s.Bins...)
		total += s.N
	}
	if total == 0 {
		return 0, 1
	}
	at := func(q float64) int {
		target, acc := q*total, 0.0
		best := math.MaxInt
		// The level where the running count crosses target, over all
		// classes at once.
		counts := map[int]float64{}
		for _, b := range all {
			counts[b.Level] += b.Count
		}
		levels := make([]int, 0, len(counts))
		for l := range counts {
			levels = append(levels, l)
		}
		slices.Sort(levels)
		for _, l := range levels {
			acc += counts[l]
			if acc >= target {
				best = l
				break
			}
		}
		if best == math.MaxInt && len(levels) > 0 {
			best = levels[len(levels)-1]
		}
		return best
	}
	lo, hi = at(0.001), at(0.999)
	pad := max((hi-lo)/20, 2)
	return lo - pad, hi + pad
}

// PlotDensities draws, for each measure of rs, the train side's values of
// ham and spam as histograms (normalized to densities) and each class's
// Gaussian and Parzen density over them, on the measure's scale, to
// dir/densities.{svg,png}.
func PlotDensities(dir, title string, rs []MeasureReport) error {
	var plots []*plot.Plot
	for _, r := range rs {
		def := r.Measure
		lo, hi := levelRange(r.Train)
		x := func(l float64) float64 { return def.Lo + l*def.Step }
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s (h = %.3g)", r.Name, r.H*def.Step)
		p.X.Label.Text = scaleLabel(r.Name, def.Scale)
		p.Y.Label.Text = "density"
		for c, col := range []color.Color{hamColor, spamColor} {
			var vals, weights []float64
			for _, b := range r.Train[c].Bins {
				if b.Level >= lo && b.Level <= hi {
					vals = append(vals, x(float64(b.Level)))
					weights = append(weights, b.Count)
				}
			}
			if len(vals) == 0 {
				continue
			}
			xy := make(plotter.XYs, len(vals))
			for i := range vals {
				xy[i] = plotter.XY{X: vals[i], Y: weights[i]}
			}
			bins := min(40, max(hi-lo, 1))
			h, err := plotter.NewHistogram(xy, bins)
			if err != nil {
				return err
			}
			h.Normalize(1)
			h.FillColor = withAlpha(col, 60)
			h.LineStyle.Width = 0
			p.Add(h)
		}
		for _, kind := range []nb.DensityKind{nb.DensityGaussian, nb.DensityParzen} {
			params := nb.Params{Density: kind}
			d := nb.NewDensity(params, def.Levels, nb.NewKernel(r.H, def.Levels), r.Train, nil)
			out := make([]float64, 2)
			lines := [2]plotter.XYs{}
			for l := max(lo, 0); l <= min(hi, def.Levels-1); l++ {
				d.LogDensity(l, out)
				for c := range lines {
					lines[c] = append(lines[c], plotter.XY{X: x(float64(l)), Y: math.Exp(out[c]) / def.Step})
				}
			}
			for c, col := range []color.Color{hamColor, spamColor} {
				if r.Train[c].N == 0 {
					continue
				}
				ln, err := plotter.NewLine(lines[c])
				if err != nil {
					return err
				}
				ln.Color = col
				ln.Width = vg.Points(1.2)
				if kind == nb.DensityGaussian {
					ln.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
				}
				p.Add(ln)
				if len(plots) == 0 {
					p.Legend.Add(fmt.Sprintf("%s %s", []string{"ham", "spam"}[c], kind), ln)
				}
			}
		}
		p.Legend.Top = true
		p.Legend.TextStyle.Font.Size = vg.Points(7)
		plots = append(plots, p)
	}
	return saveGrid(dir, "densities", title+": class densities of each measure over its training values (dashed Gaussian, solid Parzen)", plots)
}

// scaleLabel names the x axis of a measure on its scale.
func scaleLabel(name, scale string) string {
	switch scale {
	case "log2":
		return "log2(1 + " + name + ")"
	case "signed-log2":
		return "±log2(1 + |" + name + "|)"
	}
	return name
}

// PlotBandwidths draws, for each measure of rs, the log-likelihood per
// value of its Parzen densities against the kernel width: of the train
// side's values themselves, of each left out of its own density, and of
// the test side's, with the width chosen marked, to
// dir/bandwidths.{svg,png}.
func PlotBandwidths(dir, title string, rs []MeasureReport) error {
	var plots []*plot.Plot
	for _, r := range rs {
		if len(r.Curve) == 0 {
			continue
		}
		def := r.Measure
		nTrain := r.Train[0].N + r.Train[1].N
		nTest := r.Test[0].N + r.Test[1].N
		p := plot.New()
		p.Title.Text = r.Name
		p.X.Label.Text = "kernel width h, " + scaleUnit(def.Scale, r.Name)
		p.Y.Label.Text = "log-likelihood per value"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		var train, loo, held plotter.XYs
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, pt := range r.Curve {
			h := pt.H * def.Step
			// A density of levels is one of the scale's units times the
			// step: per value, the log-likelihood of the scale's units is
			// that of levels less log(step).
			shift := -math.Log(def.Step)
			train = append(train, plotter.XY{X: h, Y: pt.Train/nTrain + shift})
			loo = append(loo, plotter.XY{X: h, Y: pt.LeaveOneOut/nTrain + shift})
			if nTest > 0 {
				held = append(held, plotter.XY{X: h, Y: pt.HeldOut/nTest + shift})
			}
		}
		for _, s := range []plotter.XYs{train, loo, held} {
			for _, pt := range s {
				lo, hi = min(lo, pt.Y), max(hi, pt.Y)
			}
		}
		for _, s := range []struct {
			name string
			xy   plotter.XYs
			c    color.Color
		}{{"training", train, color.Black}, {"leave-one-out", loo, spamColor}, {"held-out", held, hamColor}} {
			if len(s.xy) == 0 {
				continue
			}
			ln, pts, err := plotter.NewLinePoints(s.xy)
			if err != nil {
				return err
			}
			ln.Color, pts.Color = s.c, s.c
			pts.Radius = vg.Points(1.5)
			p.Add(ln, pts)
			if len(plots) == 0 {
				p.Legend.Add(s.name, ln)
			}
		}
		mark, err := plotter.NewLine(plotter.XYs{{X: r.H * def.Step, Y: lo}, {X: r.H * def.Step, Y: hi}})
		if err != nil {
			return err
		}
		mark.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
		p.Add(mark)
		if len(plots) == 0 {
			p.Legend.Add("h chosen", mark)
		}
		p.Legend.Top, p.Legend.Left = true, false
		p.Legend.TextStyle.Font.Size = vg.Points(7)
		// The smallest widths overfit so much that their held-out and
		// leave-one-out likelihoods fall off the chart: keep the chart
		// about the peak.
		p.Y.Min = max(lo, hi-3)
		p.Y.Max = hi + 0.1
		plots = append(plots, p)
	}
	return saveGrid(dir, "bandwidths", title+": Parzen log-likelihood against the kernel width (training rises as h shrinks; held-out and leave-one-out peak)", plots)
}

// scaleUnit names the unit of a measure's scale.
func scaleUnit(scale, name string) string {
	switch scale {
	case "log2", "signed-log2":
		return "in log2 units of " + name
	}
	return "in units of " + name
}
