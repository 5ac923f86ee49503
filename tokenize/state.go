package tokenize

import (
	"bytes"
	"mime"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/net/html/atom"
)

// state is the working memory of one Tokenize call. States are pooled so
// that their scratch buffers are reused from message to message.
type state struct {
	t    *Tokenizer
	opts *Options

	tokens    []string
	problems  []string
	kinds     uint16 // problem kinds met, bits indexing problemKinds
	truncated bool
	limit     int // tokens allowed while not collecting: MaxTokens, less within one header field
	lang      string
	stemIdx   int // index in languages of the stemmer in use, -1 for none

	// While the body is walked, collecting is set: text gathers the text
	// of every text part and marks the tokens that are ready (URLs of
	// links, attachment and MIME tokens) with their position in text, so
	// that words can be stemmed in the language of the whole body and
	// still come out in message order.
	collecting bool
	text       []byte
	marks      []mark
	subject    []byte // decoded Subject, also read by language detection

	local []localEntry // the state's level of the token cache
	meas  tally        // what the measures count

	top    partHeader // MIME fields of the top-level header
	hint   string     // charset for text parts that name none and are not UTF-8
	nparts int        // MIME parts met
	wd     mime.WordDecoder
	// wordBuf and wordReader hold an encoded word converted to UTF-8
	// (wordCharset).
	wordBuf    []byte
	wordReader bytes.Reader
	qp         qpReader // decodes a quoted-printable part

	// Scratch space.
	wbuf, nbuf, lbuf, key, hbuf, mbuf, lname, recv, part, conv []byte
	runes                                                      []rune
	seenTags                                                   []atom.Atom // HTML tag and attribute names already made tokens of
	seenAttrs                                                  []string
}

// mark is a ready token to be put at a position of state.text.
type mark struct {
	pos int
	tok string
}

func (st *state) reset(t *Tokenizer) {
	st.t = t
	st.opts = &t.opts
	st.tokens = t.tokenSlice()
	st.problems = nil
	st.kinds = 0
	st.truncated = false
	st.limit = t.opts.MaxTokens
	st.lang = ""
	st.stemIdx = -1
	st.collecting = false
	st.text = st.text[:0]
	st.marks = st.marks[:0]
	st.subject = st.subject[:0]
	st.top = partHeader{}
	st.hint = ""
	st.seenTags = st.seenTags[:0]
	st.seenAttrs = st.seenAttrs[:0]
	st.nparts = 0
	st.meas = tally{}
	if st.local == nil {
		st.local = make([]localEntry, localSize)
	}
	if st.wd.CharsetReader == nil {
		st.wd.CharsetReader = st.wordCharset
	}
	// Pooled buffers that grew huge on one message are not kept for all.
	const keep = 1 << 20
	if cap(st.text) > keep {
		st.text = nil
	}
	if cap(st.part) > keep {
		st.part = nil
	}
	if cap(st.conv) > keep {
		st.conv = nil
	}
	if cap(st.wordBuf) > keep {
		st.wordBuf = nil
	}
}

// full reports whether no more tokens can be added now, and notes
// truncation when that is because MaxTokens was reached.
func (st *state) full() bool {
	n, limit := len(st.tokens), st.limit
	if st.collecting {
		n, limit = len(st.marks), st.opts.MaxTokens
	}
	if n < limit {
		return false
	}
	if n >= st.opts.MaxTokens {
		st.truncated = true
	}
	return true
}

// add adds a finished token: to the output, or while the body is being
// collected, as a mark at the current end of the text.
func (st *state) add(tok string) {
	if st.full() {
		return
	}
	st.push(tok)
}

// push adds a token as add does, once full has said there is room.
func (st *state) push(tok string) {
	if st.collecting {
		st.marks = append(st.marks, mark{len(st.text), tok})
		return
	}
	st.tokens = append(st.tokens, tok)
}

// addBytes adds prefix+word as a token, through the cache so that a
// frequent token is one shared string.
func (st *state) addBytes(prefix string, word []byte) {
	st.key = append(append(append(st.key[:0], nsPlain), prefix...), word...)
	st.addKey(st.key)
}

// addKey adds the token kw[1:] as addBytes does; it sets kw[0] to the
// key's namespace.
func (st *state) addKey(kw []byte) {
	if st.full() {
		return
	}
	kw[0] = nsPlain
	tok, h, ok := st.cached(kw)
	if !ok {
		// A view of the key's bytes, which store copies.
		tok = st.store(h, unsafe.String(unsafe.SliceData(kw[1:]), len(kw)-1))
	}
	st.push(tok)
}

// addStem adds the stem of the word kw[1:] in the detected language; it
// sets kw[0] to the key's namespace.
func (st *state) addStem(kw []byte) {
	if st.full() {
		return
	}
	kw[0] = byte(nsStem + st.stemIdx)
	tok, h, ok := st.cached(kw)
	if !ok {
		tok = st.store(h, languages[st.stemIdx].stem(string(kw[1:])))
	}
	st.push(tok)
}

// problemKinds name the kinds of trouble reported in Result.Problems;
// each kind met also becomes one "meta:problem:<kind>" token, as broken
// structure is itself a sign of bulk mail software.
var problemKinds = [...]string{
	"header",    // malformed header section or encoded word
	"charset",   // unknown charset
	"encoding",  // unknown Content-Transfer-Encoding
	"decode",    // bad base64 or quoted-printable data
	"multipart", // missing or broken boundary, truncated multipart
	"depth",     // MIME nesting deeper than maxDepth
}

const (
	probHeader = iota
	probCharset
	probEncoding
	probDecode
	probMultipart
	probDepth
)

// maxProblems bounds Result.Problems; a message that is broken everywhere
// says so in the first few.
const maxProblems = 20

// problem notes non-fatal trouble of a kind.
func (st *state) problem(kind int, detail string) {
	st.kinds |= 1 << kind
	prefix := problemKinds[kind] + ": "
	for strings.HasPrefix(detail, prefix) {
		detail = detail[len(prefix):] // the multipart reader says "multipart: " too
	}
	msg := prefix + detail
	if len(st.problems) >= maxProblems {
		return
	}
	for _, p := range st.problems {
		if p == msg {
			return
		}
	}
	st.problems = append(st.problems, msg)
}

// finish detects the language of the collected body text, makes the body
// words, and appends the meta tokens for problems met.
func (st *state) finish() {
	idx, code, buf := detectLang(st.lbuf, st.subject, st.text)
	st.lbuf = buf
	st.lang = code
	switch {
	case !st.opts.Stem:
	case idx >= 0 && languages[idx].stem != nil:
		st.stemIdx = idx
	case code == "":
		st.stemIdx = st.t.fallback
	}
	st.bodyText()
	for i, k := range problemKinds {
		if st.kinds&(1<<i) != 0 {
			st.add("meta:problem:" + k)
		}
	}
}

// bucket names n by a coarse range, so that nearby counts share a token.
func bucket(n int) string {
	switch {
	case n <= 3:
		return strconv.Itoa(n)
	case n <= 5:
		return "4-5"
	case n <= 9:
		return "6-9"
	case n <= 19:
		return "10-19"
	}
	return "20+"
}
