// Package hugeheap asks the kernel to back the Go heap's growth with
// huge pages.
//
// Where transparent huge pages go only to memory that asks for them (the
// "madvise" mode several distributions ship), the Go runtime does not
// ask, and a heap growing to tens of megabytes takes a page fault for
// every 4 KiB page it touches first. Under virtualization such a fault
// can cost microseconds: on the machines spamd is measured on, ~12 µs, so
// that a bulk classify spent an eighth of its processor time faulting its
// heap in. A fault of a huge page maps 2 MiB.
//
// The runtime maps its heap piece by piece as it grows, and advice given
// to an address range does not carry over to a mapping made there later.
// Grow therefore makes the heap grow at once, with one allocation,
// advises that range and lets a collection free it: the runtime hands out
// pages it has before it maps new ones, so the heap's next bytes are
// huge pages. Grow touches none of them; the process's resident memory
// grows as the heap uses them, in steps of a huge page.
package hugeheap

import "runtime"

// Grow grows the heap by n bytes in one mapping, advises the kernel to
// back them with huge pages and collects them, and returns how many bytes
// it advised. It does so where huge pages are given only to memory
// advised to take them (the "madvise" mode); elsewhere every mapping
// takes them already or none does, the advice would change nothing, and
// Grow does nothing and returns 0. It is for a run that is about to grow
// its heap: call it once, early, while the heap holds much less than n
// bytes free, or the allocation could take freed pages that the runtime
// must then clear.
func Grow(n int) int {
	if !advised() {
		return 0
	}
	b := make([]byte, n)
	got := advise(b)
	b = nil
	runtime.GC()
	return got
}
