package decide

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestResultRoundTrip(t *testing.T) {
	var sig [32]byte
	for i := range sig {
		sig[i] = byte(i * 7)
	}
	for _, tt := range []struct {
		name string
		r    Result
		text string
	}{
		{"spam", Result{Verdict: "spam", Probability: 0.999998, Score: 13.12, Required: 0, Signature: sig,
			Spammy: []string{"viagra", "url:example.com"}, Hammy: []string{"meeting"}},
			`spam; p=0.999998; score=13.12; required=0.00; sig=00070e151c232a31383f464d545b626970777e858c939aa1a8afb6bdc4cbd2d9; spammy="viagra" "url:example.com"; hammy="meeting"`},
		{"spam with measures", Result{Verdict: "spam", Probability: 0.99, Score: 4.6, Required: 3, Signature: sig,
			Spammy: []string{"viagra"}, Measures: []string{"links=41 (+1.90)", "size=2306 (-0.42)"}},
			`spam; p=0.990000; score=4.60; required=3.00; sig=00070e151c232a31383f464d545b626970777e858c939aa1a8afb6bdc4cbd2d9; spammy="viagra"; measures="links=41 (+1.90)" "size=2306 (-0.42)"`},
		{"ham without tokens", Result{Verdict: "ham", Probability: 0, Score: -42.5, Required: 1.5, Signature: sig},
			`ham; p=0.000000; score=-42.50; required=1.50; sig=00070e151c232a31383f464d545b626970777e858c939aa1a8afb6bdc4cbd2d9`},
		{"tokens needing quotes", Result{Verdict: "unsure", Probability: 0.5, Signature: sig,
			Spammy: []string{`a "quoted"; token`, "naïve", ""}},
			`unsure; p=0.500000; score=0.00; required=0.00; sig=00070e151c232a31383f464d545b626970777e858c939aa1a8afb6bdc4cbd2d9; spammy="a \"quoted\"; token" "na\u00efve" ""`},
		{"skipped", Result{Verdict: Skipped, Reason: ReasonSize}, "skipped; reason=size"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.String(); got != tt.text {
				t.Errorf("String:\n got %s\nwant %s", got, tt.text)
			}
			back, err := ParseResult(tt.text)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, tt.r) {
				t.Errorf("ParseResult:\n got %+v\nwant %+v", back, tt.r)
			}
		})
	}
}

// TestResultTokensWhole checks that long tokens are listed whole, that
// the folded header keeps every line under the limit of RFC 5322, and
// that the folded value reads back as it was.
func TestResultTokensWhole(t *testing.T) {
	long := "url:" + strings.Repeat("sub.", 60) + "example.com"
	r := Result{Verdict: "spam", Spammy: []string{long, strings.Repeat("é", 40), `a "quoted" bigram`, "subject:free"},
		Hammy: []string{"from:addr:someone.with.a.long.name@lists.example.org", strings.Repeat("x", 2000)}}
	v := r.String()
	back, err := ParseResult(v)
	if err != nil {
		t.Fatal(err)
	}
	want := r.Spammy
	if !reflect.DeepEqual(back.Spammy, want) || !reflect.DeepEqual(back.Hammy, r.Hammy[:1]) {
		t.Errorf("tokens read back:\n%q\n%q\nwant the spammy ones whole and the 2000-byte one left out", back.Spammy, back.Hammy)
	}
	for _, sep := range []string{"\n\t", "\r\n\t"} {
		folded := Fold(v, len(ResultHeader), sep)
		lines := strings.Split(folded, sep)
		if len(lines) < 3 {
			t.Errorf("not folded: %q", folded)
		}
		for i, l := range lines {
			n := len(l) + 1
			if i == 0 {
				n = len(ResultHeader) + 2 + len(l)
			}
			// Over the width only where no break is possible: one token.
			if n > 998 || n > foldWidth && strings.Contains(Fold(l, 0, "|"), "|") {
				t.Errorf("line %d is %d bytes: %q", i, n, l)
			}
		}
		if strings.ReplaceAll(folded, sep, " ") != v {
			t.Errorf("folding changed more than white space:\n%s\n%s", folded, v)
		}
		again, err := ParseResult(folded)
		if err != nil || !reflect.DeepEqual(again, back) {
			t.Errorf("ParseResult of the folded value = %+v, %v", again, err)
		}
	}
}

