package tokenize

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTokenizeFixtures(t *testing.T) {
	tests := []struct {
		file     string
		want     []string // tokens that must appear
		wantNot  []string // tokens that must not appear
		lang     string
		problems []string // substrings each of some problem
	}{
		{
			file: "plain.eml",
			want: []string{
				"subject:cheap", "subject:watches", "from:mailer.example.net", "from:example.net",
				"from:watch", "return-path:example.net", "message-id:mailer.example.net",
				"received:192.0.2.10", "received:192.0.2", "received:mx.example.org",
				"received:unknown", "x-mailer:4.2", "date:-0400", "content-type:text/plain",
				"content-type:charset:us-ascii", "meta:hops:2",
				"url:www.example.co.uk", "url:example.co.uk", "urlpath:watches",
				"email:example.org", "$100", "luxuri", "watch", "dont",
			},
			wantNot: []string{"meta:no:mailer", "received:alice", "http", "www", "watches"},
			lang:    "en",
		},
		{
			file: "crlf.eml",
			want: []string{"subject:meeting", "from:carol", "from:example.com", "user-agent:mozilla", "user-agent:1.0.1", "budget", "schedul", "received:203.0.113.5"},
			lang: "en",
		},
		{
			file:    "mbox.eml",
			want:    []string{"subject:lunch", "return-path:example.com", "sandwich", "breakfast"},
			wantNot: []string{"from:carol@example.com"},
			lang:    "en",
		},
		{
			file: "alternative.eml",
			want: []string{
				"mime:multipart/alternative", "mime:text/plain", "mime:text/html", "tulip",
				"sunflow", "garden", "logo", "url:tracking.example.net", "url:example.net",
				"url:images.example.net", "urlpath:click", "html:tag:p",
				"html:attr:bgcolor", "html:attr:href",
			},
			wantNot: []string{"hiddenscriptword", "trackingpixel", "verdana", "famili", "href", "sun<!--", "split"},
			lang:    "en",
		},
		{
			file:    "base64.eml",
			want:    []string{"mime:cte:base64", "statement", "balanc", "invoic", "portal"},
			wantNot: []string{"long:70", "long:60"},
			lang:    "en",
		},
		{
			file: "qp.eml",
			want: []string{"subject:dégustation", "subject:gratuite", "from:café", "mime:cte:quoted-printable", "crem", "brûl", "boutiqu"},
			lang: "fr",
		},
		{
			file: "latin1.eml",
			want: []string{"subject:grüße", "subject:münchen", "mime:charset:iso-8859-1", "bestell", "freundlich", "moglich"},
			lang: "de",
		},
		{
			file: "cp1251.eml",
			want: []string{"subject:скидка", "subject:для", "mime:charset:windows-1251", "клиент", "скидк", "магазин"},
			lang: "ru",
		},
		{
			file: "gb2312.eml",
			want: []string{"subject:免费", "subject:发票", "发票", "价格", "优惠", "mime:cte:base64"},
			lang: "zh",
		},
		{
			file: "sjis.eml",
			want: []string{"subject:案内", "特別", "案内", "キャ", "ペー", "mime:charset:shift_jis"},
			lang: "ja",
		},
		{
			file: "html-only.eml",
			want: []string{
				"congratul", "vacat", "free", "url:ip", "url:192.0.2.55", "urlpath:claim",
				"url:secure.bestoffers.example.com.br", "url:example.com.br", "email:promo.example.biz",
				"html:tag:font", "html:attr:bgcolor", "html:tag:table", "to:count:0", "to:undisclosed",
				"url:ads.example.net", "html:tag:iframe",
			},
			wantNot: []string{"scriptonlyword", "document", "nbsp", "font", "bgcolor", "href", "iframefallbackword", "languag"},
			lang:    "en",
		},
		{
			file:    "nested.eml",
			want:    []string{"mime:message/rfc822", "innersubjectword", "innerbodyword", "subject:fwd"},
			wantNot: []string{"from:origin.example.com"},
		},
		{
			file:     "broken-boundary.eml",
			want:     []string{"firstpartword", "secondpartword", "meta:problem:multipart"},
			problems: []string{"multipart"},
		},
		{
			file:     "wrong-boundary.eml",
			want:     []string{"fallbackword", "decodedword", "mime:guessed-multipart", "meta:problem:multipart"},
			wantNot:  []string{"long:60", "long:70", "long:80", "other", "boundari"},
			problems: []string{"no part found"},
		},
		{
			file: "no-content-type.eml",
			want: []string{"mime:text/plain", "bodi", "plain", "subject:type"},
		},
		{
			file:    "attachment.eml",
			want:    []string{"attach:type:application/pdf", "attach:ext:pdf", "invoic"},
			wantNot: []string{"secretpdfmarker", "pdf", "catalog", "endobj", "eof"},
		},
		{
			file:     "unknown-charset.eml",
			want:     []string{"café", "très", "spécial", "meta:problem:charset", "mime:charset:x-no-such-charset"},
			problems: []string{`unknown charset "x-no-such-charset"`},
		},
	}
	tok := New(DefaultOptions())
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.file, ".eml"), func(t *testing.T) {
			res, err := tok.Tokenize(readFixture(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			checkTokens(t, res.Tokens, tt.want, tt.wantNot)
			if tt.lang != "" && res.Lang != tt.lang {
				t.Errorf("Lang = %q, want %q", res.Lang, tt.lang)
			}
			for _, p := range tt.problems {
				if !slices.ContainsFunc(res.Problems, func(s string) bool { return strings.Contains(s, p) }) {
					t.Errorf("no problem mentions %q: %q", p, res.Problems)
				}
			}
			if tt.problems == nil && len(res.Problems) > 0 {
				t.Errorf("unexpected problems %q", res.Problems)
			}
			if res.Truncated {
				t.Error("Truncated set")
			}
		})
	}
}

