package tokenize

import (
	"slices"
	"strings"
	"testing"
)

// TestWords checks the tokens and the counts of words, on one state whose
// word buffer starts empty and is then reused, so that runs of letters
// fill it and outgrow it mid-word.
func TestWords(t *testing.T) {
	tests := []struct {
		in     string
		tokens []string
		meas   tally
	}{
		{"Hello WORLD abc123 A1b2C3", []string{"hello", "world", "abc123", "a1b2c3"}, tally{words: 4, letters: 16, upper: 8}},
		{"ÀbC déF ǅx Ⅻ", []string{"àbc", "déf", "džx", "xii"}, tally{words: 4, letters: 9, upper: 3, nonASCII: 4}},
		{"ABCdéF99xyZ", []string{"abcdéf99xyz"}, tally{words: 1, letters: 9, upper: 5, nonASCII: 1}},
		{"don't DON'T 1,000.00 3.14.15 a.b", []string{"dont", "dont", "1,000.00", "3.14.15"}, tally{words: 6, letters: 10, upper: 4}},
		{"ﬁNance ＦＲＥＥ", []string{"finance", "free"}, tally{words: 2, letters: 10, upper: 5, nonASCII: 5}},
		{"$5 €50 $ £ ¥9", []string{"$5", "€50", "¥9"}, tally{words: 3}},
		{"Vi\u200bAGRA soft\u00adhyphen", []string{"viagra", "softhyphen"}, tally{words: 2, letters: 16, upper: 5}},
		{"caf\xe9 \x93QUOTED\x94", []string{"café", "quoted"}, tally{words: 2, letters: 10, upper: 6, nonASCII: 1}},
		{strings.Repeat("Ab", 40) + " " + strings.Repeat("xY", 150) + "é" + strings.Repeat("Q9", 70), []string{"long:80", "long:100"},
			tally{words: 2, letters: 451, upper: 260, nonASCII: 1}},
		{"--==Hello,,, world!!! $ $$9 (x) ~~", []string{"hello", "world", "$9"}, tally{words: 4, letters: 11, upper: 1}},
		{strings.Repeat("W", 9) + "中文字" + strings.Repeat("w", 9), []string{"wwwwwwwww", "中文", "文字", "wwwwwwwww"},
			tally{words: 4, letters: 21, upper: 9, nonASCII: 3}},
	}
	o := DefaultOptions()
	o.Stem = false
	tk := New(o)
	st := new(state)
	for _, tt := range tests {
		st.reset(tk)
		st.words([]byte(tt.in), bodyMode)
		m := st.meas
		if !slices.Equal(st.tokens, tt.tokens) || m.words != tt.meas.words || m.letters != tt.meas.letters ||
			m.upper != tt.meas.upper || m.nonASCII != tt.meas.nonASCII {
			t.Errorf("%q: %q, %d words, %d letters, %d upper, %d not ASCII; want %q, %d, %d, %d, %d", tt.in,
				st.tokens, m.words, m.letters, m.upper, m.nonASCII,
				tt.tokens, tt.meas.words, tt.meas.letters, tt.meas.upper, tt.meas.nonASCII)
		}
	}
}

// TestWordsLimit checks where words stops at the token limit, and that it
// notes the truncation when separators follow the last word it could add.
func TestWordsLimit(t *testing.T) {
	o := DefaultOptions()
	o.MaxTokens = 2
	tk := New(o)
	st := new(state)
	for _, tt := range []struct {
		in        string
		tokens    []string
		truncated bool
	}{
		{"one two", []string{"one", "two"}, false},
		{"one two;;", []string{"one", "two"}, true},
		{"one two three", []string{"one", "two"}, true},
	} {
		st.reset(tk)
		st.words([]byte(tt.in), bodyMode)
		if !slices.Equal(st.tokens, tt.tokens) || st.truncated != tt.truncated {
			t.Errorf("%q: %q, truncated %v; want %q, %v", tt.in, st.tokens, st.truncated, tt.tokens, tt.truncated)
		}
	}
}
