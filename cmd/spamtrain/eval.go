//go:build !noeval

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spamd/spamd/eval"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/internal/hugeheap"
	"github.com/spamd/spamd/nb"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/badgerstore"
)

// withEval says that this build has eval and simulate and their plotting
// libraries (lab.go: the build without them).
const withEval = true

func runEval(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("eval")
	def := eval.DefaultOptions()
	var o eval.Options = def
	var indexes, spam, ham, sets, sweeps listFlag
	fs.Var(&indexes, "index", "TREC index file: lines 'CLASS PATH' (spam, ham or another class), paths relative to it; repeated, one table per corpus")
	fs.Var(&spam, "spam", "spam sources, instead of --index (several may follow)")
	fs.Var(&ham, "ham", "ham sources, instead of --index (several may follow)")
	recursive := fs.Bool("recursive", false, "with --spam/--ham: also read subfolders")
	fs.StringVar(&o.Mode, "mode", def.Mode, "protocol: split, cv or online")
	split := fs.Float64("split", 80, "percent of the corpus, in order, on the training side")
	fs.StringVar(&o.Part, "part", def.Part, "run on all of the corpus, its train side or its test side")
	fs.IntVar(&o.Folds, "folds", def.Folds, "folds of cross-validation")
	fs.Uint64Var(&o.Seed, "seed", def.Seed, "seed of folds, draws and resampling")
	fs.StringVar(&o.Train, "train", def.Train, "online training: all, on-error or thick:M")
	fs.IntVar(&o.Bootstrap, "bootstrap", 0, "bootstrap resamples for 95% intervals (split, online)")
	fs.IntVar(&o.Workers, "workers", def.Workers, "messages parsed in parallel")
	storeDir := fs.String("store", "", "train a Badger store in this new directory instead of memory")
	fs.Var(&sets, "set", "filter setting KEY=VALUE, repeatable (see 'spamtrain settings')")
	fs.Var(&sweeps, "sweep", "vary a setting: KEY=V1,V2,... (repeatable: every combination runs)")
	by := fs.String("by", "one_minus_auc_pct", "metric that orders sweep rows, best first")
	curve := fs.String("curve", "", "learning curve at these training sizes (comma-separated, or 'auto')")
	draws := fs.Int("draws", 5, "random draws averaged per learning-curve size")
	asJSON := fs.Bool("json", false, "print one JSON document instead of tables")
	records := fs.String("records", "", "write one TSV line per tested message to this file")
	plots := fs.String("plots", "", "write ROC, score-histogram and learning-curve plots (SVG and PNG) here")
	measures := fs.Bool("measures", false, "report what each measure (continuous feature) tells on its own, trained on the train side and tested on the rest; with --plots, its class densities and the likelihood against the kernel width")
	attack := fs.String("attack", "", "split: add words to every spam tested: goodwords:N (the model's most hammy) or hamwords:N (common ham words at random)")
	fs.StringVar(&o.Attack.Out, "attack-out", "", "with --attack and --index: write the attacked corpus and its index here")
	fs.IntVar(&o.Prune.Days, "prune-days", 0, "online: prune daily, by the messages' arrival, the tokens seen at most --prune-count times and not in the last `N` days")
	fs.Uint64Var(&o.Prune.Count, "prune-count", 1, "online, with --prune-days: prune tokens seen at most this many times")
	fs.IntVar(&o.Prune.SeenDays, "prune-seen-days", 0, "online: delete daily the seen records of messages that arrived more than `N` days before")
	if err := fs.Parse(expandMulti(args, "spam", "ham")); err != nil {
		return usageError(err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	o.Split = *split
	if o.Split > 1 {
		o.Split /= 100
	}
	if *attack != "" {
		a, err := eval.ParseAttack(*attack)
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		o.Attack.Kind, o.Attack.Words = a.Kind, a.Words
	}
	if o.Attack.Out != "" && (*attack == "" || len(indexes) != 1) {
		return fmt.Errorf("%w: --attack-out needs --attack and one --index", errUsage)
	}
	if (len(indexes) == 0) == (len(spam)+len(ham) == 0) {
		return fmt.Errorf("%w: give either --index FILE or --spam PATH... --ham PATH...", errUsage)
	}
	if len(indexes) > 1 && (*storeDir != "" || *records != "" || *plots != "") {
		return fmt.Errorf("%w: --store, --records and --plots take one corpus, not %d", errUsage, len(indexes))
	}
	var mf modelFlags
	mf.sets = sets
	cfg, err := mf.config()
	if err != nil {
		return err
	}
	// An evaluation is a bulk run of a whole corpus (growForBulk).
	hugeheap.Grow(bulkHeap)
	var axes []eval.Axis
	for _, s := range sweeps {
		a, err := eval.ParseAxis(s)
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		axes = append(axes, a)
	}
	if *storeDir != "" {
		if len(axes) > 0 || o.Mode == "cv" || *curve != "" {
			return fmt.Errorf("%w: --store trains one model: it does not go with --sweep, --curve or cv mode", errUsage)
		}
		dir := *storeDir
		o.NewStore = func(ctx context.Context) (store.Store, error) {
			if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
				return nil, fmt.Errorf("--store %s is not empty: an evaluation needs a fresh store", dir)
			}
			return badgerstore.Open(ctx, dir, badgerstore.Options{Logger: e.log})
		}
	}

	if len(indexes) == 0 {
		corpus, err := eval.LoadSources(ctx, spam, ham, *recursive, o.Seed)
		if err != nil {
			return err
		}
		return evalCorpus(ctx, e, corpus, cfg, axes, o, *by, *curve, *draws, *asJSON, *records, *plots, *measures)
	}
	// Several corpora: one table each, under its index's path, or one JSON
	// document holding each corpus's under its path.
	corpora := make([]*eval.Corpus, len(indexes))
	for i, index := range indexes {
		if corpora[i], err = eval.OpenIndex(index); err != nil {
			return err
		}
	}
	docs := make(map[string]json.RawMessage)
	for i, index := range indexes {
		corpus := corpora[i]
		if len(indexes) == 1 {
			return evalCorpus(ctx, e, corpus, cfg, axes, o, *by, *curve, *draws, *asJSON, *records, *plots, *measures)
		}
		var buf bytes.Buffer
		sub := *e
		sub.stdout = &buf
		if err := evalCorpus(ctx, &sub, corpus, cfg, axes, o, *by, *curve, *draws, *asJSON, "", "", *measures); err != nil {
			return fmt.Errorf("%s: %w", index, err)
		}
		if *asJSON {
			docs[index] = json.RawMessage(buf.Bytes())
			continue
		}
		if i > 0 {
			fmt.Fprintln(e.stdout)
		}
		fmt.Fprintf(e.stdout, "== %s\n", index)
		e.stdout.Write(buf.Bytes())
	}
	if *asJSON {
		return writeJSON(e.stdout, docs)
	}
	return nil
}

// evalCorpus runs one corpus's evaluation, or its sweep, and prints it.
func evalCorpus(ctx context.Context, e *env, corpus *eval.Corpus, cfg filter.Config, axes []eval.Axis, o eval.Options,
	by, curve string, draws int, asJSON bool, records, plots string, measures bool) error {
	if measures {
		return evalMeasures(ctx, e, corpus, cfg, o, asJSON, plots)
	}
	if len(axes) > 0 {
		bar := newProgress(e, -1, "sweep")
		rows, err := eval.Sweep(ctx, corpus, cfg, axes, o, by, func(done, total int) {
			bar.ChangeMax(total)
			bar.Set(done)
		})
		bar.Finish()
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(e.stdout, rows)
		}
		printSweep(e.stdout, axes, rows, by)
		return nil
	}

	r, err := eval.Run(ctx, corpus, cfg, o)
	if err != nil {
		return err
	}
	var pts, without []eval.CurvePoint
	if curve != "" {
		sizes, err := curveSizes(curve, int(math.Round(float64(len(corpus.Messages))*o.Split)))
		if err != nil {
			return err
		}
		if pts, err = eval.LearningCurve(ctx, corpus, cfg, o, sizes, draws); err != nil {
			return err
		}
		// With measures on, the curve without them too, to compare.
		if cfg.NB.Density != nb.DensityOff {
			off := cfg
			off.NB.Density = nb.DensityOff
			if without, err = eval.LearningCurve(ctx, corpus, off, o, sizes, draws); err != nil {
				return err
			}
		}
	}
	if records != "" {
		if err := eval.WriteRecords(records, r.Records); err != nil {
			return err
		}
	}
	if plots != "" {
		title := fmt.Sprintf("spamd, %s", describe(r))
		if err := eval.PlotROC(plots, title, r.Records); err != nil {
			return err
		}
		marks := []eval.Mark{{Name: "cost threshold", Score: cfg.Threshold()}}
		if cfg.UnsureHigh > cfg.UnsureLow {
			marks = append(marks, eval.Mark{Name: "unsure from", Score: cfg.UnsureLow}, eval.Mark{Name: "spam from", Score: cfg.Required()})
		}
		if err := eval.PlotHistogram(plots, title, r.Records, marks...); err != nil {
			return err
		}
		if err := eval.PlotReliability(plots, title, r.Records); err != nil {
			return err
		}
		if pts != nil {
			if err := eval.PlotCurve(plots, "spamd", pts); err != nil {
				return err
			}
		}
		if without != nil {
			curves := []eval.Curve{{Name: "measures off", Points: without}, {Name: "measures " + cfg.NB.Density.String(), Points: pts}}
			if err := eval.PlotCurves(plots, "learning-measures", "spamd", curves); err != nil {
				return err
			}
		}
	}
	if asJSON {
		type doc struct {
			*eval.Report
			Curve   []eval.CurvePoint `json:"learning_curve,omitempty"`
			Without []eval.CurvePoint `json:"learning_curve_without_measures,omitempty"`
		}
		return writeJSON(e.stdout, doc{r, pts, without})
	}
	printReport(e.stdout, r)
	if pts != nil {
		printCurve(e.stdout, "learning curve", pts)
	}
	if without != nil {
		printCurve(e.stdout, "learning curve without measures", without)
	}
	if plots != "" {
		names := "{roc,scores,reliability,learning}"
		if without != nil {
			names = "{roc,scores,reliability,learning,learning-measures}"
		}
		fmt.Fprintf(e.stdout, "plots: %s\n", filepath.Join(plots, names+".{svg,png}"))
	}
	return nil
}

