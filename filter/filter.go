// Package filter is the one façade over the spam filter: it turns a raw
// message into a verdict, and trains, relabels and forgets messages.
//
// It wires the pieces together and holds no algorithm of its own: tokenize
// makes tokens, bow makes a bag of hashed features, store keeps per-user
// counts, and nb scores and decides. A user's model is scored with the
// global model (user "") as its prior, so a user who never trained anything
// gets the global model's verdicts.
//
// Training is idempotent per message: a message is identified by
// tokenize.Digest, and the store records which class it was trained as, so
// the same message trained twice counts once, and a message trained with
// another label is first untrained. Untraining subtracts the bag the
// message makes now: if the tokenizer or bag options change between
// training and untraining, the counts drift (never below zero); keep them
// fixed for a store's lifetime.
//
// # Classes
//
// Spam and ham are the default classes, not special ones: Config.Classes
// lists any number, such as newsletter or phishing. The store registers a
// class when a message is first trained as it, so a model gains a class
// by training it; until some model (the user's or the global one) has,
// the class is left out of scoring. Config.SpamClasses says which classes
// count as spam: the posterior of them all is the spam probability
// (Verdict.Probability) and its log-odds the score (Verdict.Score) that
// ranks messages, X-Spam-Score shows and the unsure band applies to. The
// decision is the class of least expected loss under Config.Loss, a K×K
// matrix, or under the one CostFP and CostFN make.
package filter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/nb"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/tokenize"
)

// The default classes.
const (
	Spam = "spam"
	Ham  = "ham"
)

// ErrUnknownClass is returned for a class the filter was not configured
// with.
var ErrUnknownClass = errors.New("unknown class")

// Filter classifies and trains messages against a store. It is safe for
// concurrent use.
type Filter struct {
	st      store.Store
	tok     *tokenize.Tokenizer
	cfg     Config
	decider nb.Decider
	// all indexes every configured class: the scope of a model that has
	// learned them all.
	all  []int
	meas *measures
	// pruneMu makes batches that find a model past its budget prune it
	// one at a time, the later ones finding it pruned.
	pruneMu sync.Mutex
	// spare holds learners released, for the next batches (newLearner).
	spare chan *learner
}

// New returns a filter over st configured by cfg.
func New(st store.Store, cfg Config) (*Filter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d, err := cfg.decider()
	if err != nil {
		return nil, err
	}
	all := make([]int, len(cfg.Classes))
	for i := range all {
		all[i] = i
	}
	return &Filter{st: st, tok: tokenize.New(cfg.Tokenize), cfg: cfg, decider: d, all: all, meas: newMeasures(), spare: make(chan *learner, spareLearners)}, nil
}

// Config returns the filter's configuration.
func (f *Filter) Config() Config { return f.cfg }

// Store returns the store the filter reads and trains.
func (f *Filter) Store() store.Store { return f.st }

// ErrUnidentified is the error of a message prepared without its digest
// (PrepareOptions.Unidentified) where one is needed.
var ErrUnidentified = errors.New("message prepared without its digest")

// Prepared is a message made ready for scoring or training: its identity
// and its bag of features. Preparing is the CPU-heavy part and needs no
// store, so callers may prepare many messages in parallel.
type Prepared struct {
	// Digest identifies the message; it is zero for one prepared
	// Unidentified.
	Digest store.Digest
	// Mark identifies the message across copies (tokenize.Mark).
	Mark uint64
	// Bag holds the message's features.
	Bag bow.Bag
	// Lang is the detected language of the body, "" if unknown.
	Lang string
	// Truncated reports that the message was longer than the tokenizer
	// reads.
	Truncated bool
	// Problems lists non-fatal trouble met while parsing.
	Problems []string
	// Runs holds, when Config.RunLength asks for them and the body is long
	// enough to have more than one, a bag per run of the body's tokens,
	// each with the whole header.
	Runs []bow.Bag
	// Measures holds the message's measures as tokenize took them, NaN
	// for those it lacks, and Values their levels, as training stores
	// them.
	Measures [tokenize.NumMeasures]float64
	Values   []store.Value
	// Arrival is tokenize.Result.Arrival: when the message arrived, in
	// seconds since 1970, 0 if unknown.
	Arrival int64
}

