package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/prefs"
	"github.com/spamd/spamd/prefs/prefstest"
	"github.com/spamd/spamd/store"
)

// built is the spamtrain binary the end-to-end tests run, built once.
var built struct {
	once sync.Once
	dir  string
	err  error
	out  []byte
}

// spamtrainBinary builds this command into a directory every account may
// read, once per test binary, and returns its path.
func spamtrainBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "spamtrain-bin-")
		if built.err != nil {
			return
		}
		os.Chmod(built.dir, 0o755)
		built.out, built.err = exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", filepath.Join(built.dir, "spamtrain"), ".").CombinedOutput()
	})
	if built.err != nil {
		t.Fatalf("go build: %v\n%s", built.err, built.out)
	}
	return filepath.Join(built.dir, "spamtrain")
}

// skipE2E skips a test whose system program is missing, or fails it
// under SPAMD_REQUIRE_E2E=1.
func skipE2E(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("SPAMD_REQUIRE_E2E") == "1" {
		t.Fatal(why + " (SPAMD_REQUIRE_E2E=1 makes this a failure)")
	}
	t.Skip(why + "; set SPAMD_REQUIRE_E2E=1 to make this a failure")
}

// ldaConf is a Dovecot configuration for its LDA alone, run by the mail
// user (uid nobody) with its HOME: Sieve with the extprograms filter
// extension, as docs/filter.md configures it.
const ldaConf = `log_path = {{B}}/lda.log
mail_location = maildir:~/Maildir
postmaster_address = postmaster@test.example
protocol lda {
  mail_plugins = $mail_plugins sieve
}
plugin {
  sieve = file:~/sieve;active=~/.dovecot.sieve
  sieve_plugins = sieve_extprograms
  sieve_extensions = +vnd.dovecot.filter
  sieve_filter_bin_dir = {{B}}/sieve-filter
}
`

