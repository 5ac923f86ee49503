//go:build !linux

package offheap

// mapBytes maps nothing where huge pages cannot be asked for: arrays are
// made in the heap.
func mapBytes(int) ([]byte, func()) { return nil, nil }

// dropBytes is never called: no array is mapped here.
func dropBytes(b []byte) { clear(b) }
