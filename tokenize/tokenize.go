package tokenize

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// ErrMalformed reports input that is not a message at all: it has no
// header section that can be parsed. Tokenize wraps it with detail; test
// for it with errors.Is.
var ErrMalformed = errors.New("tokenize: not a message")

// Options selects what Tokenize reads and which tokens it makes. Start
// from DefaultOptions and change fields; New replaces zero or negative
// numeric fields by their defaults and a nil Headers by the default list.
type Options struct {
	// MaxBytes is how many bytes of the raw message are looked at; the rest
	// is ignored, so a 50 MB message costs no more than this many bytes.
	// Default 4 MiB.
	MaxBytes int
	// MaxTokens is the most tokens made for one message. Default 5000.
	MaxTokens int
	// MaxTokenLen is the longest body word kept, in runes. A longer run of
	// word characters becomes one "long:<n>" token, n being its length
	// rounded down to a multiple of ten and capped at 100; a longer header
	// word is dropped. Default 40.
	MaxTokenLen int
	// MinTokenLen is the shortest body word kept, in runes; CJK bigrams and
	// single CJK characters are exempt, and header words are kept from one
	// rune on. Default 2.
	MinTokenLen int
	// Stem reduces body words with the Snowball stemmer of the detected
	// language, when there is one. Header tokens are never stemmed.
	// Default true.
	Stem bool
	// FallbackLang is the ISO 639-1 code of the stemmer used when the
	// language of a body is not recognized, typically because it is too
	// short to tell: stemming such a message like most others keeps one
	// word one token across short and long messages. "" stems nothing
	// then. Default "en".
	FallbackLang string
	// Headers lists the lower-case names of the header fields whose
	// content becomes tokens prefixed with the field name. Address fields
	// give their domains and display-name words, message-id its domain,
	// date its time zone, content-type its media type and charset, and any
	// other field its words. "*" stands for every field not named, but
	// Received (see Received) and the verdicts other filters add
	// (X-Spam-*, X-Bogosity...), which a sender can forge. An empty, non-nil
	// list tokenizes no field. Default: see DefaultOptions.
	Headers []string
	// FieldNames adds a token per header field present ("field:x-mimeole"),
	// but for the verdicts other filters add: which fields a mailer writes
	// tells mailers apart whatever their values say.
	FieldNames bool
	// Mailboxes adds a token per whole address in the address fields
	// ("to:addr:alice@example.org") and for the envelope recipient a
	// Received field names ("received:addr:..."): which of a user's
	// addresses a message was sent to, and from which sender, tell
	// harvested addresses and known correspondents apart where domains
	// cannot. Default true.
	Mailboxes bool
	// Received makes tokens of the hosts, domains and IP addresses named
	// in Received trace fields, prefixed "received:". Default true.
	Received bool
	// URLs makes tokens of the hosts of URLs and e-mail addresses found in
	// body text and HTML links ("url:", "urlpath:", "email:"). Default true.
	URLs bool
	// HTML adds one token per distinct HTML tag and attribute name met in
	// a message ("html:tag:font", "html:attr:bgcolor"). Default true.
	HTML bool
}

// Defaults of the numeric Options fields.
const (
	// DefaultMaxBytes is the default of Options.MaxBytes.
	DefaultMaxBytes = 4 << 20
	// DefaultMaxTokens is the default of Options.MaxTokens.
	DefaultMaxTokens = 5000
	// DefaultMaxTokenLen is the default of Options.MaxTokenLen.
	DefaultMaxTokenLen = 40
	// DefaultMinTokenLen is the default of Options.MinTokenLen.
	DefaultMinTokenLen = 2
)

// defaultHeaders is the Headers list of DefaultOptions: the fields where
// spam and ham differ by sender software, envelope and list handling.
var defaultHeaders = []string{
	"subject", "from", "sender", "reply-to", "to", "cc", "return-path",
	"errors-to", "message-id", "date", "x-mailer", "user-agent",
	"content-type", "mime-version", "list-id", "list-unsubscribe",
	"precedence", "x-priority", "x-msmail-priority", "importance",
	"organization", "x-mailing-list",
}

// DefaultOptions returns the options New uses for zero fields, with every
// switch on.
func DefaultOptions() Options {
	return Options{
		MaxBytes:     DefaultMaxBytes,
		MaxTokens:    DefaultMaxTokens,
		MaxTokenLen:  DefaultMaxTokenLen,
		MinTokenLen:  DefaultMinTokenLen,
		Stem:         true,
		FallbackLang: "en",
		Headers:      append([]string(nil), defaultHeaders...),
		Received:     true,
		Mailboxes:    true,
		URLs:         true,
		HTML:         true,
	}
}

