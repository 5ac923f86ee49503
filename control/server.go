package control

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spamd/spamd/decide"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/history"
	"github.com/spamd/spamd/identity"
	"github.com/spamd/spamd/internal/parallel"
	"github.com/spamd/spamd/nb"
	"github.com/spamd/spamd/reportq"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/tokenize"
)

// Observer is told what the API does, for metrics. Its methods must be
// safe for concurrent use and return quickly.
type Observer interface {
	// Request reports one request: its endpoint ("classify", "learn",
	// "forget", "train", "stats" or "health") and the HTTP status answered.
	Request(endpoint string, status int)
	// Trained reports one message whose training changed a model, with
	// the class it is now trained as, "" when it was forgotten.
	Trained(class string)
}

type nopObserver struct{}

func (nopObserver) Request(string, int) {}
func (nopObserver) Trained(string)      {}

// Options configure a Server.
type Options struct {
	// Filter returns the filter to use; it may change between calls (on
	// a reload).
	Filter func() *filter.Filter
	// Size, if not nil, reports the store's size on disk.
	Size func() (lsm, vlog int64)
	// Compact, if not nil, compacts the store and says what it did (POST
	// /v1/admin/compact); without it the endpoint answers 501.
	Compact func(ctx context.Context) (store.Compaction, error)
	// Dir is the store's directory, reported by stats.
	Dir string
	// Rule, if not nil, returns the naming rule the milter selects
	// users' models by, for stats to tell the models it never reads.
	Rule func() identity.Rule
	// Admins lists unix accounts that may train any user's model.
	Admins []string
	// Token is the bearer token of TCP clients; empty refuses them.
	Token string
	// Log receives one line per training request and every failure.
	Log *slog.Logger
	// Observer, if not nil, is told about requests and training.
	Observer Observer
	// Reporters lists unix accounts that may report messages for any
	// user but the global model.
	Reporters []string
	// Enqueue, if not nil, queues a report for the background to apply
	// (POST /v1/report) and returns its id; without it the endpoint
	// answers 404.
	Enqueue func(ctx context.Context, r reportq.Report) (string, error)
	// ReportModel, if not nil, names the model a report's user (as the
	// mail side names it: Dovecot's %u) corrects, by the site's naming
	// rule (identity.Rule.Folder); ok false refuses the report.
	ReportModel func(user string) (model string, ok bool)
	// Pending, if not nil, counts the reports queued and not yet
	// applied, for stats.
	Pending func() int
	// Classified, if not nil, sums up the mail classified so far, for
	// stats.
	Classified func() Classified
	// Limits bound the requests; a zero field takes DefaultLimits'.
	Limits Limits
	// History, if not nil, is the milter's latest verdicts, served by
	// GET /v1/history; without it the endpoint answers 404.
	History *history.Ring
	// Prefs, if not nil, gives and changes the recipients' preferences
	// (/v1/prefs); without it the endpoint answers 404.
	Prefs PrefsService
}

// Server serves the control API. It is safe for concurrent use.
type Server struct {
	Options
	uid int // the daemon's own uid
	// requests and training hold a slot per request with a body, and per
	// training request, served.
	requests, training slots
}

// NewServer returns a server with options o.
func NewServer(o Options) *Server {
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	o.Limits = o.Limits.withDefaults()
	return &Server{Options: o, uid: os.Getuid(),
		requests: make(slots, o.Limits.MaxRequests), training: make(slots, o.Limits.MaxTraining)}
}

