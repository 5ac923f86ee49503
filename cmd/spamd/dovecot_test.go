package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/textproto"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/identity"
)

// needDovecot returns the dovecot and sievec commands, or skips the test
// when a private Dovecot with IMAPSieve cannot run here; with
// SPAMD_REQUIRE_E2E=1 it fails instead.
func needDovecot(t *testing.T) (dovecot, sievec string) {
	t.Helper()
	missing := func(why string) {
		msg := why + ": install them with `apt-get install dovecot-imapd dovecot-sieve` (see docs/retraining.md) and run the tests as root"
		if os.Getenv("SPAMD_REQUIRE_E2E") == "1" {
			t.Fatal(msg + " (SPAMD_REQUIRE_E2E=1 makes this a failure)")
		}
		t.Skip(msg + "; set SPAMD_REQUIRE_E2E=1 to make this a failure")
	}
	find := func(name, fallback string) string {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		if _, err := os.Stat(fallback); err == nil {
			return fallback
		}
		missing(name + " is not installed")
		return ""
	}
	dovecot, sievec = find("dovecot", "/usr/sbin/dovecot"), find("sievec", "/usr/bin/sievec")
	for _, plugin := range []string{"/usr/lib/dovecot/modules/lib95_imap_sieve_plugin.so", "/usr/lib/dovecot/modules/sieve/lib90_sieve_extprograms_plugin.so"} {
		if _, err := os.Stat(plugin); err != nil {
			missing("Dovecot's IMAPSieve plugins are not installed")
		}
	}
	if os.Getuid() != 0 {
		missing("a private Dovecot instance needs root")
	}
	for _, account := range []string{"dovecot", "dovenull", "nobody"} {
		if _, err := user.Lookup(account); err != nil {
			missing("no " + account + " account")
		}
	}
	return dovecot, sievec
}

// dovecotConf is a private Dovecot on 127.0.0.1 whose users are mail
// uid nobody, with IMAPSieve piping moves into Junk to report-spam.sh
// and out of Junk to report-ham.sh (dovecot-imapsieve.md). The imap
// processes, and so the programs they pipe to, may use 1 GiB of address
// space: a Go program reserves that much when it starts, more than
// Dovecot's default limit of 256 MiB.
const dovecotConf = `instance_name = spamd-e2e
base_dir = {{B}}/run
state_dir = {{B}}/state
log_path = {{B}}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
default_login_user = dovenull
default_internal_user = dovecot
first_valid_uid = {{UID}}
last_valid_uid = {{UID}}
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {{B}}/users
}
userdb {
  driver = passwd-file
  args = username_format=%u {{B}}/users
  default_fields = uid={{UID}} gid={{GID}} home={{B}}/mail/%u
}
mail_location = maildir:~/Maildir
namespace inbox {
  inbox = yes
  separator = /
  mailbox Junk {
    special_use = \Junk
  }
  mailbox Trash {
    special_use = \Trash
  }
}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = {{PORT}}
  }
  inet_listener imaps {
    port = 0
  }
}
service imap {
  vsz_limit = 4G
}
protocol imap {
  mail_plugins = $mail_plugins imap_sieve
}
plugin {
  sieve_plugins = sieve_imapsieve sieve_extprograms
  sieve_global_extensions = +vnd.dovecot.pipe +vnd.dovecot.environment
  sieve_pipe_bin_dir = {{B}}/sieve-pipe
  imapsieve_mailbox1_name = Junk
  imapsieve_mailbox1_causes = COPY APPEND
  imapsieve_mailbox1_before = file:{{B}}/sieve/report-spam.sieve
  imapsieve_mailbox2_name = *
  imapsieve_mailbox2_from = Junk
  imapsieve_mailbox2_causes = COPY
  imapsieve_mailbox2_before = file:{{B}}/sieve/report-ham.sieve
}
`

// The sieve scripts of docs/retraining.md.
const (
	reportSpamSieve = `require ["vnd.dovecot.pipe", "copy", "imapsieve", "environment", "variables"];
if environment :matches "imap.user" "*" { set "username" "${1}"; }
pipe :copy "report-spam.sh" [ "${username}" ];
`
	reportHamSieve = `require ["vnd.dovecot.pipe", "copy", "imapsieve", "environment", "variables"];
if environment :matches "imap.mailbox" "*" { set "mailbox" "${1}"; }
if string "${mailbox}" "Trash" { stop; }
if environment :matches "imap.user" "*" { set "username" "${1}"; }
pipe :copy "report-ham.sh" [ "${username}" ];
`
)

