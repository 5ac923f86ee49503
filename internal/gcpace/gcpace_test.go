package gcpace

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

const mib = 1 << 20

func TestPercentFor(t *testing.T) {
	for _, tc := range []struct {
		name              string
		floor, live, scan uint64
		percent, want     int
	}{
		{"no floor", 0, 3 * mib, 0, 100, 100},
		{"collector off", 64 * mib, mib, 0, -1, -1},
		// Under minHeap the runtime's smallest goal, minHeap·GOGC/100,
		// is the larger: 16·100/4 puts it at the floor.
		{"empty heap", 16 * mib, 0, 0, 100, 400},
		{"small heap", 64 * mib, 2 * mib, mib, 100, 1550},
		// live + (live+scan)·p/100 = 8 + 8·7 = 64.
		{"heap past minHeap", 64 * mib, 8 * mib, 0, 100, 700},
		{"stacks and globals count", 64 * mib, 6 * mib, 2 * mib, 100, 725},
		{"live heap half the floor", 64 * mib, 32 * mib, 0, 100, 100},
		{"live heap past the floor", 64 * mib, 80 * mib, 0, 50, 50},
		{"a larger GOGC asked for", 64 * mib, 16 * mib, 0, 400, 400},
		{"a smaller GOGC asked for", 64 * mib, 16 * mib, 0, 50, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := percentFor(tc.floor, tc.live, tc.scan, tc.percent); got != tc.want {
				t.Errorf("percentFor(%d, %d, %d, %d) = %d, want %d", tc.floor, tc.live, tc.scan, tc.percent, got, tc.want)
			}
		})
	}
}

// sink keeps the garbage the tests make from being optimized away.
var sink []byte

// collections returns how many collections run while n bytes of garbage
// are allocated, a mebibyte at a time.
func collections(n int) uint32 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n / mib {
		sink = make([]byte, mib)
	}
	sink = nil
	runtime.ReadMemStats(&after)
	return after.NumGC - before.NumGC
}

// gcPercent returns the runtime's GOGC, which no hook sets meanwhile.
func gcPercent() int {
	pace.Lock()
	defer pace.Unlock()
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

// live is heap the tests keep live.
var live []byte

// TestFloor allocates garbage under a floor, after a collection and at a
// GOGC set under the floor: no collection starts until the heap reaches
// the floor. Without one, the same garbage is collected several times.
func TestFloor(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	runtime.GC()
	if n := collections(32 * mib); n < 4 {
		t.Fatalf("without a floor, 32 MiB of garbage took %d collections, want several", n)
	}

	SetFloor(64 * mib)
	defer SetFloor(0)
	if n := collections(32 * mib); n != 0 {
		t.Errorf("under a 64 MiB floor, 32 MiB of garbage took %d collections, want 0", n)
	}
	// After a collection the goal is set again for the heap it found
	// live: 16 MiB, which a GOGC fit for an empty heap would let grow
	// to hundreds.
	live = make([]byte, 16*mib)
	defer func() { live = nil }()
	runtime.GC()
	for deadline := time.Now().Add(10 * time.Second); gcPercent() > 400; {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC is %d after a collection found 16 MiB live, want at most 400", gcPercent())
		}
		time.Sleep(time.Millisecond)
	}
	if n := collections(64 * mib); n == 0 {
		t.Errorf("with 16 MiB live under a 64 MiB floor, 64 MiB of garbage took no collection")
	}
	live = nil
	runtime.GC()
	for deadline := time.Now().Add(10 * time.Second); gcPercent() < 1000; {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC is %d after a collection found the heap empty again, want over 1000", gcPercent())
		}
		time.Sleep(time.Millisecond)
	}
	if prev := SetPercent(50); prev != 100 {
		t.Errorf("SetPercent replaced GOGC %d, want 100", prev)
	}
	if n := collections(32 * mib); n != 0 {
		t.Errorf("at GOGC 50 under the floor, 32 MiB of garbage took %d collections, want 0", n)
	}
	if prev := SetPercent(100); prev != 50 {
		t.Errorf("SetPercent replaced GOGC %d, want 50", prev)
	}

	SetFloor(0)
	if n := collections(32 * mib); n < 4 {
		t.Errorf("with the floor taken away, 32 MiB of garbage took %d collections, want several", n)
	}
}
