package badgerstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/storetest"
)

// restoreRows restores user's model of rows tokens, token i counted once
// as spam and last trained on day 100+i%50, and seen seen records,
// message i trained as ham on day 100+i%50 with a value of measure i%3
// at level i%100.
func restoreRows(t *testing.T, s *Store, user string, rows, seen int) {
	t.Helper()
	i := -1
	err := s.Restore(context.Background(), user, func() (store.Record, error) {
		i++
		switch {
		case i == 0:
			return store.Record{Classes: []string{"spam", "ham"}}, nil
		case i <= rows:
			return store.Record{Hash: bow.Hash(i), Counts: store.Counts{1, 0}, Day: store.Day(100 + i%50)}, nil
		case i <= rows+seen:
			m := i - rows
			return store.Record{Digest: storetest.D(fmt.Sprint(m)), Class: "ham", Day: store.Day(100 + m%50), Mark: uint64(m),
				Values: []store.Value{{Measure: uint8(m % 3), Level: uint16(m % 100)}}}, nil
		}
		return store.Record{}, io.EOF
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPruneBatches prunes a model too big for one of the small
// transactions a small memtable allows: Prune splits it, each transaction
// leaving the totals exact, and stops between two when its context is
// canceled, having deleted whole what it did.
func TestPruneBatches(t *testing.T) {
	const rows, seen = 10000, 3000
	rule := store.PruneRule{MaxCount: 1, Before: 125, SeenBefore: 125}
	// Days 100 to 124 go: half of each.
	want := store.PruneResult{Tokens: rows / 2, Seen: seen / 2, Vocabulary: rows / 2}

	s := open(t, "", Options{InMemory: true, MemTableBytes: 1 << 20})
	defer s.Close()
	restoreRows(t, s, "u", rows, seen)
	txns := 0
	s.pruned = func(n int) { txns = n }
	res, err := s.Prune(context.Background(), "u", rule)
	if err != nil || res != want {
		t.Fatalf("Prune = %+v, %v; want %+v", res, err, want)
	}
	// Some 1,600 deletions fit in a transaction of a 1 MiB memtable.
	if txns < 4 {
		t.Errorf("%d transactions, want several", txns)
	}
	if err := s.Check(context.Background(), "u"); err != nil {
		t.Fatal(err)
	}
	tot, _ := s.Totals(context.Background(), "u")
	if tot.Messages[1] != seen || tot.Forgotten[1] != seen/2 || tot.Tokens[0] != rows/2 {
		t.Errorf("totals %+v", tot)
	}
	t.Logf("%d transactions", txns)

	// Canceled after the first transaction: it is whole, and a prune
	// again does the rest.
	s2 := open(t, "", Options{InMemory: true, MemTableBytes: 1 << 20})
	defer s2.Close()
	restoreRows(t, s2, "u", rows, seen)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s2.pruned = func(n int) {
		if n == 1 {
			cancel()
		}
	}
	first, err := s2.Prune(ctx, "u", rule)
	if !errors.Is(err, context.Canceled) || first.Tokens == 0 || first.Tokens >= want.Tokens || first.Seen != 0 || first.Vocabulary != rows-first.Tokens {
		t.Fatalf("Prune canceled after a transaction = %+v, %v", first, err)
	}
	if err := s2.Check(context.Background(), "u"); err != nil {
		t.Fatal(err)
	}
	if tot, _ := s2.Totals(context.Background(), "u"); tot.Vocabulary != rows-first.Tokens {
		t.Errorf("vocabulary %d after %d of %d tokens pruned", tot.Vocabulary, first.Tokens, rows)
	}
	s2.pruned = nil
	rest, err := s2.Prune(context.Background(), "u", rule)
	if err != nil || first.Tokens+rest.Tokens != want.Tokens || rest.Seen != want.Seen || rest.Vocabulary != want.Vocabulary {
		t.Errorf("Prune again = %+v, %v; with %+v before, want %+v", rest, err, first, want)
	}
	if err := s2.Check(context.Background(), "u"); err != nil {
		t.Fatal(err)
	}
}

// TestPruneCache checks that no reader sees a pruned token's count once
// Prune returned, however it read it before, and that readers going on
// meanwhile see counts the store had.
func TestPruneCache(t *testing.T) {
	ctx := context.Background()
	for _, o := range []Options{{InMemory: true}, {InMemory: true, CacheBytes: 4000}, {InMemory: true, CacheBytes: -1}} {
		t.Run(fmt.Sprint("cache ", o.CacheBytes), func(t *testing.T) {
			s := open(t, "", o)
			defer s.Close()
			// Token h is trained h%7+1 times, as spam.
			var hashes []bow.Hash
			var ops []store.Op
			for i := range 7 {
				bag := map[bow.Hash]uint32{}
				for h := bow.Hash(1); h <= 300; h++ {
					if int(h%7) >= i {
						bag[h] = 1
						if i == 0 {
							hashes = append(hashes, h)
						}
					}
				}
				ops = append(ops, storetest.TrainOn(fmt.Sprint(i), "spam", store.Day(10+i), 0, bag))
			}
			train(t, s, "u", ops...)
			if _, err := s.Lookup(ctx, "u", hashes); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			stop := make(chan struct{})
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						got, err := s.Lookup(ctx, "u", hashes)
						if err != nil {
							t.Error(err)
							return
						}
						for i, c := range got {
							if c != nil && c.Count(0) != uint64(hashes[i]%7+1) {
								t.Errorf("token %d: count %d while pruning", hashes[i], c.Count(0))
								return
							}
						}
					}
				}()
			}
			// Tokens trained at most 3 times go.
			res, err := s.Prune(ctx, "u", store.PruneRule{MaxCount: 3, Before: 100})
			close(stop)
			wg.Wait()
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Lookup(ctx, "u", hashes)
			if err != nil {
				t.Fatal(err)
			}
			left := uint64(0)
			for i, c := range got {
				switch n := hashes[i]%7 + 1; {
				case n <= 3 && c != nil:
					t.Errorf("token %d, pruned, still has %v", hashes[i], c)
				case n > 3 && c.Count(0) != uint64(n):
					t.Errorf("token %d: %v, want a count of %d", hashes[i], c, n)
				case n > 3:
					left++
				}
			}
			tot, err := s.Totals(ctx, "u")
			if err != nil || tot.Vocabulary != left || res.Vocabulary != left || res.Tokens != uint64(len(hashes))-left {
				t.Errorf("after the prune: %+v, %v; %+v, with %d tokens left", tot, err, res, left)
			}
		})
	}
}

