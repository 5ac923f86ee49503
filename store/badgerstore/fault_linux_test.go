package badgerstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/internal/fsfault"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/badgerstore/sealed"
	"github.com/spamd/spamd/store/storetest"
	"golang.org/x/sys/unix"
)

// The fault tests produce each fault for real on a small tmpfs mounted
// for the test, and check that the store never panics, says what went
// wrong in its errors and its health, answers reads from the model
// meanwhile, recovers without a restart once the fault is cleared, and
// that Check passes and every write it acknowledged is there, then and
// after reopening. Mounting takes root or CAP_SYS_ADMIN; without it they
// skip, unless SPAMD_REQUIRE_E2E=1.

// faultOptions are the options of a store on a small tmpfs: a memtable
// of 1 MiB, so that Badger rotates and flushes within a test, a reserve
// to match, and looks often, so that the tests wait little.
func faultOptions(t *testing.T) Options {
	return Options{
		Logger:        faultLogger(t),
		MemTableBytes: 1 << 20,
		ReserveBytes:  16 << 20,
		CheckInterval: 20 * time.Millisecond,
		CloseTimeout:  5 * time.Second,
	}
}

// faultLogger logs into t's log until t ends, and drops what Badger's
// goroutines log after.
func faultLogger(t *testing.T) *slog.Logger {
	if t == nil {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	w := &guardedWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, nil))
}

type guardedWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *guardedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

// faultOp is message m of the fault tests, trained as spam or ham; its
// bag is fixed by m.
func faultOp(m int) store.Op {
	rng := rand.New(rand.NewPCG(uint64(m), 99))
	return storetest.Train(fmt.Sprint("fault ", m), []string{"spam", "ham"}[m%2], storetest.RandomBagOf(rng, 40+m%60, 20000))
}

// ledger records what a store acknowledged: the class of each message
// whose Apply returned it.
type ledger struct {
	mu    sync.Mutex
	acked map[int]string
}

func newLedger() *ledger { return &ledger{acked: map[int]string{}} }

func (l *ledger) record(first int, ops []store.Op, results []store.Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range results {
		l.acked[first+i] = ops[i].Class
	}
}

