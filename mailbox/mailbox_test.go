package mailbox

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// collect walks src and returns the messages and the per-file errors.
func collect(t *testing.T, src string, o Options) ([]Message, map[string]error) {
	t.Helper()
	errs := map[string]error{}
	o.OnError = func(path string, err error) { errs[path] = err }
	var msgs []Message
	err := Walk(context.Background(), src, o, func(m Message) error {
		msgs = append(msgs, m)
		return nil
	})
	if err != nil {
		t.Fatalf("Walk(%q): %v", src, err)
	}
	return msgs, errs
}

func paths(msgs []Message) []string {
	var p []string
	for _, m := range msgs {
		p = append(p, m.Path)
	}
	return p
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWalkSources(t *testing.T) {
	md := filepath.Join("testdata", "maildir")
	cur1 := filepath.Join(md, "cur", "1700000001.M1P100.mx.example.org")
	cur5 := filepath.Join(md, "cur", "1700000005.M5P100.mx.example.org")
	new2 := filepath.Join(md, "new", "1700000002.M2P100.mx.example.org")
	junk4 := filepath.Join(md, ".Junk", "cur", "1700000004.M4P100.mx.example.org")
	mbox := filepath.Join("testdata", "mbox")
	crlf := filepath.Join("testdata", "mbox-crlf")
	single := filepath.Join("testdata", "single.eml")
	dir := filepath.Join("testdata", "dir")
	a := filepath.Join(dir, "a.eml")
	b := filepath.Join(dir, "b.mbox")
	c := filepath.Join(dir, "sub", "c.eml")
	tests := []struct {
		name      string
		src       string
		recursive bool
		want      []string
	}{
		{"maildir", md, false, []string{cur1, cur5, new2}},
		{"maildir recursive", md, true, []string{cur1, cur5, new2, junk4}},
		{"maildir++ folder", filepath.Join(md, ".Junk"), false, []string{junk4}},
		{"mbox", mbox, false, []string{"mbox " + mbox + "#1", "mbox " + mbox + "#2", "mbox " + mbox + "#3"}},
		{"mbox crlf", crlf, false, []string{"mbox " + crlf + "#1", "mbox " + crlf + "#2", "mbox " + crlf + "#3"}},
		{"single message", single, false, []string{single}},
		{"directory", dir, false, []string{a, "mbox " + b + "#1", "mbox " + b + "#2"}},
		{"directory recursive", dir, true, []string{a, "mbox " + b + "#1", "mbox " + b + "#2", c}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, errs := collect(t, tt.src, Options{Recursive: tt.recursive})
			if len(errs) > 0 {
				t.Errorf("errors: %v", errs)
			}
			if got := paths(msgs); !slices.Equal(got, tt.want) {
				t.Errorf("paths\n got %q\nwant %q", got, tt.want)
			}
			if n, err := Count(context.Background(), tt.src, Options{Recursive: tt.recursive}); err != nil || n != len(tt.want) {
				t.Errorf("Count = %d, %v; the walk gives %d", n, err, len(tt.want))
			}
			for _, m := range msgs {
				if m.Label != "" || m.Truncated {
					t.Errorf("%s: Label %q, Truncated %v", m.Path, m.Label, m.Truncated)
				}
				if !strings.HasPrefix(m.Path, "mbox ") && !bytes.Equal(m.Raw, readFile(t, m.Path)) {
					t.Errorf("%s: Raw differs from the file", m.Path)
				}
			}
		})
	}
}

func TestMboxContent(t *testing.T) {
	first := "From: Alice <alice@example.org>\nTo: bob@example.org\nSubject: first\n\n" +
		"Hello Bob,\nFrom the quoted line one '>' goes,\n>From this one keeps one.\n" +
		"From here on is no separator: no blank line comes before it.\n"
	second := "From: Bob <bob@example.org>\nTo: alice@example.org\nSubject: second\n\nSecond body.\n"
	third := "From: Mail Delivery System <MAILER-DAEMON@example.org>\nTo: alice@example.org\n" +
		"Subject: third\n\nThird body, no trailing blank line.\n"
	lf := []string{first, second, third}
	var crlf []string
	for _, s := range lf {
		crlf = append(crlf, strings.ReplaceAll(s, "\n", "\r\n"))
	}
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"lf", "mbox", lf},
		{"crlf", "mbox-crlf", crlf},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, _ := collect(t, filepath.Join("testdata", tt.file), Options{})
			if len(msgs) != len(tt.want) {
				t.Fatalf("got %d messages, want %d", len(msgs), len(tt.want))
			}
			for i, m := range msgs {
				if string(m.Raw) != tt.want[i] {
					t.Errorf("%s\n got %q\nwant %q", m.Path, m.Raw, tt.want[i])
				}
			}
		})
	}
}

func TestWalkStdin(t *testing.T) {
	single := readFile(t, filepath.Join("testdata", "single.eml"))
	mbox := readFile(t, filepath.Join("testdata", "mbox"))
	tests := []struct {
		name  string
		input []byte
		want  []string
	}{
		{"single message", single, []string{"-"}},
		{"no From line", []byte("Subject: hi\n\nbody\n"), []string{"-"}},
		{"mbox", mbox, []string{"mbox -#1", "mbox -#2", "mbox -#3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, _ := collect(t, "-", Options{Stdin: bytes.NewReader(tt.input)})
			if got := paths(msgs); !slices.Equal(got, tt.want) {
				t.Fatalf("paths %q, want %q", got, tt.want)
			}
			if len(msgs) == 1 && !bytes.Equal(msgs[0].Raw, tt.input) {
				t.Errorf("Raw %q, want the input unchanged", msgs[0].Raw)
			}
		})
	}
}

