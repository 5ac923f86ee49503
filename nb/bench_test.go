package nb

import (
	"math/rand/v2"
	"testing"
)

// benchModel is a two-class global model of the size of a real one.
func benchModel(p Params) *Model {
	return &Model{
		Classes:    []string{"ham", "spam"},
		Params:     p,
		Global:     Totals{Messages: []float64{6000, 4000}, Tokens: []float64{2.4e6, 1.2e6}},
		Vocabulary: 400000,
	}
}

// withUser adds a user who trained a few dozen messages to m.
func withUser(m *Model) *Model {
	m.User = &Totals{Messages: []float64{40, 25}, Tokens: []float64{16000, 7000}}
	return m
}

// benchMessages returns n messages of size distinct features each, with
// counts drawn the way token counts fall: most tokens rare, a tenth never
// seen, some seen by the user.
func benchMessages(n, size int) [][]Feature {
	rng := rand.New(rand.NewPCG(3, 4))
	count := func() float64 { return float64(int(1 / (rng.Float64() + 1e-3))) }
	msgs := make([][]Feature, n)
	for i := range msgs {
		msg := make([]Feature, size)
		for j := range msg {
			msg[j] = Feature{Hash: rng.Uint64(), Count: float64(1 + rng.IntN(3))}
			if rng.IntN(10) > 0 {
				msg[j].Global = []float64{count() - 1, count() - 1}
			}
			if rng.IntN(4) == 0 {
				msg[j].User = []float64{count() - 1, count() - 1}
			}
		}
		msgs[i] = msg
	}
	return msgs
}

// BenchmarkScore scores messages of 300 distinct features.
func BenchmarkScore(b *testing.B) {
	for _, bc := range []struct {
		name string
		m    *Model
	}{
		{"global", benchModel(Params{})},
		{"user", withUser(benchModel(Params{}))},
		{"top15", benchModel(Params{TopN: 15})},
		{"complement", benchModel(Params{Complement: true})},
		{"normalize", benchModel(Params{Normalize: 0.5})},
		{"all", withUser(benchModel(Params{TopN: 15, Complement: true, Normalize: 0.5, MinCount: 2, Prior: PriorMAP}))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			msgs := benchMessages(64, 300)
			var r Result
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				bc.m.ScoreInto(&r, msgs[i%len(msgs)])
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "messages/s")
		})
	}
}

// BenchmarkExplain explains messages of 450 distinct features, keeping the
// top 5 per class, as the milter's header does.
func BenchmarkExplain(b *testing.B) {
	m := benchModel(Params{})
	msgs := benchMessages(64, 450)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m.Explain(msgs[i%len(msgs)], 5)
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "messages/s")
}
