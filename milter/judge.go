package milter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/spamd/spamd/decide"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/identity"
	"github.com/spamd/spamd/tokenize"
)

// maxModels bounds the distinct user models one message is classified
// with; recipients past it share the global model.
const maxModels = 16

// decision is what the milter concluded about a message: the decision
// that stands (package decide), with what the milter adds to it.
type decision struct {
	decide.Decision
	// headers are the fields to add, in order.
	headers [][2]string
	// user is the recipient whose decision stands ("" when there is
	// none), and model whose model judged for them ("" is global).
	user, model string
	// models are the models that classified the message.
	models []string
	// anyListed is whether any recipient's sender lists named the
	// sender.
	anyListed bool
	// learned is the class the message was autolearned as, "" if none.
	learned string
}

// skip is the decision for a message left unclassified.
func skip(reason string) decision {
	r := decide.Result{Verdict: decide.Skipped, Reason: reason}
	return decision{
		Decision: decide.Decision{
			Verdict: decide.Skipped,
			Outcome: decide.Outcome{Action: decide.Accept, Reason: "skipped: " + reason},
			Result:  r,
		},
		headers: [][2]string{{decide.ResultHeader, r.String()}},
	}
}

// judge classifies the message, unless a skip rule applies, and decides
// what to do with it.
func (m *message) judge() decision {
	set := m.set
	if m.over != "" {
		// Before every skip rule: the forged fields of the message may not
		// all be known, so it may not be delivered.
		return headerTooLarge(m.over)
	}
	if reason := cmp.Or(m.broken, m.c.broken); reason != "" {
		return failedDecision(set, reason) // logged and counted when it broke
	}
	switch {
	case m.auth != "" && set.Milter.SkipAuthenticated:
		return skip(decide.ReasonAuthenticated)
	case m.trusted():
		return skip(decide.ReasonTrusted)
	case set.Milter.MaxSize > 0 && m.size > set.Milter.MaxSize:
		return skip(decide.ReasonSize)
	}
	ctx, cancel := context.WithTimeout(m.c.srv.ctx, set.Milter.WriteTimeout.Duration)
	defer cancel()
	// Classifying is CPU work: more at once than there are CPUs only
	// makes each slower and the heap bigger.
	select {
	case m.c.srv.cpus <- struct{}{}:
		defer func() { <-m.c.srv.cpus }()
	case <-ctx.Done():
		return m.failed(fmt.Errorf("waiting for a CPU: %w", ctx.Err()))
	}
	f := set.Filter
	explain := set.Milter.Explain
	p, err := f.Prepare(*m.buf, explain > 0)
	if errors.Is(err, tokenize.ErrMalformed) {
		return skip(decide.ReasonMalformed)
	}
	if err != nil {
		return m.failed(fmt.Errorf("prepare: %w", err))
	}
	rcpts, models, err := m.recipients(ctx, f)
	if err != nil {
		return m.failed(err)
	}
	// Each distinct model judges once; each recipient's decision is
	// made from its model's verdict under its own preferences, and the
	// most lenient decision stands, so that no recipient loses mail its
	// own model and preferences would have let through.
	verdicts := make(map[string]filter.Verdict, len(models))
	lowest, highest, lowestClass := 0.0, 0.0, ""
	for i, u := range models {
		v, err := f.ClassifyPrepared(ctx, u, p, filter.ClassifyOptions{Explain: explain})
		if err != nil {
			return m.failed(fmt.Errorf("classify for %q: %w", u, err))
		}
		verdicts[u] = v
		if i == 0 || v.Score < lowest {
			lowest, lowestClass = v.Score, v.Class
		}
		if i == 0 || v.Score > highest {
			highest = v.Score
		}
	}
	book := set.book(f.Config())
	sender := m.sender()
	var d decision
	anyListed := false
	for i, r := range rcpts {
		c := decision{Decision: decide.For(f.Config(), set.Actions, book.For(r.user, r.domain), sender, verdicts[r.model], m.fields),
			user: r.user, model: r.model}
		anyListed = anyListed || c.Listed
		if i == 0 || lenient(c, d) {
			d = c
		}
	}
	d.models, d.anyListed = models, anyListed
	if set.Autolearn.Enabled && !d.anyListed {
		// A listed sender's mail is never learned from: the list, not
		// the model, judged it, and an allowed sender may be forged.
		d.learned = m.autolearn(ctx, f, p, lowestClass, lowest, highest)
		d.Result.Learned = d.learned
	}
	return d.withHeaders()
}