// Handler returns the API's handler, every endpoint included.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", s.endpoint("health", false, s.health))
	mux.Handle("GET /v1/stats", s.endpoint("stats", true, s.stats))
	mux.Handle("POST /v1/classify", s.endpoint("classify", true, s.classify))
	mux.Handle("POST /v1/learn", s.endpoint("learn", true, s.learn))
	mux.Handle("POST /v1/forget", s.endpoint("forget", true, s.forget))
	mux.Handle("POST /v1/train", s.endpoint("train", true, s.train))
	mux.Handle("POST /v1/report", s.endpoint("report", true, s.report))
	mux.Handle("GET /v1/history", s.endpoint("history", true, s.history))
	mux.Handle("GET /v1/prefs", s.endpoint("prefs", true, s.getPrefs))
	mux.Handle("PUT /v1/prefs", s.endpoint("prefs", true, s.putPrefs))
	mux.Handle("GET /v1/admin/dump", s.endpoint("dump", true, s.dumpModels))
	mux.Handle("POST /v1/admin/restore", s.endpoint("restore", true, s.restoreModels))
	mux.Handle("POST /v1/admin/delete-user", s.endpoint("delete-user", true, s.deleteModels))
	mux.Handle("POST /v1/admin/check", s.endpoint("check", true, s.checkModels))
	mux.Handle("POST /v1/admin/compact", s.endpoint("compact", true, s.compact))
	mux.Handle("POST /v1/admin/prune", s.endpoint("prune", true, s.pruneModels))
	return mux
}

// Health returns the handler of /healthz alone, for listeners that serve
// nothing else of the API (the metrics endpoint).
func (s *Server) Health() http.Handler { return s.endpoint("health", false, s.health) }

// httpError is an error with the status to answer it with, and for a
// 503 when to try again.
type httpError struct {
	status     int
	err        error
	retryAfter time.Duration
}

func (e *httpError) Error() string { return e.err.Error() }
func (e *httpError) Unwrap() error { return e.err }

func fail(status int, err error) error { return &httpError{status: status, err: err} }

// retryLater is a transient failure: 503, to try again after wait.
func retryLater(err error, wait time.Duration) error {
	return &httpError{status: http.StatusServiceUnavailable, err: err, retryAfter: wait}
}

// faultWait is when to try again after a failure of the store or of the
// report spool: long enough for a restart, short enough for a pipe.
const faultWait = 2 * time.Second

// statusOf is the answer to err: its own status if it has one; 500 for an
// inconsistent store, which trying again does not mend; otherwise 503,
// since what fails in the daemon rather than in the request (the store,
// the disk, the spool, a deadline) is transient.
func statusOf(err error) *httpError {
	var he *httpError
	switch {
	case errors.As(err, &he):
		if he.status == http.StatusServiceUnavailable && he.retryAfter <= 0 {
			return &httpError{status: he.status, err: err, retryAfter: faultWait}
		}
		return he
	case errors.Is(err, store.ErrInconsistent):
		return &httpError{status: http.StatusInternalServerError, err: err}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &httpError{status: http.StatusServiceUnavailable, err: err, retryAfter: time.Second}
	}
	return &httpError{status: http.StatusServiceUnavailable, err: err, retryAfter: faultWait}
}

// endpoint wraps a handler: authentication, panics, errors as JSON, and
// the observer.
func (s *Server) endpoint(name string, auth bool, h func(w http.ResponseWriter, r *http.Request) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status := http.StatusOK
		defer func() {
			if v := recover(); v != nil {
				s.Log.Error("control: panic", "endpoint", name, "panic", v, "stack", string(debug.Stack()))
				status = http.StatusInternalServerError
				writeJSON(w, status, errorBody{"internal error"})
			}
			s.Observer.Request(name, status)
		}()
		var v any
		err := error(nil)
		if auth {
			if err = s.authenticate(r); err != nil {
				err = fail(http.StatusUnauthorized, err)
			}
		}
		if err == nil {
			v, err = h(w, r)
		}
		if err != nil {
			he := statusOf(err)
			status = he.status
			if status >= 500 {
				s.Log.Error("control: request failed", "endpoint", name, "user", r.URL.Query().Get("user"), "status", status, "err", err)
			}
			if he.retryAfter > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(int(max(time.Second, he.retryAfter).Round(time.Second)/time.Second)))
			}
			writeJSON(w, status, errorBody{err.Error()})
			return
		}
		if _, ok := v.(written); ok {
			return
		}
		if sc, ok := v.(interface{ status() int }); ok {
			status = sc.status()
		}
		writeJSON(w, status, v)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// userParam returns the request's user, checked.
