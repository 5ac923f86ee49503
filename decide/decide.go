// Package decide turns a classifier's verdict into what is done with a
// message for one recipient: the label under the recipient's required
// score or the sender list that names the sender, the action (accept,
// quarantine, reject), the Subject tag, and the header fields that say
// so (X-Spam-Flag, X-Spam-Status, X-Spam-Score, X-Spam-Level,
// X-Spamd-Class and X-Spamd-Result, whose format Result is).
//
// The milter decides with it for each recipient of a message, and the
// control API (POST /v1/classify with decide=1) and spamtrain filter for
// the one recipient a pipe filters for, so that mail filtered outside the
// MTA carries the very headers the milter would have added. Annotate
// writes a decision into a message the way the milter's header changes
// do.
//
// It knows the filter's verdicts and configuration, the [actions]
// settings and the recipient's preferences (package prefs); it does no
// I/O and knows nothing of how a message arrives.
package decide

import (
	"fmt"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/nb"
	"github.com/spamd/spamd/prefs"
)

// Decision is what is done with a message for one recipient.
type Decision struct {
	// Verdict is the label that stands: the filter's under the
	// recipient's required score, or a sender list's; Skipped, or
	// "error", for a message left unclassified.
	Verdict string
	// Spam is set when Verdict is a spam class.
	Spam bool
	// Tag is set when the Subject is to be tagged with SubjectTag (""
	// for no tag).
	Tag        bool
	SubjectTag string
	// Class is what X-Spamd-Class says: the list's class, else the
	// label, else (unsure) the better guess.
	Class string
	// Outcome is what the MTA is told.
	Outcome Outcome
	// Result is what X-Spamd-Result says.
	Result Result
	// Listed is set when a sender list decided; Listing says which.
	Listed  bool
	Listing prefs.Listing
	// Toward is the verdict's explanation, nil if none was asked for.
	Toward map[string][]nb.Contribution
}

// For decides for one recipient, whose preferences are pr, on a message
// from sender that the recipient's model gave the verdict v. a is the
// site's [actions], for the reply of a rejection and the actions of
// classes. fields is the number of header fields the delivered message
// keeps (Fields), for X-Spamd-Result.
func For(fc filter.Config, a config.Actions, pr prefs.Prefs, sender prefs.Sender, v filter.Verdict, fields int) Decision {
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
		Fields:      fields,
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
	d := Decision{Verdict: label, Spam: isSpam(fc, label), Result: res, Listing: listing, Listed: listed, Toward: v.Toward}
	d.Outcome = Outcome{Action: Accept}
	d.Class = v.Class
	if listed || label != "unsure" {
		d.Class = label
	}
	if o, tag, ok := classOutcome(a, label, v.Score); ok && !listed {
		// A class with an action of its own ([actions.classes]).
		d.Outcome, d.Tag = o, tag
	} else {
		d.Tag = d.Spam
		why := fmt.Sprintf("score %.3g", v.Score)
		if listed {
			why = fmt.Sprintf("sender %s-listed by %s (%s)", listing.List, listing.Level, listing.Entry)
		}
		switch {
		case d.Spam && pr.Action == "reject" && (listed || v.Score >= pr.RejectScore):
			if !listed {
				why = fmt.Sprintf("spam score %.3g ≥ reject_score %.3g", v.Score, pr.RejectScore)
			}
			d.Outcome = Outcome{Action: Reject, Code: a.RejectCode, Enhanced: a.RejectStatus, Text: a.RejectText, Reason: why}
		case d.Spam && (pr.Action == "quarantine" || pr.Action == "reject" && a.QuarantineSpam), label == "unsure" && a.QuarantineUnsure:
			d.Outcome = Outcome{Action: Quarantine, Reason: fmt.Sprintf("spamd: %s, %s", label, why)}
		}
	}
	if d.Tag {
		d.SubjectTag = pr.SubjectTag
	}
	return d
}

// Headers returns the header fields the decision adds, in order, their
// values unfolded (Annotate and the milter fold X-Spamd-Result).
func (d Decision) Headers() [][2]string {
	return append(spamHeaders(d.Spam, d.Result.Score, d.Result.Required), [2]string{ClassHeader, d.Class}, [2]string{ResultHeader, d.Result.String()})
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

// names lists the tokens of contributions.
func names(cs []nb.Contribution) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}
