// Package store persists the counts a naive Bayes model is made of: per
// user and class, how often each token was seen, how many tokens and
// messages were trained, and which message was trained as which class;
// beside each token's counts its discriminative weight per class, which
// the filter's online learner adjusts as each message is trained; and per
// measure (a continuous feature of a message, on a grid of levels) and
// class, the sample of the levels trained, from which a density is
// estimated.
//
// The Store interface is deliberately narrow (batched lookups, per-class
// totals, one atomic Apply for a batch of training operations) so that a
// networked backend such as Redis can implement it later. Two backends live
// here: Badger (package store/badgerstore, the default, embedded) and an
// in-memory one (Memory) for evaluation runs and tests. Package
// store/storetest holds the conformance suite every backend runs.
//
// User "" is the global model. Every other user name must pass ValidUser,
// which keeps a user inside its own key space.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spamd/spamd/bow"
)

// Digest identifies a message by its normalized content.
type Digest [32]byte

// Totals are the per-class totals of one user's model.
type Totals struct {
	// Classes lists the store's class names; every Counts slice returned
	// by the same store is indexed like it. Classes are only ever appended.
	Classes []string
	// Messages[i] is the number of messages trained as Classes[i].
	Messages []uint64
	// Tokens[i] is the sum of all token counts of Classes[i].
	Tokens []uint64
	// Vocabulary is the number of distinct tokens with a non-zero count in
	// some class.
	Vocabulary uint64
	// Samples holds the samples of the measures trained, by measure and
	// class index. It may be shared with the store and with other
	// callers: it must not be modified.
	Samples Samples
	// Forgotten[i] is the number of messages trained as Classes[i] whose
	// seen records Prune deleted: their counts stay in the model, so
	// Messages[i] is the seen records of Classes[i] plus Forgotten[i].
	Forgotten []uint64
	// LastDay is the latest day a message was trained on (Op.Day), 0 for
	// a model never trained.
	LastDay Day
}

// Day is a calendar day, counted from 1970-01-01 UTC; what training
// records of when a token and a message were last trained. A day, not a
// time, because pruning needs no finer grain and a day costs a few bits.
type Day uint32

// DayOf returns the day t falls on, in UTC.
func DayOf(t time.Time) Day {
	if t.Unix() < 0 {
		return 0
	}
	return Day(t.Unix() / 86400)
}

// Time returns midnight UTC at the start of d.
func (d Day) Time() time.Time { return time.Unix(int64(d)*86400, 0).UTC() }

// String returns d as YYYY-MM-DD.
func (d Day) String() string { return d.Time().Format(time.DateOnly) }

// Limits of measures and their levels.
const (
	// MaxMeasures bounds the measures: each Value.Measure is below it.
	MaxMeasures = 64
	// MaxLevels bounds the levels: each Value.Level is below it. With
	// levels this fine a sample's sum of squares stays below 2^53, exact
	// in a double, up to 2^33 messages.
	MaxLevels = 1024
)

// Value is a measure of a message: the index of the measure (as package
// tokenize numbers them) and the level of its value on the measure's
// grid.
type Value struct {
	Measure uint8
	Level   uint16
}

// Bin is the number of messages trained whose value of a measure is at
// one level.
type Bin struct {
	Level uint16
	Count uint64
}

// Sample is what training keeps of one measure's values in one class:
// their number, sum and sum of squares (a Gaussian's sufficient
// statistics) and how many there are at each level, a histogram of the
// levels with values, in ascending order. All are integers, so that
// untraining a message takes back exactly what training it added.
type Sample struct {
	N, Sum, SumSq uint64
	Bins          []Bin
}

// Samples holds a model's samples: Samples[m][c] is measure m's in class
// index c. A slice shorter than a measure or class index means an empty
// sample.
type Samples [][]Sample

// Of returns the sample of measure m in class c.
func (s Samples) Of(m, c int) Sample {
	if m < len(s) && c < len(s[m]) {
		return s[m][c]
	}
	return Sample{}
}

// Index returns the index of class in t.Classes, or -1.
func (t Totals) Index(class string) int {
	for i, c := range t.Classes {
		if c == class {
			return i
		}
	}
	return -1
}

// Counts holds what a user's model knows of one token: per class, how
// many times it was trained, and its discriminative weight. For class c
// (an index into Totals.Classes), Counts[2c] is the count and Counts[2c+1]
// the weight, an int64 held as its two's complement, in units of
// WeightUnit. Pairs rather than two halves keep every index valid when a
// class is registered later. A slice shorter than 2·len(Classes) means
// zero for what it lacks.
type Counts []uint64