func userParam(r *http.Request) (string, error) {
	u := r.URL.Query().Get("user")
	if err := store.ValidUser(u); err != nil {
		return "", fail(http.StatusBadRequest, err)
	}
	return u, nil
}

// readBody reads the request body, at most limit bytes.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, fail(http.StatusRequestEntityTooLarge, fmt.Errorf("request larger than %d bytes", limit))
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The client sent its body too slowly (read_timeout).
		return nil, fail(http.StatusRequestTimeout, fmt.Errorf("read request: %w", err))
	case err != nil:
		return nil, fail(http.StatusBadRequest, fmt.Errorf("read request: %w", err))
	}
	return b, nil
}

// filterError gives a filter error its status: 400 for what is wrong with
// the request, statusOf's for the rest.
func filterError(err error) error {
	switch {
	case errors.Is(err, tokenize.ErrMalformed), errors.Is(err, store.ErrInvalidUser),
		errors.Is(err, store.ErrInvalidClass), errors.Is(err, filter.ErrUnknownClass):
		return fail(http.StatusBadRequest, err)
	}
	return err
}

// withBody runs the part of a request that reads a message body, in one
// of Limits.MaxRequests slots and, for training, one of
// Limits.MaxTraining.
func (s *Server) withBody(r *http.Request, training bool) (release func(), err error) {
	rel, err := s.requests.acquire(r.Context(), s.Limits.QueueWait)
	if err != nil {
		return nil, err
	}
	if !training {
		return rel, nil
	}
	relTrain, err := s.training.acquire(r.Context(), s.Limits.QueueWait)
	if err != nil {
		rel()
		return nil, err
	}
	return func() { relTrain(); rel() }, nil
}

func (s *Server) health(_ http.ResponseWriter, r *http.Request) (any, error) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	f := s.Filter()
	st := f.Store()
	var degraded []string
	if hr, ok := st.(store.HealthReporter); ok {
		switch h := hr.Health(); h.State {
		case store.StateFailed:
			return nil, retryLater(fmt.Errorf("store failed: %s", h.Reason), faultWait)
		case store.StateDegraded:
			// Mail is still classified; training waits.
			degraded = append(degraded, h.Reason)
		}
	}
	t, err := st.Totals(ctx, "")
	if err != nil {
		return nil, retryLater(fmt.Errorf("store: %w", err), faultWait)
	}
	if why := undertrained(f.Config(), t); why != "" {
		degraded = append(degraded, why)
	}
	if len(degraded) > 0 {
		return map[string]string{"status": "degraded", "reason": strings.Join(degraded, "; ")}, nil
	}
	return map[string]string{"status": "ok"}, nil
}

// undertrained says why the global model t judges every message unsure,
// "" when it has learned min_trained messages of spam and of ham. The
// daemon works, but a model of too few messages filters nothing: the
// first thing an administrator must hear.
func undertrained(c filter.Config, t store.Totals) string {
	n := func(class string) uint64 {
		if i := t.Index(class); i >= 0 {
			return t.Messages[i]
		}
		return 0
	}
	pos, neg := n(c.Positive), n(c.Negative)
	if pos >= uint64(c.MinTrained) && neg >= uint64(c.MinTrained) {
		return ""
	}
	return fmt.Sprintf("the global model has learned %d %s and %d %s messages, fewer than min_trained (%d) of each: every verdict is unsure until it learns more (spamtrain train)",
		pos, c.Positive, neg, c.Negative, c.MinTrained)
}

