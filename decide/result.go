package decide

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/spamd/spamd/store"
)

// ResultHeader is the name of the header carrying a Result.
const ResultHeader = "X-Spamd-Result"

// Errors of reading a Result.
var (
	// ErrBadResult is returned by ParseResult for a header value it
	// cannot read.
	ErrBadResult = errors.New("malformed X-Spamd-Result")
	// ErrNoResult is returned by ResultOf for a message without an
	// X-Spamd-Result field.
	ErrNoResult = errors.New("no X-Spamd-Result field")
)

// The verdicts a Result can carry besides the filter's labels.
const (
	// Skipped marks a message the milter did not classify; Result.Reason
	// says why.
	Skipped = "skipped"
)

// Skip reasons.
const (
	ReasonAuthenticated = "authenticated"
	ReasonTrusted       = "trusted"
	ReasonSize          = "size"
	ReasonMalformed     = "malformed"
	ReasonError         = "error"
	// ReasonHeader marks a message over a header bound, which is
	// rejected rather than tagged.
	ReasonHeader = "header"
)

// maxQuotedToken bounds a token listed in the header, quoted, in bytes: a
// longer one is left out whole, never cut, so that the folded header's
// every line stays under the 998-byte limit of RFC 5322. Tokens are far
// shorter (words of at most 40 runes, host names of at most 253 bytes).
const maxQuotedToken = 900

// foldWidth is the line length Fold keeps to where a line break between
// two fields or tokens allows it, as mail software folds headers.
const foldWidth = 78

// Result is what the X-Spamd-Result header says about a message, for
// example:
//
//	spam; p=0.999998; score=13.12; required=3.00; sig=9f86d0…; spammy="viagra" "url:example.com"; hammy="meeting"; measures="links=41 (+1.90)" "size=2306 (-0.42)"
//	spam; p=0.999999; score=14.31; required=3.00; sig=4be2f1…; learned=spam
//	ham; p=0.912000; score=2.34; required=3.00; sig=77a0c3…; listed=allow; by=domain
//	skipped; reason=size
//
// Fields are separated by "; ". Tokens are Go-quoted ASCII strings
// separated by spaces, always whole. Readers ignore fields they do not
// know, and unfold a folded value (Fold).
type Result struct {
	// Verdict is the filter's label (the class decided, such as "ham" or
	// "spam", or "unsure") or "skipped".
	Verdict string
	// Reason says why a message was skipped: authenticated, trusted,
	// size, malformed or error. Empty for a classified message.
	Reason string
	// Probability is the spam probability.
	Probability float64
	// Score is the spam log-odds, as in X-Spam-Score.
	Score float64
	// Required is the score above which a message is spam.
	Required float64
	// Signature is the message's digest (tokenize.Digest) as the milter
	// received it, so that a later report can find it.
	Signature [32]byte
	// Fields is the number of header fields of the message as the milter
	// received it (forged X-Spam* fields, which it removes, left out); 0
	// if unknown. Fields added after the milter (Received and
	// Return-Path by the delivery agent) are those above them.
	Fields int
	// Learned is the class the message was trained as on delivery
	// (autolearn), "" if it was not.
	Learned string
	// Listed is "allow" or "deny" when a sender list decided the
	// verdict, whatever the model said, and By whose list it was:
	// "user", "domain" or "global". Empty otherwise.
	Listed, By string
	// Spammy and Hammy list the tokens that weighed most toward spam and
	// toward ham.
	Spammy, Hammy []string
	// Measures lists the measures (continuous features) that weighed most
	// either way, each with its value and its weight toward spam, as
	// "links=41 (+1.90)".
	Measures []string
}

