package tokenize

import (
	"bufio"
	"bytes"
	"io"
	"mime/quotedprintable"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// readQP reads r to its end or error in reads of at most size bytes, as
// readPart does, and returns what it read and the error that ended it
// ("" for io.EOF).
func readQP(r io.Reader, size int) ([]byte, string) {
	var out []byte
	buf := make([]byte, size)
	for range 1 << 20 {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, ""
		}
		if err != nil {
			return out, err.Error()
		}
	}
	return out, "no progress"
}

// sources are the readers a part's bytes come from in the tests: whole,
// a byte at a time, with io.EOF beside the last bytes, and cut short by
// an error, as a multipart part without its closing boundary is.
var sources = []struct {
	name string
	wrap func([]byte) io.Reader
}{
	{"bytes", func(b []byte) io.Reader { return bytes.NewReader(b) }},
	{"one byte", func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) }},
	{"data and EOF", func(b []byte) io.Reader { return iotest.DataErrReader(bytes.NewReader(b)) }},
	{"cut short", func(b []byte) io.Reader {
		return io.MultiReader(bytes.NewReader(b), iotest.ErrReader(io.ErrUnexpectedEOF))
	}},
	{"bufio", func(b []byte) io.Reader { return bufio.NewReaderSize(bytes.NewReader(b), 8192) }},
}

// checkQP holds qpReader to the standard library's Reader on data.
func checkQP(t *testing.T, data []byte, size int) {
	t.Helper()
	var q qpReader
	for _, src := range sources {
		want, wantErr := readQP(quotedprintable.NewReader(src.wrap(data)), size)
		q.reset(src.wrap(data))
		got, gotErr := readQP(&q, size)
		if !bytes.Equal(got, want) || gotErr != wantErr {
			t.Fatalf("%s, reads of %d, %q:\ngot  %q, %q\nwant %q, %q", src.name, size, data, got, gotErr, want, wantErr)
		}
	}
}

func TestQPReader(t *testing.T) {
	long := strings.Repeat("x", 5000) // longer than a bufio.Reader's default buffer
	for _, tc := range []struct {
		name, in, want string
	}{
		{"plain", "hello world\r\n", "hello world\r\n"},
		{"escapes", "caf=C3=A9 =3D =3d\n", "café = =\n"},
		{"soft breaks", "one =\r\ntwo =\nthree\n", "one two three\n"},
		{"trailing white space", "a \t\r\nb \n", "a\r\nb\n"},
		{"soft break at the end", "end=", "end"},
		{"literal =", "a=Gb =x\n", "a=Gb =x\n"},
		{"bad hex at a line end", "a=\rb\n", "a"},
		{"= alone", "==\n", ""},
		{"control byte", "a\x01b\n", "a"},
		{"DEL", "a\x7fb\n", "a"},
		{"eight-bit", "\xe9t\xe9\n", "\xe9t\xe9\n"},
		{"= within a line", "a= b\n", "a= b\n"},
		{"bytes after a soft break", "a=\r \nc\n", "a"},
		{"long line", long + "\n", long[:4096]},
		{"long line then =", long[:4095] + "=" + long, long[:4095]},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q qpReader
			q.reset(strings.NewReader(tc.in))
			if got, _ := readQP(&q, 512); string(got) != tc.want {
				t.Errorf("decoded %q, want %q", got, tc.want)
			}
			for _, size := range []int{1, 3, 64, 4096} {
				checkQP(t, []byte(tc.in), size)
			}
		})
	}
}

// TestQPReaderReuse reads two parts with one reader, as a state does.
func TestQPReaderReuse(t *testing.T) {
	var q qpReader
	for _, in := range []string{"a=41=\n", "b=42\n"} {
		q.reset(strings.NewReader(in))
		want, wantErr := readQP(quotedprintable.NewReader(strings.NewReader(in)), 16)
		if got, gotErr := readQP(&q, 16); !bytes.Equal(got, want) || gotErr != wantErr {
			t.Errorf("%q: got %q, %q, want %q, %q", in, got, gotErr, want, wantErr)
		}
	}
	q.reset(nil)
	if q.own == nil || q.line != nil || q.rerr != nil {
		t.Error("reset(nil) kept state of the part read last")
	}
}

func FuzzQPReader(f *testing.F) {
	for _, s := range []string{
		"caf=C3=A9 =\r\nx\r\n", "a=\rb\n", "==\n", "a= b\n", "end=", "=4", "=4\n", "\x00",
		strings.Repeat("=41", 1500) + "\n", strings.Repeat("y", 4095) + "=\n" + "z",
	} {
		f.Add([]byte(s), uint16(7))
	}
	f.Fuzz(func(t *testing.T, data []byte, size uint16) {
		checkQP(t, data, int(size%5000)+1)
	})
}

// TestQPInMessage decodes a quoted-printable part through the tokenizer
// as go-message's standard decoder would have: the tokens are the same as
// of the part sent as 8bit, decoded.
func TestQPInMessage(t *testing.T) {
	tok := New(DefaultOptions())
	head := "From: a@example.com\nSubject: s\nContent-Type: text/plain; charset=utf-8\n"
	qp, err := tok.Tokenize([]byte(head + "Content-Transfer-Encoding: quoted-printable\n\nCaf=C3=A9 cr=\n=C3=A8me and more words\n"))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := tok.Tokenize([]byte(head + "Content-Transfer-Encoding: 8bit\n\nCafé crème and more words\n"))
	if err != nil {
		t.Fatal(err)
	}
	// The part's encoding is a token of its own; the rest are the same.
	want := slices.Insert(slices.Clone(plain.Tokens), slices.Index(plain.Tokens, "mime:charset:utf-8"), "mime:cte:quoted-printable")
	if !slices.Equal(qp.Tokens, want) {
		t.Errorf("quoted-printable part's tokens\n%q\nwant\n%q", qp.Tokens, want)
	}
	if len(qp.Problems) != 0 {
		t.Errorf("problems: %v", qp.Problems)
	}
}
