package tokenize

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/publicsuffix"
	"golang.org/x/text/unicode/norm"
)

// wordMode says what becomes of the words words finds.
type wordMode struct {
	prefix string // put before each token; "" for body words
	header bool   // header words: not stemmed, no minimum length, long ones dropped
	code   bool   // keep '.', '-' and '_' between word characters, as in "outlook-6.0"
}

var bodyMode = wordMode{}

// Rune classes of the word scanner.
const (
	clsSep  = iota // separates words
	clsWord        // letter, mark or number
	clsCJK         // Han, Hiragana, Katakana, Hangul: split into bigrams
	clsJoin        // format character (zero-width space, soft hyphen): dropped, joins
)

// asciiClass classifies the ASCII runes.
var asciiClass = func() (t [128]uint8) {
	for c := '0'; c <= '9'; c++ {
		t[c] = clsWord
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = clsWord
		t[c-'a'+'A'] = clsWord
	}
	return t
}()

func runeClass(r rune) uint8 {
	if r < utf8.RuneSelf {
		return asciiClass[r]
	}
	if r >= 0x1100 && isCJK(r) {
		return clsCJK
	}
	if unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsNumber(r) {
		return clsWord
	}
	if unicode.Is(unicode.Cf, r) {
		return clsJoin
	}
	return clsSep
}

func isCJK(r rune) bool {
	switch {
	case r >= 0xAC00 && r < 0xD7B0, // Hangul syllables
		r >= 0x3040 && r < 0x3100, // Hiragana, Katakana, with the prolonged sound mark
		r >= 0xFF66 && r < 0xFFA0: // halfwidth Katakana
		return true
	}
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hangul, r) || unicode.Is(unicode.Katakana, r)
}

// cp1252 maps the bytes 0x80-0x9F of Windows-1252; the other bytes of it
// are the Latin-1 code points.
var cp1252 = [32]rune{
	'€', 0x81, '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', 0x8d, 'Ž', 0x8f,
	0x90, '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', 0x9d, 'ž', 'Ÿ',
}

// decodeRune decodes the first rune of b, which is not empty, reading a
// byte that does not start valid UTF-8 as Windows-1252.
func decodeRune(b []byte) (rune, int) {
	c := b[0]
	if c < utf8.RuneSelf {
		return rune(c), 1
	}
	r, n := utf8.DecodeRune(b)
	if r == utf8.RuneError && n == 1 {
		if c < 0xA0 {
			return cp1252[c-0x80], 1
		}
		return rune(c), 1
	}
	return r, n
}

func isCurrency(r rune) bool {
	return r == '$' || r == '€' || r == '£' || r == '¥'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// words splits s into words and CJK bigrams and adds their tokens.
func (st *state) words(s []byte, m wordMode) {
	for i := 0; i < len(s); {
		if st.full() {
			return
		}
		// A run of ASCII separators makes no token: skipped at once.
		for i < len(s) && asciiSep[s[i]] {
			i++
		}
		if i == len(s) {
			return
		}
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case asciiClass[c] == clsWord:
				i = st.word(s, i, m)
			case c == '$' && i+1 < len(s) && isDigit(s[i+1]):
				i = st.word(s, i, m)
			default:
				i++
			}
			continue
		}
		r, n := decodeRune(s[i:])
		switch runeClass(r) {
		case clsWord:
			i = st.word(s, i, m)
		case clsCJK:
			i = st.cjk(s, i, m)
		default:
			if isCurrency(r) && i+n < len(s) && isDigit(s[i+n]) {
				i = st.word(s, i, m)
			} else {
				i += n
			}
		}
	}
}

// asciiSep has the ASCII bytes that separate words and cannot start one,
// as '$' can.
var asciiSep = func() (t [256]bool) {
	for c := range utf8.RuneSelf {
		t[c] = asciiClass[c] != clsWord && c != '$'
	}
	return t
}()

