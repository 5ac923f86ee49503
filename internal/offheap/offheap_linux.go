package offheap

import "golang.org/x/sys/unix"

// mapBytes maps size bytes of anonymous memory, advised to be backed by
// huge pages, and returns them with the function that unmaps them; nil
// if the system refuses.
func mapBytes(size int) ([]byte, func()) {
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, nil
	}
	// A hint: where it is refused, the array has small pages.
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	return b, func() { _ = unix.Munmap(b) }
}

// dropBytes gives b's pages back; they read as zero after.
func dropBytes(b []byte) { _ = unix.Madvise(b, unix.MADV_DONTNEED) }
