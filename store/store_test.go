package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/storetest"
)

func TestValidUser(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"", true},
		{"alice", true},
		{"Alice.Smith+tag@example.org", true},
		{"a_b-c", true},
		{strings.Repeat("a", store.MaxUserLen), true},
		{strings.Repeat("a", store.MaxUserLen+1), false},
		{"../x", false},
		{"a/b", false},
		{".hidden", false},
		{"-flag", false},
		{"\x00", false},
		{"a b", false},
		{"é", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := store.ValidUser(tt.name)
			if tt.ok && err != nil {
				t.Errorf("ValidUser: %v", err)
			}
			if !tt.ok && !errors.Is(err, store.ErrInvalidUser) {
				t.Errorf("ValidUser: error %v, want ErrInvalidUser", err)
			}
		})
	}
}

func TestValidClass(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"spam", true},
		{"ham", true},
		{"news_letter-2", true},
		{strings.Repeat("x", store.MaxClassLen), true},
		{strings.Repeat("x", store.MaxClassLen+1), false},
		{"", false},
		{"Spam", false},
		{"spam ham", false},
		{"spam.ham", false},
		{"\x00", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := store.ValidClass(tt.name)
			if tt.ok && err != nil {
				t.Errorf("ValidClass: %v", err)
			}
			if !tt.ok && !errors.Is(err, store.ErrInvalidClass) {
				t.Errorf("ValidClass: error %v, want ErrInvalidClass", err)
			}
		})
	}
}

func TestMemory(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return store.NewMemory() })
}

func BenchmarkLookup(b *testing.B) { storetest.BenchLookup(b, store.NewMemory()) }

func BenchmarkApply(b *testing.B) { storetest.BenchApply(b, store.NewMemory()) }

func TestAgeRule(t *testing.T) {
	tests := []struct {
		name           string
		count          uint64
		days, seenDays int
		maxTokens      uint64
		want           store.PruneRule
	}{
		{"nothing", 1, 0, 0, 0, store.PruneRule{MaxCount: 1}},
		{"30 days", 2, 30, 0, 0, store.PruneRule{MaxCount: 2, Before: 100 - 30 + 1}},
		{"seen records", 1, 0, 90, 0, store.PruneRule{MaxCount: 1, SeenBefore: 100 - 90 + 1}},
		{"budget", 1, 0, 0, 500, store.PruneRule{MaxCount: 1, MaxTokens: 500}},
		{"longer ago than time", 1, 200, 200, 0, store.PruneRule{MaxCount: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := store.AgeRule(100, tt.count, tt.days, tt.seenDays, tt.maxTokens); got != tt.want {
				t.Errorf("AgeRule = %+v, want %+v", got, tt.want)
			}
		})
	}
	// A token last trained the day before the last 30 days goes; one of
	// the first of them stays.
	r := store.AgeRule(100, 1, 30, 0, 0)
	plan := r.Plan(&store.PruneCensus{})
	if !plan.Drop(store.Counts{1, 0}, 70) || plan.Drop(store.Counts{1, 0}, 71) || plan.Drop(store.Counts{2, 0}, 1) {
		t.Errorf("plan of %+v drops the wrong tokens", r)
	}
	// Day 0 is no day: a row or seen record restored from a dump of
	// before days is never old.
	if plan.Drop(store.Counts{1, 0}, 0) {
		t.Errorf("plan of %+v drops a token of no day", r)
	}
	if seen := store.AgeRule(100, 1, 0, 30, 0).Plan(&store.PruneCensus{}); seen.DropSeen(0) || !seen.DropSeen(70) || seen.DropSeen(71) {
		t.Errorf("plan of seen records before day 71 judges wrong")
	}
}

// TestMemoryLookupInto looks up one hash set after another with the same
// buffer, which grows and shrinks under them, and checks each answer
// against Lookup's.
func TestMemoryLookupInto(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	defer m.Close()
	span := func(lo, hi bow.Hash) map[bow.Hash]uint32 {
		c := make(map[bow.Hash]uint32)
		for h := lo; h < hi; h++ {
			c[h] = uint32(h%3 + 1)
		}
		return c
	}
	ops := []store.Op{
		{Digest: store.Digest{1}, Class: "spam", Bag: bow.FromMaps(nil, span(1, 50))},
		{Digest: store.Digest{2}, Class: "ham", Bag: bow.FromMaps(nil, span(25, 75))},
	}
	if _, err := m.Apply(ctx, "u", ops); err != nil {
		t.Fatal(err)
	}
	storetest.CheckLookupInto(t, m, []storetest.LookupCase{
		{Name: "none held", User: "u", Hashes: storetest.Span(100, 120)},
		{Name: "some held", User: "u", Hashes: storetest.Span(60, 90)},
		{Name: "more than the buffer held", User: "u", Hashes: storetest.Span(0, 200)},
		{Name: "held after unheld ones", User: "u", Hashes: append(storetest.Span(500, 700), storetest.Span(1, 75)...)},
		{Name: "fewer again", User: "u", Hashes: storetest.Span(20, 30)},
		{Name: "no hashes", User: "u", Hashes: nil},
		{Name: "a user without a model", User: "v", Hashes: storetest.Span(1, 10)},
	})
}

// TestCountsOfClass reads a row's count and weight per class: a class
// past the row's end, whose trailing zeros were dropped, or one the store
// does not know (-1), reads as zero.
func TestCountsOfClass(t *testing.T) {
	c := store.Counts{3, uint64(1 << 16), 5} // class 1's weight dropped
	for _, tc := range []struct {
		class  int
		count  uint64
		weight int64
	}{
		{0, 3, 1 << 16},
		{1, 5, 0},
		{2, 0, 0},
		{-1, 0, 0},
	} {
		if got, w := c.Count(tc.class), c.Weight(tc.class); got != tc.count || w != tc.weight {
			t.Errorf("class %d: count %d, weight %d; want %d, %d", tc.class, got, w, tc.count, tc.weight)
		}
	}
}
