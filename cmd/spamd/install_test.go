package main

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// installDoc is the page whose commands TestInstall runs.
const installDoc = "../../docs/install.md"

// docBlock returns the lines of the code block that follows the marker
// "<!-- install-test: NAME -->" in doc.
func docBlock(t *testing.T, doc, name string) []string {
	t.Helper()
	_, after, ok := strings.Cut(doc, "<!-- install-test: "+name+" -->\n")
	if !ok {
		t.Fatalf("%s has no block marked %s", installDoc, name)
	}
	_, after, _ = strings.Cut(after, "\n") // the opening fence
	block, _, ok := strings.Cut(after, "```")
	if !ok {
		t.Fatalf("%s: the %s block does not end", installDoc, name)
	}
	return strings.Split(strings.TrimSpace(block), "\n")
}

// need returns the path of program, or skips the test (fails it under
// SPAMD_REQUIRE_E2E=1) when it is missing.
func need(t *testing.T, program, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(program)
	if err != nil {
		msg := program + " is not installed (apt-get install " + pkg + ")"
		if os.Getenv("SPAMD_REQUIRE_E2E") == "1" {
			t.Fatal(msg + " (SPAMD_REQUIRE_E2E=1 makes this a failure)")
		}
		t.Skip(msg + "; set SPAMD_REQUIRE_E2E=1 to make this a failure")
	}
	return p
}

