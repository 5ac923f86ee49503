package filter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/nb"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/badgerstore"
)

// msg builds a small message with the given subject and body.
func msg(n int, subject, body string) []byte {
	return fmt.Appendf(nil, "From: sender%d@example.com\r\nTo: user@example.org\r\nSubject: %s\r\nMessage-ID: <%d@example.com>\r\n\r\n%s\r\n", n, subject, n, body)
}

var (
	spamBodies = []string{
		"cheap pills online pharmacy discount viagra order now",
		"you won the lottery claim your cash prize now free money",
		"lose weight fast miracle pills order today discount",
		"free money cash prize winner claim online now",
	}
	hamBodies = []string{
		"the project meeting moved to thursday please review the agenda",
		"attached are the minutes from the design review of the parser",
		"can we discuss the release schedule at lunch tomorrow",
		"the build is green again after the fix to the test suite",
	}
)

// stores returns the backends every test runs against.
func stores(t *testing.T) map[string]store.Store {
	t.Helper()
	b, err := badgerstore.Open(context.Background(), "", badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return map[string]store.Store{"memory": store.NewMemory(), "badger": b}
}

// trainedFilter returns a filter over st trained on the spam and ham bodies.
func trainedFilter(t *testing.T, st store.Store) *Filter {
	t.Helper()
	return trainedFilterWith(t, st, DefaultConfig())
}

// trainedFilterWith is trainedFilter with the settings cfg.
func trainedFilterWith(t *testing.T, st store.Store, cfg Config) *Filter {
	t.Helper()
	f, err := New(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, b := range spamBodies {
		if _, err := f.Learn(ctx, "", msg(i, "offer", b), Spam); err != nil {
			t.Fatal(err)
		}
	}
	for i, b := range hamBodies {
		if _, err := f.Learn(ctx, "", msg(100+i, "work", b), Ham); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func TestClassify(t *testing.T) {
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			f := trainedFilter(t, st)
			ctx := context.Background()
			for _, tc := range []struct {
				name, subject, body, want string
			}{
				{"spam", "offer", "order cheap viagra pills now discount", Spam},
				{"ham", "work", "please review the parser design before the meeting", Ham},
			} {
				t.Run(tc.name, func(t *testing.T) {
					v, err := f.Classify(ctx, "", msg(999, tc.subject, tc.body), ClassifyOptions{Explain: 5})
					if err != nil {
						t.Fatal(err)
					}
					if v.Class != tc.want {
						t.Errorf("class = %s (score %.2f), want %s", v.Class, v.Score, tc.want)
					}
					if (tc.want == Spam) != (v.Score > 0) || (tc.want == Spam) != (v.Probability > 0.5) {
						t.Errorf("score %.3f and probability %.3f disagree with %s", v.Score, v.Probability, tc.want)
					}
					if math.Abs(v.Posterior[Spam]+v.Posterior[Ham]-1) > 1e-9 {
						t.Errorf("posteriors %v do not sum to 1", v.Posterior)
					}
					if len(v.Toward[tc.want]) == 0 {
						t.Errorf("no features explain the verdict %s: %v", tc.want, v.Toward)
					}
				})
			}
		})
	}
}

func TestMinTrained(t *testing.T) {
	ctx := context.Background()
	spam := msg(999, "offer", "cheap pills discount order now free money")
	// trainedFilter learns 4 messages of each class; alice learns 2 more
	// of each.
	for _, tc := range []struct {
		name   string
		min    int
		user   string
		unsure bool
	}{
		{"off", 0, "", false},
		{"met", 4, "", false},
		{"not met", 5, "", true},
		{"user and global together", 6, "alice", false},
		{"not met by the two together", 7, "alice", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Without the unsure band, only min_trained makes a verdict
			// unsure.
			cfg := DefaultConfig()
			cfg.UnsureLow, cfg.UnsureHigh = 0, 0
			f := trainedFilterWith(t, store.NewMemory(), cfg)
			for i := range 2 {
				if _, err := f.Learn(ctx, "alice", msg(500+i, "offer", spamBodies[i]+" again"), Spam); err != nil {
					t.Fatal(err)
				}
				if _, err := f.Learn(ctx, "alice", msg(600+i, "work", hamBodies[i]+" again"), Ham); err != nil {
					t.Fatal(err)
				}
			}
			f.cfg.MinTrained = tc.min
			v, err := f.Classify(ctx, tc.user, spam, ClassifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if v.Unsure != tc.unsure || v.Class != Spam {
				t.Errorf("class %s, unsure %v; want spam, unsure %v (score %.2f)", v.Class, v.Unsure, tc.unsure, v.Score)
			}
		})
	}
}

func TestMinTrainedIgnoresOtherClasses(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Classes = append(cfg.Classes, "newsletter") // named, never trained
	cfg.MinTrained = 4
	cfg.UnsureLow, cfg.UnsureHigh = 0, 0
	f := trainedFilterWith(t, store.NewMemory(), cfg)
	ctx := context.Background()
	v, err := f.Classify(ctx, "", msg(999, "offer", "cheap pills discount order now free money"), ClassifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v.Unsure {
		t.Errorf("unsure with 4 spam and 4 ham learned: an untrained third class held the verdict (%+v)", v)
	}
}

func TestTrainedAsOnlyWhenAsked(t *testing.T) {
	ctx := context.Background()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			f := trainedFilter(t, st)
			trained := msg(0, "offer", spamBodies[0])
			for _, tc := range []struct {
				o    ClassifyOptions
				want string
			}{
				{ClassifyOptions{}, ""},
				{ClassifyOptions{TrainedAs: true}, Spam},
			} {
				v, err := f.Classify(ctx, "", trained, tc.o)
				if err != nil {
					t.Fatal(err)
				}
				if v.TrainedAs != tc.want {
					t.Errorf("%+v: TrainedAs %q, want %q", tc.o, v.TrainedAs, tc.want)
				}
			}
		})
	}
}

