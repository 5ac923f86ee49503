package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

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
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
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
		dir := t.TempDir()
		w := open(t, dir, Options{})
		if _, err := w.Apply(ctx, "", train); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
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
		// And a reader waits for a writer.
		w = open(t, dir, Options{})
		defer w.Close()
		if _, err := Open(ctx, dir, Options{ReadOnly: true}); !errors.Is(err, ErrLocked) {
			t.Errorf("a reader beside a writer: %v, want %v", err, ErrLocked)
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
