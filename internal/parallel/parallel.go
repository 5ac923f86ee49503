// Package parallel runs a function over a stream of inputs on several
// goroutines and delivers the results in input order.
//
// Parsing mail is CPU-bound and independent per message, while training
// must see messages in the order given (the last label of a message wins),
// so the work fans out and the results are put back in order before they
// reach the caller. At most windowPerWorker results per worker wait to be
// reordered, which bounds memory however long the stream.
package parallel

import (
	"context"
	"fmt"
	"runtime"
	"sync"
)

// windowPerWorker is how many results per worker may wait for an older
// one. A message takes from a tenth of a millisecond to tens, and a
// worker that runs a window's length ahead of a long one waits, idle:
// with 4 a worker, classifying SpamAssassin's last 1,209 messages on two
// cores kept them 85% busy, with 32 the run took 7% less time. A result
// waiting is a verdict or a message's features, a few kilobytes.
const windowPerWorker = 32

// Map calls fn on every value received from in, on workers goroutines
// (0 means one per CPU), and calls out with each result in the order the
// inputs arrived. It returns when in is closed and every result was
// delivered, or at the first error of out or ctx. A panic in fn is
// returned as an error rather than crashing the process.
func Map[In, Out any](ctx context.Context, workers int, in <-chan In, fn func(In) Out, out func(Out) error) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	type job struct {
		seq int
		v   In
	}
	type done struct {
		seq int
		v   Out
		err error
	}
	jobs := make(chan job)
	results := make(chan done, workers)
	// window bounds how far ahead of the oldest undelivered result the
	// workers may run.
	window := make(chan struct{}, windowPerWorker*workers)

	go func() {
		defer close(jobs)
		seq := 0
		for {
			select {
			case <-ctx.Done():
				return
			case v, ok := <-in:
				if !ok {
					return
				}
				select {
				case window <- struct{}{}:
				case <-ctx.Done():
					return
				}
				select {
				case jobs <- job{seq, v}:
				case <-ctx.Done():
					return
				}
				seq++
			}
		}
	}()

	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				d := done{seq: j.seq}
				func() {
					defer func() {
						if r := recover(); r != nil {
							d.err = fmt.Errorf("panic in worker: %v", r)
						}
					}()
					d.v = fn(j.v)
				}()
				select {
				case results <- d:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() {
		wg.Wait()
		close(results)
	}()

	pending := make(map[int]done)
	next := 0
	for d := range results {
		pending[d.seq] = d
		for {
			p, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			<-window
			if p.err != nil {
				return p.err
			}
			if err := out(p.v); err != nil {
				return err
			}
		}
	}
	return ctx.Err()
}
