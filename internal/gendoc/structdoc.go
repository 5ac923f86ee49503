package gendoc

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strings"
	"unicode"
)

// StructDocs reads the doc comments of the struct fields of a Go source
// file, keyed "Type.Field". A comment over several fields declared
// together, or over consecutive fields of which only the first has one,
// documents each of them.
func StructDocs(src []byte) (map[string]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), "", src, parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("struct docs: %w", err)
	}
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return true
		}
		prev := ""
		for _, field := range st.Fields.List {
			doc := strings.TrimSpace(field.Doc.Text())
			for _, name := range field.Names {
				if doc == "" && strings.Contains(prev, name.Name) {
					// "TLSCertFile and TLSKeyFile are …" over the
					// first of the two.
					doc = prev
				}
				out[ts.Name.Name+"."+name.Name] = doc
			}
			prev = doc
		}
		return false
	})
	return out, nil
}

// KeyText turns a field's Go doc comment into the text of a
// configuration key: "Listen is where …" becomes "Where …", and the Go
// names of the struct's fields, given in names (Go name → key), become
// their keys.
func KeyText(doc, field string, names map[string]string) string {
	if rest, ok := strings.CutPrefix(doc, field+" is "); ok {
		doc = upperFirst(rest)
	}
	// Paragraph breaks survive; lines within a paragraph are joined.
	paras := strings.Split(doc, "\n\n")
	for i, p := range paras {
		paras[i] = strings.Join(strings.Fields(p), " ")
	}
	doc = strings.Join(paras, "\n\n")
	return goName.ReplaceAllStringFunc(doc, func(w string) string {
		if k, ok := names[w]; ok {
			return k
		}
		return w
	})
}

// goName matches a Go identifier of two words or more (ClassifyBytes,
// CacheMB): one word (Redis, Dir) is as likely English, and reads the
// same as its key anyway.
var goName = regexp.MustCompile(`\b[A-Z][a-z0-9]*[A-Z][A-Za-z0-9]*\b`)

func upperFirst(s string) string {
	for i, r := range s {
		return string(unicode.ToUpper(r)) + s[i+len(string(r)):]
	}
	return s
}
