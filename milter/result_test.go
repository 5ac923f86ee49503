package milter

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

func TestResultLongTokensCut(t *testing.T) {
	r := Result{Verdict: "spam", Spammy: []string{strings.Repeat("x", 500), strings.Repeat("é", 100)}}
	back, err := ParseResult(r.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Spammy[0]) != maxTokenLen || back.Spammy[1] != strings.Repeat("é", maxTokenLen/2) {
		t.Errorf("tokens not cut to %d bytes of whole runes: %q", maxTokenLen, back.Spammy)
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
