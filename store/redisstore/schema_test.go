package redisstore

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/storetest"
)

// toSchema2 rewrites the model of users under prefix as a build of schema
// 2 wrote it: rows without days, seen records without day and mark,
// totals without last day and forgotten messages, the meta hash of
// schema 2 without an upgrade day. It uses tool's connection.
func toSchema2(t *testing.T, tool *Store, prefix string, users ...string) {
	t.Helper()
	ctx := context.Background()
	c := tool.client
	k := keys{prefix: prefix}
	do := func(cmd ...string) {
		t.Helper()
		if err := c.Do(ctx, c.B().Arbitrary(cmd[0]).Keys(cmd[1]).Args(cmd[2:]...).Build()).Error(); err != nil {
			t.Fatalf("%q: %v", cmd, err)
		}
	}
	for _, u := range users {
		vals, err := c.Do(ctx, c.B().Hmget().Key(k.totals(u)).Field(totalsFields...).Build()).ToArray()
		if err != nil {
			t.Fatal(err)
		}
		tot, err := totalsOf(vals)
		if err != nil {
			t.Fatal(err)
		}
		tot.layout.each(func(b uint64) bool {
			fv, err := c.Do(ctx, c.B().Hgetall().Key(k.bucket(u, b)).Build()).AsStrMap()
			if err != nil {
				t.Fatal(err)
			}
			for f, v := range fv {
				row, _, dated, err := decodeRow(nil, v)
				if err != nil || !dated {
					t.Fatalf("row %x: %v, dated %v", f, err, dated)
				}
				do("HSET", k.bucket(u, b), f, schema2Row(row))
			}
			return true
		})
		fv, err := c.Do(ctx, c.B().Hgetall().Key(k.seen(u)).Build()).AsStrMap()
		if err != nil {
			t.Fatal(err)
		}
		for d, v := range fv {
			parts := strings.SplitN(v, ";", 3)
			old := parts[0]
			if parts[1] != "" {
				old += ";" + parts[1]
			}
			do("HSET", k.seen(u), d, old)
		}
		do("HDEL", k.totals(u), "day", "fgt")
	}
	do("HSET", k.meta(), "schema", "2")
	do("HDEL", k.meta(), "upgraded")
}

