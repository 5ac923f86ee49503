//go:build !linux

package hugeheap

// advise advises nothing where huge pages cannot be asked for.
func advise([]byte) int { return 0 }
