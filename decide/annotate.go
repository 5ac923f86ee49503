package decide

import (
	"bytes"
	"strings"
)

// Fields returns the number of header fields of raw that a delivered
// copy keeps: all but the incoming X-Spam-* and X-Spamd-* fields, which
// are removed. It is Result.Fields for a message filtered outside the
// MTA, counted as the milter counts the fields it receives.
func Fields(raw []byte) int {
	fields, _, _ := splitHeader(raw)
	n := 0
	for _, f := range fields {
		name, _, _ := bytes.Cut(f, []byte(":"))
		if !Spoofable(string(bytes.TrimRight(name, " \t"))) {
			n++
		}
	}
	return n
}

// Annotate returns raw as the milter would have it delivered with the
// header fields hs (Decision.Headers) and, when subjectTag is not "",
// the Subject tagged: the incoming X-Spam-* and X-Spamd-* fields
// removed, so that a sender cannot forge a verdict; hs added at the end
// of the header, X-Spamd-Result folded; the first Subject field
// prefixed with subjectTag unless it starts with it, or, without one, a
// Subject field of the tag alone added after hs. These are the milter's
// own header changes, byte for byte, in the message's line ends. It is
// for filters outside the MTA (spamtrain filter): what they deliver
// reads like what the milter delivers, and a report of it relabels the
// same message.
func Annotate(raw []byte, hs [][2]string, subjectTag string) []byte {
	eol := lineEnd(raw)
	fields, rest, found := splitHeader(raw)
	if !found {
		// No header to add to: a header of the milter's fields alone.
		fields, rest = nil, append([]byte(eol), raw...)
	}
	var b bytes.Buffer
	b.Grow(len(raw) + 512)
	tagged := false
	for _, f := range fields {
		name, value, _ := bytes.Cut(f, []byte(":"))
		name = bytes.TrimRight(name, " \t")
		if Spoofable(string(name)) {
			continue
		}
		if subjectTag != "" && !tagged && strings.EqualFold(string(name), "Subject") {
			tagged = true
			v := strings.TrimLeft(string(value), " \t")
			if !strings.HasPrefix(strings.TrimSpace(v), subjectTag) {
				b.Write(name)
				b.WriteString(": " + subjectTag + " ")
				b.WriteString(v)
				continue
			}
		}
		b.Write(f)
	}
	for _, h := range hs {
		v := h[1]
		if h[0] == ResultHeader {
			v = Fold(v, len(h[0]), eol+"\t")
		}
		b.WriteString(h[0] + ": " + v + eol)
	}
	if subjectTag != "" && !tagged {
		b.WriteString("Subject: " + subjectTag + eol)
	}
	b.Write(rest)
	return b.Bytes()
}
