package tokenize

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/bits"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/emersion/go-message/charset"
)

// headerReader splits a header section into fields without copying. It is
// lenient where spam is sloppy: LF or CRLF, spaces before the colon, 8-bit
// bytes. A line that is neither a field nor a continuation ends the header
// section as if a blank line preceded it, as MTAs do.
type headerReader struct {
	b    []byte
	off  int
	done bool
	bad  bool // the section ended at a line that is not a field
}

// valid reports whether the input starts with a header field.
func (r *headerReader) valid() bool {
	line := r.b
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	_, _, ok := fieldName(line)
	return ok
}

// fieldName returns the name of the field that line starts, if it does,
// and where its value starts: after the colon that follows the name and
// any blanks.
func fieldName(line []byte) (name []byte, value int, ok bool) {
	i := 0
	for i < len(line) && line[i]-'!' <= '~'-'!' && line[i] != ':' {
		i++
	}
	name = line[:i]
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	if len(name) == 0 || i == len(line) || line[i] != ':' {
		return nil, 0, false
	}
	return name, i + 1, true
}

// next returns the next field: its name as written and its value with
// leading and trailing white space trimmed, folding line breaks left in.
func (r *headerReader) next() (name, value []byte, ok bool) {
	if r.done || r.off >= len(r.b) {
		r.done = true
		return nil, nil, false
	}
	b := r.b
	end := len(b)
	if i := bytes.IndexByte(b[r.off:], '\n'); i >= 0 {
		end = r.off + i
	}
	line := b[r.off:end]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	if len(line) == 0 {
		r.off = min(end+1, len(b))
		r.done = true
		return nil, nil, false
	}
	name, vstart, ok := fieldName(line)
	if !ok {
		r.done, r.bad = true, true
		return nil, nil, false
	}
	vstart += r.off
	next := end + 1
	for next < len(b) && (b[next] == ' ' || b[next] == '\t') {
		i := bytes.IndexByte(b[next:], '\n')
		if i < 0 {
			next = len(b)
			break
		}
		next += i + 1
	}
	next = min(next, len(b))
	r.off = next
	return name, bytes.TrimSpace(b[vstart:next]), true
}

// rest returns the body: what follows the header section.
func (r *headerReader) rest() []byte {
	for !r.done {
		r.next()
	}
	return r.b[r.off:]
}

// headerKind says how the value of a configured header field is tokenized.
type headerKind uint8

const (
	kindWords       headerKind = iota // words, keeping '.', '-' and '_' inside them
	kindText                          // prose: words split as in the body
	kindAddress                       // address domains and display-name words
	kindMessageID                     // the domain after '@'
	kindContentType                   // media type and charset
	kindDate                          // the time zone
)

// headerSpec is how one configured header field is tokenized.
type headerSpec struct {
	kind   headerKind
	prefix string // field name and colon
}

// addressFields are fields whose values are address lists.
var addressFields = map[string]bool{
	"from": true, "sender": true, "reply-to": true, "to": true, "cc": true,
	"bcc": true, "return-path": true, "errors-to": true, "delivered-to": true,
	"x-original-to": true, "resent-from": true, "resent-to": true,
	"resent-sender": true, "disposition-notification-to": true,
	"return-receipt-to": true, "x-envelope-from": true, "x-envelope-to": true,
}

func specOf(name string) headerSpec {
	s := headerSpec{kind: kindWords, prefix: name + ":"}
	switch {
	case addressFields[name]:
		s.kind = kindAddress
	case name == "subject", name == "organization", name == "comments", name == "keywords":
		s.kind = kindText
	case name == "message-id", name == "resent-message-id":
		s.kind = kindMessageID
	case name == "content-type":
		s.kind = kindContentType
	case name == "date":
		s.kind = kindDate
	}
	return s
}

// Presence bits of the fields whose absence is a meta token.
const (
	hasMessageID = 1 << iota
	hasDate
	hasFrom
	hasTo
	hasSubject
	hasMailer
)

// Bounds against header sections built to waste time.
const (
	maxFields         = 1000 // fields tokenized; later ones are still skipped over
	maxReceived       = 20   // Received fields tokenized
	maxFieldTokens    = 50   // tokens from one field
	maxRecipientCount = 1000 // addresses counted in one field
)

