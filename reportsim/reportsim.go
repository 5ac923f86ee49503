// Package reportsim measures what misclassification reports do for
// users whose mail differs from what the global model was trained on.
//
// A global model is trained on one part of a labelled corpus. Each
// simulated user then receives a stream of other messages, in order.
// Every message is classified twice: by the global model alone, and by
// the user's model (the global model as its Dirichlet prior, plus what
// the user reported). When the user's model gets a message wrong, the
// user reports it, and it is trained into the user's model through
// filter.Relabel, exactly as a report to the daemon would be. The global
// model never learns from the users. The outcome is, per user, the error
// rate of both over the stream, as totals and as a learning curve.
//
// This is the online protocol of the TREC spam track restricted to
// train-on-error, with the gold label standing in for the user: it
// assumes users report every error they see and nothing else. Real users
// report fewer errors, later, and sometimes wrongly.
package reportsim

import (
	"context"
	"errors"
	"fmt"

	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/internal/parallel"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/tokenize"
)

// Message is one labelled message.
type Message struct {
	Raw  []byte
	Spam bool
}

// User is a simulated user: a name and the messages they receive, in
// order, as indices into the corpus.
type User struct {
	Name     string
	Messages []int
}

// Plan says who gets what.
type Plan struct {
	// Global lists the messages the global model is trained on.
	Global []int
	// Users are the simulated users.
	Users []User
	// Window is the number of messages per point of the learning curve;
	// 0 means 100.
	Window int
}

// Point is the learning curve over one window of a user's stream.
type Point struct {
	// End is the number of the user's messages seen at the window's end.
	End int `json:"end"`
	// Global and Reported are the error rates in the window of the
	// global model alone and of the user's model with reports.
	Global   float64 `json:"global"`
	Reported float64 `json:"reported"`
}

// Errors counts mistakes.
type Errors struct {
	// FP counts ham called spam, FN spam called ham.
	FP int `json:"fp"`
	FN int `json:"fn"`
}

// Total returns FP + FN.
func (e Errors) Total() int { return e.FP + e.FN }

// Outcome is one user's result.
type Outcome struct {
	User string `json:"user"`
	// Messages, Spam and Ham count the user's stream.
	Messages int `json:"messages"`
	Spam     int `json:"spam"`
	Ham      int `json:"ham"`
	// Global counts the errors of the global model alone; Reported those
	// of the user's model, which is also the number of reports made.
	Global   Errors `json:"global"`
	Reported Errors `json:"reported"`
	// LastHalf counts the errors over the second half of the stream,
	// once the user's model had the first half to learn from.
	LastHalfGlobal   Errors `json:"last_half_global"`
	LastHalfReported Errors `json:"last_half_reported"`
	// Curve is the learning curve, one point per window.
	Curve []Point `json:"curve"`
	// Changed counts the reports that changed the model; it equals the
	// reports unless a report failed to apply.
	Changed int `json:"changed"`
}

// Rate returns errors per message of e over n messages, in percent.
func Rate(e Errors, n int) float64 {
	if n == 0 {
		return 0
	}
	return 100 * float64(e.Total()) / float64(n)
}

// ErrPlan is returned for a plan that does not fit the corpus.
var ErrPlan = errors.New("bad simulation plan")

// Run runs plan over msgs with the filter configuration cfg on an
// in-memory store, parsing on workers goroutines (0: one per CPU).
func Run(ctx context.Context, msgs []Message, cfg filter.Config, plan Plan, workers int) ([]Outcome, error) {
	if plan.Window <= 0 {
		plan.Window = 100
	}
	for _, u := range plan.Users {
		if u.Name == "" || store.ValidUser(u.Name) != nil {
			return nil, fmt.Errorf("%w: user name %q", ErrPlan, u.Name)
		}
		for _, i := range u.Messages {
			if i < 0 || i >= len(msgs) {
				return nil, fmt.Errorf("%w: message %d of %s out of range", ErrPlan, i, u.Name)
			}
		}
	}
	st := store.NewMemory()
	defer st.Close()
	f, err := filter.New(st, cfg)
	if err != nil {
		return nil, err
	}
	ps, err := prepare(ctx, f, msgs, workers)
	if err != nil {
		return nil, err
	}
	class := func(i int) string {
		if msgs[i].Spam {
			return cfg.Positive
		}
		return cfg.Negative
	}
	items := make([]filter.Item, 0, len(plan.Global))
	for _, i := range plan.Global {
		if i < 0 || i >= len(msgs) {
			return nil, fmt.Errorf("%w: global message %d out of range", ErrPlan, i)
		}
		items = append(items, filter.Item{Prepared: ps[i], Class: class(i)})
	}
	if _, err := f.Train(ctx, "", items); err != nil {
		return nil, fmt.Errorf("train the global model: %w", err)
	}
	var out []Outcome
	for _, u := range plan.Users {
		o := Outcome{User: u.Name, Messages: len(u.Messages)}
		var win struct{ n, global, reported int }
		for k, i := range u.Messages {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			truth := class(i)
			if msgs[i].Spam {
				o.Spam++
			} else {
				o.Ham++
			}
			late := k >= len(u.Messages)/2
			g, err := f.ClassifyPrepared(ctx, "", ps[i], filter.ClassifyOptions{})
			if err != nil {
				return nil, err
			}
			if g.Class != truth {
				count(&o.Global, msgs[i].Spam)
				win.global++
				if late {
					count(&o.LastHalfGlobal, msgs[i].Spam)
				}
			}
			v, err := f.ClassifyPrepared(ctx, u.Name, ps[i], filter.ClassifyOptions{})
			if err != nil {
				return nil, err
			}
			if v.Class != truth {
				count(&o.Reported, msgs[i].Spam)
				win.reported++
				if late {
					count(&o.LastHalfReported, msgs[i].Spam)
				}
				res, err := f.Train(ctx, u.Name, []filter.Item{{Prepared: ps[i], Class: truth}})
				if err != nil {
					return nil, fmt.Errorf("report for %s: %w", u.Name, err)
				}
				if res[0].Changed {
					o.Changed++
				}
			}
			win.n++
			if win.n == plan.Window || k == len(u.Messages)-1 {
				o.Curve = append(o.Curve, Point{End: k + 1,
					Global: 100 * float64(win.global) / float64(win.n), Reported: 100 * float64(win.reported) / float64(win.n)})
				win.n, win.global, win.reported = 0, 0, 0
			}
		}
		out = append(out, o)
	}
	return out, nil
}

func count(e *Errors, spam bool) {
	if spam {
		e.FN++
	} else {
		e.FP++
	}
}

// prepare parses every message once. A message that does not parse gets
// an empty bag and a digest of its own, as the milter would score it.
func prepare(ctx context.Context, f *filter.Filter, msgs []Message, workers int) ([]filter.Prepared, error) {
	ps := make([]filter.Prepared, len(msgs))
	in := make(chan int)
	go func() {
		defer close(in)
		for i := range msgs {
			select {
			case in <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	type prepared struct {
		i int
		p filter.Prepared
	}
	err := parallel.Map(ctx, workers, in, func(i int) prepared {
		p, err := f.Prepare(msgs[i].Raw, false)
		if err != nil {
			p = filter.Prepared{Digest: tokenize.Digest(msgs[i].Raw)}
		}
		return prepared{i, p}
	}, func(p prepared) error {
		ps[p.i] = p.p
		return nil
	})
	return ps, err
}
