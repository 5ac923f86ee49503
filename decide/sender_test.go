package decide

import (
	"reflect"
	"strings"
	"testing"
)

func TestSenderOf(t *testing.T) {
	for _, tt := range []struct {
		name, raw, env string
		from, auth     []string
	}{
		{"LF", "From: Alice <alice@example.org>\nAuthentication-Results: mx.example.org; dmarc=pass header.from=example.org\nSubject: x\n\nbody\n",
			"<bounce@example.org>", []string{"alice@example.org"}, []string{"mx.example.org; dmarc=pass header.from=example.org"}},
		{"CRLF, folded, the first From: alone",
			"Authentication-Results: mx.example.org;\r\n\tspf=pass smtp.mailfrom=example.org\r\nFrom: \"Bob, Jr.\" <bob@example.org>,\r\n carol@example.org\r\nFrom: eve@example.net\r\n\r\nbody\r\n",
			"", []string{"bob@example.org", "carol@example.org"}, []string{"mx.example.org;\n\tspf=pass smtp.mailfrom=example.org"}},
		{"no From: in the body", "Subject: x\n\nFrom: someone@example.org\n", "a@b.example", nil, nil},
		{"no header", "just text", "", nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := SenderOf([]byte(tt.raw), tt.env)
			if s.Envelope != strings.TrimSpace(tt.env) || !reflect.DeepEqual(s.From, tt.from) || !reflect.DeepEqual(s.AuthResults, tt.auth) {
				t.Errorf("got %+v, want from %q auth %q", s, tt.from, tt.auth)
			}
		})
	}
}

// FuzzSenderOf checks that any message gives at most MaxSenderFields
// From: addresses and Authentication-Results values, without a panic.
func FuzzSenderOf(f *testing.F) {
	f.Add([]byte("From: Alice <alice@example.org>\nAuthentication-Results: mx; dkim=pass header.d=example.org\n\nbody\n"))
	f.Add([]byte("From: a@b.example,\r\n c@d.example\r\n\r\n"))
	f.Add([]byte("no header"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		s := SenderOf(raw, "")
		if len(s.From) > MaxSenderFields || len(s.AuthResults) > MaxSenderFields {
			t.Errorf("%d From: addresses, %d Authentication-Results", len(s.From), len(s.AuthResults))
		}
	})
}

// FuzzAddresses checks that any From: value gives at most
// MaxSenderFields addresses, each with an '@', without a panic.
func FuzzAddresses(f *testing.F) {
	for _, s := range []string{
		"Alice <alice@example.org>", `"Bob, Jr." <bob@example.org>, carol@example.org`,
		"=?x-unknown?q?Eve?= <eve@example.org>", `"unclosed <a@b.example>`, "<a/b@c.example>", "", "@@@, <@>",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got := Addresses(v)
		if len(got) > MaxSenderFields {
			t.Errorf("%d addresses from %q", len(got), v)
		}
		for _, a := range got {
			if !strings.Contains(a, "@") {
				t.Errorf("%q from %q has no '@'", a, v)
			}
		}
	})
}