// headerTokens makes the tokens of the top-level header section and
// records the MIME fields the body walk needs.
func (st *state) headerTokens(r *headerReader) {
	var present, hops, n int
	var wordCharset string
	for {
		name, value, ok := r.next()
		if !ok {
			break
		}
		if n++; n > maxFields {
			continue
		}
		st.lname = lowerASCII(st.lname[:0], name)
		switch string(st.lname) {
		case "received":
			hops++
			if hops == 1 {
				st.meas.received = value
			}
			if st.opts.Received && hops <= maxReceived {
				st.received(value)
			}
		case "content-type":
			st.top.ctype = string(value)
		case "content-transfer-encoding":
			st.top.cte = string(value)
		case "content-disposition":
			st.top.disp = string(value)
		case "message-id":
			present |= hasMessageID
		case "date":
			if present&hasDate == 0 {
				st.meas.date = value
			}
			present |= hasDate
		case "from":
			present |= hasFrom
			if wordCharset == "" {
				wordCharset = encodedCharset(value)
			}
		case "to":
			present |= hasTo
			st.countRecipients(value)
		case "cc":
			st.countRecipients(value)
		case "subject":
			present |= hasSubject
			if wordCharset == "" {
				wordCharset = encodedCharset(value)
			}
			st.subject = append(st.subject[:0], st.decodeWords(value)...)
		case "x-mailer", "user-agent":
			present |= hasMailer
		}
		if spec, ok := st.t.headers[string(st.lname)]; ok {
			st.field(spec, value)
		} else if st.t.anyField && !verdictField(st.lname) && string(st.lname) != "received" {
			st.field(headerSpec{kind: kindWords, prefix: string(st.lname) + ":"}, value)
		}
		if st.opts.FieldNames && !verdictField(st.lname) {
			st.addBytes("field:", st.lname)
		}
	}
	if r.bad {
		st.problem(probHeader, "header section not ended by a blank line")
	}
	// The charset a part that names none is read in, if it is not UTF-8.
	st.hint = parseParams(st.top.ctype).charset
	if isUTF8Label(st.hint) {
		st.hint = wordCharset
	}
	if isUTF8Label(st.hint) {
		st.hint = ""
	}
	st.meas.hops = hops
	st.add("meta:hops:" + bucket(hops))
	for _, m := range [...]struct {
		bit int
		tok string
	}{
		{hasMessageID, "meta:no:message-id"}, {hasDate, "meta:no:date"},
		{hasFrom, "meta:no:from"}, {hasTo, "meta:no:to"},
		{hasSubject, "meta:no:subject"}, {hasMailer, "meta:no:mailer"},
	} {
		if present&m.bit == 0 {
			st.add(m.tok)
		}
	}
}

// field tokenizes the value of one configured header field.
func (st *state) field(spec headerSpec, value []byte) {
	saved := st.limit
	st.limit = min(saved, len(st.tokens)+maxFieldTokens)
	switch spec.kind {
	case kindWords:
		st.words(st.decodeWords(value), wordMode{prefix: spec.prefix, header: true, code: true})
	case kindText:
		st.words(st.decodeWords(value), wordMode{prefix: spec.prefix, header: true})
	case kindAddress:
		st.addresses(spec.prefix, value)
	case kindMessageID:
		st.messageID(spec.prefix, value)
	case kindContentType:
		ct := parseParams(string(value))
		if ct.value != "" {
			st.add(spec.prefix + ct.value)
		}
		if ct.charset != "" {
			st.add(spec.prefix + "charset:" + ct.charset)
		}
	case kindDate:
		st.add(spec.prefix + timeZone(value))
	}
	st.limit = saved
}

// decodeWords decodes RFC 2047 encoded words in a header value. On
// failure it notes a problem and returns the value as it is.
func (st *state) decodeWords(v []byte) []byte {
	if !bytes.Contains(v, []byte("=?")) {
		return v
	}
	s := string(unfold(st.hbuf[:0], v))
	dec, err := st.wd.DecodeHeader(s)
	if err != nil {
		st.problem(probHeader, err.Error())
		return v
	}
	return []byte(dec)
}

// wordCharset converts an encoded word's charset to UTF-8. An unknown
// charset is noted and its bytes kept: the word scanner reads invalid
// UTF-8 as Windows-1252.
//
// It decodes the word into a buffer of the state's and returns a reader
// of that: mime's decoder copies the reader it gets with io.Copy, which
// takes a new 32 KiB buffer for every word unless the reader writes
// itself out, as a bytes.Reader does.
func (st *state) wordCharset(cs string, in io.Reader) (io.Reader, error) {
	r, err := charset.Reader(cs, in)
	if err != nil {
		st.problem(probCharset, err.Error())
		return in, nil
	}
	buf := st.wordBuf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	st.wordBuf = buf
	st.wordReader.Reset(buf)
	return &st.wordReader, nil
}

