package tokenize

import (
	"math/rand/v2"
	"testing"

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