// stats describes the store: every model to a peer that reads all, else
// the global model and the peer's own.
func (s *Server) stats(_ http.ResponseWriter, r *http.Request) (any, error) {
	st := s.Filter().Store()
	users, err := st.Users(r.Context())
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	// The peer's account is looked up once, not once per model.
	if all, _, account, _ := s.who(r); !all {
		users = slices.DeleteFunc(users, func(u string) bool { return u != "" && (account == "" || u != account) })
	}
	out := Stats{Dir: s.Dir, Classes: s.Filter().Config().Classes, Users: []UserStats{}}
	// Sizes read every key of a model: only for who asks.
	sizes := r.URL.Query().Get("sizes") == "1"
	if s.Size != nil {
		out.LSMBytes, out.LogBytes = s.Size()
	}
	if s.Pending != nil {
		out.PendingReports = s.Pending()
	}
	if s.Classified != nil {
		c := s.Classified()
		out.Classified = &c
	}
	for _, u := range users {
		t, err := st.Totals(r.Context(), u)
		if err != nil {
			return nil, fmt.Errorf("totals of %q: %w", u, err)
		}
		us := UserStats{User: u, Messages: map[string]uint64{}, Tokens: map[string]uint64{}, Vocabulary: t.Vocabulary, LastTrained: LastTrained(t.LastDay)}
		if sz, ok := st.(store.Sizer); ok && sizes {
			if us.Bytes, err = sz.UserSize(r.Context(), u); err != nil {
				return nil, fmt.Errorf("size of %q: %w", u, err)
			}
		}
		if s.Rule != nil {
			us.Unread = s.Rule().Unread(u)
		}
		for i, c := range t.Classes {
			us.Messages[c] = t.Messages[i]
			us.Tokens[c] = t.Tokens[i]
		}
		out.Users = append(out.Users, us)
	}
	return out, nil
}

func (s *Server) classify(w http.ResponseWriter, r *http.Request) (any, error) {
	user, err := userParam(r)
	if err != nil {
		return nil, err
	}
	explain := 0
	if e := r.URL.Query().Get("explain"); e != "" {
		if explain, err = strconv.Atoi(e); err != nil || explain < 0 || explain > 100 {
			return nil, fail(http.StatusBadRequest, fmt.Errorf("explain %q: want 0 to 100", e))
		}
	}
	q := r.URL.Query()
	decided := q.Get("decide") == "1"
	if !decided && (q.Has("sender") || q.Has("decide") && q.Get("decide") != "0") {
		return nil, fail(http.StatusBadRequest, errors.New("decide: want 0 or 1; sender= needs decide=1"))
	}
	if err := s.mayRead(r, user); err != nil {
		return nil, fail(http.StatusForbidden, err)
	}
	if decided && s.Prefs == nil {
		return nil, fail(http.StatusNotFound, errors.New("this server keeps no preferences"))
	}
	release, err := s.withBody(r, false)
	if err != nil {
		return nil, err
	}
	defer release()
	raw, err := readBody(w, r, s.Limits.MaxMessage)
	if err != nil {
		return nil, err
	}
	v, err := s.Filter().Classify(r.Context(), user, raw, filter.ClassifyOptions{Explain: explain, TrainedAs: true})
	if err != nil {
		return nil, filterError(err)
	}
	fc := s.Filter().Config()
	out := Verdict{
		Verdict:     v.Label(),
		Class:       v.Class,
		Spam:        !v.Unsure && fc.IsSpam(v.Class),
		Probability: v.Probability,
		Score:       v.Score,
		Posterior:   v.Posterior,
		Positive:    fc.Positive,
		Required:    fc.Required(),
		Used:        v.Used,
		Digest:      hex.EncodeToString(v.Digest[:]),
		TrainedAs:   v.TrainedAs,
		Problems:    v.Problems,
	}
	if v.Toward != nil {
		out.Toward = make(map[string][]Weight, len(v.Toward))
		for c, cs := range v.Toward {
			out.Toward[c] = weights(cs)
		}
	}
	for _, m := range v.Measures {
		out.Measures = append(out.Measures, Measure{Name: m.Name, Value: m.Text, LogRatio: m.LogRatio, Weight: m.Weight})
	}
	if decided {
		// The recipient is the user: their preferences, their domain's
		// and the site's, as the milter applies them to their mail.
		d := decide.For(fc, s.Prefs.Actions(), s.Prefs.Book().For(user, decide.DomainOf(user)),
			decide.SenderOf(raw, q.Get("sender")), v, decide.Fields(raw))
		out.Decision = decisionOf(d)
	}
	return out, nil
}

