package tokenize

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/emersion/go-message"
	"github.com/emersion/go-message/charset" // also registers the x/text charsets with go-message
	"github.com/emersion/go-message/textproto"
	"golang.org/x/net/html/atom"
)

// Bounds on the MIME walk.
const (
	maxDepth = 8   // nesting of multiparts and message/rfc822 parts
	maxParts = 500 // parts looked at in one message
)

// partHeader holds the raw values of the fields that say how to read an
// entity's body.
type partHeader struct {
	ctype, cte, disp string
}

func partHeaderOf(h textproto.Header) partHeader {
	return partHeader{
		ctype: h.Get("Content-Type"),
		cte:   h.Get("Content-Transfer-Encoding"),
		disp:  h.Get("Content-Disposition"),
	}
}

// params is what parseParams makes of a Content-Type or
// Content-Disposition value.
type params struct {
	value    string // lower-case media type or disposition type
	charset  string // lower case
	boundary string
	name     string // file name from name, filename, or their RFC 2231 forms
}

// maxParamLen bounds the length of a media type or charset used in a
// token.
const maxParamLen = 64

// parseParams parses a header value of the form `value; key=val; ...`
// leniently: unknown or malformed parameters are skipped, duplicates are
// allowed (the last wins), and RFC 2231 continuations of a file name are
// joined in the order they appear.
func parseParams(s string) params {
	var p params
	v, rest, _ := strings.Cut(s, ";")
	p.value = clip(strings.ToLower(strings.TrimSpace(v)))
	var name2231 strings.Builder
	for rest != "" {
		var param string
		param, rest = cutParam(rest)
		k, val, ok := strings.Cut(param, "=")
		if !ok {
			continue
		}
		k = strings.ToLower(strings.TrimSpace(k))
		val = unquote(strings.TrimSpace(val))
		switch k {
		case "charset":
			p.charset = clip(strings.ToLower(val))
		case "boundary":
			p.boundary = val
		case "name", "filename":
			if p.name == "" || k == "filename" {
				p.name = val
			}
		default:
			base, _, _ := strings.Cut(k, "*")
			if base != "name" && base != "filename" {
				continue
			}
			if strings.HasSuffix(k, "*") {
				// charset'language'percent-encoded; only the first
				// section names the charset.
				if i := strings.LastIndexByte(val, '\''); i >= 0 && name2231.Len() == 0 {
					val = val[i+1:]
				}
				val = percentDecode(val)
			}
			name2231.WriteString(val)
		}
	}
	if p.name == "" {
		p.name = name2231.String()
	}
	return p
}

// clip shortens s to at most maxParamLen bytes, keeping it valid UTF-8.
func clip(s string) string {
	if len(s) > maxParamLen {
		s = s[:maxParamLen]
	}
	return strings.ToValidUTF8(s, "")
}

// cutParam splits s at the first ';' outside double quotes.
func cutParam(s string) (param, rest string) {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			quoted = !quoted
		case ';':
			if !quoted {
				return s[:i], s[i+1:]
			}
		}
	}
	return s, ""
}

// unquote removes the double quotes around s and the backslashes of quoted
// pairs; an unterminated quote runs to the end.
func unquote(s string) string {
	if !strings.HasPrefix(s, "\"") {
		return s
	}
	s = s[1:]
	if !strings.ContainsAny(s, "\\\"") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' {
			break
		}
		if c == '\\' && i+1 < len(s) {
			i++
			c = s[i]
		}
		b.WriteByte(c)
	}
	return b.String()
}

