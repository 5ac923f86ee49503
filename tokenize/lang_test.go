package tokenize

import (
	"bytes"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
)

// TestStemEnglish checks stemEnglish against kljensen's english.Stem,
// whose stems the models hold, and a few stems by hand.
func TestStemEnglish(t *testing.T) {
	for _, tc := range []struct{ word, want string }{
		{"running", "run"},
		{"quickly", "quick"},
		{"generously", "generous"},
		{"happiness", "happi"},
		{"skies", "sky"},       // a special word
		{"dying", "die"},       // a special word
		{"news", "news"},       // an invariant one
		{"yelling", "yell"},    // an initial y
		{"being", "being"},     // a stop word, kept
		{"by", "by"},           // two bytes, kept
		{"Caresses", "caress"}, // lower-cased first
		{" cats ", "cat"},      // trimmed first
		{"naïvely", "naïv"},
		{"résumés", "résumé"},
		{"mp3s", "mp3s"},
		{"cat’s", "cat"},  // kljensen's apostrophes
		{"''cats", "cat"}, // kljensen trims every leading apostrophe
		{"\xffcats", ""},  // not UTF-8: kljensen's answer, whatever it is
	} {
		want := english.Stem(tc.word, false)
		got := stemEnglish(tc.word)
		if got != want {
			t.Errorf("stemEnglish(%q) = %q, kljensen's Stem gives %q", tc.word, got, want)
		}
		if tc.want != "" && got != tc.want {
			t.Errorf("stemEnglish(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
}

// TestStemEnglishRandom compares stemEnglish with kljensen's Stem on
// random words of lower-case letters, vowels and y more frequent, the
// words it does not hand to kljensen's.
func TestStemEnglishRandom(t *testing.T) {
	alphabet := []rune("abcdefghijklmnopqrstuvwxyzaeiouyyy")
	r := rand.New(rand.NewPCG(1, 2))
	n := 200_000
	if testing.Short() {
		n = 20_000
	}
	for range n {
		w := make([]rune, 1+r.IntN(14))
		for i := range w {
			w[i] = alphabet[r.IntN(len(alphabet))]
		}
		if got, want := stemEnglish(string(w)), english.Stem(string(w), false); got != want {
			t.Fatalf("stemEnglish(%q) = %q, kljensen's Stem gives %q", string(w), got, want)
		}
	}
}

// TestStopLanguages checks the table of short function words against
// stopwords, the map it is made from, for each function word, upper-case
// in text that goes on after it, and for a few other words.
func TestStopLanguages(t *testing.T) {
	for w, want := range stopwords {
		if got := stopLanguages([]byte(w)); got != want {
			t.Errorf("stopLanguages(%q) = %b, want %b", w, got, want)
		}
		if len(w) > 8 || strings.Trim(w, "abcdefghijklmnopqrstuvwxyz") != "" {
			continue
		}
		text := []byte(strings.ToUpper(w) + "zzzzzzzz")
		for _, chunk := range [][]byte{text[:len(w)], text[:len(w):len(w)]} {
			if got := stopShort(asciiKey(chunk, 0, len(w))); got != want {
				t.Errorf("stopShort(asciiKey(%q)) = %b, want %b", chunk, got, want)
			}
		}
	}
	for _, w := range []string{"th", "thee", "xyz", "abcdefgh", "dumneavoastr", "теперьь"} {
		if got := stopLanguages([]byte(w)); got != 0 {
			t.Errorf("stopLanguages(%q) = %b, want 0", w, got)
		}
	}
}

// FuzzDetectLang compares detectLang with a plain reading of the words,
// looked up in stopwords, as it was before it had its shortcuts.
func FuzzDetectLang(f *testing.F) {
	f.Add([]byte("Re: the offer"), []byte("The quick brown fox and the lazy dog, it is not what you think: http://x.example/the www.the.com a@the.example"))
	f.Add([]byte(""), []byte("Der Hund und die Katze sind nicht im Haus, aber wir haben über das Wetter gesprochen. THE AND für"))
	f.Add([]byte("Привет"), []byte("и в не на что я с он как а то все она так его но да ты к у же вы за бы по только ее мне было"))
	f.Add([]byte(""), []byte(strings.Repeat("the and of to is in that it you for this with ", 20)))
	f.Add([]byte("“quoted” ½"), []byte("naïve café über ǅ ﬁ"))
	f.Fuzz(func(t *testing.T, subject, text []byte) {
		idx, code, _ := detectLang(nil, subject, text)
		var d langCounts
		budget := langSampleBytes
		for _, text := range [][]byte{subject, text} {
			if len(text) > budget {
				text = text[:budget]
			}
			budget -= len(text)
			if refCount(&d, text); d.settled {
				break
			}
		}
		wantIdx, wantCode := d.decide()
		if idx != wantIdx || code != wantCode {
			t.Fatalf("detectLang = %d, %q; want %d, %q", idx, code, wantIdx, wantCode)
		}
	})
}

func refCount(d *langCounts, text []byte) {
	for _, chunk := range bytes.FieldsFunc(text, func(r rune) bool { return r < utf8.RuneSelf && spaceTab[r] }) {
		if d.words >= langSampleWords || d.settled {
			return
		}
		if bytes.IndexByte(chunk, '@') >= 0 || bytes.Contains(chunk, []byte("://")) || hasPrefixFold(chunk, "www.") {
			continue
		}
		for i := 0; i < len(chunk) && d.words < langSampleWords; {
			var w []byte
			for i < len(chunk) {
				r, n := decodeRune(chunk[i:])
				if !unicode.IsLetter(r) && !unicode.IsMark(r) || r < utf8.RuneSelf && !isASCIILetter(byte(r)) {
					break
				}
				d.scripts[scriptOf(r)]++
				w = utf8.AppendRune(w, unicode.ToLower(r))
				i += n
			}
			if len(w) == 0 {
				i++ // a byte at a time, even into a rune
				continue
			}
			d.words++
			if len(w) <= 24 {
				for m := stopwords[string(w)]; m != 0; m &= m - 1 {
					d.hits[bits.TrailingZeros32(m)]++
				}
			}
			if d.words%16 == 0 && d.words >= 48 {
				best, second := d.leaders()
				if b, s := d.hits[best], d.hits[second]; b >= 12 && b >= 3*s {
					d.settled = true
					return
				}
			}
		}
	}
}