// TestSieveFilter delivers mail with Dovecot's LDA through a Sieve script
// that runs spamtrain filter with the extprograms filter extension, as
// docs/filter.md shows, against a running spamd's API: spam lands in Junk
// tagged, ham in the inbox with the headers, and with spamd unreachable
// the message is delivered as it came.
func TestSieveFilter(t *testing.T) {
	lda := "/usr/lib/dovecot/dovecot-lda"
	if _, err := os.Stat(lda); err != nil {
		skipE2E(t, "Dovecot's LDA is not installed (apt-get install dovecot-core dovecot-sieve)")
	}
	if _, err := os.Stat("/usr/lib/dovecot/modules/sieve/lib90_sieve_extprograms_plugin.so"); err != nil {
		skipE2E(t, "Dovecot's Sieve extprograms plugin is not installed (apt-get install dovecot-sieve)")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil || os.Getuid() != 0 {
		skipE2E(t, "delivering as the mail user nobody needs root and a nobody account")
	}
	isolate(t)
	bin := spamtrainBinary(t)

	// spamd's API, on a socket the mail user can reach, over a model
	// trained on the sample.
	base, err := os.MkdirTemp("", "spamd-sieve-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	f, err := filter.New(store.NewMemory(), filter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	spamMsgs, hamMsgs := readSample(t, "spam"), readSample(t, "ham")
	for i := range len(spamMsgs) - 1 {
		f.Learn(ctx, "", spamMsgs[i], filter.Spam)
		f.Learn(ctx, "", hamMsgs[i], filter.Ham)
	}
	sock := filepath.Join(base, "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(sock, 0o666)
	pf, err := prefs.OpenFile(filepath.Join(base, "prefs.json"))
	if err != nil {
		t.Fatal(err)
	}
	pd := prefstest.New(pf, config.Actions{}, prefs.SiteOf(f.Config().Required(), config.Actions{}, config.Prefs{}), prefs.Layer{})
	hs := &http.Server{Handler: control.NewServer(control.Options{Filter: func() *filter.Filter { return f }, Prefs: pd}).Handler(), ConnContext: control.ConnContext}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })

	home := filepath.Join(base, "home")
	for _, d := range []string{home, filepath.Join(base, "sieve-filter")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(base, "dovecot.conf"), []byte(strings.ReplaceAll(ldaConf, "{{B}}", base)), 0o644)
	// spamtrain linked into sieve_filter_bin_dir, as docs/filter.md says.
	if err := os.Symlink(bin, filepath.Join(base, "sieve-filter", "spamtrain")); err != nil {
		t.Fatal(err)
	}
	script := func(api string) string {
		return `require ["vnd.dovecot.filter", "fileinto", "mailbox"];
filter "spamtrain" ["filter", "--api", "` + api + `", "--tag", "[SPAM]", "--exit-codes", "0,0,0,0"];
if header :is "X-Spam-Flag" "YES" { fileinto :create "Junk"; }
`
	}
	uid, gid := atoi(t, nobody.Uid), atoi(t, nobody.Gid)
	os.WriteFile(filepath.Join(base, "lda.log"), nil, 0o644)
	os.Chown(filepath.Join(base, "lda.log"), uid, gid)
	deliver := func(t *testing.T, sieve string, raw []byte) {
		t.Helper()
		os.WriteFile(filepath.Join(home, ".dovecot.sieve"), []byte(sieve), 0o644)
		os.Remove(filepath.Join(home, ".dovecot.svbin"))
		chownAll(t, home, uid, gid)
		cmd := exec.Command(lda, "-c", filepath.Join(base, "dovecot.conf"), "-f", "sender@example.net")
		cmd.Stdin = strings.NewReader(string(raw))
		cmd.Env = []string{"HOME=" + home, "USER=nobody", "PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		if out, err := cmd.CombinedOutput(); err != nil {
			log, _ := os.ReadFile(filepath.Join(base, "lda.log"))
			t.Fatalf("dovecot-lda: %v\n%s\n%s", err, out, log)
		}
	}
	newest := func(t *testing.T, folder string) string {
		t.Helper()
		dir := filepath.Join(home, "Maildir", folder, "new")
		ents, err := os.ReadDir(dir)
		if err != nil || len(ents) == 0 {
			log, _ := os.ReadFile(filepath.Join(base, "lda.log"))
			t.Fatalf("nothing delivered to %s: %v\n%s", dir, err, log)
		}
		b, err := os.ReadFile(filepath.Join(dir, ents[len(ents)-1].Name()))
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(dir, ents[len(ents)-1].Name()))
		return string(b)
	}
	spam, ham := spamMsgs[len(spamMsgs)-1], hamMsgs[len(hamMsgs)-1]

	deliver(t, script("unix:"+sock), spam)
	if got := newest(t, ".Junk"); !strings.Contains(got, "Subject: [SPAM] ") || !strings.Contains(got, "X-Spamd-Result: spam;") {
		t.Errorf("spam delivered to Junk as:\n%.1000s", got)
	}
	deliver(t, script("unix:"+sock), ham)
	if got := newest(t, ""); !strings.Contains(got, "X-Spam-Flag: NO") || !strings.Contains(got, "X-Spamd-Result: ham;") {
		t.Errorf("ham delivered to the inbox as:\n%.1000s", got)
	}
	deliver(t, script("unix:"+filepath.Join(base, "none.sock")), spam)
	if got := newest(t, ""); strings.Contains(got, "X-Spam") || !strings.Contains(got, string(spam[len(spam)-200:])) {
		t.Errorf("with spamd unreachable, delivered as:\n%.1000s", got)
	}
}

func readSample(t *testing.T, class string) [][]byte {
	t.Helper()
	dir := filepath.Join(sample, class)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("not a number: %q", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// chownAll gives the tree under dir to uid and gid.
func chownAll(t *testing.T, dir string, uid, gid int) {
	t.Helper()
	filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			err = os.Lchown(p, uid, gid)
		}
		return err
	})
}
