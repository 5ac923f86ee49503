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
	"github.com/spamd/spamd/tokenize"
)

// ErrBadSetting is returned by Config.Set for an unknown key or a value
// that does not parse.
var ErrBadSetting = errors.New("bad setting")

// Config is everything that shapes a filter's verdicts.
type Config struct {
	// Classes names the classes, at least two. Default ham and spam.
	Classes []string
	// Positive is the class the score and probability are about and the
	// unsure band applies to. Default spam.
	Positive string
	// Negative is the class a false positive truly was. Default ham.
	Negative string
	// Tokenize selects what the tokenizer makes of a message.
	Tokenize tokenize.Options
	// Bag selects how tokens become features.
	Bag bow.Options
	// NB holds the classifier's settings.
	NB nb.Params
	// CostFP is the loss of deciding Positive for a Negative message (a
	// lost legitimate message), CostFN the loss of letting a Positive one
	// through; only their ratio matters. The decision is Positive when
	// P(Positive|x) > CostFP/(CostFP+CostFN).
	CostFP, CostFN float64
	// UnsureLow and UnsureHigh bound the unsure band on the log-odds of
	// Positive: a message scoring in [UnsureLow, UnsureHigh) is unsure.
	// Equal bounds turn the band off.
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
}

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
		Classes:  []string{Ham, Spam},
		Positive: Spam,
		Negative: Ham,
		Tokenize: tok,
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
	}
}

// HasClass reports whether c is one of the configured classes.
func (c Config) HasClass(class string) bool { return slices.Contains(c.Classes, class) }

// Validate reports the first setting that is out of range.
func (c Config) Validate() error {
	if len(c.Classes) < 2 {
		return fmt.Errorf("%w: need at least two classes, have %q", ErrBadSetting, c.Classes)
	}
	if !c.HasClass(c.Positive) || !c.HasClass(c.Negative) || c.Positive == c.Negative {
		return fmt.Errorf("%w: positive %q and negative %q must be two of the classes %q", ErrBadSetting, c.Positive, c.Negative, c.Classes)
	}
	if !(c.CostFP > 0) || !(c.CostFN > 0) || math.IsInf(c.CostFP, 0) || math.IsInf(c.CostFN, 0) {
		return fmt.Errorf("%w: costs must be positive and finite (cost_fp %v, cost_fn %v)", ErrBadSetting, c.CostFP, c.CostFN)
	}
	if c.MinTrained < 0 {
		return fmt.Errorf("%w: min_trained %d is negative", ErrBadSetting, c.MinTrained)
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

func (c Config) decider() (nb.Decider, error) {
	loss, err := nb.CostRatio(c.Classes, c.Positive, c.Negative, c.CostFP, c.CostFN)
	if err != nil {
		return nb.Decider{}, fmt.Errorf("%w: %v", ErrBadSetting, err)
	}
	d := nb.Decider{Loss: loss, Positive: c.Positive, UnsureLow: c.UnsureLow, UnsureHigh: c.UnsureHigh}
	if err := d.Validate(c.Classes); err != nil {
		return nb.Decider{}, fmt.Errorf("%w: %v", ErrBadSetting, err)
	}
	return d, nil
}

// Threshold returns the log-odds of Positive above which the loss matrix
// decides Positive (for two classes): log(CostFP/CostFN).
func (c Config) Threshold() float64 { return math.Log(c.CostFP / c.CostFN) }

// Required returns the log-odds of Positive from which a verdict is spam:
// the cost's Threshold, or the top of the unsure band when the band lies
// above it. The milter reports it as X-Spam-Status's required=.
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
	"cost_fp":        floatSetting("loss of a false positive (a ham decided spam)", func(c *Config) *float64 { return &c.CostFP }),
	"cost_fn":        floatSetting("loss of a false negative (a spam let through)", func(c *Config) *float64 { return &c.CostFN }),
	"unsure_low":     floatSetting("lower bound of the unsure band on the spam log-odds", func(c *Config) *float64 { return &c.UnsureLow }),
	"min_trained":    intSetting("messages of spam and of ham a model needs before its verdicts count (until then: unsure)", func(c *Config) *int { return &c.MinTrained }),
	"unsure_high":    floatSetting("upper bound of the unsure band on the spam log-odds", func(c *Config) *float64 { return &c.UnsureHigh }),
	"osb":            intSetting("sparse bigram window (0 = unigrams only)", func(c *Config) *int { return &c.Bag.OSB }),
	"stem":           boolSetting("Snowball stemming of body words", func(c *Config) *bool { return &c.Tokenize.Stem }),
	"field_names":    boolSetting("a token per header field name present", func(c *Config) *bool { return &c.Tokenize.FieldNames }),
	"mailboxes":      boolSetting("a token per whole e-mail address in address fields and Received recipients", func(c *Config) *bool { return &c.Tokenize.Mailboxes }),
	"split_header":   boolSetting("length-normalize the header's and the body's evidence each on its own", func(c *Config) *bool { return &c.SplitHeader }),
	"received":       boolSetting("tokens from Received header fields", func(c *Config) *bool { return &c.Tokenize.Received }),
	"urls":           boolSetting("tokens for URL and e-mail address hosts", func(c *Config) *bool { return &c.Tokenize.URLs }),
	"html":           boolSetting("tokens for HTML tag and attribute names", func(c *Config) *bool { return &c.Tokenize.HTML }),
	"max_tokens":     intSetting("most tokens read from one message", func(c *Config) *int { return &c.Tokenize.MaxTokens }),
	"max_bytes":      intSetting("bytes of a message the tokenizer reads", func(c *Config) *int { return &c.Tokenize.MaxBytes }),
	"min_len":        intSetting("shortest body word kept, in runes", func(c *Config) *int { return &c.Tokenize.MinTokenLen }),
	"max_len":        intSetting("longest word kept, in runes", func(c *Config) *int { return &c.Tokenize.MaxTokenLen }),
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
