package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/redisstore/redistest"
)

// oldModel writes a dump of a model with tokens and a message from 2020
// and a token of today, and returns today and the file.
func oldModel(t *testing.T) (store.Day, string) {
	t.Helper()
	today := store.DayOf(time.Now())
	file := filepath.Join(t.TempDir(), "old.dump")
	model := "spamd-dump 3\nuser\nclasses ham spam\n" +
		"t 0000000000000001 2020-01-01 1 0 0 0\n" +
		"t 0000000000000002 2020-01-01 5 0 0 0\n" +
		"t 0000000000000003 " + today.String() + " 0 0 1 0\n" +
		"s " + strings.Repeat("ab", 32) + " ham 2020-01-01 0000000000000001\n" +
		"end tokens=3 seen=1 messages=1,0 counts=6,1 values=0,0 levels=0,0 forgotten=0,0\n"
	if err := os.WriteFile(file, []byte(model), 0o600); err != nil {
		t.Fatal(err)
	}
	return today, file
}

// TestPrune prunes a model with tokens and a message from 2020 on a
// store of its own and through a daemon, with the same output either
// way, and shows in users when each model was last trained.
func TestPrune(t *testing.T) {
	isolate(t)
	d := startDaemon(t)
	local := []string{"--db", filepath.Join(t.TempDir(), "db")}
	remote := []string{"--api", "unix:" + d.sock}
	today, file := oldModel(t)
	// Flags before the arguments: parsing stops at the first argument.
	run := func(cmd string, args ...string) (string, string) {
		t.Helper()
		return mustRun(t, "", append(append([]string{cmd}, local...), args...)...),
			mustRun(t, "", append(append([]string{cmd}, remote...), args...)...)
	}
	mustRun(t, "", append(append([]string{"restore"}, local...), file)...)
	mustRun(t, "", append(append([]string{"restore"}, remote...), file)...)
	l, r := run("users")
	if l != r || !strings.Contains(l, today.String()) || !strings.Contains(l, " MiB") {
		t.Errorf("users: local\n%s\nthrough the daemon\n%s", l, r)
	}

	l, r = run("prune", "--days", "30", "--seen-days", "365")
	want := "prune: tokens seen at most 1 times, last before " + (today - 29).String() + "; seen records before " + (today - 364).String() + "\n" +
		"(global): 1 tokens and 1 seen records deleted, 2 tokens kept\n"
	if l != want || r != want {
		t.Errorf("prune: local %q, through the daemon %q; want %q", l, r, want)
	}
	l, r = run("prune", "--max-tokens", "1")
	if l != r || !strings.Contains(l, "(global): 1 tokens and 0 seen records deleted, 1 tokens kept") {
		t.Errorf("prune --max-tokens: local %q, through the daemon %q", l, r)
	}
	run("check")
	for _, args := range [][]string{{"prune"}, {"prune", "--days", "-1"}, {"prune", "x", "--days", "1"}, {"prune", "--days", "30", "--count", "0"}} {
		if code, _, _ := spamtrain(t, "", append(args, local...)...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

// TestPruneRedis prunes the same model in Redis, with spamtrain --redis:
// the same output as Badger's, a size in users, and a model that checks.
func TestPruneRedis(t *testing.T) {
	isolate(t)
	t.Setenv("SPAMD_REDIS", "")
	srv := redistest.Start(t, redistest.Binary(t, "SPAMD_REDIS_SERVER", "redis-server"))
	today, file := oldModel(t)
	at := []string{"--redis", srv.Addr}
	run := func(cmd string, args ...string) string {
		t.Helper()
		return mustRun(t, "", append(append([]string{cmd}, at...), args...)...)
	}
	run("restore", file)
	if out := run("users"); !strings.Contains(out, today.String()) || !strings.Contains(out, " MiB") {
		t.Errorf("users:\n%s", out)
	}
	want := "prune: tokens seen at most 1 times, last before " + (today - 29).String() + "; seen records before " + (today - 364).String() + "\n" +
		"(global): 1 tokens and 1 seen records deleted, 2 tokens kept\n"
	if out := run("prune", "--days", "30", "--seen-days", "365"); out != want {
		t.Errorf("prune: %q; want %q", out, want)
	}
	if out := run("prune", "--max-tokens", "1"); !strings.Contains(out, "(global): 1 tokens and 0 seen records deleted, 1 tokens kept") {
		t.Errorf("prune --max-tokens: %q", out)
	}
	if out := run("check"); !strings.Contains(out, "(global): ok") {
		t.Errorf("check: %q", out)
	}
}
