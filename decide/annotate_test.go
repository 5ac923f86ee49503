package decide

import (
	"strings"
	"testing"

	"github.com/spamd/spamd/tokenize"
)

func TestAnnotate(t *testing.T) {
	const msg = "From: a@example.net\nTo: b@example.org\nSubject: cheap pills\nX-Spam-Flag: NO\nX-Spamd-Result: ham; p=0.000001; score=-9; required=3; sig=00\n\nbuy now\n"
	const clean = "From: a@example.net\nTo: b@example.org\nSubject: cheap pills\n\nbuy now\n"
	r := Result{Verdict: "spam", Probability: 0.99, Score: 4.6, Required: 3, Signature: tokenize.Digest([]byte(clean))}
	tests := []struct {
		name  string
		raw   string
		spam  bool
		tag   string
		wants []string
		not   []string
	}{
		{"spam, tagged", msg, true, "[SPAM]", []string{"Subject: [SPAM] cheap pills\n", "X-Spam-Flag: YES\n", "X-Spam-Status: Yes, score=4.6 required=3.0\n", "X-Spam-Level: ****\n", "fields=3", "\n\nbuy now\n"},
			[]string{"X-Spam-Flag: NO", "ham; p="}},
		{"ham, not tagged", msg, false, "[SPAM]", []string{"Subject: cheap pills\n", "X-Spam-Flag: NO\n"}, []string{"[SPAM]"}},
		{"spam without a subject", "From: a@example.net\n\nbody\n", true, "[SPAM]", []string{"Subject: [SPAM]\n"}, nil},
		{"CRLF", strings.ReplaceAll(msg, "\n", "\r\n"), true, "", []string{"X-Spam-Flag: YES\r\n", "\r\n\r\nbuy now\r\n"}, []string{"X-Spam-Flag: NO"}},
		{"no header", "just text\n", true, "", []string{"X-Spam-Flag: YES\n", "\njust text\n"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			class, tag := "ham", ""
			if tt.spam {
				class, tag = "spam", tt.tag
			}
			got := string(annotate(tt.raw, r, class, tt.spam, tag))
			if !strings.Contains(got, "X-Spamd-Class: "+class) {
				t.Errorf("no X-Spamd-Class: %s in\n%s", class, got)
			}
			for _, w := range tt.wants {
				if !strings.Contains(got, w) {
					t.Errorf("no %q in\n%s", w, got)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(got, n) {
					t.Errorf("%q in\n%s", n, got)
				}
			}
		})
	}
	// What Annotate delivers, Original takes back to the message.
	if orig, ok := Original(annotate(msg, r, "spam", true, "[SPAM]"), "[SPAM]"); !ok || string(orig) != clean {
		t.Errorf("Original of the annotated message: %v %q", ok, orig)
	}
}

// annotate annotates raw with the headers of a decision of class, with
// the result r and the Subject tag tag.
func annotate(raw string, r Result, class string, spam bool, tag string) []byte {
	r.Fields = Fields([]byte(raw))
	d := Decision{Verdict: class, Spam: spam, Class: class, Result: r, Tag: tag != "", SubjectTag: tag}
	return Annotate([]byte(raw), d.Headers(), d.SubjectTag)
}
