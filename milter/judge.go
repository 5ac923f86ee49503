package milter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/identity"
	"github.com/spamd/spamd/nb"
	"github.com/spamd/spamd/tokenize"
)

// maxModels bounds the distinct user models one message is classified
// with; recipients past it share the global model.
const maxModels = 16

// decision is what the milter concluded about a message.
type decision struct {
	// verdict is the filter's label, Skipped, or "error".
	verdict string
	// spam is set when the verdict is a spam class.
	spam bool
	// tag is set when the Subject is to be tagged.
	tag     bool
	outcome Outcome
	// result is what X-Spamd-Result says.
	result Result
	// headers are the fields to add, in order.
	headers [][2]string
	// users are the models that classified the message ("" is global);
	// model is the one whose verdict stood.
	users []string
	model string
	// learned is the class the message was autolearned as, "" if none.
	learned string
	// toward is the verdict's explanation, nil if none was asked for.
	toward map[string][]nb.Contribution
}

// skip is the decision for a message left unclassified.
func skip(reason string) decision {
	r := Result{Verdict: Skipped, Reason: reason}
	return decision{
		verdict: Skipped,
		outcome: Outcome{Action: Accept, Reason: "skipped: " + reason},
		result:  r,
		headers: [][2]string{{ResultHeader, r.String()}},
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
		return skip(ReasonAuthenticated)
	case m.trusted():
		return skip(ReasonTrusted)
	case set.Milter.MaxSize > 0 && m.size > set.Milter.MaxSize:
		return skip(ReasonSize)
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
		return skip(ReasonMalformed)
	}
	if err != nil {
		return m.failed(fmt.Errorf("prepare: %w", err))
	}
	users, err := m.models(ctx, f)
	if err != nil {
		return m.failed(err)
	}
	// Each distinct model judges; the least spammy verdict stands, so no
	// recipient loses mail its own model would have let through.
	var v filter.Verdict
	model := ""
	highest := 0.0
	for i, u := range users {
		w, err := f.ClassifyPrepared(ctx, u, p, filter.ClassifyOptions{Explain: explain})
		if err != nil {
			return m.failed(fmt.Errorf("classify for %q: %w", u, err))
		}
		if i == 0 || w.Score < v.Score {
			v, model = w, u
		}
		if i == 0 || w.Score > highest {
			highest = w.Score
		}
	}
	d := m.decide(f.Config(), v, users)
	d.model = model
	if set.Autolearn.Enabled {
		d.learned = m.autolearn(ctx, f, p, v.Class, v.Score, highest)
		if d.learned != "" {
			d.result.Learned = d.learned
			d.headers[len(d.headers)-1][1] = d.result.String()
		}
	}
	return d
}

// decide turns a verdict into an outcome and headers.
func (m *message) decide(fc filter.Config, v filter.Verdict, users []string) decision {
	a := m.set.Actions
	label := v.Label()
	r := Result{
		Verdict:     label,
		Probability: v.Probability,
		Score:       v.Score,
		Required:    fc.Required(),
		Signature:   v.Digest,
		Fields:      m.fields,
	}
	if v.Toward != nil {
		r.Spammy = names(v.Toward[fc.Positive])
		for c, cs := range v.Toward {
			if c != fc.Positive {
				r.Hammy = names(cs)
			}
		}
	}
	d := decision{verdict: label, spam: isSpam(fc, label), result: r, users: users, toward: v.Toward}
	d.outcome = Outcome{Action: Accept}
	var ok bool
	if d.outcome, d.tag, ok = classOutcome(a, label, v.Score); !ok {
		d.tag = d.spam
		switch {
		case d.spam && a.Reject && v.Score >= a.RejectScore:
			d.outcome = Outcome{Action: Reject, Code: a.RejectCode, Enhanced: a.RejectStatus, Text: a.RejectText,
				Reason: fmt.Sprintf("spam score %.2f ≥ reject_score %.2f", v.Score, a.RejectScore)}
		case d.spam && a.QuarantineSpam, v.Unsure && a.QuarantineUnsure:
			d.outcome = Outcome{Action: Quarantine, Reason: fmt.Sprintf("spamd: %s, score %.2f", label, v.Score)}
		}
	}
	d.headers = append(spamHeaders(d.spam, v.Score, r.Required), [2]string{ClassHeader, v.Class}, [2]string{ResultHeader, r.String()})
	return d
}

// headerTooLarge is the decision for a message over a header bound: it
// is rejected, as Sendmail rejects a header over its MaxHeadersLength.
func headerTooLarge(reason string) decision {
	return decision{
		verdict: Skipped,
		outcome: Outcome{Action: Reject, Code: 552, Enhanced: "5.6.0", Text: "Message header too large", Reason: reason},
		result:  Result{Verdict: Skipped, Reason: ReasonHeader},
	}
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
	d := skip(ReasonError)
	d.verdict = "error"
	d.outcome = failure(set, reason)
	return d
}

// names lists the tokens of contributions.
func names(cs []nb.Contribution) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

// trusted reports whether the SMTP client is in a trusted network.
func (m *message) trusted() bool {
	if !m.c.client.IsValid() {
		return false
	}
	return slices.ContainsFunc(m.set.Milter.TrustedNetworks, func(p netip.Prefix) bool { return p.Contains(m.c.client) })
}

// models returns the distinct users whose models judge the message: each
// recipient with a trained model of its own, plus the global model ("")
// for the others.
func (m *message) models(ctx context.Context, f *filter.Filter) ([]string, error) {
	mode := m.set.Milter.Users
	if mode == "global" || len(m.rcpts) == 0 {
		return []string{""}, nil
	}
	var users []string
	global := false
	seen := map[string]bool{}
	for _, rcpt := range m.rcpts {
		u := userOf(rcpt, mode)
		switch {
		case u == "":
			global = true
			continue
		case seen[u]:
			continue
		case len(users) == maxModels:
			global = true
			continue
		}
		seen[u] = true
		t, err := f.Store().Totals(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("totals of %q: %w", u, err)
		}
		if slices.ContainsFunc(t.Messages, func(n uint64) bool { return n > 0 }) {
			users = append(users, u)
		} else {
			global = true
		}
	}
	if global || len(users) == 0 {
		users = append(users, "")
	}
	return users, nil
}

// userOf names the user a recipient's model belongs to, "" if none, by
// the site's one naming rule (package identity).
func userOf(rcpt, mode string) string {
	return identity.Rule(mode).Of(rcpt)
}
