package filter

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
)

func TestRuns(t *testing.T) {
	tokens := func(head, body int) []string {
		var ts []string
		for i := range head {
			ts = append(ts, fmt.Sprintf("subject:h%d", i))
		}
		for i := range body {
			ts = append(ts, fmt.Sprintf("b%d", i))
		}
		return ts
	}
	for _, tc := range []struct {
		name          string
		head, body, w int
		want          []int // body tokens in each run
	}{
		{"off", 2, 100, 0, nil},
		{"one run", 2, 3, 4, nil},
		{"body of 1.5 runs", 2, 6, 4, nil},
		{"even", 2, 12, 4, []int{4, 4, 4}},
		{"tail of half a run stays", 2, 10, 4, []int{4, 4, 2}},
		{"short tail joins", 2, 9, 4, []int{4, 5}},
		{"no header", 0, 8, 3, []int{3, 3, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := tokens(tc.head, tc.body)
			bags := runs(ts, tc.head, tc.w, bow.Options{Boolean: true})
			var got []int
			for _, b := range bags {
				if b.Head() != tc.head {
					t.Errorf("run has %d header features, want %d", b.Head(), tc.head)
				}
				got = append(got, b.Len()-b.Head())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("runs of %v body tokens, want %v", got, tc.want)
			}
		})
	}
}

// TestRunsWitnessPaddedSpam checks that a spam padded with ham's words is
// judged by the run that carries its payload, and that runs only ever make
// a message more positive.
func TestRunsWitnessPaddedSpam(t *testing.T) {
	ctx := context.Background()
	pad := strings.Repeat(strings.Join(hamBodies, " ")+" ", 2)
	cfg := DefaultConfig()
	whole := trainedFilterWith(t, store.NewMemory(), cfg)
	cfg.RunLength = 8
	withRuns := trainedFilterWith(t, store.NewMemory(), cfg)
	for _, tc := range []struct {
		name, subject, body string
		spam                bool
	}{
		{"padded spam", "offer", spamBodies[0] + " " + pad, true},
		{"spam", "offer", spamBodies[1], true},
		{"ham", "work", hamBodies[0] + " " + hamBodies[2], false},
		{"long ham", "work", pad, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := msg(500, tc.subject, tc.body)
			vw, err := whole.Classify(ctx, "", m, ClassifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			v, err := withRuns.Classify(ctx, "", m, ClassifyOptions{Explain: 3})
			if err != nil {
				t.Fatal(err)
			}
			if v.Score < vw.Score {
				t.Errorf("score with runs %.3f < %.3f without", v.Score, vw.Score)
			}
			if (v.Score > 0) != tc.spam {
				t.Errorf("score with runs %.3f, want spam %v", v.Score, tc.spam)
			}
			if tc.name == "padded spam" && vw.Score > 0 {
				t.Errorf("padding did not hide the spam from the whole message (score %.3f): the test proves nothing", vw.Score)
			}
		})
	}
}
