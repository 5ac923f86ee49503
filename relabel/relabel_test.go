package relabel

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/spamd/spamd/decide"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/reportq"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/tokenize"
)

func sample(t *testing.T, class string) [][]byte {
	t.Helper()
	dir := filepath.Join("../testdata/sample", class)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// counts returns user's message counts by class.
func counts(t *testing.T, st store.Store, user string) map[string]uint64 {
	t.Helper()
	tot, err := st.Totals(context.Background(), user)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for i, c := range tot.Classes {
		if tot.Messages[i] > 0 {
			out[c] = tot.Messages[i]
		}
	}
	return out
}

func equal(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestApply follows one spam the filter missed through reports: to
// spam, the same again, back to ham; bob's model never changes.
func TestApply(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	f, err := filter.New(st, filter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	spam, ham := sample(t, "spam"), sample(t, "ham")
	for _, m := range spam[1:] {
		f.Learn(ctx, "", m, filter.Spam)
	}
	for _, m := range ham {
		f.Learn(ctx, "", m, filter.Ham)
		f.Learn(ctx, "bob", m, filter.Ham)
	}
	bob := counts(t, st, "bob")
	// The message as delivered, with what the milter said: ham. (The
	// sample's mbox "From " line is not part of it.)
	_, body, _ := bytes.Cut(spam[0], []byte("\n"))
	spam[0] = body
	missed := append([]byte(decide.ResultHeader+": "+decide.Result{Verdict: "ham", Probability: 0.2, Score: -1.4,
		Signature: tokenize.Digest(spam[0])}.String()+"\n"), spam[0]...)
	var outcomes []Outcome
	a := &Applier{Filter: func() *filter.Filter { return f }, Applied: func(o Outcome) { outcomes = append(outcomes, o) }}
	for i, tt := range []struct {
		name      string
		class     string
		prev      string
		changed   bool
		messages  map[string]uint64
		permanent bool
	}{
		{name: "moved to Junk", class: filter.Spam, changed: true, messages: map[string]uint64{filter.Spam: 1}},
		{name: "the same report again", class: filter.Spam, prev: filter.Spam, messages: map[string]uint64{filter.Spam: 1}},
		{name: "moved back", class: filter.Ham, prev: filter.Spam, changed: true, messages: map[string]uint64{filter.Ham: 1}},
		{name: "unknown class", class: "phish", permanent: true, messages: map[string]uint64{filter.Ham: 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := a.Apply(ctx, reportq.Report{User: "alice", Class: tt.class, Source: "test", Message: missed})
			if tt.permanent {
				if !errors.Is(err, reportq.ErrPermanent) {
					t.Fatalf("got %v, want a permanent error", err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				o := outcomes[len(outcomes)-1]
				if o.Prev != tt.prev || o.Changed != tt.changed || o.Verdict != "ham" || o.Digest != tokenize.Digest(spam[0]) {
					t.Errorf("report %d: prev %q changed %v verdict %q digest %x", i, o.Prev, o.Changed, o.Verdict, o.Digest)
				}
			}
			if got := counts(t, st, "alice"); !equal(got, tt.messages) {
				t.Errorf("alice's messages %v, want %v", got, tt.messages)
			}
			if got := counts(t, st, "bob"); !equal(got, bob) {
				t.Errorf("bob's messages %v, want %v", got, bob)
			}
		})
	}
	users, _ := st.Users(ctx)
	if !slices.Equal(users, []string{"", "alice", "bob"}) {
		t.Errorf("users %q", users)
	}
}

func TestApplyRefuses(t *testing.T) {
	f, err := filter.New(store.NewMemory(), filter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	a := &Applier{Filter: func() *filter.Filter { return f }}
	for _, tt := range []struct {
		name string
		r    reportq.Report
	}{
		{"global model", reportq.Report{User: "", Class: filter.Spam, Message: []byte("Subject: x\n\ny\n")}},
		{"dot dot", reportq.Report{User: "../x", Class: filter.Spam, Message: []byte("Subject: x\n\ny\n")}},
		{"not a message", reportq.Report{User: "alice", Class: filter.Spam, Message: []byte{0, 1, 2}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := a.Apply(context.Background(), tt.r); !errors.Is(err, reportq.ErrPermanent) {
				t.Errorf("got %v, want a permanent error", err)
			}
		})
	}
}

// TestDeliveredCopy learns a message at delivery, as autolearn does, then
// reports the delivered copy (a Received, a Return-Path and a Delivered-To
// more, the milter's fields, a tagged Subject) as the other class: the
// message must be relabeled, never counted twice, and every feature's
// counts must be those of the original trained as that class.
func TestDeliveredCopy(t *testing.T) {
	ctx := context.Background()
	_, orig, _ := bytes.Cut(sample(t, "spam")[0], []byte("\n")) // without the mbox "From " line
	st := store.NewMemory()
	f, err := filter.New(st, filter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Learn(ctx, "alice", orig, filter.Ham); err != nil { // autolearned at delivery
		t.Fatal(err)
	}
	head, body, _ := bytes.Cut(orig, []byte("\n\n"))
	fields := bytes.Count(head, []byte("\n")) + 1 - bytes.Count(head, []byte("\n ")) - bytes.Count(head, []byte("\n\t"))
	res := decide.Result{Verdict: "spam", Probability: 0.99, Score: 4, Signature: tokenize.Digest(orig), Fields: fields}
	copy := []byte("Return-Path: <x@example.net>\nDelivered-To: alice\nReceived: from mx by imap with LMTP; Mon, 1 Jan 2024 00:00:00 +0000\n")
	copy = append(copy, bytes.Replace(head, []byte("\nSubject: "), []byte("\nSubject: [SPAM] "), 1)...)
	copy = append(copy, "\nX-Spam-Flag: YES\n"+decide.ResultHeader+": "+res.String()+"\n\n"...)
	copy = append(copy, body...)

	a := &Applier{Filter: func() *filter.Filter { return f }, SubjectTags: func() []string { return []string{"[JUNK]", "[SPAM]"} }}
	if err := a.Apply(ctx, reportq.Report{User: "alice", Class: filter.Spam, Source: "test", Message: copy}); err != nil {
		t.Fatal(err)
	}
	if got := counts(t, st, "alice"); !equal(got, map[string]uint64{filter.Spam: 1}) {
		t.Fatalf("alice's messages %v, want one spam", got)
	}
	// The same model, trained with the original as spam from the start.
	want := store.NewMemory()
	wf, _ := filter.New(want, filter.DefaultConfig())
	if _, err := wf.Learn(ctx, "alice", orig, filter.Spam); err != nil {
		t.Fatal(err)
	}
	gotT, _ := st.Totals(ctx, "alice")
	wantT, _ := want.Totals(ctx, "alice")
	for _, c := range []string{filter.Spam, filter.Ham} {
		if g, w := gotT.Tokens[gotT.Index(c)], wantT.Tokens[wantT.Index(c)]; g != w {
			t.Errorf("%s tokens %d, want %d: the relabel took away other features than training added", c, g, w)
		}
	}
	if gotT.Vocabulary != wantT.Vocabulary {
		t.Errorf("vocabulary %d, want %d", gotT.Vocabulary, wantT.Vocabulary)
	}
	if err := st.Check(ctx, "alice"); err != nil {
		t.Error(err)
	}
}
