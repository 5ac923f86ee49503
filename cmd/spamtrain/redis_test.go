package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/mailbox"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/badgerstore"
	"github.com/spamd/spamd/store/redisstore"
	"github.com/spamd/spamd/store/redisstore/redistest"
)

// TestRedisModel trains a Redis model with spamtrain directly, by --redis
// and by the configuration's [store], checks and classifies with it, and
// compares it, token by token, with a Badger model trained on the same
// messages: the two backends must hold the same counts and weights.
func TestRedisModel(t *testing.T) {
	srv := redistest.Start(t, redistest.Binary(t, "SPAMD_REDIS_SERVER", "redis-server"))
	t.Setenv("SPAMD_CONFIG", "")
	t.Setenv("SPAMD_REDIS", "")
	t.Setenv("SPAMD_DB", "")
	t.Setenv("SPAMD_API", "")
	spam, ham := filepath.Join(sample, "spam"), filepath.Join(sample, "ham")
	code, out, errOut := spamtrain(t, "", "train", "--redis", srv.Addr, "--spam", spam, "--ham", ham)
	if code != 0 || !strings.Contains(out, "40 messages: 40 learned") {
		t.Fatalf("train --redis: exit %d: %s%s", code, out, errOut)
	}

	// The same through a configuration file naming the server.
	cfg := filepath.Join(t.TempDir(), "config.toml")
	doc := "[store]\nbackend = \"redis\"\n[store.redis]\naddress = [\"" + srv.Addr + "\"]\n"
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SPAMD_CONFIG", cfg)
	code, out, errOut = spamtrain(t, "", "train", "--spam", spam)
	if code != 0 || !strings.Contains(out, "20 already known") {
		t.Fatalf("train with [store] backend = redis: exit %d: %s%s", code, out, errOut)
	}
	code, out, errOut = spamtrain(t, "", "check")
	if code != 0 || !strings.Contains(out, "(global): ok") {
		t.Fatalf("check: exit %d: %s%s", code, out, errOut)
	}
	code, out, errOut = spamtrain(t, "", "stats")
	if code != 0 || !strings.Contains(out, "(global)") {
		t.Fatalf("stats: exit %d: %s%s", code, out, errOut)
	}
	code, out, errOut = spamtrain(t, "", "classify", "--json", spam, ham)
	if code != 0 || strings.Count(out, "\n") != 40 {
		t.Fatalf("classify: exit %d: %s%s", code, out, errOut)
	}
	// --db still means a Badger store, whatever the configuration.
	db := t.TempDir()
	code, out, errOut = spamtrain(t, "", "train", "--db", db, "--spam", spam, "--ham", ham)
	if code != 0 || !strings.Contains(out, "40 learned") {
		t.Fatalf("train --db: exit %d: %s%s", code, out, errOut)
	}

	ctx := context.Background()
	rs, err := redisstore.Open(ctx, redisstore.Options{Addresses: []string{srv.Addr}, NoStaleReads: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	bs, err := badgerstore.Open(ctx, db, badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	sameModel(t, bs, rs, "", []string{spam, ham})
}

// sameModel compares the totals of user in a and b, and the rows of every
// feature of the messages in paths.
func sameModel(t *testing.T, a, b store.Store, user string, paths []string) {
	t.Helper()
	ctx := context.Background()
	ta, err := a.Totals(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := b.Totals(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ta.Classes, tb.Classes) || !slices.Equal(ta.Messages, tb.Messages) || !slices.Equal(ta.Tokens, tb.Tokens) || ta.Vocabulary != tb.Vocabulary {
		t.Fatalf("totals differ:\n%+v\n%+v", ta, tb)
	}
	f, err := filter.New(store.NewMemory(), filter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	set := map[bow.Hash]bool{}
	for _, p := range paths {
		err := mailbox.Walk(ctx, p, mailbox.Options{}, func(m mailbox.Message) error {
			pr, err := f.Prepare(m.Raw, false)
			if err != nil {
				return nil
			}
			for _, h := range pr.Bag.Hashes() {
				set[h] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	hashes := make([]bow.Hash, 0, len(set))
	for h := range set {
		hashes = append(hashes, h)
	}
	ra, err := a.Lookup(ctx, user, hashes)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := b.Lookup(ctx, user, hashes)
	if err != nil {
		t.Fatal(err)
	}
	differ := 0
	for i := range hashes {
		if !slices.Equal(trim(ra[i]), trim(rb[i])) {
			if differ++; differ < 5 {
				t.Errorf("token %x: %v and %v", hashes[i], ra[i], rb[i])
			}
		}
	}
	t.Logf("%d features compared; totals: %v messages, %v tokens, vocabulary %d", len(hashes), ta.Messages, ta.Tokens, ta.Vocabulary)
	if differ > 0 {
		t.Errorf("%d of %d rows differ", differ, len(hashes))
	}
}

func trim(c store.Counts) []uint64 {
	n := len(c)
	for n > 0 && c[n-1] == 0 {
		n--
	}
	return c[:n]
}
