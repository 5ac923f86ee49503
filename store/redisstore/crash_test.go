package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/storetest"
)

// TestCrash kills an AOF-persisted redis-server with SIGKILL while a node
// trains, several times, and restarts it: each time Check must pass, and
// every op of an Apply that returned must be there. A script's writes
// reach the AOF as one MULTI/EXEC, and Redis drops a transaction cut off
// at the end of the file when it loads it, so a crash loses whole calls
// or nothing of them.
func TestCrash(t *testing.T) {
	srv := redisServer(t, "--appendonly", "yes", "--appendfsync", "always", "--aof-load-truncated", "yes")
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 8))
	bags := make([]map[bow.Hash]uint32, 200)
	for i := range bags {
		bags[i] = storetest.RandomBag(rng, 50+rng.IntN(200), 20000)
	}
	users := []string{"", "alice"}
	classes := []string{"spam", "ham", ""}
	// want is what each message is trained as according to the Applys
	// that returned; unsure holds the messages of a call that failed,
	// which may or may not have been applied.
	want := map[string]map[string]string{"": {}, "alice": {}}
	const rounds = 4
	for round := range rounds {
		s := open(t, []string{srv.Addr}, Options{Prefix: "crash:"})
		unsure := map[string]map[string]bool{"": {}, "alice": {}}
		done := make(chan int)
		sleep := time.Duration(200+rng.IntN(400)) * time.Millisecond
		rng := rand.New(rand.NewPCG(uint64(round), 9))
		go func() {
			n := 0
			defer func() { done <- n }()
			for i := 0; ; i++ {
				u := users[i%len(users)]
				ops := make([]store.Op, 1+rng.IntN(20))
				names := make([]string, len(ops))
				for j := range ops {
					m := rng.IntN(len(bags))
					names[j] = fmt.Sprint("m", m)
					ops[j] = store.Op{Digest: storetest.D(names[j]), Class: classes[rng.IntN(len(classes))], Bag: bow.FromMaps(nil, bags[m]),
						Steps: []store.Step{{Class: "spam", Body: rng.Int64N(2000) - 1000}}}
				}
				res, err := s.Apply(ctx, u, ops)
				for j := range res {
					want[u][names[j]] = ops[j].Class
				}
				if err != nil {
					for _, name := range names[len(res):] {
						unsure[u][name] = true
					}
					return
				}
				n++
			}
		}()
		time.Sleep(sleep)
		srv.Kill()
		n := <-done
		t.Logf("round %d: killed after %d calls", round, n)
		s.Close()
		srv.Restart(t)
		s = open(t, []string{srv.Addr}, Options{Prefix: "crash:"})
		for _, u := range users {
			if err := s.Check(ctx, u); err != nil {
				t.Fatalf("round %d: Check(%q) after the crash: %v", round, u, err)
			}
			for name, class := range want[u] {
				if unsure[u][name] {
					continue
				}
				got, err := s.Seen(ctx, u, storetest.D(name))
				if err != nil {
					t.Fatal(err)
				}
				if got != class {
					t.Errorf("round %d: user %q message %s trained as %q, want %q", round, u, name, got, class)
				}
			}
			// What the lost call did or not, the store now says.
			for name := range unsure[u] {
				got, err := s.Seen(ctx, u, storetest.D(name))
				if err != nil {
					t.Fatal(err)
				}
				want[u][name] = got
			}
		}
		s.Close()
	}
}
