package main

import (
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
	mustRun(t, first, "restore", "--db", dst, "--user", "alice@example.org", "-")
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
	if got := mustRun(t, "", "dump", "--redis", srv.Addr); got != "spamd-dump 1\n" {
		t.Errorf("after deleting every model the dump is %.200q", got)
	}
}