// word reads the word that starts at s[i], adds its token and returns
// where it ends.
func (st *state) word(s []byte, i int, m wordMode) int {
	w := append(st.wbuf[:0], 0) // room for the key's namespace: see finishWord
	nonASCII := false
	letters, upper, wide, digits := 0, 0, 0, 0 // for the measures
	j := i
	if r, n := decodeRune(s[j:]); isCurrency(r) {
		w = utf8.AppendRune(w, r)
		nonASCII = r >= utf8.RuneSelf
		j += n
	}
	for j < len(s) {
		// Most of a word's bytes are ASCII letters and digits: as many of
		// them as w has room for go at once.
		k, sum := lowerWordRun(w[len(w):cap(w)], s[j:])
		upper += int(sum & countMask)
		digits += int(sum >> 31 & countMask)
		letters += k - int(sum>>31&countMask)
		w = w[:len(w)+k]
		if j += k; j == len(s) {
			break
		}
		if wordBytes[s[j]] != 0 {
			w = slices.Grow(w, 1) // out of room, or maxWordRun read
			continue
		}
		r, n := decodeRune(s[j:])
		switch runeClass(r) {
		case clsWord:
			w = utf8.AppendRune(w, r)
			nonASCII = true
			if unicode.IsDigit(r) {
				digits++
			} else {
				letters++
				wide++
				if unicode.IsUpper(r) {
					upper++
				}
			}
			j += n
			continue
		case clsJoin:
			j += n
			continue
		}
		// Some separators stay inside a word when a word rune follows.
		if j+n < len(s) {
			next, _ := decodeRune(s[j+n:])
			if runeClass(next) == clsWord {
				// The word's last rune, as appended: a word rune always
				// follows a separator kept.
				last, _ := utf8.DecodeLastRune(w[1:])
				switch {
				case (r == '\'' || r == '’') && unicode.IsLetter(last) && unicode.IsLetter(next):
					j += n // "don't" is "dont"
					continue
				case (r == '.' || r == ',') && unicode.IsDigit(last) && unicode.IsDigit(next):
					w = append(w, byte(r)) // "1,000.00"
					j += n
					continue
				case m.code && (r == '.' || r == '-' || r == '_'):
					w = append(w, byte(r))
					j += n
					continue
				}
			}
		}
		break
	}
	st.wbuf = w
	if !m.header {
		st.meas.words++
		st.meas.letters += letters
		st.meas.upper += upper
		st.meas.nonASCII += wide
	}
	st.finishWord(w, nonASCII, letters > 0, digits > 0, m)
	return j
}

// lowerWordRun copies the ASCII letters and digits that src starts with to
// dst, as many as it has room for, lower-cased (setting 0x20, the bit only
// an upper-case letter lacks), and returns how many and the sum of their
// wordBytes. Inlined in word, its loop had its variables kept in memory.
//
//go:noinline
func lowerWordRun(dst, src []byte) (n int, sum uint64) {
	src = src[:min(len(src), len(dst), maxWordRun)]
	dst = dst[:len(src)]
	for n < len(src) {
		c := src[n]
		f := wordBytes[c]
		if f == 0 {
			break
		}
		dst[n] = c | 0x20
		sum += f
		n++
	}
	return n, sum
}

// wordBytes has, for each ASCII letter and digit, the sum of 1<<63, which
// makes it non-zero, and the counts it adds: 1 in the low 31 bits for an
// upper-case letter, in the next 31 for a digit. A run of at most
// maxWordRun of them sums to the counts without a carry between them; the
// top bit's carry is lost.
var wordBytes = func() (t [256]uint64) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = 1 << 63
		t[c-'a'+'A'] = 1<<63 | 1
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = 1<<63 | 1<<31
	}
	return t
}()

const (
	countMask  = 1<<31 - 1
	maxWordRun = 1 << 30
)

// finishWord normalizes a word read by word and adds its token. The word
// is kw[1:]: kw[0] is room for the namespace byte of its cache key, so
// that a body word is looked up where it was made, not copied.
func (st *state) finishWord(kw []byte, nonASCII, hasLetter, hasDigit bool, m wordMode) {
	w := kw[1:]
	n := len(w)
	if nonASCII {
		st.nbuf = norm.NFKC.Append(st.nbuf[:0], w...)
		st.lbuf = appendLower(append(st.lbuf[:0], 0), st.nbuf)
		kw = st.lbuf
		w = kw[1:]
		n = utf8.RuneCount(w)
	}
	switch {
	case n == 0:
	case n > st.opts.MaxTokenLen:
		if !m.header {
			st.add(longToken(n))
		}
	case m.header:
		st.addBytes(m.prefix, w)
	case n < st.opts.MinTokenLen:
	case st.stemIdx >= 0 && hasLetter && !hasDigit:
		st.addStem(kw)
	default:
		st.addKey(kw)
	}
}

