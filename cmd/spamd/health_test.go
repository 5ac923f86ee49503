package main

import (
	"slices"
	"testing"
	"time"

	"github.com/spamd/spamd/store"
)

// TestStoreHealthy checks when the watchdog stops pinging for the store.
func TestStoreHealthy(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name string
		h    store.Health
		ok   bool
	}{
		{"ok", store.Health{State: store.StateOK}, true},
		{"degraded for long: still classifying", store.Health{State: store.StateDegraded, Since: now.Add(-time.Hour)}, true},
		{"failed just now: reopening", store.Health{State: store.StateFailed, Since: now.Add(-time.Minute)}, true},
		{"failed for long", store.Health{State: store.StateFailed, Since: now.Add(-3 * time.Minute), Reason: "memtable"}, false},
	} {
		if err := storeHealthy(tt.h, now); (err == nil) != tt.ok {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

// TestSplitRestart checks which changed keys a reload applies and which
// wait for a restart.
func TestSplitRestart(t *testing.T) {
	applied, later := splitRestart([]string{"actions.subject_tag", "api.admins", "filter.alpha", "log.format", "log.level",
		"milter.explain", "milter.listen", "store.redis.password", "watch.junk"})
	if want := []string{"actions.subject_tag", "filter.alpha", "log.level", "milter.explain"}; !slices.Equal(applied, want) {
		t.Errorf("applied %q, want %q", applied, want)
	}
	if want := []string{"api.admins", "log.format", "milter.listen", "store.redis.password", "watch.junk"}; !slices.Equal(later, want) {
		t.Errorf("on restart %q, want %q", later, want)
	}
}
