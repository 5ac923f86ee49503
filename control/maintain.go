package control

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/dump"
)

// The maintenance endpoints let an admin look after the model while the
// daemon holds it (a Badger store admits one process): dump, restore,
// delete-user, check, compact and prune. They are an admin's: root, the daemon's
// own uid, an account in Admins, or a TCP client with the token.

// mayMaintain reports whether the request's peer may read and change
// every model.
func (s *Server) mayMaintain(r *http.Request) error {
	if s.readsAll(r) {
		return nil
	}
	return fail(http.StatusForbidden, fmt.Errorf("%w: maintenance is for root, spamd's own user and the admins of the configuration", errForbidden))
}

// maintenanceTime bounds a dump or a restore: far longer than the
// request timeouts meant for messages, since a model of millions of
// features takes minutes over a slow link, but not forever.
const maintenanceTime = time.Hour

// usersParam returns the users named by the request's user parameters,
// and whether it named any; "user=" names the global model.
func usersParam(r *http.Request) ([]string, bool, error) {
	users, named := r.URL.Query()["user"]
	for _, u := range users {
		if err := store.ValidUser(u); err != nil {
			return nil, false, fail(http.StatusBadRequest, err)
		}
	}
	return users, named, nil
}

// dumpModels streams the models the request names, every model without a
// user parameter, in the dump format. A failure after the first byte
// aborts the response, so that the client holds a dump without its end
// line, which restore refuses, rather than one that looks whole.
func (s *Server) dumpModels(w http.ResponseWriter, r *http.Request) (any, error) {
	if err := s.mayMaintain(r); err != nil {
		return nil, err
	}
	users, named, err := usersParam(r)
	if err != nil {
		return nil, err
	}
	st := s.Filter().Store()
	if !named {
		if users, err = st.Users(r.Context()); err != nil {
			return nil, fmt.Errorf("list users: %w", err)
		}
	}
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Now().Add(maintenanceTime))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	dw := dump.NewWriter(w)
	for _, u := range users {
		if err := dump.Model(r.Context(), dw, st, u); err != nil {
			s.Log.Error("control: dump failed", "user", u, "err", err)
			panic(http.ErrAbortHandler)
		}
	}
	if err := dw.Close(); err != nil {
		s.Log.Error("control: dump failed", "err", err)
		panic(http.ErrAbortHandler)
	}
	return written{}, nil
}

// written is the answer of a handler that wrote its response itself.
type written struct{}

// Restored is what POST /v1/admin/restore did to one model.
type Restored struct {
	User    string   `json:"user"`
	Classes []string `json:"classes"`
	Tokens  int      `json:"tokens"`
	Seen    int      `json:"seen"`
}

// RestoreResult answers POST /v1/admin/restore: the models restored, in
// the dump's order, and the error that ended the restore, if any; the
// models before it stay restored, none is there in part.
type RestoreResult struct {
	Restored []Restored `json:"restored"`
	Error    string     `json:"error,omitempty"`
	code     int
}

// status answers a restore that failed with what failed it: 409 for a
// model that exists, 400 for a damaged dump, 503 for the store.
func (r RestoreResult) status() int {
	if r.code == 0 {
		return http.StatusOK
	}
	return r.code
}

// failed ends a restore result with err.
func (r RestoreResult) failed(err error) RestoreResult {
	r.Error = err.Error()
	switch {
	case errors.Is(err, store.ErrExists):
		r.code = http.StatusConflict
	case errors.Is(err, dump.ErrFormat), errors.Is(err, store.ErrInvalidUser), errors.Is(err, store.ErrInvalidClass):
		r.code = http.StatusBadRequest
	default:
		r.code = statusOf(err).status
	}
	return r
}

