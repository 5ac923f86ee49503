// Package gendoc writes the manual pages and the shell completions of
// spamd's programs from what defines them: each program's flag sets and
// the configuration's struct documentation. make runs it (through the
// programs' hidden "gendoc" command and through confpage), so the pages
// cannot drift from the flags and keys they describe.
//
// Pages are man(7) roff, the macro set every man implementation reads;
// completions are a bash function registered with complete -F and a zsh
// function using _arguments. Text is written as given, escaped for roff;
// paragraphs are plain text separated by blank lines, lines starting with
// two spaces are kept as they are (examples).
package gendoc

import (
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// Flag is one command-line flag.
type Flag struct {
	// Name is the flag's name, without dashes.
	Name string
	// Arg names its value ("DIR", "N"); "" for a boolean flag.
	Arg string
	// Usage says what it does.
	Usage string
	// Default is its default value as text, "" when it has none worth
	// saying (false, 0, the empty string).
	Default string
	// Files says that its value is a path, for completion.
	Files bool
}

// FlagsOf returns the flags of fs in name order, as flag.PrintDefaults
// would describe them: the value's name from back-quotes in the usage
// or its type, the default unless it is the zero value.
func FlagsOf(fs *flag.FlagSet) []Flag {
	var out []Flag
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		if isBool(f) {
			arg = ""
		} else if arg == "value" || arg == "" {
			arg = "VALUE"
		} else {
			arg = strings.ToUpper(arg)
		}
		def := f.DefValue
		if isZero(f, def) {
			def = ""
		}
		out = append(out, Flag{Name: f.Name, Arg: arg, Usage: usage, Default: def, Files: pathLike(f.Name, usage)})
	})
	return out
}

// isBool reports whether f is a boolean flag, which takes no value.
func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// isZero reports whether def is the zero value of f's type, which
// flag.PrintDefaults does not mention either.
func isZero(f *flag.Flag, def string) bool {
	t := reflect.TypeOf(f.Value)
	var z reflect.Value
	if t.Kind() == reflect.Pointer {
		z = reflect.New(t.Elem())
	} else {
		z = reflect.Zero(t)
	}
	return def == z.Interface().(flag.Value).String() || def == "" || def == "[]"
}

// pathLike guesses whether a flag takes a path, for completion.
func pathLike(name, usage string) bool {
	switch name {
	case "db", "config", "index", "o", "records", "plots", "store", "spam", "ham", "attack-out":
		return true
	}
	u := strings.ToLower(usage)
	return strings.Contains(u, "file") || strings.Contains(u, "directory")
}

// Command is one subcommand of a program.
type Command struct {
	// Name is how it is invoked; Summary says in a line what it does;
	// Synopsis shows its arguments after its flags ("PATH...").
	Name, Summary, Synopsis string
	// Flags are its flags.
	Flags []Flag
}

// Table is one table of a configuration file and its keys.
type Table struct {
	// Name is the table's, as in [store.redis]; Text introduces it.
	Name, Text string
	Keys       []Key
}

// Key is one key of a table.
type Key struct {
	// Name is the key's; Type its kind of value ("string", "duration");
	// Default its default as TOML writes it, "" when it has none to
	// show; Text what it means.
	Name, Type, Default, Text string
}

// Section is a titled part of a page: paragraphs of text.
type Section struct {
	Title string
	Text  string
}

// Page is a manual page.
type Page struct {
	// Name and Section are the page's, as in spamd(8).
	Name    string
	Section int
	// Title is the line of NAME after the dash.
	Title string
	// Source and Date go in the page's header: the version, and the
	// build's date ("" leaves it out).
	Source, Date string
	// Synopsis lists the command lines, one per entry.
	Synopsis []string
	// Description is the text of DESCRIPTION.
	Description string
	// Options are the program's own flags, Commands its subcommands,
	// each with its flags.
	Options  []Flag
	Commands []Command
	// Tables are the tables of a configuration file, under SETTINGS.
	Tables []Table
	// Sections follow, in order (ENVIRONMENT, FILES, EXIT STATUS, SEE
	// ALSO, …).
	Sections []Section
}

// manual names the manual a section belongs to, for the page header.
var manual = map[int]string{1: "User Commands", 5: "File Formats", 8: "System Manager's Manual"}

