package milter

import (
	"bytes"
	"strings"
)

// Annotate returns raw as the milter would have it delivered with result
// r and class: the incoming X-Spam-* and X-Spamd-* fields removed, so
// that a sender cannot forge a verdict; the SpamAssassin-compatible
// headers, X-Spamd-Class (unless class is "") and X-Spamd-Result added at
// the end of the header; and on spam, when subjectTag is set, the Subject
// tagged. r.Fields is set from the message. It is for filters outside the
// MTA (spamtrain filter): what they deliver reads like what the milter
// delivers, and a report of it relabels the same message (Original).
func Annotate(raw []byte, r Result, class string, spam bool, subjectTag string) []byte {
	eol := lineEnd(raw)
	fields, rest, found := splitHeader(raw)
	if !found {
		// No header to add to: a header of the milter's fields alone.
		fields, rest = nil, append([]byte(eol), raw...)
	}
	var b bytes.Buffer
	b.Grow(len(raw) + 512)
	tagged := false
	kept := 0
	for _, f := range fields {
		name, value, _ := bytes.Cut(f, []byte(":"))
		name = bytes.TrimRight(name, " \t")
		if spoofable(string(name)) {
			continue
		}
		kept++
		if spam && subjectTag != "" && !tagged && strings.EqualFold(string(name), "Subject") {
			tagged = true
			v := strings.TrimLeft(string(value), " \t")
			if !strings.HasPrefix(v, subjectTag) {
				b.Write(name)
				b.WriteString(": " + subjectTag + " ")
				b.WriteString(v)
				continue
			}
		}
		b.Write(f)
	}
	if spam && subjectTag != "" && !tagged {
		b.WriteString("Subject: " + subjectTag + eol)
	}
	r.Fields = kept
	hs := spamHeaders(spam, r.Score, r.Required)
	if class != "" {
		hs = append(hs, [2]string{ClassHeader, class})
	}
	for _, h := range append(hs, [2]string{ResultHeader, Fold(r.String(), len(ResultHeader), eol+"\t")}) {
		b.WriteString(h[0] + ": " + h[1] + eol)
	}
	b.Write(rest)
	return b.Bytes()
}