// String formats r as the value of an X-Spamd-Result header.
func (r Result) String() string {
	var b strings.Builder
	b.WriteString(r.Verdict)
	if r.Verdict == Skipped {
		b.WriteString("; reason=")
		b.WriteString(r.Reason)
		return b.String()
	}
	fmt.Fprintf(&b, "; p=%.6f; score=%.2f; required=%.2f; sig=%x", r.Probability, r.Score, r.Required, r.Signature)
	if r.Fields > 0 {
		fmt.Fprintf(&b, "; fields=%d", r.Fields)
	}
	if r.Learned != "" {
		b.WriteString("; learned=")
		b.WriteString(r.Learned)
	}
	if r.Listed != "" {
		fmt.Fprintf(&b, "; listed=%s; by=%s", r.Listed, r.By)
	}
	for _, side := range []struct {
		name   string
		tokens []string
	}{{"spammy", quotedTokens(r.Spammy)}, {"hammy", quotedTokens(r.Hammy)}, {"measures", quotedTokens(r.Measures)}} {
		if len(side.tokens) == 0 {
			continue
		}
		b.WriteString("; ")
		b.WriteString(side.name)
		b.WriteByte('=')
		for i, t := range side.tokens {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(t)
		}
	}
	return b.String()
}

// quotedTokens quotes the tokens that fit the header, leaving out whole
// any whose quoted form is longer than maxQuotedToken.
func quotedTokens(ts []string) []string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		if q := strconv.QuoteToASCII(t); len(q) <= maxQuotedToken {
			out = append(out, q)
		}
	}
	return out
}

// Fold breaks the header value v, to follow a field name of nameLen
// bytes and ": ", into lines of at most foldWidth bytes where it can,
// with sep (a line end and a tab) between them. It breaks only at a space
// outside quotes, so a token is never split; a line longer than the width
// is one that holds a single long token.
func Fold(v string, nameLen int, sep string) string {
	var b strings.Builder
	b.Grow(len(v) + len(v)/foldWidth*len(sep))
	col := nameLen + 2
	quoted, escaped := false, false
	start := 0 // of the word being read
	for i := 0; i <= len(v); i++ {
		if i < len(v) {
			c := v[i]
			switch {
			case escaped:
				escaped = false
				continue
			case quoted && c == '\\':
				escaped = true
				continue
			case c == '"':
				quoted = !quoted
				continue
			case c != ' ' || quoted:
				continue
			}
		}
		word := v[start:i]
		if start > 0 {
			if col+1+len(word) > foldWidth {
				b.WriteString(sep)
				col = 1
			} else {
				b.WriteByte(' ')
				col++
			}
		}
		b.WriteString(word)
		col += len(word)
		start = i + 1
	}
	return b.String()
}

// ParseResult reads the value of an X-Spamd-Result header.
func ParseResult(s string) (Result, error) {
	var r Result
	// Unfolding removes the line ends; the white space after each stays.
	s = strings.NewReplacer("\r\n", "", "\n", "").Replace(s)
	verdict, rest, _ := strings.Cut(s, ";")
	r.Verdict = strings.TrimSpace(verdict)
	// A verdict is a class (ham, spam, or one of the site's), unsure or
	// skipped, all of them valid class names.
	if store.ValidClass(r.Verdict) != nil {
		return Result{}, fmt.Errorf("%w: verdict %q", ErrBadResult, r.Verdict)
	}
	var sig, p, score bool
	for rest = strings.TrimLeft(rest, " \t"); rest != ""; rest = strings.TrimLeft(rest, " \t") {
		key, after, ok := strings.Cut(rest, "=")
		if !ok || strings.ContainsAny(key, "; \"") {
			return Result{}, fmt.Errorf("%w: field %q", ErrBadResult, rest)
		}
		var value string
		var tokens []string
		var err error
		if strings.HasPrefix(after, `"`) {
			tokens, rest, err = quotedList(after)
		} else {
			value, rest, _ = strings.Cut(after, ";")
			value = strings.TrimSpace(value)
		}
		if err != nil {
			return Result{}, fmt.Errorf("%w: %s: %v", ErrBadResult, key, err)
		}
		switch key {
		case "reason":
			r.Reason = value
		case "p":
			r.Probability, err = number(value)
			if err == nil && (r.Probability < 0 || r.Probability > 1) {
				err = fmt.Errorf("%v is not a probability", r.Probability)
			}
			p = true
		case "score":
			r.Score, err = number(value)
			score = true
		case "required":
			r.Required, err = number(value)
		case "sig":
			var b []byte
			if b, err = hex.DecodeString(value); err == nil && len(b) != len(r.Signature) {
				err = fmt.Errorf("%d bytes, want %d", len(b), len(r.Signature))
			}
			copy(r.Signature[:], b)
			sig = true
		case "fields":
			r.Fields, err = strconv.Atoi(value)
			if err == nil && r.Fields < 0 {
				err = fmt.Errorf("%d fields", r.Fields)
			}
		case "learned":
			r.Learned = value
			if store.ValidClass(value) != nil {
				err = fmt.Errorf("%q is not a class name", value)
			}
		case "listed":
			r.Listed = value
			if value != "allow" && value != "deny" {
				err = fmt.Errorf("%q is neither allow nor deny", value)
			}
		case "by":
			r.By = value
			if value != "user" && value != "domain" && value != "global" {
				err = fmt.Errorf("%q is not user, domain or global", value)
			}
		case "spammy":
			r.Spammy = tokens
		case "measures":
			r.Measures = tokens
		case "hammy":
			r.Hammy = tokens
		}
		if err != nil {
			return Result{}, fmt.Errorf("%w: %s: %v", ErrBadResult, key, err)
		}
	}
	if r.Verdict == Skipped {
		if r.Reason == "" || strings.ContainsAny(r.Reason, " \t;\"") {
			return Result{}, fmt.Errorf("%w: skipped without a reason", ErrBadResult)
		}
		return Result{Verdict: Skipped, Reason: r.Reason}, nil
	}
	if !sig || !p || !score {
		return Result{}, fmt.Errorf("%w: a verdict needs p, score and sig", ErrBadResult)
	}
	r.Reason = ""
	return r, nil
}

