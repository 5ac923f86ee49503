package main

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/spamd/spamd/internal/gcpace"
)

// gcPercent returns the collector's GOGC.
func gcPercent() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

// TestFloorHeap floors the heap goal, unless the user set GOGC.
func TestFloorHeap(t *testing.T) {
	// Another test's floor is taken away first, and this one's after.
	gcpace.SetFloor(0)
	defer gcpace.SetFloor(0)
	base := gcPercent()
	for _, tc := range []struct {
		name    string
		gogc    string // "" for unset
		floored bool
	}{
		{"set by the user", "100", false},
		{"unset", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOGC", tc.gogc)
			// Far above what other tests leave live.
			floorHeap(1 << 30)
			if got := gcPercent(); (got > base) != tc.floored {
				t.Errorf("GOGC is %d after floorHeap, %d before; floored: %v, want %v", got, base, got > base, tc.floored)
			}
		})
	}
}

// TestSeveralMessages tells runs of many messages, whose heap growth is backed with
// huge pages, from runs of one.
func TestSeveralMessages(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "one.eml")
	if err := os.WriteFile(file, []byte("Subject: x\n\nbody\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name    string
		sources []string
		want    bool
	}{
		{"none", nil, false},
		{"one file", []string{file}, false},
		{"standard input", []string{"-"}, false},
		{"a missing path", []string{missing}, false},
		{"a directory", []string{dir}, true},
		{"two files", []string{file, file}, true},
		{"a file and a missing path", []string{file, missing}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sources []source
			for _, p := range tc.sources {
				sources = append(sources, source{path: p})
			}
			if got := severalMessages(sources); got != tc.want {
				t.Errorf("severalMessages(%q) = %v, want %v", tc.sources, got, tc.want)
			}
		})
	}
}
