package eval

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spamd/spamd/filter"
)

// synthetic returns a corpus of n messages, about a third spam, whose
// words overlap enough that a filter makes some mistakes.
func synthetic(n int) *Corpus {
	r := rand.New(rand.NewPCG(7, 7))
	spamWords := strings.Fields("free money offer cash win prize cheap pills order now click")
	hamWords := strings.Fields("meeting agenda review project parser release lunch build test notes")
	both := strings.Fields("the a to of and you your please today week")
	c := &Corpus{}
	for i := range n {
		spam := r.IntN(3) == 0
		words := hamWords
		if spam {
			words = spamWords
		}
		var b strings.Builder
		for range 30 {
			switch r.IntN(10) {
			case 0, 1, 2, 3:
				b.WriteString(both[r.IntN(len(both))])
			case 4:
				// Noise from the other class.
				if spam {
					b.WriteString(hamWords[r.IntN(len(hamWords))])
				} else {
					b.WriteString(spamWords[r.IntN(len(spamWords))])
				}
			default:
				b.WriteString(words[r.IntN(len(words))])
			}
			b.WriteByte(' ')
		}
		raw := fmt.Sprintf("From: a%d@example.com\nSubject: message %d\nMessage-ID: <%d@x>\n\n%s\n", i, i, i, b.String())
		c.Messages = append(c.Messages, Message{Path: fmt.Sprintf("m%d", i), Spam: spam, Raw: []byte(raw)})
	}
	return c
}

func TestRunProtocols(t *testing.T) {
	c := synthetic(300)
	ctx := context.Background()
	for _, tc := range []struct {
		name        string
		o           func(*Options)
		wantTested  int
		wantTrained int
	}{
		{"split", func(o *Options) { o.Mode = "split" }, 60, 240},
		{"split train side", func(o *Options) { o.Mode = "split"; o.Part = "train" }, 48, 192},
		{"cv", func(o *Options) { o.Mode = "cv"; o.Folds = 5 }, 300, 240},
		{"online", func(o *Options) { o.Mode = "online" }, 300, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.o(&o)
			// Accuracy at even odds: the unsure band, and the default
			// cost's threshold of log-odds 3, hold back most spam of
			// 30-word messages, whose log-odds stay small.
			cfg := filter.DefaultConfig()
			cfg.UnsureLow, cfg.UnsureHigh = 0, 0
			cfg.CostFP, cfg.CostFN = 1, 1
			r, err := Run(ctx, c, cfg, o)
			if err != nil {
				t.Fatal(err)
			}
			if r.N != tc.wantTested || r.Trained != tc.wantTrained {
				t.Errorf("tested %d, trained %d; want %d, %d", r.N, r.Trained, tc.wantTested, tc.wantTrained)
			}
			if r.Accuracy < 0.8 {
				t.Errorf("accuracy %.3f on an easy corpus", r.Accuracy)
			}
			seen := map[int]bool{}
			for _, rec := range r.Records {
				if seen[rec.Pos] {
					t.Errorf("message %d tested twice", rec.Pos)
				}
				seen[rec.Pos] = true
			}
			if o.Mode == "split" && o.Part == "all" {
				for _, rec := range r.Records {
					if rec.Pos < 240 {
						t.Errorf("split tested message %d, which is on the training side", rec.Pos)
					}
				}
			}
			if o.Mode == "cv" && len(r.Folds) != 5 {
				t.Errorf("%d folds reported, want 5", len(r.Folds))
			}
		})
	}
}

func TestOnlineTrainRules(t *testing.T) {
	c := synthetic(300)
	// Without unsure verdicts, which on-error training also trains on,
	// the messages trained on-error are exactly the errors.
	cfg := filter.DefaultConfig()
	cfg.MinTrained = 0
	cfg.UnsureLow, cfg.UnsureHigh = 0, 0
	trained := map[string]int{}
	for _, rule := range []string{"all", "on-error", "thick:2"} {
		o := DefaultOptions()
		o.Mode, o.Train = "online", rule
		r, err := Run(context.Background(), c, cfg, o)
		if err != nil {
			t.Fatal(err)
		}
		trained[rule] = r.Trained
	}
	errs := func() int {
		o := DefaultOptions()
		o.Mode, o.Train = "online", "on-error"
		r, _ := Run(context.Background(), c, cfg, o)
		return r.FP + r.FN
	}()
	if trained["all"] != 300 || trained["on-error"] != errs || !(trained["on-error"] <= trained["thick:2"] && trained["thick:2"] < 300) {
		t.Errorf("trained %v with %d errors on-error; want all 300, on-error = errors ≤ thick < all", trained, errs)
	}
}