// TestSchema2 opens a store of schema 2, before days and marks: Open
// marks it schema 3 and records the day, once; its rows and seen records
// read as trained on that day, so that a prune by age right after the
// upgrade deletes nothing old; it checks, dumps and restores; training
// dates what it touches, and a prune then tells the two apart.
func TestSchema2(t *testing.T) {
	srv := redisServer(t)
	ctx := context.Background()
	tool := open(t, []string{srv.Addr}, Options{Prefix: "tool:", NoStaleReads: true})
	const prefix = "old2:"
	s := open(t, []string{srv.Addr}, Options{Prefix: prefix})
	// Three classes, so that some rows are in the varint form.
	ops := []store.Op{
		storetest.TrainOn("m1", "spam", 100, 0xa1, map[bow.Hash]uint32{1: 1, 2: 3}),
		storetest.TrainOn("m2", "ham", 100, 0, map[bow.Hash]uint32{2: 1, 3: 1 << 25}),
		storetest.TrainOn("m3", "news", 100, 0xa3, map[bow.Hash]uint32{1: 2, 4: 1}),
	}
	ops[0].Values = []store.Value{{Measure: 1, Level: 7}}
	ops[2].Steps = []store.Step{{Class: "news", Head: 3, Body: -5}}
	for _, u := range []string{"", "u"} {
		if _, err := s.Apply(ctx, u, ops); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	toSchema2(t, tool, prefix, "", "u")

	s = open(t, []string{srv.Addr}, Options{Prefix: prefix, NoStaleReads: true})
	if got, _ := srv.Command("HGET", prefix+"meta", "schema"); got != schemaVersion {
		t.Errorf("schema %q after Open, want %q", got, schemaVersion)
	}
	got, _ := srv.Command("HGET", prefix+"meta", "upgraded")
	d, err := strconv.ParseUint(got, 10, 32)
	up := store.Day(d)
	if err != nil || s.upgraded != up || up < store.DayOf(time.Now())-1 {
		t.Fatalf("upgraded %q (%v), the store says %d", got, err, s.upgraded)
	}
	for _, u := range []string{"", "u"} {
		if err := s.Check(ctx, u); err != nil {
			t.Errorf("Check %q: %v", u, err)
		}
		tot, err := s.Totals(ctx, u)
		if err != nil || tot.LastDay != up || tot.Forgotten != nil {
			t.Errorf("Totals %q: last day %d, forgotten %v, %v; want %d, none", u, tot.LastDay, tot.Forgotten, err, up)
		}
		rows, seen := 0, 0
		err = s.Dump(ctx, u, func(r store.Record) error {
			switch {
			case r.Counts != nil:
				rows++
				if r.Day != up {
					t.Errorf("%q: token %d of day %d, want %d", u, r.Hash, r.Day, up)
				}
			case r.Class != "":
				seen++
				if r.Day != up || r.Mark != 0 {
					t.Errorf("%q: seen record %x of day %d mark %x, want %d and 0", u, r.Digest[:4], r.Day, r.Mark, up)
				}
			}
			return nil
		})
		if err != nil || rows != 4 || seen != 3 {
			t.Errorf("Dump %q: %d rows, %d seen records, %v", u, rows, seen, err)
		}
	}
	// Nothing old is ancient the day after the upgrade.
	rule := store.PruneRule{MaxCount: 1 << 30, Before: up, SeenBefore: up}
	if res, err := s.Prune(ctx, "u", rule); err != nil || res.Tokens != 0 || res.Seen != 0 {
		t.Errorf("Prune(%v) after the upgrade = %+v, %v", rule, res, err)
	}

	// A dump restores into a store of schema 3 as it was.
	dst := open(t, []string{srv.Addr}, Options{NoStaleReads: true})
	var recs []store.Record
	if err := s.Dump(ctx, "u", func(r store.Record) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	i := 0
	if err := dst.Restore(ctx, "u", func() (store.Record, error) {
		if i == len(recs) {
			return store.Record{}, io.EOF
		}
		i++
		return recs[i-1], nil
	}); err != nil {
		t.Fatal(err)
	}
	var again []store.Record
	if err := dst.Dump(ctx, "u", func(r store.Record) error { again = append(again, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if a, b := fmt.Sprintf("%+v", recs), fmt.Sprintf("%+v", again); a != b {
		t.Errorf("restored dump differs:\n%s\nagainst\n%s", b, a)
	}

	// Training dates the rows it touches; the others keep the upgrade's
	// day. Forgetting an old message takes its values back.
	if _, err := s.Apply(ctx, "u", []store.Op{
		storetest.TrainOn("m4", "ham", up+1, 0xa4, map[bow.Hash]uint32{1: 1}),
		storetest.Forget("m1", map[bow.Hash]uint32{1: 1, 2: 3}),
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx, "u"); err != nil {
		t.Error(err)
	}
	if tot, _ := s.Totals(ctx, "u"); tot.LastDay != up+1 {
		t.Errorf("last day %d after training on %d", tot.LastDay, up+1)
	}
	res, err := s.Prune(ctx, "u", store.PruneRule{MaxCount: 1 << 30, Before: up + 1, SeenBefore: up + 1})
	if err != nil || res.Tokens != 3 || res.Seen != 2 || res.Vocabulary != 1 {
		t.Errorf("Prune of what the upgrade dated = %+v, %v; want 3 tokens and 2 seen records gone, 1 left", res, err)
	}
	storetest.Expect(t, s, "u", storetest.State{
		Messages: map[string]uint64{"spam": 0, "ham": 2, "news": 1}, Tokens: map[string]uint64{"ham": 1, "news": 2}, Vocabulary: 1,
		Counts:  map[bow.Hash]map[string]uint64{1: {"news": 2, "ham": 1}},
		Weights: map[bow.Hash]map[string]int64{1: {"news": -10}},
		Seen:    map[string]string{"m1": "", "m2": "", "m3": "", "m4": "ham"},
	})

	// The upgrade's day is recorded once: a store marked schema 2 again
	// (a node of the old build registered a class meanwhile, say) keeps it.
	if _, err := srv.Command("HSET", prefix+"meta", "schema", "2", "upgraded", strconv.Itoa(int(up-5))); err != nil {
		t.Fatal(err)
	}
	s = open(t, []string{srv.Addr}, Options{Prefix: prefix})
	if s.upgraded != up-5 {
		t.Errorf("upgraded %d after a second upgrade, want %d", s.upgraded, up-5)
	}
}
