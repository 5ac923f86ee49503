package filter

import (
	"context"
	"math"
	"slices"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/nb"
	"github.com/spamd/spamd/store"
)

// learner computes the weight steps of a batch of messages trained for one
// user. Each message's step depends on how the model scores it, and the
// model it should be scored by is the one the batch's earlier messages
// left, which the store holds only once the whole batch is written: so the
// learner keeps what those messages add, counts and weights, and lays it
// over what the store returns. Scoring a message against a model that
// lacks the last few hundred messages would give every message of the
// first batches of a new model the same large step.
//
// A message of the batch that relabels one trained before is scored as if
// its old training were still there; the store takes it back exactly all
// the same.
type learner struct {
	f    *Filter
	user string
	// pending holds, per token, what the batch added so far: a count per
	// configured class, then a weight per class.
	pending  map[bow.Hash][]float64
	messages []float64 // per class
	tokens   []float64 // per class
	vocab    float64   // tokens the batch added that the store lacked
}

func (f *Filter) newLearner(user string) *learner {
	k := len(f.cfg.Classes)
	return &learner{
		f:        f,
		user:     user,
		pending:  make(map[bow.Hash][]float64),
		messages: make([]float64, k),
		tokens:   make([]float64, k),
	}
}

// steps scores p as the model stands, returns the steps that training it
// as class makes, and notes what its training adds for the next message.
func (l *learner) steps(ctx context.Context, p *Prepared, class string) ([]store.Step, error) {
	ci := slices.Index(l.f.cfg.Classes, class)
	sc := getScratch()
	defer putScratch(sc)
	m, fs, vs, scope, err := l.f.features(ctx, l.user, p, l.messages, ci, sc)
	if err != nil {
		return nil, err
	}
	l.overlay(m, fs, scope)
	// The measures are scored with the samples the store holds, without
	// the batch's earlier messages: a few values more move a density far
	// less than a few counts more move a rare token's.
	step := m.Score(fs, vs...).Step(slices.Index(scope, ci))
	if step[0] == nil {
		return nil, nil
	}
	// The store steps a bag's head and body; without SplitHeader the
	// model scores the whole message as one part.
	body := step[0]
	if l.f.cfg.SplitHeader {
		body = step[1]
	}
	var steps []store.Step
	k := len(l.f.cfg.Classes)
	for c, cc := range scope {
		s := store.Step{Class: l.f.cfg.Classes[cc], Head: units(step[0][c]), Body: units(body[c])}
		if s.Head != 0 || s.Body != 0 {
			steps = append(steps, s)
		}
		step[0][c], body[c] = float64(s.Head)*store.WeightUnit, float64(s.Body)*store.WeightUnit
	}

	hashes, counts := p.Bag.Hashes(), p.Bag.Counts()
	for i, h := range hashes {
		n := float64(counts[i])
		row := l.pending[h]
		if row == nil {
			row = make([]float64, 2*k)
			l.pending[h] = row
			if fs[i].Global == nil && (l.user == "" || fs[i].User == nil) {
				l.vocab++
			}
		}
		row[ci] += n
		l.tokens[ci] += n
		s := body
		if i < p.Bag.Head() {
			s = step[0]
		}
		for c, cc := range scope {
			row[k+cc] += s[c] * n
		}
	}
	l.messages[ci]++
	return steps, nil
}

// overlay adds what the batch trained so far to the model and the
// features the store returned, as the user's or the global model's; the
// model's classes are those of scope.
func (l *learner) overlay(m *nb.Model, fs []nb.Feature, scope []int) {
	if len(l.pending) == 0 {
		return
	}
	k := len(l.f.cfg.Classes)
	t := &m.Global
	if l.user != "" {
		if m.User == nil {
			m.User = &nb.Totals{Messages: make([]float64, len(scope)), Tokens: make([]float64, len(scope))}
		}
		t = m.User
	} else {
		m.Vocabulary += l.vocab
	}
	for c, cc := range scope {
		t.Messages[c] += l.messages[cc]
		t.Tokens[c] += l.tokens[cc]
	}
	for i := range fs {
		row := l.pending[bow.Hash(fs[i].Hash)]
		if row == nil {
			continue
		}
		counts, weights := &fs[i].Global, &fs[i].Weight
		if l.user != "" {
			counts, weights = &fs[i].User, &fs[i].UserWeight
		}
		*counts = plus(*counts, row[:k], scope)
		*weights = plus(*weights, row[k:], scope)
	}
}

// plus returns a new slice of a + b's entries at scope, a being nil or as
// long as scope.
func plus(a, b []float64, scope []int) []float64 {
	out := make([]float64, len(scope))
	for i, c := range scope {
		out[i] = b[c]
	}
	for i := range a {
		out[i] += a[i]
	}
	return out
}

// units converts a weight to the store's fixed point, rounding to the
// nearest unit; a step too large for it (which no sane rate makes) is
// capped.
func units(w float64) int64 {
	const limit = 1 << 52
	return int64(max(-limit, min(limit, math.Round(w/store.WeightUnit))))
}
