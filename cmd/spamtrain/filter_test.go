package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// firstFile returns the content of the first file in dir.
func firstFile(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) == 0 {
		t.Fatalf("read %s: %v", dir, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ents[0].Name()))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFilter checks the pipe filter's output and exit status for each
// outcome: the message always comes out, annotated when it was judged.
func TestFilter(t *testing.T) {
	isolate(t)
	db := trainSample(t)
	empty := t.TempDir()
	mustRun(t, "", "train", "--db", empty, "--user", "nobody@example.org", "--spam", filepath.Join(sample, "spam"))
	spam, ham := firstFile(t, filepath.Join(sample, "spam")), firstFile(t, filepath.Join(sample, "ham"))
	junk := "\x00\x01 no header at all"
	tests := []struct {
		name  string
		args  []string
		in    string
		code  int
		wants []string
	}{
		{"spam", []string{"--db", db, "--tag", "[SPAM]"}, spam, 1, []string{"X-Spam-Flag: YES", "Subject: [SPAM] ", "X-Spamd-Result: spam; "}},
		{"ham", []string{"--db", db, "--tag", "[SPAM]"}, ham, 0, []string{"X-Spam-Flag: NO", "X-Spamd-Result: ham; "}},
		{"unsure: a global model never trained", []string{"--db", empty}, ham, 2, []string{"X-Spamd-Result: unsure; "}},
		{"error: passed on untouched", []string{"--db", db}, junk, 3, []string{junk}},
		{"procmail's exit codes", []string{"--db", db, "--exit-codes", "0,0,0,0"}, spam, 0, []string{"X-Spam-Flag: YES"}},
		// A command line it refuses is no verdict: not 2 (unsure), as a
		// usage error is elsewhere, and the message still comes out.
		{"error: a flag it does not know", []string{"--db", db, "--no-such-flag"}, spam, 3, []string{spam}},
		{"error: an argument", []string{"--db", db, "extra"}, spam, 3, []string{spam}},
		{"error: a bad flag, the error status asked for", []string{"--exit-codes=0,1,2,7", "--db", db, "--no-such-flag"}, spam, 7, []string{spam}},
		{"error: --exit-codes it cannot read", []string{"--db", db, "--exit-codes", "0,1"}, spam, 3, []string{spam}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := spamtrain(t, tt.in, append([]string{"filter"}, tt.args...)...)
			if code != tt.code {
				t.Errorf("exit %d, want %d: %s", code, tt.code, errOut)
			}
			for _, w := range tt.wants {
				if !strings.Contains(out, w) {
					t.Errorf("no %q in the output:\n%.600s", w, out)
				}
			}
			if !strings.HasSuffix(out, tt.in[max(0, len(tt.in)-40):]) {
				t.Error("the message's end is not the output's end")
			}
			if strings.HasPrefix(tt.name, "error") && (out != tt.in || !strings.Contains(errOut, "passed on unfiltered")) {
				t.Errorf("not passed on untouched, or not said so: %q", errOut)
			}
		})
	}
}

// TestProcmail delivers through procmail with spamtrain filter as its
// filter, as docs/filter.md shows: spam lands in the spam folder tagged,
// ham in the inbox with the headers.
func TestProcmail(t *testing.T) {
	procmail, err := exec.LookPath("procmail")
	if err != nil {
		skipE2E(t, "procmail is not installed (apt install procmail)")
	}
	isolate(t)
	db := trainSample(t)
	home := t.TempDir()
	bin := spamtrainBinary(t)
	if err := os.MkdirAll(filepath.Join(home, "Maildir"), 0o700); err != nil {
		t.Fatal(err)
	}
	rc := filepath.Join(home, ".procmailrc")
	os.WriteFile(rc, []byte(`MAILDIR=`+home+`/Maildir/
DEFAULT=$MAILDIR
:0fw
| `+bin+` filter --db `+db+` --tag [SPAM] --exit-codes 0,0,0,0
:0
* ^X-Spam-Flag: YES
.Junk/
`), 0o644)
	for _, m := range []struct{ path, folder, want string }{
		{filepath.Join(sample, "spam"), ".Junk", "Subject: [SPAM] "},
		{filepath.Join(sample, "ham"), "", "X-Spam-Flag: NO"},
	} {
		raw := firstFile(t, m.path)
		cmd := exec.Command(procmail, "-m", rc)
		cmd.Stdin = strings.NewReader(raw)
		cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "LOGNAME=" + os.Getenv("USER")}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("procmail: %v\n%s", err, out)
		}
		got := firstFile(t, filepath.Join(home, "Maildir", m.folder, "new"))
		if !strings.Contains(got, m.want) || !strings.Contains(got, "X-Spamd-Result: ") {
			t.Errorf("delivered to %q:\n%.800s", m.folder, got)
		}
	}
}

