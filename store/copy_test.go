package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/storetest"
)

// TestCopy copies a model between memory stores (a header, four rows, two
// seen records): the copy dumps as the
// original does, and a model that exists is refused, untouched.
func TestCopy(t *testing.T) {
	ctx := context.Background()
	src, dst := store.NewMemory(), store.NewMemory()
	ops := []store.Op{
		storetest.TrainSteps("a", "spam", map[bow.Hash]uint32{1: 2}, map[bow.Hash]uint32{2: 1, 3: 4}, store.Step{Class: "spam", Head: 5, Body: -3}),
		storetest.Train("b", "ham", map[bow.Hash]uint32{2: 1, 9: 1}),
	}
	if _, err := src.Apply(ctx, "alice", ops); err != nil {
		t.Fatal(err)
	}
	if err := store.Copy(ctx, dst, src, "alice"); err != nil {
		t.Fatal(err)
	}
	records := func(s store.Store) []string {
		var out []string
		if err := s.Dump(ctx, "alice", func(r store.Record) error {
			out = append(out, fmt.Sprintf("%+v", r))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	got, want := records(dst), records(src)
	if len(got) != len(want) || len(got) != 7 {
		t.Fatalf("copy holds %d records, the original %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("record %d: %s, want %s", i, got[i], want[i])
		}
	}
	if err := dst.Check(ctx, "alice"); err != nil {
		t.Error(err)
	}
	if err := store.Copy(ctx, dst, src, "alice"); !errors.Is(err, store.ErrExists) {
		t.Errorf("copy onto a model: %v, want ErrExists", err)
	}
}