// TestPrepareUnidentified: a message prepared without its digest scores
// as the same message prepared whole, and whatever needs the digest
// refuses it.
func TestPrepareUnidentified(t *testing.T) {
	ctx := context.Background()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			f := trainedFilter(t, st)
			raw := msg(0, "offer", spamBodies[0])
			whole, err := f.Prepare(raw, false)
			if err != nil {
				t.Fatal(err)
			}
			bare, err := f.PrepareWith(raw, PrepareOptions{Unidentified: true})
			if err != nil {
				t.Fatal(err)
			}
			if bare.Digest != (store.Digest{}) || bare.Mark != 0 {
				t.Errorf("unidentified: digest %x, mark %x; want zero", bare.Digest[:4], bare.Mark)
			}
			want, err := f.ClassifyPrepared(ctx, "", whole, ClassifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.ClassifyPrepared(ctx, "", bare, ClassifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Score != want.Score || got.Class != want.Class {
				t.Errorf("unidentified: %s %v, identified: %s %v", got.Class, got.Score, want.Class, want.Score)
			}
			for what, err := range map[string]error{
				"TrainedAs": func() error {
					_, err := f.ClassifyPrepared(ctx, "", bare, ClassifyOptions{TrainedAs: true})
					return err
				}(),
				"Train": func() error { _, err := f.Train(ctx, "", []Item{{Prepared: bare, Class: Ham}}); return err }(),
			} {
				if !errors.Is(err, ErrUnidentified) {
					t.Errorf("%s of an unidentified message: %v, want %v", what, err, ErrUnidentified)
				}
			}
			if tr, err := f.Classify(ctx, "", raw, ClassifyOptions{TrainedAs: true}); err != nil || tr.TrainedAs != Spam {
				t.Errorf("the refused training changed the model: trained as %q, %v", tr.TrainedAs, err)
			}
		})
	}
}

