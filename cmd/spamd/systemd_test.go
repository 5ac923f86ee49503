package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spamd/spamd/config"
)

const unitFile = "../../systemd/spamd.service"

// unit reads a systemd unit file as key → values.
func unit(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		out[k] = append(out[k], v)
	}
	return out
}

// TestSystemdUnit checks that the unit and the daemon agree: the
// notification protocol, the directories it gets and the defaults that
// use them, the stop timeout and the sandbox.
func TestSystemdUnit(t *testing.T) {
	u := unit(t)
	def := config.Default(env(map[string]string{"STATE_DIRECTORY": "/var/lib/spamd", "RUNTIME_DIRECTORY": "/run/spamd"}))
	stop, err := time.ParseDuration(strings.Join(u["TimeoutStopSec"], ""))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		ok   bool
	}{
		{"Type=notify", slices.Equal(u["Type"], []string{"notify"})},
		{"WatchdogSec set", len(u["WatchdogSec"]) == 1},
		{"ExecReload sends SIGHUP", strings.Contains(strings.Join(u["ExecReload"], ""), "-HUP $MAINPID")},
		{"StateDirectory is the default store", slices.Equal(u["StateDirectory"], []string{"spamd"}) && def.Store.Dir == "/var/lib/spamd"},
		{"RuntimeDirectory holds the default socket", slices.Equal(u["RuntimeDirectory"], []string{"spamd"}) && def.API.Socket == "/run/spamd/api.sock"},
		{"TimeoutStopSec exceeds shutdown_timeout", stop > def.Milter.ShutdownTimeout.Duration},
		{"own account", slices.Equal(u["DynamicUser"], []string{"yes"}) || len(u["User"]) > 0},
		{"ProtectSystem=strict", slices.Equal(u["ProtectSystem"], []string{"strict"})},
		{"ProtectHome", slices.Equal(u["ProtectHome"], []string{"yes"})},
		{"PrivateTmp", slices.Equal(u["PrivateTmp"], []string{"yes"})},
		{"NoNewPrivileges", slices.Equal(u["NoNewPrivileges"], []string{"yes"})},
		{"RestrictAddressFamilies", slices.Equal(u["RestrictAddressFamilies"], []string{"AF_UNIX AF_INET AF_INET6"})},
		{"SystemCallFilter", slices.Contains(u["SystemCallFilter"], "@system-service")},
		{"no PrivateUsers, which hides peer uids", !slices.Contains(u["PrivateUsers"], "yes")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.ok {
				t.Errorf("%s does not hold", tt.name)
			}
		})
	}

	t.Run("systemd-analyze verify", func(t *testing.T) {
		analyze, err := exec.LookPath("systemd-analyze")
		if err != nil {
			t.Skip("no systemd-analyze")
		}
		// ExecStart must name an executable: point it at this test.
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(unitFile)
		if err != nil {
			t.Fatal(err)
		}
		copied := filepath.Join(t.TempDir(), "spamd.service")
		write(t, copied, strings.Replace(string(b), "ExecStart=/usr/local/bin/spamd", "ExecStart="+exe, 1))
		// verify runs man for the unit's Documentation=man:…; the pages
		// are written as make writes them.
		manDir := t.TempDir()
		for _, d := range []string{"man5", "man8"} {
			os.MkdirAll(filepath.Join(manDir, d), 0o755)
		}
		var page8 strings.Builder
		if err := gendocMain(&page8, []string{"man"}); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(manDir, "man8", "spamd.8"), page8.String())
		page5, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "run", "../../internal/gendoc/confpage", "-src", "../../config/config.go").Output()
		if err != nil {
			t.Fatalf("confpage: %v", err)
		}
		write(t, filepath.Join(manDir, "man5", "spamd.conf.5"), string(page5))
		cmd := exec.Command(analyze, "verify", copied)
		cmd.Env = append(os.Environ(), "MANPATH="+manDir)
		out, err := cmd.CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}
	})
}

// TestSystemdNotify runs the daemon as systemd would, with a notification
// socket and a watchdog, and reads what it says.
func TestSystemdNotify(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	t.Setenv("WATCHDOG_USEC", "200000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	path := filepath.Join(dir, "config.toml")
	write(t, path, fmt.Sprintf("[store]\ndir = %q\n[milter]\nlisten = \"unix:%s\"\n[api]\nsocket = %q\n[metrics]\nlisten = \"\"\n",
		filepath.Join(dir, "db"), filepath.Join(dir, "milter.sock"), filepath.Join(dir, "api.sock")))
	_, hup, stop := runDaemon(t, options{config: path}, nil)

	said := make(chan string, 100)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				close(said)
				return
			}
			said <- string(buf[:n])
		}
	}()
	expect := func(what string) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case s := <-said:
				if strings.HasPrefix(s, what) {
					return
				}
			case <-deadline:
				t.Fatalf("spamd did not say %s", what)
			}
		}
	}
	expect("READY=1")
	expect("WATCHDOG=1")
	expect("WATCHDOG=1")
	hup <- syscall.SIGHUP
	expect("RELOADING=1\nMONOTONIC_USEC=")
	expect("READY=1")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	expect("STOPPING=1")
}
