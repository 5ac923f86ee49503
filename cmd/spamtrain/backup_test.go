package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spamd/spamd/store/redisstore/redistest"
)

// trainSample trains the sample corpus into a Badger store as the global
// model and as alice's, and returns the store's directory.
func trainSample(t *testing.T) string {
	t.Helper()
	db := t.TempDir()
	spam, ham := filepath.Join(sample, "spam"), filepath.Join(sample, "ham")
	for _, user := range []string{"", "alice@example.org"} {
		if code, out, errOut := spamtrain(t, "", "train", "--db", db, "--user", user, "--spam", spam, "--ham", ham); code != 0 {
			t.Fatalf("train: exit %d: %s%s", code, out, errOut)
		}
	}
	return db
}

// mustRun runs spamtrain and fails the test unless it exits 0.
func mustRun(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	code, out, errOut := spamtrain(t, stdin, args...)
	if code != 0 {
		t.Fatalf("%s: exit %d: %s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// TestDumpRestore dumps a Badger store, restores it into another, and
// checks that the second dump is byte for byte the first and that both
// stores classify every message with the same score.
func TestDumpRestore(t *testing.T) {
	t.Setenv("SPAMD_API", "")
	src := trainSample(t)
	file := filepath.Join(t.TempDir(), "model.dump.gz")
	mustRun(t, "", "dump", "--db", src, "-o", file)
	first := mustRun(t, "", "dump", "--db", src)

	dst := t.TempDir()
	out := mustRun(t, "", "restore", "--db", dst, file)
	if !strings.Contains(out, "(global): restored") || !strings.Contains(out, "alice@example.org: restored") {
		t.Errorf("restore printed %q", out)
	}
	// Into a new store, the restore ends with a compaction that folds
	// the rows into the sealed file.
	if fi, err := os.Stat(filepath.Join(dst, "sealed-buckets")); !strings.Contains(out, "compact: ") || err != nil || fi.Size() == 0 {
		t.Errorf("a restore into a new store left no sealed file (%v) or printed no compaction: %q", err, out)
	}
	if second := mustRun(t, "", "dump", "--db", dst); second != first {
		t.Fatalf("dump → restore → dump differs: %d bytes against %d", len(second), len(first))
	}
	mustRun(t, "", "check", "--db", dst)
	for _, user := range []string{"", "alice@example.org"} {
		want := mustRun(t, "", "classify", "--db", src, "--user", user, "--json", filepath.Join(sample, "spam"), filepath.Join(sample, "ham"))
		got := mustRun(t, "", "classify", "--db", dst, "--user", user, "--json", filepath.Join(sample, "spam"), filepath.Join(sample, "ham"))
		if got != want || strings.Count(got, "\n") != 40 {
			t.Errorf("user %q: the restored model classifies otherwise:\n%s\nagainst\n%s", user, got, want)
		}
	}

	// A model that exists is not overwritten, and nothing changes.
	code, _, errOut := spamtrain(t, "", "restore", "--db", dst, file)
	if code != 1 || !strings.Contains(errOut, "delete-user --global") {
		t.Errorf("restore over a model: exit %d: %s", code, errOut)
	}
	if again := mustRun(t, "", "dump", "--db", dst); again != first {
		t.Error("a refused restore changed the store")
	}

	// Delete one model, then restore it from the dump alone, and another
	// copy under a new name.
	out = mustRun(t, "", "delete-user", "--db", dst, "alice@example.org", "nobody")
	if !strings.Contains(out, "alice@example.org: deleted a model of 40 messages") || !strings.Contains(out, "nobody: no model") {
		t.Errorf("delete-user printed %q", out)
	}
	if got := mustRun(t, "", "dump", "--db", dst); strings.Contains(got, "alice") {
		t.Error("the deleted model is still in the dump")
	}
	if out := mustRun(t, first, "restore", "--db", dst, "--user", "alice@example.org", "-"); strings.Contains(out, "compact: ") {
		t.Errorf("a restore into a store with a model compacted it: %q", out)
	}
	mustRun(t, first, "restore", "--db", dst, "--user", "alice@example.org", "--as", "bob@example.org", "-")
	if got := mustRun(t, "", "dump", "--db", dst, "--user", "", "--user", "alice@example.org"); got != first {
		t.Error("the model restored from standard input differs")
	}
	bob := mustRun(t, "", "dump", "--db", dst, "--user", "bob@example.org")
	alice := mustRun(t, "", "dump", "--db", dst, "--user", "alice@example.org")
	if strings.Replace(bob, "user bob@example.org", "user alice@example.org", 1) != alice {
		t.Error("the model restored --as another user differs")
	}
}

func TestRestoreRefuses(t *testing.T) {
	t.Setenv("SPAMD_API", "")
	first := mustRun(t, "", "dump", "--db", trainSample(t))
	lines := strings.SplitAfter(first, "\n")
	cut := strings.Join(lines[:len(lines)-3], "")
	tests := []struct {
		name  string
		args  []string
		stdin string
		code  int
		want  string
	}{
		{"cut short", []string{"-"}, cut, 1, "cut short"},
		{"not a dump", []string{"-"}, "Subject: hi\n\nbody\n", 1, "not a valid spamd dump"},
		{"no file", nil, "", 2, "one dump"},
		{"missing file", []string{"/nonexistent/dump"}, "", 1, "no such file"},
		{"a directory", []string{"."}, "", 1, "not a regular file"},
		{"--as two users", []string{"--as", "x", "-"}, first, 2, "one --user"},
		{"user not in the dump", []string{"--user", "carol", "-"}, first, 1, "holds 0 of the 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := t.TempDir()
			code, out, errOut := spamtrain(t, tt.stdin, append([]string{"restore", "--db", db}, tt.args...)...)
			if code != tt.code || !strings.Contains(errOut, tt.want) {
				t.Fatalf("exit %d (want %d): %s%s, want %q", code, tt.code, out, errOut, tt.want)
			}
			// The global model comes first and may be whole; nothing
			// is there in part.
			mustRun(t, "", "check", "--db", db)
			if d := mustRun(t, "", "dump", "--db", db); strings.Contains(d, "alice") {
				t.Errorf("alice's model is there after a refused restore")
			}
		})
	}
}

// TestMigrateToRedis moves a Badger model to Redis through a dump and
// checks that the two classify alike.
func TestMigrateToRedis(t *testing.T) {
	srv := redistest.Start(t, redistest.Binary(t, "SPAMD_REDIS_SERVER", "redis-server"))
	for _, k := range []string{"SPAMD_CONFIG", "SPAMD_REDIS", "SPAMD_DB", "SPAMD_API"} {
		t.Setenv(k, "")
	}
	db := trainSample(t)
	first := mustRun(t, "", "dump", "--db", db)
	mustRun(t, first, "restore", "--redis", srv.Addr, "-")
	if got := mustRun(t, "", "dump", "--redis", srv.Addr); got != first {
		t.Fatalf("the Redis model dumps otherwise: %d bytes against %d", len(got), len(first))
	}
	mustRun(t, "", "check", "--redis", srv.Addr)
	want := mustRun(t, "", "classify", "--db", db, "--json", filepath.Join(sample, "spam"), filepath.Join(sample, "ham"))
	if got := mustRun(t, "", "classify", "--redis", srv.Addr, "--json", filepath.Join(sample, "spam"), filepath.Join(sample, "ham")); got != want {
		t.Error("the Redis model classifies otherwise")
	}
	mustRun(t, "", "delete-user", "--redis", srv.Addr, "--global", "alice@example.org")
	if got := mustRun(t, "", "dump", "--redis", srv.Addr); got != "spamd-dump 3\n" {
		t.Errorf("after deleting every model the dump is %.200q", got)
	}
}

// TestMaintenanceThroughDaemon runs the maintenance commands against a
// store a daemon holds: each goes through its API, with the output it
// has on a store of its own.
func TestMaintenanceThroughDaemon(t *testing.T) {
	isolate(t)
	d := startDaemon(t)
	api := "unix:" + d.sock
	spam, ham := filepath.Join(sample, "spam"), filepath.Join(sample, "ham")
	for _, user := range []string{"", "alice@example.org"} {
		mustRun(t, "", "train", "--api", api, "--user", user, "--spam", spam, "--ham", ham)
	}
	// --db of the daemon's store finds the daemon through spamd's
	// configuration, as without --db.
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte("[api]\nsocket = \""+d.sock+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SPAMD_CONFIG", cfg)
	if out := mustRun(t, "", "check", "--db", d.dir); !strings.Contains(out, "(global): ok") || !strings.Contains(out, "alice@example.org: ok") {
		t.Errorf("check through the daemon printed %q", out)
	}
	if out := mustRun(t, "", "compact", "--api", api); !strings.Contains(out, "compact: ") {
		t.Errorf("compact printed %q", out)
	}
	file := filepath.Join(t.TempDir(), "model.dump")
	mustRun(t, "", "dump", "--api", api, "-o", file)
	first := mustRun(t, "", "dump", "--api", api)
	if !strings.HasPrefix(first, "spamd-dump 3\nuser\n") || !strings.Contains(first, "\nuser alice@example.org\n") {
		t.Fatalf("the dump through the daemon starts %.60q", first)
	}
	if alice := mustRun(t, "", "dump", "--api", api, "--user", "alice@example.org"); strings.Contains(alice, "\nuser\n") || !strings.Contains(first, strings.TrimPrefix(alice, "spamd-dump 3\n")) {
		t.Error("the dump of one user is not that user's section of the whole")
	}

	code, _, errOut := spamtrain(t, "", "restore", "--api", api, file)
	if code != 1 || !strings.Contains(errOut, "exists") {
		t.Errorf("restore over the models: exit %d: %s", code, errOut)
	}
	out := mustRun(t, "", "delete-user", "--api", api, "alice@example.org")
	if !strings.Contains(out, "alice@example.org: deleted a model of 40 messages") {
		t.Errorf("delete-user printed %q", out)
	}
	out = mustRun(t, "", "restore", "--api", api, "--user", "alice@example.org", file)
	if !strings.Contains(out, "alice@example.org: restored") {
		t.Errorf("restore printed %q", out)
	}
	if again := mustRun(t, "", "dump", "--api", api); again != first {
		t.Error("dump → delete → restore → dump through the daemon differs")
	}
	mustRun(t, "", "check", "--api", api)

	// A damaged dump restores nothing, and says so.
	mustRun(t, "", "delete-user", "--api", api, "alice@example.org")
	cut := first[:strings.LastIndex(first, "\nend ")+1]
	code, _, errOut = spamtrain(t, cut, "restore", "--api", api, "--user", "alice@example.org", "-")
	if code != 1 || !strings.Contains(errOut, "cut short") {
		t.Errorf("restore of a cut dump: exit %d: %s", code, errOut)
	}
	if d := mustRun(t, "", "dump", "--api", api, "--user", "alice@example.org"); strings.Contains(d, "\nt ") {
		t.Error("a cut dump left a model in part")
	}
}