// restoreModels restores the models of the dump in the request's body
// that its user parameters name (every one without), under the name of
// its as parameter when it names one model.
func (s *Server) restoreModels(w http.ResponseWriter, r *http.Request) (any, error) {
	if err := s.mayMaintain(r); err != nil {
		return nil, err
	}
	users, named, err := usersParam(r)
	if err != nil {
		return nil, err
	}
	as := r.URL.Query().Get("as")
	if as != "" {
		if err := store.ValidUser(as); err != nil {
			return nil, fail(http.StatusBadRequest, fmt.Errorf("as: %w", err))
		}
		if len(users) != 1 {
			return nil, fail(http.StatusBadRequest, errors.New("as renames one model: name it with one user parameter"))
		}
	}
	// A restore writes as training does: it takes a training slot.
	release, err := s.withBody(r, true)
	if err != nil {
		return nil, err
	}
	defer release()
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(maintenanceTime))
	// A store restores under its write lock, which the milter's
	// autolearn waits for: the dump is read from a local file, at disk
	// speed, rather than from a client that may send it slowly.
	spool, err := os.CreateTemp("", "spamd-restore-*")
	if err != nil {
		return nil, retryLater(fmt.Errorf("spool the dump: %w", err), faultWait)
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	if _, err := io.Copy(spool, r.Body); err != nil {
		return nil, fail(http.StatusBadRequest, fmt.Errorf("read the dump: %w", err))
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("spool the dump: %w", err)
	}
	dr, err := dump.NewReader(spool)
	if err != nil {
		return nil, fail(http.StatusBadRequest, err)
	}
	st := s.Filter().Store()
	var out RestoreResult
	for {
		user, classes, err := dr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return out.failed(err), nil
		}
		if named && !slices.Contains(users, user) {
			if err := dr.Skip(); err != nil {
				return out.failed(err), nil
			}
			continue
		}
		target := user
		if as != "" {
			target = as
		}
		res := Restored{User: target, Classes: classes}
		next := func() (store.Record, error) {
			rec, err := dr.Record()
			switch {
			case err != nil:
			case rec.Counts != nil:
				res.Tokens++
			case rec.Class != "":
				res.Seen++
			}
			return rec, err
		}
		if err := st.Restore(r.Context(), target, next); err != nil {
			return out.failed(err), nil
		}
		s.Log.Info("control: model restored", "user", target, "tokens", res.Tokens, "seen", res.Seen)
		out.Restored = append(out.Restored, res)
	}
	if named && len(out.Restored) < len(users) {
		out.Error = fmt.Sprintf("the dump holds %d of the %d models asked for", len(out.Restored), len(users))
		out.code = http.StatusNotFound
	}
	return out, nil
}

// DeleteResult answers POST /v1/admin/delete-user.
type DeleteResult struct {
	Deleted []Deleted `json:"deleted"`
}

// Deleted is what POST /v1/admin/delete-user did to one model.
type Deleted struct {
	User     string `json:"user"`
	Messages uint64 `json:"messages"`
	Tokens   uint64 `json:"tokens"`
}

// deleteModels deletes the models the request's user parameters name.
func (s *Server) deleteModels(_ http.ResponseWriter, r *http.Request) (any, error) {
	if err := s.mayMaintain(r); err != nil {
		return nil, err
	}
	users, named, err := usersParam(r)
	if err != nil {
		return nil, err
	}
	if !named {
		return nil, fail(http.StatusBadRequest, errors.New("name the models to delete with user parameters (user= is the global model)"))
	}
	st := s.Filter().Store()
	out := DeleteResult{Deleted: []Deleted{}}
	for _, u := range users {
		t, err := st.Totals(r.Context(), u)
		if err != nil {
			return nil, fmt.Errorf("totals of %q: %w", u, err)
		}
		if err := st.DeleteUser(r.Context(), u); err != nil {
			return nil, fmt.Errorf("delete %q: %w", u, err)
		}
		d := Deleted{User: u, Tokens: t.Vocabulary}
		for _, n := range t.Messages {
			d.Messages += n
		}
		s.Log.Info("control: model deleted", "user", u, "messages", d.Messages, "tokens", d.Tokens)
		out.Deleted = append(out.Deleted, d)
	}
	return out, nil
}

// CheckResult answers POST /v1/admin/check.
type CheckResult struct {
	Models []Checked `json:"models"`
}

// Checked is the verdict of POST /v1/admin/check on one model: "" when
// it is consistent.
type Checked struct {
	User  string `json:"user"`
	Error string `json:"error,omitempty"`
}

// checkModels checks every model.
func (s *Server) checkModels(_ http.ResponseWriter, r *http.Request) (any, error) {
	if err := s.mayMaintain(r); err != nil {
		return nil, err
	}
	st := s.Filter().Store()
	users, err := st.Users(r.Context())
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	out := CheckResult{Models: []Checked{}}
	for _, u := range users {
		c := Checked{User: u}
		if err := st.Check(r.Context(), u); errors.Is(err, store.ErrInconsistent) {
			c.Error = err.Error()
		} else if err != nil {
			return nil, fmt.Errorf("check %q: %w", u, err)
		}
		out.Models = append(out.Models, c)
	}
	return out, nil
}

