package milter

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gomilter "github.com/emersion/go-milter"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/decide"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/prefs"
	"github.com/spamd/spamd/store"
)

func fp(v float64) *float64 { return &v }
func sp(v string) *string   { return &v }

// from returns msg with its From: field set to addr, and the
// Authentication-Results fields ar put first.
func from(msg parsed, addr string, ar ...string) parsed {
	var fields [][2]string
	for _, a := range ar {
		fields = append(fields, [2]string{"Authentication-Results", a})
	}
	for _, f := range msg.fields {
		if strings.EqualFold(f[0], "From") {
			f[1] = "Someone <" + addr + ">"
		}
		fields = append(fields, f)
	}
	return parsed{fields, msg.body}
}

// outcome is what a test reads of the milter's answer.
type outcome struct {
	action  string // accept, quarantine, or the SMTP reply
	flag    string // X-Spam-Flag
	status  string // X-Spam-Status
	subject string // the Subject change, "" if none
	res     decide.Result
}

func outcomeOf(t *testing.T, r reply) outcome {
	t.Helper()
	var o outcome
	switch {
	case r.act.Code == gomilter.ActReplyCode:
		return outcome{action: fmt.Sprintf("%d %s", r.act.SMTPCode, r.act.SMTPText)}
	case r.act.Code != gomilter.ActAccept:
		t.Fatalf("answer %c", r.act.Code)
	}
	o.action = "accept"
	if slices.ContainsFunc(r.mods, func(m gomilter.ModifyAction) bool { return m.Code == gomilter.ActQuarantine }) {
		o.action = "quarantine"
	}
	o.flag, _ = r.added("X-Spam-Flag")
	o.status, _ = r.added("X-Spam-Status")
	for _, c := range r.changes() {
		if s, ok := strings.CutPrefix(c, "Subject[1]="); ok {
			o.subject = s
		}
	}
	if s, ok := r.added("Subject"); ok {
		o.subject = s
	}
	o.res = r.result(t)
	return o
}