// buildSpamtrain builds spamtrain into dir.
func buildSpamtrain(t *testing.T, dir string) string {
	t.Helper()
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin = "go"
	}
	bin := filepath.Join(dir, "spamtrain")
	if out, err := exec.Command(gobin, "build", "-o", bin, "../spamtrain").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestDovecotEndToEnd drives a real Dovecot over IMAP as a mail client
// would, with IMAPSieve piping every move into or out of Junk to
// `spamtrain report`, which hands it to a running spamd; the maildir
// watcher of the same spamd watches the same maildirs. alice's model
// learns a message moved to Junk as spam once, relabels it ham when she
// moves it back, and does not change when she moves it from Junk to
// Trash; bob's model never changes.
func TestDovecotEndToEnd(t *testing.T) {
	dovecot, sievec := needDovecot(t)
	// A short base: Dovecot's socket paths must fit in 108 bytes.
	base, err := os.MkdirTemp("/tmp", "spamd-dovecot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	// The pipe scripts run as the mail uid: it must reach the binary.
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatal(err)
	}
	mailUID, _ := strconv.Atoi(nobody.Uid)
	mailGID, _ := strconv.Atoi(nobody.Gid)
	bin := filepath.Join(base, "bin")
	mkdir(t, bin, 0o755)
	spamd, spamtrain := buildSpamd(t, bin), buildSpamtrain(t, bin)

	// spamd: the mail account may report for any user, the maildirs
	// are watched too.
	sock := filepath.Join(base, "spamd", "api.sock")
	mkdir(t, filepath.Join(base, "spamd"), 0o755)
	mkdir(t, filepath.Join(base, "mail"), 0o755)
	if err := os.Chown(filepath.Join(base, "mail"), mailUID, mailGID); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(base, "spamd", "config.toml")
	write(t, cfgPath, fmt.Sprintf(`[store]
dir = %q
[milter]
listen = "tcp://127.0.0.1:%d"
[api]
socket = %q
reporters = [%q]
[metrics]
listen = ""
[watch]
junk = %q
rescan = "1s"
domain = "example.org"
`, filepath.Join(base, "spamd", "db"), freePort(t), sock, nobody.Username, filepath.Join(base, "mail", "%u", "Maildir", ".Junk")))
	var logs lockedBuffer
	daemon := exec.Command(spamd, "--config", cfgPath)
	daemon.Stdout, daemon.Stderr = &logs, &logs
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		daemon.Process.Signal(syscall.SIGTERM)
		daemon.Wait()
		if t.Failed() {
			t.Logf("spamd's log:\n%s", logs.String())
		}
	})
	api, err := control.NewClient("unix:"+sock, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	waitFor(t, 20*time.Second, "spamd's API", func() bool { return api.Health(ctx) == nil })
	// The socket is 0660 root's; production puts the mail account in
	// spamd's group, the test opens it to all.
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	train, _ := e2eMessages(t, 20)
	var items []control.Item
	for _, m := range train {
		items = append(items, control.Item{Class: m.class, Message: m.raw})
	}
	if _, err := api.Train(ctx, "", items); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Train(ctx, "bob@example.org", items[:4]); err != nil {
		t.Fatal(err)
	}

	// Dovecot.
	port := freePort(t)
	conf := strings.NewReplacer("{{B}}", base, "{{UID}}", nobody.Uid, "{{GID}}", nobody.Gid, "{{PORT}}", strconv.Itoa(port)).Replace(dovecotConf)
	confPath := filepath.Join(base, "dovecot.conf")
	write(t, confPath, conf)
	write(t, filepath.Join(base, "users"), "alice:{PLAIN}alicepw::::::\nbob:{PLAIN}bobpw::::::\n")
	mkdir(t, filepath.Join(base, "sieve"), 0o755)
	mkdir(t, filepath.Join(base, "sieve-pipe"), 0o755)
	for name, script := range map[string]string{"report-spam": reportSpamSieve, "report-ham": reportHamSieve} {
		path := filepath.Join(base, "sieve", name+".sieve")
		write(t, path, script)
		if out, err := exec.Command(sievec, "-c", confPath, path).CombinedOutput(); err != nil {
			t.Fatalf("sievec %s: %v\n%s", name, err, out)
		}
		// What docs/retraining.md installs, with this test's paths.
		class := strings.TrimPrefix(name, "report-")
		pipe := fmt.Sprintf("#!/bin/sh\nexec %s report --api unix:%s --user \"$1\" --%s -\n", spamtrain, sock, class)
		if err := os.WriteFile(filepath.Join(base, "sieve-pipe", name+".sh"), []byte(pipe), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// dovecot daemonizes: its master keeps the output it was given, so
	// a file, not a pipe the test would wait on forever.
	out, err := os.Create(filepath.Join(base, "dovecot.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	start := exec.Command(dovecot, "-c", confPath)
	start.Stdout, start.Stderr = out, out
	if err := start.Run(); err != nil {
		b, _ := os.ReadFile(out.Name())
		t.Fatalf("dovecot: %v\n%s", err, b)
	}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(base, "dovecot.log"))
			t.Logf("Dovecot's log:\n%s", b)
		}
		if pid, err := os.ReadFile(filepath.Join(base, "run", "master.pid")); err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(pid))); err == nil {
				syscall.Kill(n, syscall.SIGTERM)
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
					if syscall.Kill(n, 0) != nil {
						break
					}
				}
			}
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	waitFor(t, 10*time.Second, "Dovecot's IMAP port", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	// counts returns user's messages per class once spamd has applied
	// every report and the watcher had time to see the last moves.
	counts := func(t *testing.T, user string) map[string]uint64 {
		t.Helper()
		time.Sleep(300 * time.Millisecond)
		var st control.Stats
		waitFor(t, 10*time.Second, "spamd to apply the reports", func() bool {
			st, err = api.Stats(ctx)
			return err == nil && st.PendingReports == 0
		})
		for _, u := range st.Users {
			if u.User == user {
				return u.Messages
			}
		}
		return map[string]uint64{}
	}
	// Dovecot's users are alice and bob; the milter names recipients by
	// address ([milter] users, by default), and [watch] domain makes
	// their folders' moves train the same models.
	const alice = "alice@example.org"
	bob := counts(t, "bob@example.org")
	check := func(t *testing.T, spam, ham uint64) {
		t.Helper()
		got := counts(t, alice)
		if got[filter.Spam] != spam || got[filter.Ham] != ham {
			t.Errorf("alice's model holds %v, want spam %d ham %d", got, spam, ham)
		}
		if got := counts(t, "bob@example.org"); got[filter.Spam] != bob[filter.Spam] || got[filter.Ham] != bob[filter.Ham] {
			t.Errorf("bob's model changed: %v → %v", bob, got)
		}
	}

	c := dialIMAP(t, addr)
	c.cmd(t, "LOGIN alice alicepw")
	c.cmd(t, "CREATE Junk")
	c.cmd(t, "CREATE Trash")
	msg := imapMessage(t)
	uid := c.appendMessage(t, "INBOX", msg)
	c.cmd(t, "SELECT INBOX")
	check(t, 0, 0)

	t.Run("INBOX to Junk: learned as spam once", func(t *testing.T) {
		start := time.Now()
		uid = c.move(t, uid, "Junk")
		d := time.Since(start)
		if d > 2*time.Second {
			t.Errorf("the move took %v: the report held the IMAP command up", d)
		}
		t.Logf("UID MOVE INBOX → Junk, with the report piped to spamtrain: %v", d)
		check(t, 1, 0)
	})
	t.Run("Junk back to INBOX: relabeled ham", func(t *testing.T) {
		c.cmd(t, "SELECT Junk")
		uid = c.move(t, uid, "INBOX")
		check(t, 0, 1)
	})
	t.Run("Junk to Trash: nothing changes", func(t *testing.T) {
		c.cmd(t, "SELECT INBOX")
		uid = c.move(t, uid, "Junk")
		check(t, 1, 0)
		c.cmd(t, "SELECT Junk")
		c.move(t, uid, "Trash")
		check(t, 1, 0)
	})
	c.cmd(t, "LOGOUT")
	// The model the moves trained is the one the milter names for mail
	// to alice: it knows the message as spam.
	if v, err := api.Classify(ctx, identity.Address.Of("<Alice@Example.org>"), msg, 0); err != nil || v.TrainedAs != filter.Spam {
		t.Errorf("the milter's model of alice knows the moved message as %q (%v), want spam", v.TrainedAs, err)
	}
	// Three moves into or out of Junk but to Trash, each reported by
	// both channels; the store counted each once.
	applied := map[string]int{}
	for _, l := range strings.Split(logs.String(), "\n") {
		if _, rest, ok := strings.Cut(l, "msg=\"report applied\""); ok {
			_, source, _ := strings.Cut(rest, "source=")
			source, _, _ = strings.Cut(source, " ")
			applied[source]++
		}
	}
	if applied["spamtrain"] != 3 || applied["maildir"] != 3 {
		t.Errorf("spamd applied reports by source %v, want 3 from spamtrain (IMAPSieve) and 3 from maildir", applied)
	}
}

