package filter

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/spamd/spamd/nb"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/tokenize"
)

// linky returns a message whose body has links links to distinct hosts
// and the same few words otherwise, so that only its links tell it apart.
func linky(n, links int) []byte {
	var b strings.Builder
	b.WriteString("please read this note about the weekly report")
	for i := range links {
		fmt.Fprintf(&b, " http://h%d.example.com/", (n*7+i)%13)
	}
	return msg(n, "note", b.String())
}

// measuresConfig is the default configuration with measures on, only the
// links family weighed.
func measuresConfig(kind nb.DensityKind) Config {
	cfg := DefaultConfig()
	cfg.NB.Density = kind
	cfg.MinTrained = 1
	for i := range cfg.MeasureWeights {
		cfg.MeasureWeights[i] = 0
	}
	cfg.MeasureWeights[tokenize.MeasureLinks] = 1
	return cfg
}

// TestMeasuresDecide trains spam with many links and ham with few, in
// messages otherwise alike, and checks that the measure decides and is
// explained, with Gaussian and Parzen densities, on each backend.
func TestMeasuresDecide(t *testing.T) {
	for _, kind := range []nb.DensityKind{nb.DensityGaussian, nb.DensityParzen} {
		for name, st := range stores(t) {
			t.Run(kind.String()+"/"+name, func(t *testing.T) {
				ctx := context.Background()
				f, err := New(st, measuresConfig(kind))
				if err != nil {
					t.Fatal(err)
				}
				for i := range 30 {
					if _, err := f.Learn(ctx, "", linky(i, 30+i%7), Spam); err != nil {
						t.Fatal(err)
					}
					if _, err := f.Learn(ctx, "", linky(1000+i, i%3), Ham); err != nil {
						t.Fatal(err)
					}
				}
				many, err := f.Classify(ctx, "", linky(5000, 33), ClassifyOptions{Explain: 5})
				if err != nil {
					t.Fatal(err)
				}
				few, err := f.Classify(ctx, "", linky(6000, 1), ClassifyOptions{Explain: 5})
				if err != nil {
					t.Fatal(err)
				}
				if !(many.Score > few.Score+2) {
					t.Errorf("33 links score %.2f, 1 link %.2f: the measure did not tell them apart", many.Score, few.Score)
				}
				if len(many.Measures) != 1 || many.Measures[0].Name != "links" || many.Measures[0].Text != "33" || !(many.Measures[0].Weight > 1) {
					t.Errorf("33 links explained by %+v", many.Measures)
				}
				if len(few.Measures) != 1 || !(few.Measures[0].Weight < -1) {
					t.Errorf("1 link explained by %+v", few.Measures)
				}
				if err := st.Check(ctx, ""); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// TestMeasuresOff checks that measures off, or weighed 0, change nothing
// of a verdict, though training records the values all the same.
func TestMeasuresOff(t *testing.T) {
	ctx := context.Background()
	scores := map[string]float64{}
	for _, tc := range []struct {
		name string
		cfg  func() Config
	}{
		{"off", func() Config { c := measuresConfig(nb.DensityParzen); c.NB.Density = nb.DensityOff; return c }},
		{"weighed 0", func() Config {
			c := measuresConfig(nb.DensityParzen)
			c.MeasureWeights[tokenize.MeasureLinks] = 0
			return c
		}},
	} {
		st := store.NewMemory()
		f, err := New(st, tc.cfg())
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			f.Learn(ctx, "", linky(i, 30), Spam)
			f.Learn(ctx, "", linky(100+i, 0), Ham)
		}
		v, err := f.Classify(ctx, "", linky(500, 30), ClassifyOptions{Explain: 5})
		if err != nil {
			t.Fatal(err)
		}
		if v.Measures != nil {
			t.Errorf("%s: measures explained: %+v", tc.name, v.Measures)
		}
		scores[tc.name] = v.Score
		tot, _ := st.Totals(ctx, "")
		if n := tot.Samples.Of(tokenize.MeasureLinks, tot.Index(Spam)).N; n != 10 {
			t.Errorf("%s: %d spam values of links recorded, want 10", tc.name, n)
		}
	}
	if scores["off"] != scores["weighed 0"] {
		t.Errorf("off scores %v, weighed 0 %v", scores["off"], scores["weighed 0"])
	}
}

// TestMeasuresRelabelDeliveredCopy relabels, as a report does, a copy of a
// message that delivery made longer, with another Received field and
// more recipients: the values recorded at training are taken back, not
// the copy's, so the samples end exactly as the copy's alone would have
// them.
func TestMeasuresRelabelDeliveredCopy(t *testing.T) {
	ctx := context.Background()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			f, err := New(st, measuresConfig(nb.DensityParzen))
			if err != nil {
				t.Fatal(err)
			}
			for i := range 5 {
				f.Learn(ctx, "", linky(i, 3), Ham)
			}
			before, _ := st.Totals(ctx, "")
			orig := linky(99, 20)
			p, err := f.Prepare(orig, false)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Learn(ctx, "", orig, Spam); err != nil {
				t.Fatal(err)
			}
			delivered := append([]byte("Received: from mx by local; Mon, 1 Jan 2024 10:00:00 +0000\r\nCc: a@example.org, b@example.org\r\n"), orig...)
			if _, _, err := f.Relabel(ctx, "", delivered, "", p.Digest); err != nil {
				t.Fatal(err)
			}
			after, _ := st.Totals(ctx, "")
			if d := after.Samples.Differences(before.Samples, after.Classes); len(d) > 0 {
				t.Errorf("after forgetting the delivered copy: %q", d)
			}
			if err := st.Check(ctx, ""); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestMeasuresUserPrior checks that a user who trained nothing is scored
// with the global densities, and one who trained the opposite with
// enough messages comes to score by their own.
func TestMeasuresUserPrior(t *testing.T) {
	ctx := context.Background()
	cfg := measuresConfig(nb.DensityGaussian)
	cfg.NB.MeasureLambda = 5
	f, err := New(store.NewMemory(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		f.Learn(ctx, "", linky(i, 30), Spam)
		f.Learn(ctx, "", linky(100+i, 0), Ham)
	}
	measure := func(user string) float64 {
		v, err := f.Classify(ctx, user, linky(7777, 30), ClassifyOptions{Explain: 3})
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Measures) != 1 {
			t.Fatalf("%q: measures %+v", user, v.Measures)
		}
		return v.Measures[0].Weight
	}
	global := measure("")
	if got := measure("nobody"); got != global {
		t.Errorf("a user without training: links weigh %v, the global model %v", got, global)
	}
	// bob wants many links and no few: his own values outweigh the
	// prior's five.
	for i := range 100 {
		f.Learn(ctx, "bob", linky(200+i, 30), Ham)
		f.Learn(ctx, "bob", linky(400+i, 0), Spam)
	}
	if got := measure("bob"); !(got < 0) || math.IsNaN(got) {
		t.Errorf("bob, who trained 100 hams of 30 links: links weigh %v toward spam", got)
	}
}