// number parses a finite float.
func number(s string) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a finite number", s)
	}
	return f, nil
}

// quotedList reads space-separated Go-quoted strings up to the next ';'
// or the end, and returns them with what follows the ';'.
func quotedList(s string) (tokens []string, rest string, err error) {
	for {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return tokens, "", nil
		}
		if s[0] == ';' {
			return tokens, s[1:], nil
		}
		if s[0] != '"' {
			return nil, "", fmt.Errorf("want a quoted token at %q", s)
		}
		end := 1
		for end < len(s) && s[end] != '"' {
			if s[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(s) {
			return nil, "", errors.New("unterminated quoted token")
		}
		t, err := strconv.Unquote(s[:end+1])
		if err != nil {
			return nil, "", fmt.Errorf("token %s: %v", s[:end+1], err)
		}
		tokens = append(tokens, t)
		s = s[end+1:]
	}
}

// maxHeader bounds how much of a message ResultOf reads looking for the
// field.
const maxHeader = 1 << 20

// ResultOf returns what the first X-Spamd-Result field in the header of
// raw says that ParseResult can read: what the milter decided about the
// message when it was delivered. Line endings may be CRLF or LF; folded
// fields are unfolded. It returns ErrNoResult when the header has no such
// field, and the first field's error when none reads.
//
// The milter removes incoming X-Spamd-* fields, so on mail that passed
// through it the field is its own; on mail that did not, it is whatever
// the sender wrote.
func ResultOf(raw []byte) (Result, error) {
	raw = raw[:min(len(raw), maxHeader)]
	var first error
	for len(raw) > 0 {
		line, rest, _ := bytes.Cut(raw, []byte("\n"))
		raw = rest
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			break // the end of the header
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok || !strings.EqualFold(string(bytes.TrimRight(name, " \t")), ResultHeader) {
			continue
		}
		v := string(value)
		// Continuation lines start with white space.
		for len(raw) > 0 && (raw[0] == ' ' || raw[0] == '\t') {
			cont, rest, _ := bytes.Cut(raw, []byte("\n"))
			raw = rest
			v += " " + string(bytes.TrimSpace(cont))
		}
		r, err := ParseResult(strings.TrimSpace(v))
		if err == nil {
			return r, nil
		}
		if first == nil {
			first = err
		}
	}
	if first != nil {
		return Result{}, first
	}
	return Result{}, ErrNoResult
}