// appendLower appends the lower case of UTF-8 text b to dst.
func appendLower(dst, b []byte) []byte {
	for len(b) > 0 {
		r, n := decodeRune(b)
		dst = utf8.AppendRune(dst, unicode.ToLower(r))
		b = b[n:]
	}
	return dst
}

// longTokens are the tokens of too-long words, by tens of runes.
var longTokens = func() (t [11]string) {
	for i := range t {
		t[i] = "long:" + strconv.Itoa(i*10)
	}
	return t
}()

func longToken(n int) string {
	return longTokens[min(n/10, len(longTokens)-1)]
}

// cjk reads the run of CJK characters that starts at s[i], adds its
// overlapping bigrams (or the single character) and returns where the run
// ends.
func (st *state) cjk(s []byte, i int, m wordMode) int {
	w := st.wbuf[:0]
	compat := false
	j := i
	for j < len(s) {
		r, n := decodeRune(s[j:])
		c := runeClass(r)
		if c == clsJoin {
			j += n
			continue
		}
		if c != clsCJK {
			break
		}
		compat = compat || r >= 0xF900
		w = utf8.AppendRune(w, r)
		j += n
	}
	st.wbuf = w
	if compat {
		st.nbuf = norm.NFKC.Append(st.nbuf[:0], w...)
		w = st.nbuf
	}
	rs := st.runes[:0]
	for _, r := range string(w) {
		rs = append(rs, r)
	}
	st.runes = rs
	if !m.header {
		st.meas.words += (len(rs) + 1) / 2
		st.meas.letters += len(rs)
		st.meas.nonASCII += len(rs)
	}
	if len(rs) == 1 {
		st.addBytes(m.prefix, w)
		return j
	}
	for k := 0; k+1 < len(rs) && !st.full(); k++ {
		st.lbuf = utf8.AppendRune(utf8.AppendRune(st.lbuf[:0], rs[k]), rs[k+1])
		st.addBytes(m.prefix, st.lbuf)
	}
	return j
}

// bodyText makes the tokens of the collected body text, putting the
// marked tokens in their places.
func (st *state) bodyText() {
	text, marks := st.text, st.marks
	// One token for every four bytes or so of text (a word and its
	// space; a CJK character's bigram, three bytes): room for them at
	// once, instead of the doublings that copy a long message's tokens
	// over and over.
	if room := min(len(text)/4, st.limit-len(st.tokens)); room > 0 {
		st.tokens = slices.Grow(st.tokens, room)
	}
	if cap(st.wbuf) == 0 {
		st.wbuf = make([]byte, 0, 64)
	}
	// next is the position of the next mark, below which the loop need
	// not look at them.
	mi, next := 0, math.MaxInt
	if len(marks) > 0 {
		next = marks[0].pos
	}
	for i := 0; i < len(text); {
		if i >= next {
			for mi < len(marks) && marks[mi].pos <= i {
				st.add(marks[mi].tok)
				mi++
			}
			next = math.MaxInt
			if mi < len(marks) {
				next = marks[mi].pos
			}
		}
		if st.full() {
			return
		}
		// White space up to the next mark is skipped at once: it makes
		// no token, so the marks and the check above come out as they
		// would a byte at a time.
		stop := min(len(text), next)
		for i < stop && isSpace(text[i]) {
			i++
		}
		if i == stop {
			continue
		}
		// Three chunks in four are one plain word, of ASCII letters and
		// digits: it is lower-cased into the word buffer as it is read.
		kw := st.wbuf[:1] // see finishWord
		n, sum := lowerWordRun(kw[1:cap(kw)], text[i:])
		j := i + n
		if j < len(text) && !isSpace(text[j]) {
			// Not a plain word, or one longer than the buffer: the rest
			// of the chunk tells.
			var seen uint8
			j, seen = chunkEnd(text, j, &chunkByte)
			if seen != 0 || j-i > maxWordRun {
				st.chunk(text[i:j], seen&byteLink != 0)
				i = j
				continue
			}
			kw = slices.Grow(kw, j-i)
			st.wbuf = kw
			n, sum = lowerWordRun(kw[1:1+j-i], text[i:j])
		}
		// The plain word's token, as chunk would make it.
		upper, digits := int(sum&countMask), int(sum>>31&countMask)
		st.meas.words++
		st.meas.letters += n - digits
		st.meas.upper += upper
		st.finishWord(kw[:1+n], false, digits < n, digits > 0, bodyMode)
		i = j
	}
	for ; mi < len(marks); mi++ {
		st.add(marks[mi].tok)
	}
}

