package decide

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spamd/spamd/tokenize"
)

// deliveredCopy returns what a mailbox holds of orig after the milter judged
// it verdict: above it what the delivery agent adds, below its header
// the milter's fields, and edit applied to the rest (a tagged Subject).
func deliveredCopy(orig, verdict string, fields int, edit func(string) string) []byte {
	head, body, _ := strings.Cut(orig, "\n\n")
	r := Result{Verdict: verdict, Probability: 0.99, Score: 5, Signature: tokenize.Digest([]byte(orig)), Fields: fields}
	return []byte("Return-Path: <sender@example.net>\nDelivered-To: alice@example.org\n" +
		"Received: from mx.example.org by imap.example.org with LMTP; Mon, 1 Jan 2024 00:00:01 +0000\n" +
		edit(head) + "\nX-Spam-Flag: YES\nX-Spam-Status: Yes, score=5.00 required=3.00\n" +
		ResultHeader + ": " + r.String() + "\n\n" + body)
}

func TestOriginal(t *testing.T) {
	const orig = "Received: from client.example.net by mx.example.org; Mon, 1 Jan 2024 00:00:00 +0000\n" +
		"From: sender@example.net\nTo: alice@example.org\nSubject: cheap pills\n" +
		"Message-ID: <1@example.net>\nDate: Mon, 1 Jan 2024 00:00:00 +0000\n\nbuy now\n"
	const noSubject = "From: sender@example.net\nTo: alice@example.org\nMessage-ID: <2@example.net>\n\nbuy now\n"
	same := func(h string) string { return h }
	tag := func(h string) string { return strings.Replace(h, "Subject: ", "Subject: [SPAM] ", 1) }
	tests := []struct {
		name   string
		raw    []byte
		tag    string
		want   string
		wantOK bool
	}{
		{"added fields", deliveredCopy(orig, "spam", 6, same), "", orig, true},
		{"tagged subject", deliveredCopy(orig, "spam", 6, tag), "[SPAM]", orig, true},
		{"tag added as the subject", deliveredCopy(noSubject, "spam", 3, func(h string) string { return h + "\nSubject: [SPAM]" }), "[SPAM]", noSubject, true},
		{"ham is never tagged", deliveredCopy(orig, "ham", 6, same), "[SPAM]", orig, true},
		// A class [actions] classes tags, and one it does not, whose
		// subject happens to start like the tag.
		{"tagged newsletter", deliveredCopy(orig, "newsletter", 6, tag), "[SPAM]", orig, true},
		{"newsletter not tagged", deliveredCopy(strings.Replace(orig, "Subject: ", "Subject: [SPAM] ", 1), "newsletter", 6, same), "[SPAM]",
			strings.Replace(orig, "Subject: ", "Subject: [SPAM] ", 1), true},
		{"CRLF", bytes.ReplaceAll(deliveredCopy(orig, "spam", 6, tag), []byte("\n"), []byte("\r\n")), "[SPAM]", strings.ReplaceAll(orig, "\n", "\r\n"), true},
		{"tag changed since", deliveredCopy(orig, "spam", 6, tag), "***SPAM***", "", false},
		{"body changed", bytes.Replace(deliveredCopy(orig, "spam", 6, same), []byte("buy now"), []byte("buy later"), 1), "", "", false},
		{"fields unknown", deliveredCopy(orig, "spam", 0, same), "", "", false},
		{"more fields than the copy has", deliveredCopy(orig, "spam", 40, same), "", "", false},
		{"no result", []byte(orig), "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Original(tt.raw, tt.tag)
			if ok != tt.wantOK {
				t.Fatalf("ok %v, want %v; got %q", ok, tt.wantOK, got)
			}
			if !ok {
				if !bytes.Equal(got, tt.raw) {
					t.Error("not ok, but the message changed")
				}
				return
			}
			if string(got) != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func FuzzOriginal(f *testing.F) {
	f.Add(deliveredCopy("From: a@b.example\nSubject: hi\n\nbody\n", "spam", 2, func(h string) string { return h }), "[SPAM]")
	f.Add([]byte("Subject: x\n\n"), "")
	f.Fuzz(func(t *testing.T, raw []byte, tag string) {
		got, ok := Original(raw, tag)
		if !ok {
			if !bytes.Equal(got, raw) {
				t.Fatal("not ok, but the message changed")
			}
			return
		}
		// What is given as the original is the message the result
		// signed.
		if res, err := ResultOf(raw); err != nil || tokenize.Digest(got) != res.Signature {
			t.Fatalf("ok, but %q is not the message %q signed (%v)", got, raw, err)
		}
	})
}