// encodedCharset returns the charset of the first RFC 2047 encoded word
// in v, lower case, or "".
func encodedCharset(v []byte) string {
	i := bytes.Index(v, []byte("=?"))
	if i < 0 {
		return ""
	}
	cs := v[i+2:]
	j := bytes.IndexByte(cs, '?')
	if j <= 0 || j > maxParamLen {
		return ""
	}
	cs, _, _ = bytes.Cut(cs[:j], []byte("*")) // RFC 2231 language suffix
	return strings.ToLower(string(cs))
}

// isUTF8Label reports whether cs names no charset or one that UTF-8
// includes.
func isUTF8Label(cs string) bool {
	switch cs {
	case "", "utf-8", "utf8", "us-ascii", "ascii":
		return true
	}
	return false
}

// unfold appends v to dst with line breaks removed; the white space that
// starts each continuation line stays.
func unfold(dst, v []byte) []byte {
	for _, c := range v {
		if c != '\r' && c != '\n' {
			dst = append(dst, c)
		}
	}
	return dst
}

// lowerASCII appends b to dst with ASCII letters lower-cased. A short b,
// such as most field and tag names, is done here, where the call may be
// inlined; a longer one eight bytes at a time.
func lowerASCII(dst, b []byte) []byte {
	if len(b) < 8 {
		for _, c := range b {
			dst = append(dst, lowerByte[c])
		}
		return dst
	}
	return lowerLong(dst, b)
}

// lowerLong is lowerASCII for a b of eight bytes or more. Done a byte at
// a time, lower-casing was 1.6% of a classify's instructions.
func lowerLong(dst, b []byte) []byte {
	// The last eight bytes are written last, over those of the word
	// before that they overlap: lower-casing them again changes nothing.
	last := lower8(binary.LittleEndian.Uint64(b[len(b)-8:]))
	n := len(dst) + len(b) - 8
	dst = slices.Grow(dst, len(b))
	for len(b) > 8 {
		dst = binary.LittleEndian.AppendUint64(dst, lower8(binary.LittleEndian.Uint64(b)))
		b = b[8:]
	}
	return binary.LittleEndian.AppendUint64(dst[:n], last)
}

// lowerByte maps each byte to its ASCII lower case.
var lowerByte = func() (t [256]byte) {
	for c := range t {
		t[c] = byte(c)
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] += 'a' - 'A'
	}
	return t
}()

// lower8 lower-cases the ASCII letters among the eight bytes of x.
func lower8(x uint64) uint64 {
	const ones, high = 0x0101010101010101, 0x8080808080808080
	h := x &^ high                // each byte's low seven bits
	ge := h + ones*(0x80-'A')     // high bit set where h >= 'A'
	gt := h + ones*(0x80-'Z'-1)   // high bit set where h > 'Z'
	upper := ge &^ gt &^ x & high // ASCII letters A to Z
	return x | upper>>2           // 0x80>>2 is the bit of lower case
}

// addresses tokenizes an address list: each address's domain and its
// registrable parent, the words of display names and comments, and the
// number of addresses when it is not one.
func (st *state) addresses(prefix string, v []byte) {
	count := 0
	for len(v) > 0 {
		var one []byte
		one, v = cutAddress(v)
		display, addr := splitAddress(one)
		if len(display) > 0 {
			st.words(st.decodeWords(display), wordMode{prefix: prefix, header: true})
		}
		if at := lastIndexByte(addr, '@'); at >= 0 {
			st.host(prefix, addr[at+1:])
			if st.opts.Mailboxes {
				st.mailbox(prefix, addr)
			}
		}
		if len(addr) > 0 && count < maxRecipientCount {
			count++
		}
	}
	if count != 1 {
		st.add(prefix + "count:" + bucket(count))
	}
}

// countRecipients adds the addresses of a To or Cc field to the
// recipients measure.
func (st *state) countRecipients(v []byte) {
	st.meas.hasRecips = true
	for len(v) > 0 && st.meas.recipients < maxRecipientCount {
		var one []byte
		one, v = cutAddress(v)
		if bytes.IndexByte(one, '@') >= 0 {
			st.meas.recipients++
		}
	}
}

// cutAddress splits v at the first comma outside quotes, comments and
// angle brackets.
func cutAddress(v []byte) (one, rest []byte) {
	quoted, escaped := false, false
	depth, angle := 0, false
	for i, c := range v {
		switch {
		case escaped:
			escaped = false
		case !addrSpecial[c]:
			// Most bytes change nothing; one load tells them.
		case c == '\\':
			escaped = true
		case quoted:
			quoted = c != '"'
		case c == '"':
			quoted = true
		case c == '(':
			depth++
		case c == ')' && depth > 0:
			depth--
		case depth > 0:
		case c == '<':
			angle = true
		case c == '>':
			angle = false
		case c == ',' && !angle:
			return v[:i], v[i+1:]
		}
	}
	return v, nil
}

