package store

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// Copy restores into dst user's model as src holds it, through src's Dump
// and dst's Restore: whole or not at all, as Restore writes it. dst must
// not hold a model of user.
func Copy(ctx context.Context, dst, src Store, user string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	recs := make(chan Record, 1024)
	dumped := make(chan error, 1)
	go func() {
		defer close(recs)
		dumped <- src.Dump(ctx, user, func(r Record) error {
			select {
			case recs <- r:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	var derr error
	waited := false
	wait := func() error {
		if !waited {
			derr, waited = <-dumped, true
		}
		return derr
	}
	err := dst.Restore(ctx, user, func() (Record, error) {
		if r, ok := <-recs; ok {
			return r, nil
		}
		// The dump ended: well (the restore completes), or not (the
		// restore fails with the dump's error and writes nothing).
		if err := wait(); err != nil {
			return Record{}, err
		}
		return Record{}, io.EOF
	})
	cancel()
	for range recs {
	}
	if derr := wait(); err == nil && derr != nil && !errors.Is(derr, context.Canceled) {
		err = derr
	}
	if err != nil {
		return fmt.Errorf("copy model %q: %w", user, err)
	}
	return nil
}
