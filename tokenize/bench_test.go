package tokenize

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkTokenize tokenizes the fixtures and, when SPAMD_CORPUS names a
// corpus, its messages, one message per iteration in turn, on one
// goroutine.
func BenchmarkTokenize(b *testing.B) {
	b.Run("fixtures", func(b *testing.B) {
		files, err := filepath.Glob("testdata/*.eml")
		if err != nil || len(files) == 0 {
			b.Fatal("no fixtures", err)
		}
		var msgs [][]byte
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				b.Fatal(err)
			}
			msgs = append(msgs, raw)
		}
		benchTokenize(b, msgs)
	})
	b.Run("corpus", func(b *testing.B) {
		var msgs [][]byte
		for _, m := range loadCorpus(b) {
			msgs = append(msgs, m.raw)
		}
		benchTokenize(b, msgs)
	})
}

func benchTokenize(b *testing.B, msgs [][]byte) {
	total := 0
	for _, m := range msgs {
		total += len(m)
	}
	b.SetBytes(int64(total / len(msgs)))
	tok := New(DefaultOptions())
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := tok.Tokenize(msgs[i%len(msgs)]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkDigest digests the fixtures.
func BenchmarkDigest(b *testing.B) {
	files, _ := filepath.Glob("testdata/*.eml")
	var msgs [][]byte
	total := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, raw)
		total += len(raw)
	}
	b.SetBytes(int64(total / len(msgs)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		Digest(msgs[i%len(msgs)])
	}
}