// addrSpecial marks the bytes cutAddress acts on.
var addrSpecial = [256]bool{'\\': true, '"': true, '(': true, ')': true, '<': true, '>': true, ',': true}

// splitAddress splits one address into the text a person reads (display
// name and comments) and the addr-spec.
func splitAddress(a []byte) (display, addr []byte) {
	a = bytes.TrimSpace(a)
	if lt := lastIndexByte(a, '<'); lt >= 0 {
		addr = a[lt+1:]
		if gt := bytes.IndexByte(addr, '>'); gt >= 0 {
			addr = addr[:gt]
		}
		return a[:lt], bytes.TrimSpace(addr)
	}
	// A bare addr-spec, perhaps with a comment: "joe@example.com (Joe)".
	if lp := bytes.IndexByte(a, '('); lp >= 0 {
		return a[lp:], bytes.TrimSpace(a[:lp])
	}
	if bytes.IndexByte(a, '@') < 0 {
		return a, nil // a group name such as "undisclosed-recipients:;"
	}
	return nil, a
}

// messageID tokenizes the domain of a Message-ID.
func (st *state) messageID(prefix string, v []byte) {
	at := lastIndexByte(v, '@')
	if at < 0 {
		st.add(prefix + "noat")
		return
	}
	d := v[at+1:]
	if gt := bytes.IndexByte(d, '>'); gt >= 0 {
		d = d[:gt]
	}
	st.host(prefix, d)
}

// timeZone returns the zone of a Date value: a numeric offset such as
// "+0200", a lower-case name such as "gmt", or "nozone".
func timeZone(v []byte) string {
	f := bytes.Fields(v)
	for i := len(f) - 1; i >= 0; i-- {
		z := f[i]
		if z[0] == '(' {
			continue // a comment such as "(PDT)"
		}
		if len(z) == 5 && (z[0] == '+' || z[0] == '-') && isDigits(z[1:]) {
			return string(z)
		}
		if len(z) >= 1 && len(z) <= 5 && isLetters(z) {
			return strings.ToLower(string(z))
		}
		break
	}
	return "nozone"
}

func isDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

func isLetters(b []byte) bool {
	for _, c := range b {
		if c|0x20 < 'a' || c|0x20 > 'z' {
			return false
		}
	}
	return len(b) > 0
}

// received tokenizes the hosts and IP addresses named in a Received field.
// The date after the last ';' is left out, and so are the words after
// "id", "with" and "for", which name queue ids, protocols and recipients.
func (st *state) received(v []byte) {
	if i := lastIndexByte(v, ';'); i >= 0 {
		v = v[:i]
	}
	// Lower-cased at once, not word by word: most words are short.
	st.recv = lowerASCII(st.recv[:0], v)
	v = st.recv
	skip := false
	made := 0
	for len(v) > 0 && made < maxFieldTokens/4 {
		i := 0
		for i < len(v) && hostBytes[v[i]]&hostByte == 0 {
			i++
		}
		j := i
		for j < len(v) && hostBytes[v[j]]&(hostByte|colon) != 0 {
			j++
		}
		w := v[i:j]
		v = v[j:]
		if len(w) == 0 {
			continue
		}
		if skip {
			skip = false
			continue
		}
		switch string(w) {
		case "for":
			if st.opts.Mailboxes {
				if lt := bytes.IndexByte(v, '<'); lt >= 0 {
					if gt := bytes.IndexByte(v[lt:], '>'); gt > 0 {
						st.mailbox("received:", v[lt+1:lt+gt])
					}
				}
			}
			return // the recipient, always last
		case "id", "with", "via":
			skip = true
			continue
		case "unknown":
			st.add("received:unknown")
			made++
			continue
		}
		w = bytes.TrimPrefix(w, []byte("ipv6:"))
		switch {
		case isIPv4(w):
			// Through the cache, as for host names: relays recur.
			st.addBytes("received:", w)
			st.addBytes("received:", w[:bytes.LastIndexByte(w, '.')])
			made++
		case isHex(w) && bytes.Count(w, []byte(":")) >= 2: // isHex fails at the first letter past 'f' of most words
			st.addBytes("received:", w)
			made++
		case isHostname(w): // which a name with a colon is not
			st.host("received:", w)
			made++
		}
	}
}

