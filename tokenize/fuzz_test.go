package tokenize

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
)

func FuzzTokenize(f *testing.F) {
	files, err := filepath.Glob("testdata/*.eml")
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		"",
		"From: a\n",
		"Content-Type: multipart/mixed; boundary=x\n\n--x\nContent-Type: message/rfc822\n\nContent-Type: multipart/mixed; boundary=y\n\n--y\n\nhi\n--y--\n--x--\n",
		"Content-Type: text/html\n\n<a href='http://a.b.example/c'>x</a><script>y",
		"Subject: =?utf-8?B?////?= =?x-bad?Q?=FF?=\n\nb",
		"Received: from [IPv6:2001:db8::1] (unknown [10.1.2.3]) by a.example.com with id 1; x\n\n",
		"Content-Type: text/plain; charset=\"\n\n\xff\xfe",
	} {
		f.Add([]byte(s))
	}
	o := DefaultOptions()
	o.MaxTokens = 2000
	tok := New(o)
	f.Fuzz(func(t *testing.T, raw []byte) {
		if d, m := Identify(raw); d != Digest(raw) || m != Mark(raw) {
			t.Fatalf("Identify = %x, %x; Digest %x, Mark %x", d, m, Digest(raw), Mark(raw))
		}
		res, err := tok.Tokenize(raw)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if len(res.Tokens) > o.MaxTokens {
			t.Fatalf("%d tokens, MaxTokens %d", len(res.Tokens), o.MaxTokens)
		}
		for _, s := range res.Tokens {
			if s == "" || !utf8.ValidString(s) {
				t.Fatalf("bad token %q", s)
			}
		}
		for i, v := range res.Measures {
			m := measures[i]
			if math.IsNaN(v) {
				continue
			}
			if math.IsInf(v, 0) || m.Scale != "signed-log2" && v < 0 || m.Format == "share" && v > 1 {
				t.Fatalf("measure %s = %v", m.Name, v)
			}
			if l := m.Level(v); l < 0 || l >= m.Levels {
				t.Fatalf("measure %s = %v at level %d of %d", m.Name, v, l, m.Levels)
			}
		}
	})
}

// FuzzStemEnglish checks that stemEnglish gives kljensen's stems, which
// the models' tokens were made with: of the input as it is, and of the
// input made a word of lower-case letters, the words stemEnglish does not
// hand to kljensen's stemmer.
func FuzzStemEnglish(f *testing.F) {
	for _, w := range []string{"running", "skies", "cat’s", "''cats", "naïvely", "\xffcats", "00BA\x800s", "generously", "yyyeyyying"} {
		f.Add(w)
	}
	f.Fuzz(func(t *testing.T, w string) {
		letters := []byte(w)
		for i, c := range letters {
			letters[i] = 'a' + c%26
		}
		for _, w := range []string{w, string(letters)} {
			if got, want := stemEnglish(w), english.Stem(w, false); got != want {
				t.Errorf("stemEnglish(%q) = %q, kljensen's Stem gives %q", w, got, want)
			}
		}
	})
}

// FuzzFindLink checks what bodyText relies on to skip findLink: a chunk
// without '.', ':' or '\x0e' holds no link.
func FuzzFindLink(f *testing.F) {
	for _, s := range []string{"www.example.com", "x@mail.example", "http://localhost", "ftp:x", "wwwexample", "a@b", "(www.a.biz).", "www\x0e0"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, c []byte) {
		if start, end, _ := findLink(c); start >= 0 && !bytes.ContainsAny(c, ".:\x0e") {
			t.Fatalf("findLink(%q) found %q", c, c[start:end])
		}
	})
}

// FuzzBodyText checks that bodyText, with its shortcuts for white space
// and for chunks that are a plain word or hold no link, makes the tokens
// and counts that chunk makes of each run of text between white space.
func FuzzBodyText(f *testing.F) {
	for _, s := range []string{"Hello  World\n", "ABC123 x.com a@b.example\t", "don't 1,000.00 café", "\x01ab cd\x0ewww.x", " running " + strings.Repeat("zZ", 40) + "é"} {
		f.Add([]byte(s), true)
	}
	tk := New(DefaultOptions())
	body, chunks := new(state), new(state)
	f.Fuzz(func(t *testing.T, text []byte, stem bool) {
		body.reset(tk)
		chunks.reset(tk)
		if stem {
			body.stemIdx, chunks.stemIdx = langIndex("en"), langIndex("en")
		}
		body.text = append(body.text, text...)
		body.bodyText()
		for _, c := range bytes.FieldsFunc(text, func(r rune) bool { return r < utf8.RuneSelf && spaceTab[r] }) {
			if chunks.full() {
				break
			}
			chunks.chunk(c, true)
		}
		b, c := body.meas, chunks.meas
		if !slices.Equal(body.tokens, chunks.tokens) || b.words != c.words || b.letters != c.letters || b.upper != c.upper || b.nonASCII != c.nonASCII || b.links != c.links {
			t.Fatalf("%q: %q, %+v; chunk made %q, %+v", text, body.tokens, b, chunks.tokens, c)
		}
	})
}
