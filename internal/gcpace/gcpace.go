// Package gcpace puts a floor under the Go collector's heap goal.
//
// The runtime starts a collection when the heap reaches its goal, the
// live heap grown by GOGC percent, and never below 4 MiB at the default
// GOGC. A run whose heap is known to grow to tens of megabytes (a
// command classifying or training many messages) therefore collects at
// 4, 6, 8, 12 MiB and so on while its caches fill: a dozen cycles in a
// quarter of a second, each taking a processor from the work and
// scanning caches that are still filling. A floor under the goal lets
// such a run use the memory it is known to need before it first
// collects: the goal is the larger of the floor and the goal GOGC sets.
// Above the floor the collector paces itself by GOGC as always, so a run
// whose live heap is more than half the floor peaks where it did.
//
// The runtime has no such setting, and GOGC is a factor of the live
// heap, which changes as the run goes on. So after every collection
// gcpace sets the GOGC that puts the next goal at the floor, given the
// live heap the collection found, or the GOGC asked for where that is
// larger.
package gcpace

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// minHeap is the runtime's smallest heap goal at GOGC=100; it scales it
// by GOGC/100 (A Guide to the Go Garbage Collector, "GOGC").
const minHeap = 4 << 20

// pace is the process's: the collector is the process's too.
var pace struct {
	sync.Mutex
	armed   bool   // a hook runs after every collection
	floor   uint64 // bytes
	percent int    // the GOGC asked for; negative turns the collector off
	samples []metrics.Sample
}

// SetFloor puts the heap goal's floor at n bytes, 0 for none, from now
// on and after every collection. A GOGC set before (by the environment
// or debug.SetGCPercent) goes on pacing the heap above the floor; set it
// through SetPercent from then on, which the floor leaves in place.
func SetFloor(n uint64) {
	pace.Lock()
	defer pace.Unlock()
	if !pace.armed {
		pace.armed = true
		pace.percent = debug.SetGCPercent(100)
		pace.samples = []metrics.Sample{
			{Name: "/gc/heap/live:bytes"},
			{Name: "/gc/scan/stack:bytes"},
			{Name: "/gc/scan/globals:bytes"},
		}
		arm()
	}
	pace.floor = n
	apply()
}

// SetPercent sets the GOGC that paces the heap above the floor, as
// debug.SetGCPercent sets it, and returns the one it replaces.
func SetPercent(p int) int {
	pace.Lock()
	defer pace.Unlock()
	if !pace.armed {
		return debug.SetGCPercent(p)
	}
	prev := pace.percent
	pace.percent = p
	apply()
	return prev
}

// arm makes the next collection call collected. The sentinel is
// unreachable at once and larger than the tiny allocator's 16 bytes,
// whose blocks are freed only with their neighbours. A finalizer, not
// runtime.AddCleanup: in a -race build, a cleanup added from a cleanup
// never ran.
func arm() {
	runtime.SetFinalizer(new([32]byte), collected)
}

// collected runs after a collection: the live heap it found sets the next
// goal.
func collected(*[32]byte) {
	pace.Lock()
	defer pace.Unlock()
	apply()
	arm()
}

// apply sets the runtime's GOGC for the pace's floor and percent and the
// heap the last collection found live. pace is locked.
func apply() {
	metrics.Read(pace.samples)
	live := pace.samples[0].Value.Uint64()
	scan := pace.samples[1].Value.Uint64() + pace.samples[2].Value.Uint64()
	debug.SetGCPercent(percentFor(pace.floor, live, scan, pace.percent))
}

// percentFor is the GOGC whose heap goal is floor, for a heap of live
// bytes with scan bytes of stacks and globals, or percent where that is
// larger or the collector is off. The runtime's goal is live + (live +
// scan)·GOGC/100, and at least minHeap·GOGC/100; the GOGC returned puts
// both at or under floor, so that the goal is between floor−live and
// floor.
func percentFor(floor, live, scan uint64, percent int) int {
	if percent < 0 || live >= floor {
		return percent
	}
	p := 100 * (floor - live) / max(live+scan, minHeap)
	if p > uint64(percent) {
		return int(min(p, 1<<30))
	}
	return percent
}
