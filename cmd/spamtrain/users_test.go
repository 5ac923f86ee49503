package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestUsersAndReset lists and resets models on a store of its own and
// through a daemon, with the same output either way, and shows the
// models no mail is classified with.
func TestUsersAndReset(t *testing.T) {
	isolate(t)
	d := startDaemon(t)
	local := []string{"--db", filepath.Join(t.TempDir(), "db")}
	remote := []string{"--api", "unix:" + d.sock}
	spam, ham := filepath.Join(sample, "spam"), filepath.Join(sample, "ham")
	for _, where := range [][]string{local, remote} {
		// bob is named like an account: under the default naming rule
		// (users = "address") the milter never picks his model.
		for _, user := range []string{"", "alice@example.org", "bob"} {
			mustRun(t, "", append([]string{"train", "--user", user, "--spam", spam, "--ham", ham}, where...)...)
		}
	}
	run := func(args ...string) (string, string) {
		t.Helper()
		return mustRun(t, "", append(args, local...)...), mustRun(t, "", append(args, remote...)...)
	}

	l, r := run("users")
	if l != r {
		t.Errorf("users differs:\nlocal:\n%s\nthrough the daemon:\n%s", l, r)
	}
	for _, want := range []string{
		"(global)           40 (ham 20, spam 20)",
		"alice@example.org  40 (ham 20, spam 20)",
		"models no mail is classified with:\n  bob: named like an account",
	} {
		if !strings.Contains(l, want) {
			t.Errorf("users printed\n%s\nwant %q in it", l, want)
		}
	}
	if l, r = run("users", "--json"); l != r || !strings.Contains(l, `"user":"bob"`) || !strings.Contains(l, `"unread":"named like an account`) {
		t.Errorf("users --json: local %s, through the daemon %s", l, r)
	}
	if l, r = run("stats"); !strings.Contains(l, "  bob: named like an account") || !strings.Contains(r, "  bob: named like an account") {
		t.Errorf("stats does not show bob's model as unread:\n%s\n%s", l, r)
	}

	l, r = run("reset", "--user", "bob", "--user", "carol@example.org")
	if l != r || !strings.Contains(l, "bob: reset: forgot 40 messages") || !strings.Contains(l, "carol@example.org: no model; nothing to reset") {
		t.Errorf("reset: local %q, through the daemon %q", l, r)
	}
	if l, r = run("users"); l != r || strings.Contains(l, "bob") {
		t.Errorf("users after resetting bob:\n%s", l)
	}
	l, r = run("reset", "--all")
	if l != r || !strings.Contains(l, "alice@example.org: reset: forgot 40") || !strings.Contains(l, "(global): reset: forgot 40") {
		t.Errorf("reset --all: local %q, through the daemon %q", l, r)
	}
	if strings.Index(l, "(global)") < strings.Index(l, "alice") {
		t.Errorf("reset --all reset the global model before the users': %q", l)
	}
	if l, r = run("reset", "--all"); l != "reset: the store holds no model\n" || l != r {
		t.Errorf("reset --all of nothing: %q, %q", l, r)
	}
	mustRun(t, "", append([]string{"check"}, local...)...)
	for _, args := range [][]string{{"reset"}, {"reset", "--all", "--user", "a"}, {"reset", "alice"}, {"users", "x"}} {
		if code, _, _ := spamtrain(t, "", append(args, local...)...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}
