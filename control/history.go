package control

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/spamd/spamd/history"
	"github.com/spamd/spamd/store"
)

// History is the answer of GET /v1/history: the milter's latest
// verdicts, newest first.
type History struct {
	Entries []history.Entry `json:"entries"`
	// Size is the most verdicts the daemon keeps ([history] size).
	Size int `json:"size"`
}

// Limits of a history request.
const (
	// defaultHistoryLimit is how many entries a request without limit
	// gets.
	defaultHistoryLimit = 100
	// maxHistoryLimit is the most entries one request gets.
	maxHistoryLimit = 10000
)

// verdicts lists what verdict= may select.
var verdicts = []string{"ham", "unsure", "spam", "skipped", "error"}

// history answers GET /v1/history?limit=N&before=ID&after=ID&user=U&verdict=V:
// every entry to a peer that reads all models, else only the mail of the
// user named like the peer's account, without the other recipients or
// their models' names.
func (s *Server) history(_ http.ResponseWriter, r *http.Request) (any, error) {
	if s.History == nil {
		return nil, fail(http.StatusNotFound, errors.New("this daemon keeps no history ([history] size is 0)"))
	}
	q, err := parseHistoryQuery(r)
	if err != nil {
		return nil, fail(http.StatusBadRequest, err)
	}
	all, uid, account, err := s.who(r)
	if err != nil {
		return nil, fail(http.StatusForbidden, err)
	}
	user := r.URL.Query().Get("user")
	if !all {
		if account == "" {
			return nil, fail(http.StatusForbidden, fmt.Errorf("%w: uid %d has no account name, and sees no mail in the history", errForbidden, uid))
		}
		if user != "" && user != account {
			return nil, fail(http.StatusForbidden, fmt.Errorf("%w: uid %d (%s) sees only the mail of user %q in the history, not %q", errForbidden, uid, account, account, user))
		}
		user = account
	}
	verdict := r.URL.Query().Get("verdict")
	q.Match = func(e *history.Entry) bool {
		return (verdict == "" || e.Verdict == verdict) && (user == "" || e.Belongs(user))
	}
	out := History{Entries: s.History.List(q), Size: s.History.Size()}
	if !all {
		for i := range out.Entries {
			out.Entries[i] = out.Entries[i].Redacted(account)
		}
	}
	if out.Entries == nil {
		out.Entries = []history.Entry{}
	}
	return out, nil
}

// parseHistoryQuery reads limit, before, after, user and verdict.
func parseHistoryQuery(r *http.Request) (history.Query, error) {
	v := r.URL.Query()
	q := history.Query{Limit: defaultHistoryLimit}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxHistoryLimit {
			return q, fmt.Errorf("limit %q: want 1 to %d", l, maxHistoryLimit)
		}
		q.Limit = n
	}
	for _, p := range []struct {
		name string
		id   *uint64
	}{{"before", &q.Before}, {"after", &q.After}} {
		if s := v.Get(p.name); s != "" {
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return q, fmt.Errorf("%s %q: want an entry's id", p.name, s)
			}
			*p.id = n
		}
	}
	if err := store.ValidUser(v.Get("user")); err != nil {
		return q, err
	}
	if vd := v.Get("verdict"); vd != "" && !slices.Contains(verdicts, vd) {
		return q, fmt.Errorf("verdict %q: want one of %q", vd, verdicts)
	}
	return q, nil
}
