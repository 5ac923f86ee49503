package filter

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/spamd/spamd/nb"
	"github.com/spamd/spamd/store"
)

var newsBodies = []string{
	"weekly digest of new arrivals issue subscribe unsubscribe readers",
	"this week in the shop digest new arrivals unsubscribe preferences",
	"the weekly readers digest events column unsubscribe",
	"newsletter issue of the month new arrivals subscribe",
}

// learnNews trains the newsletter bodies as class newsletter for user.
func learnNews(t *testing.T, f *Filter, user string) {
	t.Helper()
	for i, b := range newsBodies {
		if _, err := f.Learn(context.Background(), user, msg(200+i, "digest", b), "newsletter"); err != nil {
			t.Fatal(err)
		}
	}
}

func withClasses(t *testing.T, classes string) Config {
	t.Helper()
	cfg := DefaultConfig()
	if err := cfg.Set("classes", classes); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestUntrainedClassChangesNothing checks that listing a class no model
// has learned changes no score: a class without counts would make every
// token look telling and dilute the others.
func TestUntrainedClassChangesNothing(t *testing.T) {
	ctx := context.Background()
	two := trainedFilter(t, store.NewMemory())
	three := trainedFilterWith(t, store.NewMemory(), withClasses(t, "ham+spam+newsletter"))
	for _, user := range []string{"", "alice"} {
		for _, f := range []*Filter{two, three} {
			if _, err := f.Learn(ctx, "alice", msg(700, "offer", "cash prize claim now"), Spam); err != nil {
				t.Fatal(err)
			}
		}
		for i, body := range append(append([]string{}, spamBodies...), hamBodies...) {
			m := msg(900+i, "hello", body+" extra words")
			a, err := two.Classify(ctx, user, m, ClassifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			b, err := three.Classify(ctx, user, m, ClassifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if a.Score != b.Score || a.Class != b.Class || a.Unsure != b.Unsure || len(b.Posterior) != 2 {
				t.Errorf("user %q, message %d: two classes %+v, an untrained third %+v", user, i, a, b)
			}
		}
	}
}

// TestGainClass checks that a model trained on spam and ham learns a
// third class later and then reports it.
func TestGainClass(t *testing.T) {
	ctx := context.Background()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			f := trainedFilterWith(t, st, withClasses(t, "ham+spam+newsletter"))
			learnNews(t, f, "")
			v, err := f.Classify(ctx, "", msg(999, "digest", "the weekly digest of new arrivals unsubscribe"), ClassifyOptions{Explain: 3})
			if err != nil {
				t.Fatal(err)
			}
			if v.Class != "newsletter" || len(v.Posterior) != 3 {
				t.Fatalf("verdict %+v, want newsletter with three posteriors", v)
			}
			sum := 0.0
			for _, p := range v.Posterior {
				sum += p
			}
			if math.Abs(sum-1) > 1e-9 {
				t.Errorf("posteriors %v sum to %v", v.Posterior, sum)
			}
			// The spam probability is spam's posterior, the score its
			// log-odds against both other classes.
			p := v.Posterior[Spam]
			if v.Probability != p || math.Abs(v.Score-nb.Logit(p)) > 1e-6*math.Max(1, math.Abs(v.Score)) {
				t.Errorf("probability %v, score %v; P(spam) %v, logit %v", v.Probability, v.Score, p, nb.Logit(p))
			}
			// The explanation is of spam against its rival.
			if _, ok := v.Toward[Spam]; !ok || len(v.Toward) != 2 || len(v.Toward["newsletter"]) == 0 {
				t.Errorf("toward %v, want spam and newsletter", v.Toward)
			}
			// A user's model learns it from the global model, and the
			// user's own training.
			learnNews(t, f, "bob")
			if v, err := f.Classify(ctx, "bob", msg(998, "digest", "new arrivals this week digest"), ClassifyOptions{}); err != nil || v.Class != "newsletter" {
				t.Errorf("bob: %+v, %v", v, err)
			}
		})
	}
}

