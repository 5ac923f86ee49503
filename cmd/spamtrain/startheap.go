package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"sync"
)

// startHeap is the heap a run grows to before its first collection. Left
// to itself the collector first runs at 4 MiB, and again at 8 and 16, as
// the tokenizer's caches and the store fill: a run that classifies one
// message, most of spamtrain's, collects, and the collection's own work
// (its mark bits and span lists, its workers' stacks) touches pages new to
// the process, each a page fault. Classifying one message took a sixth
// less processor time (62 ms against 51) and a fifth fewer page faults
// without it. Past startHeap the collector paces itself by the live heap
// as always, so a long run's peak, its live heap doubled, is the same.
const startHeap = 16 << 20

// defaultHeapMinimum is the Go runtime's first heap goal at GOGC=100,
// which it scales by GOGC/100.
const defaultHeapMinimum = 4 << 20

// gcPace is the GOGC a run is to have after its first collection, while
// that collection has not run.
var gcPace struct {
	sync.Mutex
	deferred bool
	after    int
}

// deferFirstCollection raises the first heap goal to startHeap, and puts
// back the collector's pace once that first collection has run. A GOGC
// the user set is left as it is.
func deferFirstCollection() {
	if os.Getenv("GOGC") != "" {
		return
	}
	gcPace.Lock()
	defer gcPace.Unlock()
	gcPace.deferred = true
	gcPace.after = debug.SetGCPercent(100 * startHeap / defaultHeapMinimum)
	// The first collection finds the sentinel unreachable and runs its
	// cleanup. It is larger than the tiny allocator's 16 bytes, whose
	// blocks are freed, and cleaned up, only with their neighbours.
	sentinel := new([32]byte)
	runtime.AddCleanup(sentinel, func(struct{}) {
		gcPace.Lock()
		defer gcPace.Unlock()
		gcPace.deferred = false
		debug.SetGCPercent(gcPace.after)
	}, struct{}{})
}

// setGCPercent sets GOGC to p, as debug.SetGCPercent does, and returns
// the one it replaces; before the first collection it sets the GOGC that
// is to follow it.
func setGCPercent(p int) int {
	gcPace.Lock()
	defer gcPace.Unlock()
	if gcPace.deferred {
		prev := gcPace.after
		gcPace.after = p
		return prev
	}
	return debug.SetGCPercent(p)
}