// Prepare parses raw into a Prepared message. With names set, the bag keeps
// each token's text for explanations. It fails, wrapping
// tokenize.ErrMalformed, only for input that is not a message at all.
func (f *Filter) Prepare(raw []byte, names bool) (Prepared, error) {
	return f.PrepareWith(raw, PrepareOptions{Names: names})
}

// PrepareOptions say what PrepareWith makes of a message beside its
// features.
type PrepareOptions struct {
	// Names keeps each token's text in the bag, for explanations.
	Names bool
	// Unidentified leaves Digest and Mark zero. Training needs them, as
	// do a verdict's TrainedAs and a record of it; a classification
	// alone does not, and they cost a hash of the whole message, a
	// thirtieth of classifying a mailbox.
	Unidentified bool
}

// PrepareWith is Prepare with options.
func (f *Filter) PrepareWith(raw []byte, po PrepareOptions) (Prepared, error) {
	res, err := f.tok.Tokenize(raw)
	if err != nil {
		return Prepared{}, fmt.Errorf("tokenize: %w", err)
	}
	o := f.cfg.Bag
	o.KeepNames = po.Names
	var digest store.Digest
	var mark uint64
	if !po.Unidentified {
		digest, mark = tokenize.Identify(raw)
	}
	p := Prepared{
		Digest:    digest,
		Mark:      mark,
		Bag:       bow.NewSplit(res.Tokens, res.Header, o),
		Lang:      res.Lang,
		Truncated: res.Truncated,
		Problems:  res.Problems,
		Runs:      runs(res.Tokens, res.Header, f.cfg.RunLength, o),
		Measures:  res.Measures,
		Values:    levels(res.Measures, f.meas.defs),
		Arrival:   res.Arrival,
	}
	// The bags hold hashes, and names only as strings of their own.
	f.tok.Recycle(res.Tokens)
	return p, nil
}

// runs returns the bags of the header's tokens, tokens[:head], with each
// run of w body tokens in turn, or nil when w is 0 or the body has no
// more than one run. A tail shorter than w/2 joins the run before it: a
// few tokens alone are too little evidence to be a witness.
func runs(tokens []string, head, w int, o bow.Options) []bow.Bag {
	if w <= 0 || len(tokens)-head <= w+w/2 {
		return nil
	}
	var bags []bow.Bag
	buf := make([]string, 0, head+w+w/2)
	for start := head; start < len(tokens); {
		end := start + w
		if len(tokens)-end < w/2 {
			end = len(tokens)
		}
		buf = append(append(buf[:0], tokens[:head]...), tokens[start:end]...)
		bags = append(bags, bow.NewSplit(buf, head, o))
		start = end
	}
	return bags
}

// Verdict is the filter's conclusion about one message.
type Verdict struct {
	// Class is the class decided on, by least expected loss.
	Class string
	// Unsure is set when the spam log-odds fall in the unsure band, or
	// the model is Untrained; Class is then only the better guess.
	Unsure bool
	// Untrained is set when the model has learned fewer than
	// Config.MinTrained messages of the positive or the negative class:
	// its verdict is unsure whatever its score.
	Untrained bool
	// Probability is the spam probability: the posterior of the spam
	// classes (Config.SpamClasses) summed, P(spam|x) for two classes.
	Probability float64
	// Score is the spam log-odds, the logit of Probability: the log of
	// the spam classes' posterior over that of all other classes,
	// log P(spam|x) − log P(ham|x) for two classes. Rank messages by it.
	Score float64
	// Posterior gives P(c|x) for every class scored: the configured
	// classes the model has learned, and always Positive and Negative.
	Posterior map[string]float64
	// Used is the number of the message's features that were scored.
	Used int
	// Digest identifies the message; it is zero for one prepared
	// Unidentified.
	Digest store.Digest
	// TrainedAs is the class the message was already trained as for the
	// user, "" if none; only looked up when ClassifyOptions.TrainedAs asks.
	TrainedAs string
	// Toward lists, for the positive class and its rival, the features
	// that pushed hardest toward it; nil unless explanation was asked for.
	Toward map[string][]nb.Contribution
	// Measures lists the measures that weighed most either way, their
	// weights toward the positive class (negative toward its rival); nil
	// unless explanation was asked for or when measures are off.
	Measures []nb.MeasureContribution
	// Problems lists non-fatal trouble met while parsing.
	Problems []string
}

// Label returns "unsure" for an unsure verdict, else the class.
func (v Verdict) Label() string {
	if v.Unsure {
		return "unsure"
	}
	return v.Class
}

