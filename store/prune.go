package store

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// PruneRule says what Prune deletes from a model. Its parts add up: a
// token goes if the age rule or the budget selects it. The zero rule
// deletes nothing.
type PruneRule struct {
	// MaxCount and Before are the age rule: a token whose counts over all
	// classes add up to at most MaxCount and that was last trained before
	// the day Before goes. Tokens seen a few times long ago carry little:
	// the model would barely miss them, and they are most of a model's
	// rows. Before 0 turns the rule off. A row of day 0, whose day is
	// unknown (restored from a dump of version 1 or 2), is never old: it
	// goes by the budget alone until training gives it a day.
	MaxCount uint64
	Before   Day
	// MaxTokens, when not 0, is the budget: while more than MaxTokens
	// tokens are left, tokens go in ascending order of their total count
	// and then of their last day, the least used and the oldest first.
	// Tokens that tie with the last one to go all go, so a model ends
	// below the budget, never above it: a little below when its tokens
	// were trained over many days, far below when most were trained on
	// one day (a first training), where every token seen once that day
	// ties.
	MaxTokens uint64
	// SeenBefore, when not 0, deletes the seen records of messages trained
	// before that day, but not those of day 0, whose day is unknown.
	// Their counts stay in the model, but they can no longer be
	// untrained: a later report of one such message as the other class
	// trains it as new, leaving it counted in both classes.
	SeenBefore Day
}

// Zero reports whether r deletes nothing.
func (r PruneRule) Zero() bool { return r.Before == 0 && r.MaxTokens == 0 && r.SeenBefore == 0 }

// Tokens reports whether r may delete token rows.
func (r PruneRule) Tokens() bool { return r.Before != 0 || r.MaxTokens != 0 }

// ages reports whether the age rule selects a row of total counts last
// trained on day. Day 0 is no day: an old dump's rows have it, and
// deleting them all as ancient would empty a restored model of its rare
// tokens the first time it is pruned.
func (r PruneRule) ages(total uint64, day Day) bool {
	return r.Before != 0 && total <= r.MaxCount && day != 0 && day < r.Before
}

// PruneResult says what Prune did.
type PruneResult struct {
	// Tokens and Seen are the token rows and seen records deleted.
	Tokens, Seen uint64
	// Vocabulary is the model's vocabulary after.
	Vocabulary uint64
}

// PruneCensus counts a model's rows by total count and last day: what a
// backend gathers in a first pass over the rows when the rule has a
// budget, to find where the budget cuts. The zero value is empty.
type PruneCensus struct {
	rows map[pruneKey]uint64
	n    uint64
}

type pruneKey struct {
	total uint64
	day   Day
}

// Add counts a row of counts c last trained on day. A row the age rule
// deletes anyway, or one without a count (a row of weights alone, which
// is not part of the vocabulary), is left out by the caller's rule:
// Add takes the rule to know.
func (p *PruneCensus) Add(r PruneRule, c Counts, day Day) {
	total, any := countTotal(c)
	if !any || r.ages(total, day) {
		return
	}
	if p.rows == nil {
		p.rows = make(map[pruneKey]uint64)
	}
	p.rows[pruneKey{total, day}]++
	p.n++
}

// countTotal returns the sum of c's counts over its classes, and whether any
// is not zero.
func countTotal(c Counts) (uint64, bool) {
	var t uint64
	for i := 0; i < len(c); i += 2 {
		t += c[i]
	}
	return t, t != 0
}

// PrunePlan decides, row by row, what a rule deletes from one model.
type PrunePlan struct {
	rule PruneRule
	// cut is the last (total, day) the budget deletes, inclusive; budget
	// is false when it deletes nothing.
	cut    pruneKey
	budget bool
}

// Plan returns the plan of r for a model whose rows, those the age rule
// keeps, census counted (it may be empty when r has no budget).
func (r PruneRule) Plan(census *PruneCensus) PrunePlan {
	p := PrunePlan{rule: r}
	if r.MaxTokens == 0 || census.n <= r.MaxTokens {
		return p
	}
	keys := slices.SortedFunc(maps.Keys(census.rows), func(a, b pruneKey) int {
		return cmp.Or(cmp.Compare(a.total, b.total), cmp.Compare(a.day, b.day))
	})
	left := census.n
	for _, k := range keys {
		left -= census.rows[k]
		p.cut, p.budget = k, true
		if left <= r.MaxTokens {
			break
		}
	}
	return p
}