// percentDecode decodes %XX escapes, leaving malformed ones as they are.
func percentDecode(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHexDigit(s[i+1]) && isHexDigit(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isHexDigit(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c|0x20 && c|0x20 <= 'f'
}

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c | 0x20 - 'a' + 10
}

// body walks an entity whose raw body is b and whose header is h.
func (st *state) body(b []byte, h partHeader, depth int) {
	if depth > maxDepth {
		st.problem(probDepth, "MIME nesting too deep")
		return
	}
	ct := parseParams(h.ctype)
	if h.ctype == "" {
		if boundary := guessBoundary(b); boundary != "" {
			st.add("mime:guessed-multipart")
			ct = params{value: "multipart/mixed", boundary: boundary}
		}
	}
	if strings.HasPrefix(ct.value, "multipart/") {
		st.multipart(b, ct, depth)
		return
	}
	st.leaf(h, ct, bytes.NewReader(b), depth)
}

// guessBoundary returns the boundary of a body that is plainly multipart
// although its header does not say so, or says so with a boundary that is
// not there: one of its first lines is "--boundary" followed by a Content-
// field. A mail reader would show such a body raw, but its parts are what
// its sender meant.
func guessBoundary(b []byte) string {
	const lines = 25
	for i := 0; i < lines && len(b) > 0; i++ {
		line, rest, _ := bytes.Cut(b, []byte("\n"))
		line = bytes.TrimRight(line, " \t\r")
		if len(line) >= 3 && len(line) <= 72 && bytes.HasPrefix(line, []byte("--")) && hasPrefixFold(rest, "content-") {
			return string(line[2:])
		}
		b = rest
	}
	return ""
}

// multipart walks the parts of a multipart body b. When no part can be
// found the body is split at a boundary it plainly uses, or failing that
// read as text, as a mail reader would show it.
func (st *state) multipart(b []byte, ct params, depth int) {
	st.add("mime:" + ct.value)
	if found := st.parts(b, ct, depth); found > 0 {
		return
	}
	if guessed := guessBoundary(b); guessed != "" && guessed != ct.boundary && depth < maxDepth {
		st.add("mime:guessed-multipart")
		st.multipart(b, params{value: ct.value, boundary: guessed}, depth+1)
		return
	}
	st.fallback(b)
}

// parts walks the parts of a multipart body and returns how many it found.
func (st *state) parts(b []byte, ct params, depth int) (found int) {
	if ct.boundary == "" {
		st.problem(probMultipart, "multipart without boundary")
		return 0
	}
	mr := textproto.NewMultipartReader(bytes.NewReader(b), ct.boundary)
	for !st.full() {
		if st.nparts++; st.nparts > maxParts {
			st.problem(probMultipart, "too many parts")
			return found + 1 // not worth a second look either
		}
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			st.problem(probMultipart, err.Error())
			break
		}
		found++
		h := partHeaderOf(p.Header)
		pct := parseParams(h.ctype)
		if strings.HasPrefix(pct.value, "multipart/") {
			if depth+1 > maxDepth {
				st.problem(probDepth, "MIME nesting too deep")
				continue
			}
			inner, err := io.ReadAll(p)
			if err != nil {
				st.problem(probMultipart, err.Error())
			}
			st.multipart(inner, pct, depth+1)
			continue
		}
		st.leaf(h, pct, p, depth+1)
	}
	if found == 0 {
		st.problem(probMultipart, "no part found")
	}
	return found
}

// fallback reads the body of a multipart whose parts cannot be found as
// text, skipping lines that look like base64.
func (st *state) fallback(b []byte) {
	if looksHTML(b) {
		st.html(b)
		return
	}
	st.text = append(st.text, '\n')
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i+1], b[i+1:]
		} else {
			b = nil
		}
		if !isBase64Line(line) {
			st.text = append(st.text, line...)
		}
	}
}

// isBase64Line reports whether line is a long run of base64 characters,
// as in an encoded body.
func isBase64Line(line []byte) bool {
	line = bytes.TrimRight(line, "\r\n")
	if len(line) < 40 {
		return false
	}
	for _, c := range line {
		if !(isAlnum(c) || c == '+' || c == '/' || c == '=') {
			return false
		}
	}
	return true
}

// leaf reads a part that is not multipart from r.
func (st *state) leaf(h partHeader, ct params, r io.Reader, depth int) {
	mt := ct.value
	if !strings.Contains(mt, "/") {
		mt = "text/plain" // RFC 2045: missing or unparseable Content-Type
	}
	disp := parseParams(h.disp)
	name := disp.name
	if name == "" {
		name = ct.name
	}
	isText := strings.HasPrefix(mt, "text/")
	isMessage := mt == "message/rfc822" || mt == "message/global"
	if !isText && !isMessage {
		st.attachment(mt, name)
		return // never read: an attachment's bytes say nothing reliable
	}
	if name != "" && disp.value == "attachment" {
		st.attachment(mt, name)
	}
	st.add("mime:" + mt)

	var mh message.Header
	cte := strings.ToLower(strings.TrimSpace(h.cte))
	if cte != "" {
		if cte == "base64" || cte == "quoted-printable" {
			st.add("mime:cte:" + cte)
		}
		// go-message would decode quoted-printable with the standard
		// library's Reader; the state's decodes the same, faster (qpReader).
		if cte == "quoted-printable" {
			st.qp.reset(r)
			r = &st.qp
			defer st.qp.reset(nil)
		} else {
			mh.Set("Content-Transfer-Encoding", cte)
		}
	}
	// A part in a single-byte charset is converted once it is read, and
	// only if it is not all ASCII, which such a charset leaves as it is:
	// most parts of mail that names Latin-1 or Windows-1252 are, and
	// streaming them through the charset's decoder was a twentieth of
	// tokenizing a corpus.
	singleByte := false
	if isText && ct.charset != "" {
		st.add("mime:charset:" + ct.charset)
		switch {
		case !isToken(ct.charset):
			st.problem(probCharset, "malformed charset "+strconv.Quote(ct.charset))
		case singleByteCharsets[ct.charset]:
			singleByte = true
		default:
			mh.Set("Content-Type", mt+"; charset="+ct.charset)
		}
	}
	e, err := message.New(mh, r)
	switch {
	case message.IsUnknownCharset(err):
		st.problem(probCharset, "unknown charset "+strconv.Quote(ct.charset))
	case message.IsUnknownEncoding(err):
		st.problem(probEncoding, "unknown transfer encoding "+strconv.Quote(cte))
	}
	data := st.readPart(e.Body)
	switch {
	case singleByte && !isASCII(data):
		// The charsets listed are all known (TestSingleByteCharsets).
		data, _ = st.decodeCharset(data, ct.charset)
	case isText && ct.charset == "" && st.hint != "" && !utf8.Valid(data):
		data = st.convert(data, st.hint)
	}
	switch {
	case isMessage:
		st.nested(bytes.Clone(data), depth+1)
	case mt == "text/html":
		st.html(data)
	case looksHTML(data):
		st.add("mime:sniffed-html")
		st.html(data)
	default:
		st.text = append(st.text, '\n')
		st.text = append(st.text, data...)
	}
}

