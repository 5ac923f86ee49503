package main

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestGendoc checks that spamd(8) and the completions name every flag
// spamd -h lists, and no other.
func TestGendoc(t *testing.T) {
	var help bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, &help); err == nil {
		t.Fatal("-h parsed")
	}
	var want []string
	for _, m := range regexp.MustCompile(`(?m)^  -(\S+)`).FindAllStringSubmatch(help.String(), -1) {
		want = append(want, m[1])
	}
	if len(want) < 5 {
		t.Fatalf("spamd -h lists %q", want)
	}
	for _, kind := range []string{"man", "bash", "zsh"} {
		var out bytes.Buffer
		if err := gendocMain(&out, []string{kind}); err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(out.String(), `\-`, "-")
		var got []string
		for _, m := range regexp.MustCompile(`--([a-z][a-z-]*)`).FindAllStringSubmatch(text, -1) {
			if !slices.Contains(got, m[1]) {
				got = append(got, m[1])
			}
		}
		for _, f := range want {
			if !slices.Contains(got, f) {
				t.Errorf("%s does not name --%s", kind, f)
			}
		}
		if kind != "man" {
			// The page's prose may name flags of other programs; a
			// completion offers spamd's alone.
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s offers %q, spamd takes %q", kind, got, want)
			}
		}
	}
}