// Count returns the token's count for class c, 0 for a class past the
// row's end or a negative one (a class the store does not know). One
// unsigned comparison finds both.
func (c Counts) Count(class int) uint64 {
	if i := 2 * class; uint(i) < uint(len(c)) {
		return c[i]
	}
	return 0
}

// Weight returns the token's weight for class c, in units of WeightUnit,
// 0 where Count returns 0 for lack of the class.
func (c Counts) Weight(class int) int64 {
	if i := 2*class + 1; uint(i) < uint(len(c)) {
		return int64(c[i])
	}
	return 0
}

// WeightUnit is what one unit of a stored weight is worth. Weights are
// fixed-point so that adding and later subtracting a message's step gives
// back exactly what was there, in whatever order other messages came in
// between; 2^-16 is far finer than any step that moves a verdict.
const WeightUnit = 1.0 / (1 << 16)

// Step is what training one message adds to the weights of its features
// for one class: each feature of the bag's head (bow.Bag.Head) gets
// Head·n added to its weight for Class, each feature of the rest Body·n,
// n being the feature's count in the bag. Both are in units of WeightUnit.
type Step struct {
	Class      string
	Head, Body int64
}

// Op is one training operation on one message.
type Op struct {
	// Digest identifies the message (its seen record).
	Digest Digest
	// Class is the class to train the message as; "" forgets it.
	Class string
	// Bag holds the message's features. It must be the same bag that was
	// added when the message was trained, since untraining subtracts it.
	Bag bow.Bag
	// Steps are the weight changes training the message makes, at most
	// one per class; they are ignored when Class is "". The seen record
	// keeps them, so that untraining the message (a relabel or a forget)
	// takes back exactly what its training added.
	Steps []Step
	// Values are the message's measures, in ascending order of measure,
	// each measure once; a measure the message lacks is left out. They
	// are ignored when Class is "". The seen record keeps them, like the
	// steps: untraining takes back the values recorded, whatever values
	// an op that relabels or forgets carries.
	Values []Value
	// Day is the day the message is trained on. Each token the op adds
	// to keeps the latest day it was trained on, and the seen record its
	// own, which Prune reads; the store takes it as given, and the
	// filter sets it to the day of training.
	Day Day
	// Mark identifies the message as every copy of it is marked, however
	// the path changed its headers (tokenize.Mark), or is 0. The seen
	// record keeps it, so that Check can find one message trained as two
	// classes under two digests.
	Mark uint64
}

// Result says what an Op did.
type Result struct {
	// Prev is the class the message was trained as before, "" if none.
	Prev string
	// Changed is false when the op was a no-op: training a message already
	// trained as that class, or forgetting one never trained.
	Changed bool
}

// Store is a per-user count store.
type Store interface {
	// Totals returns the per-class totals of user's model.
	Totals(ctx context.Context, user string) (Totals, error)
	// Lookup returns the counts and weights of each hash for user, in the
	// order of hashes; a token never seen has a nil Counts.
	Lookup(ctx context.Context, user string, hashes []bow.Hash) ([]Counts, error)
	// Seen returns the class a message was trained as for user, "" if none.
	Seen(ctx context.Context, user string, d Digest) (string, error)
	// Apply carries out ops for user in order. Each op is atomic: all its
	// count, weight and sample changes and its seen record, or none. An
	// op on a digest already trained as another class first subtracts the
	// bag from that class and the steps and values recorded when it was
	// trained (relabel); an op on a digest trained as the same class is a
	// no-op.
	// Counts never go below zero; weights are added and subtracted
	// exactly. A token's row is dropped once its counts and weights are
	// all zero. A call with an invalid user or class name (Op.Class or a
	// Step's) applies nothing. On any other error the results returned
	// are those of the ops applied before it, ops[:len(results)]; the rest
	// were not.
	Apply(ctx context.Context, user string, ops []Op) ([]Result, error)
	// Users lists the users with a model, the global model ("") included
	// if it has one.
	Users(ctx context.Context) ([]string, error)
	// Check verifies that user's seen records, class message counts and
	// token totals agree, and that the samples are exactly those of the
	// values the seen records hold, returning ErrInconsistent (wrapped,
	// with details) when they do not.
	Check(ctx context.Context, user string) error
	// Dump reads user's model from one consistent snapshot, taken while
	// training may go on, and calls fn with a header record naming the
	// classes, then every token row in ascending hash order, then every
	// seen record in ascending digest order. A user without a model gives
	// the header alone.
	Dump(ctx context.Context, user string, fn func(Record) error) error
	// Restore writes user's model from the records next returns, as Dump
	// gives them, until it returns io.EOF: a header first, then token
	// rows and seen records in any order. The totals and the samples are
	// recounted from them. It fails with ErrExists when the store holds a model of user.
	// A restore is all or nothing: one that fails, or whose process is
	// killed, leaves no model of user, and while it runs the user has
	// none either.
	Restore(ctx context.Context, user string, next func() (Record, error)) error
	// Prune deletes from user's model what rule selects: token rows, their
	// counts taken from the totals and the vocabulary in the same atomic
	// step, so that Check stays exact, and seen records, counted as
	// forgotten (Totals.Forgotten) and their values taken from the
	// samples. It may run while training goes on: a row is judged as it
	// is when it is deleted.
	Prune(ctx context.Context, user string, rule PruneRule) (PruneResult, error)
	// DeleteUser removes user's model whole. A crash midway leaves it
	// gone on the next open; deleting a model that does not exist does
	// nothing.
	DeleteUser(ctx context.Context, user string) error
	// Close releases the store.
	Close() error
}

