//go:build !noeval

package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// helpFlags returns the flags "spamtrain CMD -h" lists: what the command
// accepts, read independently of the flag sets gendoc reads.
func helpFlags(t *testing.T, cmd string) []string {
	t.Helper()
	code, _, help := spamtrain(t, "", cmd, "-h")
	if code != 0 {
		t.Fatalf("%s -h: exit %d: %s", cmd, code, help)
	}
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^  -(\S+)`).FindAllStringSubmatch(help, -1) {
		out = append(out, m[1])
	}
	if _, ok := remoteRuns[cmd]; ok {
		out = append(out, "api") // cut before the flags are parsed
	}
	slices.Sort(out)
	return out
}

// TestGendoc checks that spamtrain(1) and the bash and zsh completions
// describe every command with exactly the flags it accepts.
func TestGendoc(t *testing.T) {
	isolate(t)
	docs := map[string]string{}
	for _, kind := range []string{"man", "bash", "zsh"} {
		code, out, errOut := spamtrain(t, "", "gendoc", kind)
		if code != 0 {
			t.Fatalf("gendoc %s: %s", kind, errOut)
		}
		docs[kind] = strings.ReplaceAll(out, `\-`, "-")
	}
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			want := helpFlags(t, c.name)
			// The command's part of each document.
			parts := map[string]string{
				"man":  section(docs["man"], ".SS "+c.name+"\n", ".SS "),
				"bash": section(docs["bash"], "\t"+c.name+")\n", "\n\t\t;;\n"),
				"zsh":  section(docs["zsh"], "\n"+c.name+")\n", ";;"),
			}
			for kind, part := range parts {
				if part == "" {
					t.Errorf("%s has no part for %s", kind, c.name)
					continue
				}
				// A page names a flag in bold; a completion plainly.
				re := regexp.MustCompile(`--([a-z][a-z-]*)`)
				if kind == "man" {
					re = regexp.MustCompile(`\\fB--([a-z][a-z-]*)\\fR`)
				}
				var got []string
				for _, m := range re.FindAllStringSubmatch(part, -1) {
					got = append(got, m[1])
				}
				slices.Sort(got)
				got = slices.Compact(got)
				if !slices.Equal(got, want) {
					t.Errorf("%s describes %q, %s -h lists %q", kind, got, c.name, want)
				}
			}
		})
	}
	if !strings.Contains(docs["man"], ".TH SPAMTRAIN 1") || !strings.Contains(docs["bash"], "complete -o filenames -F _spamtrain spamtrain") ||
		!strings.HasPrefix(docs["zsh"], "#compdef spamtrain") {
		t.Error("a document lacks its header")
	}
}

// section returns the part of doc from start to the next end, "" if
// start is not in it.
func section(doc, start, end string) string {
	_, after, ok := strings.Cut(doc, start)
	if !ok {
		return ""
	}
	part, _, _ := strings.Cut(after, end)
	return part
}
