package filter

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/nb"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/tokenize"
)

// ErrBadSetting is returned by Config.Set for an unknown key or a value
// that does not parse.
var ErrBadSetting = errors.New("bad setting")

// Config is everything that shapes a filter's verdicts.
type Config struct {
	// Classes names the classes, at least two, in the order of Loss's rows
	// and columns. Default ham and spam. A class is scored once a model
	// (the user's or the global one) has learned a message of it; until
	// then it is left out, as if it were not listed, so that listing a
	// new class changes no verdict before it is trained.
	Classes []string
	// SpamClasses are the classes that count as spam, at least one, and
	// not all. Their posteriors summed are the spam probability
	// (Verdict.Probability), its log-odds the score (Verdict.Score),
	// the unsure band applies to it, and a message decided as one of
	// them is spam to the milter's SpamAssassin-compatible headers.
	// Default spam. Nil means Positive alone.
	SpamClasses []string
	// Positive is the spam class that spam reports and autolearn train
	// as, and whose evidence the runs of RunLength pool: the first of
	// SpamClasses. Default spam.
	Positive string
	// Negative is the class that ham reports and autolearn train as, and
	// that a false positive truly was. Default ham.
	Negative string
	// Tokenize selects what the tokenizer makes of a message.
	Tokenize tokenize.Options
	// Bag selects how tokens become features.
	Bag bow.Options
	// NB holds the classifier's settings.
	NB nb.Params
	// CostFP is the loss of deciding a spam class for a message of
	// another (a lost legitimate message), CostFN the loss of deciding
	// another class for a spam one (a spam let through); every other
	// mistake costs 1. Only their ratios matter: for two classes, the
	// decision is Positive when P(Positive|x) > CostFP/(CostFP+CostFN).
	// Loss, when set, replaces them.
	CostFP, CostFN float64
	// Loss, when not nil, is the loss matrix over Classes: Loss[i][k] is
	// the cost of deciding Classes[i] when the truth is Classes[k]. The
	// decision is the class of least expected loss. Its diagonal is 0 and
	// every other entry positive.
	Loss [][]float64
	// UnsureLow and UnsureHigh bound the unsure band on the log-odds of
	// the spam classes (Verdict.Score): a message scoring in
	// [UnsureLow, UnsureHigh) is unsure. Equal bounds turn the band off.
	UnsureLow, UnsureHigh float64
	// MinTrained is how many messages of the positive and the negative
	// class a model must have learned (a user's model counting the global
	// one's too) before its verdicts count: until then every verdict is
	// unsure, which the milter never rejects. A model of a dozen messages
	// is right most of the time, but not sure enough to turn mail away.
	MinTrained int
	// SplitHeader scores a message's header and body as two parts, each
	// length-normalized on its own (nb.Feature.Part), so that a long body
	// cannot drown the header's evidence of sender, route and recipient.
	SplitHeader bool
	// RunLength, when positive, makes every run of RunLength body tokens a
	// witness of its own: with the header, each run is scored as if it
	// were the whole body, and the runs are pooled as nb.Pool says, under
	// the hypothesis that one of them carries the message's payload. A
	// message is as positive as the whole of it or as its runs pooled,
	// whichever is more. Text added to a message, innocent words or
	// whole sentences, can outvote the payload in the whole body, but it
	// cannot change a run it is not in. A body of at most 1.5·RunLength
	// tokens is its own one run. Runs decide only: training learns from
	// whole messages. Zero turns it off.
	RunLength int
	// MeasureWeights weighs each measure's log density in the score
	// (nb.Value.Weight), by index (tokenize.MeasureSize...), when
	// NB.Density is not off; 0 leaves a measure out. Settings name them
	// by family: weight_size sets size's and words's.
	MeasureWeights [tokenize.NumMeasures]float64
	// ModelTokens, when positive, bounds each model's vocabulary: before
	// training a batch that could take a model past it, the model is
	// pruned of its least used and oldest tokens (store.PruneRule's
	// budget) down to ModelTokens less what the batch could add, and at
	// most to nine tenths of it, so that a prune is not needed again for a
	// while. Zero leaves models unbounded.
	ModelTokens int
}

