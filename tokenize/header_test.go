package tokenize

import (
	"bytes"
	"testing"
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

// headerHelperCases are inputs at the edges of the helpers: lengths about
// eight bytes, bytes next to the letters and non-ASCII bytes whose low
// seven bits are letters.
var headerHelperCases = []string{
	"", "A", "z", "@[`{", "\xc1\xda\xe1\xfa\x80\xff", "Received", "RECEIVED:",
	"X-MS-Has-Attach", "0123456", "01234567", "012345678", "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
	"Mail.Example.COM", "mail.example.com", "a.bc", "a.b", ".com", "a.", "a..com",
	"xn--bcher-kva.example", "bücher.example", "bücher.éxample", "host_1.ex-ample.org",
	"10.0.0.1", "mail.example.c0m", "mail example.com", "mail.example.com.",
	"[192.0.2.1]", "ipv6:2001:db8::1", "a\x00.com", "a\x7f.com",
	string(bytes.Repeat([]byte("a."), 126)) + "com",
	string(bytes.Repeat([]byte("a."), 125)) + "com",
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

func FuzzHeaderHelpers(f *testing.F) {
	for _, s := range headerHelperCases {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := lowerASCII([]byte("x:"), b), refLowerASCII([]byte("x:"), b); !bytes.Equal(got, want) {
			t.Errorf("lowerASCII(%q) = %q, want %q", b, got, want)
		}
	})
}
