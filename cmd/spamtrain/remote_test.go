package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/identity"
	"github.com/spamd/spamd/prefs"
	"github.com/spamd/spamd/prefs/prefstest"
	"github.com/spamd/spamd/store/badgerstore"
)

// daemon is spamd's control API served in-process over a Badger store,
// as the daemon serves it, with the preferences it keeps.
type daemon struct {
	sock, dir string
	f         *filter.Filter
	prefs     *prefstest.Service
}

// startDaemon starts a daemon with the default [actions] and no [prefs].
func startDaemon(t *testing.T) daemon {
	t.Helper()
	return startDaemonPrefs(t, config.Actions{}, config.Prefs{})
}

// startDaemonPrefs starts a daemon whose configuration says a and p;
// what is set through its API is kept in prefs.json in its store's
// directory, as spamd keeps it.
func startDaemonPrefs(t *testing.T, a config.Actions, p config.Prefs) daemon {
	t.Helper()
	d := daemon{sock: filepath.Join(t.TempDir(), "api.sock"), dir: filepath.Join(t.TempDir(), "db")}
	st, err := badgerstore.Open(context.Background(), d.dir, badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := filter.New(st, filter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	pf, err := prefs.OpenFile(filepath.Join(d.dir, "prefs.json"))
	if err != nil {
		t.Fatal(err)
	}
	pd := prefstest.New(pf, a, prefs.SiteOf(f.Config().Required(), a, p), prefs.Layer{Users: p.User, Domains: p.Domain})
	srv := control.NewServer(control.Options{Filter: func() *filter.Filter { return f }, Size: st.Size, Compact: st.Compact, Dir: d.dir,
		Rule: func() identity.Rule { return identity.Address }, Prefs: pd})
	ln, err := net.Listen("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler(), ConnContext: control.ConnContext}
	go hs.Serve(ln)
	t.Cleanup(func() {
		hs.Close()
		st.Close()
	})
	d.f, d.prefs = f, pd
	return d
}

// isolate keeps the test from finding a daemon or store of the machine.
func isolate(t *testing.T) {
	t.Helper()
	t.Setenv("SPAMD_API", "")
	t.Setenv("SPAMD_DB", "")
	noDaemon := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(noDaemon, fmt.Appendf(nil, "[api]\nsocket = %q\n", filepath.Join(t.TempDir(), "none.sock")), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SPAMD_CONFIG", noDaemon)
}

// sampleDirs copies the repository's sample into spam/ and ham/ under a
// temporary directory, keeping the last ham apart, and returns the
// directories and the kept message's path.
func sampleDirs(t *testing.T) (spam, ham, heldOut string) {
	t.Helper()
	dir := t.TempDir()
	for _, class := range []string{"spam", "ham"} {
		src := filepath.Join(sample, class)
		ents, err := os.ReadDir(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, class)
		if err := os.Mkdir(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, e := range ents {
			b, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			to := filepath.Join(dst, e.Name())
			if class == "ham" && i == len(ents)-1 {
				to = filepath.Join(dir, "held-out.eml")
			}
			if err := os.WriteFile(to, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return filepath.Join(dir, "spam"), filepath.Join(dir, "ham"), filepath.Join(dir, "held-out.eml")
}

// classifyJSON classifies path and decodes the answer.
func classifyJSON(t *testing.T, args ...string) classification {
	t.Helper()
	status, out, errs := spamtrain(t, "", append([]string{"classify", "--json"}, args...)...)
	if status != 0 {
		t.Fatalf("classify: status %d: %s", status, errs)
	}
	var c classification
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("classify printed %q: %v", out, err)
	}
	return c
}

// TestTrainWhileDaemonRuns trains through a running daemon with the
// spamtrain command line, and checks that a message learned that way
// changes the next verdict.
func TestTrainWhileDaemonRuns(t *testing.T) {
	isolate(t)
	d := startDaemon(t)
	api := "--api=unix:" + d.sock
	spam, ham, heldOut := sampleDirs(t)

	status, out, errs := spamtrain(t, "", "train", api, "--spam", spam, "--ham", ham)
	if status != 0 || out != "train: 39 messages: 39 learned, 0 relabeled, 0 already known\n" {
		t.Fatalf("train: status %d, %q, %s", status, out, errs)
	}
	before := classifyJSON(t, api, heldOut)
	if before.Verdict != "ham" || before.TrainedAs != "" {
		t.Fatalf("the unseen ham: %+v", before)
	}

	// Reported as spam, through the daemon.
	status, out, errs = spamtrain(t, "", "train", api, "--spam", heldOut)
	if status != 0 || out != "train: 1 messages: 1 learned, 0 relabeled, 0 already known\n" {
		t.Fatalf("train --spam: status %d, %q, %s", status, out, errs)
	}
	after := classifyJSON(t, api, heldOut)
	if after.TrainedAs != "spam" || !(after.Score > before.Score) {
		t.Errorf("after training it as spam: %+v; before: %+v", after, before)
	}
	t.Logf("the held-out ham went from %s (score %.2f) to %s (score %.2f)", before.Verdict, before.Score, after.Verdict, after.Score)

	// A user with no model of their own gets the global verdict; their
	// own report moves their model further.
	bob := "--user=bob@example.org"
	if c := classifyJSON(t, api, bob, heldOut); c.Score != after.Score {
		t.Fatalf("for bob before his report: %+v, want the global %+v", c, after)
	}
	if status, out, errs := spamtrain(t, "", "train", api, bob, "--spam", heldOut); status != 0 {
		t.Fatalf("train for bob: %q %s", out, errs)
	}
	if c := classifyJSON(t, api, bob, heldOut); c.Verdict == "ham" || c.TrainedAs != "spam" || !(c.Score > after.Score) {
		t.Errorf("for bob after his report: %+v", c)
	}

	// Relabeled as ham, then forgotten.
	if _, out, _ := spamtrain(t, "", "train", api, "--ham", heldOut); out != "train: 1 messages: 0 learned, 1 relabeled, 0 already known\n" {
		t.Errorf("relabel: %q", out)
	}
	if _, out, _ := spamtrain(t, "", "forget", api, heldOut); out != "forget: 1 messages: 1 forgotten, 0 were not trained\n" {
		t.Errorf("forget: %q", out)
	}
	if c := classifyJSON(t, api, heldOut); c.TrainedAs != "" || c.Score != before.Score {
		t.Errorf("after forgetting: %+v, want the first verdict %+v", c, before)
	}

	status, out, _ = spamtrain(t, "", "stats", api)
	if status != 0 || !hasLine(out, "(global) ham 19") || !hasLine(out, "bob@example.org spam 1") || !strings.Contains(out, "served by spamd at unix:"+d.sock) {
		t.Errorf("stats: %q", out)
	}
	_, out, _ = spamtrain(t, "", "classify", api, "-v", "--top", "2", heldOut)
	if !strings.Contains(out, "held-out.eml\tham\t") || !strings.Contains(out, "toward spam, in nats of log-odds:") {
		t.Errorf("classify -v: %q", out)
	}
}

// hasLine reports whether out has a line starting with the fields of
// prefix.
func hasLine(out, prefix string) bool {
	want := strings.Fields(prefix)
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= len(want) && strings.Join(f[:len(want)], " ") == strings.Join(want, " ") {
			return true
		}
	}
	return false
}

// TestFindingTheDaemon checks the order in which spamtrain looks for the
// daemon, and what it says when a store is held and no daemon answers.
func TestFindingTheDaemon(t *testing.T) {
	spam, _, _ := sampleDirs(t)
	for _, tt := range []struct {
		name   string
		setup  func(t *testing.T, d daemon) []string // returns extra arguments
		status int
		want   string // in stdout, or stderr when status != 0
	}{
		{"SPAMD_API", func(t *testing.T, d daemon) []string {
			t.Setenv("SPAMD_API", "unix:"+d.sock)
			return nil
		}, 0, "served by spamd"},
		{"--api before SPAMD_API", func(t *testing.T, d daemon) []string {
			t.Setenv("SPAMD_API", "unix:/nonexistent.sock")
			return []string{"--api", "unix:" + d.sock}
		}, 0, "served by spamd"},
		{"the configuration's socket", func(t *testing.T, d daemon) []string {
			cfg := filepath.Join(t.TempDir(), "config.toml")
			os.WriteFile(cfg, fmt.Appendf(nil, "[api]\nsocket = %q\n", d.sock), 0o644)
			t.Setenv("SPAMD_CONFIG", cfg)
			return nil
		}, 0, "served by spamd"},
		{"--db of the daemon's store", func(t *testing.T, d daemon) []string {
			cfg := filepath.Join(t.TempDir(), "config.toml")
			os.WriteFile(cfg, fmt.Appendf(nil, "[api]\nsocket = %q\n", d.sock), 0o644)
			t.Setenv("SPAMD_CONFIG", cfg)
			return []string{"--db", d.dir}
		}, 0, "served by spamd"},
		{"--db held and no daemon", func(t *testing.T, d daemon) []string {
			return []string{"--db", d.dir}
		}, 1, "is held by another process, most likely a running spamd"},
		{"--db of another store held", func(t *testing.T, d daemon) []string {
			cfg := filepath.Join(t.TempDir(), "config.toml")
			os.WriteFile(cfg, fmt.Appendf(nil, "[api]\nsocket = %q\n", d.sock), 0o644)
			t.Setenv("SPAMD_CONFIG", cfg)
			other := filepath.Join(t.TempDir(), "db")
			st, err := badgerstore.Open(context.Background(), other, badgerstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return []string{"--db", other}
		}, 1, "serves " + "/"},
		{"--api that does not answer", func(t *testing.T, d daemon) []string {
			return []string{"--api", "unix:/nonexistent.sock"}
		}, 1, "no spamd answers at unix:/nonexistent.sock"},
		{"no daemon and no store", func(t *testing.T, d daemon) []string { return nil }, 2, "no store: spamd's configuration names the store"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			isolate(t)
			d := startDaemon(t)
			args := append([]string{"stats"}, tt.setup(t, d)...)
			status, out, errs := spamtrain(t, "", args...)
			got := out
			if status != 0 {
				got = errs
			}
			if status != tt.status || !strings.Contains(got, tt.want) {
				t.Errorf("spamtrain %q: status %d, stdout %q, stderr %q; want %d and %q", args, status, out, errs, tt.status, tt.want)
			}
		})
	}
	t.Run("--set through the daemon", func(t *testing.T) {
		isolate(t)
		d := startDaemon(t)
		status, _, errs := spamtrain(t, "", "train", "--api", "unix:"+d.sock, "--set", "alpha=2", "--spam", spam)
		if status != 2 || !strings.Contains(errs, "[filter] table") {
			t.Errorf("status %d, %q", status, errs)
		}
	})
}

func TestCutAPIFlag(t *testing.T) {
	for _, tt := range []struct {
		in   []string
		rest []string
		addr string
	}{
		{[]string{"--api", "unix:/a", "--spam", "x"}, []string{"--spam", "x"}, "unix:/a"},
		{[]string{"-api=tcp://127.0.0.1:1", "x"}, []string{"x"}, "tcp://127.0.0.1:1"},
		{[]string{"x", "--", "--api", "y"}, []string{"x", "--", "--api", "y"}, ""},
		{[]string{"--db", "d"}, []string{"--db", "d"}, ""},
	} {
		t.Run(strings.Join(tt.in, " "), func(t *testing.T) {
			rest, addr, err := cutAPIFlag(tt.in)
			if err != nil || addr != tt.addr || strings.Join(rest, " ") != strings.Join(tt.rest, " ") {
				t.Errorf("cutAPIFlag(%q) = %q, %q, %v", tt.in, rest, addr, err)
			}
		})
	}
	if _, _, err := cutAPIFlag([]string{"--api"}); err == nil {
		t.Error("--api without an address was accepted")
	}
}
