package control

import (
	"net/url"
	"testing"

	"github.com/spamd/spamd/store"
)

// TestPruneRuleParam reads prune rules from queries: what PruneQuery
// writes comes back the same, and a query that prunes nothing or is
// malformed is refused.
func TestPruneRuleParam(t *testing.T) {
	for _, rule := range []store.PruneRule{
		{MaxCount: 1, Before: 20753},
		{MaxCount: 3, Before: 20000, SeenBefore: 19000, MaxTokens: 1000000},
		{MaxCount: 1, MaxTokens: 5},
		{MaxCount: 1, SeenBefore: 1},
	} {
		got, err := pruneRuleParam(PruneQuery(rule))
		if err != nil || got != rule {
			t.Errorf("PruneQuery(%+v) reads as %+v, %v", rule, got, err)
		}
	}
	for _, q := range []string{
		"",
		"count=1",
		"count=0&before=2026-10-27",
		"count=x&before=2026-10-27",
		"count=1&before=27.10.2026",
		"count=1&before=1970-01-01",
		"max_tokens=-1",
		"seen_before=tomorrow",
	} {
		v, err := url.ParseQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		if r, err := pruneRuleParam(v); err == nil {
			t.Errorf("%q reads as %+v, want an error", q, r)
		}
	}
}