// lenient reports whether decision a lets the message through more
// readily than b: a lesser action, else a milder verdict, else a lower
// score, else no subject tag.
func lenient(a, b decision) bool {
	if a.Outcome.Action != b.Outcome.Action {
		return a.Outcome.Action < b.Outcome.Action
	}
	if ra, rb := verdictRank(a), verdictRank(b); ra != rb {
		return ra < rb
	}
	if a.Result.Score != b.Result.Score {
		return a.Result.Score < b.Result.Score
	}
	return a.SubjectTag == "" && b.SubjectTag != ""
}

// verdictRank orders verdicts from the mildest: ham, unsure, any other
// class, spam.
func verdictRank(d decision) int {
	switch {
	case d.Spam:
		return 3
	case d.Verdict == "unsure":
		return 1
	case d.Verdict == filter.Ham:
		return 0
	}
	return 2
}

// withHeaders returns d with the headers of its verdict, made only for
// the decision that stands.
func (d decision) withHeaders() decision {
	d.headers = d.Headers()
	return d
}

// headerTooLarge is the decision for a message over a header bound: it
// is rejected, as Sendmail rejects a header over its MaxHeadersLength.
func headerTooLarge(reason string) decision {
	return decision{Decision: decide.Decision{
		Verdict: decide.Skipped,
		Outcome: decide.Outcome{Action: decide.Reject, Code: 552, Enhanced: "5.6.0", Text: "Message header too large", Reason: reason},
		Result:  decide.Result{Verdict: decide.Skipped, Reason: decide.ReasonHeader},
	}}
}

// failed is the decision for a message the filter failed on: logged,
// counted, and answered with the failure action. An accepted message is
// tagged as skipped, its forged fields still removed.
func (m *message) failed(err error) decision {
	m.c.srv.log.Error("milter: classification failed", append(m.attrs(), "err", err)...)
	m.c.srv.obs.Error("classify")
	return failedDecision(m.set, err.Error())
}

// failedDecision is the decision for a message the milter failed on.
func failedDecision(set *Settings, reason string) decision {
	d := skip(decide.ReasonError)
	d.Verdict = "error"
	d.Outcome = failure(set, reason)
	return d
}

// trusted reports whether the SMTP client is in a trusted network.
func (m *message) trusted() bool {
	if !m.c.client.IsValid() {
		return false
	}
	return slices.ContainsFunc(m.set.Milter.TrustedNetworks, func(p netip.Prefix) bool { return p.Contains(m.c.client) })
}

// recipient is one recipient as the milter judges for them: their user
// name and domain, whose preferences apply, and the model that judges
// their mail ("" is the global one).
type recipient struct {
	user, domain, model string
}

// recipients returns the message's recipients, at most one per user and
// domain, and the distinct models that judge for them: each user's with
// a trained model of their own, at most maxModels, and the global model
// for the others. A message without recipients has one, nobody.
func (m *message) recipients(ctx context.Context, f *filter.Filter) ([]recipient, []string, error) {
	mode := m.set.Milter.Users
	var rcpts []recipient
	var models []string
	global := false
	trained := map[string]bool{}
	seen := map[recipient]bool{}
	for _, rcpt := range m.rcpts {
		r := recipient{user: userOf(rcpt, mode), domain: decide.DomainOf(rcpt)}
		if mode == "global" {
			// No model of one's own, but preferences of one's own.
			r.user = userOf(rcpt, "address")
		}
		if seen[r] {
			continue
		}
		seen[r] = true
		own, known := trained[r.user]
		if mode != "global" && r.user != "" && !known && len(trained) < maxModels {
			t, err := f.Store().Totals(ctx, r.user)
			if err != nil {
				return nil, nil, fmt.Errorf("totals of %q: %w", r.user, err)
			}
			own = slices.ContainsFunc(t.Messages, func(n uint64) bool { return n > 0 })
			trained[r.user] = own
			if own {
				models = append(models, r.user)
			}
		}
		if own {
			r.model = r.user
		} else {
			global = true
		}
		rcpts = append(rcpts, r)
	}
	if len(rcpts) == 0 {
		rcpts, global = []recipient{{}}, true
	}
	if global {
		models = append(models, "")
	}
	return rcpts, models, nil
}

// userOf names the user a recipient's model belongs to, "" if none, by
// the site's one naming rule (package identity).
func userOf(rcpt, mode string) string {
	return identity.Rule(mode).Of(rcpt)
}