// A Filler is a Store whose lookups can fill memory the caller reuses. A
// first training looks up the tokens of every message it learns in a
// Memory store, and the arrays Lookup returned were a third of the bytes
// it allocated.
type Filler interface {
	Store
	// LookupInto does what Lookup does, in b's memory: what it returns
	// is valid until b's next use.
	LookupInto(ctx context.Context, user string, hashes []bow.Hash, b *LookupBuffer) ([]Counts, error)
}

// LookupBuffer is the memory of one lookup after another (Filler). Its
// zero value is ready to use.
type LookupBuffer struct {
	counts []Counts // nil past len: a Filler sets only the rows handed out
	values []uint64
}

// Rows returns n nil rows in b's memory, for a Filler to set.
func (b *LookupBuffer) Rows(n int) []Counts {
	// The rows the last call handed out go, so that none keeps an
	// earlier lookup's arrays alive; past them the rows are nil still.
	clear(b.counts)
	if cap(b.counts) < n {
		b.counts = make([]Counts, n, grown(n, cap(b.counts)))
	}
	b.counts = b.counts[:n]
	return b.counts
}

// Values returns n zero values in b's memory for a Filler's rows to
// point into.
func (b *LookupBuffer) Values(n int) []uint64 {
	if cap(b.values) < n {
		b.values = make([]uint64, n, grown(n, cap(b.values)))
		return b.values
	}
	b.values = b.values[:n]
	clear(b.values)
	return b.values
}

// grown is the capacity an array of capacity c that must hold n grows
// to: twice c at least, so that lookups of messages of every size do not
// remake it for most of them.
func grown(n, c int) int { return max(n, 2*c) }

// Record is one part of a user's model as Dump reads it and Restore
// writes it: the header, a token's row or a message's seen record.
type Record struct {
	// Classes, in the header, names the classes that the rows and steps
	// after it are indexed by.
	Classes []string
	// Forgotten, in the header, is Totals.Forgotten, indexed like
	// Classes; nil when none was.
	Forgotten []uint64
	// Day is a token row's last day trained, or a seen record's day.
	Day Day
	// Mark is a seen record's Op.Mark.
	Mark uint64
	// Hash and Counts are a token's row, when Counts is not nil.
	Hash   bow.Hash
	Counts Counts
	// Digest, Class, Steps and Values are a seen record, when Class is
	// not "".
	Digest Digest
	Class  string
	Steps  []Step
	Values []Value
}

// Errors a Store returns, to be tested with errors.Is.
var (
	ErrInvalidUser  = errors.New("invalid user name")
	ErrInvalidClass = errors.New("invalid class name")
	ErrInconsistent = errors.New("store is inconsistent")
	ErrClosed       = errors.New("store is closed")
	ErrExists       = errors.New("a model of that user exists")
	// ErrReadOnly means the store refuses writes for now while reads go
	// on: its disk is below the free-space reserve, or its directory
	// cannot be written. It clears by itself once the fault does, so a
	// caller should queue the write or retry it later, not drop it.
	ErrReadOnly = errors.New("store is read-only")
	// ErrFailed means the store's storage is unusable in this process. A
	// backend that can reopens it by itself; until then, or if it
	// cannot, the process has to be restarted.
	ErrFailed = errors.New("store has failed")
)

