package filter

import (
	"context"
	"math"
	"math/bits"
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
	// pending holds, per token, where in rows what the batch added so
	// far is: a count per configured class, then a weight per class. One
	// array holds them all: a row each made one allocation a token.
	pending  pendingIndex
	rows     []float64
	hits     [][2]int  // overlay's, kept for the next message
	sums     []float64 // overlay's
	messages []float64 // per class
	tokens   []float64 // per class
	vocab    float64   // tokens the batch added that the store lacked
}

// A learner's arrays (its rows, its index, its sums) are sized by its
// batch, a few megabytes for a batch of hundreds of messages, and were
// most of the bytes a first training allocated. Released learners are
// kept in Filter.spare for the next batches, at most spareLearners of
// them and none with an array past maxSpareFloats (4 MB; a batch of 256
// messages of trec07-late needs a few hundred thousand): a sync.Pool,
// which drops what it holds at every other collection, dropped them
// between two batches.
const (
	spareLearners  = 2
	maxSpareFloats = 1 << 19
)

// newLearner returns a learner for a batch that trains at most tokens
// tokens, counting each message's distinct tokens. It goes back with
// release.
func (f *Filter) newLearner(user string, tokens int) *learner {
	k := len(f.cfg.Classes)
	var l *learner
	select {
	case l = <-f.spare:
	default:
		l = &learner{f: f}
	}
	l.user = user
	l.rows, l.hits, l.sums = l.rows[:0], l.hits[:0], l.sums[:0]
	l.messages = append(l.messages[:0], make([]float64, k)...)
	l.tokens = append(l.tokens[:0], make([]float64, k)...)
	l.vocab = 0
	slots := 4*min(tokens, maxPendingReserve)/3 + 1
	if cap(l.pending.slots) < slots {
		l.pending.slots = make([]pendingSlot, slots)
	} else {
		l.pending.slots = l.pending.slots[:slots]
		clear(l.pending.slots)
	}
	l.pending.n = 0
	return l
}

// release gives the learner back for the next batch.
func (l *learner) release() {
	if cap(l.rows) > maxSpareFloats || cap(l.sums) > maxSpareFloats || cap(l.pending.slots) > maxSpareFloats/2 {
		return
	}
	select {
	case l.f.spare <- l:
	default:
	}
}

// pendingIndex maps a token to where its row is in learner.rows: an
// open-addressed table (linear probing, at most three quarters full).
// Its lookups are two for every token of every message trained, the
// learner's main cost after the store's: with a Go map, which hashed
// each key again and grew from empty in every batch, a first training
// took a fifth longer (BenchmarkTrainMemory). This one starts at the
// size the batch needs. A token's hash is an xxhash digest, as even in
// its top bits as any mix would make it, and picks its home slot
// directly.
type pendingIndex struct {
	slots []pendingSlot
	n     int
}

// pendingSlot's at is the row's offset plus one: zero marks a free slot.
type pendingSlot struct {
	hash bow.Hash
	at   int
}

// maxPendingReserve caps what a learner's index is sized for up front,
// in tokens: a batch of many messages has far fewer distinct tokens than
// it has tokens, and the index grows past it as it needs.
const maxPendingReserve = 1 << 18

// find returns the slot of h, or the free slot where it would go.
func (x *pendingIndex) find(h bow.Hash) *pendingSlot {
	hi, _ := bits.Mul64(uint64(h), uint64(len(x.slots)))
	for i := int(hi); ; {
		if s := &x.slots[i]; s.at == 0 || s.hash == h {
			return s
		}
		if i++; i == len(x.slots) {
			i = 0
		}
	}
}

// get returns the offset of h's row, and whether it has one.
func (x *pendingIndex) get(h bow.Hash) (int, bool) {
	s := x.find(h)
	return s.at - 1, s.at != 0
}

// add records that h's row is at offset at; h must have none yet.
func (x *pendingIndex) add(h bow.Hash, at int) {
	if 4*(x.n+1) > 3*len(x.slots) {
		old := x.slots
		x.slots = make([]pendingSlot, 2*len(old))
		for _, s := range old {
			if s.at != 0 {
				*x.find(s.hash) = s
			}
		}
	}
	*x.find(h) = pendingSlot{hash: h, at: at + 1}
	x.n++
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
		at, ok := l.pending.get(h)
		if !ok {
			at = len(l.rows)
			l.growRows(2 * k)
			l.pending.add(h, at)
			if fs[i].Global == nil && (l.user == "" || fs[i].User == nil) {
				l.vocab++
			}
		}
		row := l.rows[at : at+2*k]
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

// growRows appends n zeros to l.rows. A batch's rows come to megabytes,
// which append grows by a quarter at a time and past maxSpareFloats, so
// that the learner was not kept: a first training of SpamAssassin's 4,837
// messages allocated 13 MB of arrays for rows of 2.7 MB at most, every
// page of each new array a page fault. Doubling makes the last array at
// most twice what the rows need, and all of them together about twice
// the last; it stops at maxSpareFloats while the rows fit in it.
func (l *learner) growRows(n int) {
	if need := len(l.rows) + n; need > cap(l.rows) {
		c := max(2*cap(l.rows), need, minRows)
		if need <= maxSpareFloats {
			c = min(c, maxSpareFloats)
		}
		rows := make([]float64, len(l.rows), c)
		copy(rows, l.rows)
		l.rows = rows
	}
	l.rows = append(l.rows, make([]float64, n)...)
}

// minRows is the first array's size: a message's rows, about.
const minRows = 1 << 12

// overlay adds what the batch trained so far to the model and the
// features the store returned, as the user's or the global model's; the
// model's classes are those of scope.
func (l *learner) overlay(m *nb.Model, fs []nb.Feature, scope []int) {
	if l.pending.n == 0 {
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
	// The features the batch added to, with where their rows are; the
	// sums then go in one array.
	l.hits = l.hits[:0]
	for i := range fs {
		if at, ok := l.pending.get(bow.Hash(fs[i].Hash)); ok {
			l.hits = append(l.hits, [2]int{i, at})
		}
	}
	l.sums = slices.Grow(l.sums[:0], 2*len(scope)*len(l.hits))[:2*len(scope)*len(l.hits)]
	sums := l.sums
	plus := func(a, b []float64) []float64 {
		out := sums[:len(scope):len(scope)]
		sums = sums[len(scope):]
		for i, c := range scope {
			out[i] = b[c]
		}
		for i := range a {
			out[i] += a[i]
		}
		return out
	}
	for _, hit := range l.hits {
		f, row := &fs[hit[0]], l.rows[hit[1]:hit[1]+2*k]
		counts, weights := &f.Global, &f.Weight
		if l.user != "" {
			counts, weights = &f.User, &f.UserWeight
		}
		*counts = plus(*counts, row[:k])
		*weights = plus(*weights, row[k:])
	}
}

// units converts a weight to the store's fixed point, rounding to the
// nearest unit; a step too large for it (which no sane rate makes) is
// capped.
func units(w float64) int64 {
	const limit = 1 << 52
	return int64(max(-limit, min(limit, math.Round(w/store.WeightUnit))))
}
