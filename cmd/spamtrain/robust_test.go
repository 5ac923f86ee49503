package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain runs spamtrain's main instead of the tests when asked to, so
// that a test can run spamtrain as a process of its own, to signal it.
func TestMain(m *testing.M) {
	if os.Getenv("SPAMTRAIN_TEST_MAIN") == "1" {
		os.Args = append([]string{"spamtrain"}, strings.Split(os.Getenv("SPAMTRAIN_TEST_ARGS"), "\x1f")...)
		main()
		return
	}
	os.Exit(m.Run())
}

// TestUnreadableSources gives classify and train sources that cannot be
// read, beside readable ones: each is a clear error of its own, the rest
// is done, and the run ends with exit status 1 and a summary line.
func TestUnreadableSources(t *testing.T) {
	isolate(t)
	db := trainSample(t)
	dir := t.TempDir()
	loop := filepath.Join(dir, "loop")
	if err := os.Symlink(loop, loop); err != nil {
		t.Fatal(err)
	}
	// A directory of messages with a loop of links in it: the loop is
	// reported, the message read.
	withLoop := filepath.Join(dir, "with-loop")
	os.Mkdir(withLoop, 0o755)
	os.Symlink(filepath.Join(withLoop, "b"), filepath.Join(withLoop, "a"))
	os.Symlink(filepath.Join(withLoop, "a"), filepath.Join(withLoop, "b"))
	good := filepath.Join(sample, "spam", firstName(t, filepath.Join(sample, "spam")))
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(withLoop, "message"), raw, 0o644)

	type source struct{ name, path, want string }
	sources := []source{
		{"a loop of links", loop, "too many levels of symbolic links"},
		{"a loop of links in a directory", withLoop, "too many levels of symbolic links"},
	}
	if os.Geteuid() != 0 {
		unreadable := filepath.Join(dir, "unreadable.eml")
		os.WriteFile(unreadable, raw, 0o644)
		if err := os.Chmod(unreadable, 0); err != nil {
			t.Fatal(err)
		}
		sources = append(sources, source{"a file without read permission", unreadable, "permission denied"})
	} else if _, err := os.Stat("/proc/self/mem"); err == nil {
		// Root reads a file of mode 000; reading a process's memory at
		// offset 0, unmapped, fails even for root.
		sources = append(sources, source{"a file root cannot read", "/proc/self/mem", "input/output error"})
	} else {
		t.Log("running as root without /proc: no unreadable file to test with; root reads a file of mode 000")
	}
	if os.Geteuid() == 0 {
		t.Run("a file without read permission, as another user", func(t *testing.T) { unreadableAsNobody(t, raw) })
	}
	for _, cmd := range [][]string{{"classify", "--db", db}, {"train", "--db", db, "--ham"}} {
		for _, s := range sources {
			t.Run(cmd[0]+" "+s.name, func(t *testing.T) {
				args := append(append([]string{}, cmd...), s.path, good)
				code, out, errOut := spamtrain(t, "", args...)
				if code != 1 || !strings.Contains(errOut, s.path) || !strings.Contains(errOut, s.want) {
					t.Errorf("exit %d (want 1), stderr %q: want %s named with %q", code, errOut, s.path, s.want)
				}
				if !strings.Contains(errOut, "could not be read") {
					t.Errorf("no summary line: %q", errOut)
				}
				// The readable message after it was done.
				done := strings.Contains(out, filepath.Base(good)) || strings.Contains(out, "known") || strings.Contains(out, "relabeled") || strings.Contains(out, "learned")
				if !done {
					t.Errorf("the readable message was not done: %q", out)
				}
			})
		}
	}
}

