//go:build !windows && !plan9 && !js && !wasip1 && !aix
// +build !windows,!plan9,!js,!wasip1,!aix

package badger

import (
	"sync"
	"testing"
)

// TestReadOnlySyncsNoDirectory checks the spamd patch: a DB opened
// read-only syncs no directory, at open or at close, where one opened for
// writing does.
func TestReadOnlySyncsNoDirectory(t *testing.T) {
	var (
		mu     sync.Mutex
		synced []string
	)
	dirSynced = func(dir string) {
		mu.Lock()
		defer mu.Unlock()
		synced = append(synced, dir)
	}
	defer func() { dirSynced = nil }()
	dir := t.TempDir()
	for _, readOnly := range []bool{false, true} {
		mu.Lock()
		synced = nil
		mu.Unlock()
		db, err := Open(DefaultOptions(dir).WithReadOnly(readOnly).WithLogger(nil))
		if err != nil {
			t.Fatalf("read-only %v: Open: %v", readOnly, err)
		}
		if !readOnly {
			if err := db.Update(func(txn *Txn) error { return txn.Set([]byte("k"), []byte("v")) }); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Close(); err != nil {
			t.Fatalf("read-only %v: Close: %v", readOnly, err)
		}
		mu.Lock()
		got := synced
		mu.Unlock()
		if readOnly && len(got) != 0 {
			t.Errorf("read-only open and close synced %q", got)
		}
		if !readOnly && len(got) == 0 {
			t.Error("an open and close for writing synced no directory")
		}
	}
	db, err := Open(DefaultOptions(dir).WithReadOnly(true).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(txn *Txn) error {
		item, err := txn.Get([]byte("k"))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if string(v) != "v" {
				t.Errorf("read %q, want v", v)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}
