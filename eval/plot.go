package eval

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

var (
	spamColor = color.RGBA{R: 200, G: 40, B: 40, A: 255}
	hamColor  = color.RGBA{R: 30, G: 90, B: 200, A: 255}
)

// savePlot writes p to dir as name.svg and name.png.
func savePlot(p *plot.Plot, dir, name string) error {
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

// PlotROC draws the ROC curve of rs with the FP rate on a log scale, where
// a mail filter operates, to dir/roc.{svg,png}.
func PlotROC(dir, title string, rs []Record) error {
	fpr, tpr := ROC(rs)
	m := Compute(rs)
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s — (1-AUC)%% %.3f", title, m.OneMinusAUCPct)
	p.X.Label.Text = "false positive rate (ham flagged as spam)"
	p.Y.Label.Text = "true positive rate (spam caught)"
	// A log axis cannot show 0: FP rates below one ham are drawn at half a
	// ham, which is where the curve starts on this scale.
	floor := 0.5 / math.Max(1, float64(m.Ham))
	pts := make(plotter.XYs, 0, len(fpr))
	for i := range fpr {
		pts = append(pts, plotter.XY{X: math.Max(fpr[i], floor), Y: tpr[i]})
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Color = spamColor
	l.Width = vg.Points(1.5)
	p.Add(l, plotter.NewGrid())
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.X.Min, p.X.Max = floor, 1
	// The interesting part of a good filter's curve lies near the top:
	// start the axis a little below where the curve leaves the floor.
	p.Y.Min, p.Y.Max = math.Max(0, math.Min(0.9, leftY(pts, floor))-0.02), 1
	return savePlot(p, dir, "roc")
}

// PlotReliability draws the reliability diagram of rs to
// dir/reliability.{svg,png}: for each tenth of predicted spam probability,
// the share of its messages that is spam, against the diagonal a
// calibrated filter follows. Each point is labelled with its number of
// messages, since the middle bins of a confident filter hold few.
func PlotReliability(dir, title string, rs []Record) error {
	bins := Reliability(rs, calibrationBins)
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s — reliability (calibration error %.3f)", title, CalibrationError(bins))
	p.X.Label.Text = "predicted P(spam)"
	p.Y.Label.Text = "observed share of spam"
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
	diag, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 1}})
	if err != nil {
		return err
	}
	diag.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	var pts plotter.XYs
	var labels []string
	for _, b := range bins {
		if b.N > 0 {
			pts = append(pts, plotter.XY{X: b.Predicted, Y: b.Observed})
			labels = append(labels, fmt.Sprint(b.N))
		}
	}
	p.Add(diag, plotter.NewGrid())
	p.Legend.Add("calibrated", diag)
	if len(pts) > 0 {
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		l.Color, s.Color = spamColor, spamColor
		p.Add(l, s)
		p.Legend.Add("spamd", l, s)
		lb, err := plotter.NewLabels(plotter.XYLabels{XYs: pts, Labels: labels})
		if err != nil {
			return err
		}
		p.Add(lb)
	}
	p.Legend.Top, p.Legend.Left = true, true
	return savePlot(p, dir, "reliability")
}

// leftY returns the true positive rate where the curve leaves the FP-rate
// floor: the highest point drawn at the floor.
func leftY(pts plotter.XYs, floor float64) float64 {
	y := 0.0
	for _, p := range pts {
		if p.X <= floor {
			y = max(y, p.Y)
		}
	}
	return y
}

// Mark is a named score drawn across a histogram, such as a threshold.
type Mark struct {
	Name  string
	Score float64
}

// PlotHistogram draws the distribution of scores per class to
// dir/scores.{svg,png}, with a dashed line at each mark.
func PlotHistogram(dir, title string, rs []Record, marks ...Mark) error {
	var spam, ham plotter.Values
	for _, r := range rs {
		s := math.Max(-60, math.Min(60, r.Score)) // keep outliers on the chart
		if r.Spam {
			spam = append(spam, s)
		} else {
			ham = append(ham, s)
		}
	}
	p := plot.New()
	p.Title.Text = title + " — scores by class"
	p.X.Label.Text = "spam log-odds (clipped to ±60)"
	p.Y.Label.Text = "messages"
	for _, set := range []struct {
		name string
		v    plotter.Values
		c    color.Color
	}{{"ham", ham, hamColor}, {"spam", spam, spamColor}} {
		if len(set.v) == 0 {
			continue
		}
		h, err := plotter.NewHist(set.v, 60)
		if err != nil {
			return err
		}
		h.FillColor = withAlpha(set.c, 110)
		h.LineStyle.Color = set.c
		p.Add(h)
		p.Legend.Add(set.name, h)
	}
	for i, m := range marks {
		t, err := plotter.NewLine(plotter.XYs{{X: m.Score, Y: 0}, {X: m.Score, Y: float64(len(rs)) / 8}})
		if err != nil {
			return err
		}
		// Dashes of different lengths tell the marks apart in black and white.
		t.Dashes = []vg.Length{vg.Points(float64(4 + 4*i)), vg.Points(3)}
		p.Add(t)
		p.Legend.Add(m.Name, t)
	}
	p.Legend.Top = true
	return savePlot(p, dir, "scores")
}

