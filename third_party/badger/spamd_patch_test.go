package badger

import "testing"

// TestReadOnlySyncsNoDirectory checks the spamd patch: a DB opened
// read-only syncs no directory, at open or at close, where one opened for
// writing does.
func TestReadOnlySyncsNoDirectory(t *testing.T) {
	var synced []string
	dirSynced = func(dir string) { synced = append(synced, dir) }
	defer func() { dirSynced = nil }()
	dir := t.TempDir()
	for _, readOnly := range []bool{false, true} {
		synced = nil
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
		if readOnly && len(synced) != 0 {
			t.Errorf("read-only open and close synced %q", synced)
		}
		if !readOnly && len(synced) == 0 {
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
