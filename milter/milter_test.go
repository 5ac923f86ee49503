package milter

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"

	gomilter "github.com/emersion/go-milter"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/decide"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/tokenize"
)

// newFilter returns a filter with the default settings over st.
func newFilter(t *testing.T, st store.Store) *filter.Filter {
	t.Helper()
	f, err := filter.New(st, filter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// withFilter returns f's store under a filter with the settings sets.
func withFilter(t *testing.T, f *filter.Filter, sets map[string]string) *filter.Filter {
	t.Helper()
	c := f.Config()
	for k, v := range sets {
		if err := c.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	g, err := filter.New(f.Store(), c)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestActions(t *testing.T) {
	f, spam, ham := trainedFilter(t, store.NewMemory())
	hamFields, _ := splitMessage(ham)
	spamFields, _ := splitMessage(spam)
	subject := func(fields [][2]string) string {
		for _, f := range fields {
			if strings.EqualFold(f[0], "Subject") {
				return f[1]
			}
		}
		return ""
	}
	accepted := func(t *testing.T, r reply) {
		t.Helper()
		if r.act.Code != gomilter.ActAccept {
			t.Fatalf("action %c, want accept", r.act.Code)
		}
	}
	classified := func(t *testing.T, r reply, flag, verdict string, raw []byte) {
		t.Helper()
		accepted(t, r)
		if v, _ := r.added("X-Spam-Flag"); v != flag {
			t.Errorf("X-Spam-Flag %q, want %q", v, flag)
		}
		status, _ := r.added("X-Spam-Status")
		if want := map[string]string{"YES": "Yes, score=", "NO": "No, score="}[flag]; !strings.HasPrefix(status, want) || !strings.Contains(status, " required=") {
			t.Errorf("X-Spam-Status %q, want %q…required=…", status, want)
		}
		for _, h := range []string{"X-Spam-Score", "X-Spam-Level"} {
			if _, ok := r.added(h); !ok {
				t.Errorf("no %s", h)
			}
		}
		res := r.result(t)
		if res.Verdict != verdict {
			t.Errorf("verdict %s, want %s", res.Verdict, verdict)
		}
		if d := tokenize.Digest(raw); res.Signature != d {
			t.Errorf("signature %x, want the digest of the message %x", res.Signature, d)
		}
		if len(res.Spammy) == 0 || len(res.Hammy) == 0 {
			t.Errorf("no tokens explained: %+v", res)
		}
		if score, _ := r.added("X-Spam-Score"); verdict == "spam" && !strings.HasPrefix(score, "-") {
			if level, _ := r.added("X-Spam-Level"); res.Score >= 1 && level == "" {
				t.Errorf("score %s but no stars", score)
			}
		}
	}
	skipped := func(reason string) func(t *testing.T, r reply) {
		return func(t *testing.T, r reply) {
			t.Helper()
			accepted(t, r)
			if res := r.result(t); res.Verdict != decide.Skipped || res.Reason != reason {
				t.Errorf("result %+v, want skipped for %s", res, reason)
			}
			if _, ok := r.added("X-Spam-Flag"); ok {
				t.Error("a skipped message got X-Spam-Flag")
			}
		}
	}
	for _, tt := range []struct {
		name  string
		raw   []byte
		set   func(s *Settings)
		env   func(e *envelope)
		check func(t *testing.T, r reply)
	}{
		{name: "ham accepted with headers", raw: ham,
			check: func(t *testing.T, r reply) { classified(t, r, "NO", "ham", ham) }},
		{name: "spam accepted with headers", raw: spam,
			check: func(t *testing.T, r reply) { classified(t, r, "YES", "spam", spam) }},
		{name: "spam quarantined", raw: spam, set: func(s *Settings) { s.Actions.QuarantineSpam = true },
			check: func(t *testing.T, r reply) {
				classified(t, r, "YES", "spam", spam)
				if !slices.ContainsFunc(r.mods, func(m gomilter.ModifyAction) bool {
					return m.Code == gomilter.ActQuarantine && strings.Contains(m.Reason, "spam")
				}) {
					t.Errorf("not quarantined: %+v", r.mods)
				}
			}},
		{name: "ham not quarantined", raw: ham, set: func(s *Settings) { s.Actions.QuarantineSpam = true },
			check: func(t *testing.T, r reply) {
				classified(t, r, "NO", "ham", ham)
				if slices.ContainsFunc(r.mods, func(m gomilter.ModifyAction) bool { return m.Code == gomilter.ActQuarantine }) {
					t.Error("ham quarantined")
				}
			}},
		{name: "unsure quarantined", raw: ham, set: func(s *Settings) {
			s.Filter = withFilter(t, f, map[string]string{"unsure_low": "-1e9", "unsure_high": "1e9"})
			s.Actions.QuarantineUnsure = true
		}, check: func(t *testing.T, r reply) {
			classified(t, r, "NO", "unsure", ham)
			if !slices.ContainsFunc(r.mods, func(m gomilter.ModifyAction) bool { return m.Code == gomilter.ActQuarantine }) {
				t.Errorf("not quarantined: %+v", r.mods)
			}
			if status, _ := r.added("X-Spam-Status"); !strings.HasSuffix(status, "required=1000000000.0") {
				t.Errorf("X-Spam-Status %q does not require the top of the unsure band", status)
			}
		}},
		{name: "spam rejected with the configured reply", raw: spam, set: func(s *Settings) {
			s.Actions.Reject, s.Actions.RejectScore = true, 0
			s.Actions.RejectCode, s.Actions.RejectStatus, s.Actions.RejectText = 554, "5.7.0", "No thanks"
		}, check: func(t *testing.T, r reply) {
			if r.act.Code != gomilter.ActReplyCode || r.act.SMTPCode != 554 || r.act.SMTPText != "5.7.0 No thanks" {
				t.Errorf("answer %+v, want 554 5.7.0 No thanks", r.act)
			}
			if len(r.mods) != 0 {
				t.Errorf("a rejected message was changed: %+v", r.mods)
			}
		}},
		{name: "spam under reject_score tagged", raw: spam, set: func(s *Settings) {
			s.Actions.Reject, s.Actions.RejectScore = true, 1e9
		}, check: func(t *testing.T, r reply) { classified(t, r, "YES", "spam", spam) }},
		{name: "ham not rejected", raw: ham, set: func(s *Settings) { s.Actions.Reject, s.Actions.RejectScore = true, -1e9 },
			check: func(t *testing.T, r reply) { classified(t, r, "NO", "ham", ham) }},
		{name: "spam subject tagged", raw: spam, set: func(s *Settings) { s.Actions.SubjectTag = "[SPAM]" },
			check: func(t *testing.T, r reply) {
				classified(t, r, "YES", "spam", spam)
				want := "Subject[1]=[SPAM] " + subject(spamFields)
				if !slices.Contains(r.changes(), want) {
					t.Errorf("changes %q, want %q", r.changes(), want)
				}
			}},
		{name: "ham subject untouched", raw: ham, set: func(s *Settings) { s.Actions.SubjectTag = "[SPAM]" },
			check: func(t *testing.T, r reply) {
				classified(t, r, "NO", "ham", ham)
				for _, c := range r.changes() {
					if strings.HasPrefix(c, "Subject") {
						t.Errorf("ham subject changed: %s (was %q)", c, subject(hamFields))
					}
				}
			}},
		{name: "authenticated sender skipped", raw: spam, env: func(e *envelope) { e.auth = "bob" },
			check: skipped(decide.ReasonAuthenticated)},
		{name: "authenticated sender classified when asked", raw: spam,
			set: func(s *Settings) { s.Milter.SkipAuthenticated = false }, env: func(e *envelope) { e.auth = "bob" },
			check: func(t *testing.T, r reply) { classified(t, r, "YES", "spam", spam) }},
		{name: "trusted network skipped", raw: spam,
			set:   func(s *Settings) { s.Milter.TrustedNetworks = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")} },
			check: skipped(decide.ReasonTrusted)},
		{name: "other network classified", raw: spam,
			set:   func(s *Settings) { s.Milter.TrustedNetworks = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")} },
			check: func(t *testing.T, r reply) { classified(t, r, "YES", "spam", spam) }},
		{name: "oversize skipped", raw: spam, set: func(s *Settings) { s.Milter.MaxSize = 1000 },
			check: skipped(decide.ReasonSize)},
		{name: "prefix classified", raw: spam, set: func(s *Settings) { s.Milter.ClassifyBytes = 1024 },
			check: func(t *testing.T, r reply) {
				accepted(t, r)
				if res := r.result(t); res.Signature == tokenize.Digest(spam) {
					t.Error("the whole message was classified, not its prefix")
				}
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			set := testSettings(f)
			if tt.set != nil {
				tt.set(set)
			}
			env := defaultEnvelope()
			if tt.env != nil {
				tt.env(&env)
			}
			rec := &recorder{}
			_, addr := startServer(t, set, rec)
			tt.check(t, sendOne(t, addr, env, tt.raw))
			if len(rec.messages) != 1 {
				t.Errorf("observed %q, want one message", rec.messages)
			}
		})
	}
}

// brokenStore fails or panics on Lookup.
type brokenStore struct {
	store.Store
	panics bool
}

var errDisk = errors.New("disk on fire")

func (b brokenStore) Lookup(ctx context.Context, user string, hashes []bow.Hash) ([]store.Counts, error) {
	if b.panics {
		panic("lookup exploded")
	}
	return nil, errDisk
}

// forged adds forged X-Spam headers to raw after its first line.
func forged(raw []byte) []byte {
	fields, body := splitMessage(raw)
	var b bytes.Buffer
	b.WriteString("X-Spam-Flag: YES\r\nReceived: from x by y\r\nx-spam-flag: NO\r\nX-Spamd-Result: ham; p=0.000000; score=-99.00; required=0.00; sig=00\r\nX-Spam-Status: No, score=-5.0\r\n")
	for _, f := range fields {
		b.WriteString(f[0] + ": " + strings.ReplaceAll(f[1], "\n", "\r\n") + "\r\n")
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

func TestInternalErrors(t *testing.T) {
	f, spam, _ := trainedFilter(t, store.NewMemory())
	for _, tt := range []struct {
		name    string
		panics  bool
		onError string
		kind    string
	}{
		{"error accepted", false, "accept", "classify"},
		{"error tempfailed", false, "tempfail", "classify"},
		{"panic accepted", true, "accept", "panic"},
		{"panic tempfailed", true, "tempfail", "panic"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			set := testSettings(f)
			set.Filter = newFilter(t, brokenStore{Store: f.Store(), panics: tt.panics})
			set.Actions.OnError = tt.onError
			rec := &recorder{}
			_, addr := startServer(t, set, rec)
			r := sendOne(t, addr, defaultEnvelope(), forged(spam))
			if n := rec.errorCount(tt.kind); n != 1 {
				t.Errorf("%d %s errors counted, want 1", n, tt.kind)
			}
			if len(rec.messages) != 1 || !strings.HasPrefix(rec.messages[0], "error/") {
				t.Errorf("observed %q, want one error", rec.messages)
			}
			switch tt.onError {
			case "tempfail":
				if r.act.Code != gomilter.ActReplyCode || r.act.SMTPCode != 451 || !strings.HasPrefix(r.act.SMTPText, "4.7.1 ") {
					t.Errorf("answer %+v, want 451 4.7.1", r.act)
				}
			case "accept":
				if r.act.Code != gomilter.ActAccept {
					t.Fatalf("answer %+v, want accept", r.act)
				}
				// A store that fails or panics alike: the message is
				// delivered without its forged fields.
				if res := r.result(t); res.Verdict != decide.Skipped || res.Reason != decide.ReasonError {
					t.Errorf("result %+v, want skipped for error", res)
				}
				if want := []string{"X-Spam-Flag[1]=", "X-Spam-Flag[2]=", "X-Spam-Status[1]=", "X-Spamd-Result[1]="}; !slices.Equal(r.changes(), want) {
					t.Errorf("changes %q, want the forged headers removed: %q", r.changes(), want)
				}
			}
		})
	}
}

// TestForgedHeadersRemovedWhenSkipped checks that a message left
// unclassified is delivered without its forged fields, whatever the rule
// that skipped it.
func TestForgedHeadersRemovedWhenSkipped(t *testing.T) {
	f, spam, _ := trainedFilter(t, store.NewMemory())
	for _, tt := range []struct {
		name   string
		set    func(*Settings)
		auth   string
		reason string
	}{
		{"trusted network", func(s *Settings) {
			s.Milter.TrustedNetworks = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}
		}, "", decide.ReasonTrusted},
		{"authenticated", nil, "alice", decide.ReasonAuthenticated},
		{"too large", func(s *Settings) { s.Milter.MaxSize = 100 }, "", decide.ReasonSize},
	} {
		t.Run(tt.name, func(t *testing.T) {
			set := testSettings(f)
			if tt.set != nil {
				tt.set(set)
			}
			_, addr := startServer(t, set, &recorder{})
			env := defaultEnvelope()
			env.auth = tt.auth
			r := sendOne(t, addr, env, forged(spam))
			if r.act.Code != gomilter.ActAccept {
				t.Fatalf("answer %+v, want accept", r.act)
			}
			if res := r.result(t); res.Verdict != decide.Skipped || res.Reason != tt.reason {
				t.Errorf("result %+v, want skipped for %s", res, tt.reason)
			}
			if want := []string{"X-Spam-Flag[1]=", "X-Spam-Flag[2]=", "X-Spam-Status[1]=", "X-Spamd-Result[1]="}; !slices.Equal(r.changes(), want) {
				t.Errorf("changes %q, want the forged headers removed: %q", r.changes(), want)
			}
		})
	}
}

// TestPanicWithoutReply checks that a panic in a callback the MTA expects
// no answer to gives the message the failure action at its end.
func TestPanicWithoutReply(t *testing.T) {
	f, _, _ := trainedFilter(t, store.NewMemory())
	for _, tt := range []struct {
		name    string
		started bool // the panic comes in a message, not at connect
	}{{"in a message", true}, {"at connect", false}} {
		t.Run(tt.name, func(t *testing.T) {
			set := testSettings(f)
			set.Actions.OnError = "tempfail"
			rec := &recorder{}
			s := New(set, slog.New(slog.DiscardHandler), rec)
			m := &message{c: &conn{srv: s}}
			if tt.started {
				m.begin()
			}
			// A callback that panics, guarded as the callbacks are.
			func() {
				defer m.note("header")
				panic("boom")
			}()
			if rec.errorCount("panic") != 1 {
				t.Error("the panic was not counted")
			}
			resp, err := m.Body(&gomilter.Modifier{})
			if err != nil {
				t.Fatal(err)
			}
			if msg := resp.Response(); gomilter.ActionCode(msg.Code) != gomilter.ActReplyCode || !strings.HasPrefix(string(msg.Data), "451 4.7.1 ") {
				t.Errorf("answer %c %q, want 451 4.7.1", msg.Code, msg.Data)
			}
			if len(rec.messages) != 1 || rec.messages[0] != "error/tempfail" {
				t.Errorf("observed %q", rec.messages)
			}
		})
	}
}