// ClassifyOptions select what a verdict holds beyond the decision.
type ClassifyOptions struct {
	// Explain, when positive, lists that many features toward each side.
	Explain int
	// TrainedAs looks up whether the message was trained already, which
	// costs a store read that a mail server's verdict does not need.
	TrainedAs bool
}

// Classify scores raw for user.
func (f *Filter) Classify(ctx context.Context, user string, raw []byte, o ClassifyOptions) (Verdict, error) {
	p, err := f.Prepare(raw, o.Explain > 0)
	if err != nil {
		return Verdict{}, err
	}
	return f.ClassifyPrepared(ctx, user, p, o)
}

// ClassifyPrepared scores a prepared message for user. Explanations need
// the message prepared with names.
func (f *Filter) ClassifyPrepared(ctx context.Context, user string, p Prepared, o ClassifyOptions) (Verdict, error) {
	if err := store.ValidUser(user); err != nil {
		return Verdict{}, err
	}
	if o.TrainedAs && p.Digest == (store.Digest{}) {
		return Verdict{}, ErrUnidentified
	}
	sc := getScratch()
	defer putScratch(sc)
	m, fs, vs, scope, err := f.features(ctx, user, &p, nil, -1, sc)
	if err != nil {
		return Verdict{}, err
	}
	spam := f.cfg.Spam()
	r := m.Score(fs, vs...)
	// The message is as positive as the whole of it or, if more, as its
	// runs pooled: text added to a message can outvote the payload in the
	// whole body, but not in the runs it leaves alone.
	if len(p.Runs) > 0 {
		at := make(map[uint64]int, len(fs))
		for i := range fs {
			at[fs[i].Hash] = i
		}
		rs := make([]nb.Result, len(p.Runs))
		rfs := make([][]nb.Feature, len(p.Runs))
		best := 0
		for i, run := range p.Runs {
			rfs[i] = f.runFeatures(run, fs, at)
			rs[i] = m.Score(rfs[i], vs...)
			if rs[i].LogOdds(f.cfg.Positive) > rs[best].LogOdds(f.cfg.Positive) {
				best = i
			}
		}
		if pooled := nb.Pool(rs, f.cfg.Positive); pooled.GroupLogOdds(spam) > r.GroupLogOdds(spam) {
			r, fs = pooled, rfs[best]
		}
	}
	// An explanation is of the features that decided: the whole
	// message's, or the most positive run's.
	var ex nb.Explanation
	if o.Explain > 0 {
		ex = m.Explain(fs, o.Explain, vs...)
	}
	d := f.deciderFor(scope).Decide(r)
	untrained := !f.enough(m)
	v := Verdict{
		Class:     d.Class,
		Unsure:    d.Unsure || untrained,
		Untrained: untrained,
		Score:     r.GroupLogOdds(spam),
		Posterior: make(map[string]float64, len(r.Classes)),
		Used:      r.Used,
		Digest:    p.Digest,
		Problems:  p.Problems,
	}
	for i, c := range r.Classes {
		v.Posterior[c] = r.Posterior[i]
		if f.cfg.IsSpam(c) {
			v.Probability += r.Posterior[i]
		}
	}
	if o.Explain > 0 {
		v.Toward = make(map[string][]nb.Contribution, 2)
		pi := r.Index(f.cfg.Positive)
		for _, i := range []int{pi, ex.Rival[pi]} {
			v.Toward[r.Classes[i]] = ex.Toward[i]
		}
		v.Measures = ex.Measures[pi]
	}
	if o.TrainedAs {
		if v.TrainedAs, err = f.st.Seen(ctx, user, p.Digest); err != nil {
			return Verdict{}, fmt.Errorf("seen record: %w", err)
		}
	}
	return v, nil
}

// enough reports whether m has learned Config.MinTrained messages of the
// positive and the negative class, its user's and the global model's
// together. Other classes do not count: one a user named but seldom trains
// must not keep every verdict unsure.
func (f *Filter) enough(m *nb.Model) bool {
	for c, name := range m.Classes {
		if name != f.cfg.Positive && name != f.cfg.Negative {
			continue
		}
		n := m.Global.Messages[c]
		if m.User != nil {
			n += m.User.Messages[c]
		}
		if n < float64(f.cfg.MinTrained) {
			return false
		}
	}
	return true
}

