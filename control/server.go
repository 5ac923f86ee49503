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
	"strconv"
	"time"

	"github.com/spamd/spamd/filter"
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
	// Dir is the store's directory, reported by stats.
	Dir string
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
	// Pending, if not nil, counts the reports queued and not yet
	// applied, for stats.
	Pending func() int
	// Classified, if not nil, sums up the mail classified so far, for
	// stats.
	Classified func() Classified
}

// Server serves the control API. It is safe for concurrent use.
type Server struct {
	Options
	uid int // the daemon's own uid
}

// NewServer returns a server with options o.
func NewServer(o Options) *Server {
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Server{Options: o, uid: os.Getuid()}
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
	return mux
}

// Health returns the handler of /healthz alone, for listeners that serve
// nothing else of the API (the metrics endpoint).
func (s *Server) Health() http.Handler { return s.endpoint("health", false, s.health) }

// httpError is an error with the status to answer it with.
type httpError struct {
	status int
	err    error
}

func (e *httpError) Error() string { return e.err.Error() }
func (e *httpError) Unwrap() error { return e.err }

func fail(status int, err error) error { return &httpError{status, err} }

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
			status = http.StatusInternalServerError
			var he *httpError
			if errors.As(err, &he) {
				status = he.status
			}
			if status >= 500 {
				s.Log.Error("control: request failed", "endpoint", name, "user", r.URL.Query().Get("user"), "err", err)
			}
			writeJSON(w, status, errorBody{err.Error()})
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
	case err != nil:
		return nil, fail(http.StatusBadRequest, fmt.Errorf("read request: %w", err))
	}
	return b, nil
}

// filterError gives a filter error its status.
func filterError(err error) error {
	switch {
	case errors.Is(err, tokenize.ErrMalformed), errors.Is(err, store.ErrInvalidUser),
		errors.Is(err, store.ErrInvalidClass), errors.Is(err, filter.ErrUnknownClass):
		return fail(http.StatusBadRequest, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fail(http.StatusServiceUnavailable, err)
	}
	return err
}

func (s *Server) health(_ http.ResponseWriter, r *http.Request) (any, error) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if _, err := s.Filter().Store().Totals(ctx, ""); err != nil {
		return nil, fail(http.StatusServiceUnavailable, fmt.Errorf("store: %w", err))
	}
	return map[string]string{"status": "ok"}, nil
}

func (s *Server) stats(_ http.ResponseWriter, r *http.Request) (any, error) {
	st := s.Filter().Store()
	users, err := st.Users(r.Context())
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	out := Stats{Dir: s.Dir, Users: []UserStats{}}
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
		us := UserStats{User: u, Messages: map[string]uint64{}, Tokens: map[string]uint64{}, Vocabulary: t.Vocabulary}
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
	raw, err := readBody(w, r, MaxMessage)
	if err != nil {
		return nil, err
	}
	v, err := s.Filter().Classify(r.Context(), user, raw, filter.ClassifyOptions{Explain: explain, TrainedAs: true})
	if err != nil {
		return nil, filterError(err)
	}
	out := Verdict{
		Verdict:     v.Label(),
		Class:       v.Class,
		Probability: v.Probability,
		Score:       v.Score,
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
	return out, nil
}

func weights(cs []nb.Contribution) []Weight {
	ws := make([]Weight, len(cs))
	for i, c := range cs {
		ws[i] = Weight{Token: c.Name, Count: c.Count, Weight: c.Weight}
	}
	return ws
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
	raw, err := readBody(w, r, MaxMessage)
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
	}
	s.Log.Info("control: trained", "user", user, "class", class, "digest", out.Digest, "prev", out.Prev, "changed", out.Changed)
	return out, nil
}

func (s *Server) train(w http.ResponseWriter, r *http.Request) (any, error) {
	user, err := s.trainable(r)
	if err != nil {
		return nil, err
	}
	body, err := readBody(w, r, MaxBatch)
	if err != nil {
		return nil, err
	}
	var req TrainRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fail(http.StatusBadRequest, fmt.Errorf("decode batch: %w", err))
	}
	f := s.Filter()
	for _, it := range req.Items {
		if err := checkClass(f, it.Class); err != nil {
			return nil, err
		}
	}
	// Parsing is the costly part and needs no store: spread it over the
	// CPUs, in order.
	in := make(chan int, len(req.Items))
	for i := range req.Items {
		in <- i
	}
	close(in)
	type prepared struct {
		i   int
		p   filter.Prepared
		err error
	}
	out := TrainResponse{Results: make([]TrainResult, len(req.Items))}
	var items []filter.Item
	var index []int // items[k] is req.Items[index[k]]
	err = parallel.Map(r.Context(), 0, in, func(i int) prepared {
		p, err := f.Prepare(req.Items[i].Message, false)
		return prepared{i, p, err}
	}, func(p prepared) error {
		req.Items[p.i].Message = nil
		if p.err != nil {
			out.Results[p.i].Error = p.err.Error()
			return nil
		}
		out.Results[p.i].Digest = hex.EncodeToString(p.p.Digest[:])
		items = append(items, filter.Item{Prepared: p.p, Class: req.Items[p.i].Class})
		index = append(index, p.i)
		return nil
	})
	if err != nil {
		return nil, filterError(err)
	}
	res, err := f.Train(r.Context(), user, items)
	if err != nil {
		return nil, filterError(err)
	}
	changed := 0
	for k, rs := range res {
		tr := &out.Results[index[k]]
		tr.Prev, tr.Changed = rs.Prev, rs.Changed
		if rs.Changed {
			changed++
			s.Observer.Trained(items[k].Class)
		}
	}
	s.Log.Info("control: trained a batch", "user", user, "messages", len(req.Items), "changed", changed, "unparsable", len(req.Items)-len(items))
	return out, nil
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
	raw, err := readBody(w, r, MaxMessage)
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
		return nil, fail(http.StatusServiceUnavailable, err)
	case err != nil:
		return nil, err
	}
	s.Log.Info("control: report queued", "user", user, "class", class, "source", source, "id", id, "size", len(raw))
	return ReportResponse{ID: id}, nil
}