// Man writes p as a man(7) page.
func (p Page) Man(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, ".TH %s %d %q %q %q\n", strings.ToUpper(p.Name), p.Section, p.Date, p.Source, manual[p.Section])
	b.WriteString(".SH NAME\n" + Escape(p.Name) + " \\- " + Escape(p.Title) + "\n")
	if len(p.Synopsis) > 0 {
		b.WriteString(".SH SYNOPSIS\n")
		for i, s := range p.Synopsis {
			if i > 0 {
				b.WriteString(".br\n")
			}
			b.WriteString(synopsisLine(s) + "\n")
		}
	}
	if p.Description != "" {
		b.WriteString(".SH DESCRIPTION\n")
		paragraphs(&b, p.Description)
	}
	if len(p.Options) > 0 {
		b.WriteString(".SH OPTIONS\n")
		for _, f := range p.Options {
			flagItem(&b, f)
		}
	}
	if len(p.Commands) > 0 {
		b.WriteString(".SH COMMANDS\n")
		for _, c := range p.Commands {
			fmt.Fprintf(&b, ".SS %s\n", Escape(c.Name))
			b.WriteString(synopsisLine(p.Name+" "+c.Name+" "+c.Synopsis) + "\n.PP\n" + Escape(upperFirst(c.Summary)) + ".\n")
			for _, f := range c.Flags {
				flagItem(&b, f)
			}
		}
	}
	if len(p.Tables) > 0 {
		b.WriteString(".SH SETTINGS\n")
		for _, t := range p.Tables {
			fmt.Fprintf(&b, ".SS [%s]\n", Escape(t.Name))
			if t.Text != "" {
				paragraphs(&b, t.Text)
			}
			for _, k := range t.Keys {
				b.WriteString(".TP\n\\fB" + Escape(k.Name) + "\\fR \\fI" + Escape(k.Type) + "\\fR")
				if k.Default != "" {
					b.WriteString(" = " + Escape(k.Default))
				}
				b.WriteString("\n")
				paragraphs(&b, k.Text)
			}
		}
	}
	for _, s := range p.Sections {
		b.WriteString(".SH " + Escape(strings.ToUpper(s.Title)) + "\n")
		paragraphs(&b, s.Text)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// synopsisLine sets a command line with the program in bold.
func synopsisLine(s string) string {
	name, rest, _ := strings.Cut(strings.TrimSpace(s), " ")
	if rest == "" {
		return ".B " + Escape(name)
	}
	return ".B " + Escape(name) + "\n" + Escape(rest)
}

// flagItem writes one flag as a tagged paragraph.
func flagItem(b *strings.Builder, f Flag) {
	b.WriteString(".TP\n\\fB\\-\\-" + Escape(f.Name) + "\\fR")
	if f.Arg != "" {
		b.WriteString(" \\fI" + Escape(f.Arg) + "\\fR")
	}
	b.WriteString("\n" + Escape(f.Usage))
	if f.Default != "" {
		b.WriteString(" (default: " + Escape(f.Default) + ")")
	}
	b.WriteString("\n")
}

// paragraphs writes text: paragraphs separated by blank lines; lines
// indented by two spaces are examples, set as they are.
func paragraphs(b *strings.Builder, text string) {
	for i, para := range strings.Split(strings.TrimSpace(text), "\n\n") {
		lines := strings.Split(para, "\n")
		if i > 0 {
			b.WriteString(".PP\n")
		}
		if strings.HasPrefix(lines[0], "  ") {
			b.WriteString(".RS 4\n.nf\n")
			for _, l := range lines {
				b.WriteString(Escape(strings.TrimPrefix(l, "  ")) + "\n")
			}
			b.WriteString(".fi\n.RE\n")
			continue
		}
		b.WriteString(Escape(strings.Join(lines, " ")) + "\n")
	}
}

// Escape makes s safe as roff text: backslashes and hyphens escaped, and
// a line that would start with a control character guarded.
func Escape(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			lines[i] = `\&` + l
		}
	}
	return strings.Join(lines, "\n")
}

