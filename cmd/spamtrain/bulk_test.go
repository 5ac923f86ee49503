package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spamd/spamd/mailbox"
)

// TestBulkTrain checks that training a new store in one piece gives the
// very model that training batch by batch into a store does: the first
// store is empty, so train learns it in memory and loads it; the second
// holds another user's model, so train applies each batch.
func TestBulkTrain(t *testing.T) {
	index := filepath.Join(t.TempDir(), "index")
	var lines []string
	if corpus := os.Getenv("SPAMD_CORPUS"); corpus != "" {
		entries, err := mailbox.ReadIndex(filepath.Join(corpus, "index"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries[:min(len(entries), 150)] {
			lines = append(lines, e.Label+" "+e.Path)
		}
	} else {
		for _, class := range []string{"spam", "ham"} {
			names, err := os.ReadDir(filepath.Join(sample, class))
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range names {
				abs, _ := filepath.Abs(filepath.Join(sample, class, n.Name()))
				lines = append(lines, class+" "+abs)
			}
		}
	}
	if err := os.WriteFile(index, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bulk, batched := t.TempDir(), t.TempDir()
	first := strings.Fields(lines[0])[1]
	for _, args := range [][]string{
		{"train", "--db", bulk, "--index", index, "--batch", "50"},
		{"train", "--db", batched, "--user", "bob", "--spam", first},
		{"train", "--db", batched, "--index", index, "--batch", "50"},
	} {
		if code, out, errOut := spamtrain(t, "", args...); code != 0 {
			t.Fatalf("%v: exit %d: %s%s", args, code, out, errOut)
		}
	}
	dumps := map[string]string{}
	for _, db := range []string{bulk, batched} {
		code, out, errOut := spamtrain(t, "", "dump", "--db", db, "--user", "")
		if code != 0 {
			t.Fatalf("dump: exit %d: %s", code, errOut)
		}
		dumps[db] = out
		if code, out, errOut := spamtrain(t, "", "check", "--db", db); code != 0 {
			t.Errorf("check: exit %d: %s%s", code, out, errOut)
		}
	}
	if dumps[bulk] != dumps[batched] {
		t.Fatalf("the bulk-trained model differs from the batch-trained one:\n%.300s\n---\n%.300s", dumps[bulk], dumps[batched])
	}
	t.Logf("%d messages, %d lines of dump alike", len(lines), strings.Count(dumps[bulk], "\n"))
}

// TestReadsOnlyMemTable: a command that only reads opens Badger with the
// small memtable, one that writes with Badger's default, whether it opens
// a filter over the store or the store alone; train, which loads a store
// it makes in bulk, opens a new one with the small memtable too.
func TestReadsOnlyMemTable(t *testing.T) {
	db := t.TempDir()
	e := &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	withFilter := func(mf *modelFlags) (*modelStore, error) {
		_, st, err := mf.open(context.Background(), e)
		return st, err
	}
	storeAlone := func(mf *modelFlags) (*modelStore, error) { return mf.store(context.Background(), e) }
	for _, tt := range []struct {
		name       string
		db         string
		open       func(*modelFlags) (*modelStore, error)
		readsOnly  bool
		loadsIfNew bool
		want       int64
	}{
		{"filter, reads", db, withFilter, true, false, smallMemTableBytes},
		{"filter, writes", db, withFilter, false, false, 0},
		{"store, reads", db, storeAlone, true, false, smallMemTableBytes},
		{"store, writes", db, storeAlone, false, false, 0},
		{"filter, loads a store it makes", filepath.Join(t.TempDir(), "new"), withFilter, false, true, smallMemTableBytes},
		{"filter, loads into an empty directory", t.TempDir(), withFilter, false, true, smallMemTableBytes},
		{"filter, loads if new, a store that is", db, withFilter, false, true, 0},
	} {
		st, err := tt.open(&modelFlags{db: tt.db, readsOnly: tt.readsOnly, loadsIfNew: tt.loadsIfNew})
		if err != nil {
			t.Fatal(err)
		}
		if got := st.opts.MemTableBytes; got != tt.want {
			t.Errorf("%s: memtable %d bytes, want %d", tt.name, got, tt.want)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAbsentOrEmpty tells a store not made yet from a directory that
// holds something.
func TestAbsentOrEmpty(t *testing.T) {
	dir := t.TempDir()
	full := filepath.Join(dir, "full")
	file := filepath.Join(full, "MANIFEST")
	if err := os.MkdirAll(full, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, path string
		want       bool
	}{
		{"absent", filepath.Join(dir, "absent"), true},
		{"empty", t.TempDir(), true},
		{"holds a file", full, false},
		{"a file", file, false},
	} {
		if got := absentOrEmpty(tt.path); got != tt.want {
			t.Errorf("%s: absentOrEmpty(%s) = %v, want %v", tt.name, tt.path, got, tt.want)
		}
	}
}