// TestPrefs sends mail through the milter with preferences at every level
// and checks what each rule and each level of precedence makes of it,
// headers included.
func TestPrefs(t *testing.T) {
	ctx := context.Background()
	f, spamRaw, hamRaw := trainedFilter(t, store.NewMemory())
	vs, err := f.Classify(ctx, "", spamRaw, filter.ClassifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vh, err := f.Classify(ctx, "", hamRaw, filter.ClassifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fc := f.Config()
	if !(vs.Score > fc.Required() && vh.Score < fc.UnsureLow-1) {
		t.Fatalf("sample scores: spam %v, ham %v", vs.Score, vh.Score)
	}
	spam, ham := parse(spamRaw), parse(hamRaw)
	spamSubject := ""
	for _, fl := range spam.fields {
		if strings.EqualFold(fl[0], "Subject") {
			spamSubject = fl[1]
		}
	}
	status := func(yes string, required float64) string {
		return fmt.Sprintf("%s, score=%%.1f required=%.1f", yes, required)
	}
	site := config.Actions{SubjectTag: "[SPAM]", RejectScore: vs.Score + 5, Reject: true,
		RejectCode: 550, RejectStatus: "5.7.1", RejectText: "Message rejected as spam"}
	file := prefs.Layer{
		Domains: map[string]config.Pref{
			"example.org": {Required: fp(vs.Score + 1), SubjectTag: sp("[DOMAIN]"), Action: "quarantine",
				Allow: []string{"*@partner.example"}},
			"strict.example": {Required: fp(vh.Score - 1), SubjectTag: sp("[STRICT]"), Action: "tag"},
			"hold.example":   {Action: "quarantine"},
		},
		Users: map[string]config.Pref{
			"alice@example.org": {Required: fp(vh.Score - 1), SubjectTag: sp("[ALICE]"), Action: "reject", RejectScore: fp(vh.Score - 0.5),
				Deny: []string{"boss@partner.example"}},
			"bob@strict.example":   {Action: "reject"},
			"carol@strict.example": {SubjectTag: sp("")},
			"carol@example.org":    {},
			"dave@strict.example":  {Action: "reject", RejectScore: fp(vs.Score + 1)},
		},
	}
	api := prefs.Layer{Users: map[string]config.Pref{"dave@strict.example": {RejectScore: fp(vs.Score - 1)}}}
	lists := config.Prefs{Deny: []string{"*@spammer.example"}, Allow: []string{"friend@partner.example"}}
	const sender = "someone@elsewhere.example"

	for _, tt := range []struct {
		name   string
		rcpts  []string
		env    string // the envelope sender
		msg    parsed
		authID string
		// What the milter must do, and say in its headers.
		action, flag, verdict, subject string
		required                       float64
		listed, by                     string
	}{
		// The site's settings: no user or domain says otherwise.
		{name: "site: spam tagged with the site's tag", rcpts: []string{"x@other.example"}, msg: spam,
			action: "accept", flag: "YES", verdict: "spam", subject: "[SPAM] " + spamSubject, required: fc.Required()},
		{name: "site: ham untouched", rcpts: []string{"x@other.example"}, msg: ham,
			action: "accept", flag: "NO", verdict: "ham", required: fc.Required()},
		// The domain's: its required score, tag and action.
		{name: "domain: required above the spam's score makes it unsure", rcpts: []string{"y@example.org"}, msg: spam,
			action: "accept", flag: "NO", verdict: "unsure", required: vs.Score + 1},
		{name: "domain: required below the ham's score makes it spam, with the domain's tag and action", rcpts: []string{"z@strict.example"}, msg: ham,
			action: "accept", flag: "YES", verdict: "spam", subject: "[STRICT] ", required: vh.Score - 1},
		{name: "domain: its action over the site's", rcpts: []string{"z@hold.example"}, msg: spam,
			action: "quarantine", flag: "YES", verdict: "spam", subject: "[SPAM] " + spamSubject, required: fc.Required()},
		// The user's, over the domain's.
		{name: "user: required, action and reject_score over the domain's", rcpts: []string{"alice@example.org"}, msg: ham,
			action: "550 5.7.1 Message rejected as spam"},
		{name: "user: action reject under the site's reject_score: tagged", rcpts: []string{"bob@strict.example"}, msg: spam,
			action: "accept", flag: "YES", verdict: "spam", subject: "[STRICT] " + spamSubject, required: vh.Score - 1},
		{name: "user: no tag over the domain's", rcpts: []string{"carol@strict.example"}, msg: ham,
			action: "accept", flag: "YES", verdict: "spam", required: vh.Score - 1},
		// The API's layer over the file's, for the same user.
		{name: "user: the API's reject_score over the file's", rcpts: []string{"dave@strict.example"}, msg: spam,
			action: "550 5.7.1 Message rejected as spam"},
		// Sender lists.
		{name: "deny: the envelope sender", rcpts: []string{"x@other.example"}, env: "bulk@spammer.example", msg: ham,
			action: "550 5.7.1 Message rejected as spam"},
		{name: "deny: a From: address", rcpts: []string{"x@hold.example"}, msg: from(ham, "news@SPAMMER.example"),
			action: "quarantine", flag: "YES", verdict: "spam", subject: "[SPAM] ", required: fc.Required(), listed: "deny", by: "global"},
		{name: "allow: the domain's, envelope and From: agreeing", rcpts: []string{"y@example.org"}, env: "news@partner.example",
			msg: from(spam, "news@partner.example"), action: "accept", flag: "NO", verdict: "ham", required: vs.Score + 1, listed: "allow", by: "domain"},
		{name: "allow: a forged From: alone is not enough", rcpts: []string{"x@other.example"}, msg: from(spam, "friend@partner.example"),
			action: "accept", flag: "YES", verdict: "spam", subject: "[SPAM] " + spamSubject, required: fc.Required()},
		{name: "allow: the site's, agreeing", rcpts: []string{"x@other.example"}, env: "friend@partner.example", msg: from(spam, "friend@partner.example"),
			action: "accept", flag: "NO", verdict: "ham", required: fc.Required(), listed: "allow", by: "global"},
		{name: "allow: unauthenticated under an authserv-id", rcpts: []string{"x@other.example"}, env: "friend@partner.example",
			msg: from(spam, "friend@partner.example"), authID: "mx.test.example",
			action: "accept", flag: "YES", verdict: "spam", subject: "[SPAM] " + spamSubject, required: fc.Required()},
		{name: "allow: authenticated by DMARC under an authserv-id", rcpts: []string{"x@other.example"}, env: "friend@partner.example",
			msg: from(spam, "friend@partner.example", "mx.test.example; dmarc=pass header.from=partner.example"), authID: "mx.test.example",
			action: "accept", flag: "NO", verdict: "ham", required: fc.Required(), listed: "allow", by: "global"},
		{name: "allow: another server's word is not taken", rcpts: []string{"x@other.example"}, env: "friend@partner.example",
			msg: from(spam, "friend@partner.example", "mx.evil.example; dmarc=pass header.from=partner.example"), authID: "mx.test.example",
			action: "accept", flag: "YES", verdict: "spam", subject: "[SPAM] " + spamSubject, required: fc.Required()},
		{name: "lists: the user's deny before the domain's allow", rcpts: []string{"alice@example.org"}, env: "boss@partner.example",
			msg: from(ham, "boss@partner.example"), action: "550 5.7.1 Message rejected as spam"},
		{name: "lists: another user of the domain gets the domain's allow", rcpts: []string{"carol@example.org"}, env: "boss@partner.example",
			msg: from(spam, "boss@partner.example"), action: "accept", flag: "NO", verdict: "ham", required: vs.Score + 1, listed: "allow", by: "domain"},
		// Several recipients: the most lenient decision stands.
		{name: "recipients: rejected for one, ham for another: ham", rcpts: []string{"alice@example.org", "x@other.example"}, msg: ham,
			action: "accept", flag: "NO", verdict: "ham", required: fc.Required()},
		{name: "recipients: held for one, tagged for another: tagged", rcpts: []string{"z@hold.example", "z@strict.example"}, msg: spam,
			action: "accept", flag: "YES", verdict: "spam", subject: "[STRICT] " + spamSubject, required: vh.Score - 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			set := testSettings(f)
			set.Actions = site
			l := lists
			l.AuthservID = tt.authID
			set.Prefs = prefs.New(prefs.SiteOf(fc.Required(), site, l), file, api)
			_, addr := startServer(t, set, nil)
			env := defaultEnvelope()
			env.rcpts, env.from = tt.rcpts, sender
			if tt.env != "" {
				env.from = tt.env
			}
			s := openSession(t, addr, env)
			defer s.Close()
			r, err := sendParsed(s, env, tt.msg)
			if err != nil {
				t.Fatal(err)
			}
			o := outcomeOf(t, r)
			if o.action != tt.action {
				t.Fatalf("action %q, want %q", o.action, tt.action)
			}
			if tt.flag == "" {
				return // rejected: no headers
			}
			if o.flag != tt.flag || o.res.Verdict != tt.verdict {
				t.Errorf("X-Spam-Flag %s, verdict %s; want %s, %s", o.flag, o.res.Verdict, tt.flag, tt.verdict)
			}
			yes := map[string]string{"YES": "Yes", "NO": "No"}[tt.flag]
			if want := fmt.Sprintf(status(yes, tt.required), o.res.Score); o.status != want {
				t.Errorf("X-Spam-Status %q, want %q", o.status, want)
			}
			if fmt.Sprintf("%.2f", o.res.Required) != fmt.Sprintf("%.2f", tt.required) {
				t.Errorf("X-Spamd-Result required=%.2f, want %.2f", o.res.Required, tt.required)
			}
			if o.res.Listed != tt.listed || o.res.By != tt.by {
				t.Errorf("X-Spamd-Result listed=%q by=%q, want %q %q", o.res.Listed, o.res.By, tt.listed, tt.by)
			}
			if !strings.HasPrefix(o.subject, tt.subject) || (tt.subject == "") != (o.subject == "") {
				t.Errorf("Subject %q, want %q…", o.subject, tt.subject)
			}
		})
	}
}

// TestListedNotAutolearned checks that mail a list decided is never
// learned from automatically, however sure the model is.
func TestListedNotAutolearned(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	f, spamRaw, _ := trainedFilter(t, st)
	vs, err := f.Classify(ctx, "", spamRaw, filter.ClassifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	set := testSettings(f)
	set.Autolearn = config.Autolearn{Enabled: true, SpamScore: vs.Score - 1, HamScore: -1e9}
	set.Prefs = prefs.New(prefs.SiteOf(f.Config().Required(), set.Actions, config.Prefs{Deny: []string{"*@spammer.example"}, Allow: []string{"*@partner.example"}}),
		prefs.Layer{}, prefs.Layer{})
	_, addr := startServer(t, set, nil)
	for _, sender := range []string{"a@spammer.example", "a@partner.example", "a@elsewhere.example"} {
		env := defaultEnvelope()
		env.from = sender
		s := openSession(t, addr, env)
		r, err := sendParsed(s, env, from(parse(spamRaw), sender))
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		res := r.result(t)
		listed := sender != "a@elsewhere.example"
		if learned := res.Learned != ""; learned == listed {
			t.Errorf("from %s: listed=%q learned=%q", sender, res.Listed, res.Learned)
		}
		if seen, _ := st.Seen(ctx, "user@test.example", res.Signature); (seen != "") == listed {
			t.Errorf("from %s: seen record %q", sender, seen)
		}
	}
}

// TestLogLine checks that the line logged per message names the sender,
// the recipients and the user whose decision stood, with numbers rounded.
func TestLogLine(t *testing.T) {
	f, spamRaw, _ := trainedFilter(t, store.NewMemory())
	var buf syncBuffer
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(testSettings(f), slog.New(slog.NewTextHandler(&buf, nil)), nil)
	go s.Serve(ln)
	defer s.Shutdown(context.Background())
	env := defaultEnvelope()
	env.from, env.rcpts = "bulk@sender.example", []string{"<Alice@Test.example>", "bob@test.example"}
	sendOne(t, ln.Addr().String(), env, spamRaw)
	env.from = ""
	sendOne(t, ln.Addr().String(), env, spamRaw)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("logged:\n%s", buf.String())
	}
	for _, want := range []string{`sender=bulk@sender.example`, `rcpts="[Alice@Test.example bob@test.example]"`,
		`user=alice@test.example`, `model=global`, `verdict=spam`, `queue_id=4ABCDEF`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("no %s in %s", want, lines[0])
		}
	}
	if !strings.Contains(lines[1], "sender=<>") {
		t.Errorf("the null sender is not <>: %s", lines[1])
	}
	for _, key := range []string{"p", "score", "required"} {
		_, after, _ := strings.Cut(lines[0], " "+key+"=")
		v, _, _ := strings.Cut(after, " ")
		if digits := strings.TrimLeft(strings.NewReplacer(".", "", "-", "").Replace(v), "0"); len(digits) > 3 {
			t.Errorf("%s=%s has more than three significant digits", key, v)
		}
	}
}

func TestRound(t *testing.T) {
	for _, tt := range []struct {
		x, want float64
	}{{0.999998, 1}, {3.80254639, 3.8}, {-12.3456, -12.3}, {0.000123456, 0.000123}, {1234.5, 1230}, {0, 0}} {
		if got := sig3(tt.x); got != tt.want {
			t.Errorf("sig3(%v) = %v, want %v", tt.x, got, tt.want)
		}
	}
	for _, tt := range []struct{ d, want time.Duration }{
		{1234567, 1230000}, {999, 999}, {12345678901, 12300000000}, {0, 0},
	} {
		if got := round3(tt.d); got != tt.want {
			t.Errorf("round3(%v) = %v, want %v", tt.d, got, tt.want)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