func TestStratifiedFolds(t *testing.T) {
	c := synthetic(300)
	idx := make([]int, 300)
	for i := range idx {
		idx[i] = i
	}
	folds := stratifiedFolds(c, idx, 10, 1)
	seen := map[int]int{}
	for k, f := range folds {
		spam := 0
		for _, i := range f {
			seen[i]++
			if c.Messages[i].Spam {
				spam++
			}
		}
		if len(f) < 29 || len(f) > 31 {
			t.Errorf("fold %d has %d messages", k, len(f))
		}
		if frac := float64(spam) / float64(len(f)); frac < 0.2 || frac > 0.47 {
			t.Errorf("fold %d is %.2f spam", k, frac)
		}
	}
	if len(seen) != 300 {
		t.Errorf("folds cover %d messages, want 300", len(seen))
	}
	for i, n := range seen {
		if n != 1 {
			t.Errorf("message %d in %d folds", i, n)
		}
	}
}

func TestSweepAndOutputs(t *testing.T) {
	c := synthetic(200)
	axes := []Axis{}
	for _, s := range []string{"alpha=0.1,1", "counts=tf,boolean"} {
		a, err := ParseAxis(s)
		if err != nil {
			t.Fatal(err)
		}
		axes = append(axes, a)
	}
	if _, err := ParseAxis("alpha=fast"); err == nil {
		t.Error("ParseAxis accepted a bad value")
	}
	rows, err := Sweep(context.Background(), c, filter.DefaultConfig(), axes, DefaultOptions(), "lam_pct", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4", len(rows))
	}
	for i := 1; i < len(rows); i++ {
		if rows[i-1].Report.LamPct > rows[i].Report.LamPct {
			t.Errorf("rows not sorted by lam%%: %v > %v", rows[i-1].Report.LamPct, rows[i].Report.LamPct)
		}
	}

	dir := t.TempDir()
	r, err := Run(context.Background(), c, filter.DefaultConfig(), DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	recs := filepath.Join(dir, "records.tsv")
	if err := WriteRecords(recs, r.Records); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(recs)
	if got := strings.Count(string(b), "\n"); got != len(r.Records)+1 {
		t.Errorf("records file has %d lines, want %d", got, len(r.Records)+1)
	}
	pts, err := LearningCurve(context.Background(), c, filter.DefaultConfig(), DefaultOptions(), []int{20, 80, 160}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 3 || pts[2].TestError > pts[0].TestError+0.05 {
		t.Errorf("learning curve %+v does not fall", pts)
	}
	for _, plot := range []error{
		PlotROC(dir, "test", r.Records),
		PlotHistogram(dir, "test", r.Records, Mark{"threshold", 0}),
		PlotCurve(dir, "test", pts),
	} {
		if plot != nil {
			t.Fatal(plot)
		}
	}
	for _, name := range []string{"roc", "scores", "learning"} {
		for _, ext := range []string{".svg", ".png"} {
			if fi, err := os.Stat(filepath.Join(dir, name+ext)); err != nil || fi.Size() == 0 {
				t.Errorf("%s%s not written: %v", name, ext, err)
			}
		}
	}
}

// threeClasses returns a corpus of n messages of spam, ham and
// newsletter, about a third each, every class with words of its own.
func threeClasses(n int) *Corpus {
	r := rand.New(rand.NewPCG(3, 3))
	words := map[string][]string{
		"spam":       strings.Fields("free money offer cash win prize cheap pills order now click"),
		"ham":        strings.Fields("meeting agenda review project parser release lunch build test notes"),
		"newsletter": strings.Fields("digest weekly issue subscribe unsubscribe edition readers column events"),
	}
	both := strings.Fields("the a to of and you your please today week")
	classes := []string{"spam", "ham", "newsletter"}
	c := &Corpus{}
	for i := range n {
		class := classes[r.IntN(3)]
		var b strings.Builder
		for range 30 {
			switch r.IntN(10) {
			case 0, 1, 2, 3:
				b.WriteString(both[r.IntN(len(both))])
			case 4:
				other := words[classes[r.IntN(3)]]
				b.WriteString(other[r.IntN(len(other))])
			default:
				b.WriteString(words[class][r.IntN(len(words[class]))])
			}
			b.WriteByte(' ')
		}
		raw := fmt.Sprintf("From: a%d@example.com\nSubject: message %d\nMessage-ID: <%d@x>\n\n%s\n", i, i, i, b.String())
		c.Messages = append(c.Messages, Message{Path: fmt.Sprintf("m%d", i), Class: class, Raw: []byte(raw)})
	}
	return c
}

// TestThreeClasses checks a run over three classes: the per-class
// figures and confusion matrix, spam against the rest for the spam
// metrics, and a corpus whose classes the filter lacks refused.
func TestThreeClasses(t *testing.T) {
	ctx := context.Background()
	c := threeClasses(600)
	cfg := filter.DefaultConfig()
	if _, err := Run(ctx, c, cfg, DefaultOptions()); err == nil || !strings.Contains(err.Error(), "newsletter") {
		t.Fatalf("a corpus of a class the filter lacks: %v", err)
	}
	if err := cfg.Set("classes", "ham+spam+newsletter"); err != nil {
		t.Fatal(err)
	}
	// Even costs, no unsure band: the default threshold holds back much
	// spam of 30-word messages (see TestRunProtocols).
	cfg.UnsureLow, cfg.UnsureHigh = 0, 0
	cfg.CostFP, cfg.CostFN = 1, 1
	for _, mode := range []string{"split", "cv", "online"} {
		t.Run(mode, func(t *testing.T) {
			o := DefaultOptions()
			o.Mode, o.Folds = mode, 3
			r, err := Run(ctx, c, cfg, o)
			if err != nil {
				t.Fatal(err)
			}
			cm := r.Classes
			if cm == nil {
				t.Fatal("no per-class figures")
			}
			if strings.Join(cm.Classes, ",") != "ham,newsletter,spam" || len(cm.Confusion) != 3 || len(cm.PerClass) != 3 {
				t.Fatalf("classes %q, matrix %v", cm.Classes, cm.Confusion)
			}
			total, right, spam := 0, 0, 0
			for g := range cm.Confusion {
				for d, n := range cm.Confusion[g] {
					total += n
					if g == d {
						right += n
					}
				}
				if cm.Classes[g] == "spam" {
					spam = cm.PerClass[g].N
				}
			}
			if total != r.N || spam != r.Spam || r.Ham != r.N-spam {
				t.Errorf("matrix of %d messages, %d spam; the run tested %d, %d spam, %d not", total, spam, r.N, r.Spam, r.Ham)
			}
			if !near(cm.Accuracy, float64(right)/float64(total)) || cm.Accuracy < 0.8 {
				t.Errorf("accuracy %v (%d of %d right)", cm.Accuracy, right, total)
			}
			for _, f := range cm.PerClass {
				if f.F1 < 0.7 || f.Precision <= 0 || f.Recall <= 0 {
					t.Errorf("%s: %+v", f.Class, f)
				}
			}
			if r.OneMinusAUCPct > 5 {
				t.Errorf("(1-AUC)%% of spam against the rest: %v", r.OneMinusAUCPct)
			}
		})
	}
	// Two classes keep the report they had.
	if r, err := Run(ctx, synthetic(200), filter.DefaultConfig(), DefaultOptions()); err != nil || r.Classes != nil {
		t.Errorf("two classes: per-class figures %+v (%v)", r.Classes, err)
	}
}

// TestOnlinePrune replays a synthetic corpus spread over 30 days of
// arrival and prunes it daily: the model ends smaller than without, and
// a prune outside an online run is refused.
func TestOnlinePrune(t *testing.T) {
	c := synthetic(300)
	for i := range c.Messages {
		day := time.Date(2007, 4, 1+i/10, 12, 0, 0, 0, time.UTC)
		c.Messages[i].Raw = append([]byte("Received: from x by y; "+day.Format(time.RFC1123Z)+"\n"), c.Messages[i].Raw...)
	}
	ctx := context.Background()
	run := func(p PruneSchedule, budget int) *Report {
		t.Helper()
		o := DefaultOptions()
		o.Mode, o.Prune = "online", p
		cfg := filter.DefaultConfig()
		cfg.ModelTokens = budget
		r, err := Run(ctx, c, cfg, o)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	whole := run(PruneSchedule{}, 0)
	pruned := run(PruneSchedule{Count: 1, Days: 3}, 0)
	bounded := run(PruneSchedule{}, 400)
	if whole.Pruned != 0 || pruned.Pruned == 0 || pruned.Tokens >= whole.Tokens || pruned.Tokens+pruned.Pruned < whole.Tokens {
		t.Errorf("tokens: %d without pruning, %d with (%d pruned)", whole.Tokens, pruned.Tokens, pruned.Pruned)
	}
	if bounded.PeakTokens > 400 || bounded.Tokens > bounded.PeakTokens {
		t.Errorf("a model bounded to 400 tokens held %d, %d at the end", bounded.PeakTokens, bounded.Tokens)
	}
	// Words seen once carry little on a corpus of thirty common words.
	if pruned.Accuracy < whole.Accuracy-0.03 || bounded.Accuracy < whole.Accuracy-0.03 {
		t.Errorf("accuracy %.3f pruned, %.3f bounded, %.3f whole", pruned.Accuracy, bounded.Accuracy, whole.Accuracy)
	}
	o := DefaultOptions()
	o.Prune = PruneSchedule{Days: 3}
	if _, err := Run(ctx, c, filter.DefaultConfig(), o); err == nil {
		t.Error("a daily prune in a split run is not refused")
	}
	o.Mode = "online"
	if _, err := Run(ctx, c, filter.DefaultConfig(), o); !errors.Is(err, ErrOptions) {
		t.Errorf("a daily prune of tokens seen at most 0 times: %v, want ErrOptions", err)
	}
}
