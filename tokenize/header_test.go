package tokenize

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// The ref functions are the byte-at-a-time forms of the header helpers,
// which the faster ones must agree with on every input.

func refLowerASCII(dst, b []byte) []byte {
	for _, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

func refIsHostByte(c byte) bool {
	return 'a' <= c|0x20 && c|0x20 <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_'
}

func refIsHostname(b []byte) bool {
	dot := bytes.LastIndexByte(b, '.')
	if dot <= 0 || len(b)-dot-1 < 2 || len(b) > 253 {
		return false
	}
	for _, c := range b[dot+1:] {
		if c < 'a' || c > 'z' {
			return false
		}
	}
	for _, c := range b {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_' || c >= 0x80) {
			return false
		}
	}
	return true
}

func refIsIPv4(b []byte) bool {
	parts := 0
	for len(b) > 0 {
		i := bytes.IndexByte(b, '.')
		p := b
		if i >= 0 {
			p, b = b[:i], b[i+1:]
			if len(b) == 0 {
				return false
			}
		} else {
			b = nil
		}
		if len(p) == 0 || len(p) > 3 || !isDigits(p) || len(p) == 3 && string(p) > "255" {
			return false
		}
		parts++
	}
	return parts == 4
}

func refCutAddress(v []byte) (one, rest []byte) {
	quoted, escaped := false, false
	depth, angle := 0, false
	for i, c := range v {
		switch {
		case escaped:
			escaped = false
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

// refFieldName returns, as fieldName does, the name a line starts and
// where its value starts.
func refFieldName(line []byte) ([]byte, int, bool) {
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 {
		return nil, 0, false
	}
	name := bytes.TrimRight(line[:colon], " \t")
	if len(name) == 0 {
		return nil, 0, false
	}
	for _, c := range name {
		if c <= ' ' || c >= 0x7f {
			return nil, 0, false
		}
	}
	return name, colon + 1, true
}

// refReceived and refMailbox are received and mailbox as they were
// before each Received field and mailbox was lower-cased once.
func refReceived(st *state, v []byte) {
	if i := bytes.LastIndexByte(v, ';'); i >= 0 {
		v = v[:i]
	}
	skip := false
	made := 0
	for len(v) > 0 && made < maxFieldTokens/4 {
		i := 0
		for i < len(v) && !refIsHostByte(v[i]) {
			i++
		}
		j := i
		for j < len(v) && (refIsHostByte(v[j]) || v[j] == ':') {
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
		st.recv = refLowerASCII(st.recv[:0], w)
		w = st.recv
		switch string(w) {
		case "for":
			if st.opts.Mailboxes {
				if lt := bytes.IndexByte(v, '<'); lt >= 0 {
					if gt := bytes.IndexByte(v[lt:], '>'); gt > 0 {
						refMailbox(st, "received:", v[lt+1:lt+gt])
					}
				}
			}
			return
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
		case refIsIPv4(w):
			st.add("received:" + string(w))
			st.add("received:" + string(w[:bytes.LastIndexByte(w, '.')]))
			made++
		case bytes.Count(w, []byte(":")) >= 2 && isHex(w):
			st.add("received:" + string(w))
			made++
		case bytes.IndexByte(w, ':') < 0 && refIsHostname(w):
			st.host("received:", w)
			made++
		}
	}
}

func refMailbox(st *state, prefix string, addr []byte) {
	addr = bytes.TrimSpace(addr)
	at := bytes.LastIndexByte(addr, '@')
	if at <= 0 || len(addr) > maxMailbox || !utf8.Valid(addr) || bytes.ContainsAny(addr, " \t\r\n<>") {
		return
	}
	st.hbuf = refLowerASCII(st.hbuf[:0], addr[at+1:])
	if !refIsHostname(st.hbuf) {
		return
	}
	st.mbuf = refLowerASCII(append(append(st.mbuf[:0], prefix...), "addr:"...), addr)
	st.addBytes("", st.mbuf)
}

var stateTokenizer = New(DefaultOptions())

// stateTokens returns the tokens f adds to a fresh state.
func stateTokens(f func(st *state)) []string {
	st := stateTokenizer.pool.Get().(*state)
	defer stateTokenizer.pool.Put(st)
	st.reset(stateTokenizer)
	f(st)
	return st.tokens
}

// checkFieldFuncs compares received and mailbox with their former forms on
// v.
func checkFieldFuncs(t *testing.T, v []byte) {
	t.Helper()
	got := stateTokens(func(st *state) { st.received(v) })
	want := stateTokens(func(st *state) { refReceived(st, v) })
	if !slices.Equal(got, want) {
		t.Errorf("received(%q) tokens %q, want %q", v, got, want)
	}
	got = stateTokens(func(st *state) { st.mailbox("to:", v) })
	want = stateTokens(func(st *state) { refMailbox(st, "to:", v) })
	if !slices.Equal(got, want) {
		t.Errorf("mailbox(%q) tokens %q, want %q", v, got, want)
	}
}

// headerHelperCases are inputs at the edges of the helpers: lengths about
// eight bytes, bytes next to the letters, non-ASCII bytes whose low seven
// bits are letters, near dotted quads, address lists with quotes and
// comments, and field lines.
var headerHelperCases = []string{
	"", "A", "z", "@[`{", "\xc1\xda\xe1\xfa\x80\xff", "Received", "RECEIVED:",
	"X-MS-Has-Attach", "0123456", "01234567", "012345678", "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
	"Mail.Example.COM", "mail.example.com", "a.bc", "a.b", ".com", "a.", "a..com",
	"xn--bcher-kva.example", "bücher.example", "bücher.éxample", "host_1.ex-ample.org",
	"10.0.0.1", "mail.example.c0m", "mail example.com", "mail.example.com.",
	"[192.0.2.1]", "ipv6:2001:db8::1", "a\x00.com", "a\x7f.com",
	string(bytes.Repeat([]byte("a."), 126)) + "com",
	string(bytes.Repeat([]byte("a."), 125)) + "com",
	"192.0.2.255", "192.0.2.256", "192.0.2.1.", ".192.0.2.1", "1.2.3", "1.2.3.4.5", "01.002.3.4",
	"1..3.4", "0.0.0.0", "1234.1.1.1", "1.2.3.4x", "a, b", `"a, b" <c>, d`, `a\, b, c`, `(a, (b)) c, d`,
	`<a, b> c, d`, `"a\", b" c, d`, `a) b, c`, "From: x", "From : x", "From\t:x", " From: x",
	"Fr om: x", ": x", "From", "X-\x7f: x", "X-\xff: x", "X\r: x",
	"from Mail.Example.COM (HELO x) ([IPv6:2001:DB8::1]) by MX.example.org with ESMTP id A1 for <Bob@Example.NET>; x",
	"from a.example.com (b.example.com [192.0.2.1]) by c.example.org (unknown) via SMTP for bob@example.net",
	"by 10.0.0.1 with SMTP id u3 for < Bob@Example.NET >", "for <a b@example.com>", "for <a@b@Example.com>",
	" \"a b\"@example.com ", "A@B@Example.COM", "x\xff@example.com", "j\xc3\xb6rg@Example.ORG", "tab\t@example.com",
	"@example.com", "user@exa_mple.com", "user@example", "user@example.c0m", "user@ex ample.com", "<user@example.com>",
	"user@example.com>", "us>er@example.com", "\tuser@EXAMPLE.com\r\n",
	"\x00\x01@\x00;<\x80\xff\x7f@@", "a;b;c;d;e;f;g;h;i;j", "@@@@@@@@@@@@@@@@@", "\x80\x80\x80\x80\x80\x80\x80\x80<",
}

func TestLowerASCII(t *testing.T) {
	for _, in := range headerHelperCases {
		for _, prefix := range []string{"", "To:addr:"} {
			want := refLowerASCII([]byte(prefix), []byte(in))
			if got := lowerASCII([]byte(prefix), []byte(in)); !bytes.Equal(got, want) {
				t.Errorf("lowerASCII(%q, %q) = %q, want %q", prefix, in, got, want)
			}
		}
	}
}

func TestHostBytes(t *testing.T) {
	for c := range 256 {
		if got, want := isHostByte(byte(c)), refIsHostByte(byte(c)); got != want {
			t.Errorf("isHostByte(%#x) = %v, want %v", c, got, want)
		}
	}
}

func TestIsHostname(t *testing.T) {
	for _, in := range headerHelperCases {
		for _, b := range [][]byte{[]byte(in), refLowerASCII(nil, []byte(in))} {
			if got, want := isHostname(b), refIsHostname(b); got != want {
				t.Errorf("isHostname(%q) = %v, want %v", b, got, want)
			}
		}
	}
}

func TestFieldFuncs(t *testing.T) {
	for _, in := range headerHelperCases {
		checkFieldFuncs(t, []byte(in))
	}
}

func TestLastIndexByte(t *testing.T) {
	for _, in := range headerHelperCases {
		for _, c := range []byte("@<;.\x00\x80\xff") {
			if got, want := lastIndexByte([]byte(in), c), bytes.LastIndexByte([]byte(in), c); got != want {
				t.Errorf("lastIndexByte(%q, %q) = %d, want %d", in, c, got, want)
			}
		}
	}
}

func TestIsIPv4(t *testing.T) {
	for _, in := range headerHelperCases {
		if got, want := isIPv4([]byte(in)), refIsIPv4([]byte(in)); got != want {
			t.Errorf("isIPv4(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestCutAddress(t *testing.T) {
	for _, in := range headerHelperCases {
		one, rest := cutAddress([]byte(in))
		wantOne, wantRest := refCutAddress([]byte(in))
		if !bytes.Equal(one, wantOne) || !bytes.Equal(rest, wantRest) {
			t.Errorf("cutAddress(%q) = %q, %q, want %q, %q", in, one, rest, wantOne, wantRest)
		}
	}
}

func TestFieldName(t *testing.T) {
	for _, in := range headerHelperCases {
		name, value, ok := fieldName([]byte(in))
		wantName, wantValue, wantOK := refFieldName([]byte(in))
		if !bytes.Equal(name, wantName) || value != wantValue || ok != wantOK {
			t.Errorf("fieldName(%q) = %q, %d, %v, want %q, %d, %v", in, name, value, ok, wantName, wantValue, wantOK)
		}
	}
}

func FuzzHeaderHelpers(f *testing.F) {
	for _, s := range headerHelperCases {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := lowerASCII([]byte("x:"), b), refLowerASCII([]byte("x:"), b); !bytes.Equal(got, want) {
			t.Errorf("lowerASCII(%q) = %q, want %q", b, got, want)
		}
		for _, h := range [][]byte{b, refLowerASCII(nil, b)} {
			if got, want := isHostname(h), refIsHostname(h); got != want {
				t.Errorf("isHostname(%q) = %v, want %v", h, got, want)
			}
		}
		for _, c := range []byte("@<;\x00\x01\x80\xff") {
			if got, want := lastIndexByte(b, c), bytes.LastIndexByte(b, c); got != want {
				t.Errorf("lastIndexByte(%q, %q) = %d, want %d", b, c, got, want)
			}
		}
		if got, want := isIPv4(b), refIsIPv4(b); got != want {
			t.Errorf("isIPv4(%q) = %v, want %v", b, got, want)
		}
		one, rest := cutAddress(b)
		wantOne, wantRest := refCutAddress(b)
		if !bytes.Equal(one, wantOne) || !bytes.Equal(rest, wantRest) {
			t.Errorf("cutAddress(%q) = %q, %q, want %q, %q", b, one, rest, wantOne, wantRest)
		}
		name, value, ok := fieldName(b)
		wantName, wantValue, wantOK := refFieldName(b)
		if !bytes.Equal(name, wantName) || value != wantValue || ok != wantOK {
			t.Errorf("fieldName(%q) = %q, %d, %v, want %q, %d, %v", b, name, value, ok, wantName, wantValue, wantOK)
		}
		checkFieldFuncs(t, b)
	})
}

// headerCases are header sections at the edges of the header tokenizer:
// folded and encoded fields, odd Received lines, IP literals, IDNs and
// malformed addresses.
var headerCases = []struct {
	name, raw string
	want      []string // the tokens of the header section, in order
}{
	{"folded encoded subject", "Subject: =?utf-8?B?w4lU?=\n =?iso-8859-1?Q?caf=E9?= Plain\n\tWORDS\nFrom: a@example.com\n\nx\n", []string{
		"subject:étcafé", "subject:plain", "subject:words", "field:subject", "from:example.com",
		"from:addr:a@example.com", "field:from", "meta:hops:0", "meta:no:message-id", "meta:no:date",
		"meta:no:to", "meta:no:mailer",
	}},
	{"crlf and blanks before colon", "SUBJECT  :\tHello World\r\nX-Odd \t: Value.One_two-3\r\nfrom:B@Example.Org\r\n\r\nx\r\n", []string{
		"subject:hello", "subject:world", "field:subject", "x-odd:value.one_two-3", "field:x-odd",
		"from:example.org", "from:addr:b@example.org", "field:from", "meta:hops:0", "meta:no:message-id",
		"meta:no:date", "meta:no:to", "meta:no:mailer",
	}},
	{"received full", "Received: from Mail.Example.COM (HELO x) ([IPv6:2001:DB8::1]) by MX.example.org (Postfix)\n\twith ESMTP id ABC123 for <Bob@Example.NET>; Tue, 1 Jul 2003 10:52:37 +0200\n\nx\n", []string{
		"received:mail.example.com", "received:example.com", "received:2001:db8::1",
		"received:mx.example.org", "received:example.org", "received:addr:bob@example.net",
		"field:received", "meta:hops:1", "meta:no:message-id", "meta:no:date", "meta:no:from",
		"meta:no:to", "meta:no:subject", "meta:no:mailer",
	}},
	{"received odd addresses", "Received: from 256.1.1.1 [10.0.0.255] 1.2.3.4. .1.2.3.4 01.002.3.4 1.2.3 1.2.3.4.5 ::1 fe80::1:2 by unknown via x\n\nx\n", []string{
		"received:10.0.0.255", "received:10.0.0", "received:01.002.3.4", "received:01.002.3",
		"received:fe80::1:2", "received:unknown", "field:received", "meta:hops:1", "meta:no:message-id",
		"meta:no:date", "meta:no:from", "meta:no:to", "meta:no:subject", "meta:no:mailer",
	}},
	{"received no semicolon", "Received: (qmail 1234 invoked from network) from host.example.net (HELO host) (192.0.2.77)\nReceived: by 10.0.0.1 with SMTP id u3; Mon, 2 Jun 2003 01:02:03 -0000\n\nx\n", []string{
		"received:host.example.net", "received:example.net", "received:192.0.2.77", "received:192.0.2",
		"field:received", "received:10.0.0.1", "received:10.0.0", "field:received", "meta:hops:2",
		"meta:no:message-id", "meta:no:date", "meta:no:from", "meta:no:to", "meta:no:subject",
		"meta:no:mailer",
	}},
	{"received idn", "Received: from xn--bcher-kva.example ([192.0.2.1]) by bücher.example for <jörg@bücher.example>\n\nx\n", []string{
		"received:xn--bcher-kva.example", "received:192.0.2.1", "received:192.0.2",
		"received:cher.example", "received:addr:jörg@bücher.example", "field:received", "meta:hops:1",
		"meta:no:message-id", "meta:no:date", "meta:no:from", "meta:no:to", "meta:no:subject",
		"meta:no:mailer",
	}},
	{"received many", strings.Repeat("Received: by a.example.com\n", 21) + "\nx\n", append(
		slices.Repeat([]string{"received:a.example.com", "received:example.com", "field:received"}, 20),
		"field:received", "meta:hops:20+", "meta:no:message-id", "meta:no:date", "meta:no:from", "meta:no:to",
		"meta:no:subject", "meta:no:mailer",
	)},
	{"received long host", "Received: from " + strings.Repeat("a.", 130) + "com by ok.example.com\n\nx\n", []string{
		"received:ok.example.com", "received:example.com", "field:received", "meta:hops:1",
		"meta:no:message-id", "meta:no:date", "meta:no:from", "meta:no:to", "meta:no:subject",
		"meta:no:mailer",
	}},
	{"display names", "From: \"Doe, John\" <John.Doe@Example.COM> (Work)\nReply-To: =?utf-8?Q?J=C3=B6rg?= <j@b\xc3\xbccher.example>\n\nx\n", []string{
		"from:doe", "from:john", "from:example.com", "from:addr:john.doe@example.com", "field:from",
		"reply-to:jörg", "reply-to:bücher.example", "reply-to:addr:j@bücher.example", "field:reply-to",
		"meta:hops:0", "meta:no:message-id", "meta:no:date", "meta:no:to", "meta:no:subject",
		"meta:no:mailer",
	}},
	{"malformed addresses", "To: undisclosed-recipients:;, <@bad>, a@b, \"q\\\"uote\" <x@y.example>, (comment, with comma) z@sub.example.co.uk, <broken@example.org\n\nx\n", []string{
		"to:undisclosed", "to:recipients", "to:q", "to:uote", "to:y.example", "to:addr:x@y.example",
		"to:comment", "to:with", "to:comma", "to:z", "to:sub", "to:example", "to:co", "to:uk",
		"to:example.org", "to:addr:broken@example.org", "to:count:4-5", "field:to", "meta:hops:0",
		"meta:no:message-id", "meta:no:date", "meta:no:from", "meta:no:subject", "meta:no:mailer",
	}},
	{"group and empty", "Cc: Team: a@example.com, b@EXAMPLE.com;\nReturn-Path: <>\nSender: user@[192.0.2.1]\nErrors-To: x@sub.domain.example.co.uk.\n\nx\n", []string{
		"cc:example.com", "cc:count:2", "field:cc", "return-path:count:0", "field:return-path",
		"field:sender", "errors-to:sub.domain.example.co.uk", "errors-to:example.co.uk",
		"field:errors-to", "meta:hops:0", "meta:no:message-id", "meta:no:date", "meta:no:from",
		"meta:no:to", "meta:no:subject", "meta:no:mailer",
	}},
	{"many recipients", "To: " + strings.Repeat("a@example.com, ", 30) + "b@example.com\n\nx\n", []string{
		"to:example.com", "to:addr:a@example.com", "to:example.com", "to:addr:a@example.com",
		"to:example.com", "to:addr:a@example.com", "to:example.com", "to:addr:a@example.com",
		"to:example.com", "to:addr:a@example.com", "to:example.com", "to:addr:a@example.com",
		"to:example.com", "to:addr:a@example.com", "to:example.com", "to:addr:a@example.com",
		"to:example.com", "to:addr:a@example.com", "to:example.com", "to:addr:a@example.com",
		"to:example.com", "to:addr:a@example.com", "to:example.com", "to:addr:a@example.com",
		"to:example.com", "to:addr:a@example.com", "to:example.com", "to:addr:a@example.com",
		"to:example.com", "to:addr:a@example.com", "to:example.com", "to:addr:a@example.com",
		"to:example.com", "to:addr:a@example.com", "to:example.com", "to:addr:a@example.com",
		"to:example.com", "to:addr:a@example.com", "to:example.com", "to:addr:a@example.com",
		"to:example.com", "to:addr:a@example.com", "to:example.com", "to:addr:a@example.com",
		"to:example.com", "to:addr:a@example.com", "to:example.com", "to:addr:a@example.com",
		"to:example.com", "to:addr:a@example.com", "field:to", "meta:hops:0", "meta:no:message-id",
		"meta:no:date", "meta:no:from", "meta:no:subject", "meta:no:mailer",
	}},
	{"message-id", "Message-ID: <abc>\nResent-Message-ID: <1@Mail.Example.COM>\n\nx\n", []string{
		"message-id:noat", "field:message-id", "resent-message-id:1",
		"resent-message-id:mail.example.com", "field:resent-message-id", "meta:hops:0", "meta:no:date",
		"meta:no:from", "meta:no:to", "meta:no:subject", "meta:no:mailer",
	}},
	{"dates", "Date: Tue, 1 Jul 2003 10:52:37 PDT\nDate: yesterday (noon)\n\nx\n", []string{
		"date:pdt", "field:date", "date:nozone", "field:date", "meta:hops:0", "meta:no:message-id",
		"meta:no:from", "meta:no:to", "meta:no:subject", "meta:no:mailer",
	}},
	{"content-type", "Content-Type: Text/HTML; charset=\"ISO-8859-1\"\nMIME-Version: 1.0\n\nx\n", []string{
		"content-type:text/html", "content-type:charset:iso-8859-1", "field:content-type",
		"mime-version:1.0", "field:mime-version", "meta:hops:0", "meta:no:message-id", "meta:no:date",
		"meta:no:from", "meta:no:to", "meta:no:subject", "meta:no:mailer",
	}},
	{"verdicts and lists", "X-Spam-Status: Yes, score=9\nX-Bogosity: Spam\nList-Id: <list.example.org>\nX-Priority: 3 (Normal)\nX-Mailer: Foo Mailer v1.2.3\n\nx\n", []string{
		"list-id:list.example.org", "field:list-id", "x-priority:3", "x-priority:normal",
		"field:x-priority", "x-mailer:foo", "x-mailer:mailer", "x-mailer:v1.2.3", "field:x-mailer",
		"meta:hops:0", "meta:no:message-id", "meta:no:date", "meta:no:from", "meta:no:to",
		"meta:no:subject",
	}},
	{"not a field", "Subject: one\nthis is not a field\nFrom: late@example.com\n\nx\n", []string{
		"subject:one", "field:subject", "meta:hops:0", "meta:no:message-id", "meta:no:date",
		"meta:no:from", "meta:no:to", "meta:no:mailer",
	}},
	{"8-bit values", "Subject: caf\xe9 \xff\xfe\nOrganization: Acme\xa0Corp\n\nx\n", []string{
		"subject:café", "subject:ÿþ", "field:subject", "organization:acme", "organization:corp",
		"field:organization", "meta:hops:0", "meta:no:message-id", "meta:no:date", "meta:no:from",
		"meta:no:to", "meta:no:mailer",
	}},
}

func TestHeaderTokens(t *testing.T) {
	o := DefaultOptions()
	o.Headers = append(o.Headers, "*")
	o.FieldNames = true
	tok := New(o)
	for _, tt := range headerCases {
		t.Run(tt.name, func(t *testing.T) {
			res, err := tok.Tokenize([]byte(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Tokens[:res.Header]; !slices.Equal(got, tt.want) {
				t.Errorf("header tokens\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}
