package milter

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/spamd/spamd/decide"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/history"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/tokenize"
)

// TestHistory checks what the milter records of each message: the
// envelope, the verdict with its features, the users of the recipients
// and the models that judged, and the classified bytes of a classified
// message only.
func TestHistory(t *testing.T) {
	st := store.NewMemory()
	f, spam, ham := trainedFilter(t, st)
	// carol has a model of her own; the others are judged by the global
	// one.
	if _, err := f.Learn(context.Background(), "carol", ham, filter.Ham); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		raw   []byte
		set   func(*Settings)
		env   func(*envelope)
		check func(t *testing.T, e history.Entry, msg []byte)
	}{
		{name: "spam", raw: spam, check: func(t *testing.T, e history.Entry, msg []byte) {
			_, body := splitMessage(spam)
			switch {
			case e.Verdict != "spam" || e.Action != "accept" || !(e.Probability > 0.5) || e.Score < e.Required:
				t.Errorf("verdict %s %v p=%v score %v required %v", e.Verdict, e.Action, e.Probability, e.Score, e.Required)
			case e.Sender != "sender@example.net" || fmt.Sprint(e.Recipients) != "[user@test.example]" || fmt.Sprint(e.Users) != "[user@test.example]":
				t.Errorf("envelope %q %v %v", e.Sender, e.Recipients, e.Users)
			case e.QueueID != "4ABCDEF" || e.Client != "198.51.100.7" || e.Subject == "" || e.MessageID == "":
				t.Errorf("queue %q client %q subject %q message-id %q", e.QueueID, e.Client, e.Subject, e.MessageID)
			case fmt.Sprint(e.Models) != "[]" || e.Model != "":
				t.Errorf("models %q, model %q; want the global one", e.Models, e.Model)
			case len(e.Toward["spam"]) == 0 || len(e.Toward["ham"]) == 0 || e.Toward["spam"][0].Name == "" || e.Toward["spam"][0].Weight <= 0:
				t.Errorf("features %+v", e.Toward)
			case !e.Held || !bytes.HasSuffix(msg, body):
				t.Errorf("held %v, message of %d bytes", e.Held, len(msg))
			case history.Digest(tokenize.Digest(msg)) != e.Digest:
				t.Error("the digest is not the held message's")
			case e.Size <= 0 || e.ElapsedMS <= 0:
				t.Errorf("size %d elapsed %v", e.Size, e.ElapsedMS)
			}
		}},
		{name: "rejected", raw: spam, set: func(s *Settings) { s.Actions.Reject, s.Actions.RejectScore = true, 0 },
			check: func(t *testing.T, e history.Entry, _ []byte) {
				if e.Verdict != "spam" || e.Action != "reject" || !strings.HasPrefix(e.Reply, "550 5.7.1 ") {
					t.Errorf("%s %s %q", e.Verdict, e.Action, e.Reply)
				}
			}},
		{name: "several recipients and models", raw: ham,
			env: func(e *envelope) { e.rcpts = []string{"<Carol@Example.org>", "dave@example.org"} },
			set: func(s *Settings) { s.Milter.Users = "localpart" },
			check: func(t *testing.T, e history.Entry, _ []byte) {
				if fmt.Sprint(e.Users) != "[carol dave]" || fmt.Sprintf("%q", e.Models) != `["carol" ""]` {
					t.Errorf("users %q models %q", e.Users, e.Models)
				}
				if !e.Belongs("dave") || !e.Belongs("carol") || e.Belongs("user") {
					t.Error("Belongs")
				}
			}},
		{name: "null sender, global users", raw: ham,
			env: func(e *envelope) { e.from = "<>" },
			set: func(s *Settings) { s.Milter.Users = "global" },
			check: func(t *testing.T, e history.Entry, _ []byte) {
				if e.Sender != "" || e.Users != nil {
					t.Errorf("sender %q users %q", e.Sender, e.Users)
				}
			}},
		{name: "skipped", raw: ham, env: func(e *envelope) { e.auth = "alice" },
			check: func(t *testing.T, e history.Entry, msg []byte) {
				if e.Verdict != decide.Skipped || e.Reason != decide.ReasonAuthenticated || e.Held || msg != nil || e.Toward != nil || e.Classified() {
					t.Errorf("%+v held %d bytes", e, len(msg))
				}
			}},
		{name: "no explanation", raw: spam, set: func(s *Settings) { s.Milter.Explain = 0 },
			check: func(t *testing.T, e history.Entry, _ []byte) {
				if e.Toward != nil || e.Verdict != "spam" {
					t.Errorf("%s features %+v", e.Verdict, e.Toward)
				}
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, err := history.New(history.Options{Size: 10, MaxMessageBytes: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			set := testSettings(f)
			set.History = h
			if tt.set != nil {
				tt.set(set)
			}
			_, addr := startServer(t, set, nil)
			env := defaultEnvelope()
			if tt.env != nil {
				tt.env(&env)
			}
			sendOne(t, addr, env, tt.raw)
			es := h.List(history.Query{})
			if len(es) != 1 {
				t.Fatalf("%d entries", len(es))
			}
			e, msg, _ := h.Get(es[0].ID)
			tt.check(t, e, msg)
		})
	}
}

// TestHistoryAutolearn checks that autolearning shows in the entry and
// in the models' last training.
func TestHistoryAutolearn(t *testing.T) {
	f, spam, _ := trainedFilter(t, store.NewMemory())
	h, _ := history.New(history.Options{Size: 10})
	set := testSettings(f)
	set.History = h
	set.Autolearn.Enabled, set.Autolearn.SpamScore, set.Autolearn.MaxRatio = true, 0.5, 0
	set.Milter.Users = "global"
	_, addr := startServer(t, set, nil)
	sendOne(t, addr, defaultEnvelope(), spam)
	e := h.List(history.Query{})[0]
	if e.Learned != filter.Spam {
		t.Errorf("learned %q, want spam", e.Learned)
	}
	if _, ok := h.LastTrained(""); !ok {
		t.Error("the global model's training is not noted")
	}
	if e.Held {
		t.Error("a message is held though the history keeps none")
	}
}
