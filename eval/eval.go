// Package eval measures how well the filter separates spam from ham on
// labelled mail, under the protocols the spam-filtering literature uses:
//
//   - split: train on the first part of the corpus in index order, test on
//     the rest;
//   - cv: stratified k-fold cross-validation, seeded;
//   - online: the TREC spam track's immediate-feedback protocol: each
//     message in order is classified, then trained on with its gold label
//     (always, only on error, or inside a thick threshold).
//
// No message is ever tested after it was trained on, except in the online
// protocol, where training follows testing by design. Metrics are those of
// the TREC spam track and the usual confusion-matrix rates (see Metrics);
// every tested message can be written out as a Record so that anyone can
// recompute them. Runs use an in-memory store unless told otherwise.
//
// A corpus from OpenIndex holds paths and labels, not mail: a split or
// online run reads and parses the messages on worker goroutines a few
// ahead of the one it trains or tests, in index order, so that its memory
// is the model's and the Records', whatever the corpus's size.
// Cross-validation, sweeps and learning curves go over the corpus many
// times; they parse each message once per tokenizer setting and keep only
// its digest, features and counts, so that they cost only the counting.
// Those bags list their features in hash order rather than in the order of
// the message, so their scores can differ from a split or online run's in
// the last bits, far below what the printed metrics show.
package eval

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/store"
)

// ErrOptions is returned for options that do not fit together.
var ErrOptions = errors.New("bad evaluation options")

// Options choose the protocol of a run.
type Options struct {
	// Mode is "split", "cv" or "online".
	Mode string
	// Split is the fraction of the corpus, in index order, that the split
	// protocol trains on, and that Part "train" and "test" divide at.
	Split float64
	// Part restricts the run to "all" of the corpus, its "train" side (the
	// first Split of it) or its "test" side. Settings are chosen on the
	// train side, so that the test side stays unseen.
	Part string
	// Folds is k of k-fold cross-validation.
	Folds int
	// Seed seeds cross-validation folds, learning-curve draws and
	// bootstrap resampling.
	Seed uint64
	// Train is the online training rule: "all" (train every message),
	// "on-error" (only when the verdict was wrong) or "thick:M" (when wrong
	// or the score lay within M of the decision threshold).
	Train string
	// Bootstrap is the number of bootstrap resamples for confidence
	// intervals of split and online runs; 0 turns them off.
	Bootstrap int
	// Workers parse messages in parallel; 0 means one per CPU.
	Workers int
	// NewStore opens the store a run trains; nil means a fresh in-memory
	// store. Cross-validation opens one per fold.
	NewStore func(ctx context.Context) (store.Store, error)
	// Attack, in split mode, adds words to every spam tested.
	Attack Attack
	// Prune, in online mode, prunes the model as the daemon's schedule
	// would, once a day of the messages' arrival, on the day each new
	// day's first message arrives.
	Prune PruneSchedule
}

// PruneSchedule is a daily prune: tokens seen at most Count times that no
// message of the last Days days had, and the seen records of messages
// more than SeenDays days old (store.AgeRule). Zero days turn each off.
type PruneSchedule struct {
	Count          uint64
	Days, SeenDays int
}

// On reports whether the schedule prunes anything.
func (p PruneSchedule) On() bool { return p.Days > 0 || p.SeenDays > 0 }

// DefaultOptions are the options of a run unless told otherwise.
func DefaultOptions() Options {
	return Options{Mode: "split", Split: 0.8, Part: "all", Folds: 10, Seed: 1, Train: "all", Workers: runtime.GOMAXPROCS(0)}
}

// Report is the outcome of one run.
type Report struct {
	Metrics
	// Mode, Part and Train repeat the protocol.
	Mode  string `json:"mode"`
	Part  string `json:"part"`
	Train string `json:"train,omitempty"`
	// Trained is the number of messages trained on (online: how many of
	// them the training rule chose).
	Trained int `json:"trained"`
	// Tokens is the model's vocabulary at the end of an online run,
	// PeakTokens the most it held after any message, and Pruned the
	// tokens pruning deleted on the way.
	Tokens     uint64 `json:"tokens"`
	PeakTokens uint64 `json:"peak_tokens"`
	Pruned     uint64 `json:"pruned,omitempty"`
	// Settings lists every filter setting of the run.
	Settings map[string]string `json:"settings"`
	// Folds holds each fold's metrics in cross-validation.
	Folds []Metrics `json:"folds,omitempty"`
	// Spread gives, per metric, the mean and standard deviation across
	// folds, or a bootstrap 95% interval.
	Spread map[string]Interval `json:"spread,omitempty"`
	// Seconds is the wall-clock time of the run, parsing included.
	Seconds float64 `json:"seconds"`
	// Records holds every tested message's outcome, in test order.
	Records []Record `json:"-"`
	// Attack names the attack on the tested spam, if any, and AttackWords
	// are the words it added.
	Attack      string   `json:"attack,omitempty"`
	AttackWords []string `json:"attack_words,omitempty"`
}

