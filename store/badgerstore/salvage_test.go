package badgerstore

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store/storetest"
)

// TestFinishSalvage puts a salvaged copy in place as Open finds it, in
// each state a crash can leave it: the copy is the model, the files of
// the directory it replaces go, and a subdirectory of the store's
// directory (the daemon's report spool, by default), with what was
// written into it meanwhile, stays.
func TestFinishSalvage(t *testing.T) {
	for _, tt := range []struct {
		name string
		// prepare turns the copy in tmp and the directory dir into the
		// state a crash left.
		prepare func(t *testing.T, tmp, dir string)
		// salvaged says whether the copy is the model after Open.
		salvaged bool
	}{
		{name: "copy complete", salvaged: true, prepare: func(t *testing.T, tmp, dir string) {
			writeFile(t, filepath.Join(tmp, salvagedName), "")
		}},
		{name: "cut off while moving", salvaged: true, prepare: func(t *testing.T, tmp, dir string) {
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if e.Type().IsRegular() {
					if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
						t.Fatal(err)
					}
				}
			}
			writeFile(t, filepath.Join(tmp, movingName), "")
			ents, err = os.ReadDir(tmp)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents[:len(ents)/2] {
				if e.Name() != movingName {
					if err := os.Rename(filepath.Join(tmp, e.Name()), filepath.Join(dir, e.Name())); err != nil {
						t.Fatal(err)
					}
				}
			}
		}},
		{name: "copy incomplete", salvaged: false, prepare: func(t *testing.T, tmp, dir string) {
			for _, f := range []string{"000001.sst", "MANIFEST"} {
				if err := os.Remove(filepath.Join(dir, f)); err != nil {
					t.Fatal(err)
				}
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			base := t.TempDir()
			dir := filepath.Join(base, "db")
			tmp := dir + salvageSuffix
			// The copy: a store closed cleanly, holding one message.
			s := open(t, tmp, Options{ReserveBytes: -1})
			op := storetest.Train("salvaged", "spam", map[bow.Hash]uint32{1: 1})
			train(t, s, "u", op)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			// The directory it replaces: what the old database flushed
			// into it while closing, and a spool written meanwhile.
			for _, f := range []string{"000001.sst", "MANIFEST"} {
				writeFile(t, filepath.Join(dir, f), "left by the old database")
			}
			spooled := filepath.Join(dir, "reports", "new", "r1")
			if err := os.MkdirAll(filepath.Dir(spooled), 0o750); err != nil {
				t.Fatal(err)
			}
			writeFile(t, spooled, "a report")
			tt.prepare(t, tmp, dir)

			s = open(t, dir, Options{ReserveBytes: -1})
			defer s.Close()
			class, err := s.Seen(ctx, "u", op.Digest)
			if err != nil {
				t.Fatal(err)
			}
			if got := class == "spam"; got != tt.salvaged {
				t.Errorf("the salvaged message is trained as %q", class)
			}
			if b, err := os.ReadFile(spooled); err != nil || string(b) != "a report" {
				t.Errorf("the spool in the store's directory: %q, %v", b, err)
			}
			if _, err := os.Stat(tmp); !os.IsNotExist(err) {
				t.Errorf("the copy's directory is left: %v", err)
			}
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o640); err != nil {
		t.Fatal(err)
	}
}
