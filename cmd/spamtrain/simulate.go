//go:build !noeval

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spamd/spamd/eval"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/mailbox"
	"github.com/spamd/spamd/reportsim"
)

// runSimulate measures per-user models fed by reports on a labelled
// corpus (package reportsim): a global model trained on some folders of
// the index, simulated users each receiving other folders and reporting
// every error they see, for each λ and λ' given.
func runSimulate(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("simulate")
	var mf modelFlags
	mf.register(fs, false)
	index := fs.String("index", "", "index file: one \"spam|ham PATH\" line per message, paths relative to it (required)")
	global := fs.String("global", "easy-ham-1,spam-1", "folders (first path element in the index) the global model is trained on")
	var users listFlag
	fs.Var(&users, "user", "NAME=FOLDER,FOLDER: a simulated user and the folders they receive; a folder several users name is dealt out in turn (default alice=easy-ham-2,spam-2 and bob=hard-ham-1,spam-2)")
	lambdas := fs.String("lambda", "100,1000,10000", "values of λ (tokens the global p(w|c) is worth) to run")
	priors := fs.String("lambda-prior", "1,10,100", "values of λ' (messages the global P(c) is worth) to run")
	window := fs.Int("window", 100, "messages per point of the learning curves")
	plots := fs.String("plots", "", "directory to draw each user's learning curves in (NAME.png and NAME.svg)")
	if err := fs.Parse(args); err != nil {
		return usageError(err)
	}
	if *index == "" || fs.NArg() > 0 {
		return fmt.Errorf("%w: give the corpus with --index FILE", errUsage)
	}
	if len(users) == 0 {
		users = listFlag{"alice=easy-ham-2,spam-2", "bob=hard-ham-1,spam-2"}
	}
	ls, err := floats("--lambda", *lambdas)
	if err != nil {
		return err
	}
	lps, err := floats("--lambda-prior", *priors)
	if err != nil {
		return err
	}
	entries, err := mailbox.ReadIndex(*index)
	if err != nil {
		return err
	}
	plan, err := simulationPlan(*index, entries, *global, users, *window)
	if err != nil {
		return err
	}
	c, err := eval.LoadIndex(ctx, *index, mf.workers)
	if err != nil {
		return err
	}
	msgs := make([]reportsim.Message, len(c.Messages))
	for i, m := range c.Messages {
		// Users report spam and ham.
		if l := m.Label(); l != filter.Spam && l != filter.Ham {
			return fmt.Errorf("%s: %s: class %q: simulate replays reports of spam and ham only", *index, m.Path, l)
		}
		msgs[i] = reportsim.Message{Raw: m.Raw, Spam: m.Spam}
	}
	base, err := mf.config()
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "global model: %d messages of %s; users:", len(plan.Global), *global)
	for _, u := range plan.Users {
		fmt.Fprintf(e.stdout, " %s %d messages;", u.Name, len(u.Messages))
	}
	fmt.Fprintln(e.stdout)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "λ\tλ'\tuser\tmessages\tglobal err%\twith reports err%\treports\tglobal FP/FN\treports FP/FN\t2nd half global%\t2nd half reports%\t")
	type run struct {
		lambda, prior float64
		outs          []reportsim.Outcome
		mean          float64
	}
	var runs []run
	for _, l := range ls {
		for _, lp := range lps {
			cfg := base
			cfg.NB.Lambda, cfg.NB.LambdaPrior = l, lp
			outs, err := reportsim.Run(ctx, msgs, cfg, plan, mf.workers)
			if err != nil {
				return err
			}
			r := run{lambda: l, prior: lp, outs: outs}
			for _, o := range outs {
				r.mean += reportsim.Rate(o.Reported, o.Messages) / float64(len(outs))
				half := o.Messages - o.Messages/2
				fmt.Fprintf(tw, "%g\t%g\t%s\t%d\t%.2f\t%.2f\t%d\t%d/%d\t%d/%d\t%.2f\t%.2f\t\n", l, lp, o.User, o.Messages,
					reportsim.Rate(o.Global, o.Messages), reportsim.Rate(o.Reported, o.Messages), o.Reported.Total(),
					o.Global.FP, o.Global.FN, o.Reported.FP, o.Reported.FN,
					reportsim.Rate(o.LastHalfGlobal, half), reportsim.Rate(o.LastHalfReported, half))
			}
			runs = append(runs, r)
		}
	}
	tw.Flush()
	best := runs[0]
	for _, r := range runs[1:] {
		if r.mean < best.mean {
			best = r
		}
	}
	fmt.Fprintf(e.stdout, "lowest mean error with reports: λ=%g λ'=%g (%.2f%%)\n", best.lambda, best.prior, best.mean)
	for i, u := range plan.Users {
		fmt.Fprintf(e.stdout, "learning curve of %s (error %% per %d messages), λ=%g λ'=%g:\n  global: ", u.Name, *window, best.lambda, best.prior)
		o := best.outs[i]
		for _, p := range o.Curve {
			fmt.Fprintf(e.stdout, " %.0f", p.Global)
		}
		fmt.Fprint(e.stdout, "\n  reports:")
		for _, p := range o.Curve {
			fmt.Fprintf(e.stdout, " %.0f", p.Reported)
		}
		fmt.Fprintln(e.stdout)
	}
	if *plots == "" {
		return nil
	}
	for i, u := range plan.Users {
		var lr []reportsim.Labeled
		for _, r := range runs {
			if r.prior == best.prior {
				lr = append(lr, reportsim.Labeled{Label: fmt.Sprintf("λ=%g", r.lambda), Outcome: r.outs[i]})
			}
		}
		title := fmt.Sprintf("%s (%s), λ'=%g: errors as they report", u.Name, strings.Join(userFolders(users[i]), " + "), best.prior)
		if err := reportsim.Plot(*plots, u.Name, title, lr); err != nil {
			return err
		}
	}
	fmt.Fprintf(e.stdout, "plots in %s\n", *plots)
	return nil
}

