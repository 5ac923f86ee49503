package mailbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkWalkFiles walks a directory of single-message files, as a
// corpus is laid out: one with an mbox envelope line, as TREC's and the
// SpamAssassin corpus's files have, and one without. What a walk costs
// beyond the messages' own bytes is in B/op.
func BenchmarkWalkFiles(b *testing.B) {
	body := strings.Repeat("a line of a message body, long enough to be typical\n", 100)
	for _, tt := range []struct{ name, envelope string }{
		{"envelope", "From sender@example.com  Mon Jun 24 17:06:06 2002\n"},
		{"plain", ""},
	} {
		b.Run(tt.name, func(b *testing.B) {
			dir := b.TempDir()
			const files = 200
			for i := range files {
				msg := fmt.Sprintf("%sSubject: %d\n\n%s", tt.envelope, i, body)
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), []byte(msg), 0o600); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				err := Walk(context.Background(), dir, Options{}, func(m Message) error {
					if len(m.Raw) < len(body) {
						return fmt.Errorf("%s: %d bytes", m.Path, len(m.Raw))
					}
					n++
					return nil
				})
				if err != nil || n != files {
					b.Fatalf("%d messages, %v", n, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*files), "ns/msg")
		})
	}
}