// Result is what Tokenize makes of one message.
type Result struct {
	// Tokens in message order: header tokens first, then the body parts in
	// MIME order, then meta tokens about problems met.
	Tokens []string
	// Header is the number of Tokens made from the top-level header
	// section; the rest come from the body.
	Header int
	// Lang is the detected language of the body text as an ISO 639-1 code
	// such as "en", or "" if unknown.
	Lang string
	// Truncated reports that MaxBytes or MaxTokens was hit.
	Truncated bool
	// Problems lists non-fatal trouble met (unknown charset, bad base64,
	// broken boundary...), for diagnostics.
	Problems []string
	// Measures holds the message's continuous features by their index
	// (MeasureSize...; see Measures for what each is), NaN for one the
	// message does not have.
	Measures [NumMeasures]float64
	// Arrival is when the message arrived, in seconds since 1970 UTC:
	// the date of its newest Received field; 0 when it has none that
	// parses.
	Arrival int64
}

// Tokenizer turns messages into tokens. It is safe for concurrent use by
// many goroutines. Make one with New; sharing one Tokenizer shares its
// cache of stems.
type Tokenizer struct {
	opts     Options
	headers  map[string]headerSpec // by lower-case field name
	anyField bool                  // Headers holds "*"
	fallback int                   // index in languages of FallbackLang, or -1
	cache    *cache
	pool     sync.Pool
	// tokens holds Results' Tokens given back by Recycle, as *[]string.
	tokens sync.Pool
}

// New returns a Tokenizer with options o, zero fields replaced by their
// defaults.
func New(o Options) *Tokenizer {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = DefaultMaxTokens
	}
	if o.MaxTokenLen <= 0 {
		o.MaxTokenLen = DefaultMaxTokenLen
	}
	if o.MinTokenLen <= 0 {
		o.MinTokenLen = DefaultMinTokenLen
	}
	if o.Headers == nil {
		o.Headers = defaultHeaders
	}
	t := &Tokenizer{
		opts:    o,
		headers: make(map[string]headerSpec, len(o.Headers)),
		cache:   newCache(),
	}
	t.fallback = langIndex(o.FallbackLang)
	if t.fallback >= 0 && languages[t.fallback].stem == nil {
		t.fallback = -1
	}
	for _, h := range o.Headers {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "*" {
			t.anyField = true
			continue
		}
		t.headers[h] = specOf(h)
	}
	t.pool.New = func() any { return new(state) }
	return t
}

// Tokenize returns the tokens of raw, one message as read from disk or
// SMTP: it may start with an mbox "From " line and use LF or CRLF line
// endings. The only error is ErrMalformed, wrapped; anything less bad is
// noted in Result.Problems and the tokens that could be made are returned.
func (t *Tokenizer) Tokenize(raw []byte) (Result, error) {
	st := t.pool.Get().(*state)
	defer t.pool.Put(st)
	st.reset(t)

	size := len(raw)
	if len(raw) > t.opts.MaxBytes {
		raw = raw[:t.opts.MaxBytes]
		st.truncated = true
	}
	n := len(raw)
	raw = skipFromLine(raw)
	st.meas.bytes = size - (n - len(raw))

	hdr := headerReader{b: raw}
	if !hdr.valid() {
		return Result{}, fmt.Errorf("tokenize %d bytes: %w: %s", len(raw), ErrMalformed, describeStart(raw))
	}
	st.headerTokens(&hdr)
	header := len(st.tokens)
	st.collecting = true
	st.body(hdr.rest(), st.top, 0)
	st.collecting = false
	st.finish()

	res := Result{
		Tokens:    st.tokens,
		Header:    header,
		Lang:      st.lang,
		Truncated: st.truncated,
		Problems:  st.problems,
		Measures:  st.meas.measure(len(st.text), st.opts.URLs),
		Arrival:   st.meas.arrivalUnix(),
	}
	st.tokens, st.problems = nil, nil
	st.meas = tally{}
	return res, nil
}

// Recycle gives back the Tokens of a Result the caller is done with, for a
// later Tokenize to fill instead of allocating: a message's tokens were an
// eighth of the bytes a training allocated. The caller must not use
// tokens after.
func (t *Tokenizer) Recycle(tokens []string) {
	if cap(tokens) == 0 || cap(tokens) > 2*t.opts.MaxTokens {
		return
	}
	// The strings go, so that the pool holds no tokens alive.
	clear(tokens)
	tokens = tokens[:0]
	t.tokens.Put(&tokens)
}

// tokenSlice returns an empty slice for a message's tokens.
func (t *Tokenizer) tokenSlice() []string {
	if p, ok := t.tokens.Get().(*[]string); ok {
		return *p
	}
	return make([]string, 0, 256)
}

// bom is the UTF-8 byte order mark some editors and Windows tools put at
// the start of a file: not part of the message.
const bom = "\xef\xbb\xbf"

// skipFromLine drops a byte order mark and the mbox "From " separator line
// an mbox file puts before each message.
func skipFromLine(raw []byte) []byte {
	raw = bytes.TrimPrefix(raw, []byte(bom))
	if !bytes.HasPrefix(raw, []byte("From ")) {
		return raw
	}
	if i := bytes.IndexByte(raw, '\n'); i >= 0 {
		return raw[i+1:]
	}
	return raw[:0]
}

// describeStart quotes the first bytes of raw for an error message.
func describeStart(raw []byte) string {
	if len(raw) == 0 {
		return "empty input"
	}
	n := min(len(raw), 24)
	return fmt.Sprintf("no header field at start %q", raw[:n])
}