// maxMeasureWeight bounds a measure's weight.
const maxMeasureWeight = 100

// DefaultConfig returns the settings the product ships with, each chosen on
// the training side of two corpora, the SpamAssassin public corpus and the
// later weeks of TREC 2007, online and in cross-validation, and kept only
// where it held on both (see docs/evaluation.md).
func DefaultConfig() Config {
	tok := tokenize.DefaultOptions()
	// HTML tag and attribute tokens lost ranking quality: newsletters that
	// are ham share the markup of spam.
	tok.HTML = false
	// Whole addresses, not only their domains: on the training side they
	// cut (1-AUC)% by 8-18% and the FN rate at FP <= 0.1% by 13-25% on
	// both corpora, online and in cross-validation (docs/evaluation.md).
	tok.Mailboxes = true
	tok.Headers = []string{
		"subject", "from", "to", "cc", "reply-to", "return-path", "message-id",
		"x-mailer", "user-agent", "content-type", "list-id",
	}
	return Config{
		Classes:     []string{Ham, Spam},
		SpamClasses: []string{Spam},
		Positive:    Spam,
		Negative:    Ham,
		Tokenize:    tok,
		// Presence counts with adjacent-pair bigrams: a word repeated in
		// one message is weak evidence, and pairs carry phrases.
		Bag: bow.Options{Boolean: true, OSB: 2},
		NB: nb.Params{
			Alpha: 0.01,
			// With length normalization the prior would weigh as much as a
			// few tokens; a uniform one keeps the decision on the evidence.
			Prior:     nb.PriorUniform,
			Normalize: 0.85,
			// Tokens less than e² ≈ 7 times likelier in one class than in
			// the other are left out: dropping them cut (1-AUC)% by a
			// fifth online and by 30% in cross-validation.
			MinSpread: 2,
			// The global model's p(w|c) is worth 30,000 tokens (some
			// hundred messages) in a user's estimates: the value with the
			// fewest weighted errors in the two-user report simulation
			// (docs/retraining.md).
			Lambda: 30000,
			// Learned weights on top of naive Bayes: on the training side
			// of trec07-late they cut (1-AUC)% from 0.026 to 0.006 online
			// and from 0.025 to 0.0006 in cross-validation, and the FN
			// rate at FP <= 0.1% from 3.2-5.6% to under 0.4%, while the
			// SpamAssassin corpus stayed where naive Bayes alone had it
			// (docs/evaluation.md). Mix 0.2 and rate 1 were the best
			// compromise of both corpora, online and in cross-validation.
			Discriminative: true,
			Mix:            0.2,
			Rate:           1,
			// A measure adds at most 2 nats between two classes: the
			// tails of a density, where a value far from a class's lies,
			// are where its sample says least.
			MeasureClip: 2,
		},
		// The learned weights make the log-odds close to calibrated, so
		// the cost sets the decision as the risk formula says: losing a
		// legitimate message costs as much as letting 20 spams through,
		// so a message is spam from P(spam|x) > 20/21, log-odds 3.0. On
		// the training side of both corpora no run needed more than 1.8
		// to keep false positives at or under 0.1%.
		CostFP: 20,
		CostFN: 1,
		// More likely spam than ham but short of the cost's threshold:
		// unsure, tagged and never rejected.
		UnsureLow:  0,
		UnsureHigh: 3,
		// No verdict counts before 10 messages of each class: online,
		// that removed the early false positives of a model of a dozen
		// messages (lam% 0.718 -> 0.571 on the training side; 5 gave
		// 0.563, the same within a message, and is less safe).
		MinTrained: 10,
		// Header and body as two witnesses: on the training side of both
		// corpora, online and in cross-validation, (1-AUC)% fell by 25-59%
		// (docs/evaluation.md).
		SplitHeader: true,
		// Measures (NB.Density) stay off: on the training side no setting
		// of them helped both corpora in both protocols. Turned on, only
		// the families that helped somewhere count: the text (capitals,
		// non-ASCII) helped SpamAssassin online, the time (hour, skew)
		// trec07-late online; the others, which tokens already tell
		// (hops, recipients, links, size, HTML), only added noise
		// (docs/evaluation.md).
		MeasureWeights: measureWeights(map[string]float64{"text": 0.2, "time": 0.2}),
	}
}

