package store

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapSlots returns an array of n slots mapped outside the Go heap and
// advised to be backed by huge pages, with the function that unmaps it;
// nil if the system refuses the mapping.
//
// Outside the heap, the array does not count toward the heap the garbage
// collector paces itself by: in the heap, a model that is most of a
// process's live memory lets as much garbage pile up again before each
// collection, which doubles a first training's peak memory. Huge pages
// matter because the array is read at random, a slot per rare token: with
// 4 KiB pages nearly every such read also misses the TLB, and a page walk
// under virtualization costs several cache misses more.
func mapSlots(n int) ([]rowSlot, func()) {
	b, err := unix.Mmap(-1, 0, n*int(unsafe.Sizeof(rowSlot{})), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, nil
	}
	// A hint: where it is refused, the array has small pages.
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	return unsafe.Slice((*rowSlot)(unsafe.Pointer(&b[0])), n), func() { _ = unix.Munmap(b) }
}

// freeSlots gives back to the system the memory of the whole huge pages
// of s, a part of an array mapSlots returned, which then reads as free
// slots, and returns how many slots from the start of s that covers.
func freeSlots(s []rowSlot) int {
	const page = 2 << 20
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(rowSlot{})))
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := int((start+page-1)&^(page-1) - start)
	hi := int((start+uintptr(len(b)))&^(page-1) - start)
	if hi <= lo {
		// Nothing whole yet: these slots go with the next call's.
		return 0
	}
	_ = unix.Madvise(b[lo:hi], unix.MADV_DONTNEED)
	return hi / int(unsafe.Sizeof(rowSlot{}))
}