// Run evaluates cfg on c under o. Split and online runs read and parse
// each message as they come to it and keep nothing of it but its Record;
// cross-validation keeps every message parsed in c, since each fold goes
// over the corpus again.
func Run(ctx context.Context, c *Corpus, cfg filter.Config, o Options) (*Report, error) {
	return run(ctx, c, cfg, o, o.Mode == "cv")
}

// run is Run, keeping the parsed messages in c for later runs when reuse
// is set.
func run(ctx context.Context, c *Corpus, cfg filter.Config, o Options, reuse bool) (*Report, error) {
	start := time.Now()
	if err := o.check(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := c.label(cfg); err != nil {
		return nil, err
	}
	// An attack changes the messages it tests, which only a run that
	// reads them can do.
	reuse = reuse && o.Attack.Words == 0
	src, err := c.source(ctx, cfg, o.Workers, reuse)
	if err != nil {
		return nil, err
	}
	idx := o.part(len(c.Messages))
	r := &Report{Mode: o.Mode, Part: o.Part, Settings: settingsOf(cfg)}
	switch o.Mode {
	case "split":
		// A part other than "all" is one side of the split already, and
		// is split again.
		n := int(math.Round(float64(len(idx)) * o.Split))
		r.Trained = n
		r.Records, r.AttackWords, err = o.trainTest(ctx, c, src, cfg, idx[:n], idx[n:])
		if o.Attack.Words > 0 {
			r.Attack = fmt.Sprintf("%s:%d", o.Attack.Kind, o.Attack.Words)
		}
	case "cv":
		err = o.crossValidate(ctx, c, src, cfg, idx, r)
	case "online":
		r.Train = o.Train
		r.Records, r.Trained, err = o.online(ctx, c, src, cfg, idx, r)
	}
	if err != nil {
		return nil, err
	}
	r.Metrics = Compute(r.Records)
	if o.Bootstrap > 0 && o.Mode != "cv" {
		r.Spread = bootstrap(r.Records, o.Bootstrap, o.Seed)
	}
	r.Seconds = time.Since(start).Seconds()
	return r, nil
}

func (o *Options) check() error {
	switch o.Mode {
	case "split", "cv", "online":
	default:
		return fmt.Errorf("%w: mode %q: want split, cv or online", ErrOptions, o.Mode)
	}
	switch o.Part {
	case "all", "train", "test":
	case "":
		o.Part = "all"
	default:
		return fmt.Errorf("%w: part %q: want all, train or test", ErrOptions, o.Part)
	}
	if !(o.Split > 0 && o.Split < 1) {
		return fmt.Errorf("%w: split %v: want a fraction between 0 and 1", ErrOptions, o.Split)
	}
	if o.Mode == "cv" && o.Folds < 2 {
		return fmt.Errorf("%w: %d folds: want at least 2", ErrOptions, o.Folds)
	}
	if _, err := parseTrain(o.Train); err != nil {
		return err
	}
	if o.Attack.Words > 0 && o.Mode != "split" {
		return fmt.Errorf("%w: an attack is a split run's: it needs one trained model to choose its words", ErrOptions)
	}
	if o.Prune.On() && o.Mode != "online" {
		return fmt.Errorf("%w: a daily prune is an online run's: it needs the days to go by", ErrOptions)
	}
	if o.Prune.Days < 0 || o.Prune.SeenDays < 0 {
		return fmt.Errorf("%w: prune days %d and seen days %d: want 0 or more", ErrOptions, o.Prune.Days, o.Prune.SeenDays)
	}
	if o.Prune.Days > 0 && o.Prune.Count == 0 {
		return fmt.Errorf("%w: a prune of tokens seen at most 0 times prunes none: want a count of 1 or more", ErrOptions)
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	return nil
}

// part returns the positions of the messages the run uses, in order.
func (o *Options) part(n int) []int {
	cut := int(math.Round(float64(n) * o.Split))
	lo, hi := 0, n
	switch o.Part {
	case "train":
		hi = cut
	case "test":
		lo = cut
	}
	idx := make([]int, 0, hi-lo)
	for i := lo; i < hi; i++ {
		idx = append(idx, i)
	}
	return idx
}

// trainRule is a parsed online training rule.
type trainRule struct {
	onError bool
	thick   float64 // margin around the threshold, when > 0
}

func parseTrain(s string) (trainRule, error) {
	switch {
	case s == "" || s == "all":
		return trainRule{}, nil
	case s == "on-error":
		return trainRule{onError: true}, nil
	case strings.HasPrefix(s, "thick:"):
		m, err := strconv.ParseFloat(strings.TrimPrefix(s, "thick:"), 64)
		if err != nil || !(m > 0) {
			return trainRule{}, fmt.Errorf("%w: train %q: want thick:M with a margin M > 0", ErrOptions, s)
		}
		return trainRule{onError: true, thick: m}, nil
	}
	return trainRule{}, fmt.Errorf("%w: train %q: want all, on-error or thick:M", ErrOptions, s)
}

func (o *Options) newFilter(ctx context.Context, cfg filter.Config) (*filter.Filter, error) {
	var st store.Store = store.NewMemory()
	if o.NewStore != nil {
		var err error
		if st, err = o.NewStore(ctx); err != nil {
			return nil, err
		}
	}
	return filter.New(st, cfg)
}

// trainTest trains a fresh model on the messages at train and tests it on
// those at test, under o.Attack, whose words it returns.
func (o *Options) trainTest(ctx context.Context, c *Corpus, src source, cfg filter.Config, train, test []int) ([]Record, []string, error) {
	f, err := o.newFilter(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	defer f.Store().Close()
	if err := trainAll(ctx, f, c, src, o.Workers, train); err != nil {
		return nil, nil, err
	}
	words, err := attackWords(ctx, o.Attack, f, c, train, o.Seed)
	if err != nil {
		return nil, nil, err
	}
	if words != nil {
		src = attacked(src, o.Attack, words, c, test)
		if o.Attack.Out != "" {
			if err := os.MkdirAll(o.Attack.Out, 0o755); err != nil {
				return nil, nil, err
			}
			if err := writeAttackIndex(o.Attack, c, train, test); err != nil {
				return nil, nil, fmt.Errorf("write attacked index: %w", err)
			}
		}
	}
	rs, err := testAll(ctx, f, c, src, o.Workers, test)
	return rs, words, err
}

// trainAll trains the messages at idx in batches.
func trainAll(ctx context.Context, f *filter.Filter, c *Corpus, src source, workers int, idx []int) error {
	const batch = 512
	items := make([]filter.Item, 0, batch)
	flush := func() error {
		if len(items) == 0 {
			return nil
		}
		_, err := f.Train(ctx, "", items)
		items = items[:0]
		return err
	}
	var clock replayClock
	err := each(ctx, workers, idx, src, func(i int, p filter.Prepared) error {
		items = append(items, filter.Item{Prepared: p, Class: c.Messages[i].Label(), Day: clock.day(p)})
		if len(items) < batch {
			return nil
		}
		return flush()
	})
	if err != nil {
		return err
	}
	return flush()
}

func classOf(spam bool) string {
	if spam {
		return filter.Spam
	}
	return filter.Ham
}

// testAll classifies the messages at idx.
func testAll(ctx context.Context, f *filter.Filter, c *Corpus, src source, workers int, idx []int) ([]Record, error) {
	rs := make([]Record, 0, len(idx))
	err := each(ctx, workers, idx, src, func(i int, p filter.Prepared) error {
		v, err := f.ClassifyPrepared(ctx, "", p, filter.ClassifyOptions{})
		if err != nil {
			return fmt.Errorf("%s: %w", c.Messages[i].Path, err)
		}
		rs = append(rs, recordOf(i, c.Messages[i], v, f.Config()))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rs, nil
}

func (o *Options) crossValidate(ctx context.Context, c *Corpus, src source, cfg filter.Config, idx []int, r *Report) error {
	folds := stratifiedFolds(c, idx, o.Folds, o.Seed)
	for k := range folds {
		var train []int
		for j, f := range folds {
			if j != k {
				train = append(train, f...)
			}
		}
		slices.Sort(train) // train in index order, as mail arrives
		rs, _, err := o.trainTest(ctx, c, src, cfg, train, folds[k])
		if err != nil {
			return fmt.Errorf("fold %d: %w", k+1, err)
		}
		r.Folds = append(r.Folds, Compute(rs))
		r.Records = append(r.Records, rs...)
		r.Trained += len(train)
	}
	r.Trained /= len(folds)
	r.Spread = spreadOf(r.Folds)
	return nil
}

// recordOf is the record of testing message m, at position i, with
// verdict v.
func recordOf(i int, m Message, v filter.Verdict, cfg filter.Config) Record {
	return Record{Pos: i, Spam: m.Spam, Score: v.Score, Verdict: v.Label(),
		Gold: m.Label(), Class: v.Class, Flagged: !v.Unsure && cfg.IsSpam(v.Class)}
}

// stratifiedFolds deals the messages of each class of idx, each class
// shuffled with seed, into k folds in turn, so that every fold has the
// corpus's mix of classes. Spam comes first, then ham, then the other
// classes in order of name.
func stratifiedFolds(c *Corpus, idx []int, k int, seed uint64) [][]int {
	byClass := map[string][]int{}
	for _, i := range idx {
		l := c.Messages[i].Label()
		byClass[l] = append(byClass[l], i)
	}
	order := slices.SortedFunc(maps.Keys(byClass), func(a, b string) int {
		rank := func(s string) int {
			switch s {
			case filter.Spam:
				return 0
			case filter.Ham:
				return 1
			}
			return 2
		}
		return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(a, b))
	})
	r := rand.New(rand.NewPCG(seed, 0xf01d))
	folds := make([][]int, k)
	n := 0
	for _, class := range order {
		set := byClass[class]
		r.Shuffle(len(set), func(i, j int) { set[i], set[j] = set[j], set[i] })
		for _, i := range set {
			folds[n%k] = append(folds[n%k], i)
			n++
		}
	}
	for _, f := range folds {
		slices.Sort(f)
	}
	return folds
}

// online runs the immediate-feedback protocol over idx in order, and
// says in r what the model holds at the end.
func (o *Options) online(ctx context.Context, c *Corpus, src source, cfg filter.Config, idx []int, r *Report) ([]Record, int, error) {
	rule, _ := parseTrain(o.Train)
	f, err := o.newFilter(ctx, cfg)
	if err != nil {
		return nil, 0, err
	}
	defer f.Store().Close()
	threshold := cfg.Threshold()
	rs := make([]Record, 0, len(idx))
	trained := 0
	var clock replayClock
	var pruned store.Day
	err = each(ctx, o.Workers, idx, src, func(i int, p filter.Prepared) error {
		m := c.Messages[i]
		day := clock.day(p)
		if o.Prune.On() && day > pruned {
			res, err := f.Store().Prune(ctx, "", store.AgeRule(day, o.Prune.Count, o.Prune.Days, o.Prune.SeenDays, 0))
			if err != nil {
				return fmt.Errorf("prune on %s: %w", day, err)
			}
			r.Pruned += res.Tokens
			pruned = day
		}
		v, err := f.ClassifyPrepared(ctx, "", p, filter.ClassifyOptions{})
		if err != nil {
			return fmt.Errorf("%s: %w", m.Path, err)
		}
		rs = append(rs, recordOf(i, m, v, cfg))
		wrong := v.Class != m.Label()
		near := rule.thick > 0 && v.Score > threshold-rule.thick && v.Score < threshold+rule.thick
		if rule.onError && !wrong && !near && !v.Unsure {
			return nil
		}
		if _, err := f.Train(ctx, "", []filter.Item{{Prepared: p, Class: m.Label(), Day: day}}); err != nil {
			return fmt.Errorf("%s: %w", m.Path, err)
		}
		trained++
		t, err := f.Store().Totals(ctx, "")
		if err != nil {
			return err
		}
		r.PeakTokens = max(r.PeakTokens, t.Vocabulary)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	t, err := f.Store().Totals(ctx, "")
	if err != nil {
		return nil, 0, err
	}
	r.Tokens = t.Vocabulary
	return rs, trained, nil
}

// replayClock tells the day each message of a corpus replayed in order
// of arrival arrived: its Received date, never before the day of the
// messages before it (the clocks of the servers that stamped them
// disagree a little), and for one without a date the day of the one
// before it. Zero, before any message had a date, lets training take
// today.
type replayClock struct{ last store.Day }

func (c *replayClock) day(p filter.Prepared) store.Day {
	if p.Arrival > 0 {
		c.last = max(c.last, store.DayOf(time.Unix(p.Arrival, 0)))
	}
	return c.last
}

// settingsOf lists every setting of cfg by name.
func settingsOf(cfg filter.Config) map[string]string {
	m := make(map[string]string)
	for _, k := range filter.Keys() {
		m[k], _ = cfg.Get(k)
	}
	return m
}

// WriteRecords writes rs to path as TSV: position in the index, gold class,
// score and verdict, one message a line, under a header line.
func WriteRecords(path string, rs []Record) error {
	var b strings.Builder
	b.WriteString("pos\tgold\tscore\tverdict\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "%d\t%s\t%s\t%s\n", r.Pos, r.gold(), strconv.FormatFloat(r.Score, 'g', 17, 64), r.Verdict)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write records: %w", err)
	}
	return nil
}