// Bash writes a bash completion for program prog: its subcommands (none
// for a program without), and each one's flags, or the program's own. It
// needs bash alone, not the bash-completion package.
func Bash(w io.Writer, prog string, own []Flag, cmds []Command) error {
	fn := "_" + strings.ReplaceAll(prog, "-", "_")
	var b strings.Builder
	fmt.Fprintf(&b, "# bash completion for %s, written by its gendoc command.\n", prog)
	fmt.Fprintf(&b, "%s() {\n\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n", fn)
	if len(cmds) == 0 {
		bashFlags(&b, own, "\t")
		b.WriteString("}\n")
	} else {
		names := make([]string, len(cmds))
		for i, c := range cmds {
			names[i] = c.Name
		}
		for _, f := range own {
			names = append(names, "--"+f.Name)
		}
		b.WriteString("\tif [[ $COMP_CWORD -eq 1 ]]; then\n")
		fmt.Fprintf(&b, "\t\tCOMPREPLY=($(compgen -W %q -- \"$cur\"))\n\t\treturn\n\tfi\n", strings.Join(names, " "))
		b.WriteString("\tcase ${COMP_WORDS[1]} in\n")
		for _, c := range cmds {
			fmt.Fprintf(&b, "\t%s)\n", c.Name)
			bashFlags(&b, c.Flags, "\t\t")
			b.WriteString("\t\t;;\n")
		}
		b.WriteString("\tesac\n}\n")
	}
	fmt.Fprintf(&b, "complete -o filenames -F %s %s\n", fn, prog)
	_, err := io.WriteString(w, b.String())
	return err
}

// bashFlags completes flags, a path after a flag that takes one, nothing
// after one that takes another value, and paths as arguments.
func bashFlags(b *strings.Builder, flags []Flag, ind string) {
	var names, paths, values []string
	for _, f := range flags {
		names = append(names, "--"+f.Name)
		switch {
		case f.Arg != "" && f.Files:
			paths = append(paths, "--"+f.Name, "-"+f.Name)
		case f.Arg != "":
			values = append(values, "--"+f.Name, "-"+f.Name)
		}
	}
	if len(paths)+len(values) > 0 {
		fmt.Fprintf(b, "%scase $prev in\n", ind)
		if len(paths) > 0 {
			fmt.Fprintf(b, "%s%s)\n%s\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n%s\treturn\n%s\t;;\n", ind, strings.Join(paths, "|"), ind, ind, ind)
		}
		if len(values) > 0 {
			fmt.Fprintf(b, "%s%s)\n%s\treturn\n%s\t;;\n", ind, strings.Join(values, "|"), ind, ind)
		}
		fmt.Fprintf(b, "%sesac\n", ind)
	}
	fmt.Fprintf(b, "%sif [[ $cur == -* ]]; then\n%s\tCOMPREPLY=($(compgen -W %q -- \"$cur\"))\n%selse\n%s\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n%sfi\n",
		ind, ind, strings.Join(names, " "), ind, ind, ind)
}

// Zsh writes a zsh completion (#compdef) for program prog.
func Zsh(w io.Writer, prog string, own []Flag, cmds []Command) error {
	var b strings.Builder
	fmt.Fprintf(&b, "#compdef %s\n# zsh completion for %s, written by its gendoc command.\n\n", prog, prog)
	if len(cmds) == 0 {
		b.WriteString("_arguments -s \\\n")
		zshFlags(&b, own, "\t")
		b.WriteString("\t'*:file:_files'\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	b.WriteString("local -a commands\ncommands=(\n")
	for _, c := range cmds {
		fmt.Fprintf(&b, "\t%s\n", zshQuote(c.Name+":"+c.Summary))
	}
	b.WriteString(")\n\nif (( CURRENT == 2 )); then\n\t_describe -t commands command commands\n\treturn\nfi\n")
	b.WriteString("shift words\n(( CURRENT-- ))\ncase $words[1] in\n")
	for _, c := range cmds {
		fmt.Fprintf(&b, "%s)\n\t_arguments -s \\\n", c.Name)
		zshFlags(&b, c.Flags, "\t\t")
		b.WriteString("\t\t'*:file:_files'\n\t;;\n")
	}
	b.WriteString("esac\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// zshFlags writes one _arguments spec per flag.
func zshFlags(b *strings.Builder, flags []Flag, ind string) {
	for _, f := range flags {
		spec := "--" + f.Name + "[" + zshBracket(f.Usage) + "]"
		if f.Arg != "" {
			action := ""
			if f.Files {
				action = "_files"
			}
			spec = "--" + f.Name + "=[" + zshBracket(f.Usage) + "]:" + strings.ToLower(f.Arg) + ":" + action
		}
		fmt.Fprintf(b, "%s%s \\\n", ind, zshQuote(spec))
	}
}

// zshBracket makes s safe inside the brackets of an _arguments spec.
func zshBracket(s string) string {
	return strings.NewReplacer("[", "(", "]", ")", ":", `\:`).Replace(s)
}

// zshQuote quotes s for zsh in single quotes.
func zshQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