func TestFold(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"ham; p=0.1", "ham; p=0.1"},
		{`spam; spammy="` + strings.Repeat("a ", 40) + `" "b"`, `spam;|spammy="` + strings.Repeat("a ", 40) + `"|"b"`},
		{strings.Repeat("word ", 20) + "end", strings.Repeat("word ", 11) + "word|" + strings.Repeat("word ", 8) + "end"},
		{`x="a\" b" c`, `x="a\" b" c`},
	} {
		if got := Fold(tt.in, len(ResultHeader), "|"); got != tt.want {
			t.Errorf("Fold(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
	}
}

func TestParseResultErrors(t *testing.T) {
	const sig = "sig=00070e151c232a31383f464d545b626970777e858c939aa1a8afb6bdc4cbd2d9"
	for _, tt := range []struct{ name, in string }{
		{"empty", ""},
		{"verdict not a class name", "Maybe!; p=0.5; score=0; " + sig},
		{"no signature", "spam; p=0.5; score=1"},
		{"short signature", "spam; p=0.5; score=1; sig=abcd"},
		{"not hex", "spam; p=0.5; score=1; sig=zz"},
		{"probability out of range", "spam; p=1.5; score=1; " + sig},
		{"NaN score", "spam; p=0.5; score=NaN; " + sig},
		{"field without value", "spam; p; score=1; " + sig},
		{"unterminated token", `spam; p=0.5; score=1; ` + sig + `; spammy="abc`},
		{"unquoted token in list", `spam; p=0.5; score=1; ` + sig + `; spammy="a" b`},
		{"skipped without reason", "skipped"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseResult(tt.in); !errors.Is(err, ErrBadResult) {
				t.Errorf("ParseResult(%q) = %v, want ErrBadResult", tt.in, err)
			}
		})
	}
}

func TestParseResultIgnoresUnknownFields(t *testing.T) {
	r, err := ParseResult("ham; p=0.1; score=-2; future=thing; sig=00070e151c232a31383f464d545b626970777e858c939aa1a8afb6bdc4cbd2d9")
	if err != nil || r.Verdict != "ham" || r.Score != -2 {
		t.Errorf("got %+v, %v", r, err)
	}
}

// FuzzParseResult checks that ParseResult never panics, and that what it
// reads, written out again, reads back the same.
func FuzzParseResult(f *testing.F) {
	f.Add(`spam; p=0.999998; score=13.12; required=0.00; sig=00070e151c232a31383f464d545b626970777e858c939aa1a8afb6bdc4cbd2d9; spammy="viagra" "url:example.com"; hammy="meeting"`)
	f.Add(`spam; p=0.99; score=4.60; required=3.00; sig=00070e151c232a31383f464d545b626970777e858c939aa1a8afb6bdc4cbd2d9; measures="links=41 (+1.90)"`)
	f.Add("skipped; reason=authenticated")
	f.Add(`unsure; p=0.5; score=0; sig=00070e151c232a31383f464d545b626970777e858c939aa1a8afb6bdc4cbd2d9; spammy="a\"b" "\xff"`)
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseResult(s)
		if err != nil {
			return
		}
		text := r.String()
		back, err := ParseResult(text)
		if err != nil {
			t.Fatalf("ParseResult(%q) = %v, from %q", text, err, s)
		}
		if again := back.String(); again != text {
			t.Fatalf("not stable:\n%s\n%s", text, again)
		}
	})
}

func TestResultOf(t *testing.T) {
	sig := "sig=00070e151c232a31383f464d545b626970777e858c939aa1a8afb6bdc4cbd2d9"
	for _, tt := range []struct {
		name, raw, verdict string
		err                error
	}{
		{"LF", "Subject: x\nX-Spamd-Result: ham; p=0.1; score=-2; " + sig + "\n\nbody\n", "ham", nil},
		{"CRLF and case", "Subject: x\r\nx-spamd-result: spam; p=0.9; score=2; " + sig + "\r\n\r\nbody\r\n", "spam", nil},
		{"folded", "X-Spamd-Result: spam; p=0.9;\n\tscore=2; " + sig + ";\n learned=spam\n\nbody\n", "spam", nil},
		{"first readable of several", "X-Spamd-Result: forged\nX-Spamd-Result: ham; p=0.1; score=-2; " + sig + "\n\n", "ham", nil},
		{"only in the body", "Subject: x\n\nX-Spamd-Result: spam; p=0.9; score=2; " + sig + "\n", "", ErrNoResult},
		{"none", "Subject: x\n\nbody\n", "", ErrNoResult},
		{"unreadable", "X-Spamd-Result: spam; p=2\n\n", "", ErrBadResult},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ResultOf([]byte(tt.raw))
			if !errors.Is(err, tt.err) || r.Verdict != tt.verdict {
				t.Errorf("got %+v, %v; want %s, %v", r, err, tt.verdict, tt.err)
			}
		})
	}
}

// FuzzResultOf checks that ResultOf never panics on a raw message and
// that what it finds is a Result that ParseResult reads back.
func FuzzResultOf(f *testing.F) {
	f.Add([]byte("Subject: x\nX-Spamd-Result: ham; p=0.1; score=-2; sig=00070e151c232a31383f464d545b626970777e858c939aa1a8afb6bdc4cbd2d9\n\nbody\n"))
	f.Add([]byte("X-Spamd-Result: spam; p=0.9;\r\n\tscore=2; sig=00070e151c232a31383f464d545b626970777e858c939aa1a8afb6bdc4cbd2d9; learned=spam\r\n\r\n"))
	f.Add([]byte("X-Spamd-Result: skipped; reason=size\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := ResultOf(raw)
		if err != nil {
			return
		}
		if _, err := ParseResult(r.String()); err != nil {
			t.Fatalf("%+v does not read back: %v", r, err)
		}
	})
}