func TestTrainIsIdempotentAndRelabels(t *testing.T) {
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			f := trainedFilter(t, st)
			ctx := context.Background()
			m := msg(500, "hello", "a message reported twice and then relabeled")
			before, _ := st.Totals(ctx, "")

			steps := []struct {
				class       string
				wantChanged bool
				wantPrev    string
				spam, ham   uint64 // message counts after the step, relative to before
			}{
				{Spam, true, "", 1, 0},
				{Spam, false, Spam, 1, 0},
				{Ham, true, Spam, 0, 1},
				{"", true, Ham, 0, 0},
				{"", false, "", 0, 0},
			}
			for i, s := range steps {
				r, err := f.Learn(ctx, "", m, s.class)
				if err != nil {
					t.Fatal(err)
				}
				if r.Changed != s.wantChanged || r.Prev != s.wantPrev {
					t.Errorf("step %d (%q): result %+v, want changed %v prev %q", i, s.class, r, s.wantChanged, s.wantPrev)
				}
				tot, _ := st.Totals(ctx, "")
				if got := tot.Messages[tot.Index(Spam)] - before.Messages[before.Index(Spam)]; got != s.spam {
					t.Errorf("step %d: spam messages +%d, want +%d", i, got, s.spam)
				}
				if got := tot.Messages[tot.Index(Ham)] - before.Messages[before.Index(Ham)]; got != s.ham {
					t.Errorf("step %d: ham messages +%d, want +%d", i, got, s.ham)
				}
			}
			after, _ := st.Totals(ctx, "")
			for i := range after.Tokens {
				if after.Tokens[i] != before.Tokens[i] {
					t.Errorf("token totals %v after forgetting, want %v", after.Tokens, before.Tokens)
				}
			}
			if err := st.Check(ctx, ""); err != nil {
				t.Error(err)
			}
		})
	}
}

// The same message with CRLF or LF line endings and an mbox From line is
// one message to the seen records.
func TestDigestIgnoresTransport(t *testing.T) {
	f := trainedFilter(t, store.NewMemory())
	ctx := context.Background()
	crlf := msg(600, "hi", "same message two transports")
	lf := []byte("From sender@example.com Mon Jan  1 00:00:00 2002\n")
	for _, b := range crlf {
		if b != '\r' {
			lf = append(lf, b)
		}
	}
	if _, err := f.Learn(ctx, "", crlf, Spam); err != nil {
		t.Fatal(err)
	}
	r, err := f.Learn(ctx, "", lf, Spam)
	if err != nil {
		t.Fatal(err)
	}
	if r.Changed {
		t.Errorf("the LF copy was counted again: %+v", r)
	}
}

func TestUserModel(t *testing.T) {
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			f := trainedFilter(t, st)
			ctx := context.Background()
			m := msg(700, "newsletter", "weekly cash discount newsletter from the club")
			global, err := f.Classify(ctx, "", m, ClassifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// A user with no training of their own gets the global verdict.
			alice, err := f.Classify(ctx, "alice", m, ClassifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if alice.Score != global.Score {
				t.Errorf("untrained user scores %v, global %v", alice.Score, global.Score)
			}
			// Bob wants this newsletter: his reports move his model only.
			for i := range 5 {
				nm := msg(800+i, "newsletter", fmt.Sprintf("weekly cash discount newsletter from the club issue %d", i))
				if _, err := f.Learn(ctx, "bob", nm, Ham); err != nil {
					t.Fatal(err)
				}
			}
			bob, err := f.Classify(ctx, "bob", m, ClassifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !(bob.Score < global.Score) {
				t.Errorf("bob's ham reports did not lower his score: %v, global %v", bob.Score, global.Score)
			}
			again, _ := f.Classify(ctx, "alice", m, ClassifyOptions{})
			if again.Score != global.Score {
				t.Errorf("bob's reports changed alice's score: %v, want %v", again.Score, global.Score)
			}
		})
	}
}

func TestRefuses(t *testing.T) {
	f := trainedFilter(t, store.NewMemory())
	ctx := context.Background()
	m := msg(900, "x", "y")
	for _, user := range []string{"../x", "a/b", string(make([]byte, 10000)), "a\x00b"} {
		if _, err := f.Learn(ctx, user, m, Spam); !errors.Is(err, store.ErrInvalidUser) {
			t.Errorf("Learn as %.20q: err = %v, want ErrInvalidUser", user, err)
		}
		if _, err := f.Classify(ctx, user, m, ClassifyOptions{}); !errors.Is(err, store.ErrInvalidUser) {
			t.Errorf("Classify as %.20q: err = %v, want ErrInvalidUser", user, err)
		}
	}
	if _, err := f.Learn(ctx, "", m, "phishing"); !errors.Is(err, ErrUnknownClass) {
		t.Errorf("unknown class: err = %v, want ErrUnknownClass", err)
	}
}

