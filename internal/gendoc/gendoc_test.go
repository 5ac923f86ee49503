package gendoc

import (
	"flag"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestEscape(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"--db DIR", `\-\-db DIR`},
		{`a\b`, `a\eb`},
		{".TH not a macro", `\&.TH not a macro`},
		{"one\n'two", "one\n\\&'two"},
	} {
		if got := Escape(tt.in); got != tt.want {
			t.Errorf("Escape(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestFlagsOf(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("db", "", "store `directory`")
	fs.Int("workers", 4, "parallel workers")
	fs.Bool("json", false, "print JSON")
	fs.Duration("timeout", 30*time.Second, "give up after this long")
	fs.Var(&list{}, "set", "a setting, repeatable")
	got := FlagsOf(fs)
	want := []Flag{
		{Name: "db", Arg: "DIRECTORY", Usage: "store directory", Files: true},
		{Name: "json", Usage: "print JSON"},
		{Name: "set", Arg: "VALUE", Usage: "a setting, repeatable"},
		{Name: "timeout", Arg: "DURATION", Usage: "give up after this long", Default: "30s"},
		{Name: "workers", Arg: "INT", Usage: "parallel workers", Default: "4"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FlagsOf:\n got %+v\nwant %+v", got, want)
	}
}

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

func TestMan(t *testing.T) {
	p := Page{Name: "prog", Section: 1, Title: "does things", Source: "prog 1", Date: "2026-01-02",
		Synopsis:    []string{"prog [--db DIR] PATH..."},
		Description: "First paragraph\ncontinued.\n\nAn example:\n\n  prog --db /x\n  prog -h",
		Options:     []Flag{{Name: "db", Arg: "DIR", Usage: "the store", Default: "/var/lib/x"}},
		Commands:    []Command{{Name: "run", Summary: "run it", Synopsis: "[-v]", Flags: []Flag{{Name: "v", Usage: "verbose"}}}},
		Tables:      []Table{{Name: "store", Text: "The store.", Keys: []Key{{Name: "dir", Type: "string", Default: `"/x"`, Text: "Where."}}}},
		Sections:    []Section{{Title: "See also", Text: "other(1)"}},
	}
	var b strings.Builder
	if err := p.Man(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`.TH PROG 1 "2026-01-02" "prog 1" "User Commands"`,
		".SH NAME\nprog \\- does things\n",
		".SH SYNOPSIS\n.B prog\n[\\-\\-db DIR] PATH...\n",
		".SH DESCRIPTION\nFirst paragraph continued.\n.PP\nAn example:\n.PP\n.RS 4\n.nf\nprog \\-\\-db /x\nprog \\-h\n.fi\n.RE\n",
		".TP\n\\fB\\-\\-db\\fR \\fIDIR\\fR\nthe store (default: /var/lib/x)\n",
		".SS run\n.B prog\nrun [\\-v]\n.PP\nRun it.\n.TP\n\\fB\\-\\-v\\fR\nverbose\n",
		".SS [store]\nThe store.\n.TP\n\\fBdir\\fR \\fIstring\\fR = \"/x\"\nWhere.\n",
		".SH SEE ALSO\nother(1)\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the page lacks\n%s\nin\n%s", want, b.String())
		}
	}
}

func TestStructDocs(t *testing.T) {
	src := `package x
type T struct {
	// A is the first.
	A int
	// B and C go together.
	B string
	C string
	// D, E share.
	D, E bool
	F int
}`
	got, err := StructDocs([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"T.A": "A is the first.", "T.B": "B and C go together.", "T.C": "B and C go together.",
		"T.D": "D, E share.", "T.E": "D, E share.", "T.F": ""}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("StructDocs = %q, want %q", got, want)
	}
}

func TestKeyText(t *testing.T) {
	names := map[string]string{"ClassifyBytes": "classify_bytes", "MaxSize": "max_size", "Redis": "redis"}
	for _, tt := range []struct{ doc, field, want string }{
		{"MaxSize is the largest\nmessage, over ClassifyBytes.", "MaxSize", "The largest message, over classify_bytes."},
		{"MaxSize bounds it.\n\nA second paragraph.", "MaxSize", "max_size bounds it.\n\nA second paragraph."},
		{"A Redis server.", "Redis", "A Redis server."},
	} {
		if got := KeyText(tt.doc, tt.field, names); got != tt.want {
			t.Errorf("KeyText(%q) = %q, want %q", tt.doc, got, tt.want)
		}
	}
}
