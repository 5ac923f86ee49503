package milter

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"testing"

	gomilter "github.com/emersion/go-milter"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/decide"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/store"
)

// newsletter returns the i-th message of a shop's weekly newsletter:
// mail a user asked for, neither spam nor the ham of people writing.
func newsletter(i int) []byte {
	return fmt.Appendf(nil, "From: Gadget Shop News <news@gadgetshop.example>\n"+
		"To: user@test.example\nSubject: Gadget Shop weekly digest no. %d\n"+
		"List-Unsubscribe: <https://gadgetshop.example/unsubscribe>\n"+
		"List-Id: weekly.gadgetshop.example\nMessage-ID: <digest-%d@gadgetshop.example>\n\n"+
		"This week at Gadget Shop: new arrivals in headphones, chargers and cables.\n"+
		"Read the reviews of the month, and the store events near you.\n"+
		"Issue %d. You receive this digest because you subscribed at gadgetshop.example.\n"+
		"Unsubscribe or manage your preferences: https://gadgetshop.example/unsubscribe\n", i, i, i)
}

// threeClassFilter returns a filter of ham, spam and newsletter over a
// memory store trained on the sample and a dozen newsletters, and a
// newsletter it has not seen.
func threeClassFilter(t *testing.T) (*filter.Filter, []byte) {
	t.Helper()
	cfg := filter.DefaultConfig()
	if err := cfg.Set("classes", "ham+spam+newsletter"); err != nil {
		t.Fatal(err)
	}
	s := loadSample(t)
	f, err := filter.New(store.NewMemory(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range max(len(s.spam), len(s.ham)) {
		for _, m := range []struct {
			raw   []byte
			class string
		}{{s.spam[i], filter.Spam}, {s.ham[i], filter.Ham}, {newsletter(i), "newsletter"}} {
			if _, err := f.Learn(ctx, "", m.raw, m.class); err != nil {
				t.Fatal(err)
			}
		}
	}
	return f, newsletter(100)
}

// TestClassActions checks that a message of a class beyond spam and ham
// carries its class in X-Spamd-Class, gets the action [actions] classes
// maps it to, and is not spam to the SpamAssassin-compatible headers.
func TestClassActions(t *testing.T) {
	f, news := threeClassFilter(t)
	for _, tt := range []struct {
		action string
		check  func(t *testing.T, r reply)
	}{
		{"", func(t *testing.T, r reply) {
			if r.act.Code != gomilter.ActAccept || len(r.changes()) > 0 {
				t.Errorf("action %c, changes %q: want accepted untouched", r.act.Code, r.changes())
			}
		}},
		{"accept", func(t *testing.T, r reply) {
			if r.act.Code != gomilter.ActAccept {
				t.Errorf("action %c, want accept", r.act.Code)
			}
		}},
		{"tag", func(t *testing.T, r reply) {
			if c := r.changes(); len(c) != 1 || !strings.HasPrefix(c[0], "Subject[1]=[NEWS] Gadget Shop") {
				t.Errorf("changes %q, want the Subject tagged", c)
			}
		}},
		{"quarantine", func(t *testing.T, r reply) {
			quarantined := false
			for _, m := range r.mods {
				quarantined = quarantined || m.Code == gomilter.ActQuarantine
			}
			if !quarantined || r.act.Code != gomilter.ActAccept {
				t.Errorf("quarantined %v, action %c: want quarantined", quarantined, r.act.Code)
			}
		}},
		{"reject", func(t *testing.T, r reply) {
			if r.act.Code != gomilter.ActReplyCode || r.act.SMTPCode != 550 || !strings.HasPrefix(r.act.SMTPText, "5.7.1 ") {
				t.Errorf("answer %+v, want 550 5.7.1", r.act)
			}
			if len(r.mods) != 0 {
				t.Errorf("a rejected message was changed: %+v", r.mods)
			}
		}},
	} {
		t.Run(cmp.Or(tt.action, "no entry"), func(t *testing.T) {
			set := testSettings(f)
			set.Actions.SubjectTag = "[NEWS]"
			set.Actions.Classes = map[string]string{}
			if tt.action != "" {
				set.Actions.Classes["newsletter"] = tt.action
			}
			rec := &recorder{}
			_, addr := startServer(t, set, rec)
			r := sendOne(t, addr, defaultEnvelope(), news)
			tt.check(t, r)
			if tt.action == "reject" {
				return
			}
			if v, _ := r.added(decide.ClassHeader); v != "newsletter" {
				t.Errorf("%s %q, want newsletter", decide.ClassHeader, v)
			}
			if v, _ := r.added("X-Spam-Flag"); v != "NO" {
				t.Errorf("X-Spam-Flag %q: a newsletter is not spam", v)
			}
			if res := r.result(t); res.Verdict != "newsletter" || res.Score >= 0 {
				t.Errorf("result %+v, want newsletter with a negative spam score", res)
			}
			if len(rec.messages) != 1 || !strings.HasPrefix(rec.messages[0], "newsletter/") {
				t.Errorf("observed %q", rec.messages)
			}
		})
	}
	// Spam and ham keep their handling.
	set := testSettings(f)
	set.Actions.Classes = map[string]string{"newsletter": "reject"}
	_, addr := startServer(t, set, nil)
	s := loadSample(t)
	for _, m := range []struct {
		raw   []byte
		class string
	}{{s.spam[0], "spam"}, {s.ham[0], "ham"}} {
		r := sendOne(t, addr, defaultEnvelope(), m.raw)
		if v, _ := r.added(decide.ClassHeader); r.act.Code != gomilter.ActAccept || v != m.class {
			t.Errorf("%s: action %c, class %q", m.class, r.act.Code, v)
		}
	}
}

func TestValidActions(t *testing.T) {
	fc := filter.DefaultConfig()
	if err := decide.ValidActions(config.Actions{Classes: map[string]string{"spam": "reject"}}, fc); err != nil {
		t.Error(err)
	}
	if err := decide.ValidActions(config.Actions{Classes: map[string]string{"newsletter": "tag"}}, fc); err == nil || !strings.Contains(err.Error(), "newsletter") {
		t.Errorf("a class the filter does not have: %v", err)
	}
}

// TestAutolearnLeavesOtherClasses checks that a message far from spam is
// autolearned as ham only when it was decided ham: a newsletter is not.
func TestAutolearnLeavesOtherClasses(t *testing.T) {
	f, news := threeClassFilter(t)
	set := testSettings(f)
	set.Autolearn = config.Autolearn{Enabled: true, SpamScore: 5, HamScore: -5}
	_, addr := startServer(t, set, nil)
	r := sendOne(t, addr, defaultEnvelope(), news)
	if res := r.result(t); res.Verdict != "newsletter" || res.Score > set.Autolearn.HamScore || res.Learned != "" {
		t.Errorf("result %+v: want a newsletter scored under ham_score, not learned", res)
	}
	users, err := f.Store().Users(context.Background())
	if err != nil || len(users) != 1 {
		t.Errorf("models %q (%v): autolearn trained one", users, err)
	}
}