// isSpace reports whether c is ASCII white space: a table takes one load
// where the six comparisons took a dozen instructions.
func isSpace(c byte) bool { return spaceTab[c] }

var spaceTab = [256]bool{' ': true, '\n': true, '\r': true, '\t': true, '\f': true, '\v': true}

// chunkByte classes the bytes of body text for bodyText: white space,
// which ends a chunk; the bytes without which a chunk holds no URL or
// e-mail address (see findLink): '.', ':' and '\x0e', which
// hasPrefixFold takes for the '.' of "www."; and every other byte but the
// ASCII letters and digits.
var chunkByte = func() (t [256]uint8) {
	for c := range t {
		switch {
		case spaceTab[c]:
			t[c] = byteSpace
		case c == '.' || c == ':' || c == '\x0e':
			t[c] = byteLink | byteOther
		case c >= utf8.RuneSelf || asciiClass[c] != clsWord:
			t[c] = byteOther
		}
	}
	return t
}()

const (
	byteSpace = 1
	byteLink  = 2
	byteOther = 4
)

// chunkEnd returns where the chunk of text that goes on at j ends, at the
// first byte of class byteSpace in class, or len(text), and the union of
// the classes of its bytes.
func chunkEnd(text []byte, j int, class *[256]uint8) (end int, seen uint8) {
	for ; j < len(text); j++ {
		b := class[text[j]]
		if b == byteSpace {
			break
		}
		seen |= b
	}
	return j, seen
}

// chunk tokenizes a run of text without ASCII white space, finding URLs
// and e-mail addresses in it; mayLink is false when it has none of the
// bytes every link has (chunkByte), and so none.
func (st *state) chunk(c []byte, mayLink bool) {
	for len(c) > 0 && !st.full() {
		start, end, isURL := -1, 0, false
		if st.opts.URLs && mayLink {
			start, end, isURL = findLink(c)
		}
		if start < 0 {
			st.words(c, bodyMode)
			return
		}
		st.words(c[:start], bodyMode)
		if isURL {
			st.url(c[start:end])
		} else {
			st.email(c[start:end])
		}
		c = c[end:]
	}
}

// findLink finds the first URL or e-mail address in c: an http, https or
// ftp URL, a host name starting "www." or ending in one of bareTLDs, or
// local@domain. Each of these has a '.' or a ':', or the '\x0e' that
// hasPrefixFold matches with the '.' of "www.".
func findLink(c []byte) (start, end int, isURL bool) {
	for i := 0; i < len(c); i++ {
		switch c[i] {
		case '.':
			if s, ok := bareHost(c, i); ok {
				return s, urlEnd(c, s), true
			}
		case ':':
			if !bytes.HasPrefix(c[i+1:], []byte("//")) {
				continue
			}
			s := i
			for s > 0 && s > i-5 && 'a' <= c[s-1]|0x20 && c[s-1]|0x20 <= 'z' {
				s--
			}
			if sc := c[s:i]; bytes.EqualFold(sc, []byte("http")) || bytes.EqualFold(sc, []byte("https")) || bytes.EqualFold(sc, []byte("ftp")) {
				return s, urlEnd(c, i+3), true
			}
		case 'w', 'W':
			if (i == 0 || !isHostByte(c[i-1])) && hasPrefixFold(c[i:], "www.") && i+4 < len(c) && isHostByte(c[i+4]) {
				return i, urlEnd(c, i), true
			}
		case '@':
			s := i
			for s > 0 && isLocalByte(c[s-1]) {
				s--
			}
			e := i + 1
			for e < len(c) && (isHostByte(c[e]) && c[e] != '_') {
				e++
			}
			for e > i+1 && (c[e-1] == '.' || c[e-1] == '-') {
				e--
			}
			if s < i && bytes.IndexByte(c[i+1:e], '.') > 0 {
				return s, e, false
			}
		}
	}
	return -1, 0, false
}

// bareTLDs are the top-level domains that make a word with a dot before
// them a host name even without "http://" or "www.": common in spam, rare
// at the end of file names.
var bareTLDs = [...]string{"com", "net", "org", "biz", "info"}

