// Package procstat measures the process's own use of memory and CPU, for
// tests that bound what hostile input may cost: resident memory (RSS,
// from /proc/self), CPU time (getrusage), goroutines and the Go heap
// (runtime/metrics).
//
// A Probe samples while a test runs and keeps the peaks; the kernel's
// own peak of resident memory (VmHWM, reset at the start where
// /proc/self/clear_refs allows) catches what falls between samples.
// Figures are for the whole process: a test's client counts too, which
// makes a bound conservative. Linux only; elsewhere RSS reads as 0.
package procstat

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Sample is the process's use at one moment.
type Sample struct {
	// RSS is the resident memory, in bytes.
	RSS int64
	// CPU is the user and system CPU time used so far.
	CPU time.Duration
	// Goroutines is the number of goroutines.
	Goroutines int
	// Heap is the memory of the Go heap's objects, live or not yet
	// swept, in bytes.
	Heap int64
}

// Now returns the process's use now.
func Now() Sample {
	s := Sample{Goroutines: runtime.NumGoroutine(), RSS: rss()}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	m := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(m)
	if m[0].Value.Kind() == metrics.KindUint64 {
		s.Heap = int64(m[0].Value.Uint64())
	}
	return s
}

// rss reads the resident memory from /proc/self/statm.
func rss() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(string(f[1]), 10, 64)
	return pages * int64(os.Getpagesize())
}

// hwm reads the peak resident memory (VmHWM) from /proc/self/status.
func hwm() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmHWM:")); ok {
			kb, _ := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// resetHWM sets the kernel's peak of resident memory to the current RSS;
// it reports whether it could.
func resetHWM() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// Usage is what the process used while a Probe ran.
type Usage struct {
	// Base is the use when the probe started, after a garbage
	// collection.
	Base Sample
	// PeakRSS, PeakHeap and PeakGoroutines are the highest values seen.
	PeakRSS, PeakHeap int64
	PeakGoroutines    int
	// CPU is the CPU time used while the probe ran.
	CPU time.Duration
	// Elapsed is the wall time the probe ran.
	Elapsed time.Duration
}

// RSS returns the growth of resident memory: peak less base.
func (u Usage) RSS() int64 { return max(0, u.PeakRSS-u.Base.RSS) }

// Heap returns the growth of the Go heap: peak less base.
func (u Usage) Heap() int64 { return max(0, u.PeakHeap-u.Base.Heap) }

// Goroutines returns the most goroutines there were beyond the base.
func (u Usage) Goroutines() int { return max(0, u.PeakGoroutines-u.Base.Goroutines) }

// String gives the growth of each figure, as a test logs it.
func (u Usage) String() string {
	return fmt.Sprintf("RSS +%.1f MiB (base %.1f MiB), heap +%.1f MiB, CPU %.2fs in %.2fs, goroutines +%d",
		mib(u.RSS()), mib(u.Base.RSS), mib(u.Heap()), u.CPU.Seconds(), u.Elapsed.Seconds(), u.Goroutines())
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// Probe samples the process's use until stopped.
type Probe struct {
	start time.Time
	hwm   bool
	stop  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	u     Usage
}

// Start collects garbage, returns what it can to the system, takes the
// base sample and samples every interval until Stop.
func Start(interval time.Duration) *Probe {
	runtime.GC()
	debug.FreeOSMemory()
	p := &Probe{start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	p.u.Base = Now()
	p.hwm = resetHWM()
	p.note(p.u.Base)
	go func() {
		defer close(p.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.note(Now())
			}
		}
	}()
	return p
}

func (p *Probe) note(s Sample) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.u.PeakRSS = max(p.u.PeakRSS, s.RSS)
	p.u.PeakHeap = max(p.u.PeakHeap, s.Heap)
	p.u.PeakGoroutines = max(p.u.PeakGoroutines, s.Goroutines)
}

// Now returns the use so far, the probe still running.
func (p *Probe) Now() Usage {
	s := Now()
	p.note(s)
	p.mu.Lock()
	defer p.mu.Unlock()
	u := p.u
	u.CPU = s.CPU - u.Base.CPU
	u.Elapsed = time.Since(p.start)
	if p.hwm {
		u.PeakRSS = max(u.PeakRSS, hwm())
	}
	return u
}

// Stop stops sampling and returns the use while the probe ran.
func (p *Probe) Stop() Usage {
	u := p.Now()
	close(p.stop)
	<-p.done
	return u
}

// RaceFactor is what a test's bound on RSS or CPU is multiplied by under
// the race detector, 1 without it. The race detector costs 5 to 10 times
// the memory and 2 to 20 times the CPU.
func RaceFactor() float64 {
	if Race {
		return 8
	}
	return 1
}

// Bound is what a test lets the process use while a Probe runs; a zero
// field is not checked. RSS and CPU are multiplied by RaceFactor; the
// heap and goroutines are not, since the race detector does not change
// them.
type Bound struct {
	RSS, Heap  int64
	CPU        time.Duration
	Goroutines int
}

// TB is the part of testing.TB that Within reports to.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
}

// Within logs u and fails t for each figure of u over b.
func Within(t TB, u Usage, b Bound) {
	t.Helper()
	t.Logf("usage: %v", u)
	f := RaceFactor()
	if b.RSS > 0 && float64(u.RSS()) > float64(b.RSS)*f {
		t.Errorf("RSS grew %.1f MiB, bound %.0f MiB", mib(u.RSS()), float64(b.RSS)*f/(1<<20))
	}
	if b.Heap > 0 && u.Heap() > b.Heap {
		t.Errorf("heap grew %.1f MiB, bound %d MiB", mib(u.Heap()), b.Heap>>20)
	}
	if b.CPU > 0 && float64(u.CPU) > float64(b.CPU)*f {
		t.Errorf("CPU %.2fs, bound %.1fs", u.CPU.Seconds(), b.CPU.Seconds()*f)
	}
	if b.Goroutines > 0 && u.Goroutines() > b.Goroutines {
		t.Errorf("%d goroutines more than at the start, bound %d", u.Goroutines(), b.Goroutines)
	}
}