// reserved are the verdicts a message can have besides its class, which
// no class may be named.
var reserved = []string{"unsure", "skipped", "error"}

// measureWeights returns the weight of each measure from those of its
// family; a family not named weighs 0.
func measureWeights(byFamily map[string]float64) [tokenize.NumMeasures]float64 {
	var w [tokenize.NumMeasures]float64
	for i, m := range tokenize.Measures() {
		w[i] = byFamily[m.Family]
	}
	return w
}

// HasClass reports whether c is one of the configured classes.
func (c Config) HasClass(class string) bool { return slices.Contains(c.Classes, class) }

// Spam returns the classes that count as spam: SpamClasses, or Positive
// alone when it is nil.
func (c Config) Spam() []string {
	if len(c.SpamClasses) == 0 {
		return []string{c.Positive}
	}
	return c.SpamClasses
}

// IsSpam reports whether class counts as spam.
func (c Config) IsSpam(class string) bool { return slices.Contains(c.Spam(), class) }

// Validate reports the first setting that is out of range.
func (c Config) Validate() error {
	if len(c.Classes) < 2 {
		return fmt.Errorf("%w: need at least two classes, have %q", ErrBadSetting, c.Classes)
	}
	for i, class := range c.Classes {
		if err := store.ValidClass(class); err != nil {
			return fmt.Errorf("%w: classes: %v", ErrBadSetting, err)
		}
		if slices.Contains(c.Classes[:i], class) {
			return fmt.Errorf("%w: classes: %q is listed twice", ErrBadSetting, class)
		}
		if slices.Contains(reserved, class) {
			return fmt.Errorf("%w: classes: %q names a verdict, not a class", ErrBadSetting, class)
		}
	}
	for _, class := range c.Spam() {
		if !c.HasClass(class) {
			return fmt.Errorf("%w: spam_classes: %q is not one of the classes %s", ErrBadSetting, class, strings.Join(c.Classes, "+"))
		}
	}
	if len(c.Spam()) == len(c.Classes) {
		return fmt.Errorf("%w: spam_classes: not every class can be spam", ErrBadSetting)
	}
	if !c.IsSpam(c.Positive) {
		return fmt.Errorf("%w: positive class %q is not one of the spam classes %s", ErrBadSetting, c.Positive, strings.Join(c.Spam(), "+"))
	}
	if !c.HasClass(c.Negative) || c.IsSpam(c.Negative) {
		return fmt.Errorf("%w: negative: %q is not one of the classes %s that are not spam (set negative to the class ham reports train)", ErrBadSetting, c.Negative, strings.Join(c.Classes, "+"))
	}
	if !(c.CostFP > 0) || !(c.CostFN > 0) || math.IsInf(c.CostFP, 0) || math.IsInf(c.CostFN, 0) {
		return fmt.Errorf("%w: costs must be positive and finite (cost_fp %v, cost_fn %v)", ErrBadSetting, c.CostFP, c.CostFN)
	}
	if err := c.validLoss(); err != nil {
		return err
	}
	if c.MinTrained < 0 {
		return fmt.Errorf("%w: min_trained %d is negative", ErrBadSetting, c.MinTrained)
	}
	if c.ModelTokens < 0 {
		return fmt.Errorf("%w: model_tokens %d is negative", ErrBadSetting, c.ModelTokens)
	}
	for i, w := range c.MeasureWeights {
		if !(w >= 0 && w <= maxMeasureWeight) {
			return fmt.Errorf("%w: the weight of measure %s, %v, is not in [0, %d]", ErrBadSetting, tokenize.Measures()[i].Name, w, maxMeasureWeight)
		}
	}
	if c.Bag.OSB < 0 || c.Bag.OSB > bow.MaxOSB {
		return fmt.Errorf("%w: osb %d is not in [0, %d]", ErrBadSetting, c.Bag.OSB, bow.MaxOSB)
	}
	if err := c.NB.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrBadSetting, err)
	}
	if _, err := c.decider(); err != nil {
		return err
	}
	return nil
}

