package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/nb"
)

// classification is the JSON form of one verdict.
type classification struct {
	Path        string   `json:"path"`
	Verdict     string   `json:"verdict"`
	Probability float64  `json:"probability"`
	Score       float64  `json:"score"`
	Used        int      `json:"used"`
	TrainedAs   string   `json:"trained_as,omitempty"`
	TowardSpam  []weight `json:"toward_spam,omitempty"`
	TowardHam   []weight `json:"toward_ham,omitempty"`
	Problems    []string `json:"problems,omitempty"`
	Error       string   `json:"error,omitempty"`
}

// weight is one feature's share of the score.
type weight struct {
	Token  string  `json:"token"`
	Count  float64 `json:"count"`
	Weight float64 `json:"weight"`
}

func weights(cs []nb.Contribution) []weight {
	ws := make([]weight, len(cs))
	for i, c := range cs {
		ws[i] = weight{Token: c.Name, Count: c.Count, Weight: c.Weight}
	}
	return ws
}

func runClassify(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("classify", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var mf modelFlags
	mf.register(fs, true)
	asJSON := fs.Bool("json", false, "print one JSON object per message")
	verbose := fs.Bool("v", false, "also list the features that weighed most toward each side")
	top := fs.Int("top", 10, "features listed toward each side with -v")
	recursive := fs.Bool("recursive", false, "also read Maildir++ subfolders and subdirectories")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: name the messages to classify: PATH... or -", errUsage)
	}
	f, st, err := mf.open(ctx, e)
	if err != nil {
		return err
	}
	defer st.Close()

	explain := 0
	if *verbose {
		explain = max(1, *top)
	}
	var sources []source
	for _, p := range fs.Args() {
		sources = append(sources, source{path: p})
	}
	failed := 0
	in, walkErr := walkSources(ctx, e, sources, *recursive, func(path string, err error) {
		fmt.Fprintf(e.stderr, "%s: %v\n", path, err)
	})
	err = prepareAll(ctx, f, mf.workers, explain > 0, in, func(it item) error {
		c := classification{Path: it.msg.Path}
		if it.err != nil {
			failed++
			fmt.Fprintf(e.stderr, "%s: %v\n", it.msg.Path, it.err)
			if !*asJSON {
				return nil
			}
			c.Error = it.err.Error()
			return writeJSON(e.stdout, c)
		}
		v, err := f.ClassifyPrepared(ctx, mf.user, it.p, explain)
		if err != nil {
			return fmt.Errorf("%s: %w", it.msg.Path, err)
		}
		c.Verdict, c.Probability, c.Score, c.Used = v.Label(), v.Probability, v.Score, v.Used
		c.TrainedAs, c.Problems = v.TrainedAs, v.Problems
		if explain > 0 {
			c.TowardSpam = weights(v.Toward[filter.Spam])
			c.TowardHam = weights(v.Toward[filter.Ham])
		}
		if *asJSON {
			return writeJSON(e.stdout, c)
		}
		writeText(e.stdout, c)
		return nil
	})
	if werr := walkErr(); err == nil {
		err = werr
	}
	if err == nil && failed > 0 {
		err = fmt.Errorf("%d messages could not be classified (see errors above)", failed)
	}
	return err
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// writeText prints a classification as one line: path, verdict,
// probability and score, then with -v the weightiest features indented.
func writeText(w io.Writer, c classification) {
	fmt.Fprintf(w, "%s\t%s\t%.6f\t%+.3f\n", c.Path, c.Verdict, c.Probability, c.Score)
	for _, side := range []struct {
		name string
		ws   []weight
	}{{"spam", c.TowardSpam}, {"ham", c.TowardHam}} {
		if len(side.ws) == 0 {
			continue
		}
		parts := make([]string, len(side.ws))
		for i, x := range side.ws {
			parts[i] = fmt.Sprintf("%s(%+.2f)", x.Token, x.Weight)
		}
		fmt.Fprintf(w, "\ttoward %s: %s\n", side.name, strings.Join(parts, " "))
	}
}