// decisionOf is the API's form of a decision.
func decisionOf(d decide.Decision) *Decision {
	out := &Decision{Verdict: d.Verdict, Spam: d.Spam, Class: d.Class, Required: d.Result.Required,
		Action: d.Outcome.Action.String(), Headers: d.Headers()}
	if d.Tag {
		out.Tag, out.SubjectTag = true, d.SubjectTag
	}
	if d.Listed {
		out.Listed, out.By = d.Listing.List, string(d.Listing.Level)
	}
	return out
}

func weights(cs []nb.Contribution) []Weight {
	ws := make([]Weight, len(cs))
	for i, c := range cs {
		ws[i] = Weight{Token: c.Name, Count: c.Count, Weight: c.Weight}
	}
	return ws
}

// trained notes in the history that user's model was just trained.
func (s *Server) trained(user string) {
	if s.History != nil {
		s.History.Trained(user, time.Now())
	}
}

// trainable returns the user of a training request, if the peer may
// train that user's model.
func (s *Server) trainable(r *http.Request) (string, error) {
	user, err := userParam(r)
	if err != nil {
		return "", err
	}
	if err := s.mayTrain(r, user); err != nil {
		return "", fail(http.StatusForbidden, err)
	}
	return user, nil
}

// checkClass checks that class is "" (forget) or a configured class.
func checkClass(f *filter.Filter, class string) error {
	if class != "" && !f.Config().HasClass(class) {
		return fail(http.StatusBadRequest, fmt.Errorf("%w %q (classes: %q)", filter.ErrUnknownClass, class, f.Config().Classes))
	}
	return nil
}

func (s *Server) learn(w http.ResponseWriter, r *http.Request) (any, error) {
	class := r.URL.Query().Get("class")
	if class == "" {
		return nil, fail(http.StatusBadRequest, errors.New("learn needs class=CLASS (POST /v1/forget forgets)"))
	}
	return s.learnOne(w, r, class)
}

func (s *Server) forget(w http.ResponseWriter, r *http.Request) (any, error) {
	return s.learnOne(w, r, "")
}

func (s *Server) learnOne(w http.ResponseWriter, r *http.Request, class string) (any, error) {
	user, err := s.trainable(r)
	if err != nil {
		return nil, err
	}
	f := s.Filter()
	if err := checkClass(f, class); err != nil {
		return nil, err
	}
	release, err := s.withBody(r, true)
	if err != nil {
		return nil, err
	}
	defer release()
	raw, err := readBody(w, r, s.Limits.MaxMessage)
	if err != nil {
		return nil, err
	}
	p, err := f.Prepare(raw, false)
	if err != nil {
		return nil, filterError(err)
	}
	res, err := f.Train(r.Context(), user, []filter.Item{{Prepared: p, Class: class}})
	if err != nil {
		return nil, filterError(err)
	}
	out := TrainResult{Digest: hex.EncodeToString(p.Digest[:]), Prev: res[0].Prev, Changed: res[0].Changed}
	if out.Changed {
		s.Observer.Trained(class)
		s.trained(user)
	}
	s.Log.Info("control: trained", "user", user, "class", class, "digest", out.Digest, "prev", out.Prev, "changed", out.Changed)
	return out, nil
}

// trainChunk is how many messages of a batch are trained at once, in one
// store write each as always, but with the prepared messages of a chunk
// only in memory.
const trainChunk = 64

