package reportsim

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Labeled is one simulation's outcome for a user, with a label for the plot
// legend, such as "λ=1000".
type Labeled struct {
	Label   string
	Outcome Outcome
}

// palette colours the runs of a plot in order.
var palette = []color.Color{
	color.RGBA{R: 30, G: 90, B: 200, A: 255},
	color.RGBA{R: 20, G: 150, B: 70, A: 255},
	color.RGBA{R: 150, G: 60, B: 170, A: 255},
	color.RGBA{R: 230, G: 140, B: 20, A: 255},
}

// Plot draws one user's learning curves to dir/name.{svg,png}: the error
// rate per window of the global model alone (from the first run) and of
// the user's model with reports, one line per run.
func Plot(dir, name, title string, runs []Labeled) error {
	if len(runs) == 0 {
		return fmt.Errorf("plot %s: no runs", name)
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "messages received"
	p.Y.Label.Text = fmt.Sprintf("errors per window of %d messages (%%)", windowOf(runs[0].Outcome))
	p.Y.Min = 0
	add := func(label string, pts plotter.XYs, c color.Color, dashed bool) error {
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		l.Color, s.Color = c, c
		l.Width = vg.Points(1.5)
		s.Shape = draw.CircleGlyph{}
		s.Radius = vg.Points(2)
		if dashed {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(l, s)
		p.Legend.Add(label, l, s)
		return nil
	}
	global := make(plotter.XYs, len(runs[0].Outcome.Curve))
	for i, pt := range runs[0].Outcome.Curve {
		global[i] = plotter.XY{X: float64(pt.End), Y: pt.Global}
	}
	if err := add("global model alone", global, color.RGBA{R: 200, G: 40, B: 40, A: 255}, true); err != nil {
		return err
	}
	for k, r := range runs {
		pts := make(plotter.XYs, len(r.Outcome.Curve))
		for i, pt := range r.Outcome.Curve {
			pts[i] = plotter.XY{X: float64(pt.End), Y: pt.Reported}
		}
		if err := add("with reports, "+r.Label, pts, palette[k%len(palette)], false); err != nil {
			return err
		}
	}
	// Room above the curves for the legend.
	top := 0.0
	for _, r := range runs {
		for _, pt := range r.Outcome.Curve {
			top = max(top, pt.Global, pt.Reported)
		}
	}
	p.Y.Max = 1.6 * top
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("plot %s: %w", name, err)
	}
	for _, ext := range []string{".svg", ".png"} {
		if err := p.Save(6*vg.Inch, 4*vg.Inch, filepath.Join(dir, name+ext)); err != nil {
			return fmt.Errorf("plot %s%s: %w", name, ext, err)
		}
	}
	return nil
}

// windowOf returns the window of o's curve: the end of its first point.
func windowOf(o Outcome) int {
	if len(o.Curve) == 0 {
		return 0
	}
	return o.Curve[0].End
}