// floats parses a comma-separated list of positive numbers.
func floats(flagName, s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(v > 0) {
			return nil, fmt.Errorf("%w: %s: %q is not a positive number", errUsage, flagName, f)
		}
		out = append(out, v)
	}
	return out, nil
}

// userFolders returns the folders of a --user value.
func userFolders(spec string) []string {
	_, folders, _ := strings.Cut(spec, "=")
	return strings.Split(folders, ",")
}

// simulationPlan assigns the index's messages, by folder, to the global
// model and to the users, in index order. A folder several users name is
// dealt out among them in turn.
func simulationPlan(index string, entries []mailbox.Entry, global string, users []string, window int) (reportsim.Plan, error) {
	root := filepath.Dir(index)
	folderOf := func(e mailbox.Entry) string {
		rel, err := filepath.Rel(root, e.Path)
		if err != nil {
			rel = e.Path
		}
		return strings.Split(filepath.ToSlash(rel), "/")[0]
	}
	plan := reportsim.Plan{Window: window}
	globalSet := map[string]bool{}
	for _, f := range strings.Split(global, ",") {
		globalSet[f] = true
	}
	takers := map[string][]int{} // folder → users taking it
	for i, spec := range users {
		name, _, ok := strings.Cut(spec, "=")
		if !ok || name == "" {
			return plan, fmt.Errorf("%w: --user %q: want NAME=FOLDER,FOLDER", errUsage, spec)
		}
		plan.Users = append(plan.Users, reportsim.User{Name: name})
		for _, f := range userFolders(spec) {
			if globalSet[f] {
				return plan, fmt.Errorf("%w: folder %s is both the global model's and %s's", errUsage, f, name)
			}
			takers[f] = append(takers[f], i)
		}
	}
	dealt := map[string]int{}
	for i, e := range entries {
		f := folderOf(e)
		switch {
		case globalSet[f]:
			plan.Global = append(plan.Global, i)
		case len(takers[f]) > 0:
			u := takers[f][dealt[f]%len(takers[f])]
			dealt[f]++
			plan.Users[u].Messages = append(plan.Users[u].Messages, i)
		}
	}
	if len(plan.Global) == 0 {
		return plan, fmt.Errorf("%w: no message of the index is in the global folders %s", errUsage, global)
	}
	for _, u := range plan.Users {
		if len(u.Messages) == 0 {
			return plan, fmt.Errorf("%w: user %s receives no message of the index", errUsage, u.Name)
		}
	}
	return plan, nil
}
