package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/storetest"
)

// judgeScript runs the prune scripts' judgement on rows: ARGV[1…6] a plan
// as read_plan reads it, ARGV[7] the day of a row without one, then rows
// as the buckets keep them. It returns 1 or 0 per row.
const judgeScript = `
local plan = read_plan(1)
local upday = tonumber(ARGV[7])
local out = {}
for i = 8, #ARGV do
  local row = decode_row(ARGV[i])
  if prune_drops(plan, row, row.d or upday) then out[#out + 1] = 1 else out[#out + 1] = 0 end
end
return out
`

// TestPruneJudge holds the prune script's judgement of a row to
// store.PrunePlan.Drop: for random models and rules, the plan Prune sends
// the script (the rule and the cut the census gives) deletes
// in Lua exactly the rows the plan drops in Go, those the census counted
// and others, as rows changed by training since would be, rows of schema
// 2 without a day among them.
func TestPruneJudge(t *testing.T) {
	srv := redisServer(t)
	s := open(t, []string{srv.Addr}, Options{NoStaleReads: true})
	ctx := context.Background()
	script := rueidis.NewLuaScriptReadOnly("#!lua flags=no-writes\n" + luaCommon + judgeScript)
	rng := rand.New(rand.NewPCG(5, 6))
	randomRow := func() (store.Counts, store.Day) {
		row := make(store.Counts, 2*(1+rng.IntN(3)))
		for c := 0; c < len(row); c += 2 {
			if rng.IntN(3) > 0 {
				row[c] = uint64(rng.IntN(6))
			}
			row[c+1] = uint64(rng.Int64N(2000) - 1000)
		}
		if rng.IntN(20) == 0 {
			row[0] = 1 << 40
		}
		return row, store.Day(rng.IntN(40))
	}
	const upgraded = 17
	for round := range 200 {
		n := 1 + rng.IntN(60)
		type row struct {
			counts store.Counts
			day    store.Day
			dated  bool
		}
		var rows []row
		for range n {
			c, d := randomRow()
			rows = append(rows, row{c, d, rng.IntN(5) > 0})
		}
		rule := store.PruneRule{
			MaxCount:  []uint64{0, 1, 2, 5, math.MaxUint64}[rng.IntN(5)],
			Before:    store.Day([]int{0, 0, 10, 20, 41}[rng.IntN(5)]),
			MaxTokens: []uint64{0, 1, uint64(n / 3), uint64(n / 2), uint64(n), uint64(n + 5)}[rng.IntN(6)],
		}
		day := func(r row) store.Day {
			if !r.dated {
				return upgraded
			}
			return r.day
		}
		// The census, as Prune takes it.
		var census store.PruneCensus
		for _, r := range rows {
			census.Add(rule, r.counts, day(r))
		}
		plan := rule.Plan(&census)
		cut := cutOf(rule, plan)
		// Rows the census did not see, as training leaves them.
		for range 20 {
			c, d := randomRow()
			rows = append(rows, row{c, d, rng.IntN(5) > 0})
		}
		args := append(cut.args(), strconv.Itoa(upgraded))
		for _, r := range rows {
			enc := string(appendRow(nil, r.counts, r.day))
			if !r.dated {
				enc = schema2Row(r.counts)
			}
			args = append(args, enc)
		}
		got, err := script.Exec(ctx, s.client, nil, args).AsIntSlice()
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rows {
			if want := plan.Drop(r.counts, day(r)); (got[i] == 1) != want {
				t.Fatalf("round %d, rule %+v (cut %+v): row %v of day %d (dated %v): the script drops %v, the plan %v",
					round, rule, cut, r.counts, r.day, r.dated, got[i] == 1, want)
			}
		}
	}
}