// TestFilterThroughDaemon runs the pipe filter through a running
// daemon's API, as it runs where spamd holds the store: each verdict's
// exit status and headers, and the message passed on whole when the
// daemon cannot judge it or cannot be reached.
func TestFilterThroughDaemon(t *testing.T) {
	isolate(t)
	trained, empty := startDaemon(t), startDaemon(t)
	spamDir, hamDir, heldOut := sampleDirs(t)
	if status, out, errs := spamtrain(t, "", "train", "--api=unix:"+trained.sock, "--spam", spamDir, "--ham", hamDir); status != 0 {
		t.Fatalf("train: %s %s", out, errs)
	}
	ham, err := os.ReadFile(heldOut)
	if err != nil {
		t.Fatal(err)
	}
	spam := firstFile(t, filepath.Join(sample, "spam"))
	junk := "\x00\x01 no header at all"
	cfg := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(cfg, fmt.Appendf(nil, "[api]\nsocket = %q\n", trained.sock), 0o644)
	tests := []struct {
		name  string
		setup func(t *testing.T) []string
		in    string
		code  int
		wants []string
	}{
		{"spam", func(*testing.T) []string { return []string{"--api", "unix:" + trained.sock, "--tag", "[SPAM]"} }, spam, 1,
			[]string{"X-Spam-Flag: YES", "Subject: [SPAM] ", "X-Spamd-Result: spam; ", "required=3.0"}},
		{"ham", func(*testing.T) []string { return []string{"--api", "unix:" + trained.sock} }, string(ham), 0,
			[]string{"X-Spam-Flag: NO", "X-Spamd-Result: ham; "}},
		{"unsure: an untrained model", func(*testing.T) []string { return []string{"--api", "unix:" + empty.sock} }, string(ham), 2,
			[]string{"X-Spamd-Result: unsure; "}},
		{"found by the configuration", func(t *testing.T) []string { t.Setenv("SPAMD_CONFIG", cfg); return nil }, spam, 1,
			[]string{"X-Spam-Flag: YES"}},
		{"--db of the store spamd holds", func(t *testing.T) []string {
			t.Setenv("SPAMD_CONFIG", cfg)
			return []string{"--db", trained.dir}
		}, spam, 1, []string{"X-Spam-Flag: YES"}},
		{"error: not a message, passed on untouched", func(*testing.T) []string { return []string{"--api", "unix:" + trained.sock} }, junk, 3,
			[]string{junk}},
		{"error: no daemon answers, passed on untouched", func(*testing.T) []string { return []string{"--api", "unix:/nonexistent.sock"} }, spam, 3,
			[]string{spam}},
		{"error: the store is held and no daemon serves it", func(*testing.T) []string { return []string{"--db", trained.dir} }, spam, 3,
			[]string{spam}},
		{"error: a user name spamd refuses", func(*testing.T) []string { return []string{"--api", "unix:" + trained.sock, "--user", "Not A User"} }, spam, 3,
			[]string{spam}},
		{"error: --set, which spamd's settings overrule", func(*testing.T) []string { return []string{"--api", "unix:" + trained.sock, "--set", "alpha=0.1"} }, spam, 3,
			[]string{spam}},
		{"error: --api without an address", func(*testing.T) []string { return []string{"--api"} }, spam, 3,
			[]string{spam}},
		{"procmail's exit codes", func(*testing.T) []string {
			return []string{"--api", "unix:/nonexistent.sock", "--exit-codes", "0,0,0,0"}
		}, spam, 0,
			[]string{spam}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := spamtrain(t, tt.in, append([]string{"filter"}, tt.setup(t)...)...)
			if code != tt.code {
				t.Errorf("exit %d, want %d: %s", code, tt.code, errOut)
			}
			for _, w := range tt.wants {
				if !strings.Contains(out, w) {
					t.Errorf("no %q in the output:\n%.600s", w, out)
				}
			}
			if strings.Count(out, "\n\n") < strings.Count(tt.in, "\n\n") || !strings.HasSuffix(out, tt.in[max(0, len(tt.in)-40):]) {
				t.Error("the message is not passed on whole, once")
			}
			if strings.HasPrefix(tt.name, "error") || strings.HasPrefix(tt.name, "procmail") {
				if out != tt.in || !strings.Contains(errOut, "passed on unfiltered") {
					t.Errorf("not passed on untouched, or not said so: %q", errOut)
				}
			}
		})
	}
}

func TestReturnPath(t *testing.T) {
	for _, tt := range []struct{ name, raw, want string }{
		{"LF", "Return-Path: <bounce@example.org>\nFrom: a@example.org\n\nbody\n", "bounce@example.org"},
		{"CRLF, not first, odd case", "Received: x\r\nreturn-path:<Bounce@Example.org>\r\n\r\n", "Bounce@Example.org"},
		{"the null sender", "Return-Path: <>\n\n", ""},
		{"bare", "Return-Path: bounce@example.org\n\n", "bounce@example.org"},
		{"only in the body", "From: a@example.org\n\nReturn-Path: <x@example.org>\n", ""},
		{"none", "From: a@example.org\n\n", ""},
	} {
		if got := returnPath([]byte(tt.raw)); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// FuzzReturnPath checks that returnPath never panics and finds no
// address with an angle bracket or white space in it.
func FuzzReturnPath(f *testing.F) {
	f.Add([]byte("Return-Path: <bounce@example.org>\n\n"))
	f.Add([]byte("Return-Path: <<>\r\n"))
	f.Add([]byte("return-path:"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if got := returnPath(raw); strings.ContainsAny(got, "<> \t\r\n") {
			t.Errorf("%q from %q", got, raw)
		}
	})
}

// TestFilterBadPrefsFile checks that the local path passes the message
// on unfiltered, with the error status, when it cannot read the
// preferences set through the API: it must not deliver as if the
// recipient had none.
func TestFilterBadPrefsFile(t *testing.T) {
	isolate(t)
	db := trainSample(t)
	if err := os.WriteFile(filepath.Join(db, "prefs.json"), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	spam := firstFile(t, filepath.Join(sample, "spam"))
	code, out, errOut := spamtrain(t, spam, "filter", "--db", db, "--user", "alice@example.org")
	if code != 3 || out != spam || !strings.Contains(errOut, "prefs.json") {
		t.Errorf("exit %d, %q; the message changed: %v", code, errOut, out != spam)
	}
}
