package badgerstore

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
)

// restoreCrashEnv, set in the environment of a re-executed test binary,
// makes TestRestoreCrash restore, then delete, a model in the store in
// that directory until it is killed.
const restoreCrashEnv = "SPAMD_BADGERSTORE_RESTORE_CRASH"

// crashRows is the size of the model restored: enough write batches that
// a kill lands inside the restore.
const crashRows = 150_000

// crashRecords returns the records of the model the crash test restores,
// the same in parent and child.
func crashRecords() func() (store.Record, error) {
	rng := rand.New(rand.NewPCG(7, 7))
	i := 0
	return func() (store.Record, error) {
		defer func() { i++ }()
		switch {
		case i == 0:
			return store.Record{Classes: []string{"spam", "ham"}}, nil
		case i <= crashRows:
			return store.Record{Hash: bow.Hash(rng.Uint64()), Counts: store.Counts{uint64(i%5 + 1), uint64(rng.Int64N(100)), 1, 0}}, nil
		case i <= crashRows+1000:
			var d store.Digest
			d[0], d[1] = byte(i), byte(i>>8)
			return store.Record{Digest: d, Class: []string{"spam", "ham"}[i%2]}, nil
		}
		return store.Record{}, io.EOF
	}
}

// TestRestoreCrash kills a process restoring a model, and later deleting
// it, with SIGKILL at random moments, reopens the store and checks that
// the model is there whole or not at all, and that the model of another
// user is untouched.
func TestRestoreCrash(t *testing.T) {
	if dir := os.Getenv(restoreCrashEnv); dir != "" {
		restoreCrashChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("kills child processes for several seconds")
	}
	ctx := context.Background()
	// The whole model, for comparison, and a bystander's.
	ref := open(t, t.TempDir(), Options{})
	if err := ref.Restore(ctx, "victim", crashRecords()); err != nil {
		t.Fatal(err)
	}
	want, err := ref.Totals(ctx, "victim")
	if err != nil {
		t.Fatal(err)
	}
	ref.Close()

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	whole, none := 0, 0
	for round := range 6 {
		dir := t.TempDir()
		s := open(t, dir, Options{})
		if err := s.Restore(ctx, "bystander", crashRecords()); err != nil {
			t.Fatal(err)
		}
		s.Close()
		cmd, out := startChild(t, "TestRestoreCrash", restoreCrashEnv+"="+dir)
		sc := bufio.NewScanner(out)
		if !sc.Scan() || sc.Text() != "open" {
			t.Fatalf("round %d: the child said %q", round, sc.Text())
		}
		// Half the rounds kill during the restore, half during the
		// delete that follows it.
		if round%2 == 1 && (!sc.Scan() || sc.Text() != "restored") {
			t.Fatalf("round %d: the child said %q", round, sc.Text())
		}
		delay := 400 * time.Millisecond
		if round%2 == 1 {
			delay = 20 * time.Millisecond
		}
		time.Sleep(time.Duration(rng.Int64N(int64(delay))))
		cmd.Process.Kill()
		cmd.Wait()

		s = open(t, dir, Options{Logger: testLogger(t)})
		got, err := s.Totals(ctx, "victim")
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case fmt.Sprint(got) == fmt.Sprint(want):
			whole++
		case got.Vocabulary == 0 && sum(got.Messages) == 0:
			none++
		default:
			t.Errorf("round %d: after the kill the model is in part: %v of %v", round, got, want)
		}
		for _, u := range []string{"victim", "bystander"} {
			if err := s.Check(ctx, u); err != nil {
				t.Errorf("round %d: %v", round, err)
			}
		}
		if b, _ := s.Totals(ctx, "bystander"); fmt.Sprint(b) != fmt.Sprint(want) {
			t.Errorf("round %d: the bystander's model changed: %v", round, b)
		}
		s.Close()
	}
	t.Logf("after the kills: %d models whole, %d gone", whole, none)
}

func sum(v []uint64) (n uint64) {
	for _, x := range v {
		n += x
	}
	return n
}

// restoreCrashChild restores the victim's model into the store in dir,
// says so, deletes it, and starts again, until it is killed.
func restoreCrashChild(dir string) {
	ctx := context.Background()
	s, err := Open(ctx, dir, Options{})
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	fmt.Println("open")
	for {
		if err := s.Restore(ctx, "victim", crashRecords()); err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
		fmt.Println("restored")
		if err := s.DeleteUser(ctx, "victim"); err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
	}
}
