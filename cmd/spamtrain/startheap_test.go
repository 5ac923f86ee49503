package main

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// gcPercent returns the collector's GOGC.
func gcPercent() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

func TestDeferFirstCollection(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, tc := range []struct {
		name       string
		gogc       string // "" for unset
		start, end int
	}{
		{"unset", "", 100 * startHeap / defaultHeapMinimum, bulkGCPercent},
		{"set by the user", "100", 100, bulkGCPercent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOGC", tc.gogc)
			debug.SetGCPercent(100)
			deferFirstCollection()
			if got := gcPercent(); got != tc.start {
				t.Fatalf("before the first collection GOGC is %d, want %d", got, tc.start)
			}
			// A pace set before the first collection is the one after it.
			if prev := setGCPercent(tc.end); prev != 100 {
				t.Errorf("setGCPercent before the first collection returned %d, want 100", prev)
			}
			runtime.GC()
			deadline := time.Now().Add(10 * time.Second)
			for gcPercent() != tc.end && time.Now().Before(deadline) {
				runtime.GC()
				time.Sleep(time.Millisecond)
			}
			if got := gcPercent(); got != tc.end {
				t.Errorf("after it GOGC is %d, want %d", got, tc.end)
			}
		})
	}
}

// TestDeferAgain defers the collection that follows one made on purpose,
// as growForBulk does: the pace comes back after the next collection,
// whenever the first deferral's cleanup runs.
func TestDeferAgain(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "")
	debug.SetGCPercent(100)
	deferFirstCollection()
	runtime.GC()
	// The first sentinel's cleanup may run before or after this.
	deferFirstCollection()
	time.Sleep(20 * time.Millisecond)
	if got, want := gcPercent(), 100*startHeap/defaultHeapMinimum; got != want {
		t.Fatalf("deferred again, GOGC is %d, want %d", got, want)
	}
	deadline := time.Now().Add(10 * time.Second)
	for gcPercent() != 100 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if got := gcPercent(); got != 100 {
		t.Errorf("after the next collection GOGC is %d, want 100", got)
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
