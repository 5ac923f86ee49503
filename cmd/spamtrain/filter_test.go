package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
		})
	}
}

// TestProcmail delivers through procmail with spamtrain filter as its
// filter, as docs/filter.md shows: spam lands in the spam folder tagged,
// ham in the inbox with the headers.
func TestProcmail(t *testing.T) {
	procmail, err := exec.LookPath("procmail")
	if err != nil {
		msg := "procmail is not installed (apt install procmail)"
		if os.Getenv("SPAMD_REQUIRE_E2E") == "1" {
			t.Fatal(msg + " (SPAMD_REQUIRE_E2E=1 makes this a failure)")
		}
		t.Skip(msg + "; set SPAMD_REQUIRE_E2E=1 to make this a failure")
	}
	isolate(t)
	db := trainSample(t)
	home := t.TempDir()
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	bin := filepath.Join(home, "spamtrain")
	if out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
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
