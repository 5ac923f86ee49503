package main

import (
	"os"

	"github.com/spamd/spamd/internal/gcpace"
	"github.com/spamd/spamd/internal/hugeheap"
)

// startHeap is the floor under the collector's heap goal (gcpace) for
// every run. Left to itself the collector first runs at 4 MiB, and again
// at 8 and 16, as the tokenizer's caches and the store fill: a run that
// classifies one message, most of spamtrain's, collects, and the
// collection's own work (its mark bits and span lists, its workers'
// stacks) touches pages new to the process, each a page fault.
// Classifying one message took a sixth less processor time (62 ms
// against 51) and a fifth fewer page faults without it. Once the live
// heap is over half the floor, the collector paces itself by GOGC as
// always, so a long run's peak, its live heap doubled, is the same.
const startHeap = 16 << 20

// floorHeap puts the collector's heap goal at n bytes at least, unless
// the user set GOGC, which is left to pace the heap alone.
func floorHeap(n uint64) {
	if os.Getenv("GOGC") == "" {
		gcpace.SetFloor(n)
	}
}

// bulkHeap is how much of a bulk run's heap growth is backed with huge
// pages (hugeheap.Grow). A classify of SpamAssassin's last 1,209 messages
// peaks near 28 MB of heap at the default pace, a first training of its
// other 4,837 and of TREC's first 30,167 higher; with 32 MB, a training
// still faulted in twice as many small pages as with 64. The memory is
// not touched until the heap needs it.
const bulkHeap = 64 << 20

// bulkFloor is the floor under a bulk run's heap goal (gcpace), where the
// collector would otherwise run at 4, 8, 12... MiB as the caches fill.
// Classifying SpamAssassin's last 1,209 messages collected 4 times
// instead of 9, and TREC's last 7,542 17 times instead of 37; both took
// 6-7% less time, at a peak of 74 MB instead of 53 and 94 instead of 88.
// A floor of 64 MiB gained no more and peaked at 87 and 111 MB; one of
// 32 gained little on TREC, whose live heap doubled is past it.
const bulkFloor = 48 << 20

// prepareBulk readies the heap of a run of many messages, whose heap
// grows to tens of megabytes: its growth is backed with huge pages and
// not collected before it reaches bulkFloor. It is called before the store
// is opened and the tokenizer's caches are made, so that they are in
// huge pages too.
func prepareBulk() {
	hugeheap.Grow(bulkHeap)
	floorHeap(bulkFloor)
}

// growForBulk readies the heap (prepareBulk) for a run of sources that
// are several messages.
func growForBulk(sources []source) {
	if severalMessages(sources) {
		prepareBulk()
	}
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
