// Package relabel applies misclassification reports to the filter: the
// one operation every report channel (the control API, spamtrain report,
// the maildir watcher) ends in.
//
// Applying a report finds what the milter decided about the message when
// it was delivered, from the X-Spamd-Result field it added, and relabels
// the message for the reporting user with filter.Relabel: the message's
// seen record is looked up (by the signature in X-Spamd-Result if the
// user has training under it, as a message autolearned at delivery does,
// else by the message's digest); if it was trained as another class it
// is untrained; it is trained as the reported class; and the record is
// updated, all in one atomic store write. A report of the class the
// message already has changes nothing, so a report applied twice, or
// made through two channels, counts once.
//
// Reports only ever reach the model of the user they name; the channels
// decide who may name whom.
package relabel

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"

	"github.com/spamd/spamd/decide"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/reportq"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/tokenize"
)

// Outcome says what applying one report did.
type Outcome struct {
	reportq.Report
	// Digest identifies the message's training.
	Digest store.Digest
	// Verdict is what the milter decided on delivery ("ham", "unsure",
	// "spam"), "" if the message carries no verdict of it.
	Verdict string
	// Learned is the class the milter autolearned the message as on
	// delivery, "" if none.
	Learned string
	// Prev is the class the message was trained as before the report,
	// "" if none.
	Prev string
	// Changed is false when the message already had the reported class.
	Changed bool
}

// Applier applies reports to the filter it is given at each report, so
// that a reloaded filter is used from the next report on.
type Applier struct {
	// Filter returns the filter to train.
	Filter func() *filter.Filter
	// Log receives one line per report applied.
	Log *slog.Logger
	// Applied, if not nil, is told about each report applied.
	Applied func(Outcome)
	// SubjectTags, if not nil, returns the tags the milter may have put
	// on the Subject of spam (the site's, and users' and domains' own),
	// so that a report of a delivered copy is undone to the message the
	// milter saw (decide.Original, whose digest check tells which tag it
	// was).
	SubjectTags func() []string
}

// Apply applies r. Errors that retrying cannot mend (the message does not
// parse, the class or user is invalid) wrap reportq.ErrPermanent.
func (a *Applier) Apply(ctx context.Context, r reportq.Report) error {
	if err := r.Check(); err != nil {
		return fmt.Errorf("%w: %w", reportq.ErrPermanent, err)
	}
	o := Outcome{Report: r}
	var sig store.Digest
	if res, err := decide.ResultOf(r.Message); err == nil && res.Verdict != decide.Skipped {
		o.Verdict, o.Learned, sig = res.Verdict, res.Learned, res.Signature
	}
	// The delivered copy has fields the path added and perhaps a tagged
	// Subject: untraining it as it is would take away features that were
	// never trained and leave some that were.
	msg := r.Message
	tags := []string{""}
	if a.SubjectTags != nil {
		tags = append(a.SubjectTags(), tags...)
	}
	for _, tag := range tags {
		if orig, ok := decide.Original(msg, tag); ok {
			msg = orig
			break
		}
	}
	_, err := a.relabel(ctx, o, msg, sig)
	switch {
	case errors.Is(err, tokenize.ErrMalformed), errors.Is(err, store.ErrInvalidUser),
		errors.Is(err, store.ErrInvalidClass), errors.Is(err, filter.ErrUnknownClass):
		return fmt.Errorf("%w: %w", reportq.ErrPermanent, err)
	}
	return err
}

// Relabel trains msg, a message as the milter classified it (not a
// delivered copy), as class for user, as Apply does a report: sig is the
// digest the milter classified it under, verdict what it decided. Unlike
// a report, it may train the global model (user ""): it is for whoever
// may train every model, such as the web console's administrator.
// source names the channel in the log and the metrics.
func (a *Applier) Relabel(ctx context.Context, user, class, source string, msg []byte, sig store.Digest, verdict string) (Outcome, error) {
	return a.relabel(ctx, Outcome{Report: reportq.Report{User: user, Class: class, Source: source}, Verdict: verdict}, msg, sig)
}

// relabel relabels msg for o's user as o's class, under the signature
// sig if the user has training under it, and reports the outcome.
func (a *Applier) relabel(ctx context.Context, o Outcome, msg []byte, sig store.Digest) (Outcome, error) {
	r := o.Report
	d, res, err := a.Filter().Relabel(ctx, r.User, msg, r.Class, sig)
	if err != nil {
		return o, fmt.Errorf("relabel for %q: %w", r.User, err)
	}
	o.Digest, o.Prev, o.Changed = d, res.Prev, res.Changed
	if a.Log != nil {
		a.Log.Info("report applied", "user", r.User, "class", r.Class, "source", r.Source,
			"digest", hex.EncodeToString(d[:8]), "milter_verdict", o.Verdict, "autolearned", o.Learned,
			"prev", o.Prev, "changed", o.Changed)
	}
	if a.Applied != nil {
		a.Applied(o)
	}
	return o, nil
}
