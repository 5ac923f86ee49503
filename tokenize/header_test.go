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
	})
}