// TestPruneAsMemory prunes random models, trained, relabeled and partly
// forgotten,
// with random rules, in Redis (with buckets of a few rows, which training
// splits all the time) and in the memory store, and compares what is left:
// rows, days, seen records, totals and the results.
func TestPruneAsMemory(t *testing.T) {
	srv := redisServer(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 10))
	for round := range 12 {
		var ops []store.Op
		for i := range 80 {
			op := storetest.TrainOn(fmt.Sprint(i), []string{"spam", "ham"}[rng.IntN(2)], store.Day(10+rng.IntN(30)), rng.Uint64(),
				storetest.RandomBag(rng, 5+rng.IntN(20), 300))
			op.Steps = []store.Step{{Class: op.Class, Body: rng.Int64N(100)}}
			op.Values = []store.Value{{Measure: 2, Level: uint16(rng.IntN(50))}}
			ops = append(ops, op)
			switch i % 7 {
			case 6: // a forget
				f := ops[rng.IntN(len(ops)-1)]
				ops = append(ops, store.Op{Digest: f.Digest, Bag: f.Bag})
			case 3: // a relabel, on any day, later or earlier
				r := ops[rng.IntN(len(ops)-1)]
				r.Class = map[string]string{"spam": "ham", "ham": "spam", "": "spam"}[r.Class]
				r.Day = store.Day(10 + rng.IntN(30))
				ops = append(ops, r)
			}
		}
		rule := store.PruneRule{
			MaxCount:   []uint64{0, 1, 3, 1000}[rng.IntN(4)],
			Before:     store.Day([]int{0, 15, 25, 40}[rng.IntN(4)]),
			MaxTokens:  []uint64{0, 0, 20, 100, 250}[rng.IntN(5)],
			SeenBefore: store.Day([]int{0, 0, 20, 45}[rng.IntN(4)]),
		}
		mem := store.NewMemory()
		red := open(t, []string{srv.Addr}, Options{BucketLoad: 3})
		for _, s := range []store.Store{mem, red} {
			if _, err := s.Apply(ctx, "u", ops); err != nil {
				t.Fatal(err)
			}
		}
		want, err := mem.Prune(ctx, "u", rule)
		if err != nil {
			t.Fatal(err)
		}
		got, err := red.Prune(ctx, "u", rule)
		if err != nil || got != want {
			t.Errorf("round %d: Prune(%+v) = %+v, %v; the memory store's %+v", round, rule, got, err, want)
		}
		if a, b := dumpText(t, red, "u"), dumpText(t, mem, "u"); a != b {
			t.Errorf("round %d: Prune(%+v) left another model than in the memory store: %s", round, rule, firstDiff(a, b))
		}
		if err := red.Check(ctx, "u"); err != nil {
			t.Error(err)
		}
	}
}

// firstDiff returns the first line where a and b differ.
func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(la), len(lb)) {
		if i >= len(la) || i >= len(lb) || la[i] != lb[i] {
			return fmt.Sprintf("line %d:\n%s\nagainst\n%s", i+1, strings.Join(la[i:min(i+1, len(la))], ""), strings.Join(lb[i:min(i+1, len(lb))], ""))
		}
	}
	return "none"
}