func withAlpha(c color.Color, a uint8) color.Color {
	r, g, b, _ := c.RGBA()
	return color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: a}
}

// PlotCurve draws a learning curve to dir/learning.{svg,png}.
func PlotCurve(dir, title string, pts []CurvePoint) error {
	p := plot.New()
	p.Title.Text = title + " — learning curve"
	p.X.Label.Text = "training messages"
	p.Y.Label.Text = "error rate"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	train, test := make(plotter.XYs, len(pts)), make(plotter.XYs, len(pts))
	errs := make(plotter.YErrors, len(pts))
	for i, pt := range pts {
		train[i] = plotter.XY{X: float64(pt.Size), Y: pt.TrainError}
		test[i] = plotter.XY{X: float64(pt.Size), Y: pt.TestError}
		errs[i] = struct{ Low, High float64 }{pt.TestErrorSD, pt.TestErrorSD}
	}
	if err := plotutil.AddLinePoints(p, "training error", train, "test error", test); err != nil {
		return err
	}
	eb, err := plotter.NewYErrorBars(struct {
		plotter.XYer
		plotter.YErrorer
	}{test, errs})
	if err != nil {
		return err
	}
	p.Add(eb, plotter.NewGrid())
	p.Legend.Top = true
	return savePlot(p, dir, "learning")
}

// Curve is a learning curve with a name, for PlotCurves.
type Curve struct {
	Name   string
	Points []CurvePoint
}

// PlotCurves draws several learning curves side by side to
// dir/name.{svg,png}: on the left each one's test error at the decision,
// with its spread across draws, and its training error, dashed; on the
// right each one's test (1-AUC)%, on a log scale, where a filter that
// errs little still shows how well it ranks.
func PlotCurves(dir, name, title string, curves []Curve) error {
	errs := plot.New()
	errs.Title.Text = "error rate at the decision"
	errs.X.Label.Text = "training messages"
	errs.Y.Label.Text = "error rate"
	auc := plot.New()
	auc.Title.Text = "test (1-AUC)%"
	auc.X.Label.Text = "training messages"
	auc.Y.Label.Text = "(1-AUC)%"
	auc.Y.Scale = plot.LogScale{}
	auc.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	for _, p := range []*plot.Plot{errs, auc} {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
	}
	colors := []color.Color{hamColor, spamColor, color.Black}
	for i, c := range curves {
		col := colors[i%len(colors)]
		train, test := make(plotter.XYs, len(c.Points)), make(plotter.XYs, len(c.Points))
		sd := make(plotter.YErrors, len(c.Points))
		var ranks plotter.XYs
		for k, pt := range c.Points {
			train[k] = plotter.XY{X: float64(pt.Size), Y: pt.TrainError}
			test[k] = plotter.XY{X: float64(pt.Size), Y: pt.TestError}
			sd[k] = struct{ Low, High float64 }{pt.TestErrorSD, pt.TestErrorSD}
			// A log axis cannot show a perfect ranking: it is drawn at
			// a thousandth of a percent.
			ranks = append(ranks, plotter.XY{X: float64(pt.Size), Y: max(pt.TestOneMinusAUCPct, 1e-3)})
		}
		tl, tp, err := plotter.NewLinePoints(test)
		if err != nil {
			return err
		}
		tl.Color, tp.Color = col, col
		rl, err := plotter.NewLine(train)
		if err != nil {
			return err
		}
		rl.Color = col
		rl.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		eb, err := plotter.NewYErrorBars(struct {
			plotter.XYer
			plotter.YErrorer
		}{test, sd})
		if err != nil {
			return err
		}
		eb.Color = col
		errs.Add(tl, tp, rl, eb)
		errs.Legend.Add(c.Name+", test", tl, tp)
		errs.Legend.Add(c.Name+", training", rl)
		al, ap, err := plotter.NewLinePoints(ranks)
		if err != nil {
			return err
		}
		al.Color, ap.Color = col, col
		auc.Add(al, ap)
		auc.Legend.Add(c.Name, al, ap)
	}
	return saveTiles(dir, name, title+" — learning curves", []*plot.Plot{errs, auc}, 2)
}