// validLoss checks Loss: square over Classes, 0 on the diagonal, positive
// and finite elsewhere. A mistake that cost nothing would tie its two
// classes, and the order of Classes would decide between them.
func (c Config) validLoss() error {
	if c.Loss == nil {
		return nil
	}
	k := len(c.Classes)
	if len(c.Loss) != k {
		return fmt.Errorf("%w: loss has %d rows for the %d classes %s", ErrBadSetting, len(c.Loss), k, strings.Join(c.Classes, "+"))
	}
	for i, row := range c.Loss {
		if len(row) != k {
			return fmt.Errorf("%w: loss row %d (deciding %s) has %d entries for the %d classes %s", ErrBadSetting, i+1, c.Classes[i], len(row), k, strings.Join(c.Classes, "+"))
		}
		for j, v := range row {
			switch {
			case i == j && v != 0:
				return fmt.Errorf("%w: loss: deciding %s when it is %s (row %d, column %d) costs %v; a right decision costs 0", ErrBadSetting, c.Classes[i], c.Classes[j], i+1, j+1, v)
			case i != j && !(v > 0 && v <= 1e100):
				return fmt.Errorf("%w: loss: deciding %s when it is %s (row %d, column %d) costs %v; a mistake costs more than 0 (and at most 1e100)", ErrBadSetting, c.Classes[i], c.Classes[j], i+1, j+1, v)
			}
		}
	}
	return nil
}

// LossMatrix returns the loss matrix over Classes: Loss, or the one
// CostFP and CostFN make.
func (c Config) LossMatrix() nb.Loss {
	k := len(c.Classes)
	l := make(nb.Loss, k)
	for i := range l {
		if c.Loss != nil {
			l[i] = slices.Clone(c.Loss[i])
			continue
		}
		l[i] = make([]float64, k)
		for j := range l[i] {
			switch si, sj := c.IsSpam(c.Classes[i]), c.IsSpam(c.Classes[j]); {
			case i == j:
			case si && !sj:
				l[i][j] = c.CostFP
			case !si && sj:
				l[i][j] = c.CostFN
			default:
				l[i][j] = 1
			}
		}
	}
	return l
}

func (c Config) decider() (nb.Decider, error) {
	d := nb.Decider{Loss: c.LossMatrix(), Positive: c.Spam(), UnsureLow: c.UnsureLow, UnsureHigh: c.UnsureHigh}
	if err := d.Validate(c.Classes); err != nil {
		return nb.Decider{}, fmt.Errorf("%w: %v", ErrBadSetting, err)
	}
	return d, nil
}

// Threshold returns the log-odds of Positive above which the loss matrix
// decides Positive over Negative, as it does when the other classes are
// improbable: log(CostFP/CostFN), or log(ℓ(Positive|Negative)/
// ℓ(Negative|Positive)) of Loss.
func (c Config) Threshold() float64 {
	if c.Loss == nil {
		return math.Log(c.CostFP / c.CostFN)
	}
	p, n := slices.Index(c.Classes, c.Positive), slices.Index(c.Classes, c.Negative)
	return math.Log(c.Loss[p][n] / c.Loss[n][p])
}

// Required returns the spam log-odds from which a verdict is spam: the
// Threshold, or the top of the unsure band when the band lies above it.
// The milter reports it as X-Spam-Status's required=.
func (c Config) Required() float64 {
	if c.UnsureHigh > c.UnsureLow {
		return max(c.Threshold(), c.UnsureHigh)
	}
	return c.Threshold()
}

// setting is one named, settable option.
type setting struct {
	doc string
	set func(c *Config, v string) error
	get func(c *Config) string
}

func floatSetting(doc string, p func(c *Config) *float64) setting {
	return setting{doc: doc,
		set: func(c *Config, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsNaN(f) {
				return fmt.Errorf("not a number: %q", v)
			}
			*p(c) = f
			return nil
		},
		get: func(c *Config) string { return strconv.FormatFloat(*p(c), 'g', -1, 64) },
	}
}

func intSetting(doc string, p func(c *Config) *int) setting {
	return setting{doc: doc,
		set: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return fmt.Errorf("not a whole number ≥ 0: %q", v)
			}
			*p(c) = n
			return nil
		},
		get: func(c *Config) string { return strconv.Itoa(*p(c)) },
	}
}

