package eval

import (
	"math"
	"testing"
)

// recs builds records from a compact notation: s = spam, h = ham, with
// the score of each.
func recs(labels string, scores ...float64) []Record {
	rs := make([]Record, len(labels))
	for i := range labels {
		rs[i] = Record{Pos: i, Spam: labels[i] == 's', Score: scores[i], Verdict: "ham"}
		if scores[i] > 0 {
			rs[i].Verdict, rs[i].Flagged = "spam", true
		}
	}
	return rs
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestAUC(t *testing.T) {
	tests := []struct {
		name string
		rs   []Record
		want float64
	}{
		{"perfect", recs("hhss", -2, -1, 1, 2), 1},
		{"inverted", recs("sshh", -2, -1, 1, 2), 0},
		// Pairs (spam, ham): s@1 beats h@0; s@1 ties h@1 (½); s@3 beats
		// both: (1 + 0.5 + 2) / 4.
		{"one tie", recs("hhss", 0, 1, 1, 3), 3.5 / 4},
		{"all tied", recs("hsh", 5, 5, 5), 0.5},
		{"no ham", recs("ss", 1, 2), 0.5},
		// s@2 beats h@1; s@0 loses to h@1: 1/2.
		{"interleaved", recs("shs", 0, 1, 2), 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := AUC(tt.rs); !near(got, tt.want) {
				t.Errorf("AUC = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFNRateAtFP(t *testing.T) {
	tests := []struct {
		name   string
		rs     []Record
		target float64
		want   float64
	}{
		// The top ham scores 2; only the spam at 3 lies above it.
		{"one spam above top ham", recs("hhsss", 0, 2, 3, 1, 1), 0, 2.0 / 3},
		// A ham tied with the top spam: no threshold flags spam without it.
		{"tie at the top", recs("hs", 5, 5), 0, 1},
		// With a 50% FP budget the top ham may be flagged: every spam is
		// caught at threshold 1 (FP 1 of 2).
		{"budget admits one ham", recs("hhss", 0, 2, 1, 3), 0.5, 0},
		{"separable", recs("hhss", -1, 0, 1, 2), 0.001, 0},
		{"no spam", recs("hh", 0, 1), 0.001, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FNRateAtFP(tt.rs, tt.target); !near(got, tt.want) {
				t.Errorf("FNRateAtFP = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLam(t *testing.T) {
	// fpr = 1.5/101, fnr = 10.5/51: invlogit of the mean of the logits.
	fpr, fnr := 1.5/101, 10.5/51
	x := (math.Log(fpr/(1-fpr)) + math.Log(fnr/(1-fnr))) / 2
	want := 1 / (1 + math.Exp(-x))
	if got := Lam(1, 100, 10, 50); !near(got, want) {
		t.Errorf("Lam = %v, want %v", got, want)
	}
	// Equal rates give back that rate.
	if got := Lam(0, 0, 0, 0); !near(got, 0.5) {
		t.Errorf("Lam of nothing = %v, want 0.5", got)
	}
}

func TestCompute(t *testing.T) {
	rs := recs("hhhhssss", -3, -1, 0.5, -2, 2, 3, -0.5, 4)
	rs[1].Verdict, rs[1].Flagged = "unsure", false
	m := Compute(rs)
	want := Metrics{N: 8, Spam: 4, Ham: 4, TP: 3, FP: 1, TN: 3, FN: 1, Unsure: 1}
	if m.N != want.N || m.Spam != want.Spam || m.Ham != want.Ham || m.TP != want.TP ||
		m.FP != want.FP || m.TN != want.TN || m.FN != want.FN || m.Unsure != want.Unsure {
		t.Fatalf("counts = %+v, want %+v", m, want)
	}
	checks := []struct {
		name      string
		got, want float64
	}{
		{"accuracy", m.Accuracy, 6.0 / 8},
		{"precision", m.Precision, 3.0 / 4},
		{"recall", m.Recall, 3.0 / 4},
		{"specificity", m.Specificity, 3.0 / 4},
		{"f1", m.F1, 0.75},
		{"fp rate", m.FPRate, 0.25},
		{"fn rate", m.FNRate, 0.25},
		{"unsure rate", m.UnsureRate, 1.0 / 8},
		// Spam scores 2, 3, −0.5, 4 against ham −3, −1, 0.5, −2: the spam
		// at −0.5 loses to the ham at 0.5 only: 15/16.
		{"1-AUC%", m.OneMinusAUCPct, 100.0 / 16},
		// The top ham (0.5) lets 3 of 4 spams through above it.
		{"fn@fp0.1%", m.FNRateAtFP01Pct, 25},
		// P(ham|x) = σ(−score), summed over the four decided spam, over
		// its sum over all eight.
		{"expected fp rate", m.ExpectedFPRate, (sig(-0.5) + sig(-2) + sig(-3) + sig(-4)) /
			(sig(3) + sig(1) + sig(-0.5) + sig(2) + sig(-2) + sig(-3) + sig(0.5) + sig(-4))},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if !near(c.got, c.want) {
				t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
			}
		})
	}
	// log P(gold|x) for a spam at score 0 is log ½.
	if got := Compute(recs("s", 0)).LogLik; !near(got, math.Log(0.5)) {
		t.Errorf("log-likelihood at score 0 = %v, want log ½", got)
	}
}

func sig(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func TestROC(t *testing.T) {
	fpr, tpr := ROC(recs("hhss", 0, 1, 1, 3))
	wantF := []float64{0, 0, 0.5, 1}
	wantT := []float64{0, 0.5, 1, 1}
	if len(fpr) != len(wantF) {
		t.Fatalf("ROC has %d points, want %d: %v %v", len(fpr), len(wantF), fpr, tpr)
	}
	for i := range fpr {
		if !near(fpr[i], wantF[i]) || !near(tpr[i], wantT[i]) {
			t.Errorf("point %d = (%v, %v), want (%v, %v)", i, fpr[i], tpr[i], wantF[i], wantT[i])
		}
	}
}
