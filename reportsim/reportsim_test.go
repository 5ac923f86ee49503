package reportsim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/spamd/spamd/filter"
)

// corpus makes labelled messages: the global model's ham talks of
// meetings and its spam of offers; the user's ham is newsletters full
// of offers, which the global model calls spam until the user reports.
func corpus() (msgs []Message, plan Plan) {
	add := func(spam bool, subject, body string) int {
		msgs = append(msgs, Message{Spam: spam, Raw: fmt.Appendf(nil, "Subject: %s\nMessage-ID: <%d@x>\n\n%s\n", subject, len(msgs), body)})
		return len(msgs) - 1
	}
	for i := range 40 {
		plan.Global = append(plan.Global,
			add(false, "meeting", fmt.Sprintf("agenda for the meeting %d with the team", i)),
			add(true, "offer", fmt.Sprintf("cheap offer discount buy now %d", i)))
	}
	u := User{Name: "carol"}
	for i := range 60 {
		u.Messages = append(u.Messages,
			add(false, "newsletter offer", fmt.Sprintf("newsletter offer discount from the club %d", i)),
			add(true, "offer", fmt.Sprintf("cheap offer buy now pills %d", i)))
	}
	plan.Users = []User{u}
	plan.Window = 20
	return msgs, plan
}

func TestRun(t *testing.T) {
	msgs, plan := corpus()
	outs, err := Run(context.Background(), msgs, filter.DefaultConfig(), plan, 0)
	if err != nil {
		t.Fatal(err)
	}
	o := outs[0]
	if o.Messages != 120 || o.Spam != 60 || o.Ham != 60 || len(o.Curve) != 6 {
		t.Fatalf("outcome %+v", o)
	}
	if o.Global.FP < 50 {
		t.Errorf("the global model called %d of the newsletters spam; the test needs it to err", o.Global.FP)
	}
	if o.Reported.Total() >= o.Global.Total()/4 || o.LastHalfReported.Total() != 0 {
		t.Errorf("with reports %d errors (%d in the second half), global %d", o.Reported.Total(), o.LastHalfReported.Total(), o.Global.Total())
	}
	if o.Changed != o.Reported.Total() {
		t.Errorf("%d of %d reports changed the model", o.Changed, o.Reported.Total())
	}
	dir := t.TempDir()
	if err := Plot(dir, "carol", "carol", []Labeled{{Label: "λ=1000", Outcome: o}}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"carol.png", "carol.svg"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

func TestRunRefusesBadPlans(t *testing.T) {
	msgs, plan := corpus()
	for _, tt := range []struct {
		name string
		edit func(p *Plan)
	}{
		{"empty user name", func(p *Plan) { p.Users[0].Name = "" }},
		{"crafted user name", func(p *Plan) { p.Users[0].Name = "../x" }},
		{"message out of range", func(p *Plan) { p.Users[0].Messages = append(p.Users[0].Messages, len(msgs)) }},
		{"global out of range", func(p *Plan) { p.Global = append(p.Global, -1) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := plan
			p.Users = []User{{Name: plan.Users[0].Name, Messages: append([]int(nil), plan.Users[0].Messages...)}}
			p.Global = append([]int(nil), plan.Global...)
			tt.edit(&p)
			if _, err := Run(context.Background(), msgs, filter.DefaultConfig(), p, 0); !errors.Is(err, ErrPlan) {
				t.Errorf("got %v, want ErrPlan", err)
			}
		})
	}
}