// convert converts text in charset cs to UTF-8, for a part that did not
// name its charset but is not UTF-8 either. It returns data unchanged if
// cs is unknown.
func (st *state) convert(data []byte, cs string) []byte {
	out, ok := st.decodeCharset(data, cs)
	if ok {
		st.add("mime:charset-hint:" + cs)
	}
	return out
}

// decodeCharset converts data from charset cs to UTF-8, in the state's
// conversion buffer, with go-message's decoders; it returns data and false
// where cs is unknown.
func (st *state) decodeCharset(data []byte, cs string) ([]byte, bool) {
	if t := singleByteUTF8()[cs]; t != nil {
		st.conv = decodeSingleByte(st.conv[:0], data, t)
		return st.conv, true
	}
	r, err := charset.Reader(cs, bytes.NewReader(data))
	if err != nil {
		return data, false
	}
	buf := bytes.NewBuffer(st.conv[:0])
	if _, err := buf.ReadFrom(r); err != nil {
		st.problem(probDecode, err.Error())
	}
	st.conv = buf.Bytes()
	return st.conv, true
}

// singleByteCharsets are the charsets of one byte a character that the
// decoder of go-message's charset package maps each ASCII byte of to
// itself (TestSingleByteCharsets), which text in them that is all ASCII
// is therefore left as it is. A byte means the same character wherever
// it is, so that converting a part whole gives what converting it as it
// streams would, even cut short by a decoding error.
var singleByteCharsets = map[string]bool{
	"iso-8859-1": true, "iso-8859-2": true, "iso-8859-3": true, "iso-8859-4": true,
	"iso-8859-5": true, "iso-8859-6": true, "iso-8859-7": true, "iso-8859-8": true,
	"iso-8859-9": true, "iso-8859-10": true, "iso-8859-13": true, "iso-8859-14": true,
	"iso-8859-15": true, "iso-8859-16": true,
	"windows-1250": true, "windows-1251": true, "windows-1252": true, "windows-1253": true,
	"windows-1254": true, "windows-1255": true, "windows-1256": true, "windows-1257": true,
	"windows-1258": true, "koi8-r": true, "koi8-u": true,
}

// singleByteUTF8 holds for each of singleByteCharsets the UTF-8 of the
// character its decoder makes of each byte from 0x80 up, which converts
// text in it a byte at a time, as the decoder would, without a
// transform.Reader and its buffers, and ASCII a run at a time.
var singleByteUTF8 = sync.OnceValue(func() map[string]*[128]string {
	high := make([]byte, 128)
	for i := range high {
		high[i] = 0x80 + byte(i)
	}
	tables := make(map[string]*[128]string, len(singleByteCharsets))
	for cs := range singleByteCharsets {
		r, err := charset.Reader(cs, bytes.NewReader(high))
		if err != nil {
			continue
		}
		out, err := io.ReadAll(r)
		if err != nil {
			continue
		}
		t := new([128]string)
		i := 0
		for ; len(out) > 0 && i < len(t); i++ {
			_, n := utf8.DecodeRune(out)
			t[i], out = string(out[:n]), out[n:]
		}
		if i == len(t) && len(out) == 0 {
			tables[cs] = t
		}
	}
	return tables
})

// decodeSingleByte appends to dst the UTF-8 of src, in the single-byte
// charset whose characters from 0x80 up t holds.
func decodeSingleByte(dst, src []byte, t *[128]string) []byte {
	for len(src) > 0 {
		n := asciiPrefix(src)
		dst = append(dst, src[:n]...)
		for src = src[n:]; len(src) > 0 && src[0] >= utf8.RuneSelf; src = src[1:] {
			dst = append(dst, t[src[0]-utf8.RuneSelf]...)
		}
	}
	return dst
}

