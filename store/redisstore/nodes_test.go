package redisstore

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/redisstore/redistest"
	"github.com/spamd/spamd/store/storetest"
)

func redisServer(t *testing.T, extra ...string) *redistest.Server {
	t.Helper()
	return redistest.Start(t, redistest.Binary(t, "SPAMD_REDIS_SERVER", "redis-server"), extra...)
}

func count(t *testing.T, s *Store, user string, h bow.Hash) uint64 {
	t.Helper()
	c, err := s.Lookup(context.Background(), user, []bow.Hash{h})
	if err != nil {
		t.Fatal(err)
	}
	return c[0].Count(0)
}

// TestTwoNodes checks what a report on one node does to another node's
// cache: node B has a token cached, node A trains and relabels, and B's
// next lookup sees it, within milliseconds, through the invalidation
// Redis sends B.
func TestTwoNodes(t *testing.T) {
	srv := redisServer(t)
	a := open(t, []string{srv.Addr}, Options{Prefix: "two:"})
	b := open(t, []string{srv.Addr}, Options{Prefix: "two:"})
	ctx := context.Background()
	const tok = bow.Hash(77)
	if _, err := a.Apply(ctx, "u", []store.Op{storetest.Train("m1", "spam", map[bow.Hash]uint32{tok: 1})}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, b, "u", tok); n != 1 {
		t.Fatalf("node B sees %d", n)
	}
	if _, err := b.Totals(ctx, "u"); err != nil {
		t.Fatal(err)
	}
	// Any change of a key is announced, not only a store's: B sees one
	// made with a plain command.
	if _, err := srv.Command("HSET", "two:{u:}t", "voc", "999"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	tot, _ := b.Totals(ctx, "u")
	if tot.Vocabulary != 999 {
		t.Errorf("an invalidation of a key not changed by a store: vocabulary %d", tot.Vocabulary)
	}
	if _, err := srv.Command("HSET", "two:{u:}t", "voc", "1"); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		op   store.Op
		want uint64
	}{
		{storetest.Train("m2", "spam", map[bow.Hash]uint32{tok: 2}), 3},
		{storetest.Train("m1", "ham", map[bow.Hash]uint32{tok: 1}), 2}, // relabel
	} {
		if _, err := a.Apply(ctx, "u", []store.Op{step.op}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for count(t, b, "u", tok) != step.want {
			if time.Since(start) > 2*time.Second {
				t.Fatalf("node B still sees %d, want %d", count(t, b, "u", tok), step.want)
			}
			time.Sleep(time.Millisecond)
		}
		t.Logf("node B saw node A's change after %v", time.Since(start))
	}
}

// TestRedisDown stops Redis under a node: reads answer from the cache
// and say so, writes fail at once with ErrUnavailable, nothing waits
// past its timeout, and once Redis is back everything is read afresh.
func TestRedisDown(t *testing.T) {
	srv := redisServer(t, "--appendonly", "yes", "--appendfsync", "always")
	s := open(t, []string{srv.Addr}, Options{ReadTimeout: 200 * time.Millisecond})
	ctx := context.Background()
	ops := []store.Op{
		storetest.Train("m1", "spam", map[bow.Hash]uint32{1: 1, 2: 2}),
		storetest.Train("m2", "ham", map[bow.Hash]uint32{2: 1, 3: 1}),
	}
	if _, err := s.Apply(ctx, "", ops); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Warm(ctx, ""); err != nil || n != 3 {
		t.Fatalf("Warm = %d, %v", n, err)
	}
	if stale, _ := s.Stale(); stale {
		t.Fatal("stale with Redis up")
	}

	srv.Kill()
	// The node learns of it from the lost connection, or from its next
	// read; either way it answers from the cache.
	start := time.Now()
	c, err := s.Lookup(ctx, "", []bow.Hash{1, 2, 3, 4})
	if err != nil {
		t.Fatalf("Lookup with Redis down: %v", err)
	}
	if c[0].Count(0) != 1 || c[1].Count(0) != 2 || c[1].Count(1) != 1 || c[2].Count(1) != 1 || c[3] != nil {
		t.Errorf("Lookup with Redis down = %v", c)
	}
	tot, err := s.Totals(ctx, "")
	if err != nil || tot.Messages[0] != 1 || tot.Messages[1] != 1 {
		t.Errorf("Totals with Redis down = %+v, %v", tot, err)
	}
	if _, err := s.Totals(ctx, "nobody"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Totals of a user not cached, Redis down: %v, want ErrUnavailable", err)
	}
	if _, err := s.Seen(ctx, "", storetest.D("m1")); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Seen with Redis down: %v, want ErrUnavailable", err)
	}
	res, err := s.Apply(ctx, "", []store.Op{storetest.Train("m3", "spam", map[bow.Hash]uint32{1: 1})})
	if !errors.Is(err, ErrUnavailable) || len(res) != 0 {
		t.Errorf("Apply with Redis down = %v, %v; want ErrUnavailable", res, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("calls with Redis down took %v", d)
	}
	// The first reads may have come from the cache before the node knew
	// Redis was gone; one now is answered knowing it, and counted.
	if _, err := s.Lookup(ctx, "", []bow.Hash{1, 2}); err != nil {
		t.Errorf("Lookup with Redis known down: %v", err)
	}
	if stale, n := s.Stale(); !stale || n == 0 {
		t.Errorf("Stale = %v, %d with Redis down", stale, n)
	}

	srv.Restart(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := s.Apply(ctx, "", []store.Op{storetest.Train("m3", "spam", map[bow.Hash]uint32{1: 1})})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Apply after Redis came back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := count(t, s, "", 1); n != 2 {
		t.Errorf("after Redis came back, count %d, want 2", n)
	}
	if stale, _ := s.Stale(); stale {
		t.Error("still stale after Redis answered")
	}
	storetest.Expect(t, s, "", storetest.State{
		Messages: map[string]uint64{"spam": 2, "ham": 1}, Tokens: map[string]uint64{"spam": 4, "ham": 2}, Vocabulary: 3,
		Counts: map[bow.Hash]map[string]uint64{1: {"spam": 2}, 2: {"spam": 2, "ham": 1}, 3: {"ham": 1}},
		Seen:   map[string]string{"m1": "spam", "m2": "ham", "m3": "spam"},
	})
}

// TestRedisHung freezes Redis (SIGSTOP): nothing may wait for it past
// the read timeout or the caller's deadline.
func TestRedisHung(t *testing.T) {
	srv := redisServer(t)
	s := open(t, []string{srv.Addr}, Options{ReadTimeout: 200 * time.Millisecond})
	ctx := context.Background()
	if _, err := s.Apply(ctx, "", []store.Op{storetest.Train("m1", "spam", map[bow.Hash]uint32{1: 1})}); err != nil {
		t.Fatal(err)
	}
	// The invalidation of the node's own write comes back over the
	// tracking connection at its own pace, and empties the bucket again
	// if it arrives after the read below; let it arrive first.
	time.Sleep(100 * time.Millisecond)
	if n := count(t, s, "", 1); n != 1 {
		t.Fatal(n)
	}
	if err := srv.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer srv.Signal(syscall.SIGCONT)
	start := time.Now()
	// Token 2 is not cached: the read goes to Redis, waits its timeout,
	// and falls back to the cache.
	c, err := s.Lookup(ctx, "", []bow.Hash{1, 2})
	if err != nil || c[0].Count(0) != 1 || c[1] != nil {
		t.Errorf("Lookup with Redis hung = %v, %v", c, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Lookup with Redis hung took %v", d)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := s.Apply(wctx, "", []store.Op{storetest.Train("m2", "spam", map[bow.Hash]uint32{1: 1})}); err == nil {
		t.Error("Apply with Redis hung succeeded")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Apply with Redis hung and a deadline of 300ms took %v", d)
	}
}

// TestScriptEncoding checks that the apply script writes rows byte for
// byte as appendRow does, in both forms and with days of every width, so
// that Go can write a model the scripts read (as a restore would) and the
// other way round; and that it reads them back: a second message of an
// earlier day adds to the counts and leaves the day.
func TestScriptEncoding(t *testing.T) {
	srv := redisServer(t)
	s := open(t, []string{srv.Addr}, Options{NoStaleReads: true})
	ctx := context.Background()
	neg := func(w int64) uint64 { return uint64(w) }
	for i, tt := range []struct {
		n     uint32
		steps []store.Step
		day   store.Day
		want  []uint64
	}{
		{1, nil, 20417, []uint64{1}},
		{1, nil, 0, []uint64{1}},
		{1, nil, 1<<32 - 1, []uint64{1}},
		{3, []store.Step{{Class: "spam", Body: -70000}, {Class: "ham", Body: 9}}, 200, []uint64{3, neg(-210000), 0, 27}},
		{200, []store.Step{{Class: "spam", Body: 1 << 20}}, 1 << 16, []uint64{200, neg(200 << 20)}},
		{1, []store.Step{{Class: "unsure", Body: 1}}, 20417, []uint64{1, 0, 0, 0, 0, 1}},
		{1, []store.Step{{Class: "unsure", Body: 1}}, 1<<32 - 1, []uint64{1, 0, 0, 0, 0, 1}},
		{1, []store.Step{{Class: "unsure", Body: 1}}, 1 << 14, []uint64{1, 0, 0, 0, 0, 1}},
	} {
		h := bow.Hash(1000 + i)
		row := func() string {
			tot, err := s.readTotals(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			got, err := srv.Command("HGET", s.keys.bucket("", tot.layout.bucket(h)), field(h))
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		op := storetest.TrainSteps(fmt.Sprint("enc", i), "spam", nil, map[bow.Hash]uint32{h: tt.n}, tt.steps...)
		op.Day = tt.day
		if _, err := s.Apply(ctx, "", []store.Op{op}); err != nil {
			t.Fatal(err)
		}
		if got, want := row(), string(appendRow(nil, tt.want, tt.day)); got != want {
			t.Errorf("row %v of day %d: the script wrote %x, appendRow %x", tt.want, tt.day, got, want)
		}
		again := storetest.TrainOn(fmt.Sprint("enc-again", i), "spam", tt.day/2, 0, map[bow.Hash]uint32{h: 1})
		if _, err := s.Apply(ctx, "", []store.Op{again}); err != nil {
			t.Fatal(err)
		}
		want := slices.Clone(tt.want)
		want[0]++
		if got, want := row(), string(appendRow(nil, want, tt.day)); got != want {
			t.Errorf("row %v of day %d, trained again on day %d: the script wrote %x, appendRow %x", want, tt.day, tt.day/2, got, want)
		}
	}
}

// aclRule is the ACL docs/cluster.md gives spamd's user: its keys, and
// the commands the store and its client send, nothing else.
const aclRule = "on resetkeys ~spamd:* resetchannels -@all +@connection +hget +hmget +hset +hdel +hgetall +hscan +scan +del " +
	"+evalsha +evalsha_ro +eval +eval_ro +cluster|slots +cluster|shards +cluster|nodes +memory|usage"

// TestACL runs a store as an ACL user limited to aclRule.
func TestACL(t *testing.T) {
	srv := redisServer(t)
	args := append([]string{"ACL", "SETUSER", "spamd"}, strings.Fields(aclRule)...)
	if _, err := srv.Command(append(args, ">s3cret")...); err != nil {
		t.Fatal(err)
	}
	s := open(t, []string{srv.Addr}, Options{Prefix: "spamd:", Username: "spamd", Password: "s3cret", NoStaleReads: true})
	ctx := context.Background()
	if _, err := s.Apply(ctx, "u", []store.Op{storetest.TrainOn("m1", "spam", 1, 0, map[bow.Hash]uint32{1: 1})}); err != nil {
		t.Fatal(err)
	}
	storetest.Expect(t, s, "u", storetest.State{
		Messages: map[string]uint64{"spam": 1}, Tokens: map[string]uint64{"spam": 1}, Vocabulary: 1,
		Counts: map[bow.Hash]map[string]uint64{1: {"spam": 1}}, Seen: map[string]string{"m1": "spam"},
	})
	if users, err := s.Users(ctx); err != nil || len(users) != 1 {
		t.Errorf("Users = %q, %v", users, err)
	}
	if n, err := s.Warm(ctx, "u"); err != nil || n != 1 {
		t.Errorf("Warm = %d, %v", n, err)
	}
	if n, err := s.UserSize(ctx, "u"); err != nil || n == 0 {
		t.Errorf("UserSize = %d, %v", n, err)
	}
	if res, err := s.Prune(ctx, "u", store.PruneRule{MaxCount: 1, Before: 2, MaxTokens: 1, SeenBefore: 2}); err != nil || res.Tokens != 1 || res.Seen != 1 {
		t.Errorf("Prune = %+v, %v", res, err)
	}
	// Keys outside the prefix are out of reach.
	if _, err := Open(ctx, Options{Addresses: []string{srv.Addr}, Prefix: "other:", Username: "spamd", Password: "s3cret"}); err == nil {
		t.Error("a store under another prefix opened")
	}
}

// TestSentinel opens a store through a Sentinel, which names the master.
func TestSentinel(t *testing.T) {
	bin := redistest.Binary(t, "SPAMD_REDIS_SERVER", "redis-server")
	_, master := redistest.StartTCP(t, bin)
	sentinel := redistest.StartSentinel(t, bin, "spamd", master)
	s := open(t, []string{sentinel}, Options{SentinelMaster: "spamd", NoStaleReads: true})
	ctx := context.Background()
	if _, err := s.Apply(ctx, "u", []store.Op{storetest.Train("m1", "spam", map[bow.Hash]uint32{1: 2})}); err != nil {
		t.Fatal(err)
	}
	storetest.Expect(t, s, "u", storetest.State{
		Messages: map[string]uint64{"spam": 1}, Tokens: map[string]uint64{"spam": 2}, Vocabulary: 1,
		Counts: map[bow.Hash]map[string]uint64{1: {"spam": 2}}, Seen: map[string]string{"m1": "spam"},
	})
}

// TestTLS opens a store over TLS, checking the server's certificate
// against a CA of the test's own.
func TestTLS(t *testing.T) {
	bin := redistest.Binary(t, "SPAMD_REDIS_SERVER", "redis-server")
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "redis.test"}, DNSNames: []string{"redis.test"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caCert, _ := x509.ParseCertificate(caDER)
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(srvKey)
	files := map[string]*pem.Block{
		"ca.pem":  {Type: "CERTIFICATE", Bytes: caDER},
		"crt.pem": {Type: "CERTIFICATE", Bytes: leafDER},
		"key.pem": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	port := freeTCPPort(t)
	srv := redistest.Start(t, bin, "--tls-port", strconv.Itoa(port), "--tls-cert-file", filepath.Join(dir, "crt.pem"),
		"--tls-key-file", filepath.Join(dir, "key.pem"), "--tls-ca-cert-file", filepath.Join(dir, "ca.pem"), "--tls-auth-clients", "no")
	_ = srv
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	s := open(t, []string{addr}, Options{TLS: &tls.Config{RootCAs: pool, ServerName: "redis.test"}, NoStaleReads: true})
	ctx := context.Background()
	if _, err := s.Apply(ctx, "u", []store.Op{storetest.Train("m1", "spam", map[bow.Hash]uint32{1: 1})}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, "u", 1); n != 1 {
		t.Errorf("count %d over TLS", n)
	}
	// A client that does not trust the CA is refused.
	if _, err := Open(ctx, Options{Addresses: []string{addr}, TLS: &tls.Config{ServerName: "redis.test"}}); err == nil {
		t.Error("a store opened over TLS without trusting the server's CA")
	}
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