// dumpText returns user's dump and totals in s as text.
func dumpText(t *testing.T, s store.Store, user string) string {
	t.Helper()
	ctx := context.Background()
	out := ""
	err := s.Dump(ctx, user, func(r store.Record) error {
		// Backends may keep trailing zeros, or not.
		r.Counts = trim(r.Counts)
		out += fmt.Sprintf("%+v\n", r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tot, err := s.Totals(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	out += fmt.Sprintf("messages %v tokens %v vocabulary %d forgotten %v last day %d\n",
		tot.Messages, tot.Tokens, tot.Vocabulary, tot.Forgotten, tot.LastDay)
	for m, byClass := range tot.Samples {
		for c, smp := range byClass {
			if !smp.Empty() {
				out += fmt.Sprintf("measure %d class %d: %+v\n", m, c, smp)
			}
		}
	}
	return out
}

// TestPruneNodes checks that no node reads a row Prune deleted: the node
// that pruned from the moment Prune returns, another as soon as Redis's
// invalidations reach it, both after their caches held the rows.
func TestPruneNodes(t *testing.T) {
	srv := redisServer(t)
	a := open(t, []string{srv.Addr}, Options{Prefix: "pn:"})
	b := open(t, []string{srv.Addr}, Options{Prefix: "pn:"})
	ctx := context.Background()
	bag := map[bow.Hash]uint32{}
	var hashes []bow.Hash
	for h := range bow.Hash(500) {
		bag[h<<40] = 1
		hashes = append(hashes, h<<40)
	}
	if _, err := a.Apply(ctx, "u", []store.Op{storetest.TrainOn("old", "spam", 10, 0, bag),
		storetest.TrainOn("new", "ham", 20, 0, map[bow.Hash]uint32{hashes[7]: 1})}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Store{a, b} {
		if n, err := s.Warm(ctx, "u"); err != nil || n != 500 {
			t.Fatalf("Warm = %d, %v", n, err)
		}
	}
	rows := func(s *Store) int {
		c, err := s.Lookup(ctx, "u", hashes)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range c {
			if r != nil {
				n++
			}
		}
		return n
	}
	if rows(a) != 500 || rows(b) != 500 {
		t.Fatal("the caches do not hold the model")
	}
	res, err := a.Prune(ctx, "u", store.PruneRule{MaxCount: 1, Before: 15})
	if err != nil || res.Tokens != 499 || res.Vocabulary != 1 {
		t.Fatalf("Prune = %+v, %v", res, err)
	}
	if n := rows(a); n != 1 {
		t.Errorf("the pruning node reads %d rows right after Prune, want 1", n)
	}
	if tot, _ := a.Totals(ctx, "u"); tot.Vocabulary != 1 || tot.Tokens[0] != 1 || tot.Tokens[1] != 1 {
		t.Errorf("the pruning node's totals: %+v", tot)
	}
	start := time.Now()
	for rows(b) != 1 {
		if time.Since(start) > 2*time.Second {
			t.Fatalf("the other node still reads %d rows", rows(b))
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("the other node saw the prune after %v", time.Since(start))
	// Forgetting the message whose tokens went brings back no row.
	if _, err := b.Apply(ctx, "u", []store.Op{storetest.Forget("old", bag)}); err != nil {
		t.Fatal(err)
	}
	if n := rows(b); n != 1 {
		t.Errorf("%d rows after forgetting a pruned message", n)
	}
	if err := a.Check(ctx, "u"); err != nil {
		t.Error(err)
	}
}

// stopAfter is a context whose Err says canceled from its n-th call on:
// a prune canceled between two of its calls, where it looks.
type stopAfter struct {
	context.Context
	n *atomic.Int32
}

func (c stopAfter) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// TestPruneCanceled stops a prune between two calls: it says so, what it
// deleted went with its totals, what it did not is there still, and the
// model checks.
func TestPruneCanceled(t *testing.T) {
	srv := redisServer(t)
	s := open(t, []string{srv.Addr}, Options{BucketLoad: 2, NoStaleReads: true})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	var ops []store.Op
	for i := range 100 {
		ops = append(ops, storetest.TrainOn(fmt.Sprint(i), "spam", store.Day(i), 0, storetest.RandomBag(rng, 30, 1<<62)))
	}
	if _, err := s.Apply(ctx, "u", ops); err != nil {
		t.Fatal(err)
	}
	before, _ := s.Totals(ctx, "u")
	var n atomic.Int32
	n.Store(12)
	res, err := s.Prune(stopAfter{ctx, &n}, "u", store.PruneRule{MaxCount: 100, Before: 1000})
	if !errors.Is(err, context.Canceled) || res.Tokens == 0 || res.Tokens >= before.Vocabulary {
		t.Fatalf("Prune canceled midway = %+v, %v; want some of %d rows deleted and context.Canceled", res, err, before.Vocabulary)
	}
	after, _ := s.Totals(ctx, "u")
	if after.Vocabulary != before.Vocabulary-res.Tokens || res.Vocabulary != after.Vocabulary {
		t.Errorf("vocabulary %d before, %d after deleting %d rows; Prune says %d", before.Vocabulary, after.Vocabulary, res.Tokens, res.Vocabulary)
	}
	if err := s.Check(ctx, "u"); err != nil {
		t.Error(err)
	}
}

// TestUserSize checks that a user's size is what its keys take in
// Redis: nothing without a model, more after training, less after a
// prune, and the same as MEMORY USAGE summed by hand.
func TestUserSize(t *testing.T) {
	srv := redisServer(t)
	s := open(t, []string{srv.Addr}, Options{})
	ctx := context.Background()
	if n, err := s.UserSize(ctx, "u"); err != nil || n != 0 {
		t.Errorf("UserSize of no model = %d, %v", n, err)
	}
	if _, err := s.UserSize(ctx, "../x"); err == nil {
		t.Error("UserSize of an invalid user")
	}
	rng := rand.New(rand.NewPCG(1, 1))
	var ops []store.Op
	for i := range 200 {
		op := storetest.TrainOn(fmt.Sprint(i), "spam", store.Day(i), 0, storetest.RandomBag(rng, 50, 100000))
		op.Values = []store.Value{{Measure: 1, Level: 3}}
		ops = append(ops, op)
	}
	if _, err := s.Apply(ctx, "u", ops); err != nil {
		t.Fatal(err)
	}
	size, err := s.UserSize(ctx, "u")
	if err != nil {
		t.Fatal(err)
	}
	tot, err := s.readTotals(ctx, "u")
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	var keys []string
	tot.layout.each(func(b uint64) bool { keys = append(keys, s.keys.bucket("u", b)); return true })
	keys = append(keys, s.keys.totals("u"), s.keys.seen("u"), s.keys.samples("u"))
	for _, k := range keys {
		v, err := srv.Command("MEMORY", "USAGE", k, "SAMPLES", "0")
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		sum += n
	}
	if size != sum || size < int64(tot.rows)*10 {
		t.Errorf("UserSize = %d, MEMORY USAGE of its %d keys sums to %d, for %d rows", size, len(keys), sum, tot.rows)
	}
	// Bob's model is not alice's.
	if n, err := s.UserSize(ctx, "bob"); err != nil || n != 0 {
		t.Errorf("UserSize of another user = %d, %v", n, err)
	}
	if _, err := s.Prune(ctx, "u", store.PruneRule{MaxCount: 1, Before: 150, SeenBefore: 150}); err != nil {
		t.Fatal(err)
	}
	after, err := s.UserSize(ctx, "u")
	if err != nil || after >= size {
		t.Errorf("UserSize after a prune = %d, %v; before %d", after, err, size)
	}
	t.Logf("%d rows: %d bytes; after a prune: %d bytes", tot.rows, size, after)
}

// TestCheckForgotten checks that Check counts the messages Prune forgot
// with the seen records, and reports totals that disagree with them.
func TestCheckForgotten(t *testing.T) {
	srv := redisServer(t)
	s := open(t, []string{srv.Addr}, Options{NoStaleReads: true})
	ctx := context.Background()
	if _, err := s.Apply(ctx, "u", []store.Op{
		storetest.TrainOn("m1", "spam", 10, 0, map[bow.Hash]uint32{1: 1}),
		storetest.TrainOn("m2", "ham", 20, 0, map[bow.Hash]uint32{2: 1}),
	}); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Prune(ctx, "u", store.PruneRule{SeenBefore: 15}); err != nil || res.Seen != 1 {
		t.Fatalf("Prune = %+v, %v", res, err)
	}
	if got, _ := srv.Command("HGET", s.keys.totals("u"), "fgt"); got != "1" {
		t.Errorf("forgotten messages in the totals: %q, want \"1\"", got)
	}
	if err := s.Check(ctx, "u"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Command("HSET", s.keys.totals("u"), "fgt", "0 1"); err != nil {
		t.Fatal(err)
	}
	err := s.Check(ctx, "u")
	for _, want := range []string{`class "spam": totals say 1 messages, 0 seen records and 0 forgotten`, `class "ham": totals say 1 messages, 1 seen records and 1 forgotten`} {
		if !errors.Is(err, store.ErrInconsistent) || !strings.Contains(err.Error(), want) {
			t.Errorf("Check with forgotten messages off: %v; want %s", err, want)
		}
	}
}
