package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/spamd/spamd/store/redisstore/redistest"
)

// TestCheckCatchesCorruptSamples trains the sample corpus, whose messages'
// measures the store keeps as samples beside the counts, then damages one
// stored sample behind the store's back: check must fail and name it.
func TestCheckCatchesCorruptSamples(t *testing.T) {
	spam, ham := filepath.Join(sample, "spam"), filepath.Join(sample, "ham")
	for _, tt := range []struct {
		name    string
		corrupt func(txn *badger.Txn, keys, vals [][]byte) error
	}{
		// Another measure's statistics in its place: decodable, only
		// wrong.
		{"statistic changed", func(txn *badger.Txn, keys, vals [][]byte) error {
			for i := 1; i < len(vals); i++ {
				if !bytes.Equal(vals[i], vals[0]) {
					return txn.Set(keys[0], vals[i])
				}
			}
			return errors.New("every sample is the same")
		}},
		{"statistic lost", func(txn *badger.Txn, keys, _ [][]byte) error { return txn.Delete(keys[0]) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db := t.TempDir()
			if code, out, errOut := spamtrain(t, "", "train", "--db", db, "--spam", spam, "--ham", ham); code != 0 {
				t.Fatalf("train: exit %d: %s%s", code, out, errOut)
			}
			if code, out, errOut := spamtrain(t, "", "check", "--db", db); code != 0 {
				t.Fatalf("check before: exit %d: %s%s", code, out, errOut)
			}
			kv, err := badger.Open(badger.DefaultOptions(db).WithLogger(nil))
			if err != nil {
				t.Fatal(err)
			}
			err = kv.Update(func(txn *badger.Txn) error {
				// The global model's samples: kind "h", the empty user
				// (store/badgerstore/keys.go).
				it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("h\x00"), PrefetchValues: true})
				var keys, vals [][]byte
				for it.Rewind(); it.Valid(); it.Next() {
					v, err := it.Item().ValueCopy(nil)
					if err != nil {
						it.Close()
						return err
					}
					keys, vals = append(keys, it.Item().KeyCopy(nil)), append(vals, v)
				}
				it.Close()
				if len(keys) < 2 {
					return errors.New("fewer than two samples stored")
				}
				return tt.corrupt(txn, keys, vals)
			})
			if cerr := kv.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
			code, out, errOut := spamtrain(t, "", "check", "--db", db)
			if code == 0 {
				t.Fatalf("check passed a damaged sample: %s", out)
			}
			t.Logf("check: %s", out)
			if !strings.Contains(out, "(global): ") || !strings.Contains(out, "measure ") || strings.Contains(out, "(global): ok") {
				t.Errorf("check's output does not name the damaged sample: %s%s", out, errOut)
			}
		})
	}
}

// TestCheckFindsATwiceTrainedMessage restores a model, written by hand,
// that holds one message as ham and as spam under two digests, as a store
// written before a report's digest ignored what delivery added could:
// the two seen records share the message's mark, and check says so, on
// a Badger store, through the daemon and on a Redis store.
func TestCheckFindsATwiceTrainedMessage(t *testing.T) {
	isolate(t)
	d := startDaemon(t)
	file := filepath.Join(t.TempDir(), "twice.dump")
	model := "spamd-dump 3\nuser alice@example.org\nclasses ham spam\n" +
		"t 0000000000000001 2026-11-20 1 0 1 0\n" +
		"s " + strings.Repeat("ab", 32) + " ham 2026-11-20 5d41402abc4b2a76\n" +
		"s " + strings.Repeat("cd", 32) + " spam 2026-11-21 5d41402abc4b2a76\n" +
		"end tokens=1 seen=2 messages=1,1 counts=1,1 values=0,0 levels=0,0 forgotten=0,0\n"
	if err := os.WriteFile(file, []byte(model), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := redistest.Start(t, redistest.Binary(t, "SPAMD_REDIS_SERVER", "redis-server"))
	t.Setenv("SPAMD_REDIS", "")
	for _, where := range [][]string{{"--db", filepath.Join(t.TempDir(), "db")}, {"--api", "unix:" + d.sock}, {"--redis", srv.Addr}} {
		// Flags before the file: parsing stops at the first argument.
		mustRun(t, "", append(append([]string{"restore"}, where...), file)...)
		code, out, _ := spamtrain(t, "", append([]string{"check"}, where...)...)
		if code != 1 || !strings.Contains(out, `message 5d41402abc4b2a76 trained as "ham" (digest abababababababab) and as "spam" (digest cdcdcdcdcdcdcdcd)`) {
			t.Errorf("check %v: exit %d:\n%s", where, code, out)
		}
	}
}
