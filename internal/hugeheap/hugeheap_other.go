//go:build !linux

package hugeheap

// advised reports false: huge pages are not asked for here.
func advised() bool { return false }

// advise is never called where advised is false.
func advise([]byte) int { return 0 }