// evalMeasures reports what each measure tells on its own, and with
// plots draws their densities and likelihood curves.
func evalMeasures(ctx context.Context, e *env, corpus *eval.Corpus, cfg filter.Config, o eval.Options, asJSON bool, plots string) error {
	rs, err := eval.Measures(ctx, corpus, cfg, o)
	if err != nil {
		return err
	}
	if plots != "" {
		n := len(corpus.Messages)
		switch cut := int(math.Round(float64(n) * o.Split)); o.Part {
		case "train":
			n = cut
		case "test":
			n -= cut
		}
		title := fmt.Sprintf("%d messages", n)
		if o.Part != "all" {
			title += " (" + o.Part + " side)"
		}
		if err := eval.PlotDensities(plots, title, rs); err != nil {
			return err
		}
		if err := eval.PlotBandwidths(plots, title, rs); err != nil {
			return err
		}
	}
	if asJSON {
		return writeJSON(e.stdout, rs)
	}
	side := "the corpus"
	if o.Part != "all" {
		side = "its " + o.Part + " side"
	}
	fmt.Fprintf(e.stdout, "measures of %s, trained on the first %.0f%% and tested on the rest, each alone:\n\n", side, 100*o.Split)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "measure\tcoverage\th (levels)\t(1-AUC)% Gaussian\t(1-AUC)% Parzen\tLL/value Gaussian\tLL/value Parzen\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%.1f%%\t%.1f\t%.2f\t%.2f\t%.3f\t%.3f\t\n", r.Name, 100*r.Coverage, r.H, r.Gaussian, r.Parzen, r.GaussianLL, r.ParzenLL)
	}
	tw.Flush()
	if plots != "" {
		fmt.Fprintf(e.stdout, "plots: %s\n", filepath.Join(plots, "{densities,bandwidths}.{svg,png}"))
	}
	return nil
}