// unreadableAsNobody runs spamtrain train as the user nobody on a file of
// mode 000 beside a readable one: root would read it.
func unreadableAsNobody(t *testing.T, raw []byte) {
	const nobody = 65534
	dir, err := os.MkdirTemp("", "spamtrain-unreadable")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	// The test's own binary, where nobody may run it.
	exe := filepath.Join(dir, "spamtrain.test")
	good, unreadable, db := filepath.Join(dir, "good.eml"), filepath.Join(dir, "unreadable.eml"), filepath.Join(dir, "db")
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{exe, bin, 0o755}, {good, raw, 0o644}, {unreadable, raw, 0}} {
		if err := os.WriteFile(f.path, f.data, 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chmod(f.path, f.mode)
	}
	if err := os.Mkdir(db, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(db, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "SPAMTRAIN_TEST_MAIN=1", "SPAMD_CONFIG=/nonexistent", "HOME="+dir,
		"SPAMTRAIN_TEST_ARGS="+strings.Join([]string{"train", "--db", db, "--ham", unreadable, good}, "\x1f"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), unreadable+": open "+unreadable+": permission denied") ||
		!strings.Contains(stderr.String(), "could not be read") || !strings.Contains(stdout.String(), "1 learned") {
		t.Errorf("exit %v, stdout %q, stderr %q: want status 1, the file named as not readable, the other learned", err, stdout.String(), stderr.String())
	}
}

// TestInterrupt sends SIGINT to spamtrain classify reading standard input
// that never ends, from a pipe and from a named pipe, and checks that it
// stops (within a second: the grace a command blocked in a read gets;
// the test allows 5 s and logs the time), with the shell's exit status of
// a command stopped by SIGINT, and leaves the store usable.
func TestInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts spamtrain processes")
	}
	if _, err := os.Stat("/proc/self/maps"); err != nil {
		t.Skip("tells that spamtrain has opened the store from /proc, which this system lacks")
	}
	isolate(t)
	db := trainSample(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"pipe", "named pipe"} {
		t.Run(kind, func(t *testing.T) {
			var stdin *os.File
			var writer *os.File
			switch kind {
			case "pipe":
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				stdin, writer = r, w
			case "named pipe":
				fifo := filepath.Join(t.TempDir(), "fifo")
				if err := syscall.Mkfifo(fifo, 0o600); err != nil {
					t.Fatal(err)
				}
				// Read-write, so that opening it does not wait for the
				// other end; the writer stays open and silent.
				w, err := os.OpenFile(fifo, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				r, err := os.Open(fifo)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				stdin, writer = r, w
			}
			defer writer.Close()
			cmd := exec.Command(self)
			cmd.Env = append(os.Environ(), "SPAMTRAIN_TEST_MAIN=1", "SPAMTRAIN_TEST_ARGS="+strings.Join([]string{"classify", "--db", db, "-"}, "\x1f"))
			var stderr bytes.Buffer
			cmd.Stdin, cmd.Stderr = stdin, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			// The start of a message, and then nothing, ever.
			writer.WriteString("From: a@example.net\nSubject: never ends\n\n")
			// Interrupt once it has opened the store and reads.
			waitMapped(t, cmd.Process.Pid, db, done)
			time.Sleep(200 * time.Millisecond)
			sent := time.Now()
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				took := time.Since(sent)
				t.Logf("%s: stopped %v after SIGINT", kind, took.Round(time.Millisecond))
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted || !strings.Contains(stderr.String(), "interrupted") {
					t.Errorf("exit %v, stderr %q: want status %d and a word of it", err, stderr.String(), exitInterrupted)
				}
				if took > 5*time.Second {
					t.Errorf("took %v to stop", took)
				}
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Fatalf("still running 5 s after SIGINT; stderr %q", stderr.String())
			}
			// The store is free and whole for the next command.
			if code, out, errOut := spamtrain(t, "", "check", "--db", db); code != 0 {
				t.Errorf("check after the interrupt: exit %d: %s%s", code, out, errOut)
			}
		})
	}
}

// waitMapped waits until process pid maps a file of the directory dir,
// as it does once it has opened the store there, failing if the process
// ends first or it takes 10 s.
func waitMapped(t *testing.T, pid int, dir string, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
		if err == nil && bytes.Contains(maps, []byte(" "+dir+string(filepath.Separator))) {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("spamtrain ended early: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("spamtrain did not map a file of %s", dir)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