// asciiPrefix returns the length of the ASCII bytes that b starts with,
// looking at eight bytes at a time.
func asciiPrefix(b []byte) int {
	i := 0
	for i+8 <= len(b) && binary.LittleEndian.Uint64(b[i:])&0x8080808080808080 == 0 {
		i += 8
	}
	for i < len(b) && b[i] < utf8.RuneSelf {
		i++
	}
	return i
}

// isASCII reports whether b is all ASCII.
func isASCII(b []byte) bool { return asciiPrefix(b) == len(b) }

// isToken reports whether s is a MIME token, safe to put in a header
// value unquoted.
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("()<>@,;:\\\"/[]?=", c) >= 0 {
			return false
		}
	}
	return s != ""
}

// readPart reads a decoded body into the state's part buffer. A decoding
// error is noted and what was read before it is kept.
func (st *state) readPart(r io.Reader) []byte {
	const maxEmptyReads = 100 // as bufio: a reader that makes no progress is broken
	buf := st.part[:0]
	for empty := 0; ; {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if n == 0 && err == nil {
			if empty++; empty < maxEmptyReads {
				continue
			}
			err = io.ErrNoProgress
		}
		if err != nil {
			kind := probDecode
			if errors.Is(err, io.ErrUnexpectedEOF) {
				kind = probMultipart
			}
			st.problem(kind, err.Error())
			break
		}
	}
	st.part = buf
	return buf
}

// looksHTML reports whether a part not labelled text/html is HTML all the
// same, as spam often sends it: it starts like an HTML document or has a
// few HTML tags a mail reader would show raw.
func looksHTML(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	if hasPrefixFold(b, "<html") || hasPrefixFold(b, "<!doctype html") {
		return true
	}
	const enough = 3
	tags := 0
	for i := bytes.IndexByte(b, '<'); i >= 0 && i+1 < len(b); {
		b = b[i+1:]
		name := bytes.TrimPrefix(b, []byte("/"))
		n := 0
		for n < len(name) && n < 10 && 'a' <= name[n]|0x20 && name[n]|0x20 <= 'z' {
			n++
		}
		if n > 0 && n < len(name) && (name[n] == '>' || name[n] == ' ') && htmlTag(name[:n]) {
			if tags++; tags == enough {
				return true
			}
		}
		i = bytes.IndexByte(b, '<')
	}
	return false
}

// htmlTag reports whether name is one of the tags that give HTML away.
func htmlTag(name []byte) bool {
	var buf [10]byte
	switch atom.Lookup(lowerASCII(buf[:0], name)) {
	case atom.A, atom.B, atom.Body, atom.Br, atom.Center, atom.Div, atom.Font,
		atom.Html, atom.I, atom.Img, atom.Li, atom.P, atom.Span, atom.Table,
		atom.Td, atom.Tr, atom.U, atom.Ul:
		return true
	}
	return false
}

// attachment adds the tokens of an attachment: its media type and the
// extension of its file name.
func (st *state) attachment(mt, name string) {
	if strings.HasPrefix(mt, "image/") {
		st.meas.images++
	}
	st.add("attach:type:" + mt)
	if name == "" {
		return
	}
	name = string(st.decodeWords([]byte(name)))
	ext := "none"
	if dot := strings.LastIndexByte(name, '.'); dot >= 0 {
		e := strings.ToLower(strings.TrimSpace(name[dot+1:]))
		if len(e) > 0 && len(e) <= 10 && isAlnumString(e) {
			ext = e
		}
	}
	st.add("attach:ext:" + ext)
}

func isAlnumString(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) {
			return false
		}
	}
	return true
}

// nested walks a message/rfc822 part: its Subject is read as body text,
// its body like the top-level body.
func (st *state) nested(b []byte, depth int) {
	if depth > maxDepth {
		st.problem(probDepth, "MIME nesting too deep")
		return
	}
	r := headerReader{b: b}
	if !r.valid() {
		st.text = append(st.text, '\n')
		st.text = append(st.text, b...)
		return
	}
	var h partHeader
	for {
		name, value, ok := r.next()
		if !ok {
			break
		}
		st.lname = lowerASCII(st.lname[:0], name)
		switch string(st.lname) {
		case "content-type":
			h.ctype = string(value)
		case "content-transfer-encoding":
			h.cte = string(value)
		case "content-disposition":
			h.disp = string(value)
		case "subject":
			st.text = append(st.text, '\n')
			st.text = append(st.text, st.decodeWords(value)...)
		}
	}
	st.body(r.rest(), h, depth)
}
