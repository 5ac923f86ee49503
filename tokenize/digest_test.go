package tokenize

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

func toCRLF(b []byte) []byte {
	return bytes.ReplaceAll(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")), []byte("\n"), []byte("\r\n"))
}

func toLF(b []byte) []byte {
	return bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
}

// prependTrace adds what MTAs, delivery agents and filters put on top of a
// message on its way to a mailbox.
func prependTrace(b []byte) []byte {
	trace := "Return-Path: <bounce@example.net>\n" +
		"Delivered-To: user@example.org\n" +
		"X-Original-To: user@example.org\n" +
		"Received: from mx1.example.org (mx1.example.org [198.51.100.1])\n\tby mbox.example.org (Postfix) with ESMTP id 1234; Mon, 1 Jan 2024 00:00:00 +0000\n" +
		"X-Spam-Status: No, score=-2.6 required=5.0\n" +
		"X-Spam-Flag: NO\n" +
		"X-Spamd-Result: ham 0.01\n" +
		"Status: RO\n" +
		"X-Status: A\n" +
		"X-UID: 42\n" +
		"X-Keywords: $Label1\n" +
		"Content-Length: 1234\n" +
		"Lines: 12\n"
	return append([]byte(trace), b...)
}

func TestDigestInvariance(t *testing.T) {
	files, err := filepath.Glob("testdata/*.eml")
	if err != nil || len(files) == 0 {
		t.Fatal("no fixtures", err)
	}
	variants := []struct {
		name string
		f    func([]byte) []byte
	}{
		{"crlf", toCRLF},
		{"lf", toLF},
		{"from line", func(b []byte) []byte {
			return append([]byte("From MAILER-DAEMON Mon Jan  1 00:00:00 2024\n"), skipFromLine(b)...)
		}},
		{"trace fields", func(b []byte) []byte { return prependTrace(skipFromLine(b)) }},
		{"byte order mark", func(b []byte) []byte { return append([]byte(bom), b...) }},
		{"all of them", func(b []byte) []byte {
			return toCRLF(append([]byte("From x@example.com Mon Jan  1 00:00:00 2024\n"), prependTrace(skipFromLine(b))...))
		}},
		{"trailing white space and blank lines", func(b []byte) []byte {
			b = bytes.ReplaceAll(toLF(b), []byte("\n"), []byte(" \t\n"))
			return append(b, "\n\n\r\n  \n"...)
		}},
		{"mbox quoting", func(b []byte) []byte {
			return bytes.ReplaceAll(b, []byte("\n>From "), []byte("\n>>From "))
		}},
		{"refolded subject", func(b []byte) []byte {
			return bytes.Replace(b, []byte("Subject: "), []byte("Subject:\n   "), 1)
		}},
	}
	for _, f := range files {
		raw := readFixture(t, filepath.Base(f))
		want := Digest(raw)
		for _, v := range variants {
			t.Run(filepath.Base(f)+"/"+v.name, func(t *testing.T) {
				if got := Digest(v.f(bytes.Clone(raw))); got != want {
					t.Errorf("digest changed")
				}
			})
		}
	}
}

func TestDigestDiffers(t *testing.T) {
	base := []byte("Message-ID: <1@example.com>\nDate: Mon, 1 Jan 2024 00:00:00 +0000\nFrom: a@example.com\nTo: b@example.org\nSubject: hello\n\nbody line one\nbody line two\n")
	tests := []struct{ name, old, new string }{
		{"body word", "line two", "line 2"},
		{"body line break", "one\nbody", "one body"},
		{"subject", "Subject: hello", "Subject: hallo"},
		{"message-id", "<1@", "<2@"},
		{"date", "00:00:00", "00:00:01"},
		{"from", "From: a@", "From: c@"},
		{"to", "To: b@", "To: d@"},
		{"field moved to body", "Subject: hello\n\n", "\nSubject: hello\n"},
	}
	seen := map[[32]byte]string{Digest(base): "base"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changed := bytes.Replace(base, []byte(tt.old), []byte(tt.new), 1)
			if bytes.Equal(changed, base) {
				t.Fatal("test does not change the message")
			}
			d := Digest(changed)
			if other, ok := seen[d]; ok {
				t.Errorf("same digest as %s", other)
			}
			seen[d] = tt.name
		})
	}
	files, _ := filepath.Glob("testdata/*.eml")
	for _, f := range files {
		d := Digest(readFixture(t, filepath.Base(f)))
		if other, ok := seen[d]; ok {
			t.Errorf("%s: same digest as %s", f, other)
		}
		seen[d] = f
	}
}

func TestDigestHuge(t *testing.T) {
	head := "Message-ID: <big@example.com>\nSubject: big\n\n"
	body := strings.Repeat("0123456789 abcdefghij\n", (20<<20)/22)
	a := []byte(head + body + "tail one\n")
	b := []byte(head + body + "tail two\n")
	if Digest(a) != Digest(b) {
		t.Error("bytes past DigestMaxBody changed the digest")
	}
	c := []byte(head + "different start\n" + body)
	if Digest(a) == Digest(c) {
		t.Error("bytes before DigestMaxBody did not change the digest")
	}
	if allocs := testing.AllocsPerRun(3, func() { Digest(a) }); allocs > 10 {
		t.Errorf("Digest of %d bytes made %v allocations", len(a), allocs)
	}
}

// TestMark checks that a message's mark survives what its path does to
// it, a subject tag and rewritten recipients included, and tells apart
// what makes another message.
func TestMark(t *testing.T) {
	base := []byte("Message-ID: <1@example.com>\nDate: Mon, 1 Jan 2024 00:00:00 +0000\nFrom: a@example.com\nTo: b@example.org\nSubject: hello\n\nbody line one\nbody line two\n")
	want := Mark(base)
	if want == 0 {
		t.Fatal("a message with a Message-ID has mark 0")
	}
	same := []struct{ name, old, new string }{
		{"subject tagged", "Subject: hello", "Subject: [SPAM] hello"},
		{"recipient rewritten", "To: b@", "To: list@"},
		{"trace fields", "Message-ID", "Received: from x by y; Mon, 1 Jan 2024 00:00:00 +0000\nX-Spamd-Result: spam\nMessage-ID"},
		{"crlf", "\n", "\r\n"},
	}
	for _, tt := range same {
		t.Run(tt.name, func(t *testing.T) {
			if got := Mark(bytes.ReplaceAll(base, []byte(tt.old), []byte(tt.new))); got != want {
				t.Errorf("mark %016x, want %016x", got, want)
			}
		})
	}
	differ := []struct{ name, old, new string }{
		{"body", "line two", "line 2"},
		{"message-id", "<1@", "<2@"},
		{"date", "00:00:00", "00:00:01"},
		{"from", "From: a@", "From: c@"},
	}
	for _, tt := range differ {
		t.Run(tt.name, func(t *testing.T) {
			if got := Mark(bytes.Replace(base, []byte(tt.old), []byte(tt.new), 1)); got == want {
				t.Errorf("same mark %016x", got)
			}
		})
	}
	if got := Mark([]byte("From: a@example.com\n\nno id\n")); got != 0 {
		t.Errorf("a message without a Message-ID: mark %016x, want 0", got)
	}
	if got := Mark([]byte("Message-ID:   \n\nblank id\n")); got != 0 {
		t.Errorf("a blank Message-ID: mark %016x, want 0", got)
	}
}
