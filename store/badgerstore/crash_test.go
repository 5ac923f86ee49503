package badgerstore

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/storetest"
)

// crashEnv, set in the environment of a re-executed test binary, makes
// TestCrash train into the store in that directory until it is killed.
const crashEnv = "SPAMD_BADGERSTORE_CRASH"

// killsEnv names the variable that sets how many kills the crash tests
// make; CI's few rounds find a gross fault, a long run by hand (60 and
// more) the rarer moments.
const killsEnv = "SPAMD_CRASH_KILLS"

// kills returns the number of kills a crash test makes: $SPAMD_CRASH_KILLS,
// else def.
func kills(t *testing.T, def int) int {
	t.Helper()
	v := os.Getenv(killsEnv)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a number of kills", killsEnv, v)
	}
	return n
}

// TestCrash kills a process training into a store, and compacting it now
// and then, with SIGKILL at random moments, reopens the store and checks
// that every message is counted whole or not at all, for every user, and
// that every Apply the process saw return is there. Each round trains on
// top of what the previous rounds left, so recovery from one crash is
// itself crashed into.
//
// Whole means the counts and the weights: since each message's bag and
// steps are fixed by its number and class, the rows of all tokens follow
// from the seen records alone, and are compared with them.
func TestCrash(t *testing.T) {
	if v := os.Getenv(crashEnv); v != "" {
		crashChild(v)
		return
	}
	if testing.Short() {
		t.Skip("kills child processes for several seconds")
	}
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for round := range kills(t, 6) {
		last := crashRound(t, dir, round, rng)
		s := open(t, dir, Options{Logger: testLogger(t)})
		ctx := context.Background()
		users, err := s.Users(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range users {
			if err := s.Check(ctx, u); err != nil {
				t.Errorf("round %d, after the kill: %v", round, err)
			}
			checkRows(t, s, u)
		}
		if last.batch >= 0 {
			class, err := s.Seen(ctx, last.user, storetest.D(marker(round, last.batch)))
			if err != nil || class != "spam" {
				t.Errorf("round %d: batch %d for %q returned but its marker is %q, %v", round, last.batch, last.user, class, err)
			}
		}
		sealedUsers := 0
		for _, u := range users {
			if s.section(u) != nil {
				sealedUsers++
			}
		}
		t.Logf("round %d: killed after batch %d; users %q, %d of them sealed", round, last.batch, users, sealedUsers)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

type progress struct {
	batch int
	user  string
}

// crashRound starts a child training into dir and kills it, either after
// it reported a random number of batches and a random pause, or at a
// random moment from its start, during Open and replay included. It
// returns the last batch the child reported, -1 if none.
func crashRound(t *testing.T, dir string, round int, rng *rand.Rand) progress {
	cmd, out := startChild(t, "TestCrash", fmt.Sprintf("%s=%d:%d:%s", crashEnv, round, rng.Uint64(), dir))
	lines := make(chan progress)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var p progress
			if _, err := fmt.Sscanf(sc.Text(), "committed %d %q", &p.batch, &p.user); err == nil {
				lines <- p
			}
		}
	}()
	last := progress{batch: -1}
	var timer <-chan time.Time
	wantBatches := 1 + rng.IntN(40)
	if round%3 == 2 {
		timer = time.After(time.Duration(rng.IntN(300)) * time.Millisecond)
	}
	timeout := time.After(2 * time.Minute)
wait:
	for {
		select {
		case p, ok := <-lines:
			if !ok {
				t.Fatalf("round %d: the child ended by itself", round)
			}
			last = p
			if timer == nil && p.batch+1 >= wantBatches {
				timer = time.After(time.Duration(rng.IntN(20000)) * time.Microsecond)
			}
		case <-timer:
			break wait
		case <-timeout:
			t.Fatalf("round %d: no progress from the child", round)
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// What the child printed before it died may still be in the pipe.
	for p := range lines {
		last = p
	}
	if err := cmd.Wait(); err == nil {
		t.Fatalf("round %d: the child survived", round)
	}
	return last
}

func marker(round, batch int) string { return fmt.Sprintf("marker %d %d", round, batch) }

// Messages are drawn from a pool shared by all rounds, with a bag fixed by
// their number and steps fixed by their number and class, so that later
// rounds relabel and forget what earlier ones trained, with the right bag,
// and the state of a model follows from its seen records.
const (
	crashPool  = 2000
	crashVocab = 50000
)

var crashClasses = []string{"spam", "ham", "unsure"}

func crashBag(m int) bow.Bag {
	return splitBag(storetest.RandomBagOf(rand.New(rand.NewPCG(uint64(m), 2)), 20+m%280, crashVocab))
}

func crashSteps(m int, class string) []store.Step {
	rng := rand.New(rand.NewPCG(uint64(m), uint64(3+slices.Index(crashClasses, class))))
	var steps []store.Step
	for _, c := range crashClasses {
		if rng.IntN(3) > 0 {
			steps = append(steps, store.Step{Class: c, Head: rng.Int64N(1<<20) - 1<<19, Body: rng.Int64N(1<<20) - 1<<19})
		}
	}
	return steps
}

// checkRows recomputes every token's row of user from the seen records of
// the messages of the pool, and compares it with what s has.
func checkRows(t *testing.T, s *Store, user string) {
	t.Helper()
	ctx := context.Background()
	tot, err := s.Totals(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	want := map[bow.Hash][]uint64{}
	for m := range crashPool {
		bag := crashBag(m)
		class, err := s.Seen(ctx, user, storetest.D(strconv.Itoa(m)))
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range bag.Hashes() {
			if want[h] == nil {
				want[h] = make([]uint64, 2*len(tot.Classes))
			}
		}
		if class == "" {
			continue
		}
		for i, h := range bag.Hashes() {
			n := bag.Counts()[i]
			want[h][2*tot.Index(class)] += uint64(n)
			for _, st := range crashSteps(m, class) {
				d := st.Body
				if i < bag.Head() {
					d = st.Head
				}
				want[h][2*tot.Index(st.Class)+1] += uint64(d * int64(n))
			}
		}
	}
	hashes := slices.Collect(maps.Keys(want))
	got, err := s.Lookup(ctx, user, hashes)
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for i, h := range hashes {
		w := want[h]
		if !slices.ContainsFunc(w, func(v uint64) bool { return v != 0 }) {
			w = nil
		}
		if !slices.Equal(got[i], w) {
			if bad++; bad <= 5 {
				t.Errorf("user %q token %x: row %v, the seen records make it %v", user, h, got[i], w)
			}
		}
	}
	if bad > 5 {
		t.Errorf("user %q: %d rows wrong", user, bad)
	}
}

// crashChild trains batches into the store in the directory arg names, and
// prints a line after each Apply returns, until it is killed.
func crashChild(arg string) {
	fields := strings.SplitN(arg, ":", 3)
	if len(fields) != 3 {
		fmt.Fprintf(os.Stderr, "bad %s=%q\n", crashEnv, arg)
		os.Exit(2)
	}
	round, _ := strconv.Atoi(fields[0])
	seed, _ := strconv.ParseUint(fields[1], 10, 64)
	// A small memtable makes flushes, compactions and split Applies
	// frequent, so that kills land in them too.
	s, err := Open(context.Background(), fields[2], Options{MemTableBytes: 2 << 20, GCInterval: 100 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	users := []string{"", "alice", "bob"}
	classes := []string{"spam", "ham", "spam", "ham", "unsure", ""}
	bags := map[int]bow.Bag{}
	deadline := time.Now().Add(time.Minute)
	for batch := 0; time.Now().Before(deadline); batch++ {
		ops := make([]store.Op, 1+rng.IntN(60))
		for i := range ops[1:] {
			m := rng.IntN(crashPool)
			if _, ok := bags[m]; !ok {
				bags[m] = crashBag(m)
			}
			class := classes[rng.IntN(len(classes))]
			ops[i+1] = store.Op{Digest: storetest.D(strconv.Itoa(m)), Class: class, Bag: bags[m], Steps: crashSteps(m, class)}
		}
		// The marker has no features, so that the rows follow from the
		// messages of the pool alone.
		ops[0] = storetest.Train(marker(round, batch), "spam", nil)
		user := users[rng.IntN(len(users))]
		if _, err := s.Apply(context.Background(), user, ops); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Printf("committed %d %q\n", batch, user)
		// Now and then a compaction, which folds the rows into the
		// sealed file and drops them from Badger, so that kills land in
		// it too.
		if rng.IntN(10) == 0 {
			if _, err := s.Compact(context.Background()); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
		}
	}
	os.Exit(3)
}

// childOpen is the work of a crash test's re-executed child that only
// opens the store in dir with o, converting or rewriting what the open
// finds, for the parent to kill at a random moment; it says "opened" once
// the open is done.
func childOpen(dir string, o Options) {
	s, err := Open(context.Background(), dir, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("opened")
	s.Close()
	os.Exit(0)
}

// timedOrKilled runs test's child mode with env, which prints start,
// then each of ends as it gets there. With took 0, it lets the child
// finish, and returns how long the child took from start to the last of
// ends; otherwise it kills the child at a random moment within 5/4 of
// took, so that kills land anywhere in the work, however slow the
// machine (the race detector makes it thirty times slower), and returns
// took. It waits for the child either way.
func timedOrKilled(t *testing.T, test, env string, rng *rand.Rand, took time.Duration, start string, ends ...string) time.Duration {
	t.Helper()
	cmd, out := startChild(t, test, env)
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != start {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the child did not print %q", start)
	}
	if took == 0 {
		began := time.Now()
		for _, end := range ends {
			if !sc.Scan() || sc.Text() != end {
				t.Fatalf("the child did not get to %q", end)
			}
		}
		took = time.Since(began)
	} else {
		time.Sleep(time.Duration(rng.Int64N(int64(took) * 5 / 4)))
		cmd.Process.Kill()
	}
	for sc.Scan() {
	}
	cmd.Wait()
	return took
}

// startChild runs this test binary's test named test in a child process
// with env added to its environment, and returns it with its standard
// output.
func startChild(t *testing.T, test, env string) (*exec.Cmd, io.ReadCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, out
}