// TestAttachmentBytesNeverTokens checks that no token comes from the bytes
// of a binary attachment, whatever its encoding.
func TestAttachmentBytesNeverTokens(t *testing.T) {
	payload := []byte("%PDF-1.4 hiddenpayloadword " + strings.Repeat("binarystreamword ", 20))
	payload = append(payload, 0, 1, 2, 0xff, 0xfe)
	for _, tc := range []struct{ name, cte, body string }{
		{"base64", "base64", base64.StdEncoding.EncodeToString(payload)},
		{"binary", "binary", string(payload)},
		{"8bit", "8bit", string(payload)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := "From: a@example.com\nSubject: x\nContent-Type: multipart/mixed; boundary=b\n\n" +
				"--b\nContent-Type: text/plain\n\nvisibleword\n" +
				"--b\nContent-Type: application/octet-stream; name=\"data.bin\"\nContent-Transfer-Encoding: " + tc.cte + "\n\n" +
				tc.body + "\n--b--\n"
			res, err := New(DefaultOptions()).Tokenize([]byte(msg))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(res.Tokens, "visibleword") || !slices.Contains(res.Tokens, "attach:ext:bin") {
				t.Errorf("missing tokens in %q", res.Tokens)
			}
			for _, tok := range res.Tokens {
				if strings.Contains(tok, "payload") || strings.Contains(tok, "binarystream") || strings.HasPrefix(tok, "long:") {
					t.Errorf("attachment bytes became token %q", tok)
				}
			}
		})
	}
}