// curveSizes parses the --curve list; "auto" doubles from 25 up to the
// train side's size.
func curveSizes(s string, trainSide int) ([]int, error) {
	if s == "auto" {
		var sizes []int
		for n := 25; n < trainSide; n *= 2 {
			sizes = append(sizes, n)
		}
		return append(sizes, trainSide), nil
	}
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%w: --curve %q: want sizes like 100,500,1000 or auto", errUsage, s)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

func describe(r *eval.Report) string {
	s := r.Mode
	if r.Mode == "online" {
		s += " (train " + r.Train + ")"
	}
	if r.Part != "all" {
		s += ", " + r.Part + " side"
	}
	if r.Attack != "" {
		s += ", attack " + r.Attack
	}
	return s
}

func printReport(w io.Writer, r *eval.Report) {
	m := r.Metrics
	ham := "ham"
	if m.Classes != nil {
		ham = "not spam"
	}
	fmt.Fprintf(w, "%s: %d messages (%d spam, %d %s) tested, %d trained, %.1f s\n", describe(r), m.N, m.Spam, m.Ham, ham, r.Trained, r.Seconds)
	if r.Mode == "online" {
		fmt.Fprintf(w, "model at the end: %d tokens (at most %d on the way)", r.Tokens, r.PeakTokens)
		if r.Pruned > 0 {
			fmt.Fprintf(w, ", %d pruned on the way", r.Pruned)
		}
		fmt.Fprintln(w)
	}
	if n := len(r.AttackWords); n > 0 {
		fmt.Fprintf(w, "words added to each spam: %s", strings.Join(r.AttackWords[:min(n, 10)], " "))
		if n > 10 {
			fmt.Fprintf(w, " … (%d in all)", n)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	if m.Classes != nil {
		printClasses(w, m.Classes)
		fmt.Fprintf(w, "\nspam (%s) against the other classes:\n\n", strings.ReplaceAll(r.Settings["spam_classes"], "+", ", "))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\tdecided spam\tdecided %s\n", ham)
	fmt.Fprintf(tw, "is spam\t%d (TP)\t%d (FN)\n", m.TP, m.FN)
	fmt.Fprintf(tw, "is %s\t%d (FP)\t%d (TN)\n", ham, m.FP, m.TN)
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// row prints a metric and, where the protocol gives one, its spread,
	// scaled like the value (rates are shown in percent).
	row := func(name, val, key string) {
		if iv, ok := r.Spread[key]; ok {
			scale := 1.0
			if key == "fp_rate" || key == "fn_rate" || key == "expected_fp_rate" {
				scale = 100
			}
			if r.Mode == "cv" {
				val += fmt.Sprintf("\t(folds: %.4g ± %.2g)", scale*iv.Mean, scale*iv.SD)
			} else {
				val += fmt.Sprintf("\t(95%%: %.4g – %.4g)", scale*iv.Low, scale*iv.High)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\n", name, val)
	}
	row("(1-AUC)%", fmt.Sprintf("%.4f", m.OneMinusAUCPct), "one_minus_auc_pct")
	row("lam%", fmt.Sprintf("%.3f", m.LamPct), "lam_pct")
	row("FP rate", fmt.Sprintf("%.2f%%", 100*m.FPRate), "fp_rate")
	row("expected FP rate", fmt.Sprintf("%.2f%% (from the probabilities alone)", 100*m.ExpectedFPRate), "expected_fp_rate")
	row("FN rate", fmt.Sprintf("%.2f%%", 100*m.FNRate), "fn_rate")
	row("FN rate at FP ≤ 0.1%", fmt.Sprintf("%.2f%%", m.FNRateAtFP01Pct), "fn_rate_at_fp_0_1pct")
	row("FN rate at FP ≤ 0.01%", fmt.Sprintf("%.2f%%", m.FNRateAtFP001Pct), "")
	row("accuracy", fmt.Sprintf("%.4f", m.Accuracy), "accuracy")
	row("precision", fmt.Sprintf("%.4f", m.Precision), "")
	row("recall", fmt.Sprintf("%.4f", m.Recall), "")
	row("specificity", fmt.Sprintf("%.4f", m.Specificity), "")
	row("F1", fmt.Sprintf("%.4f", m.F1), "")
	row("unsure", fmt.Sprintf("%d (%.2f%%)", m.Unsure, 100*m.UnsureRate), "")
	row("log-likelihood", fmt.Sprintf("%.4f nats/message", m.LogLik), "")
	row("calibration error", fmt.Sprintf("%.4f (mean |observed − predicted| P(spam), 10 bins)", m.CalibrationError), "")
	tw.Flush()
}

// printClasses prints the confusion matrix of a run over more than two
// classes, rows the true class, columns the class decided (unsure or
// not), and each class's figures.
func printClasses(w io.Writer, cm *eval.ClassMetrics) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := []string{""}
	for _, c := range cm.Classes {
		head = append(head, "decided "+c)
	}
	fmt.Fprintln(tw, strings.Join(append(head, "of which unsure"), "\t"))
	for g, row := range cm.Confusion {
		cells := []string{"is " + cm.Classes[g]}
		for _, n := range row {
			cells = append(cells, strconv.Itoa(n))
		}
		fmt.Fprintln(tw, strings.Join(append(cells, strconv.Itoa(cm.Unsure[g])), "\t"))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "class\tmessages\tdecided\tprecision\trecall\tF1")
	for _, f := range cm.PerClass {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.4f\t%.4f\t%.4f\n", f.Class, f.N, f.Decided, f.Precision, f.Recall, f.F1)
	}
	tw.Flush()
	fmt.Fprintf(w, "accuracy %.4f, macro F1 %.4f\n", cm.Accuracy, cm.MacroF1)
}

func printCurve(w io.Writer, title string, pts []eval.CurvePoint) {
	fmt.Fprintf(w, "\n%s:\n", title)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\ttrain error\ttest error\t± sd\ttest (1-AUC)%\t")
	for _, p := range pts {
		fmt.Fprintf(tw, "%d\t%.4f\t%.4f\t%.4f\t%.4f\t\n", p.Size, p.TrainError, p.TestError, p.TestErrorSD, p.TestOneMinusAUCPct)
	}
	tw.Flush()
}

func printSweep(w io.Writer, axes []eval.Axis, rows []eval.Row, by string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	var head []string
	for _, a := range axes {
		head = append(head, a.Key)
	}
	head = append(head, "(1-AUC)%", "lam%", "FP%", "FN%", "FN%@FP≤0.1%", "loglik", "s")
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, r := range rows {
		var cells []string
		for _, a := range axes {
			cells = append(cells, r.Values[a.Key])
		}
		m := r.Report.Metrics
		cells = append(cells,
			fmt.Sprintf("%.4f", m.OneMinusAUCPct), fmt.Sprintf("%.3f", m.LamPct),
			fmt.Sprintf("%.2f", 100*m.FPRate), fmt.Sprintf("%.2f", 100*m.FNRate),
			fmt.Sprintf("%.2f", m.FNRateAtFP01Pct), fmt.Sprintf("%.4f", m.LogLik),
			fmt.Sprintf("%.1f", r.Report.Seconds))
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	tw.Flush()
	if len(rows) > 0 {
		keys := slices.Sorted(maps.Keys(rows[0].Values))
		var best []string
		for _, k := range keys {
			best = append(best, k+"="+rows[0].Values[k])
		}
		fmt.Fprintf(w, "\nbest by %s: %s\n", by, strings.Join(best, " "))
	}
}