func boolSetting(doc string, p func(c *Config) *bool) setting {
	return setting{doc: doc,
		set: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("not true or false: %q", v)
			}
			*p(c) = b
			return nil
		},
		get: func(c *Config) string { return strconv.FormatBool(*p(c)) },
	}
}

func listSetting(doc string, p func(c *Config) *[]string) setting {
	return setting{doc: doc,
		set: func(c *Config, v string) error {
			l, err := parseList(v)
			if err != nil {
				return err
			}
			*p(c) = l
			return nil
		},
		get: func(c *Config) string { return strings.Join(*p(c), "+") },
	}
}

// parseList parses names separated by '+'.
func parseList(v string) ([]string, error) {
	var l []string
	for _, name := range strings.Split(v, "+") {
		if name = strings.TrimSpace(name); name == "" {
			return nil, fmt.Errorf("want names separated by '+', not %q", v)
		}
		l = append(l, name)
	}
	return l, nil
}

// parseMatrix parses a matrix of numbers, rows separated by ';' and
// entries by spaces; "" and "none" are no matrix.
func parseMatrix(v string) ([][]float64, error) {
	if v = strings.TrimSpace(v); v == "" || v == "none" {
		return nil, nil
	}
	var m [][]float64
	for _, row := range strings.Split(v, ";") {
		var r []float64
		for _, f := range strings.Fields(row) {
			x, err := strconv.ParseFloat(f, 64)
			if err != nil || math.IsNaN(x) {
				return nil, fmt.Errorf("not a number: %q", f)
			}
			r = append(r, x)
		}
		m = append(m, r)
	}
	return m, nil
}

// formatMatrix formats m as parseMatrix reads it, "none" for no matrix.
func formatMatrix(m [][]float64) string {
	if m == nil {
		return "none"
	}
	rows := make([]string, len(m))
	for i, r := range m {
		fs := make([]string, len(r))
		for j, x := range r {
			fs[j] = strconv.FormatFloat(x, 'g', -1, 64)
		}
		rows[i] = strings.Join(fs, " ")
	}
	return strings.Join(rows, "; ")
}