func TestConfigSet(t *testing.T) {
	for _, tc := range []struct {
		key, value string
		ok         bool
	}{
		{"alpha", "0.5", true},
		{"alpha", "x", false},
		{"counts", "boolean", true},
		{"counts", "maybe", false},
		{"osb", "3", true},
		{"osb", "-1", false},
		{"stem", "false", true},
		{"headers", "subject+from", true},
		{"prior", "map", true},
		{"prior", "guess", false},
		{"nonsense", "1", false},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			c := DefaultConfig()
			err := c.Set(tc.key, tc.value)
			if (err == nil) != tc.ok {
				t.Fatalf("Set: err = %v, want ok %v", err, tc.ok)
			}
			if !tc.ok {
				if !errors.Is(err, ErrBadSetting) {
					t.Errorf("err = %v, want ErrBadSetting", err)
				}
				return
			}
			if got, _ := c.Get(tc.key); got != tc.value {
				t.Errorf("Get = %q, want %q", got, tc.value)
			}
		})
	}
	// Every key documents itself and round-trips its default.
	for _, k := range Keys() {
		c := DefaultConfig()
		v, err := c.Get(k)
		if err != nil || Doc(k) == "" {
			t.Errorf("%s: Get err %v, doc %q", k, err, Doc(k))
		}
		if err := c.Set(k, v); err != nil {
			t.Errorf("%s: default %q does not round-trip: %v", k, v, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Config)
	}{
		{"one class", func(c *Config) { c.Classes = []string{Spam} }},
		{"positive not a class", func(c *Config) { c.Positive = "phish" }},
		{"zero cost", func(c *Config) { c.CostFP = 0 }},
		{"infinite cost", func(c *Config) { c.CostFN = math.Inf(1) }},
		{"negative osb", func(c *Config) { c.Bag.OSB = -1 }},
		{"osb too wide", func(c *Config) { c.Bag.OSB = bow.MaxOSB + 1 }},
		{"negative min_spread", func(c *Config) { c.NB.MinSpread = -2 }},
		{"negative min_trained", func(c *Config) { c.MinTrained = -1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.change(&c)
			if err := c.Validate(); !errors.Is(err, ErrBadSetting) {
				t.Errorf("Validate = %v, want ErrBadSetting", err)
			}
		})
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("default config: %v", err)
	}
}

// TestModelTokens trains with a budget of tokens per model and checks
// that the model never holds more, that it keeps the tokens used most,
// and that each message's day and mark reach the store.
func TestModelTokens(t *testing.T) {
	const budget = 200
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.ModelTokens = budget
			f, err := New(st, cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			pruned, prev := false, uint64(0)
			for i := range 60 {
				// Every message has the common words and a few of its own.
				body := fmt.Sprintf("common words every message has rare%d unique%d token%d", i, i, i)
				class := []string{Spam, Ham}[i%2]
				p, err := f.Prepare(msg(i, "budget", body), false)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.Train(ctx, "alice", []Item{{Prepared: p, Class: class, Day: store.Day(1000 + i)}}); err != nil {
					t.Fatal(err)
				}
				tot, err := st.Totals(ctx, "alice")
				if err != nil {
					t.Fatal(err)
				}
				if tot.Vocabulary > budget {
					t.Fatalf("after message %d: %d tokens, budget %d", i, tot.Vocabulary, budget)
				}
				pruned = pruned || tot.Vocabulary <= prev
				prev = tot.Vocabulary
				if tot.LastDay != store.Day(1000+i) {
					t.Errorf("last day %d, want %d", tot.LastDay, 1000+i)
				}
			}
			if !pruned {
				t.Fatal("the budget never pruned")
			}
			if err := st.Check(ctx, "alice"); err != nil {
				t.Error(err)
			}
			// The words of every message stay; the oldest rare ones went.
			common, err := f.Prepare(msg(0, "budget", "common words every message has"), false)
			if err != nil {
				t.Fatal(err)
			}
			counts, err := st.Lookup(ctx, "alice", common.Bag.Hashes()[common.Bag.Head():])
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range counts {
				if c == nil {
					t.Errorf("common token %d was pruned", i)
				}
			}
			old, _ := f.Prepare(msg(0, "budget", "rare0 unique0 token0"), false)
			if counts, _ := st.Lookup(ctx, "alice", old.Bag.Hashes()[len(old.Bag.Hashes())-1:]); counts[0] != nil {
				t.Error("the first message's own token is kept")
			}
			var marks []uint64
			st.Dump(ctx, "alice", func(r store.Record) error {
				if r.Class != "" {
					marks = append(marks, r.Mark)
				}
				return nil
			})
			if len(marks) != 60 || marks[0] == 0 {
				t.Errorf("seen records' marks: %d of them, first %x", len(marks), marks[0])
			}
		})
	}
}

