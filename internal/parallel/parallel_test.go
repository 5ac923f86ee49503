package parallel

import (
	"context"
	"errors"
	"strings"
	"testing"
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