func TestTokenizeTextCases(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		opts    func(*Options)
		want    []string
		wantNot []string
	}{
		{"numbers and prices", "Only $1,000.00 or €50 now, 100% free", nil, []string{"$1,000.00", "€50", "100", "free"}, []string{"00"}},
		{"apostrophes join", "don’t can't", nil, []string{"dont", "cant"}, []string{"don", "t"}},
		{"apostrophe after a letter not ASCII", "café's", nil, []string{"cafés"}, []string{"café"}},
		{"separators between digits not ASCII", "٣,٥٠٠.٧", nil, []string{"٣,٥٠٠.٧"}, nil},
		{"case folded", "MiXeD CASE Zz9AZ", nil, []string{"mixed", "case", "zz9az"}, []string{"MiXeD", "CASE"}},
		{"zero width space joins", "Vi\u200bagra and soft\u00adhyphen", nil, []string{"viagra", "softhyphen"}, []string{"vi", "agra"}},
		{"nfkc fullwidth", "ＦＲＥＥ money", nil, []string{"free"}, nil},
		{"ligature", "ﬁnance", nil, []string{"finance"}, nil},
		{"long word", strings.Repeat("x", 57), nil, []string{"long:50"}, nil},
		{"very long word", strings.Repeat("y", 500), nil, []string{"long:100"}, nil},
		{"short word dropped", "a b cd", nil, []string{"cd"}, []string{"a", "b"}},
		{"min len 1", "a b", func(o *Options) { o.MinTokenLen = 1 }, []string{"a", "b"}, nil},
		{"url obfuscated userinfo", "go to http://www.bank.example@evil.example.net/login now", nil, []string{"url:evil.example.net", "urlpath:login"}, []string{"url:www.bank.example"}},
		{"url with port", "see https://Shop.Example.ORG:8080/x", nil, []string{"url:shop.example.org", "url:example.org"}, nil},
		{"bare www", "(www.cheap-meds.example.biz).", nil, []string{"url:www.cheap-meds.example.biz", "url:example.biz"}, nil},
		{"email in brackets", "<john.smith@mail.example.com>", nil, []string{"email:mail.example.com", "email:example.com", "john", "smith"}, nil},
		{"urls off", "see http://www.example.com/page", func(o *Options) { o.URLs = false }, []string{"www", "example", "page"}, []string{"url:www.example.com"}},
		{"fallback stemmer", "running quickly", func(o *Options) { o.Stem = true }, []string{"run", "quick"}, []string{"running"}},
		{"no fallback stemmer", "running quickly", func(o *Options) { o.Stem, o.FallbackLang = true, "" }, []string{"running", "quickly"}, nil},
		{"hangul bigrams", "안녕하세요", nil, []string{"안녕", "녕하", "하세", "세요"}, nil},
		{"single cjk char", "a 中 b", nil, []string{"中"}, nil},
		{"invalid utf-8 read as windows-1252", "caf\xe9 \x93quoted\x94", nil, []string{"café", "quoted"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			o.Stem = false
			if tt.opts != nil {
				tt.opts(&o)
			}
			msg := "From: a@example.com\nSubject: test\nContent-Type: text/plain; charset=utf-8\n\n" + tt.body + "\n"
			res, err := New(o).Tokenize([]byte(msg))
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !slices.Contains(res.Tokens, w) {
					t.Errorf("token %q missing from %q", w, res.Tokens)
				}
			}
			for _, w := range tt.wantNot {
				if slices.Contains(res.Tokens, w) {
					t.Errorf("token %q present in %q", w, res.Tokens)
				}
			}
		})
	}
}

func TestMultipartFallback(t *testing.T) {
	blob := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("garbageword ", 40)))
	var lines []string
	for len(blob) > 76 {
		lines, blob = append(lines, blob[:76]), blob[76:]
	}
	tests := []struct {
		name, ctype, body string
		want              []string
	}{
		{"boundary never appears", "multipart/mixed; boundary=nowhere",
			"Visible fallbackword here.\n" + strings.Join(lines, "\n") + "\n", []string{"fallbackword", "meta:problem:multipart"}},
		{"no boundary parameter", "multipart/mixed",
			"Visible fallbackword here.\n" + strings.Join(lines, "\n") + "\n", []string{"fallbackword", "meta:problem:multipart"}},
		{"html in fallback", "multipart/related; boundary=nowhere",
			"<html><body><p>Visible <b>fallbackword</b></p><br><font color=red>x</font></body></html>\n", []string{"fallbackword", "html:tag:font"}},
		{"missing content-type, multipart body", "",
			"--guess\nContent-Type: text/html\n\n<p>guessedword</p>\n--guess--\n", []string{"guessedword", "mime:guessed-multipart", "mime:text/html"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := "From: a@example.com\nSubject: x\n"
			if tt.ctype != "" {
				msg += "Content-Type: " + tt.ctype + "\n"
			}
			res, err := New(DefaultOptions()).Tokenize([]byte(msg + "\n" + tt.body))
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !slices.Contains(res.Tokens, w) {
					t.Errorf("token %q missing from %q", w, res.Tokens)
				}
			}
			for _, tok := range res.Tokens {
				if strings.HasPrefix(tok, "long:") || strings.Contains(tok, "garbage") || tok == "font" || tok == "br" {
					t.Errorf("token %q made of markup or encoded bytes", tok)
				}
			}
		})
	}
}