// compact compacts the store.
func (s *Server) compact(_ http.ResponseWriter, r *http.Request) (any, error) {
	if err := s.mayMaintain(r); err != nil {
		return nil, err
	}
	if s.Compact == nil {
		return nil, fail(http.StatusNotImplemented, errors.New("this store has nothing to compact: Redis frees what it no longer holds"))
	}
	out, err := s.Compact(r.Context())
	if err != nil {
		return nil, fmt.Errorf("compact: %w", err)
	}
	s.Log.Info("control: store compacted", "before_bytes", out.Before(), "after_bytes", out.After(), "flushed", out.Flushed)
	return out, nil
}

// PruneResult answers POST /v1/admin/prune: the rule in words and what
// it deleted from each model.
type PruneResult struct {
	Rule   string   `json:"rule"`
	Models []Pruned `json:"models"`
}

// Pruned is what a prune deleted from one model: token rows and seen
// records, and the tokens it keeps.
type Pruned struct {
	User       string `json:"user"`
	Tokens     uint64 `json:"tokens"`
	Seen       uint64 `json:"seen"`
	Vocabulary uint64 `json:"vocabulary"`
}

// pruneModels prunes the models the request's user parameters name,
// every model without one, by the rule of its count, before,
// seen_before and max_tokens parameters (days as YYYY-MM-DD).
func (s *Server) pruneModels(_ http.ResponseWriter, r *http.Request) (any, error) {
	if err := s.mayMaintain(r); err != nil {
		return nil, err
	}
	users, named, err := usersParam(r)
	if err != nil {
		return nil, err
	}
	rule, err := pruneRuleParam(r.URL.Query())
	if err != nil {
		return nil, fail(http.StatusBadRequest, err)
	}
	st := s.Filter().Store()
	if !named {
		if users, err = st.Users(r.Context()); err != nil {
			return nil, fmt.Errorf("list users: %w", err)
		}
	}
	// A prune writes as training does: it takes a training slot.
	release, err := s.withBody(r, true)
	if err != nil {
		return nil, err
	}
	defer release()
	out := PruneResult{Rule: rule.String(), Models: []Pruned{}}
	for _, u := range users {
		res, err := st.Prune(r.Context(), u, rule)
		if err != nil {
			return nil, fmt.Errorf("prune %q: %w", u, err)
		}
		s.Log.Info("control: model pruned", "user", u, "rule", out.Rule, "tokens", res.Tokens, "seen", res.Seen, "vocabulary", res.Vocabulary)
		out.Models = append(out.Models, Pruned{User: u, Tokens: res.Tokens, Seen: res.Seen, Vocabulary: res.Vocabulary})
	}
	return out, nil
}

// pruneRuleParam reads a prune rule from q, as PruneQuery writes it.
func pruneRuleParam(q url.Values) (store.PruneRule, error) {
	var r store.PruneRule
	var err error
	num := func(key string) uint64 {
		v := q.Get(key)
		if v == "" || err != nil {
			return 0
		}
		n, perr := strconv.ParseUint(v, 10, 64)
		if perr != nil {
			err = fmt.Errorf("%s: %q is not a count", key, v)
		}
		return n
	}
	day := func(key string) store.Day {
		v := q.Get(key)
		if v == "" || err != nil {
			return 0
		}
		t, perr := time.Parse(time.DateOnly, v)
		if perr != nil || t.Unix() <= 0 {
			err = fmt.Errorf("%s: %q is not a day (YYYY-MM-DD)", key, v)
		}
		return store.DayOf(t)
	}
	r.MaxCount, r.MaxTokens = num("count"), num("max_tokens")
	r.Before, r.SeenBefore = day("before"), day("seen_before")
	if err == nil && r.Zero() {
		err = errors.New("the rule deletes nothing: give before, seen_before or max_tokens")
	}
	if err == nil && r.Before != 0 && r.MaxCount == 0 {
		err = errors.New("count: 0 with before prunes no token (none is seen 0 times): give 1 or more")
	}
	return r, err
}

// PruneQuery writes rule as the prune endpoint reads it.
func PruneQuery(rule store.PruneRule) url.Values {
	q := url.Values{}
	q.Set("count", strconv.FormatUint(rule.MaxCount, 10))
	if rule.Before != 0 {
		q.Set("before", rule.Before.String())
	}
	if rule.SeenBefore != 0 {
		q.Set("seen_before", rule.SeenBefore.String())
	}
	if rule.MaxTokens != 0 {
		q.Set("max_tokens", strconv.FormatUint(rule.MaxTokens, 10))
	}
	return q
}
