package decide

import (
	"bytes"
	"strings"

	"github.com/spamd/spamd/tokenize"
)

// Original returns the message as the milter received it, from a
// delivered copy that carries its X-Spamd-Result: without the fields the
// milter added (X-Spam-*, X-Spamd-*, a Subject tag subjectTag put on
// spam or a tagged class), and without the fields added after it, which a delivery agent
// puts above the message's own (Received, Return-Path, Delivered-To). ok
// is false when the copy carries no usable result or what is left is not
// the message the milter saw (its digest is not the result's signature);
// raw is then to be used as it is.
//
// A report of the delivered copy thus untrains exactly the features
// trained at delivery, rather than those of the copy, which has a
// Received and a Return-Path more and perhaps a tagged Subject.
func Original(raw []byte, subjectTag string) (orig []byte, ok bool) {
	res, err := ResultOf(raw)
	if err != nil || res.Verdict == Skipped || res.Fields <= 0 {
		return raw, false
	}
	// The tag goes on spam, and on a class [actions] classes tags, which
	// the result does not say: for a verdict of another class than ham,
	// the copy is tried with and without the tag taken off, and the
	// signature tells which was received.
	tries := []bool{false}
	switch {
	case subjectTag == "":
	case res.Verdict == "spam":
		tries = []bool{true}
	case res.Verdict != "ham" && res.Verdict != "unsure":
		tries = []bool{true, false}
	}
	for _, untag := range tries {
		if orig, ok := original(raw, res, untag, subjectTag); ok {
			return orig, true
		}
	}
	return raw, false
}

// original rebuilds the message the milter received from raw and its
// result res, taking subjectTag off the Subject when untag is set, and
// reports whether its digest is the result's signature.
func original(raw []byte, res Result, untag bool, subjectTag string) ([]byte, bool) {
	fields, body, found := splitHeader(raw)
	if !found {
		return nil, false
	}
	kept := fields[:0:0]
	tagged := false
	for _, f := range fields {
		name, value, _ := bytes.Cut(f, []byte(":"))
		name = bytes.TrimRight(name, " \t")
		if Spoofable(string(name)) {
			continue
		}
		if !tagged && untag && strings.EqualFold(string(name), "Subject") {
			tagged = true
			v := strings.TrimSpace(string(value))
			switch {
			case v == subjectTag:
				continue // the milter added the field
			case strings.HasPrefix(v, subjectTag+" "):
				f = append(append([]byte(nil), name...), ": "+strings.TrimPrefix(v, subjectTag+" ")...)
				f = append(f, lineEnd(raw)...)
			}
		}
		kept = append(kept, f)
	}
	if len(kept) < res.Fields {
		return nil, false
	}
	kept = kept[len(kept)-res.Fields:]
	var b bytes.Buffer
	b.Grow(len(raw))
	for _, f := range kept {
		b.Write(f)
	}
	b.Write(body)
	if tokenize.Digest(b.Bytes()) != res.Signature {
		return nil, false
	}
	return b.Bytes(), true
}

// lineEnd returns the line ending raw uses, for a field rebuilt from
// parts.
func lineEnd(raw []byte) string {
	if i := bytes.IndexByte(raw, '\n'); i > 0 && raw[i-1] == '\r' {
		return "\r\n"
	}
	return "\n"
}

// splitHeader splits raw into its header fields, each with its folded
// lines and line ends, and the rest: the blank line and the body. found
// is false when there is no header section.
func splitHeader(raw []byte) (fields [][]byte, rest []byte, found bool) {
	for len(raw) > 0 {
		if raw[0] == '\n' || (raw[0] == '\r' && len(raw) > 1 && raw[1] == '\n') {
			return fields, raw, len(fields) > 0
		}
		end := 0
		for {
			i := bytes.IndexByte(raw[end:], '\n')
			if i < 0 {
				end = len(raw)
				break
			}
			end += i + 1
			if end == len(raw) || (raw[end] != ' ' && raw[end] != '\t') {
				break
			}
		}
		line := raw[:end]
		if bytes.IndexByte(line, ':') <= 0 {
			return nil, nil, false
		}
		fields = append(fields, line)
		raw = raw[end:]
	}
	return fields, nil, len(fields) > 0
}
