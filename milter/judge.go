package milter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/identity"
	"github.com/spamd/spamd/nb"
	"github.com/spamd/spamd/prefs"
	"github.com/spamd/spamd/tokenize"
)

// maxModels bounds the distinct user models one message is classified
// with; recipients past it share the global model.
const maxModels = 16

// decision is what the milter concluded about a message.
type decision struct {
	// verdict is the label that stands (the filter's, or a list's, under
	// the recipient's required score), Skipped, or "error".
	verdict string
	// spam is set when the verdict is a spam class.
	spam bool
	// tag is set when the Subject is to be tagged, with subjectTag.
	tag bool
	// class is what X-Spamd-Class says.
	class   string
	outcome Outcome
	// result is what X-Spamd-Result says.
	result Result
	// headers are the fields to add, in order.
	headers [][2]string
	// subjectTag is put before the Subject of spam.
	subjectTag string
	// user is the recipient whose decision stands ("" when there is
	// none), and model whose model judged for them ("" is global).
	user, model string
	// models are the models that classified the message.
	models []string
	// listed says which list named the sender, for the recipient whose
	// decision stands; anyListed whether any recipient's did.
	listed    prefs.Listing
	anyListed bool
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
		c := m.decide(f.Config(), book.For(r.user, r.domain), sender, verdicts[r.model], r)
		anyListed = anyListed || c.anyListed
		if i == 0 || lenient(c, d) {
			d = c
		}
	}
	d.models, d.anyListed = models, anyListed
	if set.Autolearn.Enabled && !d.anyListed {
		// A listed sender's mail is never learned from: the list, not
		// the model, judged it, and an allowed sender may be forged.
		d.learned = m.autolearn(ctx, f, p, lowestClass, lowest, highest)
		d.result.Learned = d.learned
	}
	return d.withHeaders()
}

// lenient reports whether decision a lets the message through more
// readily than b: a lesser action, else a milder verdict, else a lower
// score, else no subject tag.
func lenient(a, b decision) bool {
	if a.outcome.Action != b.outcome.Action {
		return a.outcome.Action < b.outcome.Action
	}
	if ra, rb := verdictRank(a), verdictRank(b); ra != rb {
		return ra < rb
	}
	if a.result.Score != b.result.Score {
		return a.result.Score < b.result.Score
	}
	return a.subjectTag == "" && b.subjectTag != ""
}

// verdictRank orders verdicts from the mildest: ham, unsure, any other
// class, spam.
func verdictRank(d decision) int {
	switch {
	case d.spam:
		return 3
	case d.verdict == "unsure":
		return 1
	case d.verdict == filter.Ham:
		return 0
	}
	return 2
}

// decide turns a recipient's verdict, under their preferences, into an
// outcome (withHeaders adds the headers).
func (m *message) decide(fc filter.Config, pr prefs.Prefs, sender prefs.Sender, v filter.Verdict, r recipient) decision {
	a := m.set.Actions
	label := labelFor(fc, v, pr.Required)
	listing, listed := pr.Listed(sender)
	if listed {
		label = fc.Negative
		if listing.List == "deny" {
			label = fc.Positive
		}
	}
	res := Result{
		Verdict:     label,
		Probability: v.Probability,
		Score:       v.Score,
		Required:    pr.Required,
		Signature:   v.Digest,
		Fields:      m.fields,
	}
	if listed {
		res.Listed, res.By = listing.List, string(listing.Level)
	}
	if v.Toward != nil {
		res.Spammy = names(v.Toward[fc.Positive])
		for c, cs := range v.Toward {
			if c != fc.Positive {
				res.Hammy = names(cs)
			}
		}
	}
	for _, mc := range v.Measures {
		res.Measures = append(res.Measures, mc.String())
	}
	d := decision{verdict: label, spam: isSpam(fc, label), result: res, user: r.user, model: r.model,
		listed: listing, anyListed: listed, toward: v.Toward}
	d.outcome = Outcome{Action: Accept}
	// The class X-Spamd-Class names: the list's, else the label's, else
	// (unsure) the better guess.
	class := v.Class
	if listed || label != "unsure" {
		class = label
	}
	d.class = class
	if o, tag, ok := classOutcome(a, label, v.Score); ok && !listed {
		// A class with an action of its own ([actions.classes]).
		d.outcome, d.tag = o, tag
	} else {
		d.tag = d.spam
		why := fmt.Sprintf("score %.3g", v.Score)
		if listed {
			why = fmt.Sprintf("sender %s-listed by %s (%s)", listing.List, listing.Level, listing.Entry)
		}
		switch {
		case d.spam && pr.Action == "reject" && (listed || v.Score >= pr.RejectScore):
			if !listed {
				why = fmt.Sprintf("spam score %.3g ≥ reject_score %.3g", v.Score, pr.RejectScore)
			}
			d.outcome = Outcome{Action: Reject, Code: a.RejectCode, Enhanced: a.RejectStatus, Text: a.RejectText, Reason: why}
		case d.spam && (pr.Action == "quarantine" || pr.Action == "reject" && a.QuarantineSpam), label == "unsure" && a.QuarantineUnsure:
			d.outcome = Outcome{Action: Quarantine, Reason: fmt.Sprintf("spamd: %s, %s", label, why)}
		}
	}
	if d.tag {
		d.subjectTag = pr.SubjectTag
	}
	return d
}

// withHeaders returns d with the headers of its verdict, made only for
// the decision that stands.
func (d decision) withHeaders() decision {
	d.headers = append(spamHeaders(d.spam, d.result.Score, d.result.Required), [2]string{ClassHeader, d.class}, [2]string{ResultHeader, d.result.String()})
	return d
}

// labelFor is the verdict's label under the score required, which a
// recipient's preferences may set: the filter's own label at the filter's
// required score, else spam from required, unsure from the bottom of the
// unsure band, ham below. A model that has not learned enough stays
// unsure, and a class other than the two stays itself.
func labelFor(fc filter.Config, v filter.Verdict, required float64) string {
	label := v.Label()
	if required == fc.Required() || v.Untrained || (v.Class != fc.Positive && v.Class != fc.Negative) {
		return label
	}
	switch {
	case v.Score >= required:
		return fc.Positive
	case fc.UnsureHigh > fc.UnsureLow && v.Score >= fc.UnsureLow:
		return "unsure"
	}
	return fc.Negative
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
		r := recipient{user: userOf(rcpt, mode), domain: domainOf(rcpt)}
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

// domainOf returns the lower-cased domain of a recipient address, "" if
// it has none that could name preferences.
func domainOf(rcpt string) string {
	a := strings.Trim(rcpt, "<> ")
	i := strings.LastIndexByte(a, '@')
	if i < 0 {
		return ""
	}
	d := strings.ToLower(a[i+1:])
	if config.ValidDomain(d) != nil {
		return ""
	}
	return d
}

// userOf names the user a recipient's model belongs to, "" if none, by
// the site's one naming rule (package identity).
func userOf(rcpt, mode string) string {
	return identity.Rule(mode).Of(rcpt)
}
