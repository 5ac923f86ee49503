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