// TestSpamClasses checks that several classes can count as spam: their
// posteriors summed are the spam probability.
func TestSpamClasses(t *testing.T) {
	ctx := context.Background()
	cfg := withClasses(t, "ham+spam+newsletter")
	if err := cfg.Set("spam_classes", "spam+newsletter"); err != nil {
		t.Fatal(err)
	}
	f := trainedFilterWith(t, store.NewMemory(), cfg)
	learnNews(t, f, "")
	v, err := f.Classify(ctx, "", msg(999, "digest", "the weekly digest of new arrivals unsubscribe"), ClassifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := v.Posterior[Spam] + v.Posterior["newsletter"]
	if math.Abs(v.Probability-p) > 1e-12 || v.Score <= 0 || math.Abs(nb.Logit(v.Probability)-v.Score) > 1e-6*v.Score {
		t.Errorf("probability %v, score %v, posteriors %v", v.Probability, v.Score, v.Posterior)
	}
	if !f.Config().IsSpam("newsletter") || f.Config().Positive != Spam {
		t.Errorf("spam classes %q, positive %q", f.Config().Spam(), f.Config().Positive)
	}
}

// TestLossMatrix checks the loss setting: the matrix the costs make is
// the shorthand's, a matrix decides by least expected loss, and a bad
// one is refused.
func TestLossMatrix(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Set("loss", "0 1; 20 0"); err != nil {
		t.Fatal(err)
	}
	if got, _ := cfg.Get("loss"); got != "0 1; 20 0" {
		t.Errorf("Get(loss) = %q", got)
	}
	def := DefaultConfig()
	if got, want := cfg.LossMatrix(), def.LossMatrix(); len(got) != 2 || got[0][1] != want[0][1] || got[1][0] != want[1][0] {
		t.Errorf("matrix %v, the costs make %v", got, want)
	}
	if cfg.Threshold() != def.Threshold() || cfg.Required() != def.Required() {
		t.Errorf("threshold %v, required %v; the costs give %v, %v", cfg.Threshold(), cfg.Required(), def.Threshold(), def.Required())
	}
	// With three classes, the costs make: a spam class decided for
	// another costs cost_fp, another for a spam one cost_fn, the rest 1.
	three := withClasses(t, "ham+spam+newsletter")
	want := nb.Loss{{0, 1, 1}, {20, 0, 20}, {1, 1, 0}}
	for i, row := range three.LossMatrix() {
		for k, v := range row {
			if v != want[i][k] {
				t.Errorf("three classes: loss %v, want %v", three.LossMatrix(), want)
			}
		}
	}
	// A newsletter lost costs as much as a ham: deciding spam for one
	// needs the same evidence.
	for _, tc := range []struct{ name, loss string }{
		{"not square", "0 1; 20 0"},
		{"a short row", "0 1 1; 20 0; 1 1 0"},
		{"cost on the diagonal", "1 1 1; 20 0 20; 1 1 0"},
		{"a free mistake", "0 1 0; 20 0 20; 1 1 0"},
		{"a negative cost", "0 1 1; 20 0 -20; 1 1 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := withClasses(t, "ham+spam+newsletter")
			if err := c.Set("loss", tc.loss); err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(); !errors.Is(err, ErrBadSetting) || !strings.Contains(err.Error(), "loss") {
				t.Errorf("Validate = %v, want a loss error", err)
			}
		})
	}
	if err := cfg.Set("loss", "0 x"); err == nil {
		t.Error("a matrix with a word in it was taken")
	}
	// A matrix that makes a false positive cheap decides spam sooner:
	// below the cost's threshold of log 20, above the matrix's.
	ctx := context.Background()
	strict := DefaultConfig()
	strict.UnsureLow, strict.UnsureHigh = 0, 0
	st := store.NewMemory()
	f := trainedFilterWith(t, st, strict)
	m := msg(999, "hello", "cheap pills and the project meeting")
	a, err := f.Classify(ctx, "", m, ClassifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lax := strict
	lax.Loss = [][]float64{{0, 1}, {math.Exp(a.Score - 1), 0}}
	g, err := New(st, lax)
	if err != nil {
		t.Fatal(err)
	}
	b, err := g.Classify(ctx, "", m, ClassifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Score != b.Score || !(a.Score < strict.Threshold()) || a.Class != Ham || b.Class != Spam {
		t.Errorf("score %v: the costs decided %s, a matrix of threshold %v decided %s; want ham and spam", a.Score, a.Class, lax.Threshold(), b.Class)
	}
}

func TestClassSettings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Config) error
		ok     bool
	}{
		{"three classes", func(c *Config) error { return c.Set("classes", "ham+spam+phish") }, true},
		{"spam classes", func(c *Config) error {
			return errors.Join(c.Set("classes", "ham+spam+phish"), c.Set("spam_classes", "phish+spam"))
		}, true},
		{"without ham", func(c *Config) error {
			return errors.Join(c.Set("classes", "easy-ham+hard-ham+spam"), c.Set("negative", "easy-ham"))
		}, true},
		{"negative not a class", func(c *Config) error { return c.Set("classes", "easy-ham+spam") }, false},
		{"negative is spam", func(c *Config) error { return c.Set("spam_classes", "ham") }, false},
		{"every class spam", func(c *Config) error { return c.Set("spam_classes", "spam+ham") }, false},
		{"spam class not a class", func(c *Config) error { return c.Set("spam_classes", "phish") }, false},
		{"a class twice", func(c *Config) error { return c.Set("classes", "ham+spam+ham") }, false},
		{"a bad name", func(c *Config) error { return c.Set("classes", "ham+spam+News") }, false},
		{"a verdict's name", func(c *Config) error { return c.Set("classes", "ham+spam+unsure") }, false},
		{"an empty name", func(c *Config) error { return c.Set("classes", "ham++spam") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			err := tc.change(&c)
			if err == nil {
				err = c.Validate()
			}
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrBadSetting)) {
				t.Errorf("error %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// TestUnknownClass checks that training a class the filter is not
// configured with is refused, with what to do about it.
func TestUnknownClass(t *testing.T) {
	f := trainedFilter(t, store.NewMemory())
	_, err := f.Learn(context.Background(), "", msg(1, "digest", newsBodies[0]), "newsletter")
	if !errors.Is(err, ErrUnknownClass) || !strings.Contains(err.Error(), "ham+spam+newsletter") {
		t.Errorf("error %v, want ErrUnknownClass saying how to add it", err)
	}
}