func mkdir(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(dir, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

// imapMessage returns a message for the test with CRLF line endings.
func imapMessage(t *testing.T) []byte {
	t.Helper()
	_, send := e2eMessages(t, 20)
	for _, m := range send {
		if m.class == filter.Spam {
			raw := bytes.ReplaceAll(stripFrom(m.raw), []byte("\r\n"), []byte("\n"))
			return bytes.ReplaceAll(raw, []byte("\n"), []byte("\r\n"))
		}
	}
	t.Fatal("no spam to send")
	return nil
}

// imapClient is just enough IMAP4rev1 (RFC 3501, with UIDPLUS and MOVE)
// to act as a mail client.
type imapClient struct {
	conn net.Conn
	r    *textproto.Reader
	w    *bufio.Writer
	tag  int
}

func dialIMAP(t *testing.T, addr string) *imapClient {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &imapClient{conn: conn, r: textproto.NewReader(bufio.NewReader(conn)), w: bufio.NewWriter(conn)}
	if greeting := c.line(t); !strings.HasPrefix(greeting, "* OK") {
		t.Fatalf("greeting %q", greeting)
	}
	return c
}

func (c *imapClient) line(t *testing.T) string {
	t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	l, err := c.r.ReadLine()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// send writes a tagged command's first line and returns its tag.
func (c *imapClient) send(t *testing.T, command string) string {
	t.Helper()
	c.tag++
	tag := fmt.Sprintf("a%d", c.tag)
	fmt.Fprintf(c.w, "%s %s\r\n", tag, command)
	if err := c.w.Flush(); err != nil {
		t.Fatal(err)
	}
	return tag
}

// result reads until the tagged answer to tag, which must be OK, and
// returns every line read.
func (c *imapClient) result(t *testing.T, tag, command string) []string {
	t.Helper()
	var lines []string
	for {
		l := c.line(t)
		lines = append(lines, l)
		if rest, ok := strings.CutPrefix(l, tag+" "); ok {
			if !strings.HasPrefix(rest, "OK") {
				t.Fatalf("%s: %s", command, l)
			}
			return lines
		}
	}
}

// cmd runs a command that must succeed.
func (c *imapClient) cmd(t *testing.T, command string) []string {
	t.Helper()
	return c.result(t, c.send(t, command), command)
}

var (
	appendUID = regexp.MustCompile(`\[APPENDUID \d+ (\d+)\]`)
	copyUID   = regexp.MustCompile(`\[COPYUID \d+ \d+ (\d+)\]`)
)

// appendMessage appends msg to mailbox and returns its UID there.
func (c *imapClient) appendMessage(t *testing.T, mailbox string, msg []byte) string {
	t.Helper()
	command := fmt.Sprintf("APPEND %s {%d}", mailbox, len(msg))
	tag := c.send(t, command)
	if l := c.line(t); !strings.HasPrefix(l, "+") {
		t.Fatalf("%s: %s", command, l)
	}
	c.w.Write(msg)
	c.w.WriteString("\r\n")
	if err := c.w.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := c.result(t, tag, command)
	m := appendUID.FindStringSubmatch(lines[len(lines)-1])
	if m == nil {
		t.Fatalf("%s: no APPENDUID in %q", command, lines)
	}
	return m[1]
}

// move moves the message with uid in the selected mailbox to dest and
// returns its UID there.
func (c *imapClient) move(t *testing.T, uid, dest string) string {
	t.Helper()
	lines := c.cmd(t, fmt.Sprintf("UID MOVE %s %s", uid, dest))
	for _, l := range lines {
		if m := copyUID.FindStringSubmatch(l); m != nil {
			return m[1]
		}
	}
	t.Fatalf("UID MOVE %s %s: no COPYUID in %q", uid, dest, lines)
	return ""
}