// TestRemap reads a stored row into the configured classes' order: a
// class the store lacks, or one past a row with trailing zeros dropped,
// reads as zero, whatever the buffer held before.
func TestRemap(t *testing.T) {
	w := func(units int64) uint64 { return uint64(units) } // a stored weight
	for _, tc := range []struct {
		name        string
		c           store.Counts
		idx         []int
		weights     bool
		counts, ws  []float64
		wantNilBoth bool
	}{
		{"never seen", nil, []int{0, 1}, true, nil, nil, true},
		{"same order", store.Counts{3, w(1 << 16), 5, w(-2 << 16)}, []int{0, 1}, true, []float64{3, 5}, []float64{1, -2}, false},
		{"store order swapped", store.Counts{3, w(1 << 16), 5, w(-2 << 16)}, []int{1, 0}, true, []float64{5, 3}, []float64{-2, 1}, false},
		{"class the store lacks", store.Counts{3, w(1 << 16)}, []int{0, -1}, true, []float64{3, 0}, []float64{1, 0}, false},
		{"trailing zeros dropped", store.Counts{3}, []int{0, 1}, true, []float64{3, 0}, []float64{0, 0}, false},
		{"no weights", store.Counts{3, w(1 << 16), 5}, []int{0, 1}, false, []float64{3, 5}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := []float64{9, 9, 9, 9} // what an earlier message left
			counts, ws := remap(dst, tc.c, tc.idx, tc.weights)
			if tc.wantNilBoth {
				if counts != nil || ws != nil {
					t.Fatalf("remap = %v, %v, want nils", counts, ws)
				}
				return
			}
			if !slices.Equal(counts, tc.counts) || !slices.Equal(ws, tc.ws) {
				t.Errorf("remap = %v, %v, want %v, %v", counts, ws, tc.counts, tc.ws)
			}
		})
	}
}

// TestRemapRows checks that remapRows, which reads a row of two classes
// with weights whole, sets every feature as remap does row by row, in the
// feature's own block of the buffer, for every class map and row length.
func TestRemapRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	value := func() uint64 {
		switch rng.IntN(4) {
		case 0:
			return 0
		case 1:
			return math.MaxUint64 - uint64(rng.IntN(3)) // a count past 2^63, or a negative weight
		case 2:
			return 1<<63 + uint64(rng.IntN(3))
		}
		return uint64(rng.IntN(1000))
	}
	for _, idx := range [][]int{{0, 1}, {1, 0}, {0, -1}, {-1, 1}, {1, 2}, {0, 0}, {2, 0, 1}, {0}} {
		for _, weights := range []bool{true, false} {
			for _, user := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/weights=%v/user=%v", idx, weights, user), func(t *testing.T) {
					rows := make([]store.Counts, 40)
					for i := range rows {
						if n := rng.IntN(8); n > 0 {
							rows[i] = make(store.Counts, n-1)
							for j := range rows[i] {
								rows[i][j] = value()
							}
						}
					}
					block := len(idx)
					if weights {
						block *= 2
					}
					off, width := 0, 2*block
					if user {
						off = block
					}
					buf := make([]float64, len(rows)*width)
					for i := range buf {
						buf[i] = 9 // what an earlier message left
					}
					fs := make([]nb.Feature, len(rows))
					remapRows(fs, rows, buf, off, width, idx, weights, user)
					for i, c := range rows {
						counts, ws := fs[i].Global, fs[i].Weight
						if user {
							counts, ws = fs[i].User, fs[i].UserWeight
						}
						wantCounts, wantWs := remap(make([]float64, block), c, idx, weights)
						if !slices.Equal(counts, wantCounts) || !slices.Equal(ws, wantWs) || cap(counts) != len(counts) || cap(ws) != len(ws) {
							t.Fatalf("row %v: remapRows set %v, %v, remap %v, %v", c, counts, ws, wantCounts, wantWs)
						}
						if counts != nil && &counts[0] != &buf[i*width+off] {
							t.Fatalf("row %d: counts not in its block", i)
						}
					}
				})
			}
		}
	}
}
