//go:build !linux

package store

// mapSlots maps nothing where huge pages cannot be asked for: the array
// is allocated in the heap.
func mapSlots(int) ([]rowSlot, func()) { return nil, nil }

// freeSlots frees nothing: arrays are in the heap here.
func freeSlots([]rowSlot) int { return 0 }