func TestCharsetHint(t *testing.T) {
	gb := []byte{0xc3, 0xe2, 0xb7, 0xd1, 0xb7, 0xa2, 0xc6, 0xb1} // 免费发票 in GB2312
	tests := []struct{ name, header string }{
		{"charset on the multipart", "Content-Type: multipart/mixed; boundary=b; charset=gb2312\n"},
		{"charset of an encoded subject", "Subject: =?gb2312?B?w+K30Q==?=\nContent-Type: multipart/mixed; boundary=b\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := "From: a@example.com\n" + tt.header + "\n--b\nContent-Type: text/plain\n\n" + string(gb) + "\n--b--\n"
			res, err := New(DefaultOptions()).Tokenize([]byte(msg))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(res.Tokens, "发票") || !slices.Contains(res.Tokens, "mime:charset-hint:gb2312") {
				t.Errorf("part not read as GB2312: %q", res.Tokens)
			}
		})
	}
}

func TestTokenizeOrder(t *testing.T) {
	res, err := New(DefaultOptions()).Tokenize(readFixture(t, "alternative.eml"))
	if err != nil {
		t.Fatal(err)
	}
	idx := func(tok string) int {
		i := slices.Index(res.Tokens, tok)
		if i < 0 {
			t.Fatalf("token %q missing", tok)
		}
		return i
	}
	if !(idx("subject:weekly") < idx("mime:text/plain") &&
		idx("mime:text/plain") < idx("tulip") &&
		idx("tulip") < idx("mime:text/html") &&
		idx("mime:text/html") < idx("url:tracking.example.net") &&
		idx("url:tracking.example.net") < idx("logo")) {
		t.Errorf("tokens out of message order: %q", res.Tokens)
	}
}

func TestTokenizeOptions(t *testing.T) {
	raw := readFixture(t, "plain.eml")
	count := func(res Result, prefix string) int {
		n := 0
		for _, tok := range res.Tokens {
			if strings.HasPrefix(tok, prefix) {
				n++
			}
		}
		return n
	}
	tests := []struct {
		name   string
		set    func(*Options)
		prefix string
		want   bool
	}{
		{"received on", func(o *Options) {}, "received:", true},
		{"received off", func(o *Options) { o.Received = false }, "received:", false},
		{"headers default", func(o *Options) {}, "subject:", true},
		{"headers none", func(o *Options) { o.Headers = []string{} }, "subject:", false},
		{"headers only x-mailer", func(o *Options) { o.Headers = []string{"X-Mailer"} }, "x-mailer:", true},
		{"headers only x-mailer drops from", func(o *Options) { o.Headers = []string{"x-mailer"} }, "from:", false},
		{"html off", func(o *Options) { o.HTML = false }, "html:", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			tt.set(&o)
			in := raw
			if strings.HasPrefix(tt.name, "html") {
				in = readFixture(t, "html-only.eml")
			}
			res, err := New(o).Tokenize(in)
			if err != nil {
				t.Fatal(err)
			}
			if got := count(res, tt.prefix) > 0; got != tt.want {
				t.Errorf("tokens with prefix %q: %v, want %v", tt.prefix, got, tt.want)
			}
		})
	}
}