func (l *ledger) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// verify checks that every message acknowledged is there as its class,
// and that s passes Check.
func (l *ledger) verify(t *testing.T, s *Store, user string) {
	t.Helper()
	ctx := context.Background()
	l.mu.Lock()
	defer l.mu.Unlock()
	lost := 0
	for m, class := range l.acked {
		got, err := s.Seen(ctx, user, faultOp(m).Digest)
		if err != nil {
			t.Fatalf("Seen of message %d: %v", m, err)
		}
		if got != class {
			if lost++; lost <= 5 {
				t.Errorf("message %d acknowledged as %s, stored as %q", m, class, got)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged messages lost", lost, len(l.acked))
	}
	tot, err := s.Totals(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, c := range tot.Messages {
		n += c
	}
	if n != uint64(len(l.acked)) {
		t.Errorf("totals count %d messages, %d were acknowledged", n, len(l.acked))
	}
	if err := s.Check(ctx, user); err != nil {
		t.Errorf("Check: %v", err)
	}
}

// load trains messages into s in batches of eight, from message first
// on, until stop is closed, recording what s acknowledges. It counts the
// errors by kind; any error that is neither store.ErrReadOnly nor
// store.ErrFailed fails t.
type load struct {
	next             atomic.Int64
	readOnly, failed atomic.Int64
	done             chan struct{}
}

// stopper returns a channel and the function that closes it, once.
func stopper() (<-chan struct{}, func()) {
	ch := make(chan struct{})
	var once sync.Once
	return ch, func() { once.Do(func() { close(ch) }) }
}

func startLoad(t *testing.T, s *Store, user string, first int, l *ledger, stop <-chan struct{}) *load {
	ld := &load{done: make(chan struct{})}
	ld.next.Store(int64(first))
	go func() {
		defer close(ld.done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			m := int(ld.next.Load())
			ops := make([]store.Op, 8)
			for i := range ops {
				ops[i] = faultOp(m + i)
			}
			res, err := s.Apply(context.Background(), user, ops)
			l.record(m, ops, res)
			switch {
			case err == nil:
				ld.next.Add(int64(len(ops)))
			case errors.Is(err, store.ErrReadOnly):
				ld.readOnly.Add(1)
				ld.next.Add(int64(len(ops))) // the rest of the batch is not retried
				time.Sleep(time.Millisecond)
			case errors.Is(err, store.ErrFailed):
				ld.failed.Add(1)
				ld.next.Add(int64(len(ops)))
				time.Sleep(time.Millisecond)
			default:
				t.Errorf("Apply: an error that says neither read-only nor failed: %v", err)
				return
			}
		}
	}()
	return ld
}

// waitFor waits until s is in state, failing t with its health if it is
// not within a minute, a bound far beyond what any of this takes.
func waitFor(t *testing.T, s *Store, state store.State) store.Health {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		h := s.Health()
		if h.State == state {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("store still %s after a minute, not %s: %s", h.State, state, h.Reason)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitLoad waits until the load has made progress: n more messages
// acknowledged, or refused.
func waitAcked(t *testing.T, l *ledger, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for l.len() < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d messages acknowledged after a minute, want %d", l.len(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// readsAnswer checks that reads of the model answer while the store is
// degraded: every message acknowledged is there, and Lookup finds its
// tokens.
func readsAnswer(t *testing.T, s *Store, user string, l *ledger) {
	t.Helper()
	ctx := context.Background()
	l.mu.Lock()
	defer l.mu.Unlock()
	for m, class := range l.acked {
		got, err := s.Seen(ctx, user, faultOp(m).Digest)
		if err != nil || got != class {
			t.Fatalf("degraded store: Seen of message %d = %q, %v; want %s", m, got, err, class)
		}
		rows, err := s.Lookup(ctx, user, faultOp(m).Bag.Hashes())
		if err != nil {
			t.Fatalf("degraded store: Lookup: %v", err)
		}
		for i, r := range rows {
			if r == nil {
				t.Fatalf("degraded store: token %x of message %d not found", faultOp(m).Bag.Hashes()[i], m)
			}
		}
	}
	if _, err := s.Totals(ctx, user); err != nil {
		t.Fatalf("degraded store: Totals: %v", err)
	}
}

// TestFaultDiskBelowReserve fills the store's filesystem, under load,
// until its free space is below the reserve but not gone: writes must
// stop with store.ErrReadOnly before Badger writes into a full disk, and
// resume by themselves once the filler is removed.
func TestFaultDiskBelowReserve(t *testing.T) {
	mnt := fsfault.MountTmpfs(t, "64m", 0o700)
	dir := filepath.Join(mnt, "store")
	s := open(t, dir, faultOptions(t))
	defer s.Close()
	l := newLedger()
	stop, halt := stopper()
	ld := startLoad(t, s, "u", 0, l, stop)
	defer func() { halt(); <-ld.done }()
	waitAcked(t, l, 200)

	// Half the reserve left: room for what Badger flushes and compacts.
	filler := fsfault.Fill(t, mnt, 8<<20)
	h := waitFor(t, s, store.StateDegraded)
	if !strings.Contains(h.Reason, "below the reserve") {
		t.Errorf("degraded for %q, want the free space named", h.Reason)
	}
	// The loader writes one batch at a time: once one is refused, all
	// are, until the space is back. One that passed the look before the
	// disk filled may have been acknowledged after the state changed.
	for ld.readOnly.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	during := l.len()
	for ld.readOnly.Load() < 10 {
		time.Sleep(time.Millisecond)
	}
	readsAnswer(t, s, "u", l)
	if n := l.len(); n != during {
		t.Errorf("%d messages acknowledged while below the reserve", n-during)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitFor(t, s, store.StateOK)
	waitAcked(t, l, during+200)
	halt()
	<-ld.done

	h = s.Health()
	t.Logf("acknowledged %d messages, %d before the disk filled; %d batches refused read-only, %d failed; faults %v",
		l.len(), during, ld.readOnly.Load(), ld.failed.Load(), h.Faults)
	if ld.failed.Load() != 0 || h.Faults[FaultLowSpace] == 0 || h.Faults[FaultRefused] == 0 {
		t.Errorf("want writes refused for low space only: %d failed, faults %v", ld.failed.Load(), h.Faults)
	}
	l.verify(t, s, "u")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, faultOptions(t))
	l.verify(t, s, "u")
}

// fullEnv, set in the environment of a re-executed test binary, makes
// TestFaultDiskFull train into the store in that directory, then, once
// told the disk is full, try again, read, close and report.
const fullEnv = "SPAMD_BADGERSTORE_FULL"

// TestFaultDiskFull fills the store's filesystem to the last byte, which
// is what made Badger die of SIGBUS: a process training into it must go
// read-only and close without writing; an Open on the full disk must
// fail with a clear error or open read-only, never crash; and space
// given back must make the store writable without a restart.
func TestFaultDiskFull(t *testing.T) {
	if dir := os.Getenv(fullEnv); dir != "" {
		fullDiskChild(dir)
		return
	}
	mnt := fsfault.MountTmpfs(t, "64m", 0o700)
	dir := filepath.Join(mnt, "store")
	ctx := context.Background()
	l := newLedger()

	// A process trains, the disk fills, the process tries to write and
	// to close, and exits (as a daemon told to stop would).
	cmd := exec.Command(os.Args[0], "-test.run=^TestFaultDiskFull$")
	cmd.Env = append(os.Environ(), fullEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	report := map[string]string{}
	for sc.Scan() {
		line := sc.Text()
		if line == "ready" {
			break
		}
		var first, n int
		if _, err := fmt.Sscanf(line, "acked %d %d", &first, &n); err == nil {
			ops := make([]store.Op, n)
			for i := range ops {
				ops[i] = faultOp(first + i)
			}
			l.record(first, ops, make([]store.Result, n))
		}
	}
	filler := fsfault.Fill(t, mnt, 0)
	t.Logf("filled: %d bytes free", freeSpace(mnt))
	if _, err := io.WriteString(stdin, "full\n"); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ": ")
		report[k] = v
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the process training into the full disk died: %v (it reported %q)", err, report)
	}
	t.Logf("the process on the full disk reported %q", report)
	if !strings.HasPrefix(report["apply"], "read-only") {
		t.Errorf("Apply on the full disk: %s", report["apply"])
	}
	if !strings.HasPrefix(report["health"], "degraded") {
		t.Errorf("health on the full disk: %s", report["health"])
	}
	if report["seen"] != "spam <nil>" {
		t.Errorf("Seen of a message trained before, on the full disk: %s", report["seen"])
	}
	if !strings.Contains(report["close"], "left open") {
		t.Errorf("Close on the full disk: %s", report["close"])
	}

	// A restart on the full disk: the write-ahead log the process left
	// needs replaying, which takes writing, so Open refuses.
	_, err = Open(ctx, dir, faultOptions(t))
	if !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("Open on the full disk with a log to replay: %v, want store.ErrReadOnly", err)
	}
	t.Logf("Open on the full disk: %v", err)

	// Space back, it opens and has everything.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir, faultOptions(t))
	if h := s.Health(); h.State != store.StateOK {
		t.Fatalf("opened with space: %s: %s", h.State, h.Reason)
	}
	l.verify(t, s, "u")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Closed cleanly, then the disk fills: Open opens read-only, reads
	// answer, writes are refused; space back, the store reopens itself
	// for writing.
	filler = fsfault.Fill(t, mnt, 0)
	s = open(t, dir, faultOptions(t))
	defer s.Close()
	h := s.Health()
	if h.State != store.StateDegraded || !strings.Contains(h.Reason, "read-only") {
		t.Fatalf("opened on the full disk: %s: %s", h.State, h.Reason)
	}
	t.Logf("opened on the full disk: %s: %s", h.State, h.Reason)
	readsAnswer(t, s, "u", l)
	if _, err := s.Apply(ctx, "u", []store.Op{faultOp(10000)}); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("Apply on the full disk: %v, want store.ErrReadOnly", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	h = waitFor(t, s, store.StateOK)
	if h.Faults[FaultReopen] != 1 {
		t.Errorf("faults %v, want one reopen for writing", h.Faults)
	}
	res, err := s.Apply(ctx, "u", []store.Op{faultOp(10000)})
	if err != nil {
		t.Fatalf("Apply with space back: %v", err)
	}
	l.record(10000, []store.Op{faultOp(10000)}, res)
	l.verify(t, s, "u")
}

// fullDiskChild is the process of TestFaultDiskFull.
func fullDiskChild(dir string) {
	ctx := context.Background()
	die := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	s, err := Open(ctx, dir, faultOptions(nil))
	if err != nil {
		die(err)
	}
	// Less than a memtable, so that no flush is under way when the disk
	// fills: a flush into a full disk is Badger's own SIGBUS, which the
	// reserve is there to prevent and filling the disk at once skips.
	for b := range 10 {
		ops := make([]store.Op, 8)
		for i := range ops {
			ops[i] = faultOp(8*b + i)
		}
		if _, err := s.Apply(ctx, "u", ops); err != nil {
			die(err)
		}
		fmt.Printf("acked %d %d\n", 8*b, len(ops))
	}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		die(err)
	}
	// The store sees the disk full by itself, without a write: a disk
	// filled faster than it looks is what the reserve is for.
	for deadline := time.Now().Add(time.Minute); s.Health().State == store.StateOK; {
		if time.Now().After(deadline) {
			die(errors.New("the store did not see the disk full within a minute"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	_, err = s.Apply(ctx, "u", []store.Op{faultOp(5000)})
	if errors.Is(err, store.ErrReadOnly) {
		fmt.Printf("apply: read-only: %v\n", err)
	} else {
		fmt.Printf("apply: %v\n", err)
	}
	h := s.Health()
	fmt.Printf("health: %s: %s\n", h.State, h.Reason)
	class, err := s.Seen(ctx, "u", faultOp(0).Digest)
	fmt.Printf("seen: %s %v\n", class, err)
	fmt.Printf("close: %v\n", s.Close())
	os.Exit(0)
}

// makeUnwritable makes dir, on the tmpfs mnt, unwritable. Tests run as
// root, whom permissions do not stop. Remounting the filesystem
// read-only is refused while Badger has files open for writing (the
// kernel's EBUSY), so the directory is made immutable instead: no file
// can be created in it, which is what Badger's next memtable and table
// need, while the files open stay writable, as with a directory whose
// permissions were taken away. It returns what clears the fault.
func makeUnwritable(t *testing.T, mnt, dir string) (clear func()) {
	t.Helper()
	err := unix.Mount("", mnt, "", unix.MS_REMOUNT|unix.MS_RDONLY, "")
	if err == nil {
		t.Log("remounted read-only")
		return func() {
			if err := unix.Mount("", mnt, "", unix.MS_REMOUNT, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("remounting read-only: %v; making the directory immutable instead", err)
	if err := fsfault.SetImmutable(dir, true); err != nil {
		fsfault.SkipOrFail(t, fmt.Sprintf("cannot make a directory unwritable: %v", err))
	}
	cleared := false
	t.Cleanup(func() {
		if !cleared {
			_ = fsfault.SetImmutable(dir, false)
		}
	})
	return func() {
		cleared = true
		if err := fsfault.SetImmutable(dir, false); err != nil {
			t.Fatal(err)
		}
	}
}

// readers looks up messages of the ledger until stop is closed, and
// returns counts of what they got: answers, and errors, which must say
// the store failed (a degraded store answers every read).
func startReaders(t *testing.T, s *Store, user string, l *ledger, stop <-chan struct{}) (answered, refused *atomic.Int64, done <-chan struct{}) {
	answered, refused = new(atomic.Int64), new(atomic.Int64)
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		ctx := context.Background()
		for m := 0; ; m++ {
			select {
			case <-stop:
				return
			default:
			}
			k := m % max(l.len(), 1)
			_, err1 := s.Lookup(ctx, user, faultOp(k).Bag.Hashes())
			_, err2 := s.Seen(ctx, user, faultOp(k).Digest)
			for _, err := range []error{err1, err2} {
				switch {
				case err == nil:
					answered.Add(1)
				case errors.Is(err, store.ErrFailed):
					refused.Add(1)
				default:
					t.Errorf("read: %v", err)
					return
				}
			}
		}
	}()
	return answered, refused, ch
}

// TestFaultUnwritableDir makes the store's directory unwritable under
// load and readers, then writable again.
func TestFaultUnwritableDir(t *testing.T) {
	// The store looks at the directory before writes, finds it
	// unwritable and goes read-only before Badger needs a new file.
	t.Run("looked at", func(t *testing.T) {
		testUnwritable(t, false)
	})
	// The store does not look while it is ok, so that Badger meets the
	// fault itself: it cannot create its next memtable, and leaves it
	// nil, after which every read of Badger panics. The store must turn
	// that into errors, fail, and reopen Badger once it can.
	t.Run("met by Badger", func(t *testing.T) {
		testUnwritable(t, true)
	})
	// A store closed while its directory cannot be written: Badger
	// retries flushing its memtable forever, and Close must not wait for
	// it. Nothing acknowledged may be lost.
	t.Run("closed", func(t *testing.T) {
		testCloseUnwritable(t)
	})
}

// unwritableOptions are faultOptions for a store on a directory made
// unwritable. Where the store is to see the fault first, memtables of
// the default size make it unlikely that Badger needs a new one between
// the look and the write; where Badger is to meet it, small ones make
// sure it does soon.
func unwritableOptions(t *testing.T, blind bool) Options {
	o := faultOptions(t)
	if !blind {
		o.MemTableBytes = 16 << 20
		o.ReserveBytes = 64 << 20
		// A look before nearly every transaction.
		o.CheckInterval = time.Millisecond
	}
	return o
}

func testUnwritable(t *testing.T, blind bool) {
	mnt := fsfault.MountTmpfs(t, "256m", 0o700)
	dir := filepath.Join(mnt, "store")
	o := unwritableOptions(t, blind)
	s := open(t, dir, o)
	defer s.Close()
	s.blind.Store(blind)
	l := newLedger()
	stop, halt := stopper()
	defer halt()
	ld := startLoad(t, s, "u", 0, l, stop)
	answered, refused, rdone := startReaders(t, s, "u", l, stop)
	waitAcked(t, l, 200)

	clear := makeUnwritable(t, mnt, dir)
	before := l.len()
	want := store.StateDegraded
	if blind {
		want = store.StateFailed
	}
	h := waitFor(t, s, want)
	t.Logf("after %d messages: %s: %s", before, h.State, h.Reason)
	// Under load for a while with the fault on.
	for ld.readOnly.Load()+ld.failed.Load() < 50 {
		time.Sleep(time.Millisecond)
	}
	if !blind {
		readsAnswer(t, s, "u", l)
	}
	faulty := l.len()
	clear()
	waitFor(t, s, store.StateOK)
	waitAcked(t, l, faulty+200)
	halt()
	<-ld.done
	<-rdone

	h = s.Health()
	t.Logf("acknowledged %d messages, %d before the fault, %d during it; %d batches refused read-only, %d failed; reads: %d answered, %d refused; faults %v",
		l.len(), before, faulty-before, ld.readOnly.Load(), ld.failed.Load(), answered.Load(), refused.Load(), h.Faults)
	if blind && (h.Faults[FaultReopen] == 0 || h.Faults[FaultWrite] == 0) {
		t.Errorf("faults %v, want a failed write and a reopen", h.Faults)
	}
	if !blind && (h.Faults[FaultUnwritable] == 0 || ld.failed.Load() != 0 || refused.Load() != 0) {
		t.Errorf("faults %v, %d batches failed, %d reads refused; want writes refused for an unwritable directory only", h.Faults, ld.failed.Load(), refused.Load())
	}
	l.verify(t, s, "u")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, o)
	l.verify(t, s, "u")
}

func testCloseUnwritable(t *testing.T) {
	mnt := fsfault.MountTmpfs(t, "256m", 0o700)
	dir := filepath.Join(mnt, "store")
	o := unwritableOptions(t, false)
	o.CloseTimeout = 2 * time.Second
	s := open(t, dir, o)
	l := newLedger()
	for m := 0; m < 400; m += 8 {
		ops := make([]store.Op, 8)
		for i := range ops {
			ops[i] = faultOp(m + i)
		}
		l.record(m, ops, train(t, s, "u", ops...))
	}
	clear := makeUnwritable(t, mnt, dir)
	waitFor(t, s, store.StateDegraded)
	err := s.Close()
	t.Logf("Close: %v", err)
	if err == nil || !strings.Contains(err.Error(), "did not finish closing") {
		t.Fatalf("Close of a store whose memtable cannot be flushed: %v", err)
	}
	if n := s.Health().Faults[FaultClose]; n != 1 {
		t.Errorf("%d incomplete closes counted", n)
	}
	// Badger finishes closing once it can flush, and lets go of the
	// directory; until then, it holds its lock.
	clear()
	deadline := time.Now().Add(time.Minute)
	for {
		s, err = Open(context.Background(), dir, o)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrLocked) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	defer s.Close()
	l.verify(t, s, "u")
}

// TestFaultDirRemoved removes the store's directory under load. Badger
// still holds its files open; the store must stop writing, copy the
// model out of them into a new directory at its path, and go on there.
func TestFaultDirRemoved(t *testing.T) {
	mnt := fsfault.MountTmpfs(t, "256m", 0o700)
	dir := filepath.Join(mnt, "store")
	o := faultOptions(t)
	// A memtable big enough that Badger does not need a new one before
	// the store sees the directory gone, as with the default size.
	o.MemTableBytes = 16 << 20
	o.ReserveBytes = 32 << 20
	s := open(t, dir, o)
	defer s.Close()
	l := newLedger()
	stop := make(chan struct{})
	ld := startLoad(t, s, "u", 0, l, stop)
	answered, refused, rdone := startReaders(t, s, "u", l, stop)
	waitAcked(t, l, 300)

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	before := l.len()
	deadline := time.Now().Add(time.Minute)
	for s.Health().Faults[FaultReopen] == 0 {
		if time.Now().After(deadline) {
			h := s.Health()
			t.Fatalf("not salvaged after a minute: %s: %s", h.State, h.Reason)
		}
		time.Sleep(5 * time.Millisecond)
	}
	waitFor(t, s, store.StateOK)
	waitAcked(t, l, before+200)
	close(stop)
	<-ld.done
	<-rdone

	h := s.Health()
	t.Logf("acknowledged %d messages, %d before the removal; %d batches refused read-only, %d failed; reads: %d answered, %d refused; faults %v",
		l.len(), before, ld.readOnly.Load(), ld.failed.Load(), answered.Load(), refused.Load(), h.Faults)
	if h.Faults[FaultDirRemoved] == 0 || h.Faults[FaultSalvage] != 1 {
		t.Errorf("faults %v, want the removal seen and one salvage", h.Faults)
	}
	if _, err := os.Stat(dir + salvageSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the salvage directory is left: %v", err)
	}
	l.verify(t, s, "u")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, o)
	l.verify(t, s, "u")
}

// TestFaultKilledDuringLoad kills a process bulk-loading into a store on
// its own filesystem with SIGKILL, as TestCrash does, and reopens it: the
// store must be ok, consistent, and hold every batch the process saw
// acknowledged.
func TestFaultKilledDuringLoad(t *testing.T) {
	// Above the default reserve: the child opens the store with defaults.
	mnt := fsfault.MountTmpfs(t, "400m", 0o700)
	dir := filepath.Join(mnt, "store")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	ctx := context.Background()
	for round := range 2 {
		last := crashRound(t, dir, round, rng)
		o := faultOptions(t)
		// Badger replays a log into a memtable of the size it is opened
		// with, and ends the process if it does not fit (Badger issue
		// #2002): as large as the child's.
		o.MemTableBytes = 2 << 20
		s := open(t, dir, o)
		if h := s.Health(); h.State != store.StateOK {
			t.Fatalf("round %d: after the kill: %s: %s", round, h.State, h.Reason)
		}
		users, err := s.Users(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// TestCrash recomputes every row from the seen records too.
		for _, u := range users {
			if err := s.Check(ctx, u); err != nil {
				t.Errorf("round %d: %v", round, err)
			}
		}
		if last.batch >= 0 {
			class, err := s.Seen(ctx, last.user, storetest.D(marker(round, last.batch)))
			if err != nil || class != "spam" {
				t.Errorf("round %d: batch %d for %q returned but its marker is %q, %v", round, last.batch, last.user, class, err)
			}
		}
		t.Logf("round %d: killed after batch %d", round, last.batch)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFaultStalledCommitSimulated simulates, at the write call, a
// commit that Badger never finishes, as when its writer waits for a flush
// that cannot happen: Apply must give up after WriteTimeout with
// store.ErrFailed, the store must fail, and reopen Badger, and nothing
// acknowledged may be lost. The hang cannot be produced for real without
// a fault that first ends in SIGBUS or in Badger's own errors.
func TestFaultStalledCommitSimulated(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	o := faultOptions(t)
	o.ReserveBytes = -1
	o.WriteTimeout = 200 * time.Millisecond
	s := open(t, dir, o)
	defer s.Close()
	l := newLedger()
	ops := []store.Op{faultOp(0), faultOp(1)}
	l.record(0, ops, train(t, s, "u", ops...))
	s.commitErr = func(int) error { return errCommitHangs }
	res, err := s.Apply(ctx, "u", []store.Op{faultOp(2)})
	s.commitErr = nil
	t.Logf("Apply: %v", err)
	if !errors.Is(err, store.ErrFailed) || len(res) != 0 {
		t.Fatalf("Apply of a commit that hangs: %d results, %v; want none and store.ErrFailed", len(res), err)
	}
	if h := s.Health(); h.State != store.StateFailed || h.Faults[FaultStall] != 1 {
		t.Fatalf("health %s (%s), faults %v; want failed for a stall", h.State, h.Reason, h.Faults)
	}
	h := waitFor(t, s, store.StateOK)
	if h.Faults[FaultReopen] != 1 {
		t.Errorf("faults %v, want one reopen", h.Faults)
	}
	ops = []store.Op{faultOp(2), faultOp(3)}
	l.record(2, ops, train(t, s, "u", ops...))
	l.verify(t, s, "u")
}

// TestFaultDiskFullDuringRestore fills the disk below the reserve while a
// model is being restored: the restore must stop with store.ErrReadOnly,
// the half-written model must stay hidden (no model of the user), a
// delete must be refused without touching the other user, and once space
// is back the store must drop what was half written by itself, after
// which the restore succeeds. A prune is refused like the delete.
func TestFaultDiskFullDuringRestore(t *testing.T) {
	mnt := fsfault.MountTmpfs(t, "64m", 0o700)
	dir := filepath.Join(mnt, "store")
	ctx := context.Background()
	s := open(t, dir, faultOptions(t))
	defer s.Close()
	l := newLedger()
	ops := []store.Op{faultOp(0), faultOp(1), faultOp(2)}
	l.record(0, ops, train(t, s, "u", ops...))

	const rows = 20000
	records := func(fillAt int, filler *string) func() (store.Record, error) {
		i := 0
		return func() (store.Record, error) {
			defer func() { i++ }()
			if i == fillAt {
				*filler = fsfault.Fill(t, mnt, 8<<20)
			}
			switch {
			case i == 0:
				return store.Record{Classes: []string{"spam", "ham"}}, nil
			case i <= rows:
				return store.Record{Hash: bow.Hash(i), Counts: store.Counts{1, 0}}, nil
			case i == rows+1:
				return store.Record{Digest: storetest.D("restored"), Class: "spam"}, nil
			}
			return store.Record{}, io.EOF
		}
	}
	var filler string
	err := s.Restore(ctx, "r", records(5000, &filler))
	t.Logf("Restore: %v", err)
	if !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("Restore into a disk filled below the reserve: %v, want store.ErrReadOnly", err)
	}
	if tot, err := s.Totals(ctx, "r"); err != nil || len(tot.Messages) > 0 && tot.Messages[0]+tot.Messages[1] != 0 || tot.Vocabulary != 0 {
		t.Errorf("half-restored model visible: %+v, %v", tot, err)
	}
	if rows, err := s.Lookup(ctx, "r", []bow.Hash{1, 2, 3}); err != nil || rows[0] != nil {
		t.Errorf("half-restored token visible: %v, %v", rows, err)
	}
	if err := s.DeleteUser(ctx, "u"); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("DeleteUser below the reserve: %v, want store.ErrReadOnly", err)
	}
	if res, err := s.Prune(ctx, "u", store.PruneRule{MaxTokens: 1, SeenBefore: 1 << 30}); !errors.Is(err, store.ErrReadOnly) || res != (store.PruneResult{}) {
		t.Errorf("Prune below the reserve: %+v, %v; want store.ErrReadOnly", res, err)
	}
	readsAnswer(t, s, "u", l)

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitFor(t, s, store.StateOK)
	if err := s.Check(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if err := s.Restore(ctx, "r", records(-1, nil)); err != nil {
		t.Fatalf("Restore with space back: %v", err)
	}
	tot, err := s.Totals(ctx, "r")
	if err != nil || tot.Vocabulary != rows || tot.Messages[0] != 1 {
		t.Errorf("restored model: %+v, %v", tot, err)
	}
	for _, u := range []string{"r", "u"} {
		if err := s.Check(ctx, u); err != nil {
			t.Error(err)
		}
	}
	l.verify(t, s, "u")
	t.Logf("faults %v", s.Health().Faults)
}

// fillingDump is a store whose Dump calls fill at the at-th token row it
// hands out.
type fillingDump struct {
	store.Store
	at   int
	fill func()
	rows int
}

func (f *fillingDump) Dump(ctx context.Context, user string, fn func(store.Record) error) error {
	return f.Store.Dump(ctx, user, func(r store.Record) error {
		if r.Counts != nil {
			if f.rows++; f.rows == f.at && f.fill != nil {
				f.fill()
				f.fill = nil
			}
		}
		return fn(r)
	})
}

// TestFaultDiskFullDuringBulkLoad fills the disk while Load writes the
// sealed rows, to the reserve and a little more, which the rows would
// take: the load stops at the reserve, saying so, and leaves the store
// empty, with no sealed file or part of one, then and after reopening;
// with space back, the load succeeds.
func TestFaultDiskFullDuringBulkLoad(t *testing.T) {
	mnt := fsfault.MountTmpfs(t, "64m", 0o700)
	dir := filepath.Join(mnt, "store")
	ctx := context.Background()
	o := faultOptions(t)
	s := open(t, dir, o)
	defer s.Close()
	users := []string{"", "alice"}
	var filler string
	src := &fillingDump{Store: memoryModel(t, users, 400, 4), at: 2000, fill: func() { filler = fsfault.Fill(t, mnt, o.ReserveBytes+64<<10) }}
	err := s.Load(ctx, src)
	t.Logf("Load: %v", err)
	if !errors.Is(err, store.ErrReadOnly) || filler == "" {
		t.Fatalf("Load into a disk that filled while it wrote: %v, filled: %v; want store.ErrReadOnly", err, filler != "")
	}
	empty := func(when string) {
		t.Helper()
		if got, err := s.Users(ctx); err != nil || len(got) != 0 {
			t.Errorf("%s: the store holds %q (%v)", when, got, err)
		}
		for _, name := range []string{sealedName, sealedTemp} {
			if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: %s is there: %v", when, name, err)
			}
		}
	}
	empty("after the failed load")
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, o)
	empty("after reopening")
	want := memoryModel(t, users, 400, 4)
	if err := s.Load(ctx, memoryModel(t, users, 400, 4)); err != nil {
		t.Fatalf("Load with space back: %v", err)
	}
	for _, u := range users {
		if dumpText(t, s, u) != dumpText(t, want, u) {
			t.Errorf("model %q differs from what was loaded", u)
		}
		if err := s.Check(ctx, u); err != nil {
			t.Error(err)
		}
	}
}

// earlierOnTmpfs copies earlierLayout into a small tmpfs mounted for t,
// and returns the mount and the store's directory.
func earlierOnTmpfs(t *testing.T) (mnt, dir string) {
	t.Helper()
	mnt = fsfault.MountTmpfs(t, "64m", 0o700)
	dir = filepath.Join(mnt, "store")
	if err := os.CopyFS(dir, os.DirFS(earlierLayout)); err != nil {
		t.Fatal(err)
	}
	return mnt, dir
}

// TestFaultEarlierSealedLayout opens, on a disk below the store's
// reserve, a store of schema 5 whose sealed file is of the earlier
// layout: it opens degraded and read-only, rewrites the file in memory
// and answers from it, leaving the disk as it was; with the space back,
// the next open rewrites the file and converts the store.
func TestFaultEarlierSealedLayout(t *testing.T) {
	rows := earlierRows(t)
	mnt, dir := earlierOnTmpfs(t)
	// layout returns the sealed file's name and what sealed.Open says
	// of it.
	layout := func() (string, error) {
		for _, name := range []string{sealedName, sealedV2Name} {
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err == nil {
				_, err = sealed.Open(data)
				return name, err
			}
		}
		t.Fatal("no sealed file")
		return "", nil
	}
	filler := fsfault.Fill(t, mnt, 8<<20)
	s := open(t, dir, faultOptions(t))
	if h := s.Health(); h.State != store.StateDegraded {
		t.Errorf("below the reserve: %v, want degraded", h.State)
	}
	readsRows(t, s, rows)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if name, err := layout(); name != sealedV2Name || !errors.Is(err, sealed.ErrOldLayout) {
		t.Fatalf("below the reserve, the file on disk: %s, %v; want the earlier one", name, err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	// Left as the earlier build wrote it, which can still open it.
	if _, schema := kinds(t, dir); schema != 5 {
		t.Errorf("schema %d after the open below the reserve, want 5", schema)
	}
	s = open(t, dir, faultOptions(t))
	readsRows(t, s, rows)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if name, err := layout(); name != sealedName || err != nil {
		t.Fatalf("the file rewritten: %s, %v", name, err)
	}
	if _, err := os.Stat(filepath.Join(dir, sealedV2Name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the earlier file is still there: %v", err)
	}
}

// TestFaultEarlierSealedNoRoom opens a store whose sealed file is of the
// earlier layout on a disk with room for Badger but not for the file
// rewritten above the reserve: the rewrite goes to memory, the store
// answers every row, and the earlier file stays, to be rewritten by the
// next open with room.
func TestFaultEarlierSealedNoRoom(t *testing.T) {
	rows := earlierRows(t)
	mnt, dir := earlierOnTmpfs(t)
	o := faultOptions(t)
	filler := fsfault.Fill(t, mnt, o.ReserveBytes+32<<10)
	s := open(t, dir, o)
	readsRows(t, s, rows)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, sealedV2Name)); err != nil {
		t.Fatalf("the earlier file after a rewrite in memory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, sealedName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file of this layout after a rewrite in memory: %v", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, o)
	readsRows(t, s, rows)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, sealedV2Name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the earlier file after the rewrite: %v", err)
	}
}