// TestInstall runs the build and install commands of docs/install.md with
// DESTDIR set, as a package build would, and checks the tree they make
// against the one the page lists; that man renders every page without a
// warning; that systemd-analyze accepts the unit; that the programs
// installed run, spamtrain's evaluation through spamtrain-eval; that the
// completions work; and that installing again keeps the configuration.
func TestInstall(t *testing.T) {
	need(t, "make", "make")
	man := need(t, "man", "man-db")
	doc, err := os.ReadFile(installDoc)
	if err != nil {
		t.Fatal(err)
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	env := append(os.Environ(), "DESTDIR="+root, "BUILDDIR="+filepath.Join(t.TempDir(), "build"),
		"PATH="+filepath.Join(runtime.GOROOT(), "bin")+":"+os.Getenv("PATH"))
	sh := func(t *testing.T, line string) {
		t.Helper()
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir, cmd.Env = repo, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
	}
	for _, line := range docBlock(t, string(doc), "build") {
		sh(t, line)
	}

	// The tree is the page's, file for file.
	var got []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			got = append(got, strings.TrimPrefix(p, root))
		}
		return err
	})
	slices.Sort(got)
	if want := docBlock(t, string(doc), "tree"); !slices.Equal(got, want) {
		t.Fatalf("make install made\n%s\ndocs/install.md lists\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	bin := filepath.Join(root, "usr/local/bin")

	t.Run("man pages", func(t *testing.T) {
		for page, want := range map[string]string{
			"usr/local/share/man/man8/spamd.8":      "--milter",
			"usr/local/share/man/man1/spamtrain.1":  "--exit-codes",
			"usr/local/share/man/man5/spamd.conf.5": "reject_score",
		} {
			cmd := exec.Command(man, "--warnings", "-l", filepath.Join(root, page))
			cmd.Env = append(os.Environ(), "MANPAGER=cat", "MANWIDTH=80", "LC_ALL=C.UTF-8")
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			if err := cmd.Run(); err != nil || errOut.Len() > 0 {
				t.Errorf("man -l %s: %v\n%s", page, err, errOut.String())
			}
			// man writes a hyphen that groff may render as U+2010.
			text := strings.ReplaceAll(out.String(), "‐", "-")
			if !strings.Contains(text, "NAME") || !strings.Contains(text, want) {
				t.Errorf("man -l %s rendered no NAME or %q:\n%.500s", page, want, text)
			}
		}
	})

	t.Run("systemd unit", func(t *testing.T) {
		unit := filepath.Join(root, "usr/local/lib/systemd/system/spamd.service")
		b, err := os.ReadFile(unit)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "\nExecStart=/usr/local/bin/spamd\n") {
			t.Fatalf("the unit does not run the spamd it installs:\n%s", b)
		}
		analyze := need(t, "systemd-analyze", "systemd")
		// The unit as installed, its ExecStart pointing at where DESTDIR
		// staged the binary, since verify checks that it exists.
		staged := filepath.Join(t.TempDir(), "spamd.service")
		os.WriteFile(staged, bytes.ReplaceAll(b, []byte("=/usr/local/bin/spamd"), []byte("="+filepath.Join(bin, "spamd"))), 0o644)
		cmd := exec.Command(analyze, "verify", staged)
		// verify runs man for Documentation=man:…: the pages installed.
		cmd.Env = append(os.Environ(), "MANPATH="+filepath.Join(root, "usr/local/share/man"))
		if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}
	})

	t.Run("programs", func(t *testing.T) {
		for _, p := range []string{"spamd", "spamtrain", "spamtrain-eval"} {
			out, err := exec.Command(filepath.Join(bin, p), "--version").CombinedOutput()
			if err != nil || !strings.HasPrefix(string(out), strings.TrimSuffix(p, "-eval")+" ") {
				t.Errorf("%s --version: %v %s", p, err, out)
			}
		}
		// The lean spamtrain runs eval in spamtrain-eval, beside it.
		index := filepath.Join(t.TempDir(), "index")
		var lines []string
		for _, class := range []string{"spam", "ham"} {
			ents, _ := os.ReadDir(filepath.Join(repo, "testdata/sample", class))
			for _, e := range ents {
				lines = append(lines, class+" "+filepath.Join(repo, "testdata/sample", class, e.Name()))
			}
		}
		os.WriteFile(index, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
		cmd := exec.Command(filepath.Join(bin, "spamtrain"), "eval", "--index", index, "--mode", "cv", "--folds", "2")
		cmd.Env = []string{"PATH=/usr/bin:/bin"} // not found on $PATH: beside it
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "AUC") {
			t.Errorf("spamtrain eval: %v\n%s", err, out)
		}
		gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
		for _, p := range []string{"spamd", "spamtrain", "spamtrain-eval"} {
			out, err := exec.Command(gobin, "version", "-m", filepath.Join(bin, p)).CombinedOutput()
			if err != nil {
				t.Fatalf("go version -m %s: %v %s", p, err, out)
			}
			plots := bytes.Contains(out, []byte("gonum.org/v1/plot")) || bytes.Contains(out, []byte("go-latex"))
			if plots != (p == "spamtrain-eval") {
				t.Errorf("%s built with the plotting libraries: %v", p, plots)
			}
		}
	})

	t.Run("completions", func(t *testing.T) {
		comp := filepath.Join(root, "usr/local/share/bash-completion/completions/spamtrain")
		out, err := exec.Command("bash", "-c", `source "$1"; COMP_WORDS=(spamtrain fil); COMP_CWORD=1; _spamtrain; echo "${COMPREPLY[*]}";`+
			`COMP_WORDS=(spamtrain filter --exit); COMP_CWORD=2; _spamtrain; echo "${COMPREPLY[*]}"`, "bash", comp).CombinedOutput()
		if err != nil || string(out) != "filter\n--exit-codes\n" {
			t.Errorf("bash completion: %v %q", err, out)
		}
		zsh := need(t, "zsh", "zsh")
		for _, f := range []string{"_spamd", "_spamtrain"} {
			if out, err := exec.Command(zsh, "-n", filepath.Join(root, "usr/local/share/zsh/site-functions", f)).CombinedOutput(); err != nil {
				t.Errorf("zsh -n %s: %v %s", f, err, out)
			}
		}
	})

	t.Run("the configuration is kept", func(t *testing.T) {
		conf := filepath.Join(root, "etc/spamd/config.toml")
		mine := "# the site's own\n[milter]\nexplain = 5\n"
		if err := os.WriteFile(conf, []byte(mine), 0o644); err != nil {
			t.Fatal(err)
		}
		sh(t, "make install")
		if b, _ := os.ReadFile(conf); string(b) != mine {
			t.Errorf("make install overwrote config.toml:\n%s", b)
		}
		if _, err := os.Stat(conf + ".example"); err != nil {
			t.Error(err)
		}
	})
}