func TestHeaderStructure(t *testing.T) {
	raw := readFixture(t, "list.eml")
	tests := []struct {
		name    string
		set     func(*Options)
		want    []string
		wantNot []string
	}{
		{"named fields only", func(o *Options) {},
			[]string{"subject:elternabend", "list-id:reformschule"},
			[]string{"precedence:list", "x-mailman-version:2.1.9", "field:precedence"}},
		{"every field", func(o *Options) { o.Headers = append(o.Headers, "*") },
			[]string{"precedence:list", "x-mailman-version:2.1.9", "list-id:reformschule"},
			[]string{"x-spam-status:bayes_00", "x-spam-status:no", "received:esmtp", "field:precedence"}},
		{"every field alone", func(o *Options) { o.Headers = []string{"*"} },
			[]string{"precedence:list", "subject:elternabend", "list-id:reformschule"},
			[]string{"x-spam-status:no"}},
		{"mailboxes", func(o *Options) { o.Headers = append(o.Headers, "from", "to") },
			[]string{"from:addr:carla@example.com", "to:addr:reform@lists.example.org", "received:addr:bob@example.net"},
			nil},
		{"mailboxes off", func(o *Options) { o.Headers = append(o.Headers, "from", "to"); o.Mailboxes = false },
			[]string{"from:example.com"},
			[]string{"from:addr:carla@example.com", "received:addr:bob@example.net"}},
		{"field names", func(o *Options) { o.FieldNames = true },
			[]string{"field:precedence", "field:list-unsubscribe", "field:x-mailman-version", "field:received"},
			[]string{"field:x-spam-status", "field:x-spam-level", "precedence:list"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			o.Headers = []string{"subject", "list-id"}
			tt.set(&o)
			res, err := New(o).Tokenize(raw)
			if err != nil {
				t.Fatal(err)
			}
			checkTokens(t, res.Tokens, tt.want, tt.wantNot)
		})
	}
}

// checkTokens reports each token of want missing from got and each of
// wantNot present in it.
func checkTokens(t *testing.T, got, want, wantNot []string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("token %q missing from %q", w, got)
		}
	}
	for _, w := range wantNot {
		if slices.Contains(got, w) {
			t.Errorf("token %q present", w)
		}
	}
}

func TestHeaderCount(t *testing.T) {
	for _, name := range []string{"plain.eml", "list.eml", "html-only.eml", "nested.eml"} {
		t.Run(name, func(t *testing.T) {
			res, err := New(DefaultOptions()).Tokenize(readFixture(t, name))
			if err != nil {
				t.Fatal(err)
			}
			if res.Header <= 0 || res.Header >= len(res.Tokens) {
				t.Fatalf("Header %d of %d tokens", res.Header, len(res.Tokens))
			}
			// Header tokens all carry a field prefix; the body's first
			// token is where the body walk began.
			for _, tok := range res.Tokens[:res.Header] {
				if !strings.Contains(tok, ":") {
					t.Errorf("header token %q has no field prefix", tok)
				}
			}
			if got := res.Tokens[res.Header-1]; !strings.HasPrefix(got, "meta:") {
				t.Errorf("last header token %q, want a meta: token of the header section", got)
			}
		})
	}
}

