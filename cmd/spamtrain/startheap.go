package main

import (
	"os"
	"runtime"
	"runtime/debug"
)

// startHeap is the heap a run grows to before its first collection. Left
// to itself the collector first runs at 4 MiB, and again at 8 and 16, as
// the tokenizer's caches and the store fill: a run that classifies one
// message, most of spamtrain's, then spends a sixth of its time
// collecting, and the collection makes pages new to the process, each a
// page fault, that the run would not otherwise touch. Past startHeap the
// collector paces itself by the live heap as always, so a long run's peak,
// its live heap doubled, is the same.
const startHeap = 16 << 20

// defaultHeapMinimum is the Go runtime's first heap goal at GOGC=100,
// which it scales by GOGC/100.
const defaultHeapMinimum = 4 << 20

// deferFirstCollection raises the first heap goal to startHeap, and puts
// back the collector's pace once that first collection has run. A GOGC
// the user set is left as it is.
func deferFirstCollection() {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	prev := debug.SetGCPercent(100 * startHeap / defaultHeapMinimum)
	// The first collection finds the sentinel unreachable and runs its
	// cleanup. It is larger than the tiny allocator's 16 bytes, whose
	// blocks are freed, and cleaned up, only with their neighbours.
	sentinel := new([32]byte)
	runtime.AddCleanup(sentinel, func(gogc int) { debug.SetGCPercent(gogc) }, prev)
}