// bareHost reports whether the '.' at c[dot] precedes one of bareTLDs that
// ends a host name, and where the name starts.
func bareHost(c []byte, dot int) (start int, ok bool) {
	rest := c[dot+1:]
	for _, tld := range bareTLDs {
		if hasPrefixFold(rest, tld) && (len(rest) == len(tld) || !isHostByte(rest[len(tld)])) {
			ok = true
			break
		}
	}
	if !ok {
		return 0, false
	}
	start = dot
	for start > 0 && (isHostByte(c[start-1]) && c[start-1] != '_') {
		start--
	}
	for start < dot && !isAlnum(c[start]) {
		start++ // a name starts with a letter or digit
	}
	return start, start < dot
}

// urlEnd returns where the URL whose host starts at c[i] ends: at a
// character that cannot be in a URL, less trailing punctuation.
func urlEnd(c []byte, i int) int {
	e := i
	for e < len(c) && c[e] > ' ' && c[e] < 0x7f && strings.IndexByte("\"'<>()[]{}|\\^`", c[e]) < 0 {
		e++
	}
	for e > i && strings.IndexByte(".,;:!?", c[e-1]) >= 0 {
		e--
	}
	return e
}

func isLocalByte(c byte) bool {
	return isHostByte(c) || c == '+' || c == '%' || c == '='
}

func hasPrefixFold(b []byte, prefix string) bool {
	if len(b) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		if b[i]|0x20 != prefix[i] {
			return false
		}
	}
	return true
}

// Bounds on the tokens of one URL path.
const (
	maxPathWords   = 6
	minPathWordLen = 3
	maxPathWordLen = 20
)

// url adds the tokens of a URL: its host and the host's registrable
// domain, or "url:ip" and the address for a numeric host, and a few words
// of its path and query.
func (st *state) url(u []byte) {
	st.meas.links++
	if i := bytes.Index(u, []byte("://")); i >= 0 {
		u = u[i+3:]
	}
	end := len(u)
	for i, c := range u {
		if c == '/' || c == '?' || c == '#' || c == '\\' {
			end = i
			break
		}
	}
	host, path := u[:end], u[end:]
	if at := bytes.LastIndexByte(host, '@'); at >= 0 {
		host = host[at+1:] // "http://bank.example@evil.example/" goes to evil.example
	}
	if colon := bytes.LastIndexByte(host, ':'); colon >= 0 {
		host = host[:colon]
	}
	host = bytes.TrimRight(host, ".")
	if isIPv4(host) || isDigits(host) {
		st.add("url:ip")
		st.add("url:" + string(host))
	} else {
		st.host("url:", host)
	}
	words := 0
	for len(path) > 0 && words < maxPathWords {
		i := 0
		for i < len(path) && !isAlnum(path[i]) {
			i++
		}
		j := i
		for j < len(path) && isAlnum(path[j]) {
			j++
		}
		w := path[i:j]
		path = path[j:]
		if len(w) >= minPathWordLen && len(w) <= maxPathWordLen && !isDigits(w) {
			st.lbuf = lowerASCII(st.lbuf[:0], w)
			st.addBytes("urlpath:", st.lbuf)
			words++
		}
	}
}

func isAlnum(c byte) bool {
	return 'a' <= c|0x20 && c|0x20 <= 'z' || isDigit(c)
}

// email adds the tokens of an e-mail address: the words of its local part
// and its domain.
func (st *state) email(a []byte) {
	at := bytes.LastIndexByte(a, '@')
	st.words(a[:at], bodyMode)
	st.host("email:", a[at+1:])
}

// host adds prefix+host for a DNS name, lower-cased, and prefix+its
// registrable domain when that differs. Names that do not look like DNS
// names are ignored.
func (st *state) host(prefix string, h []byte) {
	h = bytes.TrimSpace(bytes.TrimRight(bytes.TrimSpace(h), "."))
	st.hbuf = lowerASCII(st.hbuf[:0], h)
	if !isHostname(st.hbuf) || !utf8.Valid(st.hbuf) {
		return
	}
	st.addBytes(prefix, st.hbuf)
	if st.full() {
		return
	}
	// The public suffix lookup is cached too: it allocates on every call.
	st.key = append(append(append(st.key[:0], nsReg), prefix...), st.hbuf...)
	tok, hash, ok := st.cached(st.key)
	if !ok {
		tok = noReg
		name := string(st.hbuf)
		if reg, err := publicsuffix.EffectiveTLDPlusOne(name); err == nil && reg != name {
			tok = prefix + reg
		}
		tok = st.store(hash, tok)
	}
	if tok != noReg {
		st.add(tok)
	}
}

// noReg is cached for a host that is its own registrable domain or has
// none.
const noReg = "\x00"
