// Package offheap allocates large arrays of plain values outside the Go
// heap, backed by huge pages where the system gives them.
//
// A large table that is most of a process's live memory, in the heap,
// lets as much garbage pile up again before each collection (the
// collector paces itself by the live heap), which doubles the memory the
// process takes. Outside the heap it counts once. Huge pages matter for
// tables read at random, a slot per rare token: with 4 KiB pages nearly
// every such read also misses the TLB, and a page walk under
// virtualization costs several cache misses more.
//
// The garbage collector does not see memory outside the heap: an element
// type must hold no pointer, or what it points to may be freed under it.
// Make panics on one that does.
package offheap

import (
	"reflect"
	"unsafe"
)

// minBytes is the size from which an array goes outside the heap: two
// huge pages. A smaller one is not worth a mapping of its own.
const minBytes = 4 << 20

// Make returns an array of n zero values of T and, if it is mapped
// outside the heap, the function that gives it back, to be called once,
// when nothing uses the array any more. An array of fewer than minBytes
// bytes, or one the system refuses to map, is made in the heap, and free
// is nil.
func Make[T any](n int) (s []T, free func()) {
	if !plain(reflect.TypeFor[T]()) {
		panic("offheap: " + reflect.TypeFor[T]().String() + " holds pointers")
	}
	var zero T
	size := n * int(unsafe.Sizeof(zero))
	if size >= minBytes {
		if b, free := mapBytes(size); b != nil {
			return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n), free
		}
	}
	return make([]T, n), nil
}

// Drop gives back to the system the memory of the whole huge pages of s,
// part of an array Make mapped (never one in the heap), whose elements
// there then read as zero, and returns how many elements from the start
// of s that covers: the elements before the first whole page are left as
// they are. It drops nothing for a type whose size does not divide a
// huge page, whose elements could straddle one's edge.
func Drop[T any](s []T) int {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if size == 0 || hugePage%size != 0 {
		return 0
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*size)
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := int((start+hugePage-1)&^(hugePage-1) - start)
	hi := int((start+uintptr(len(b)))&^(hugePage-1) - start)
	if hi <= lo {
		return 0
	}
	dropBytes(b[lo:hi])
	return hi / size
}

const hugePage = 2 << 20

// plain reports whether a value of type t holds no pointer.
func plain(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			if !plain(t.Field(i).Type) {
				return false
			}
		}
		return true
	case reflect.Array:
		return plain(t.Elem())
	}
	return t.Kind() >= reflect.Bool && t.Kind() <= reflect.Complex128
}