// State is how much of its work a store can do.
type State int

const (
	// StateOK means reads and writes work.
	StateOK State = iota
	// StateDegraded means reads work and writes fail with ErrReadOnly.
	StateDegraded
	// StateFailed means reads that need the storage and all writes fail
	// with ErrFailed.
	StateFailed
)

// String returns "ok", "degraded" or "failed".
func (s State) String() string {
	switch s {
	case StateOK:
		return "ok"
	case StateDegraded:
		return "degraded"
	case StateFailed:
		return "failed"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Health is what a store knows of its own state.
type Health struct {
	State State
	// Reason says why the store is not ok; it is "" when it is.
	Reason string
	// Since is when the store entered State.
	Since time.Time
	// Faults counts, by kind, the faults the store met since it was
	// opened. The kinds are the backend's and documented by it; a kind
	// appears once it has happened.
	Faults map[string]uint64
}

// Sizer is implemented by a Store that can tell how much room one model
// takes in it.
type Sizer interface {
	// UserSize returns the bytes user's model takes, as the backend
	// counts them (its documentation says how).
	UserSize(ctx context.Context, user string) (int64, error)
}

// Drainer is a Store whose models can be handed out once, for a caller
// that drops it after writing them elsewhere (Draining).
type Drainer interface {
	Store
	// Drain is Dump, except that user's model is gone once it returns,
	// whatever it returns, and what its rows take may be given back as
	// they are handed out.
	Drain(ctx context.Context, user string, fn func(Record) error) error
}

// HealthReporter is implemented by a Store that watches its own storage
// for faults, such as the disk filling up, and reports what it found. A
// Store without it reports every fault as an error of the call that met
// it, and is to be taken as ok.
type HealthReporter interface {
	// Health returns the store's state as it last found it; it is cheap
	// enough to call for every health check.
	Health() Health
}

// MaxUserLen is the longest user name accepted.
const MaxUserLen = 128

// ValidUser reports whether name may be used as a user: "" (the global
// model), or 1 to MaxUserLen bytes of ASCII letters, digits and ._@+-,
// not starting with '.' or '-'. Names are case-sensitive. This keeps user
// names usable as keys and file names without ever reaching another user.
func ValidUser(name string) error {
	if name == "" {
		return nil
	}
	if len(name) > MaxUserLen {
		return fmt.Errorf("%w: longer than %d bytes", ErrInvalidUser, MaxUserLen)
	}
	if name[0] == '.' || name[0] == '-' {
		return fmt.Errorf("%w: %q starts with %q", ErrInvalidUser, name, name[0])
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '_', c == '@', c == '+', c == '-':
		default:
			return fmt.Errorf("%w: %q has the byte %q", ErrInvalidUser, name, c)
		}
	}
	return nil
}

// MaxClassLen is the longest class name accepted.
const MaxClassLen = 64

// ValidClass reports whether name may be used as a class: 1 to MaxClassLen
// bytes of lowercase ASCII letters, digits, '_' and '-'. Backends register
// a class on its first use, so a typo would otherwise become a class forever.
func ValidClass(name string) error {
	if name == "" || len(name) > MaxClassLen {
		return fmt.Errorf("%w: %q is not 1 to %d bytes long", ErrInvalidClass, name, MaxClassLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return fmt.Errorf("%w: %q has the byte %q", ErrInvalidClass, name, c)
		}
	}
	return nil
}

// ErrInvalidValue is returned for values out of order or off their
// grid.
var ErrInvalidValue = errors.New("invalid measure value")

// ValidOps reports the first op with an invalid class name, its own or a
// step's, or invalid values, so that a backend refuses the ops before it
// applies any.
func ValidOps(ops []Op) error {
	for i := range ops {
		if c := ops[i].Class; c != "" {
			if err := ValidClass(c); err != nil {
				return fmt.Errorf("op %d: %w", i, err)
			}
			if err := ValidValues(ops[i].Values); err != nil {
				return fmt.Errorf("op %d: %w", i, err)
			}
		}
		for _, s := range ops[i].Steps {
			if err := ValidClass(s.Class); err != nil {
				return fmt.Errorf("op %d: step: %w", i, err)
			}
		}
	}
	return nil
}

// ValidValues reports whether vs are values a store keeps: measures below
// MaxMeasures in ascending order, each once, levels below MaxLevels.
func ValidValues(vs []Value) error {
	for i, v := range vs {
		if v.Measure >= MaxMeasures || v.Level >= MaxLevels {
			return fmt.Errorf("%w: measure %d at level %d is off the grid (%d measures, %d levels)", ErrInvalidValue, v.Measure, v.Level, MaxMeasures, MaxLevels)
		}
		if i > 0 && v.Measure <= vs[i-1].Measure {
			return fmt.Errorf("%w: measure %d after measure %d: not in ascending order", ErrInvalidValue, v.Measure, vs[i-1].Measure)
		}
	}
	return nil
}

// SampleSet accumulates samples from values, as a backend recounts them
// to check or restore a model. The zero value is empty.
type SampleSet struct {
	// hist[m][c] is measure m's histogram in class c, dense.
	hist [][][]uint64
}

// Add adds (n = 1) or takes away (n = -1) the values of one message of
// class c; vs must be valid. Taking away more than was added is the
// caller's bug; counts wrap.
func (s *SampleSet) Add(c int, vs []Value, n int) {
	for _, v := range vs {
		m := int(v.Measure)
		for len(s.hist) <= m {
			s.hist = append(s.hist, nil)
		}
		for len(s.hist[m]) <= c {
			s.hist[m] = append(s.hist[m], nil)
		}
		if s.hist[m][c] == nil {
			s.hist[m][c] = make([]uint64, MaxLevels)
		}
		s.hist[m][c][v.Level] += uint64(n)
	}
}

// Of returns the sample accumulated of measure m in class c.
func (s *SampleSet) Of(m, c int) Sample {
	if m < len(s.hist) && c < len(s.hist[m]) && s.hist[m][c] != nil {
		return SampleOfHistogram(s.hist[m][c])
	}
	return Sample{}
}

// Samples returns the samples accumulated, Samples[m][c] for every
// measure and class added to.
func (s *SampleSet) Samples() Samples {
	out := make(Samples, len(s.hist))
	for m, byClass := range s.hist {
		out[m] = make([]Sample, len(byClass))
		for c, h := range byClass {
			out[m][c] = SampleOfHistogram(h)
		}
	}
	return out
}

// SampleOfHistogram returns the sample of a dense histogram, h[l] values
// at level l.
func SampleOfHistogram(h []uint64) Sample {
	var s Sample
	for l, n := range h {
		if n == 0 {
			continue
		}
		s.N += n
		s.Sum += n * uint64(l)
		s.SumSq += n * uint64(l) * uint64(l)
		s.Bins = append(s.Bins, Bin{Level: uint16(l), Count: n})
	}
	return s
}

// Empty reports whether s has no value.
func (s Sample) Empty() bool { return s.N == 0 && s.Sum == 0 && s.SumSq == 0 && len(s.Bins) == 0 }

// Equal reports whether s and o are the same sample.
func (s Sample) Equal(o Sample) bool {
	if s.N != o.N || s.Sum != o.Sum || s.SumSq != o.SumSq || len(s.Bins) != len(o.Bins) {
		return false
	}
	for i := range s.Bins {
		if s.Bins[i] != o.Bins[i] {
			return false
		}
	}
	return true
}

// Differences lists, in words, where two models' samples differ: those a
// store holds and those its seen records add up to. Names name the
// classes by index.
func (s Samples) Differences(recounted Samples, names []string) []string {
	var out []string
	ms := max(len(s), len(recounted))
	for m := range ms {
		cs := 0
		if m < len(s) {
			cs = len(s[m])
		}
		if m < len(recounted) {
			cs = max(cs, len(recounted[m]))
		}
		for c := range cs {
			got, want := s.Of(m, c), recounted.Of(m, c)
			if got.Equal(want) {
				continue
			}
			name := fmt.Sprintf("class %d", c)
			if c < len(names) {
				name = fmt.Sprintf("class %q", names[c])
			}
			out = append(out, fmt.Sprintf("measure %d of %s: stored n=%d sum=%d sumsq=%d in %d levels, the seen records add up to n=%d sum=%d sumsq=%d in %d levels",
				m, name, got.N, got.Sum, got.SumSq, len(got.Bins), want.N, want.Sum, want.SumSq, len(want.Bins)))
		}
	}
	return out
}
