package hugeheap

import (
	"bytes"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// thpEnabled is where Linux says which memory takes transparent huge
// pages: "always [madvise] never", the mode in use in brackets. A
// variable for the tests.
var thpEnabled = "/sys/kernel/mm/transparent_hugepage/enabled"

// advised reports whether the system gives transparent huge pages to
// memory advised to take them and only to it: the "madvise" mode.
func advised() bool {
	b, err := os.ReadFile(thpEnabled)
	return err == nil && bytes.Contains(b, []byte("[madvise]"))
}

// hugePage is the size of an x86-64 or arm64 Linux system's huge page
// with 4 KiB base pages. Advice given to a range that holds no whole one
// of a larger size is refused nowhere, only useless.
const hugePage = 2 << 20

// advise advises huge pages for the whole huge pages within b and returns
// how many bytes that covers, 0 if the system refuses.
func advise(b []byte) int {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := int((start+hugePage-1)&^(hugePage-1) - start)
	hi := int((start+uintptr(len(b)))&^(hugePage-1) - start)
	if hi <= lo {
		return 0
	}
	if err := unix.Madvise(b[lo:hi], unix.MADV_HUGEPAGE); err != nil {
		return 0
	}
	return hi - lo
}
