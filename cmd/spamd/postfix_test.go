package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"net/textproto"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// needPostfix returns the postfix command, or skips the test when
// Postfix cannot run here; with SPAMD_REQUIRE_E2E=1 it fails instead.
func needPostfix(t *testing.T) string {
	t.Helper()
	missing := func(why string) {
		msg := why + ": install it with `apt-get install postfix` (see docs/postfix.md) and run the tests as root"
		if os.Getenv("SPAMD_REQUIRE_E2E") == "1" {
			t.Fatal(msg + " (SPAMD_REQUIRE_E2E=1 makes this a failure)")
		}
		t.Skip(msg + "; set SPAMD_REQUIRE_E2E=1 to make this a failure")
	}
	path, err := exec.LookPath("postfix")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/postfix"); serr != nil {
			missing("postfix is not installed")
		}
		path = "/usr/sbin/postfix"
	}
	if os.Getuid() != 0 {
		missing("a private Postfix instance needs root")
	}
	for _, account := range []string{"postfix", "nobody"} {
		if _, err := user.Lookup(account); err != nil {
			missing("no " + account + " account")
		}
	}
	return path
}

// freePort returns a loopback TCP port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// postfix is a private Postfix instance on 127.0.0.1 that delivers
// user@test.example into a Maildir and sends nothing anywhere else, as
// /work/shared/docs/postfix-e2e.md describes.
type postfix struct {
	bin     string
	base    string // holds etc/ spool/ data/ mail/ maillog
	smtp    string // HOST:PORT of its smtpd
	maildir string // user@test.example's new/ directory
}

// docMilterLines returns the milter settings of docs/postfix.md, so the
// test runs what the documentation tells users to write.
func docMilterLines(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/postfix.md")
	if err != nil {
		t.Fatal(err)
	}
	var block []string
	in := false
	for sc := bufio.NewScanner(bytes.NewReader(b)); sc.Scan(); {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			if in && len(block) > 0 && strings.HasPrefix(block[0], "smtpd_milters") {
				return block
			}
			in, block = !in, nil
			continue
		}
		if in {
			block = append(block, line)
		}
	}
	t.Fatal("docs/postfix.md has no block of main.cf lines starting with smtpd_milters")
	return nil
}

// startPostfix writes, checks and starts an instance whose milter is at
// milterAddr (HOST:PORT), and stops it when the test ends.
func startPostfix(t *testing.T, bin, milterAddr string) *postfix {
	t.Helper()
	base := t.TempDir()
	// Postfix's daemons run as postfix and nobody: let them through.
	for d := base; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	p := &postfix{bin: bin, base: base, smtp: fmt.Sprintf("127.0.0.1:%d", freePort(t)), maildir: filepath.Join(base, "mail", "user", "new")}
	for _, d := range []string{"etc", "spool", "data", "mail"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	chown(t, filepath.Join(base, "data"), "postfix", "postfix")
	chown(t, filepath.Join(base, "mail"), "nobody", "nogroup")

	var milter []string
	for _, l := range docMilterLines(t) {
		milter = append(milter, strings.ReplaceAll(l, "127.0.0.1:11332", milterAddr))
	}
	mainCF := fmt.Sprintf(`compatibility_level = 3.6
queue_directory = %[1]s/spool
data_directory = %[1]s/data
maillog_file = %[1]s/maillog
maillog_file_prefixes = %[1]s
myhostname = mx.test.example
mydomain = test.example
myorigin = $myhostname
mydestination =
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
alias_maps =
alias_database =
local_recipient_maps =
relayhost =
default_transport = error:outbound mail disabled in test instance
relay_transport = error:outbound mail disabled in test instance
smtpd_peername_lookup = no
virtual_mailbox_domains = test.example
virtual_mailbox_base = %[1]s/mail
virtual_mailbox_maps = inline:{ user@test.example=user/ }
virtual_uid_maps = static:65534
virtual_gid_maps = static:65534
%[2]s
`, base, strings.Join(milter, "\n"))
	masterCF := p.smtp + ` inet n - n - - smtpd
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000?   0       flush
proxymap  unix  -       -       n       -       -       proxymap
proxywrite unix -       -       n       -       1       proxymap
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
virtual   unix  -       n       n       -       -       virtual
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
`
	write(t, filepath.Join(base, "etc", "main.cf"), mainCF)
	write(t, filepath.Join(base, "etc", "master.cf"), masterCF)
	p.run(t, "check")
	p.run(t, "start")
	t.Cleanup(func() {
		if out, err := exec.Command(p.bin, "-c", filepath.Join(p.base, "etc"), "stop").CombinedOutput(); err != nil {
			t.Errorf("postfix stop: %v\n%s", err, out)
		}
	})
	waitFor(t, 10*time.Second, "Postfix to listen on "+p.smtp, func() bool {
		c, err := net.DialTimeout("tcp", p.smtp, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return p
}

func (p *postfix) run(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(p.bin, append([]string{"-c", filepath.Join(p.base, "etc")}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("postfix %s: %v\n%s\nmaillog:\n%s", strings.Join(args, " "), err, out, p.log())
	}
}

// log returns Postfix's log so far.
func (p *postfix) log() string {
	b, _ := os.ReadFile(filepath.Join(p.base, "maillog"))
	return string(b)
}

// delivered returns the names of the messages delivered so far.
func (p *postfix) delivered() []string {
	ents, _ := os.ReadDir(p.maildir)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// send submits msg over SMTP from sender@test.example to
// user@test.example.
func (p *postfix) send(msg []byte) error {
	c, err := smtp.Dial(p.smtp)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Hello("client.test.example"); err != nil {
		return err
	}
	if err := c.Mail("sender@test.example"); err != nil {
		return err
	}
	if err := c.Rcpt("user@test.example"); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

// deliver sends msg and returns the delivered file's content.
func (p *postfix) deliver(t *testing.T, msg []byte) []byte {
	t.Helper()
	before := len(p.delivered())
	if err := p.send(msg); err != nil {
		t.Fatalf("send: %v\nmaillog:\n%s", err, p.log())
	}
	waitFor(t, 10*time.Second, "delivery", func() bool { return len(p.delivered()) > before })
	names := p.delivered()
	b, err := os.ReadFile(filepath.Join(p.maildir, newest(t, p.maildir, names)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newest returns the most recently modified of names in dir.
func newest(t *testing.T, dir string, names []string) string {
	t.Helper()
	var best string
	var at time.Time
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if fi.ModTime().After(at) || best == "" {
			best, at = n, fi.ModTime()
		}
	}
	return best
}

func chown(t *testing.T, path, owner, group string) {
	t.Helper()
	u, err := user.Lookup(owner)
	if err != nil {
		t.Fatal(err)
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(g.Gid)
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// smtpCode returns the reply of a refused submission, 0 if err is not a
// refusal.
func smtpCode(err error) (int, string) {
	var te *textproto.Error
	if errors.As(err, &te) {
		return te.Code, te.Msg
	}
	return 0, ""
}