func TestMaxBytes(t *testing.T) {
	single := filepath.Join("testdata", "single.eml")
	size := len(readFile(t, single))
	mbox := filepath.Join("testdata", "mbox")
	whole, _ := collect(t, mbox, Options{})
	const fromLine = "From alice@example.org Mon Jan  1 10:00:00 2024\n"
	tests := []struct {
		name    string
		src     string
		max     int64
		wantLen []int
		wantTr  []bool
	}{
		{"single under cap", single, int64(size + 1), []int{size}, []bool{false}},
		{"single at cap", single, int64(size), []int{size}, []bool{false}},
		{"single over cap", single, 10, []int{10}, []bool{true}},
		// Of the raw mbox chunks (252, 127 and 173 bytes) only the first
		// is over the cap; cutting it must not move the other separators.
		// The cap counts raw bytes: the first message loses its "From "
		// line and the '>' of its two quoted lines.
		{"mbox", mbox, 200, []int{200 - len(fromLine) - 2, len(whole[1].Raw), len(whole[2].Raw)}, []bool{true, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, _ := collect(t, tt.src, Options{MaxBytes: tt.max})
			var lens []int
			var trs []bool
			for _, m := range msgs {
				lens = append(lens, len(m.Raw))
				trs = append(trs, m.Truncated)
			}
			if !slices.Equal(lens, tt.wantLen) || !slices.Equal(trs, tt.wantTr) {
				t.Errorf("lengths %v truncated %v, want %v %v", lens, trs, tt.wantLen, tt.wantTr)
			}
		})
	}
}

// TestMaildirFlags uses a temporary maildir because ':' is not allowed in
// the file names of a Go module, testdata included.
func TestMaildirFlags(t *testing.T) {
	dir := t.TempDir()
	names := []string{"1700000002.M2P1.host:2,S", "1700000001.M1P1.host:2,RS", "1700000003.M3P1.host:2,"}
	for _, sub := range []string{"cur", "new", "tmp"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, "cur", n), []byte("Subject: "+n+"\n\nbody\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	msgs, _ := collect(t, dir, Options{})
	want := []string{
		filepath.Join(dir, "cur", names[1]),
		filepath.Join(dir, "cur", names[0]),
		filepath.Join(dir, "cur", names[2]),
	}
	if got := paths(msgs); !slices.Equal(got, want) {
		t.Errorf("paths %q, want %q", got, want)
	}
}

func TestWalkErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.eml")
	if err := os.WriteFile(good, []byte("Subject: ok\n\nbody\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A dangling link fails to open even for root, unlike a chmod 000 file.
	broken := filepath.Join(dir, "broken.eml")
	if err := os.Symlink(filepath.Join(dir, "missing"), broken); err != nil {
		t.Fatal(err)
	}

	t.Run("OnError", func(t *testing.T) {
		msgs, errs := collect(t, dir, Options{})
		if got := paths(msgs); !slices.Equal(got, []string{good}) {
			t.Errorf("paths %q, want the good file", got)
		}
		if err := errs[broken]; !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("error for %s: %v, want fs.ErrNotExist", broken, err)
		}
	})
	t.Run("joined", func(t *testing.T) {
		var n int
		err := Walk(context.Background(), dir, Options{}, func(Message) error { n++; return nil })
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), broken) {
			t.Errorf("err %v, want one naming %s", err, broken)
		}
		if n != 1 {
			t.Errorf("%d messages, want the walk to go on to the good one", n)
		}
	})
	t.Run("missing source", func(t *testing.T) {
		err := Walk(context.Background(), filepath.Join(dir, "nope"), Options{}, func(Message) error { return nil })
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("err %v, want fs.ErrNotExist", err)
		}
	})
	t.Run("not regular", func(t *testing.T) {
		fifo := filepath.Join(t.TempDir(), "fifo")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		// Opening the FIFO would wait for a writer forever: the walk
		// must refuse it without opening it.
		for src, kind := range map[string]string{fifo: "named pipe", "/dev/zero": "character device"} {
			err := Walk(context.Background(), src, Options{}, func(Message) error { return nil })
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), kind) || !strings.Contains(err.Error(), "give -") {
				t.Errorf("%s: err %v, want ErrNotRegular naming a %s", src, err, kind)
			}
		}
	})
}

func TestWalkStops(t *testing.T) {
	errStop := errors.New("stop")
	src := filepath.Join("testdata", "mbox")
	t.Run("fn error", func(t *testing.T) {
		var n int
		err := Walk(context.Background(), src, Options{}, func(Message) error { n++; return errStop })
		if !errors.Is(err, errStop) || n != 1 {
			t.Errorf("err %v after %d messages, want errStop after 1", err, n)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var n int
		err := Walk(ctx, filepath.Join("testdata", "maildir"), Options{Recursive: true}, func(Message) error {
			n++
			cancel()
			return nil
		})
		if !errors.Is(err, context.Canceled) || n != 1 {
			t.Errorf("err %v after %d messages, want context.Canceled after 1", err, n)
		}
	})
}

func TestCountStdin(t *testing.T) {
	if _, err := Count(context.Background(), Stdin, Options{}); !errors.Is(err, ErrUncountable) {
		t.Errorf("Count of standard input: %v", err)
	}
	if _, err := Count(context.Background(), filepath.Join("testdata", "no such"), Options{}); err == nil {
		t.Error("Count of a missing source: no error")
	}
}
