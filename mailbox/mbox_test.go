package mailbox

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// chunks runs the raw splitter over in to its end.
func chunks(in []byte, max int64, bufSize int) (raw []string, truncated []bool, err error) {
	s := newSplitter(bytes.NewReader(in), max, bufSize)
	for {
		c, tr, err := s.chunk()
		if errors.Is(err, io.EOF) {
			return raw, truncated, nil
		}
		if err != nil {
			return raw, truncated, err
		}
		raw = append(raw, string(c))
		truncated = append(truncated, tr)
	}
}

func TestMboxReader(t *testing.T) {
	long := strings.Repeat("x", 100)
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr error
	}{
		{"empty", "", nil, nil},
		{"not mbox", "Subject: hi\n\nFrom x\n", nil, ErrNotMbox},
		{"one", "From a\nS: 1\n\nbody\n", []string{"S: 1\n\nbody\n"}, nil},
		{"two", "From a\nS: 1\n\nFrom b\nS: 2\n", []string{"S: 1\n", "S: 2\n"}, nil},
		{"needs blank line", "From a\nS: 1\nFrom b\nS: 2\n", []string{"S: 1\nFrom b\nS: 2\n"}, nil},
		{"crlf", "From a\r\nS: 1\r\n\r\nFrom b\r\nS: 2\r\n\r\n", []string{"S: 1\r\n", "S: 2\r\n"}, nil},
		{"mboxrd quoting", "From a\n\n>From x\n>>From y\n> From z\n>Fromage\n", []string{"\nFrom x\n>From y\n> From z\n>Fromage\n"}, nil},
		{"quoted From is no separator", "From a\nS: 1\n\n>From b\n", []string{"S: 1\n\nFrom b\n"}, nil},
		{"blank lines kept", "From a\nS: 1\n\nbody\n\n\n\nFrom b\n", []string{"S: 1\n\nbody\n\n\n", ""}, nil},
		{"no final newline", "From a\nS: 1", []string{"S: 1"}, nil},
		{"long lines", "From " + long + "\nS: " + long + "\n\nFrom b" + long + "\n" + long, []string{"S: " + long + "\n", long}, nil},
		{"From in a long line", "From a\n" + long + "\nFrom b\n\n" + long + "From c\n", []string{long + "\nFrom b\n\n" + long + "From c\n"}, nil},
	}
	for _, tt := range tests {
		// A 16-byte buffer, the smallest bufio allows, makes every long
		// line arrive in pieces.
		for _, bufSize := range []int{16, readBufSize} {
			t.Run(tt.name, func(t *testing.T) {
				r := &MboxReader{s: newSplitter(strings.NewReader(tt.in), DefaultMaxBytes, bufSize)}
				var got []string
				var err error
				for {
					var raw []byte
					raw, _, err = r.Next()
					if err != nil {
						break
					}
					got = append(got, string(raw))
				}
				if errors.Is(err, io.EOF) {
					err = nil
				}
				if !errors.Is(err, tt.wantErr) || !slices.Equal(got, tt.want) {
					t.Errorf("buffer %d: got %q, %v\nwant %q, %v", bufSize, got, err, tt.want, tt.wantErr)
				}
			})
		}
	}
}

// FuzzMbox checks the splitter on any input: it must not panic, must cut
// the same chunks whatever its buffer size, must lose no byte unless it
// truncates, and truncating must not move the cuts.
func FuzzMbox(f *testing.F) {
	for _, name := range []string{"mbox", "mbox-crlf", "single.eml", filepath.Join("dir", "b.mbox")} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("From \n\nFrom \n>From \r\n\r\nFrom x"))
	f.Fuzz(func(t *testing.T, in []byte) {
		whole, _, err := chunks(in, DefaultMaxBytes, readBufSize)
		if err != nil {
			if !errors.Is(err, ErrNotMbox) || bytes.HasPrefix(in, fromPrefix) {
				t.Fatalf("err %v", err)
			}
			return
		}
		if got := strings.Join(whole, ""); got != string(in) {
			t.Fatalf("chunks join to %q, want the input", got)
		}
		small, _, err := chunks(in, DefaultMaxBytes, 16)
		if err != nil || !slices.Equal(small, whole) {
			t.Fatalf("16-byte buffer: %q, %v; want %q", small, err, whole)
		}
		const max = 8
		cut, truncated, err := chunks(in, max, 16)
		if err != nil || len(cut) != len(whole) {
			t.Fatalf("cap %d: %d chunks, %v; want %d", max, len(cut), err, len(whole))
		}
		for i := range cut {
			if !strings.HasPrefix(whole[i], cut[i]) || truncated[i] != (len(whole[i]) > max) {
				t.Fatalf("cap %d: chunk %d is %q (truncated %v), of %q", max, i, cut[i], truncated[i], whole[i])
			}
		}
		r := NewMboxReader(bytes.NewReader(in), 0)
		for i := 0; ; i++ {
			msg, _, err := r.Next()
			if errors.Is(err, io.EOF) {
				if i != len(whole) {
					t.Fatalf("MboxReader: %d messages, want %d", i, len(whole))
				}
				break
			}
			if err != nil {
				t.Fatalf("MboxReader: %v", err)
			}
			if len(msg) >= len(whole[i]) {
				t.Fatalf("message %d: %q is not shorter than its chunk %q", i, msg, whole[i])
			}
		}
	})
}