// settings names every option of a Config, so that the command line, the
// configuration file and evaluation sweeps all speak of them alike.
var settings = map[string]setting{
	"alpha":          floatSetting("additive smoothing α of p(w|c) (1 = Laplace)", func(c *Config) *float64 { return &c.NB.Alpha }),
	"prior_alpha":    floatSetting("Dirichlet pseudo-count per class of the MAP prior", func(c *Config) *float64 { return &c.NB.PriorAlpha }),
	"lambda":         floatSetting("tokens the global p(w|c) is worth in a user's estimate", func(c *Config) *float64 { return &c.NB.Lambda }),
	"lambda_prior":   floatSetting("messages the global P(c) is worth in a user's prior", func(c *Config) *float64 { return &c.NB.LambdaPrior }),
	"normalize":      floatSetting("length normalization exponent β (0 = off, 1 = average token)", func(c *Config) *float64 { return &c.NB.Normalize }),
	"top":            intSetting("score only the N most telling features (0 = all)", func(c *Config) *int { return &c.NB.TopN }),
	"complement":     boolSetting("complement naive Bayes", func(c *Config) *bool { return &c.NB.Complement }),
	"mu":             floatSetting("Dirichlet smoothing mass toward the pooled token distribution (0 = additive only)", func(c *Config) *float64 { return &c.NB.Mu }),
	"discriminative": boolSetting("add learned per-feature weights to naive Bayes (an online logistic regression with naive Bayes as its offset)", func(c *Config) *bool { return &c.NB.Discriminative }),
	"mix":            floatSetting("weight of naive Bayes's log-likelihood in the discriminative score (0 = 0.3)", func(c *Config) *float64 { return &c.NB.Mix }),
	"rate":           floatSetting("learning rate of the discriminative weights (0 = 1)", func(c *Config) *float64 { return &c.NB.Rate }),
	"run_length":     intSetting("score each run of N body tokens with the header as a witness of its own; pool the runs, one of which carries the payload (0 = off)", func(c *Config) *int { return &c.RunLength }),
	"min_spread":     floatSetting("leave out features whose log p(w|c) spreads less than this between classes, in nats", func(c *Config) *float64 { return &c.NB.MinSpread }),
	"min_count":      floatSetting("leave out features seen fewer times than this in training", func(c *Config) *float64 { return &c.NB.MinCount }),
	"cost_fp":        floatSetting("loss of a false positive (a message of another class decided as a spam class)", func(c *Config) *float64 { return &c.CostFP }),
	"cost_fn":        floatSetting("loss of a false negative (a message of a spam class decided as another class)", func(c *Config) *float64 { return &c.CostFN }),
	"classes":        listSetting("the classes, separated by '+'; one is scored once a model has learned it", func(c *Config) *[]string { return &c.Classes }),
	"negative": {doc: "the class ham reports and autolearn train as",
		set: func(c *Config, v string) error { c.Negative = v; return nil },
		get: func(c *Config) string { return c.Negative },
	},
	"spam_classes": {doc: "the classes that count as spam, separated by '+'; spam reports train the first",
		set: func(c *Config, v string) error {
			l, err := parseList(v)
			if err != nil {
				return err
			}
			if len(l) == 0 {
				return errors.New("name at least one class")
			}
			c.SpamClasses, c.Positive = l, l[0]
			return nil
		},
		get: func(c *Config) string { return strings.Join(c.Spam(), "+") },
	},
	"loss": {doc: "loss matrix over the classes: row i, column k is the cost of deciding class i when it is class k; rows separated by ';' (\"0 20; 1 0\"), none for cost_fp and cost_fn",
		set: func(c *Config, v string) error {
			l, err := parseMatrix(v)
			if err != nil {
				return err
			}
			c.Loss = l
			return nil
		},
		get: func(c *Config) string { return formatMatrix(c.Loss) },
	},
	"unsure_low":   floatSetting("lower bound of the unsure band on the spam log-odds", func(c *Config) *float64 { return &c.UnsureLow }),
	"model_tokens": intSetting("most tokens a model keeps; beyond them the least used and oldest go (0 = no bound)", func(c *Config) *int { return &c.ModelTokens }),
	"min_trained":  intSetting("messages of spam and of ham a model needs before its verdicts count (until then: unsure)", func(c *Config) *int { return &c.MinTrained }),
	"unsure_high":  floatSetting("upper bound of the unsure band on the spam log-odds", func(c *Config) *float64 { return &c.UnsureHigh }),
	"osb":          intSetting("sparse bigram window (0 = unigrams only)", func(c *Config) *int { return &c.Bag.OSB }),
	"stem":         boolSetting("Snowball stemming of body words", func(c *Config) *bool { return &c.Tokenize.Stem }),
	"field_names":  boolSetting("a token per header field name present", func(c *Config) *bool { return &c.Tokenize.FieldNames }),
	"mailboxes":    boolSetting("a token per whole e-mail address in address fields and Received recipients", func(c *Config) *bool { return &c.Tokenize.Mailboxes }),
	"split_header": boolSetting("length-normalize the header's and the body's evidence each on its own", func(c *Config) *bool { return &c.SplitHeader }),
	"received":     boolSetting("tokens from Received header fields", func(c *Config) *bool { return &c.Tokenize.Received }),
	"urls":         boolSetting("tokens for URL and e-mail address hosts", func(c *Config) *bool { return &c.Tokenize.URLs }),
	"html":         boolSetting("tokens for HTML tag and attribute names", func(c *Config) *bool { return &c.Tokenize.HTML }),
	"max_tokens":   intSetting("most tokens read from one message", func(c *Config) *int { return &c.Tokenize.MaxTokens }),
	"max_bytes":    intSetting("bytes of a message the tokenizer reads", func(c *Config) *int { return &c.Tokenize.MaxBytes }),
	"min_len":      intSetting("shortest body word kept, in runes", func(c *Config) *int { return &c.Tokenize.MinTokenLen }),
	"max_len":      intSetting("longest word kept, in runes", func(c *Config) *int { return &c.Tokenize.MaxTokenLen }),
	"prior": {doc: "class prior estimate: ml, map or uniform",
		set: func(c *Config, v string) error { return c.NB.Prior.UnmarshalText([]byte(v)) },
		get: func(c *Config) string { return c.NB.Prior.String() },
	},
	"counts": {doc: "feature counts: tf (occurrences) or boolean (presence)",
		set: func(c *Config, v string) error {
			switch v {
			case "tf":
				c.Bag.Boolean = false
			case "boolean":
				c.Bag.Boolean = true
			default:
				return fmt.Errorf("want tf or boolean, not %q", v)
			}
			return nil
		},
		get: func(c *Config) string {
			if c.Bag.Boolean {
				return "boolean"
			}
			return "tf"
		},
	},
	"headers": {doc: "header fields tokenized with their name as prefix, separated by '+' (none for no field, * for every other field)",
		set: func(c *Config, v string) error {
			c.Tokenize.Headers = []string{}
			if v == "none" || v == "" {
				return nil
			}
			for _, h := range strings.Split(v, "+") {
				c.Tokenize.Headers = append(c.Tokenize.Headers, strings.ToLower(strings.TrimSpace(h)))
			}
			return nil
		},
		get: func(c *Config) string {
			if len(c.Tokenize.Headers) == 0 {
				return "none"
			}
			return strings.Join(c.Tokenize.Headers, "+")
		},
	},
}

