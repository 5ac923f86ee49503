package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/nb"
	"golang.org/x/term"
)

// classification is the JSON form of one verdict.
type classification struct {
	Path    string `json:"path"`
	Verdict string `json:"verdict"`
	// Class is the class decided, the better guess when unsure.
	Class       string  `json:"class,omitempty"`
	Probability float64 `json:"probability"`
	Score       float64 `json:"score"`
	// Posterior is each class's posterior probability.
	Posterior map[string]float64 `json:"posterior,omitempty"`
	Used      int                `json:"used"`
	TrainedAs string             `json:"trained_as,omitempty"`
	// TowardSpam lists the features that weighed most toward the spam
	// class, TowardHam those toward its rival, ham or, with more than two
	// classes, TowardOther.
	TowardSpam  []weight `json:"toward_spam,omitempty"`
	TowardHam   []weight `json:"toward_ham,omitempty"`
	TowardOther string   `json:"toward_other,omitempty"`
	// Measures are the measures that weighed most, toward spam.
	Measures []measure `json:"measures,omitempty"`
	Problems []string  `json:"problems,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// otherThanHam returns the rival class the features toward which a
// classification lists besides spam's, "" for ham.
func otherThanHam(class string) string {
	if class == filter.Ham {
		return ""
	}
	return class
}

// weight is one feature's share of the score, in nats of log-odds (the
// score's own unit): the features toward a side, and the prior, add up
// to the score.
type weight struct {
	Token  string  `json:"token"`
	Count  float64 `json:"count"`
	Weight float64 `json:"weight"`
}

// measure is one measure's share of the score.
type measure struct {
	Name     string  `json:"name"`
	Value    string  `json:"value"`
	LogRatio float64 `json:"log_ratio"`
	Weight   float64 `json:"weight"`
	text     string  // as the text output writes it
}

func measures(ms []nb.MeasureContribution) []measure {
	var out []measure
	for _, m := range ms {
		out = append(out, measure{Name: m.Name, Value: m.Text, LogRatio: m.LogRatio, Weight: m.Weight, text: m.String()})
	}
	return out
}

func weights(cs []nb.Contribution) []weight {
	ws := make([]weight, len(cs))
	for i, c := range cs {
		ws[i] = weight{Token: c.Name, Count: c.Count, Weight: c.Weight}
	}
	return ws
}

// classifyArgs are the parsed arguments of classify.
type classifyArgs struct {
	mf        modelFlags
	sources   []source
	recursive bool
	asJSON    bool
	fields    []string // the fields of a line a message, nil for the text or JSON
	explain   int      // features listed toward each side, 0 for none
}

// lineFields are the fields --fields may name, as its usage lists them.
var lineFields = []string{"path", "verdict", "class", "probability", "score", "used", "trained_as"}

// parseFields parses the comma-separated list of --fields.
func parseFields(list string) ([]string, error) {
	var fields []string
	for f := range strings.SplitSeq(list, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(lineFields, f) {
			return nil, fmt.Errorf("%w: --fields: no field %q; the fields are %s", errUsage, f, strings.Join(lineFields, ", "))
		}
		fields = append(fields, f)
	}
	return fields, nil
}

func parseClassifyArgs(e *env, args []string) (*classifyArgs, error) {
	fs := e.flagSet("classify")
	a := &classifyArgs{}
	a.mf.register(fs, true)
	fs.BoolVar(&a.asJSON, "json", false, "print one JSON object per message")
	fields := fs.String("fields", "", "print one line per message of the fields LIST names, comma-separated, among "+strings.Join(lineFields, ", ")+": tab-separated, numbers unrounded, as a script reads them")
	verbose := fs.Bool("v", false, "also list the features that weighed most toward each side, each with its share of the score in nats of log-odds")
	top := fs.Int("top", 10, "features listed toward each side with -v")
	fs.BoolVar(&a.recursive, "recursive", false, "also read Maildir++ subfolders and subdirectories")
	filesFrom := fs.String("files-from", "", "also classify the paths listed in FILE, one a line ('-' for standard input)")
	if err := fs.Parse(args); err != nil {
		return nil, usageError(err)
	}
	if fs.NArg() == 0 && *filesFrom == "" {
		return nil, fmt.Errorf("%w: name the messages to classify: PATH... or -, or --files-from FILE", errUsage)
	}
	if *verbose {
		a.explain = max(1, *top)
	}
	if *fields != "" {
		if a.asJSON || *verbose {
			return nil, fmt.Errorf("%w: --fields prints neither JSON nor the features of -v", errUsage)
		}
		var err error
		if a.fields, err = parseFields(*fields); err != nil {
			return nil, err
		}
	}
	for _, p := range fs.Args() {
		if p == "-" && *filesFrom == "-" {
			return nil, fmt.Errorf("%w: standard input cannot hold both a message (-) and the list of --files-from -", errUsage)
		}
		a.sources = append(a.sources, source{path: p})
	}
	if *filesFrom != "" {
		paths, err := readPathList(e, *filesFrom)
		if err != nil {
			return nil, fmt.Errorf("--files-from: %w", err)
		}
		for _, p := range paths {
			a.sources = append(a.sources, source{path: p})
		}
	}
	return a, nil
}

// readPathList reads the paths listed in name, one a line, or on standard
// input for "-". A list of thousands of paths goes to one process, where
// xargs would split it into several, each opening the store and reading
// its model anew. Empty lines are skipped; a path is the whole line, as
// find prints it, spaces and all.
func readPathList(e *env, name string) ([]string, error) {
	var r io.Reader = e.stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	var paths []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if p := strings.TrimSuffix(sc.Text(), "\r"); p != "" {
			paths = append(paths, p)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return paths, nil
}

// printer prints classifications in order and counts the messages that
// could not be classified.
type printer struct {
	e *env
	// out buffers the verdicts for e.stdout unless that is a terminal,
	// as C's stdio does: a write a verdict cost a system call, and into
	// a pipe it woke the reader for each line.
	out       *bufio.Writer
	flushEach bool
	asJSON    bool
	fields    []string
	line      []byte     // a line of fields, reused
	mu        sync.Mutex // the walk reports unreadable files from its own goroutine
	failed    int
}

func newPrinter(e *env, a *classifyArgs) *printer {
	return &printer{e: e, asJSON: a.asJSON, fields: a.fields, out: bufio.NewWriterSize(e.stdout, 64<<10), flushEach: isTerminal(e.stdout)}
}

// unreadable reports a file or source the walk could not read.
func (p *printer) unreadable(path string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failed++
	fmt.Fprintf(p.e.stderr, "%s: %v\n", path, err)
}

// fail reports a message that could not be classified.
func (p *printer) fail(path, why string) error {
	p.mu.Lock()
	p.failed++
	p.mu.Unlock()
	fmt.Fprintf(p.e.stderr, "%s: %s\n", path, why)
	if p.fields == nil && !p.asJSON {
		return nil
	}
	c := classification{Path: path, Error: why}
	if p.fields != nil {
		// A line still, so that lines and messages stay in step.
		c.Verdict = "error"
	}
	return p.print(c)
}

func (p *printer) print(c classification) error {
	switch {
	case p.fields != nil:
		p.line = appendFields(p.line[:0], c, p.fields)
		if _, err := p.out.Write(p.line); err != nil {
			return err
		}
	case p.asJSON:
		if err := writeJSON(p.out, c); err != nil {
			return err
		}
	default:
		if err := writeText(p.out, c); err != nil {
			return err
		}
	}
	if p.flushEach {
		return p.out.Flush()
	}
	return nil
}

// end writes out the verdicts buffered and returns the error a classify
// run ends with.
func (p *printer) end(runErr, walkErr error) error {
	flushErr := p.out.Flush()
	switch {
	case runErr != nil:
		return runErr
	case walkErr != nil:
		return walkErr
	case flushErr != nil:
		return fmt.Errorf("write the verdicts: %w", flushErr)
	case p.failed > 0:
		return fmt.Errorf("%d messages or sources could not be read or classified (see errors above)", p.failed)
	}
	return nil
}

func runClassify(ctx context.Context, e *env, args []string) error {
	a, err := parseClassifyArgs(e, args)
	if err != nil {
		return err
	}
	a.mf.readsOnly = true
	if growForBulk(a.sources) {
		deferFirstCollection()
	}
	f, st, err := a.mf.open(ctx, e)
	if err != nil {
		return err
	}
	// The models are not warmed into the cache first, as the daemon's
	// are: a warm reads all of a model's rows where a few messages need
	// those of their tokens. A model that a first training sealed is read
	// from its file without the cache; the store warms another that fits
	// in the cache once the reads have cost what the warm does
	// (badgerstore.Options.WarmByNeed).
	defer st.Close()

	pr := newPrinter(e, a)
	in, walkErr := walkSources(ctx, e, a.sources, a.recursive, pr.unreadable)
	// Each worker classifies the messages it prepares, so that scoring
	// runs on every core too; the verdicts are printed in input order.
	type judged struct {
		it  item
		v   filter.Verdict
		err error // of classifying; it.err is of reading or parsing
	}
	// Only JSON and the trained_as field print the class a message was
	// trained as, which costs a read of its seen record, and the
	// message's digest, which nothing else printed needs.
	opts := filter.ClassifyOptions{Explain: a.explain, TrainedAs: a.asJSON || slices.Contains(a.fields, "trained_as")}
	po := filter.PrepareOptions{Names: a.explain > 0, Unidentified: !opts.TrainedAs}
	err = prepareAndThen(ctx, f, a.mf.workers, po, in, func(it item) judged {
		j := judged{it: it}
		if it.err == nil {
			j.v, j.err = f.ClassifyPrepared(ctx, a.mf.user, it.p, opts)
		}
		return j
	}, func(j judged) error {
		it, v := j.it, j.v
		if it.err != nil {
			return pr.fail(it.msg.Path, it.err.Error())
		}
		if j.err != nil {
			return fmt.Errorf("%s: %w", it.msg.Path, j.err)
		}
		c := classification{Path: it.msg.Path, Verdict: v.Label(), Class: v.Class, Probability: v.Probability, Score: v.Score,
			Posterior: v.Posterior, Used: v.Used, TrainedAs: v.TrainedAs, Problems: v.Problems}
		if a.explain > 0 {
			pos := f.Config().Positive
			for class, cs := range v.Toward {
				if class == pos {
					c.TowardSpam = weights(cs)
				} else {
					c.TowardHam, c.TowardOther = weights(cs), otherThanHam(class)
				}
			}
			c.Measures = measures(v.Measures)
		}
		return pr.print(c)
	})
	return pr.end(err, walkErr())
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// appendFields appends c's fields, tab-separated, and a newline. Numbers
// are as JSON has them, unrounded, and empty for a message that could
// not be classified, whose verdict is "error". A path or class that holds
// a tab or a line break, or starts with a quote, is written as a quoted
// Go string, so that a line is always one message and a quoted field
// always a quoted one.
func appendFields(b []byte, c classification, fields []string) []byte {
	failed := c.Error != ""
	for i, f := range fields {
		if i > 0 {
			b = append(b, '\t')
		}
		switch f {
		case "path":
			b = appendField(b, c.Path)
		case "verdict":
			b = append(b, c.Verdict...)
		case "class":
			b = appendField(b, c.Class)
		case "probability":
			if !failed {
				b = strconv.AppendFloat(b, c.Probability, 'g', -1, 64)
			}
		case "score":
			if !failed {
				b = strconv.AppendFloat(b, c.Score, 'g', -1, 64)
			}
		case "used":
			if !failed {
				b = strconv.AppendInt(b, int64(c.Used), 10)
			}
		case "trained_as":
			b = appendField(b, c.TrainedAs)
		}
	}
	return append(b, '\n')
}

func appendField(b []byte, s string) []byte {
	if strings.ContainsAny(s, "\t\n\r") || strings.HasPrefix(s, `"`) {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

// writeText prints a classification as one line: path, verdict, spam
// probability and score, and with more than two classes each class's
// posterior; then with -v the weightiest features indented, each with its
// share of the score. The score is a natural logarithm of odds, so the
// shares are in nats: +0.69 doubles the odds of spam.
func writeText(w io.Writer, c classification) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\t%s\t%.6f\t%+.3f", c.Path, c.Verdict, c.Probability, c.Score)
	if len(c.Posterior) > 2 {
		var ps []string
		for _, class := range slices.Sorted(maps.Keys(c.Posterior)) {
			ps = append(ps, fmt.Sprintf("%s=%.6f", class, c.Posterior[class]))
		}
		fmt.Fprintf(&b, "\t%s", strings.Join(ps, " "))
	}
	b.WriteByte('\n')
	other := cmp.Or(c.TowardOther, "ham")
	for _, side := range []struct {
		name string
		ws   []weight
	}{{"spam", c.TowardSpam}, {other, c.TowardHam}} {
		if len(side.ws) == 0 {
			continue
		}
		parts := make([]string, len(side.ws))
		for i, x := range side.ws {
			parts[i] = fmt.Sprintf("%s(%+.2f)", x.Token, x.Weight)
		}
		fmt.Fprintf(&b, "\ttoward %s, in nats of log-odds: %s\n", side.name, strings.Join(parts, " "))
	}
	if len(c.Measures) > 0 {
		parts := make([]string, len(c.Measures))
		for i, m := range c.Measures {
			parts[i] = m.text
		}
		fmt.Fprintf(&b, "\tmeasures: %s\n", strings.Join(parts, " "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
