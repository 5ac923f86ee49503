package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/internal/fsfault"
	"golang.org/x/sys/unix"
)

// The fault-injection suite runs spamd with its Badger store on a small
// tmpfs mounted for the test, under load: milter sessions whose messages
// carry forged X-Spam-* fields, training and reports through the API.
// Each fault is produced for real:
//
//   - TestDaemonFaultUnwritable: the store's directory made unwritable;
//   - TestDaemonFaultDiskFull: its filesystem filled below the reserve,
//     then to the last byte;
//   - TestDaemonFaultDirRemoved: the directory removed;
//   - TestDaemonFaultKilled: spamd killed with SIGKILL during a bulk load
//     through the API, and started again.
//
// For each: every milter answer comes within the MTA's timeout and is the
// verdict or the configured failure action, with the forged fields
// removed from every message let through; /healthz on the metrics
// listener says degraded or failed, with the reason, while the fault
// lasts, and ok after; the watchdog keeps being pinged; spamd recovers
// without a restart once the fault is cleared; and afterwards every
// model passes `spamtrain check` and holds every training and report the
// API acknowledged. Mounting takes root or CAP_SYS_ADMIN; without it the
// tests skip, unless SPAMD_REQUIRE_E2E=1.

// notifyWatch is systemd's end of the notification socket for a daemon
// run in process with a watchdog: it records when the daemon pings it.
type notifyWatch struct {
	interval time.Duration
	mu       sync.Mutex
	pings    []time.Time
}

