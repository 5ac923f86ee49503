package history

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkAdd measures what recording one verdict costs the milter: an
// entry of a typical message (two recipients, three features toward
// each class) and its 5.4 KB, the SpamAssassin corpus's average, into a
// ring of the default size (1,000 entries, 32 MiB of messages) that is
// full, so that each Add also evicts and lets go. Run it with -cpu 1,2 to
// see the lock shared by the milter's sessions.
func BenchmarkAdd(b *testing.B) {
	r, err := New(Options{Size: 1000, MaxMessageBytes: 32 << 20})
	if err != nil {
		b.Fatal(err)
	}
	raw := make([]byte, 5400)
	feats := func(prefix string) []Feature {
		fs := make([]Feature, 3)
		for i := range fs {
			fs[i] = Feature{Name: fmt.Sprintf("%s:token%d", prefix, i), Value: 1, Weight: 0.1}
		}
		return fs
	}
	toward := map[string][]Feature{"spam": feats("s"), "ham": feats("h")}
	for range 2000 {
		r.Add(Entry{Verdict: "ham", Recipients: []string{"a@example.org"}}, raw)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.Add(Entry{Time: time.Now(), QueueID: "4ABCDEF", Sender: "sender@example.net",
				Recipients: []string{"alice@example.org", "bob@example.org"}, Users: []string{"alice", "bob"},
				Models: []string{""}, Subject: "Re: the meeting", Verdict: "ham", Probability: 0.01, Score: -4.2,
				Required: 3, Action: "accept", Size: 5400, ElapsedMS: 1.2, Toward: toward}, raw)
		}
	})
}