// TestDaysCached trains tokens whose rows the cache holds, without their
// days: a row trained on an earlier day than the last keeps its later
// day, one trained on a later day takes it, and untraining changes none.
func TestDaysCached(t *testing.T) {
	ctx := context.Background()
	for _, o := range []Options{{InMemory: true}, {InMemory: true, CacheBytes: -1}} {
		t.Run(fmt.Sprint("cache ", o.CacheBytes), func(t *testing.T) {
			s := open(t, "", o)
			defer s.Close()
			days := func() map[bow.Hash]store.Day {
				out := map[bow.Hash]store.Day{}
				err := s.Dump(ctx, "u", func(r store.Record) error {
					if r.Counts != nil {
						out[r.Hash] = r.Day
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			steps := []store.Step{{Class: "spam", Body: 3}}
			m1 := storetest.TrainOn("m1", "spam", 20, 1, map[bow.Hash]uint32{1: 1, 2: 1})
			m1.Steps = steps
			train(t, s, "u", m1)
			if _, err := s.Lookup(ctx, "u", []bow.Hash{1, 2, 3}); err != nil {
				t.Fatal(err)
			}
			train(t, s, "u", storetest.TrainOn("m2", "ham", 10, 2, map[bow.Hash]uint32{1: 1, 3: 1}))
			if got := fmt.Sprint(days()); got != fmt.Sprint(map[bow.Hash]store.Day{1: 20, 2: 20, 3: 10}) {
				t.Errorf("days after training an earlier day: %s", got)
			}
			train(t, s, "u", storetest.TrainOn("m3", "ham", 30, 3, map[bow.Hash]uint32{2: 1}))
			// Forgetting m1 leaves token 2 a row of its weight and m3's
			// count, and token 1 m2's count: their days stay.
			train(t, s, "u", storetest.Forget("m1", map[bow.Hash]uint32{1: 1, 2: 1}))
			if got := fmt.Sprint(days()); got != fmt.Sprint(map[bow.Hash]store.Day{1: 20, 2: 30, 3: 10}) {
				t.Errorf("days after a forget: %s", got)
			}
			if err := s.Check(ctx, "u"); err != nil {
				t.Error(err)
			}
		})
	}
}

// pruneCrashEnv, set in the environment of a re-executed test binary,
// makes TestPruneCrash train and prune in the store in that directory
// until it is killed.
const pruneCrashEnv = "SPAMD_BADGERSTORE_PRUNE_CRASH"

// TestPruneCrash kills a process that trains and prunes, by age, budget
// and seen records' age, at random moments: every transaction of a prune
// must be there whole or not at all, so that the reopened store passes
// Check, whatever the prune was doing.
func TestPruneCrash(t *testing.T) {
	if v := os.Getenv(pruneCrashEnv); v != "" {
		pruneCrashChild(v)
		return
	}
	if testing.Short() {
		t.Skip("kills child processes")
	}
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for round := range kills(t, 4) {
		cmd, out := startChild(t, "TestPruneCrash", fmt.Sprintf("%s=%d:%d:%s", pruneCrashEnv, round, rng.Uint64(), dir))
		sc := bufio.NewScanner(out)
		if !sc.Scan() || !strings.HasPrefix(sc.Text(), "pruned") {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: the child pruned nothing", round)
		}
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		prunes := 1
		for sc.Scan() {
			prunes++
		}
		cmd.Wait()
		s := open(t, dir, Options{Logger: testLogger(t)})
		for _, u := range []string{"alice", "bob"} {
			if err := s.Check(context.Background(), u); err != nil {
				t.Errorf("round %d, after the kill: %v", round, err)
			}
		}
		tot, _ := s.Totals(context.Background(), "alice")
		t.Logf("round %d: killed after %d prunes; alice has %d tokens, forgot %v", round, prunes, tot.Vocabulary, tot.Forgotten)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// pruneCrashChild trains and prunes in turn in the store in the directory
// arg names, printing a line after each prune, until it is killed.
func pruneCrashChild(arg string) {
	fields := strings.SplitN(arg, ":", 3)
	round, _ := strconv.Atoi(fields[0])
	seed, _ := strconv.ParseUint(fields[1], 10, 64)
	// A small memtable makes prunes of several transactions.
	s, err := Open(context.Background(), fields[2], Options{MemTableBytes: 1 << 20})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 1))
	classes := []string{"spam", "ham", "spam", "ham", ""}
	deadline := time.Now().Add(time.Minute)
	for batch := 0; time.Now().Before(deadline); batch++ {
		day := store.Day(1000*round + batch)
		user := []string{"alice", "bob"}[rng.IntN(2)]
		ops := make([]store.Op, 1+rng.IntN(40))
		for i := range ops {
			m := rng.IntN(crashPool)
			class := classes[rng.IntN(len(classes))]
			ops[i] = store.Op{Digest: storetest.D(strconv.Itoa(m)), Class: class, Bag: crashBag(m), Steps: crashSteps(m, class), Day: day, Mark: uint64(m + 1)}
		}
		if _, err := s.Apply(ctx, user, ops); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		rule := []store.PruneRule{
			{MaxTokens: uint64(3000 + rng.IntN(5000))},
			{MaxCount: 2, Before: day - 2},
			{SeenBefore: day - 3},
		}[rng.IntN(3)]
		if _, err := s.Prune(ctx, user, rule); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println("pruned", batch)
	}
	os.Exit(3)
}
