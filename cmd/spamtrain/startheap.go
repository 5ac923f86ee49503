package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"sync"

	"github.com/spamd/spamd/internal/hugeheap"
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
	gen      uint64 // the deferral whose sentinel's cleanup is to end it
}

// deferFirstCollection raises the next heap goal to startHeap, and puts
// back the collector's pace once the next collection has run. A GOGC the
// user set is left as it is. A run calls it when it starts, and a bulk
// classify again after collecting on purpose (growForBulk), which ends
// the first deferral: its heap grows from nothing again, through goals
// of 4 MiB and 8 that it collected at, two of its eight cycles. A
// training is left to collect at the pace it sets (bulkGCPercent) from
// its start, as it was measured with.
func deferFirstCollection() {
	if os.Getenv("GOGC") != "" {
		return
	}
	gcPace.Lock()
	defer gcPace.Unlock()
	prev := debug.SetGCPercent(100 * startHeap / defaultHeapMinimum)
	if !gcPace.deferred {
		gcPace.after = prev
	}
	gcPace.deferred = true
	gcPace.gen++
	// The next collection finds the sentinel unreachable and runs its
	// cleanup. It is larger than the tiny allocator's 16 bytes, whose
	// blocks are freed, and cleaned up, only with their neighbours. The
	// cleanup of an earlier deferral's sentinel, run late, is not to end
	// this one.
	sentinel := new([32]byte)
	runtime.AddCleanup(sentinel, func(gen uint64) {
		gcPace.Lock()
		defer gcPace.Unlock()
		if gen != gcPace.gen {
			return
		}
		gcPace.deferred = false
		debug.SetGCPercent(gcPace.after)
	}, gcPace.gen)
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

// bulkHeap is how much of a bulk run's heap growth is backed with huge
// pages (hugeheap.Grow). A classify of SpamAssassin's last 1,209 messages
// peaks near 28 MB of heap, a first training of its other 4,837 and of
// TREC's first 30,167 higher; with 32 MB, a training still faulted in
// twice as many small pages as with 64. The memory is not touched until
// the heap needs it.
const bulkHeap = 64 << 20

// growForBulk backs the heap's growth with huge pages for a run of many
// messages (bulk), whose heap grows to tens of megabytes. It is called
// before the store is opened and the tokenizer's caches are made, so that
// they are in huge pages too.
// It reports whether it did, having collected on purpose.
func growForBulk(sources []source) bool {
	return severalMessages(sources) && hugeheap.Grow(bulkHeap) > 0
}

// severalMessages reports whether sources are several, or a directory. A
// run of one message would only pay for Grow's collection, and for whole
// huge pages where it uses a few small ones; a single mailbox file of
// many messages is not told from one message, and runs as before.
func severalMessages(sources []source) bool {
	switch len(sources) {
	case 0:
		return false
	case 1:
		fi, err := os.Stat(sources[0].path)
		return err == nil && fi.IsDir()
	}
	return true
}
