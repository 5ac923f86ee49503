package badgerstore

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
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

// TestCrash kills a process training into a store with SIGKILL at random
// moments, reopens the store and checks that every message is counted
// whole or not at all, for every user, and that every Apply the process
// saw return is there. Each round trains on top of what the previous
// rounds left, so recovery from one crash is itself crashed into.
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
	for round := range 6 {
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
		}
		if last.batch >= 0 {
			class, err := s.Seen(ctx, last.user, storetest.D(marker(round, last.batch)))
			if err != nil || class != "spam" {
				t.Errorf("round %d: batch %d for %q returned but its marker is %q, %v", round, last.batch, last.user, class, err)
			}
		}
		t.Logf("round %d: killed after batch %d; users %q", round, last.batch, users)
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
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrash$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d:%d:%s", crashEnv, round, rng.Uint64(), dir))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
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
	// Messages are drawn from a pool shared by all rounds, with a bag
	// fixed by their number, so that later rounds relabel and forget what
	// earlier ones trained, with the right bag.
	const pool = 2000
	bags := map[int]map[bow.Hash]uint32{}
	deadline := time.Now().Add(time.Minute)
	for batch := 0; time.Now().Before(deadline); batch++ {
		ops := make([]store.Op, 1+rng.IntN(60))
		for i := range ops[1:] {
			m := rng.IntN(pool)
			if bags[m] == nil {
				bags[m] = storetest.RandomBagOf(rand.New(rand.NewPCG(uint64(m), 2)), 20+m%280, 50000)
			}
			ops[i+1] = store.Op{Digest: storetest.D(strconv.Itoa(m)), Class: classes[rng.IntN(len(classes))], Bag: bags[m]}
		}
		ops[0] = storetest.Train(marker(round, batch), "spam", map[bow.Hash]uint32{bow.Hash(batch): 1})
		user := users[rng.IntN(len(users))]
		if _, err := s.Apply(context.Background(), user, ops); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Printf("committed %d %q\n", batch, user)
	}
	os.Exit(3)
}