// train trains a batch as it streams in: each message is decoded, prepared
// on one of the CPUs and trained in order, chunk by chunk, so that the
// memory of a batch is that of a few messages, whatever its size. A
// message that is not one, of an unknown class or too large, gets an
// error of its own; an error of the whole batch (malformed JSON, a
// request over Limits.MaxBatch) answers the request, the messages before
// it being trained, which training again does not change.
func (s *Server) train(w http.ResponseWriter, r *http.Request) (any, error) {
	user, err := s.trainable(r)
	if err != nil {
		return nil, err
	}
	release, err := s.withBody(r, true)
	if err != nil {
		return nil, err
	}
	defer release()
	f := s.Filter()
	lim := s.Limits
	rc := http.NewResponseController(w)
	// Each message read and trained earns the request the read and write
	// timeouts again: a batch may take long, a stalled one may not.
	extend := func() {
		now := time.Now()
		_ = rc.SetReadDeadline(now.Add(lim.ReadTimeout))
		_ = rc.SetWriteDeadline(now.Add(lim.WriteTimeout))
	}
	dec := NewBatchDecoder(http.MaxBytesReader(w, r.Body, lim.MaxBatch), lim.MaxMessage)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()

	// The decoder's goroutine hands over messages while the ones before
	// them are prepared; budget bounds the bytes of those waiting.
	type decoded struct {
		i  int
		it Item
	}
	in := make(chan decoded)
	var decErr error
	budget := newBudget(2 * lim.MaxMessage)
	decoding := make(chan struct{})
	go func() {
		defer close(decoding)
		defer close(in)
		defer func() {
			if v := recover(); v != nil {
				s.Log.Error("control: panic decoding a batch", "panic", v, "stack", string(debug.Stack()))
				decErr = fmt.Errorf("internal error decoding the batch: %v", v)
			}
		}()
		for i := 0; ; i++ {
			it, err := dec.Next()
			if err != nil {
				if err != io.EOF {
					decErr = err
				}
				return
			}
			if !budget.take(ctx, int64(len(it.Message))) {
				return
			}
			select {
			case in <- decoded{i, it}:
			case <-ctx.Done():
				return
			}
		}
	}()

	type prepared struct {
		i     int
		class string
		p     filter.Prepared
		err   error
	}
	var out TrainResponse
	var chunk []filter.Item
	var index []int // chunk[k] is the item out.Results[index[k]]
	changed, unparsable := 0, 0
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		res, err := f.Train(ctx, user, chunk)
		if err != nil {
			return err
		}
		for k, rs := range res {
			tr := &out.Results[index[k]]
			tr.Prev, tr.Changed = rs.Prev, rs.Changed
			if rs.Changed {
				changed++
				s.Observer.Trained(chunk[k].Class)
			}
		}
		if changed > 0 {
			s.trained(user)
		}
		clear(chunk)
		chunk, index = chunk[:0], index[:0]
		extend()
		return nil
	}
	err = parallel.Map(ctx, 0, in, func(d decoded) prepared {
		defer budget.give(int64(len(d.it.Message)))
		p := prepared{i: d.i, class: d.it.Class}
		if int64(len(d.it.Message)) > lim.MaxMessage {
			p.err = fmt.Errorf("message larger than %d bytes", lim.MaxMessage)
		} else if p.err = checkClass(f, d.it.Class); p.err == nil {
			p.p, p.err = f.Prepare(d.it.Message, false)
		}
		return p
	}, func(p prepared) error {
		extend()
		out.Results = append(out.Results, TrainResult{})
		if p.err != nil {
			out.Results[p.i].Error = p.err.Error()
			unparsable++
			return nil
		}
		out.Results[p.i].Digest = hex.EncodeToString(p.p.Digest[:])
		chunk = append(chunk, filter.Item{Prepared: p.p, Class: p.class})
		index = append(index, p.i)
		if len(chunk) == trainChunk {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	cancel()
	if err != nil {
		// Wakes the decoder if it waits for more of the body.
		_ = rc.SetReadDeadline(time.Now())
	}
	<-decoding
	if err == nil {
		err = decErr
	}
	s.Log.Info("control: trained a batch", "user", user, "messages", len(out.Results), "changed", changed, "refused", unparsable,
		"complete", err == nil)
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
	case errors.As(err, &tooBig):
		return nil, fail(http.StatusRequestEntityTooLarge, fmt.Errorf("batch larger than %d bytes; the %d messages before were trained", lim.MaxBatch, len(out.Results)))
	case errors.Is(err, ErrBatchTooLarge):
		return nil, fail(http.StatusRequestEntityTooLarge, fmt.Errorf("%w (messages up to %d bytes); the %d messages before were trained", err, lim.MaxMessage, len(out.Results)))
	case errors.Is(err, ErrBatchSyntax):
		return nil, fail(http.StatusBadRequest, fmt.Errorf("%w; the %d messages before were trained", err, len(out.Results)))
	default:
		return nil, filterError(err)
	}
	if out.Results == nil {
		out.Results = []TrainResult{}
	}
	return out, nil
}

// budget is a count of bytes to take from and give back, waiting while
// it is short; one taking more than it holds in all gets them when the
// rest is given back.
type budget struct {
	mu    sync.Mutex
	cond  *sync.Cond
	left  int64
	total int64
}

func newBudget(n int64) *budget {
	b := &budget{left: n, total: n}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// take takes n bytes, waiting for them; it reports false if ctx ends
// first.
func (b *budget) take(ctx context.Context, n int64) bool {
	n = min(n, b.total)
	stop := context.AfterFunc(ctx, func() {
		b.mu.Lock()
		b.cond.Broadcast()
		b.mu.Unlock()
	})
	defer stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.left < n {
		if ctx.Err() != nil {
			return false
		}
		b.cond.Wait()
	}
	b.left -= n
	return true
}

// give gives back n bytes taken.
func (b *budget) give(n int64) {
	n = min(n, b.total)
	b.mu.Lock()
	b.left += n
	b.cond.Broadcast()
	b.mu.Unlock()
}

// report queues a report that the body is of class for user.
func (s *Server) report(w http.ResponseWriter, r *http.Request) (any, error) {
	if s.Enqueue == nil {
		return nil, fail(http.StatusNotFound, errors.New("this daemon takes no reports"))
	}
	q := r.URL.Query()
	user, class := q.Get("user"), q.Get("class")
	if user == "" {
		return nil, fail(http.StatusBadRequest, errors.New("report needs user=USER: reports train a user's model, never the global one"))
	}
	if err := store.ValidUser(user); err != nil {
		return nil, fail(http.StatusBadRequest, err)
	}
	if class == "" {
		return nil, fail(http.StatusBadRequest, errors.New("report needs class=CLASS"))
	}
	if err := checkClass(s.Filter(), class); err != nil {
		return nil, err
	}
	if err := s.mayReport(r, user); err != nil {
		return nil, fail(http.StatusForbidden, err)
	}
	if s.ReportModel != nil {
		// The mail side names users as Dovecot does; the model is the
		// one the milter names by the same rule.
		model, ok := s.ReportModel(user)
		if !ok {
			return nil, fail(http.StatusBadRequest, fmt.Errorf("user %q names no model that mail is classified with (see [milter] users and [watch] domain)", user))
		}
		user = model
	}
	release, err := s.withBody(r, false)
	if err != nil {
		return nil, err
	}
	defer release()
	raw, err := readBody(w, r, s.Limits.MaxMessage)
	if err != nil {
		return nil, err
	}
	source := q.Get("source")
	if source == "" {
		source = "api"
	}
	id, err := s.Enqueue(r.Context(), reportq.Report{User: user, Class: class, Source: source, Message: raw})
	switch {
	case errors.Is(err, reportq.ErrInvalid):
		return nil, fail(http.StatusBadRequest, err)
	case errors.Is(err, reportq.ErrFull):
		// The queue drains as reports are applied.
		return nil, retryLater(err, 5*time.Second)
	case err != nil:
		// The spool cannot be written (a full or read-only disk): the
		// report is not queued, and the reporter must try again.
		return nil, retryLater(fmt.Errorf("report not queued: %w", err), faultWait)
	}
	s.Log.Info("control: report queued", "user", user, "class", class, "source", source, "id", id, "size", len(raw))
	return ReportResponse{ID: id}, nil
}
