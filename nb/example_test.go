package nb_test

import (
	"fmt"

	"github.com/spamd/spamd/nb"
)

// The multinomial example of docs/method.md: three spam messages "money
// click money", "money money discount", "money link" and one ham "work
// lunch money", then "money money money work lunch now" to classify.
func Example() {
	m := nb.Model{
		Classes:    []string{"ham", "spam"},
		Global:     nb.Totals{Messages: []float64{1, 3}, Tokens: []float64{3, 8}},
		Vocabulary: 6,
	}
	msg := []nb.Feature{
		{Hash: 1, Name: "money", Count: 3, Global: []float64{1, 5}},
		{Hash: 2, Name: "work", Count: 1, Global: []float64{1, 0}},
		{Hash: 3, Name: "lunch", Count: 1, Global: []float64{1, 0}},
		{Hash: 4, Name: "now", Count: 1}, // never seen: left out
	}
	r := m.Score(msg)
	fmt.Printf("P(spam|x) = %.3f, log-odds %.3f, %d features scored\n", r.Posterior[1], r.LogOdds("spam"), r.Used)

	// Losing a ham message costing three times as much as letting a spam
	// through asks for P(spam|x) > 0.75.
	loss, err := nb.CostRatio(m.Classes, "spam", "ham", 3, 1)
	if err != nil {
		panic(err)
	}
	d := nb.Decider{Loss: loss, Positive: []string{"spam"}, UnsureLow: nb.Logit(0.5), UnsureHigh: nb.Logit(0.9)}
	dec := d.Decide(r)
	fmt.Printf("threshold %.2f: %s, unsure %v\n", loss.Threshold(1, 0), dec.Class, dec.Unsure)
	// Output:
	// P(spam|x) = 0.690, log-odds 0.799, 3 features scored
	// threshold 0.75: ham, unsure true
}

func ExampleModel_Explain() {
	m := nb.Model{
		Classes:    []string{"ham", "spam"},
		Global:     nb.Totals{Messages: []float64{1, 3}, Tokens: []float64{3, 8}},
		Vocabulary: 6,
	}
	msg := []nb.Feature{
		{Hash: 1, Name: "money", Count: 3, Global: []float64{1, 5}},
		{Hash: 2, Name: "work", Count: 1, Global: []float64{1, 0}},
		{Hash: 3, Name: "lunch", Count: 1, Global: []float64{1, 0}},
	}
	ex := m.Explain(msg, 5)
	r := ex.Result
	fmt.Printf("prior %+.3f\n", r.LogPrior[1]-r.LogPrior[0])
	for i, class := range r.Classes {
		for _, c := range ex.Toward[i] {
			fmt.Printf("%s: %s ×%v %+.3f\n", class, c.Name, c.Count, c.Weight)
		}
	}
	fmt.Printf("log-odds of spam %+.3f\n", r.LogOdds("spam"))
	// Output:
	// prior +1.099
	// ham: work ×1 +1.135
	// ham: lunch ×1 +1.135
	// spam: money ×3 +1.970
	// log-odds of spam +0.799
}
