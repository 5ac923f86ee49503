package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/storetest"
)

// listing returns the names, sizes and times of the files in dir.
func listing(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprint(e.Name(), " ", fi.Size(), " ", fi.ModTime()))
	}
	return out
}

// copyDir copies the files of src into a new directory, as a process
// killed leaves them when src is open.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// closedStore returns the directory of a store that ops were applied to
// and that was then closed cleanly.
func closedStore(t *testing.T, ops []store.Op) string {
	t.Helper()
	dir := t.TempDir()
	w := open(t, dir, Options{})
	if _, err := w.Apply(context.Background(), "", ops); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestReadOnly(t *testing.T) {
	ctx := context.Background()
	bag := map[bow.Hash]uint32{1: 2, 2: 1}
	train := []store.Op{storetest.Train("m1", "spam", bag)}
	want := func(t *testing.T, s *Store) {
		t.Helper()
		got, err := s.Lookup(ctx, "", []bow.Hash{1, 2, 3})
		if err != nil {
			t.Fatal(err)
		}
		spam := slices.Index(s.classes.Load().names, "spam")
		if spam < 0 || got[0].Count(spam) != 2 || got[1].Count(spam) != 1 || got[2] != nil {
			t.Errorf("Lookup = %v, want the counts trained", got)
		}
		more := []store.Op{storetest.Train("m2", "spam", bag)}
		if _, err := s.Apply(ctx, "", more); !errors.Is(err, store.ErrReadOnly) {
			t.Errorf("Apply: %v, want %v", err, store.ErrReadOnly)
		}
		if h := s.Health(); h.State != store.StateOK {
			t.Errorf("health %v, want %v", h.State, store.StateOK)
		}
	}

	t.Run("closed cleanly", func(t *testing.T) {
		dir := closedStore(t, train)
		before := listing(t, dir)
		r1 := open(t, dir, Options{ReadOnly: true})
		if !r1.dbReadOnly {
			t.Error("a store closed cleanly was not opened in Badger's read-only mode")
		}
		// Readers share the store; a writer waits for them.
		r2 := open(t, dir, Options{ReadOnly: true})
		if _, err := Open(ctx, dir, Options{}); !errors.Is(err, ErrLocked) {
			t.Errorf("a writer beside readers: %v, want %v", err, ErrLocked)
		}
		want(t, r1)
		want(t, r2)
		for _, r := range []*Store{r1, r2} {
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if after := listing(t, dir); !slices.Equal(before, after) {
			t.Errorf("readers changed the directory:\nbefore %q\nafter  %q", before, after)
		}
		// And a reader waits for a writer, having written nothing: not
		// even the probe file a writer's open makes and removes, which
		// would change the directory's time.
		w := open(t, dir, Options{})
		defer w.Close()
		before = listing(t, filepath.Dir(dir))
		if _, err := Open(ctx, dir, Options{ReadOnly: true}); !errors.Is(err, ErrLocked) {
			t.Errorf("a reader beside a writer: %v, want %v", err, ErrLocked)
		}
		if after := listing(t, filepath.Dir(dir)); !slices.Equal(before, after) {
			t.Errorf("a reader refused changed the directory:\nbefore %q\nafter  %q", before, after)
		}
	})

	t.Run("beside a spamd a fault keeps read-only", func(t *testing.T) {
		dir := closedStore(t, train)
		// A reserve beyond any disk's free space keeps the store
		// read-only; the monitor's looks are left out of the test.
		d := open(t, dir, Options{ReserveBytes: 1 << 62, CheckInterval: time.Hour})
		defer d.Close()
		if !d.dbReadOnly || d.Health().State != store.StateDegraded {
			t.Fatalf("opened with read-only %v, health %v; want read-only and degraded", d.dbReadOnly, d.Health().State)
		}
		r := open(t, dir, Options{ReadOnly: true})
		want(t, r)
		// The fault clears while the reader reads: the store stays
		// read-only, and answers, rather than fail.
		d.opts.ReserveBytes = -1
		if err := d.reopenWritable(ctx); err != nil {
			t.Fatalf("reopen beside a reader: %v", err)
		}
		if !d.dbReadOnly || d.Health().State != store.StateDegraded {
			t.Errorf("beside a reader: read-only %v, health %v; want read-only and degraded", d.dbReadOnly, d.Health().State)
		}
		if _, err := d.Lookup(ctx, "", []bow.Hash{1}); err != nil {
			t.Errorf("Lookup beside a reader: %v", err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if err := d.reopenWritable(ctx); err != nil {
			t.Fatalf("reopen once the reader is gone: %v", err)
		}
		if d.dbReadOnly || d.Health().State != store.StateOK {
			t.Errorf("once the reader is gone: read-only %v, health %v; want writable and ok", d.dbReadOnly, d.Health().State)
		}
		if _, err := d.Apply(ctx, "", []store.Op{storetest.Train("m2", "spam", bag)}); err != nil {
			t.Errorf("Apply once writable: %v", err)
		}
	})

	t.Run("of an older schema", func(t *testing.T) {
		dir := t.TempDir()
		writeV3(t, dir, 0, nil)
		r := open(t, dir, Options{ReadOnly: true})
		defer r.Close()
		if r.dbReadOnly {
			t.Error("a store to convert was opened in Badger's read-only mode")
		}
		if tot, err := r.Totals(ctx, "alice"); err != nil || tot.Vocabulary != 3 {
			t.Errorf("Totals after the conversion: %+v, %v", tot, err)
		}
		if _, err := r.Apply(ctx, "alice", []store.Op{storetest.Train("m9", "spam", bag)}); !errors.Is(err, store.ErrReadOnly) {
			t.Errorf("Apply: %v, want %v", err, store.ErrReadOnly)
		}
	})

	t.Run("left by a process killed", func(t *testing.T) {
		w := open(t, t.TempDir(), Options{})
		defer w.Close()
		if _, err := w.Apply(ctx, "", train); err != nil {
			t.Fatal(err)
		}
		// Copied while open, the directory holds the write-ahead log a
		// kill leaves, which only a writer's open replays.
		dir := copyDir(t, w.dir)
		if logs, _ := filepath.Glob(filepath.Join(dir, "*.mem")); len(logs) == 0 {
			t.Fatal("no write-ahead log in the copy")
		}
		r := open(t, dir, Options{ReadOnly: true})
		defer r.Close()
		if r.dbReadOnly {
			t.Error("a store with a log to replay was opened in Badger's read-only mode")
		}
		want(t, r)
	})
}