// scope returns the indices, in Config.Classes, of the classes a model
// scores: those that the global model (totals gt) or the user's (ut), or
// the messages of the batch being trained (pending, per configured
// class), have learned, and always Positive, Negative and need (an
// index, or -1), in the configured order. A class never trained would
// only add noise: with no counts its estimates are flat, which makes
// every token look telling. When it is all of them, it is f.all.
func (f *Filter) scope(gt, ut store.Totals, pending []float64, need int) []int {
	learned := func(i int) bool {
		c := f.cfg.Classes[i]
		if i == need || c == f.cfg.Positive || c == f.cfg.Negative || at(pending, i) > 0 {
			return true
		}
		for _, t := range []store.Totals{gt, ut} {
			if j := t.Index(c); j >= 0 && t.Messages[j] > 0 {
				return true
			}
		}
		return false
	}
	n := 0
	for i := range f.all {
		if learned(i) {
			n++
		}
	}
	if n == len(f.all) {
		return f.all
	}
	scope := make([]int, 0, n)
	for i := range f.all {
		if learned(i) {
			scope = append(scope, i)
		}
	}
	return scope
}

// at returns s[i], or 0 past its end.
func at(s []float64, i int) float64 {
	if i < len(s) {
		return s[i]
	}
	return 0
}

// deciderFor returns the decider of the classes in scope: the loss
// matrix restricted to them.
func (f *Filter) deciderFor(scope []int) nb.Decider {
	if len(scope) == len(f.all) {
		return f.decider
	}
	d := f.decider
	d.Loss = make(nb.Loss, len(scope))
	for i, ci := range scope {
		d.Loss[i] = make([]float64, len(scope))
		for k, ck := range scope {
			d.Loss[i][k] = f.decider.Loss[ci][ck]
		}
	}
	return d
}

// names returns the names of the classes in scope.
func (f *Filter) names(scope []int) []string {
	if len(scope) == len(f.all) {
		return f.cfg.Classes
	}
	out := make([]string, len(scope))
	for i, c := range scope {
		out[i] = f.cfg.Classes[c]
	}
	return out
}

// features looks up the counts of p's features for user, with the
// global model as the prior of the user's, and returns the model to score
// them with, p's measures as it scores them, and the scope of the model's
// classes (see scope; pending and need are scope's).
func (f *Filter) features(ctx context.Context, user string, p *Prepared, pending []float64, need int, sc *scratch) (*nb.Model, []nb.Feature, []nb.Value, []int, error) {
	bag := p.Bag
	gt, err := f.st.Totals(ctx, "")
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("global totals: %w", err)
	}
	var ut store.Totals
	if user != "" {
		if ut, err = f.st.Totals(ctx, user); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("totals of %s: %w", user, err)
		}
	}
	scope := f.scope(gt, ut, pending, need)
	m := &nb.Model{
		Classes:    f.names(scope),
		Params:     f.cfg.NB,
		Global:     f.totals(gt, scope),
		Vocabulary: float64(gt.Vocabulary),
	}
	// Hashes in a fixed order make the sum, and so the score, the same
	// to the bit every time a message is scored.
	hashes, counts := bag.Hashes(), bag.Counts()
	gc, err := f.lookup(ctx, "", hashes, &sc.global)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("global counts: %w", err)
	}
	var uc []store.Counts
	if trained(ut) {
		t := f.totals(ut, scope)
		m.User = &t
		if uc, err = f.lookup(ctx, user, hashes, &sc.user); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("counts of %s: %w", user, err)
		}
	}
	// One backing array for every per-class slice keeps scoring a message
	// to a handful of allocations. A row holds the global counts, then
	// the global weights, then the user's.
	k := len(scope)
	block := k
	weights := f.cfg.NB.Discriminative
	if weights {
		block = 2 * k
	}
	width := block
	if uc != nil {
		width = 2 * block
	}
	buf, fs := sc.take(len(hashes), width)
	gmap := f.classMap(gt, scope)
	umap := f.classMap(ut, scope)
	// Most of a message's features are tokens and pairs never trained on,
	// whose features stay as take left them but for their hash, count
	// and part. A pass for each field keeps the loops short; the header's
	// features come first.
	counts = counts[:len(fs)]
	for i, h := range hashes {
		fs[i].Hash, fs[i].Count = uint64(h), float64(counts[i])
	}
	if f.cfg.SplitHeader {
		for i := bag.Head(); i < len(fs); i++ {
			fs[i].Part = 1
		}
	}
	remapRows(fs, gc, buf, 0, width, gmap, weights, false)
	remapRows(fs, uc, buf, block, width, umap, weights, true)
	if bag.Names != nil {
		for i, h := range hashes {
			fs[i].Name = bag.Names[h]
		}
	}
	return m, fs, f.values(p, gt, ut, m.User != nil, scope), scope, nil
}

