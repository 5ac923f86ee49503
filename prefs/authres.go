package prefs

import (
	"strings"
)

// Authenticated returns the domains the Authentication-Results field
// values fields vouch for, reading only those whose authserv-id is id
// (RFC 8601): the header.from of a DMARC pass, the domain of the
// smtp.mailfrom of an SPF pass, and the header.d of a DKIM pass, marked
// with a leading '.' because it vouches for its subdomains too. Domains
// are lower-cased. A field it cannot read vouches for nothing.
func Authenticated(fields []string, id string) []string {
	var out []string
	for _, f := range fields {
		parts := split(stripComments(f))
		if len(parts) < 2 {
			continue
		}
		// The authserv-id, and perhaps a version after it.
		head := strings.Fields(parts[0])
		if len(head) == 0 || !strings.EqualFold(unquote(head[0]), id) {
			continue
		}
		for _, p := range parts[1:] {
			kv := pairs(p)
			if len(kv) == 0 {
				continue
			}
			method, _, _ := strings.Cut(strings.ToLower(kv[0][0]), "/")
			if !strings.EqualFold(kv[0][1], "pass") {
				continue
			}
			for _, prop := range kv[1:] {
				k, v := strings.ToLower(prop[0]), strings.ToLower(prop[1])
				switch {
				case method == "dmarc" && k == "header.from":
					out = appendDomain(out, "", v)
				case method == "dkim" && k == "header.d":
					out = appendDomain(out, ".", v)
				case method == "spf" && k == "smtp.mailfrom":
					out = appendDomain(out, "", v[strings.LastIndexByte(v, '@')+1:])
				}
			}
		}
	}
	return out
}

// appendDomain appends prefix+d to out if d looks like a domain.
func appendDomain(out []string, prefix, d string) []string {
	d = strings.Trim(d, ".")
	if d == "" || strings.ContainsAny(d, "@ \t;\"") || !strings.Contains(d, ".") {
		return out
	}
	return append(out, prefix+d)
}

// stripComments removes the parenthesized comments of a header value,
// nested or not, outside quoted strings.
func stripComments(s string) string {
	var b strings.Builder
	depth := 0
	quoted := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && (quoted || depth > 0) && i+1 < len(s):
			if depth == 0 {
				b.WriteByte(c)
				b.WriteByte(s[i+1])
			}
			i++
		case quoted:
			b.WriteByte(c)
			if c == '"' {
				quoted = false
			}
		case c == '(':
			depth++
		case c == ')' && depth > 0:
			depth--
			if depth == 0 {
				b.WriteByte(' ')
			}
		case depth > 0:
		case c == '"':
			quoted = true
			b.WriteByte(c)
		case c == '\r' || c == '\n' || c == '\t':
			b.WriteByte(' ')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// split splits a value without comments at the semicolons outside quoted
// strings.
func split(s string) []string {
	var out []string
	quoted := false
	start := 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && quoted:
			i++
		case s[i] == '"':
			quoted = !quoted
		case s[i] == ';' && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// pairs reads the key=value pairs of one result ("dkim=pass
// header.d=example.org"), white space allowed around '='; words that
// are not pairs are skipped.
func pairs(s string) [][2]string {
	var out [][2]string
	i := 0
	skip := func() {
		for i < len(s) && s[i] == ' ' {
			i++
		}
	}
	for {
		skip()
		if i >= len(s) {
			return out
		}
		start := i
		for i < len(s) && s[i] != ' ' && s[i] != '=' {
			i++
		}
		key := s[start:i]
		skip()
		if i >= len(s) || s[i] != '=' {
			continue // a word alone: not a pair
		}
		i++
		skip()
		start = i
		if i < len(s) && s[i] == '"' {
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
			i = min(i+1, len(s))
		} else {
			for i < len(s) && s[i] != ' ' {
				i++
			}
		}
		if key != "" {
			out = append(out, [2]string{key, unquote(s[start:i])})
		}
	}
}

// unquote returns the content of a quoted string, or s unchanged.
func unquote(s string) string {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return s
	}
	s = s[1 : len(s)-1]
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
