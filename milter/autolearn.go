package milter

import (
	"context"
	"slices"
	"time"

	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/store"
)

// autolearn trains the message's recipients' models on it when every
// model that judged it was very sure: lowest and highest are the lowest
// and highest spam log-odds they gave, and decided the class of the
// verdict that stands. A message is learned as that class when it is a
// spam class or the negative class (ham): a newsletter far from spam is
// not ham. It returns the class learned for
// at least one recipient, "" if none. Training goes through the filter
// like any other, with a seen record, so a recipient's report reverses
// it; a recipient for whom the message is already trained (a report came
// first) is left alone, as is a model the class would unbalance. Failures
// are logged: they never change what happens to the message.
func (m *message) autolearn(ctx context.Context, f *filter.Filter, p filter.Prepared, decided string, lowest, highest float64) string {
	al := m.set.Autolearn
	fc := f.Config()
	var class, other string
	switch {
	case lowest >= al.SpamScore && fc.IsSpam(decided):
		class, other = decided, fc.Negative
	case highest <= al.HamScore && decided == fc.Negative:
		class, other = fc.Negative, fc.Positive
	default:
		return ""
	}
	if m.size > int64(m.set.Milter.ClassifyBytes) {
		// The bag is of a prefix: untraining the whole message later
		// would subtract another bag.
		return ""
	}
	learned := ""
	for _, u := range m.learners() {
		log := append(m.attrs(), "user", u, "class", class)
		seen, err := f.Store().Seen(ctx, u, p.Digest)
		if err != nil {
			m.c.srv.log.Warn("milter: autolearn: reading the seen record", append(log, "err", err)...)
			continue
		}
		if seen != "" {
			continue
		}
		t, err := f.Store().Totals(ctx, u)
		if err != nil {
			m.c.srv.log.Warn("milter: autolearn: reading the totals", append(log, "err", err)...)
			continue
		}
		if !balanced(t, class, other, al.MaxRatio) {
			m.c.srv.log.Debug("milter: autolearn: skipped to keep the model balanced", log...)
			continue
		}
		res, err := f.Train(ctx, u, []filter.Item{{Prepared: p, Class: class}})
		if err != nil {
			m.c.srv.log.Warn("milter: autolearn failed", append(log, "err", err)...)
			continue
		}
		if res[0].Changed {
			learned = class
			if h := m.set.History; h != nil {
				h.Trained(u, time.Now())
			}
		}
	}
	return learned
}

// balanced reports whether a model with totals t may learn one more
// message of class: whether it then holds at most ratio times as many
// messages of class as of other, each count plus one.
func balanced(t store.Totals, class, other string, ratio float64) bool {
	if ratio == 0 {
		return true
	}
	n := func(c string) float64 {
		if i := t.Index(c); i >= 0 {
			return float64(t.Messages[i])
		}
		return 0
	}
	return n(class)+1 <= ratio*(n(other)+1)
}

// learners returns the models autolearn trains: each recipient's, at most
// maxModels, or the global model when users are not told apart.
func (m *message) learners() []string {
	mode := m.set.Milter.Users
	if mode == "global" {
		return []string{""}
	}
	var users []string
	for _, rcpt := range m.rcpts {
		u := userOf(rcpt, mode)
		if u != "" && !slices.Contains(users, u) && len(users) < maxModels {
			users = append(users, u)
		}
	}
	return users
}
