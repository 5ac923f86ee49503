package mailbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestReadIndex(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		want    []Entry
		wantErr string
	}{
		{"good", "index", []Entry{
			{"spam", filepath.Join("testdata", "single.eml")},
			{"ham", filepath.Join("testdata", "dir", "a.eml")},
			{"ham", filepath.Join("testdata", "maildir", "cur", "1700000001.M1P100.mx.example.org")},
			{"spam", filepath.Join("testdata", "dir", "b.mbox")},
		}, ""},
		{"bad line", "index-bad", nil, "index-bad: line 3:"},
		{"missing", "no-such-index", nil, "no-such-index"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadIndex(filepath.Join("testdata", tt.file))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tt.wantErr)
				}
				if tt.name == "bad line" && !errors.Is(err, ErrMalformedIndex) {
					t.Errorf("err %v, want ErrMalformedIndex", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestWalkIndex(t *testing.T) {
	var got []string
	err := WalkIndex(context.Background(), filepath.Join("testdata", "index"), Options{}, func(m Message) error {
		got = append(got, m.Label+" "+m.Path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	b := filepath.Join("testdata", "dir", "b.mbox")
	want := []string{
		"spam " + filepath.Join("testdata", "single.eml"),
		"ham " + filepath.Join("testdata", "dir", "a.eml"),
		"ham " + filepath.Join("testdata", "maildir", "cur", "1700000001.M1P100.mx.example.org"),
		"spam mbox " + b + "#1",
		"spam mbox " + b + "#2",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// TestCorpusIndex reads the index of a real corpus, such as the
// SpamAssassin public corpus, from the directory in $SPAMD_CORPUS.
func TestCorpusIndex(t *testing.T) {
	dir := os.Getenv("SPAMD_CORPUS")
	if dir == "" {
		t.Skip("SPAMD_CORPUS is not set")
	}
	index := filepath.Join(dir, "index")
	if _, err := os.Stat(index); err != nil {
		t.Skipf("no corpus index: %v", err)
	}
	entries, err := ReadIndex(index)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		t.Fatal("no entries")
	}
	for _, e := range entries {
		if _, err := os.Stat(e.Path); err != nil {
			t.Errorf("entry %s %s: %v", e.Label, e.Path, err)
		}
	}
	var n int
	err = WalkIndex(context.Background(), index, Options{}, func(m Message) error {
		if m.Label == "" || len(m.Raw) == 0 || strings.HasPrefix(m.Path, "mbox ") {
			t.Errorf("%s: label %q, %d bytes", m.Path, m.Label, len(m.Raw))
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != len(entries) {
		t.Errorf("walked %d messages, want one per entry: %d", n, len(entries))
	}
	t.Logf("%d entries", len(entries))
}

// FuzzReadIndex checks that any index file either parses into entries
// with a label and a path, or fails with an error; it never panics.
func FuzzReadIndex(f *testing.F) {
	f.Add([]byte("spam a/1\nham b/2\n"))
	f.Add([]byte("# comment\n\nspam\tpath with spaces\n"))
	f.Add([]byte("spam\n"))
	f.Add([]byte("ham /abs/path\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "index")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		entries, err := ReadIndex(path)
		if err != nil {
			return
		}
		for _, e := range entries {
			if e.Label == "" || e.Path == "" {
				t.Errorf("entry %+v lacks a label or a path", e)
			}
		}
	})
}
