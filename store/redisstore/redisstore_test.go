package redisstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/redisstore/redistest"
	"github.com/spamd/spamd/store/storetest"
)

// prefixes numbers the stores tests open on one server, so that each
// starts empty.
var prefixes atomic.Int64

// opener returns a storetest.Opener of stores on the servers at addrs,
// each under a prefix of its own.
func opener(addrs []string, o Options) storetest.Opener {
	return func(t *testing.T) store.Store {
		o := o
		o.Addresses = addrs
		o.Prefix = fmt.Sprintf("t%d:", prefixes.Add(1))
		s, err := Open(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

// open opens a store on the servers at addrs under a new prefix, closed
// when the test ends.
func open(t testing.TB, addrs []string, o Options) *Store {
	t.Helper()
	o.Addresses = addrs
	if o.Prefix == "" {
		o.Prefix = fmt.Sprintf("t%d:", prefixes.Add(1))
	}
	s, err := Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestConformance runs the store conformance suite against each engine
// installed, Redis and Valkey, and against a store with its cache off and
// buckets of a few tokens, which splits buckets all the time.
func TestConformance(t *testing.T) {
	for _, e := range redistest.Engines(t) {
		t.Run(e.Name, func(t *testing.T) {
			srv := redistest.Start(t, e.Path)
			t.Logf("%s: redis_version %s, valkey_version %s", e.Name, srv.Info("redis_version"), srv.Info("valkey_version"))
			storetest.Run(t, opener([]string{srv.Addr}, Options{}))
		})
	}
	t.Run("tiny buckets, no cache", func(t *testing.T) {
		srv := redistest.Start(t, redistest.Binary(t, "SPAMD_REDIS_SERVER", "redis-server"))
		storetest.Run(t, opener([]string{srv.Addr}, Options{BucketLoad: 2, CacheBytes: -1}))
	})
}

// TestCluster runs the conformance suite against a Cluster of three
// masters: every user's keys share a slot, so each script runs on one
// node, and users spread over all three.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("a Cluster takes seconds to form")
	}
	for _, e := range redistest.Engines(t) {
		t.Run(e.Name, func(t *testing.T) {
			nodes := redistest.StartCluster(t, e.Path, 3)
			addrs := make([]string, len(nodes))
			for i, n := range nodes {
				addrs[i] = n.Addr
			}
			storetest.Run(t, opener(addrs, Options{}))
		})
	}
}

func BenchmarkApply(b *testing.B) {
	srv := redistest.Start(b, redistest.Binary(b, "SPAMD_REDIS_SERVER", "redis-server"))
	storetest.BenchApply(b, open(b, []string{srv.Addr}, Options{}))
}

func BenchmarkLookup(b *testing.B) {
	srv := redistest.Start(b, redistest.Binary(b, "SPAMD_REDIS_SERVER", "redis-server"))
	storetest.BenchLookup(b, open(b, []string{srv.Addr}, Options{}))
}

// BenchmarkLookupCold measures lookups that all go to Redis: a node with
// its cache off.
func BenchmarkLookupCold(b *testing.B) {
	srv := redistest.Start(b, redistest.Binary(b, "SPAMD_REDIS_SERVER", "redis-server"))
	storetest.BenchLookup(b, open(b, []string{srv.Addr}, Options{CacheBytes: -1}))
}

// TestClassListReplies checks that class lists read by calls that raced
// may come back in any order: an older, shorter list leaves the longer one
// known, and only a list that disagrees is an error.
func TestClassListReplies(t *testing.T) {
	srv := redisServer(t)
	s := open(t, []string{srv.Addr}, Options{})
	for _, tt := range []struct {
		list string
		ok   bool
		want string
	}{
		{"spam,ham", true, "[spam ham]"},
		{"spam", true, "[spam ham]"},
		{"", true, "[spam ham]"},
		{"spam,ham,news", true, "[spam ham news]"},
		{"ham", false, "[spam ham news]"},
		{"spam,news,ham,x", false, "[spam ham news]"},
	} {
		err := s.setClasses(tt.list)
		if (err == nil) != tt.ok || fmt.Sprint(s.classes.Load().names) != tt.want {
			t.Errorf("setClasses(%q) = %v; classes %v, want %s", tt.list, err, s.classes.Load().names, tt.want)
		}
	}
}