func TestMailbox(t *testing.T) {
	long := strings.Repeat("a", 95) + "@example.org"
	tests := []struct {
		name, to string
		want     string // "" for no address token
	}{
		{"plain", "Alice@Example.ORG", "to:addr:alice@example.org"},
		{"display name", `"Alice" <alice@example.org>`, "to:addr:alice@example.org"},
		{"no at", "alice", ""},
		{"empty local part", "<@example.org>", ""},
		{"not a host", "<alice@exa mple>", ""},
		{"too long", "<" + long + ">", ""},
		{"non-ascii local part", "<jörg@example.org>", "to:addr:jörg@example.org"},
	}
	o := DefaultOptions()
	o.Headers = []string{"to"}
	o.Received = false
	tok := New(o)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := tok.Tokenize([]byte("To: " + tt.to + "\r\nSubject: x\r\n\r\nbody\r\n"))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range res.Tokens {
				if strings.HasPrefix(s, "to:addr:") {
					got = append(got, s)
				}
			}
			switch {
			case tt.want == "" && len(got) > 0:
				t.Errorf("address tokens %q, want none", got)
			case tt.want != "" && !slices.Equal(got, []string{tt.want}):
				t.Errorf("address tokens %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNewDefaults(t *testing.T) {
	tok := New(Options{})
	want := DefaultOptions()
	got := tok.opts
	if got.MaxBytes != want.MaxBytes || got.MaxTokens != want.MaxTokens ||
		got.MaxTokenLen != want.MaxTokenLen || got.MinTokenLen != want.MinTokenLen ||
		!slices.Equal(got.Headers, want.Headers) {
		t.Errorf("New(Options{}) options = %+v, want numeric defaults of %+v", got, want)
	}
}

func TestMalformed(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		bad  bool
	}{
		{"empty", nil, true},
		{"binary junk", []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'}, true},
		{"starts with blank line", []byte("\nFrom: a@example.com\n\nbody"), true},
		{"prose", []byte("hello world, this is not a message\n"), true},
		{"continuation first", []byte(" folded: value\n\nbody"), true},
		{"only from line", []byte("From someone Mon Jan 1 00:00:00 2002\n"), true},
		{"header only", []byte("Subject: hi"), false},
		{"bad line ends header", []byte("Subject: hi there\nthis line has no colon\nbody words\n"), false},
		{"space before colon", []byte("Subject : spaced\n\nbody"), false},
		{"byte order mark", []byte("\xef\xbb\xbfSubject: hi\r\n\r\nbody"), false},
		{"byte order mark and from line", []byte("\xef\xbb\xbfFrom a Mon Jan 1 00:00:00 2002\nSubject: hi\n\nbody"), false},
		{"only a byte order mark", []byte("\xef\xbb\xbf"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := New(DefaultOptions()).Tokenize(tt.in)
			if bad := errors.Is(err, ErrMalformed); bad != tt.bad {
				t.Fatalf("err = %v, want ErrMalformed %v", err, tt.bad)
			}
			if err != nil && res.Tokens != nil {
				t.Errorf("tokens %q with error", res.Tokens)
			}
		})
	}
	res, err := New(DefaultOptions()).Tokenize([]byte("Subject: hi there\nthis line has no colon\nbody words\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.Tokens, "subject:there") || !slices.Contains(res.Tokens, "bodi") || !slices.Contains(res.Tokens, "meta:problem:header") {
		t.Errorf("tokens %q", res.Tokens)
	}
}

func TestTruncation(t *testing.T) {
	t.Run("max bytes on 20 MB", func(t *testing.T) {
		var b bytes.Buffer
		b.WriteString("From: a@example.com\nSubject: big\nContent-Type: text/plain\n\nstartword ")
		line := []byte("lorem ipsum dolor sit amet consectetur adipiscing elit\n")
		for b.Len() < 20<<20 {
			b.Write(line)
		}
		b.WriteString("endword\n")
		o := DefaultOptions()
		o.MaxTokens = 1 << 30
		res, err := New(o).Tokenize(b.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if !res.Truncated {
			t.Error("Truncated not set")
		}
		if !slices.Contains(res.Tokens, "startword") || slices.Contains(res.Tokens, "endword") {
			t.Error("wrong part of the message read")
		}
		// 8 words a line, in the first 4 MiB only.
		if max := DefaultMaxBytes / len(line) * 8; len(res.Tokens) > max+100 {
			t.Errorf("%d tokens, want at most about %d", len(res.Tokens), max)
		}
	})
	t.Run("max tokens", func(t *testing.T) {
		o := DefaultOptions()
		o.MaxTokens = 50
		res, err := New(o).Tokenize(readFixture(t, "plain.eml"))
		if err != nil {
			t.Fatal(err)
		}
		if !res.Truncated || len(res.Tokens) != 50 {
			t.Errorf("Truncated %v with %d tokens, want true with 50", res.Truncated, len(res.Tokens))
		}
	})
	t.Run("header field bounded", func(t *testing.T) {
		msg := "Subject: " + strings.Repeat("word ", 1000) + "\n\nbody text\n"
		res, err := New(DefaultOptions()).Tokenize([]byte(msg))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(strings.Join(res.Tokens, " "), "subject:word"); n != maxFieldTokens {
			t.Errorf("%d subject tokens, want %d", n, maxFieldTokens)
		}
		if res.Truncated || !slices.Contains(res.Tokens, "bodi") {
			t.Errorf("body lost after a long header: %q", res.Tokens)
		}
	})
}

func TestMIMEDepthLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString("From: a@example.com\nSubject: deep\n")
	for i := 0; i < 20; i++ {
		b.WriteString("Content-Type: message/rfc822\n\nSubject: level\n")
	}
	b.WriteString("\ndeepestword\n")
	res, err := New(DefaultOptions()).Tokenize([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.Tokens, "meta:problem:depth") {
		t.Errorf("no depth problem: %q", res.Tokens)
	}
}

// TestConcurrent tokenizes the fixtures from several goroutines at once,
// each giving its results back with Recycle: every result is what a
// tokenizer of its own gives, whatever slice it was filled in.
func TestConcurrent(t *testing.T) {
	files, err := filepath.Glob("testdata/*.eml")
	if err != nil || len(files) == 0 {
		t.Fatal("no fixtures", err)
	}
	tok := New(DefaultOptions())
	want := make(map[string][]string)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		res, err := New(DefaultOptions()).Tokenize(raw)
		if err != nil {
			t.Fatal(err)
		}
		want[f] = res.Tokens
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				for _, f := range files {
					raw, _ := os.ReadFile(f)
					res, err := tok.Tokenize(raw)
					if err != nil {
						t.Error(err)
						return
					}
					if !slices.Equal(res.Tokens, want[f]) {
						t.Errorf("%s: tokens differ under concurrency", f)
						return
					}
					tok.Recycle(res.Tokens)
				}
			}
		}()
	}
	wg.Wait()
}

// TestBodyMarksAndLimit checks that the ready tokens of a body (MIME,
// attachment and link tokens) come out among its words in message order,
// with white space around them, and that MaxTokens cuts that sequence
// where it should: a body that ends in white space notes the truncation
// even at exactly MaxTokens tokens, as its end is walked over with the
// limit reached.
func TestBodyMarksAndLimit(t *testing.T) {
	msg := "From: a@example.com\nContent-Type: multipart/mixed; boundary=x\n\n" +
		"--x\nContent-Type: text/plain\n\nalpha beta  \n\n" +
		"--x\nContent-Type: application/pdf\nContent-Disposition: attachment; filename=a.pdf\n\nAAAA\n" +
		"--x\nContent-Type: text/html\n\n  gamma <a href=\"http://x.example.org/p\">link</a>  delta \n--x--\n"
	body := []string{"mime:multipart/mixed", "mime:text/plain", "alpha", "beta", "attach:type:application/pdf", "attach:ext:pdf",
		"mime:text/html", "gamma", "html:tag:a", "html:attr:href", "url:x.example.org", "url:example.org", "link", "delta"}
	o := DefaultOptions()
	o.Stem = false
	all, err := New(o).Tokenize([]byte(msg))
	if err != nil {
		t.Fatal(err)
	}
	if got := all.Tokens[all.Header:]; !slices.Equal(got, body) || all.Truncated {
		t.Fatalf("body tokens %q, truncated %v; want %q", got, all.Truncated, body)
	}
	for limit := 1; limit <= len(all.Tokens)+1; limit++ {
		o.MaxTokens = limit
		res, err := New(o).Tokenize([]byte(msg))
		if err != nil {
			t.Fatal(err)
		}
		want := all.Tokens[:min(limit, len(all.Tokens))]
		if !slices.Equal(res.Tokens, want) || res.Truncated != (limit <= len(all.Tokens)) {
			t.Errorf("MaxTokens %d: %q, truncated %v", limit, res.Tokens, res.Truncated)
		}
	}
}