// watchNotify makes the daemons t runs in process notify a socket of its
// own, with a watchdog of interval (WatchdogSec=).
func watchNotify(t *testing.T, interval time.Duration) *notifyWatch {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", sock)
	t.Setenv("WATCHDOG_USEC", strconv.FormatInt(interval.Microseconds(), 10))
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	w := &notifyWatch{interval: interval}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			if strings.Contains(string(buf[:n]), "WATCHDOG=1") {
				w.mu.Lock()
				w.pings = append(w.pings, time.Now())
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// longestGap returns the longest time without a ping from since to now.
func (w *notifyWatch) longestGap(since time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, gap := since, time.Duration(0)
	for _, p := range w.pings {
		if p.Before(since) {
			continue
		}
		gap = max(gap, p.Sub(last))
		last = p
	}
	return max(gap, time.Since(last))
}

// faultDaemon is spamd with its store on a tmpfs.
type faultDaemon struct {
	mnt, db    string
	milterSock string
	metrics    string
	api        *control.Client
	logs       *lockedBuffer
}

// faultConfig is the configuration of a daemon with its store in db and
// its sockets in work; store and actions are added to their sections.
// Classifying a message may take 5 s (write_timeout), half the MTA's
// timeout of the load.
func faultConfig(db, work, metrics, storeKeys, actions string) string {
	return fmt.Sprintf(`[store]
dir = %q
%s
[milter]
listen = "unix:%s"
write_timeout = "5s"
[api]
socket = %q
[metrics]
listen = %q
[actions]
%s
`, db, storeKeys, filepath.Join(work, "milter.sock"), filepath.Join(work, "api.sock"), metrics, actions)
}

// storeLog returns the lines of log that tell of the store's state: what
// an administrator reads in the journal.
func storeLog(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "badgerstore:") || strings.Contains(l, "reports: the spool") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// faultCase is one fault produced under load.
type faultCase struct {
	// storeKeys and actions go into the configuration.
	storeKeys, onError string
	// prepare, if set, readies the load for the fault; reports paused
	// there resume once it is produced.
	prepare func(t *testing.T, fd *faultDaemon, reports *reportLoad)
	// inject produces the fault and returns what clears it, nil for a
	// fault spamd clears by itself.
	inject func(t *testing.T, fd *faultDaemon, hw *healthWatch) (clear func())
	// reason is what /healthz must say while the fault lasts.
	reason string
	// faults are the kinds spamd_store_faults_total must count.
	faults []string
}

// runFaultCase runs spamd in process with its store on a tmpfs, puts it
// under load, produces the fault, clears it, and checks everything the
// suite promises.
func runFaultCase(t *testing.T, c faultCase) {
	mnt := fsfault.MountTmpfs(t, "384m", 0o755)
	work := t.TempDir()
	fd := &faultDaemon{mnt: mnt, db: filepath.Join(mnt, "db"), milterSock: filepath.Join(work, "milter.sock"),
		metrics: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	path := filepath.Join(work, "config.toml")
	write(t, path, faultConfig(fd.db, work, fd.metrics, c.storeKeys, fmt.Sprintf("on_error = %q", c.onError)))
	watchdog := watchNotify(t, 4*time.Second)
	logs, _, _ := runDaemon(t, options{config: path}, nil)
	fd.logs = logs
	var err error
	if fd.api, err = control.NewClient("unix:"+filepath.Join(work, "api.sock"), ""); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	waitFor(t, 20*time.Second, "the API", func() bool { return fd.api.Health(ctx) == nil })
	spam, ham := trainSample(t, fd.api)
	started := time.Now()
	hw := watchHealth(t, fd.metrics)
	waitFor(t, 10*time.Second, "/healthz to say ok", func() bool { return hw.now().state == "ok" })

	src := sampleSource(t)
	const user = "user@test.example"
	ml := startMilterLoad(t, "unix", fd.milterSock, 4, [][]byte{spam, ham}, c.onError)
	tl := startTrainLoad(t, fd.api, src, "fault", 8)
	rl := startReportLoad(t, fd.api, 500*time.Millisecond, func(n int) (string, string, []byte) {
		class, raw := src.message("report", n)
		return user, class, raw
	})
	ml.waitAnswers(t, 20, 30*time.Second)
	tl.waitAcked(t, 24, 30*time.Second)

	if c.prepare != nil {
		c.prepare(t, fd, rl)
	}
	before := tl.ackedLen()
	// Refusals are counted from before the fault: a fault that passes
	// quickly, such as a removed directory salvaged in a second without
	// the race detector, may be over by the time the milter has answered
	// under it.
	const refusedTraining = `spamd_api_requests_total{code="503",endpoint="train"}`
	refused := scrape(t, fd.metrics)[refusedTraining]
	faultAt := time.Now()
	clear := c.inject(t, fd, hw)
	rl.paused.Store(false)
	waitFor(t, 20*time.Second, "/healthz to tell of the fault", func() bool { return hw.now().state != "ok" })
	bad := hw.now()
	t.Logf("/healthz under the fault: %s", bad)
	// The fault lasts a while under load: the milter goes on answering,
	// and so does the API, refusing to train with 503 and Retry-After,
	// which the client waits out.
	ml.waitAnswers(t, 20, 30*time.Second)
	// A removed directory is copied out holding writes back, which
	// takes a while under -race: they are refused once it is done.
	waitFor(t, 90*time.Second, "the API to refuse training", func() bool { return scrape(t, fd.metrics)[refusedTraining] > refused })
	var clearedAt time.Time
	if clear != nil {
		if now := hw.now(); now.state == "ok" {
			t.Errorf("/healthz says ok before the fault is cleared")
		}
		clearedAt = time.Now()
		clear()
	}
	waitFor(t, 60*time.Second, "/healthz to say ok again", func() bool { return hw.now().state == "ok" })
	recoveredAt := time.Now()
	during := tl.ackedLen()
	tl.waitAcked(t, 16, 60*time.Second)
	rl.waitAcked(t, 3, 30*time.Second)
	ml.waitAnswers(t, 20, 30*time.Second)
	ml.halt()
	tl.halt()
	rl.halt()
	stopped := time.Now()
	waitApplied(t, fd.api, 2*time.Minute)
	t.Logf("timeline: fault at +%.1fs, recovered +%.1fs, load stopped +%.1fs, reports applied +%.1fs",
		faultAt.Sub(started).Seconds(), recoveredAt.Sub(started).Seconds(), stopped.Sub(started).Seconds(), time.Since(started).Seconds())
	hw.halt()

	var changes []string
	sawReason := false
	for _, ch := range hw.since(faultAt) {
		changes = append(changes, fmt.Sprintf("%+.1fs %s", ch.at.Sub(faultAt).Seconds(), ch))
		if ch.state != "ok" && strings.Contains(ch.reason, c.reason) {
			sawReason = true
		}
		if ch.state == "ok" && !clearedAt.IsZero() && ch.at.After(bad.at) && ch.at.Before(clearedAt) {
			t.Errorf("/healthz said ok at %v, before the fault was cleared", ch.at.Sub(faultAt))
		}
	}
	t.Logf("/healthz from the fault on:\n\t%s", strings.Join(changes, "\n\t"))
	if !sawReason {
		t.Errorf("/healthz never gave a reason with %q", c.reason)
	}
	if clearedAt.IsZero() {
		t.Logf("recovered by itself %.1fs after the fault", recoveredAt.Sub(faultAt).Seconds())
	} else {
		t.Logf("recovered %.1fs after the fault was cleared", recoveredAt.Sub(clearedAt).Seconds())
	}

	kinds, lost, slowest, failures := ml.summary()
	t.Logf("milter: %d answers %v, slowest %v, %d sessions lost", ml.answered.Load(), kinds, slowest, lost)
	for _, err := range failures {
		t.Errorf("milter: %v", err)
	}
	if lost != 0 {
		t.Errorf("%d milter sessions lost", lost)
	}
	tl.mu.Lock()
	t.Logf("training: %d messages acknowledged (%d before the fault, %d by the time it recovered), %v requests answered 503, %d batches still refused after the client's retries",
		len(tl.acked), before, during, scrape(t, fd.metrics)[refusedTraining], tl.refused)
	for _, err := range tl.failures {
		t.Errorf("training: %v", err)
	}
	tl.mu.Unlock()
	rl.mu.Lock()
	t.Logf("reports: %d acknowledged, %d refused with 503", rl.accepted, rl.refused)
	for _, err := range rl.failures {
		t.Errorf("reports: %v", err)
	}
	rl.mu.Unlock()

	m := scrape(t, fd.metrics)
	if s := m["spamd_store_state"]; s != 0 {
		t.Errorf("spamd_store_state %v after recovery, want 0", s)
	}
	var counted []string
	for k, v := range m {
		if kind, ok := strings.CutPrefix(k, "spamd_store_faults_total"); ok {
			counted = append(counted, fmt.Sprintf("%s=%v", kind, v))
		}
	}
	t.Logf("spamd_store_faults_total: %s", strings.Join(counted, " "))
	for _, kind := range c.faults {
		if m[`spamd_store_faults_total{kind="`+kind+`"}`] == 0 {
			t.Errorf("spamd_store_faults_total{kind=%q} not counted", kind)
		}
	}
	if _, byKind := errorsTotal(m); len(byKind) > 0 {
		t.Logf("spamd_errors_total: %v", byKind)
	}
	if gap := watchdog.longestGap(started); gap >= watchdog.interval {
		t.Errorf("the watchdog went %v without a ping: systemd (WatchdogSec=%v) would have restarted spamd", gap, watchdog.interval)
	}

	tl.mu.Lock()
	rl.mu.Lock()
	verifyModels(t, fd.api, tl.acked, rl.acked)
	rl.mu.Unlock()
	tl.mu.Unlock()
	t.Logf("what the store logged:\n%s", storeLog(fd.logs.String()))
}

// TestDaemonFaultUnwritable makes the store's directory unwritable under
// load. Remounting the tmpfs read-only is tried first; the kernel refuses
// it (EBUSY) while Badger has files open for writing, so the directory
// gets the immutable attribute instead, which stops root too: no file can
// be created in it, as Badger's next memtable and table need. Writes
// stop, reads go on, /healthz says degraded; cleared, spamd goes back to
// writing by itself.
func TestDaemonFaultUnwritable(t *testing.T) {
	runFaultCase(t, faultCase{
		onError: "tempfail",
		reason:  "cannot create a file in the directory",
		faults:  []string{"unwritable", "refused_write"},
		inject: func(t *testing.T, fd *faultDaemon, _ *healthWatch) func() {
			if err := unix.Mount("", fd.mnt, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err == nil {
				t.Log("fault: the store's filesystem remounted read-only")
				return func() {
					if err := unix.Mount("", fd.mnt, "", unix.MS_REMOUNT, ""); err != nil {
						t.Fatal(err)
					}
				}
			} else {
				t.Logf("fault: remounting read-only: %v; the store's directory made immutable instead", err)
			}
			if err := fsfault.SetImmutable(fd.db, true); err != nil {
				t.Fatalf("cannot make the store's directory unwritable: %v", err)
			}
			cleared := false
			t.Cleanup(func() {
				if !cleared {
					_ = fsfault.SetImmutable(fd.db, false)
				}
			})
			return func() {
				cleared = true
				if err := fsfault.SetImmutable(fd.db, false); err != nil {
					t.Fatal(err)
				}
			}
		},
	})
}

// TestDaemonFaultDiskFull fills the store's filesystem under load: first
// below the reserve (the default, 256 MiB), where the store turns
// read-only before Badger can write into a full disk, then, once Badger
// is idle, to the last byte. Reads go on, /healthz says degraded with the
// free space; space given back, spamd writes again by itself.
func TestDaemonFaultDiskFull(t *testing.T) {
	runFaultCase(t, faultCase{
		onError: "accept",
		reason:  "below the reserve",
		faults:  []string{"low_space", "refused_write"},
		inject: func(t *testing.T, fd *faultDaemon, hw *healthWatch) func() {
			below := fsfault.Fill(t, fd.mnt, 32<<20)
			t.Logf("fault: filesystem filled to %d MiB free, below the reserve", fsfault.FreeSpace(t, fd.mnt)>>20)
			waitFor(t, 20*time.Second, "the store to turn read-only", func() bool { return hw.now().state == "degraded" })
			// What Badger had under way when writes stopped (a flush, a
			// compaction) finishes in the space the reserve keeps.
			time.Sleep(2 * time.Second)
			full := fsfault.Fill(t, fd.mnt, 0)
			t.Logf("fault: filesystem filled to the last byte: %d bytes free", fsfault.FreeSpace(t, fd.mnt))
			return func() {
				for _, p := range []string{full, below} {
					if err := os.Remove(p); err != nil {
						t.Fatal(err)
					}
				}
			}
		},
	})
}

// TestDaemonFaultDirRemoved removes the store's directory under load, the
// report spool in it too. Badger still has its files open: spamd copies
// the model out of them into a new directory at the same path and goes
// on there, by itself. The model is read from Badger, not the cache
// (cache_mb = 0), so that messages classified while the store reopens
// take the failure action. Reports are drained before the removal: the
// ones waiting in the spool are removed with it.
func TestDaemonFaultDirRemoved(t *testing.T) {
	runFaultCase(t, faultCase{
		storeKeys: "cache_mb = 0",
		onError:   "accept",
		reason:    "removed",
		faults:    []string{"dir_removed", "salvage", "reopen"},
		prepare: func(t *testing.T, fd *faultDaemon, reports *reportLoad) {
			reports.paused.Store(true)
			waitApplied(t, fd.api, time.Minute)
		},
		inject: func(t *testing.T, fd *faultDaemon, _ *healthWatch) func() {
			if err := os.RemoveAll(fd.db); err != nil {
				t.Fatal(err)
			}
			t.Log("fault: the store's directory removed")
			return nil
		},
	})
}

// TestDaemonFaultKilled kills spamd with SIGKILL while the API trains
// batches of 64 messages back to back and milter sessions send mail,
// twice, starting it again each time. The MTA sees its milter
// connections drop while spamd is dead (and applies its own
// milter_default_action); once spamd is back, sessions answer again.
// Every batch acknowledged is in the store, every model passes check,
// and the batches cut off are trained whole when sent again.
func TestDaemonFaultKilled(t *testing.T) {
	mnt := fsfault.MountTmpfs(t, "384m", 0o755)
	work := t.TempDir()
	bin := buildSpamd(t, work)
	metrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	path := filepath.Join(work, "config.toml")
	write(t, path, faultConfig(filepath.Join(mnt, "db"), work, metrics, "", `on_error = "tempfail"`))
	logs := &lockedBuffer{}
	var (
		cmd    *exec.Cmd
		exited chan error
	)
	start := func() {
		t.Helper()
		cmd = exec.Command(bin, "--config", path)
		cmd.Stdout, cmd.Stderr = logs, logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited = make(chan error, 1)
		go func(c *exec.Cmd, ch chan error) { ch <- c.Wait() }(cmd, exited)
	}
	start()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("spamd's log:\n%s", logs.String())
		}
	})
	api, err := control.NewClient("unix:"+filepath.Join(work, "api.sock"), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	waitFor(t, 20*time.Second, "the API", func() bool { return api.Health(ctx) == nil })
	spam, ham := trainSample(t, api)
	hw := watchHealth(t, metrics)

	src := sampleSource(t)
	ml := startMilterLoad(t, "unix", filepath.Join(work, "milter.sock"), 4, [][]byte{spam, ham}, "tempfail")
	// Batches of 256 messages, trained 64 at a time, one store write
	// per message: a kill nearly always lands inside one.
	tl := startTrainLoad(t, api, src, "bulk", 256)
	trained := func() int {
		st, err := api.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, u := range st.Users {
			if u.User == "" {
				for _, m := range u.Messages {
					n += int(m)
				}
			}
		}
		return n
	}
	sample := trained()
	for round := range 2 {
		tl.waitAcked(t, 256, time.Minute)
		ml.waitAnswers(t, 20, 30*time.Second)
		// Killed in the middle of a batch: some of its messages are
		// in the model, not yet acknowledged.
		waitFor(t, time.Minute, "a batch half trained", func() bool { return trained()-sample > tl.ackedLen()+16 })
		ml.down.Store(true)
		tl.down.Store(true)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-exited
		killedAt := time.Now()
		acked := tl.ackedLen()
		start()
		waitFor(t, 30*time.Second, "spamd to start again", func() bool { return api.Health(ctx) == nil })
		waitFor(t, 10*time.Second, "/healthz to say ok", func() bool { return hw.now().state == "ok" })
		t.Logf("round %d: killed with %d messages acknowledged; answering again %.1fs later", round, acked, time.Since(killedAt).Seconds())
		ml.down.Store(false)
		tl.down.Store(false)
		ml.waitAnswers(t, 20, 30*time.Second)
	}
	ml.halt()
	tl.halt()
	hw.halt()

	kinds, lost, slowest, failures := ml.summary()
	t.Logf("milter: %d answers %v, slowest %v, %d sessions dropped by the kills", ml.answered.Load(), kinds, slowest, lost)
	for _, err := range failures {
		t.Errorf("milter: %v", err)
	}
	for _, err := range tl.failures {
		t.Errorf("training: %v", err)
	}
	for _, ch := range hw.since(time.Time{}) {
		if ch.state != "ok" {
			t.Errorf("/healthz said %s", ch)
		}
	}
	m := scrape(t, metrics)
	if s := m["spamd_store_state"]; s != 0 {
		t.Errorf("spamd_store_state %v after the restart, want 0", s)
	}
	verifyModels(t, api, tl.acked, nil)

	// The batches cut off by the kills: every message is in the store
	// whole or not at all (check passed), and sending them again trains
	// the rest.
	again, changed := 0, 0
	for _, items := range tl.unsent {
		res, err := api.Train(ctx, "", items)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Error != "" {
				t.Fatalf("sent again: %s", r.Error)
			}
			tl.acked[r.Digest] = items[i].Class
			again++
			if r.Changed {
				changed++
			}
		}
	}
	t.Logf("%d messages of %d batches cut off sent again: %d trained before the kill, %d not", again, len(tl.unsent), again-changed, changed)
	verifyModels(t, api, tl.acked, nil)
}
