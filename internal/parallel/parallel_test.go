package parallel

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func feed(n int) <-chan int {
	ch := make(chan int)
	go func() {
		defer close(ch)
		for i := range n {
			ch <- i
		}
	}()
	return ch
}

func TestMapKeepsOrder(t *testing.T) {
	for _, workers := range []int{0, 1, 3, 16} {
		var got []int
		err := Map(context.Background(), workers, feed(1000), func(i int) int { return i * i },
			func(v int) error { got = append(got, v); return nil })
		if err != nil {
			t.Fatalf("workers %d: %v", workers, err)
		}
		if len(got) != 1000 {
			t.Fatalf("workers %d: got %d results, want 1000", workers, len(got))
		}
		for i, v := range got {
			if v != i*i {
				t.Fatalf("workers %d: result %d = %d, want %d", workers, i, v, i*i)
			}
		}
	}
}

func TestMapStopsAtOutError(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	err := Map(context.Background(), 4, feed(100000), func(i int) int { return i },
		func(int) error {
			n++
			if n == 10 {
				return stop
			}
			return nil
		})
	if !errors.Is(err, stop) || n != 10 {
		t.Fatalf("err = %v after %d results, want stop after 10", err, n)
	}
}

func TestMapRecoversPanic(t *testing.T) {
	err := Map(context.Background(), 2, feed(10), func(i int) int {
		if i == 5 {
			panic("boom")
		}
		return i
	}, func(int) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err = %v, want the panic", err)
	}
}

func TestMapCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	in := make(chan int) // never closed: only the context can end Map
	if err := Map(ctx, 2, in, func(i int) int { return i }, func(int) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// TestMapWindow holds up the first input until every input the window
// lets the workers take has been taken: no more may start, and all are
// delivered in order once it goes on.
func TestMapWindow(t *testing.T) {
	for _, tc := range []struct{ workers, window int }{{1, 1}, {2, 4}, {3, 32}} {
		limit := tc.workers * tc.window
		var started atomic.Int32
		release := make(chan struct{})
		go func() {
			// Wait until the workers have taken all they may, and a
			// moment for one to take more than it may.
			for started.Load() < int32(limit) {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
			close(release)
		}()
		var got []int
		err := MapWindow(context.Background(), tc.workers, tc.window, feed(limit*3), func(i int) int {
			if started.Add(1) > int32(limit) {
				select {
				case <-release:
				default:
					t.Errorf("workers %d, window %d: input %d started before the first was delivered", tc.workers, tc.window, i)
				}
			}
			if i == 0 {
				<-release
			}
			return i
		}, func(v int) error { got = append(got, v); return nil })
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != limit*3 || !slices.IsSorted(got) {
			t.Errorf("workers %d, window %d: delivered %d results, in order %v", tc.workers, tc.window, len(got), slices.IsSorted(got))
		}
	}
}
