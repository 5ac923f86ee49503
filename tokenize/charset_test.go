package tokenize

import (
	"bytes"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/emersion/go-message"
	"github.com/emersion/go-message/charset"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/ianaindex"
)

// TestSingleByteCharsets checks what leaf's shortcut for them relies on:
// each charset listed is one of x/text's single-byte charmaps, known to
// go-message's charset package, whose decoder maps every ASCII byte to
// itself.
func TestSingleByteCharsets(t *testing.T) {
	ascii := make([]byte, 128)
	for i := range ascii {
		ascii[i] = byte(i)
	}
	for cs := range singleByteCharsets {
		if cs != strings.ToLower(cs) {
			t.Errorf("%q: not lower case, as leaf looks it up", cs)
		}
		enc, err := ianaindex.MIME.Encoding(cs)
		if _, ok := enc.(*charmap.Charmap); err != nil || !ok {
			t.Errorf("%q: %T, %v; want a single-byte charmap", cs, enc, err)
			continue
		}
		r, err := charset.Reader(cs, bytes.NewReader(ascii))
		if err != nil {
			t.Errorf("%q: %v", cs, err)
			continue
		}
		if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, ascii) {
			t.Errorf("%q decodes ASCII to %q, %v", cs, got, err)
		}
	}
}

// TestSingleByteUTF8 checks that decodeSingleByte converts text as
// go-message's decoder of each single-byte charset does: every byte value,
// between ASCII and not, and text of random bytes.
func TestSingleByteUTF8(t *testing.T) {
	var all []byte
	for i := range 256 {
		all = append(all, 'a', byte(i), byte(i), 0x80|byte(i))
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	inputs := [][]byte{all, {}, []byte("ascii only"), {0xff}}
	for range 50 {
		b := make([]byte, rnd.IntN(100))
		for i := range b {
			b[i] = byte(rnd.Uint32())
		}
		inputs = append(inputs, b)
	}
	tables := singleByteUTF8()
	for cs := range singleByteCharsets {
		tab := tables[cs]
		if tab == nil {
			t.Errorf("%q: no table", cs)
			continue
		}
		for _, in := range inputs {
			r, err := charset.Reader(cs, bytes.NewReader(in))
			if err != nil {
				t.Fatalf("%q: %v", cs, err)
			}
			want, err := io.ReadAll(r)
			if err != nil {
				t.Fatalf("%q: %v", cs, err)
			}
			if got := decodeSingleByte([]byte("x"), in, tab); !bytes.Equal(got[1:], want) || got[0] != 'x' {
				t.Errorf("%q: decodeSingleByte(%q) = %q, the decoder gives %q", cs, in, got[1:], want)
			}
		}
	}
}

// TestSingleByteParts tokenizes parts in single-byte charsets, all ASCII
// and not, as text and as HTML, in quoted-printable and base64, one cut
// short by a decoding error, against the same body as go-message decodes
// and converts it while it is read, sent as UTF-8: the body's words are
// the same.
func TestSingleByteParts(t *testing.T) {
	for _, tc := range []struct {
		name, mtype, cs, cte, body string
	}{
		{"ascii", "text/plain", "iso-8859-1", "7bit", "plain words only\n"},
		{"latin-1 qp", "text/plain", "iso-8859-1", "quoted-printable", "Gr=FC=DFe aus M=FCnchen, caf=E9\n"},
		{"windows-1252 quotes", "text/plain", "windows-1252", "quoted-printable", "=93quoted=94 =80 100\n"},
		{"cyrillic base64", "text/plain", "windows-1251", "base64", "8eru5OrgIOTr/yDq6+jl7fLg\n"},
		{"koi8 html", "text/html", "koi8-r", "8bit", "<p>\xd3\xcb\xc9\xc4\xcb\xc1 \xd4\xc5\xcb\xd3\xd4</p>\n"},
		{"cut short", "text/plain", "iso-8859-2", "base64", "6ebmIGJhZCBiYXNl!!!\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := func(cs, cte, body string) []byte {
				return []byte("From: a@example.com\nSubject: s\nMIME-Version: 1.0\nContent-Type: " + tc.mtype +
					"; charset=" + cs + "\nContent-Transfer-Encoding: " + cte + "\n\n" + body)
			}
			var h message.Header
			h.Set("Content-Type", tc.mtype+"; charset="+tc.cs)
			h.Set("Content-Transfer-Encoding", tc.cte)
			e, err := message.New(h, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			utf, _ := io.ReadAll(e.Body) // up to the error, for the part cut short
			tk := New(DefaultOptions())
			got, err := tk.Tokenize(msg(tc.cs, tc.cte, tc.body))
			if err != nil {
				t.Fatal(err)
			}
			want, err := tk.Tokenize(msg("utf-8", "8bit", string(utf)))
			if err != nil {
				t.Fatal(err)
			}
			if g, w := bodyWords(got.Tokens), bodyWords(want.Tokens); len(w) == 0 || !slices.Equal(g, w) {
				t.Errorf("body words %q, want %q", g, w)
			}
		})
	}
}

// bodyWords returns the tokens without a field's prefix: the words of a
// body.
func bodyWords(tokens []string) []string {
	var out []string
	for _, tok := range tokens {
		if !strings.Contains(tok, ":") {
			out = append(out, tok)
		}
	}
	return out
}