func init() {
	settings["measures"] = setting{doc: "continuous features of a message in the score: off, gaussian or parzen class densities",
		set: func(c *Config, v string) error { return c.NB.Density.UnmarshalText([]byte(v)) },
		get: func(c *Config) string { return c.NB.Density.String() },
	}
	settings["measure_alpha"] = floatSetting("pseudo-values, spread evenly over a measure's grid, smoothing each class's density (0 = 1)", func(c *Config) *float64 { return &c.NB.MeasureAlpha })
	settings["measure_clip"] = floatSetting("largest log ratio, in nats, one measure may add between two classes (0 = unbounded)", func(c *Config) *float64 { return &c.NB.MeasureClip })
	settings["measure_lambda"] = floatSetting("values the global density of a measure is worth in a user's (0 = 10)", func(c *Config) *float64 { return &c.NB.MeasureLambda })
	// A weight per family of measures: measures of one family tell of one
	// thing, and are weighed alike.
	families := map[string][]int{}
	var order []string
	for i, m := range tokenize.Measures() {
		if families[m.Family] == nil {
			order = append(order, m.Family)
		}
		families[m.Family] = append(families[m.Family], i)
	}
	for _, fam := range order {
		members := families[fam]
		var names []string
		for _, i := range members {
			names = append(names, tokenize.Measures()[i].Name)
		}
		settings["weight_"+fam] = setting{doc: fmt.Sprintf("weight of the %s measures (%s) in the score (0 = left out)", fam, strings.Join(names, ", ")),
			set: func(c *Config, v string) error {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil || !(f >= 0 && f <= maxMeasureWeight) {
					return fmt.Errorf("not a number in [0, %d]: %q", maxMeasureWeight, v)
				}
				for _, i := range members {
					c.MeasureWeights[i] = f
				}
				return nil
			},
			get: func(c *Config) string { return strconv.FormatFloat(c.MeasureWeights[members[0]], 'g', -1, 64) },
		}
	}
}

// Set changes the option named key to value. Keys are listed by Keys;
// values are numbers, true/false, or the words the option documents.
func (c *Config) Set(key, value string) error {
	s, ok := settings[key]
	if !ok {
		return fmt.Errorf("%w: unknown key %q (known: %s)", ErrBadSetting, key, strings.Join(Keys(), ", "))
	}
	if err := s.set(c, value); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadSetting, key, err)
	}
	return nil
}

// Get returns the value of the option named key, as Set takes it.
func (c *Config) Get(key string) (string, error) {
	s, ok := settings[key]
	if !ok {
		return "", fmt.Errorf("%w: unknown key %q", ErrBadSetting, key)
	}
	return s.get(c), nil
}

// Keys lists the names of all options, sorted.
func Keys() []string {
	ks := make([]string, 0, len(settings))
	for k := range settings {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Doc returns the one-line description of the option named key.
func Doc(key string) string { return settings[key].doc }
