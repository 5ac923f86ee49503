package milter

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/decide"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/tokenize"
)

// withCRLF returns raw with every line ending CRLF, as Dovecot pipes a
// message and as the MTA hands it to the milter.
func withCRLF(raw []byte) []byte {
	return bytes.ReplaceAll(bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n")), []byte("\n"), []byte("\r\n"))
}

// withLF returns raw with every line ending LF, as a maildir file holds it.
func withLF(raw []byte) []byte { return bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n")) }

// delivered returns raw as delivered: with the X-Spamd-Result the milter
// added and, if tag is set, the Subject tagged.
func delivered(raw []byte, res decide.Result, tag string) []byte {
	raw = withLF(raw)
	if bytes.HasPrefix(raw, []byte("From ")) {
		// The mbox line of the sample is not part of the message.
		_, raw, _ = bytes.Cut(raw, []byte("\n"))
	}
	if tag != "" {
		raw = bytes.Replace(raw, []byte("\nSubject: "), []byte("\nSubject: "+tag+" "), 1)
	}
	return append([]byte(decide.ResultHeader+": "+res.String()+"\n"), raw...)
}

func TestSignatureIgnoresLineEndings(t *testing.T) {
	st := store.NewMemory()
	f, spam, ham := trainedFilter(t, st)
	_, addr := startServer(t, testSettings(f), nil)
	for _, tt := range []struct {
		name string
		raw  []byte
	}{{"spam", spam}, {"ham", ham}} {
		t.Run(tt.name, func(t *testing.T) {
			res := sendOne(t, addr, defaultEnvelope(), withCRLF(tt.raw)).result(t)
			for _, form := range []struct {
				name string
				raw  []byte
			}{
				{"CRLF, as Dovecot pipes it", withCRLF(delivered(tt.raw, res, ""))},
				{"LF, as a maildir file holds it", delivered(tt.raw, res, "")},
			} {
				if d := tokenize.Digest(form.raw); d != res.Signature {
					t.Errorf("%s: digest %x, signature %x", form.name, d, res.Signature)
				}
			}
		})
	}
}

func TestAutolearn(t *testing.T) {
	ctx := context.Background()
	const user = "alice@test.example"
	// The scores of the two unseen messages under the sample's model set
	// the thresholds.
	st := store.NewMemory()
	f, spam, ham := trainedFilter(t, st)
	vs, err := f.Classify(ctx, "", spam, filter.ClassifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vh, err := f.Classify(ctx, "", ham, filter.ClassifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !(vs.Score > 0 && vh.Score < 0) {
		t.Fatalf("sample scores: spam %v, ham %v", vs.Score, vh.Score)
	}
	sure := config.Autolearn{Enabled: true, SpamScore: vs.Score - 0.5, HamScore: vh.Score + 0.5, MaxRatio: 3}
	for _, tt := range []struct {
		name    string
		al      config.Autolearn
		users   string
		before  func(t *testing.T, f *filter.Filter)
		raw     []byte
		learned string
		learner string // whose model learns
	}{
		{name: "off", al: config.Autolearn{SpamScore: vs.Score - 0.5, HamScore: vh.Score + 0.5}, raw: spam},
		{name: "sure spam", al: sure, raw: spam, learned: filter.Spam, learner: user},
		{name: "sure ham", al: sure, raw: ham, learned: filter.Ham, learner: user},
		{name: "not sure enough", al: config.Autolearn{Enabled: true, SpamScore: vs.Score + 1, HamScore: vh.Score - 1}, raw: spam},
		{name: "global model when users are not told apart", al: sure, users: "global", raw: spam, learned: filter.Spam, learner: ""},
		{name: "never over a report", al: sure, raw: spam, before: func(t *testing.T, f *filter.Filter) {
			if _, err := f.Learn(ctx, user, withCRLF(spam), filter.Ham); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "balance", al: config.Autolearn{Enabled: true, SpamScore: sure.SpamScore, HamScore: sure.HamScore, MaxRatio: 1},
			raw: spam, before: func(t *testing.T, f *filter.Filter) {
				if _, err := f.Learn(ctx, user, loadSample(t).spam[0], filter.Spam); err != nil {
					t.Fatal(err)
				}
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := store.NewMemory()
			f, _, _ := trainedFilter(t, st)
			if tt.before != nil {
				tt.before(t, f)
			}
			globalBefore, _ := st.Totals(ctx, "")
			userBefore, _ := st.Totals(ctx, user)
			set := testSettings(f)
			set.Autolearn = tt.al
			if tt.users != "" {
				set.Milter.Users = tt.users
			}
			_, addr := startServer(t, set, nil)
			env := defaultEnvelope()
			env.rcpts = []string{"<" + user + ">"}
			res := sendOne(t, addr, env, withCRLF(tt.raw)).result(t)
			if res.Learned != tt.learned {
				t.Fatalf("learned=%q, want %q", res.Learned, tt.learned)
			}
			globalAfter, _ := st.Totals(ctx, "")
			userAfter, _ := st.Totals(ctx, user)
			if tt.learned == "" {
				if !equalTotals(globalBefore, globalAfter) || !equalTotals(userBefore, userAfter) {
					t.Errorf("a model changed: global %+v → %+v, user %+v → %+v", globalBefore, globalAfter, userBefore, userAfter)
				}
				return
			}
			if got, _ := st.Seen(ctx, tt.learner, res.Signature); got != tt.learned {
				t.Errorf("seen record of %q: %q, want %q", tt.learner, got, tt.learned)
			}
			other := user
			if tt.learner == user {
				other = ""
			}
			if got, _ := st.Seen(ctx, other, res.Signature); got != "" {
				t.Errorf("%q's model learned it too", other)
			}
		})
	}
}

func equalTotals(a, b store.Totals) bool {
	return strings.Join(a.Classes, ",") == strings.Join(b.Classes, ",") &&
		len(a.Messages) == len(b.Messages) && (len(a.Messages) == 0 || a.Messages[0] == b.Messages[0] && a.Messages[len(a.Messages)-1] == b.Messages[len(b.Messages)-1]) &&
		a.Vocabulary == b.Vocabulary
}

// TestReportReversesAutolearn delivers a spam with a subject tag, which
// changes its digest, autolearned as spam; the user's report that it is
// ham finds the training by the signature and relabels it.
func TestReportReversesAutolearn(t *testing.T) {
	ctx := context.Background()
	const user = "alice@test.example"
	st := store.NewMemory()
	f, spam, _ := trainedFilter(t, st)
	vs, err := f.Classify(ctx, "", spam, filter.ClassifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	set := testSettings(f)
	set.Autolearn = config.Autolearn{Enabled: true, SpamScore: vs.Score - 0.5, HamScore: -vs.Score}
	set.Actions.SubjectTag = "[SPAM]"
	_, addr := startServer(t, set, nil)
	env := defaultEnvelope()
	env.rcpts = []string{user}
	res := sendOne(t, addr, env, withCRLF(spam)).result(t)
	if res.Learned != filter.Spam {
		t.Fatalf("not autolearned: %+v", res)
	}
	got := delivered(spam, res, "[SPAM]")
	if tokenize.Digest(got) == res.Signature {
		t.Fatal("the subject tag did not change the digest; the test shows nothing")
	}
	parsed, err := decide.ResultOf(got)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := st.Totals(ctx, user)
	d, r, err := f.Relabel(ctx, user, got, filter.Ham, parsed.Signature)
	if err != nil {
		t.Fatal(err)
	}
	if d != res.Signature || r.Prev != filter.Spam || !r.Changed {
		t.Errorf("relabel: digest %x, %+v; want the signature, prev spam", d, r)
	}
	after, _ := st.Totals(ctx, user)
	si, hi := after.Index(filter.Spam), after.Index(filter.Ham)
	if after.Messages[si] != before.Messages[before.Index(filter.Spam)]-1 || after.Messages[hi] != 1 {
		t.Errorf("totals %+v → %+v, want one spam fewer and one ham", before, after)
	}
}
