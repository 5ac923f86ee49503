package tokenize

import (
	"bytes"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// html appends the visible text of an HTML document to the state's text,
// and adds link targets as URL tokens and, when Options.HTML, tag and
// attribute names. Inline tags and comments do not separate words, so
// that "V<b></b>iagra" and "Via<!-- -->gra" read as one word; block tags
// do.
//
// The x/net/html tokenizer finds the tokens, decodes entities in text and
// knows where script and style contents end; tags are read from its raw
// bytes here, because its TagName and TagAttr copy every name and value.
func (st *state) html(b []byte) {
	start := len(st.text)
	defer func() { st.meas.htmlText += len(st.text) - start }()
	st.text = append(st.text, '\n')
	z := html.NewTokenizer(bytes.NewReader(b))
	skip := atom.Atom(0) // element whose raw content is being skipped
	for !st.full() {
		switch z.Next() {
		case html.ErrorToken:
			return // io.EOF: the input is in memory, so no other error
		case html.TextToken:
			if skip == 0 {
				st.text = append(st.text, z.Text()...)
			}
		case html.StartTagToken:
			switch a := st.tag(z.Raw()); a {
			case atom.Script, atom.Style, atom.Iframe, atom.Noembed, atom.Noframes:
				// Never shown: code, or the fallback of what a mail
				// reader does show.
				skip = a
			}
		case html.SelfClosingTagToken:
			st.tag(z.Raw())
		case html.EndTagToken:
			a, _ := st.tagName(z.Raw())
			if a == skip {
				skip = 0
			}
			if isBlock(a) {
				st.text = append(st.text, '\n')
			}
		}
	}
}

// tagName returns the atom of the element whose tag is raw, 0 if it has
// none, and the rest of raw after the name.
func (st *state) tagName(raw []byte) (atom.Atom, []byte) {
	raw = bytes.TrimPrefix(bytes.TrimPrefix(raw, []byte("<")), []byte("/"))
	i := 0
	for i < len(raw) && tagByte[raw[i]]&(tagSpace|tagSlash|tagEnd) == 0 {
		i++
	}
	st.lname = lowerASCII(st.lname[:0], raw[:i])
	return atom.Lookup(st.lname), raw[i:]
}

// Classes of the bytes that end the names and values of a tag.
const (
	tagSpace = 1 << iota // HTML white space
	tagSlash
	tagEnd // '>'
	tagEq
)

var tagByte = [256]uint8{
	' ': tagSpace, '\t': tagSpace, '\n': tagSpace, '\r': tagSpace, '\f': tagSpace,
	'/': tagSlash, '>': tagEnd, '=': tagEq,
}

// tag handles the start tag raw and returns the element's atom.
func (st *state) tag(raw []byte) atom.Atom {
	a, rest := st.tagName(raw)
	if a == atom.Img {
		st.meas.images++
	}
	if st.opts.HTML && !seen(&st.seenTags, a) {
		if a != 0 {
			st.add("html:tag:" + a.String())
		} else {
			st.add("html:tag:other")
		}
	}
	if isBlock(a) {
		st.text = append(st.text, '\n')
	}
	for len(rest) > 0 {
		var key, val []byte
		key, val, rest = nextAttr(rest)
		if len(key) == 0 {
			continue
		}
		st.hbuf = lowerASCII(st.hbuf[:0], key)
		key = st.hbuf
		if st.opts.HTML {
			st.attrToken(key)
		}
		switch string(key) {
		case "href", "src", "action", "background":
			st.link(unescapeAttr(val))
		case "alt":
			st.text = append(st.text, ' ')
			st.text = append(st.text, unescapeAttr(val)...)
			st.text = append(st.text, ' ')
		}
	}
	return a
}

// nextAttr reads the first attribute of the rest of a tag's raw bytes.
// key is empty when there is none.
func nextAttr(b []byte) (key, val, rest []byte) {
	i := 0
	for i < len(b) && tagByte[b[i]]&(tagSpace|tagSlash) != 0 {
		i++
	}
	if i == len(b) || b[i] == '>' {
		return nil, nil, nil
	}
	k := i
	i++ // a name may start with '='
	for i < len(b) && tagByte[b[i]] == 0 {
		i++
	}
	key = b[k:i]
	for i < len(b) && tagByte[b[i]] == tagSpace {
		i++
	}
	if i == len(b) || b[i] != '=' {
		return key, nil, b[i:]
	}
	i++
	for i < len(b) && tagByte[b[i]] == tagSpace {
		i++
	}
	if i < len(b) && (b[i] == '"' || b[i] == '\'') {
		q := b[i]
		end := bytes.IndexByte(b[i+1:], q)
		if end < 0 {
			return key, b[i+1:], nil
		}
		return key, b[i+1 : i+1+end], b[i+2+end:]
	}
	v := i
	for i < len(b) && tagByte[b[i]]&(tagSpace|tagEnd) == 0 {
		i++
	}
	return key, b[v:i], b[i:]
}

// unescapeAttr decodes the character references of an attribute value.
func unescapeAttr(v []byte) []byte {
	if bytes.IndexByte(v, '&') < 0 {
		return v
	}
	return []byte(html.UnescapeString(string(v)))
}

// seen reports whether a is in set, adding it if not.
func seen(set *[]atom.Atom, a atom.Atom) bool {
	for _, b := range *set {
		if a == b {
			return true
		}
	}
	*set = append(*set, a)
	return false
}

// Bounds on attribute-name tokens: a spammer can invent names at will.
const (
	maxAttrNames  = 64
	maxAttrNameLn = 20
)

// attrToken adds the token of an attribute name the first time it is met.
func (st *state) attrToken(key []byte) {
	if len(key) == 0 || len(key) > maxAttrNameLn || len(st.seenAttrs) >= maxAttrNames {
		return
	}
	for _, c := range key {
		if !('a' <= c && c <= 'z' || c == '-') {
			return
		}
	}
	for _, s := range st.seenAttrs {
		if s == string(key) {
			return
		}
	}
	name := string(key)
	st.seenAttrs = append(st.seenAttrs, name)
	st.add("html:attr:" + name)
}

// link adds the tokens of a link target that names a host.
func (st *state) link(v []byte) {
	if !st.opts.URLs {
		return
	}
	v = bytes.TrimSpace(v)
	switch {
	case hasPrefixFold(v, "mailto:"):
		a := v[len("mailto:"):]
		if q := bytes.IndexByte(a, '?'); q >= 0 {
			a = a[:q]
		}
		if at := bytes.LastIndexByte(a, '@'); at >= 0 {
			st.meas.links++
			st.host("email:", a[at+1:])
		}
	case hasPrefixFold(v, "http://"), hasPrefixFold(v, "https://"), hasPrefixFold(v, "ftp://"), hasPrefixFold(v, "www."):
		st.url(v)
	}
}

// isBlock reports whether an element breaks the line of text it is in.
func isBlock(a atom.Atom) bool {
	switch a {
	case atom.Address, atom.Article, atom.Aside, atom.Blockquote, atom.Body,
		atom.Br, atom.Caption, atom.Center, atom.Dd, atom.Div, atom.Dl,
		atom.Dt, atom.Fieldset, atom.Figcaption, atom.Figure, atom.Footer,
		atom.Form, atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6,
		atom.Head, atom.Header, atom.Hr, atom.Html, atom.Img, atom.Li,
		atom.Main, atom.Nav, atom.Ol, atom.Option, atom.P, atom.Pre,
		atom.Section, atom.Table, atom.Tbody, atom.Td, atom.Tfoot, atom.Th,
		atom.Thead, atom.Title, atom.Tr, atom.Ul:
		return true
	}
	return false
}
