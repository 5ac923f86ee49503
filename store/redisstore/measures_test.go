package redisstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/storetest"
)

// TestCheckSamples corrupts the samples hash and the seen records with
// plain commands and checks that Check reports each corruption.
func TestCheckSamples(t *testing.T) {
	srv := redisServer(t)
	tests := []struct {
		name string
		cmd  []string // KEY placeholders: S the samples hash, R the seen hash
		want string
	}{
		{"untouched", nil, ""},
		{"a count changed", []string{"HSET", "S", "0.0.100", "2"}, "samples"},
		{"a level moved", []string{"HRENAME"}, `measure 0 of class "spam"`},
		{"a moment changed", []string{"HSET", "S", "1.4.q", "2"}, "sum of squares"},
		{"a field malformed", []string{"HSET", "S", "1.4", "2"}, "samples field"},
		{"a sample added", []string{"HSET", "S", "1.5.9", "1", "1.5.n", "1", "1.5.s", "9", "1.5.q", "81"}, `measure 5 of class "ham"`},
		{"a sample of an unknown class", []string{"HSET", "S", "7.5.9", "1", "7.5.n", "1", "7.5.s", "9", "7.5.q", "81"}, "unknown class 7"},
		{"the samples lost", []string{"DEL", "S"}, `measure 0 of class "spam": stored n=0`},
		{"a seen record's value changed", []string{"HSET", "R", "m2", "1;4 2"}, `measure 4 of class "ham"`},
		{"a seen record's values malformed", []string{"HSET", "R", "m2", "1;4"}, "seen record"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t, []string{srv.Addr}, Options{})
			ctx := context.Background()
			ops := []store.Op{
				storetest.TrainValues("m1", "spam", map[bow.Hash]uint32{1: 1}, store.Value{Measure: 0, Level: 100}),
				storetest.TrainValues("m2", "ham", map[bow.Hash]uint32{2: 1}, store.Value{Measure: 4, Level: 1}),
			}
			if _, err := s.Apply(ctx, "u", ops); err != nil {
				t.Fatal(err)
			}
			if tt.cmd != nil {
				cmd := tt.cmd
				if cmd[0] == "HRENAME" {
					cmd = []string{"EVAL", "redis.call('HDEL', KEYS[1], '0.0.100'); return redis.call('HSET', KEYS[1], '0.0.101', '1')", "1", s.keys.samples("u")}
				}
				for i, a := range cmd {
					switch {
					case a == "S":
						cmd[i] = s.keys.samples("u")
					case a == "R":
						cmd[i] = s.keys.seen("u")
					case a == "m2":
						d := storetest.D("m2")
						cmd[i] = string(d[:])
					}
				}
				if _, err := srv.Command(cmd...); err != nil {
					t.Fatal(err)
				}
			}
			err := s.Check(ctx, "u")
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, store.ErrInconsistent) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check: %v\nwant ErrInconsistent saying %s", err, tt.want)
			}
		})
	}
}

// TestSchema1 opens a store of schema 1, before measures: Open marks it
// schema 2, its model checks, and messages trained since add their values.
func TestSchema1(t *testing.T) {
	srv := redisServer(t)
	ctx := context.Background()
	s := open(t, []string{srv.Addr}, Options{Prefix: "old:"})
	if _, err := s.Apply(ctx, "u", []store.Op{storetest.Train("m1", "spam", map[bow.Hash]uint32{1: 1})}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := srv.Command("HSET", "old:meta", "schema", "1"); err != nil {
		t.Fatal(err)
	}
	s = open(t, []string{srv.Addr}, Options{Prefix: "old:"})
	if got, _ := srv.Command("HGET", "old:meta", "schema"); got != schemaVersion {
		t.Errorf("schema %q after Open, want %q", got, schemaVersion)
	}
	if _, err := s.Apply(ctx, "u", []store.Op{storetest.TrainValues("m2", "ham", map[bow.Hash]uint32{1: 1}, store.Value{Measure: 2, Level: 9})}); err != nil {
		t.Fatal(err)
	}
	storetest.Expect(t, s, "u", storetest.State{
		Messages: map[string]uint64{"spam": 1, "ham": 1}, Tokens: map[string]uint64{"spam": 1, "ham": 1}, Vocabulary: 1,
		Counts: map[bow.Hash]map[string]uint64{1: {"spam": 1, "ham": 1}},
		Values: map[string]map[uint8][]uint16{"ham": {2: {9}}},
	})
	if _, err := srv.Command("HSET", "old:meta", "schema", "9"); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, Options{Addresses: []string{srv.Addr}, Prefix: "old:"}); !errors.Is(err, ErrSchema) {
		t.Errorf("Open of schema 9: %v, want ErrSchema", err)
	}
}

// TestTwoNodesSamples checks that a node sees the samples another node's
// training changed, through Redis's invalidations, and its own at once.
func TestTwoNodesSamples(t *testing.T) {
	srv := redisServer(t)
	a := open(t, []string{srv.Addr}, Options{Prefix: "two:"})
	b := open(t, []string{srv.Addr}, Options{Prefix: "two:"})
	ctx := context.Background()
	n := func(s *Store) uint64 {
		tot, err := s.Totals(ctx, "u")
		if err != nil {
			t.Fatal(err)
		}
		return tot.Samples.Of(3, 0).N
	}
	for i, name := range []string{"m1", "m2", "m3"} {
		if _, err := a.Apply(ctx, "u", []store.Op{storetest.TrainValues(name, "spam", nil, store.Value{Measure: 3, Level: 40})}); err != nil {
			t.Fatal(err)
		}
		if got := n(a); got != uint64(i+1) {
			t.Fatalf("node A reads %d values after training %d", got, i+1)
		}
		start := time.Now()
		for n(b) != uint64(i+1) {
			if time.Since(start) > 2*time.Second {
				t.Fatalf("node B still reads %d values, want %d", n(b), i+1)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// A change made with a plain command is announced too.
	if _, err := srv.Command("DEL", a.keys.samples("u")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for n(b) != 0 {
		if time.Since(start) > 2*time.Second {
			t.Fatal("node B still reads the samples deleted")
		}
		time.Sleep(time.Millisecond)
	}
}