// Drop reports whether the plan deletes a row of counts c last trained on
// day, as the row is now.
func (p PrunePlan) Drop(c Counts, day Day) bool {
	total, any := countTotal(c)
	if !any {
		// Weights whose counts went back to zero (the message that
		// brought the token untrained): nothing to keep them for.
		return p.rule.Tokens()
	}
	if p.rule.ages(total, day) {
		return true
	}
	if !p.budget {
		return false
	}
	return total < p.cut.total || total == p.cut.total && day <= p.cut.day
}

// Cut returns the last (total count, last day) the budget deletes, in
// the order of total then day, and whether it deletes any: what a backend
// that judges rows elsewhere (a Redis script) needs besides the rule.
func (p PrunePlan) Cut() (total uint64, day Day, ok bool) {
	return p.cut.total, p.cut.day, p.budget
}

// DropSeen reports whether the plan deletes a seen record of day; one of
// day 0 has no known day and stays, as a row of day 0 does.
func (p PrunePlan) DropSeen(day Day) bool { return day != 0 && day < p.rule.SeenBefore }

// String describes the rule in words, for logs and the CLI.
func (r PruneRule) String() string {
	if r.Zero() {
		return "nothing"
	}
	s := ""
	add := func(part string) {
		if s != "" {
			s += "; "
		}
		s += part
	}
	if r.Before != 0 {
		add(fmt.Sprintf("tokens seen at most %d times, last before %s", r.MaxCount, r.Before))
	}
	if r.MaxTokens != 0 {
		add(fmt.Sprintf("the least used tokens beyond %d", r.MaxTokens))
	}
	if r.SeenBefore != 0 {
		add(fmt.Sprintf("seen records before %s", r.SeenBefore))
	}
	return s
}

// MarkSet finds, among a model's seen records, one message trained as two
// classes under two digests: records with the same mark (Op.Mark) and
// different classes. It is what Check adds to its recount. The zero value
// is empty.
type MarkSet struct {
	marks map[uint64]map[string]Digest // mark → class → a digest
}

// Add adds a seen record; a mark of 0 (unknown) is left out.
func (s *MarkSet) Add(mark uint64, class string, d Digest) {
	if mark == 0 {
		return
	}
	if s.marks == nil {
		s.marks = make(map[uint64]map[string]Digest)
	}
	if s.marks[mark] == nil {
		s.marks[mark] = make(map[string]Digest, 1)
	}
	s.marks[mark][class] = d
}

// Problems lists the messages trained as two classes, in words.
func (s *MarkSet) Problems() []string {
	var out []string
	for _, mark := range slices.Sorted(maps.Keys(s.marks)) {
		byClass := s.marks[mark]
		if len(byClass) < 2 {
			continue
		}
		var as []string
		for _, c := range slices.Sorted(maps.Keys(byClass)) {
			d := byClass[c]
			as = append(as, fmt.Sprintf("%q (digest %x)", c, d[:8]))
		}
		out = append(out, fmt.Sprintf("message %016x trained as %s; relabel or forget all but one", mark, strings.Join(as, " and as ")))
	}
	return out
}

// AgeRule returns the rule that deletes, on day today, the tokens seen at
// most count times and not in the last days days (none when days is 0),
// the seen records of messages trained more than seenDays days ago (none
// when 0), and tokens beyond maxTokens (none when 0): what spamtrain
// prune and the daemon's schedule ask for.
func AgeRule(today Day, count uint64, days, seenDays int, maxTokens uint64) PruneRule {
	r := PruneRule{MaxCount: count, MaxTokens: maxTokens}
	if days > 0 && int64(today)-int64(days)+1 > 0 {
		r.Before = today - Day(days) + 1
	}
	if seenDays > 0 && int64(today)-int64(seenDays)+1 > 0 {
		r.SeenBefore = today - Day(seenDays) + 1
	}
	return r
}