// lastIndexByte is bytes.LastIndexByte, which reads a byte at a time;
// this reads eight, as the ends of Received fields and addresses, which
// it searches for their last ';', '<' or '@', are often longer.
func lastIndexByte(b []byte, c byte) int {
	const ones, low7 = 0x0101010101010101, 0x7f7f7f7f7f7f7f7f
	i := len(b)
	for ; i >= 8; i -= 8 {
		x := binary.LittleEndian.Uint64(b[i-8:]) ^ ones*uint64(c)
		// The high bit of each byte of x that is zero, where b has c.
		if z := ^((x&low7 + low7) | x | low7); z != 0 {
			return i - 8 + (63-bits.LeadingZeros64(z))/8
		}
	}
	for i--; i >= 0; i-- {
		if b[i] == c {
			return i
		}
	}
	return -1
}

func isHostByte(c byte) bool { return hostBytes[c]&hostByte != 0 }

// hostBytes has the classes of each byte: a table load tests a byte of a
// Received field or a host name, where chains of comparisons took 1.2% of
// a classify's instructions.
var hostBytes = func() (t [256]uint8) {
	for i := range t {
		c := byte(i)
		letter, digit := 'a' <= c|0x20 && c|0x20 <= 'z', '0' <= c && c <= '9'
		if letter || digit || c == '.' || c == '-' || c == '_' {
			t[c] |= hostByte
		}
		if 'a' <= c && c <= 'z' || digit || c == '.' || c == '-' || c == '_' || c >= 0x80 {
			t[c] |= labelByte
		}
	}
	t[':'] |= colon
	return t
}()

// Classes of hostBytes.
const (
	hostByte  = 1 << iota // ASCII letter, digit, '.', '-' or '_'
	labelByte             // in isHostname's names: lower-case ASCII letter, digit, '.', '-', '_' or non-ASCII
	colon                 // in IPv6 addresses
)

// isIPv4 reports whether b is a dotted quad.
func isIPv4(b []byte) bool {
	dots, digits, v := 0, 0, 0 // digits and value of the current part
	for _, c := range b {
		if c == '.' {
			if digits == 0 {
				return false
			}
			dots, digits, v = dots+1, 0, 0
			continue
		}
		if c-'0' > 9 || digits == 3 {
			return false
		}
		digits, v = digits+1, v*10+int(c-'0')
		if v > 255 {
			return false
		}
	}
	return dots == 3 && digits > 0
}

func isHex(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c|0x20 && c|0x20 <= 'f' || c == ':' || c == '.') {
			return false
		}
	}
	return true
}

// isHostname reports whether lower-case b looks like a DNS name with at
// least two labels and an alphabetic top-level label.
func isHostname(b []byte) bool {
	if len(b) > 253 {
		return false
	}
	// Back over the top-level label to the last dot.
	dot := len(b) - 1
	for dot >= 0 && b[dot]-'a' < 26 {
		dot--
	}
	if dot <= 0 || b[dot] != '.' || len(b)-dot-1 < 2 {
		return false
	}
	for _, c := range b[:dot] {
		if hostBytes[c]&labelByte == 0 {
			return false
		}
	}
	return true
}

// verdictField reports whether a lower-case field name is one that filters
// add with their verdict (X-Spam-*, X-Spamd-*, X-Bogosity...). Any sender
// can forge them, so they are no evidence; spamd's milter removes its own
// family, X-Spam-*, at delivery.
func verdictField(name []byte) bool {
	n := string(name)
	return strings.HasPrefix(n, "x-spam") || strings.HasPrefix(n, "x-bogosity") ||
		strings.HasPrefix(n, "x-crm114") || strings.HasPrefix(n, "x-rspamd")
}

// maxMailbox bounds the addresses made tokens: longer ones are built to
// flood the token space, not used.
const maxMailbox = 100

// mailbox adds prefix + "addr:" + the address in lower case, for a
// well-formed address of one local part and a host name.
func (st *state) mailbox(prefix string, addr []byte) {
	addr = bytes.TrimSpace(addr)
	at := lastIndexByte(addr, '@')
	if at <= 0 || len(addr) > maxMailbox || !utf8.Valid(addr) {
		return
	}
	// The local part may hold none of these; isHostname checks the host.
	for _, c := range addr[:at] {
		switch c {
		case ' ', '\t', '\r', '\n', '<', '>':
			return
		}
	}
	st.mbuf = lowerASCII(append(append(st.mbuf[:0], prefix...), "addr:"...), addr)
	if !isHostname(st.mbuf[len(st.mbuf)-len(addr)+at+1:]) {
		return
	}
	st.addBytes("", st.mbuf)
}