// lookup looks up hashes for user, in b's memory if the store can fill
// it (store.Filler).
func (f *Filter) lookup(ctx context.Context, user string, hashes []bow.Hash, b *store.LookupBuffer) ([]store.Counts, error) {
	if fl, ok := f.st.(store.Filler); ok {
		return fl.LookupInto(ctx, user, hashes, b)
	}
	return f.st.Lookup(ctx, user, hashes)
}

// scratch is the memory features fills for one message: the features and
// the one array their per-class slices point into, and the store's
// lookups where it can fill them. Scoring needs it only while it scores,
// and a message has hundreds of features of over a hundred bytes each, so
// it is reused (scratches) rather than left to the garbage collector per
// message.
type scratch struct {
	buf          []float64
	fs           []nb.Feature
	global, user store.LookupBuffer
}

// maxScratch is the largest number of features a scratch keeps for the
// next message: a rare giant message is not to pin its memory for good.
const maxScratch = 1 << 14

var scratches = sync.Pool{New: func() any { return new(scratch) }}

// getScratch returns a scratch to pass to features and then to putScratch
// once nothing refers to its features.
func getScratch() *scratch { return scratches.Get().(*scratch) }

// putScratch gives sc back for another message.
func putScratch(sc *scratch) {
	if cap(sc.fs) > maxScratch {
		return
	}
	// The features name tokens and point into buf: clear them so that a
	// kept scratch holds no message's strings.
	clear(sc.fs)
	scratches.Put(sc)
}

// take returns n zero features and an array of n·width values, for the
// caller to set (remap sets all of a row it fills). The features are not
// cleared here: putScratch cleared them, and they hold pointers, whose
// clearing is a bulk write barrier while the collector runs; nor is the
// array, most of whose rows, a token never trained on, are not read.
//
// An array that is too short grows to twice its length at least: grown
// to fit each message, the arrays were remade for most of the messages a
// bulk classify read, a fifth of the bytes it allocated.
func (sc *scratch) take(n, width int) ([]float64, []nb.Feature) {
	if cap(sc.buf) < n*width {
		sc.buf = make([]float64, n*width, max(n*width, 2*cap(sc.buf)))
	} else {
		sc.buf = sc.buf[:n*width]
	}
	if cap(sc.fs) < n {
		sc.fs = make([]nb.Feature, n, max(n, 2*cap(sc.fs)))
	} else {
		sc.fs = sc.fs[:n]
	}
	return sc.buf, sc.fs
}

// runFeatures returns the features of run, a bag of a subset of the
// message's tokens, with the counts and weights of the message's features
// fs, which at maps from hash to index.
func (f *Filter) runFeatures(run bow.Bag, fs []nb.Feature, at map[uint64]int) []nb.Feature {
	hashes, counts := run.Hashes(), run.Counts()
	out := make([]nb.Feature, len(hashes))
	for i, h := range hashes {
		// A run's tokens and pairs are all the message's, but a token
		// of the header that the body repeats belongs to the header in
		// both, so only the run says which part a feature is of.
		if j, ok := at[uint64(h)]; ok {
			out[i] = fs[j]
		}
		out[i].Hash = uint64(h)
		out[i].Count = float64(counts[i])
		out[i].Part = 0
		if f.cfg.SplitHeader && i >= run.Head() {
			out[i].Part = 1
		}
		if run.Names != nil {
			out[i].Name = run.Names[h]
		}
	}
	return out
}

// classMap returns, for each class of scope, its index in t.Classes or
// -1: the store numbers classes in the order they were first trained.
func (f *Filter) classMap(t store.Totals, scope []int) []int {
	idx := make([]int, len(scope))
	for i, c := range scope {
		idx[i] = t.Index(f.cfg.Classes[c])
	}
	return idx
}

