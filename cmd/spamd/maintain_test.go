package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gomilter "github.com/emersion/go-milter"

	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/store"
)

// maintainedDaemon starts a daemon on a store, a milter socket and an API
// socket of its own, with extra appended to its configuration, and
// returns a client of its API, once it answers, and the milter's socket.
func maintainedDaemon(t *testing.T, extra string) (*control.Client, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	sock := filepath.Join(dir, "milter.sock")
	write(t, path, fmt.Sprintf("[store]\ndir = %q\n[milter]\nlisten = \"unix:%s\"\n[api]\nsocket = %q\n[metrics]\nlisten = \"\"\n%s",
		filepath.Join(dir, "db"), sock, filepath.Join(dir, "api.sock"), extra))
	runDaemon(t, options{config: path}, nil)
	api, err := control.NewClient("unix:"+filepath.Join(dir, "api.sock"), "")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the API", func() bool { return api.Health(context.Background()) == nil })
	return api, sock
}

// TestMaintenanceUnderLoad runs check, compact, dump, delete-user,
// restore and prune through the API of a daemon while milter sessions
// send mail without a pause: every message is answered, and the store is
// consistent afterwards.
func TestMaintenanceUnderLoad(t *testing.T) {
	api, sock := maintainedDaemon(t, "")
	ctx := context.Background()
	spam, ham := trainSample(t, api)
	// The milter's recipient has a model of its own, which the load
	// reads while it is deleted and restored.
	if _, err := api.Train(ctx, "user@test.example", []control.Item{{Class: filter.Spam, Message: spam}, {Class: filter.Ham, Message: ham}}); err != nil {
		t.Fatal(err)
	}

	const sessions = 4
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := map[string]int{}
	var failures []error
	for i := range sessions {
		s := milterSession(t, sock)
		defer s.Close()
		wg.Add(1)
		go func(s *gomilter.ClientSession) {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				raw := spam
				if (n+i)%2 == 1 {
					raw = ham
				}
				err := sendMessage(s, raw)
				var got string
				if err == nil {
					got, err = finishMessage(s)
				}
				mu.Lock()
				if err != nil {
					failures = append(failures, err)
				} else {
					answers[strings.Fields(got)[0]]++
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}(s)
	}

	checks, err := api.Check(ctx)
	if err != nil || len(checks) != 2 {
		t.Errorf("check under load: %v, %v", checks, err)
	}
	if _, err := api.Compact(ctx); err != nil {
		t.Errorf("compact under load: %v", err)
	}
	var dump bytes.Buffer
	if err := api.Dump(ctx, []string{"user@test.example"}, &dump); err != nil || !strings.HasSuffix(dump.String(), "\n") {
		t.Fatalf("dump under load: %v", err)
	}
	if d, err := api.DeleteUsers(ctx, []string{"user@test.example"}); err != nil || len(d) != 1 || d[0].Messages != 2 {
		t.Errorf("delete-user under load: %v, %v", d, err)
	}
	if res, err := api.Restore(ctx, bytes.NewReader(dump.Bytes()), nil, ""); err != nil || len(res.Restored) != 1 {
		t.Errorf("restore under load: %+v, %v", res, err)
	}
	// The global model loses half its tokens and its seen records,
	// which the load reads all along.
	global, err := api.Stats(ctx)
	if err != nil || len(global.Users) == 0 || global.Users[0].User != "" {
		t.Fatalf("stats: %+v, %v", global, err)
	}
	budget := global.Users[0].Vocabulary / 2
	rule := store.PruneRule{MaxTokens: budget, SeenBefore: store.DayOf(time.Now()) + 1}
	if res, err := api.Prune(ctx, []string{""}, rule); err != nil || len(res.Models) != 1 || res.Models[0].Vocabulary > budget || res.Models[0].Seen == 0 {
		t.Errorf("prune under load: %+v, %v", res, err)
	}
	time.Sleep(200 * time.Millisecond) // some load after the restore and the prune
	close(stop)
	wg.Wait()

	t.Logf("milter answers during maintenance: %v, failures %d", answers, len(failures))
	if len(failures) > 0 {
		t.Errorf("milter sessions failed: %v", failures)
	}
	if answers["accept"] == 0 || len(answers) != 1 {
		t.Errorf("answers %v, want only accept", answers)
	}
	checks, err = api.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		if c.Error != "" {
			t.Errorf("%q after maintenance under load: %s", c.User, c.Error)
		}
	}
	var again bytes.Buffer
	if err := api.Dump(ctx, []string{"user@test.example"}, &again); err != nil || again.String() != dump.String() {
		t.Errorf("the restored model dumps otherwise (%v)", err)
	}
}

// oldModel is a dump of a global model with two tokens last trained in
// 2020, one seen once and one five times, a token trained today and a
// message trained in 2020.
func oldModel(today store.Day) string {
	return "spamd-dump 3\nuser\nclasses ham spam\n" +
		"t 0000000000000001 2020-01-01 1 0 0 0\n" +
		"t 0000000000000002 2020-01-01 5 0 0 0\n" +
		"t 0000000000000003 " + today.String() + " 0 0 1 0\n" +
		"s " + strings.Repeat("ab", 32) + " ham 2020-01-01 0000000000000001\n" +
		"end tokens=3 seen=1 messages=1,0 counts=6,1 values=0,0 levels=0,0 forgotten=0,0\n"
}

// TestScheduledPrune runs the daemon with a prune every second: the
// rare token not seen for years and the old seen record go, the rest
// stays, and the model stays consistent.
func TestScheduledPrune(t *testing.T) {
	api, _ := maintainedDaemon(t, "[prune]\nevery = \"1s\"\ndays = 30\ncount = 1\nseen_days = 365\n")
	ctx := context.Background()
	if _, err := api.Restore(ctx, strings.NewReader(oldModel(store.DayOf(time.Now()))), nil, ""); err != nil {
		t.Fatal(err)
	}
	// A prune deletes rows and then seen records, each in steps of
	// their own: wait for the seen record to go.
	var dump bytes.Buffer
	waitFor(t, 10*time.Second, "the scheduled prune", func() bool {
		dump.Reset()
		return api.Dump(ctx, []string{""}, &dump) == nil && strings.Contains(dump.String(), "\nforgotten 1,0\n")
	})
	if d := dump.String(); strings.Contains(d, "t 0000000000000001") || strings.Contains(d, "\ns ") || !strings.Contains(d, "t 0000000000000002") {
		t.Errorf("after the prune the model dumps as\n%s", d)
	}
	st, err := api.Stats(ctx)
	if err != nil || len(st.Users) != 1 {
		t.Fatalf("stats: %+v, %v", st, err)
	}
	if u := st.Users[0]; u.Vocabulary != 2 || u.Messages["ham"] != 1 || u.Tokens["ham"] != 5 || u.Tokens["spam"] != 1 {
		t.Errorf("after the prune: %+v", u)
	}
	checks, err := api.Check(ctx)
	if err != nil || len(checks) != 1 || checks[0].Error != "" {
		t.Errorf("check after the prune: %+v, %v", checks, err)
	}
}