// remapRows sets the counts and weights of the features whose rows the
// store found, rows[i] being fs[i]'s, remapped as remap does into their
// blocks of buf, width values a feature, the block at off; the user's
// when user is set.
func remapRows(fs []nb.Feature, rows []store.Counts, buf []float64, off, width int, idx []int, weights, user bool) {
	block := len(idx)
	if weights {
		block *= 2
	}
	// Most models have two classes, and weights: their rows are read
	// with no loop.
	two := weights && len(idx) == 2
	fs = fs[:len(rows)]
	for i, c := range rows {
		if c == nil {
			continue
		}
		o := i*width + off
		var counts, ws []float64
		if two {
			d := (*[4]float64)(buf[o : o+4])
			d[0], d[1] = float64(c.Count(idx[0])), float64(c.Count(idx[1]))
			d[2], d[3] = float64(c.Weight(idx[0]))*store.WeightUnit, float64(c.Weight(idx[1]))*store.WeightUnit
			counts, ws = d[:2:2], d[2:4:4]
		} else {
			counts, ws = remap(buf[o:o+block], c, idx, weights)
		}
		if user {
			fs[i].User, fs[i].UserWeight = counts, ws
		} else {
			fs[i].Global, fs[i].Weight = counts, ws
		}
	}
}

// remap sets the counts of c, indexed like the store's classes, into dst
// indexed like the configured ones, and when weights is set their weights
// into the rest of dst; a class the store lacks (-1 in idx) gets zeros.
// It returns nils for a token never seen.
func remap(dst []float64, c store.Counts, idx []int, weights bool) (counts, ws []float64) {
	if c == nil {
		return nil, nil
	}
	k := len(idx)
	if !weights {
		counts = dst[:k:k]
		for i, j := range idx {
			counts[i] = float64(c.Count(j))
		}
		return counts, nil
	}
	dst = dst[:2*k]
	counts, ws = dst[:k:k], dst[k:2*k:2*k]
	for i, j := range idx {
		counts[i] = float64(c.Count(j))
		ws[i] = float64(c.Weight(j)) * store.WeightUnit
	}
	return counts, ws
}

func (f *Filter) totals(t store.Totals, scope []int) nb.Totals {
	idx := f.classMap(t, scope)
	out := nb.Totals{Messages: make([]float64, len(idx)), Tokens: make([]float64, len(idx))}
	for i, j := range idx {
		if j >= 0 {
			out.Messages[i] = float64(t.Messages[j])
			out.Tokens[i] = float64(t.Tokens[j])
		}
	}
	return out
}

func trained(t store.Totals) bool {
	for _, n := range t.Messages {
		if n > 0 {
			return true
		}
	}
	return false
}

// CheckClass returns nil if class is "" (forget) or one of the
// configured classes, else an error wrapping ErrUnknownClass that says
// how to add it.
func (f *Filter) CheckClass(class string) error {
	if class == "" || f.cfg.HasClass(class) {
		return nil
	}
	return fmt.Errorf("%w %q: the classes are %s; to add it, list it in the classes setting (%s+%s)",
		ErrUnknownClass, class, strings.Join(f.cfg.Classes, "+"), strings.Join(f.cfg.Classes, "+"), class)
}

// Item is one message to train: a prepared message and the class to train
// it as, "" to forget it.
type Item struct {
	Prepared
	Class string
	// Day is the day it is trained on, which pruning reads; zero means
	// today. Replaying a corpus sets the day each message arrived.
	Day store.Day
}

// Train trains, relabels or forgets items for user in one batch. Each item
// is applied whole or not at all, and retraining a message as the class it
// already has changes nothing.
func (f *Filter) Train(ctx context.Context, user string, items []Item) ([]store.Result, error) {
	if err := store.ValidUser(user); err != nil {
		return nil, err
	}
	ops := make([]store.Op, len(items))
	var l *learner
	if f.cfg.NB.Discriminative {
		tokens := 0
		for i := range items {
			if items[i].Class != "" {
				tokens += len(items[i].Bag.Hashes())
			}
		}
		l = f.newLearner(user, tokens)
		defer l.release()
	}
	for i := range items {
		it := &items[i]
		if err := f.CheckClass(it.Class); err != nil {
			return nil, err
		}
		if it.Digest == (store.Digest{}) {
			return nil, fmt.Errorf("train: %w", ErrUnidentified)
		}
		day := it.Day
		if day == 0 {
			day = store.DayOf(time.Now())
		}
		ops[i] = store.Op{Digest: it.Digest, Class: it.Class, Bag: it.Bag, Values: it.Values, Day: day, Mark: it.Mark}
		if l != nil && it.Class != "" {
			steps, err := l.steps(ctx, &it.Prepared, it.Class)
			if err != nil {
				return nil, fmt.Errorf("train: %w", err)
			}
			ops[i].Steps = steps
		}
	}
	if f.cfg.ModelTokens > 0 {
		return f.trainBounded(ctx, user, items, ops)
	}
	res, err := f.st.Apply(ctx, user, ops)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	return res, nil
}

// trainBounded applies ops, the ops of items, in chunks that can each add
// at most a twentieth of the budget of tokens, keeping the budget before
// each: a large batch would otherwise have to make room for all its
// tokens at once, most of which the model has already.
func (f *Filter) trainBounded(ctx context.Context, user string, items []Item, ops []store.Op) ([]store.Result, error) {
	limit := max(uint64(f.cfg.ModelTokens)/20, 1)
	res := make([]store.Result, 0, len(ops))
	for start := 0; start < len(ops); {
		end, add := start, uint64(0)
		for end < len(ops) && (end == start || add+adds(&items[end]) <= limit) {
			add += adds(&items[end])
			end++
		}
		if err := f.keepBudget(ctx, user, add); err != nil {
			return res, fmt.Errorf("train: %w", err)
		}
		r, err := f.st.Apply(ctx, user, ops[start:end])
		res = append(res, r...)
		if err != nil {
			return res, fmt.Errorf("train: %w", err)
		}
		start = end
	}
	return res, nil
}

// adds returns the most tokens training it can add to a model.
func adds(it *Item) uint64 {
	if it.Class == "" {
		return 0
	}
	return uint64(len(it.Bag.Hashes()))
}

// keepBudget prunes user's model, when training that can add add tokens
// could take it past Config.ModelTokens, so that it stays within it. The
// prune makes that much room and a tenth of the budget more, so that the
// next batches need none. Concurrent batches of one
// model can each add their tokens before the other's prune: the bound
// holds to within what they add.
func (f *Filter) keepBudget(ctx context.Context, user string, add uint64) error {
	budget := uint64(f.cfg.ModelTokens)
	f.pruneMu.Lock()
	defer f.pruneMu.Unlock()
	t, err := f.st.Totals(ctx, user)
	if err != nil {
		return fmt.Errorf("totals: %w", err)
	}
	if t.Vocabulary+add <= budget {
		return nil
	}
	keep := min(budget-min(add, budget), budget-budget/10)
	if _, err := f.st.Prune(ctx, user, store.PruneRule{MaxTokens: max(keep, 1)}); err != nil {
		return fmt.Errorf("keep %d tokens: %w", budget, err)
	}
	return nil
}

// Learn trains raw as class for user; an empty class forgets it.
func (f *Filter) Learn(ctx context.Context, user string, raw []byte, class string) (store.Result, error) {
	p, err := f.Prepare(raw, false)
	if err != nil {
		return store.Result{}, err
	}
	res, err := f.Train(ctx, user, []Item{{Prepared: p, Class: class}})
	if err != nil {
		return store.Result{}, err
	}
	return res[0], nil
}

// Relabel trains raw as class for user because someone reported that it
// belongs there: the operation every report channel ends in. Like Learn,
// it untrains the message first if it was trained as another class, and
// changes nothing if it was trained as class already, all in one atomic
// store write.
//
// sig, unless zero, is the digest the message was classified under when
// it was delivered (the signature in X-Spamd-Result). When user has a
// record of sig, that record is relabeled even if the message's own
// digest now differs, for instance because a subject tag was added on
// delivery: so a message learned at delivery is found again. Relabel
// returns the digest it used.
func (f *Filter) Relabel(ctx context.Context, user string, raw []byte, class string, sig store.Digest) (store.Digest, store.Result, error) {
	p, err := f.Prepare(raw, false)
	if err != nil {
		return store.Digest{}, store.Result{}, err
	}
	if sig != (store.Digest{}) && sig != p.Digest {
		if err := store.ValidUser(user); err != nil {
			return store.Digest{}, store.Result{}, err
		}
		prev, err := f.st.Seen(ctx, user, sig)
		if err != nil {
			return store.Digest{}, store.Result{}, fmt.Errorf("seen record: %w", err)
		}
		if prev != "" {
			p.Digest = sig
		}
	}
	res, err := f.Train(ctx, user, []Item{{Prepared: p, Class: class}})
	if err != nil {
		return store.Digest{}, store.Result{}, err
	}
	return p.Digest, res[0], nil
}
