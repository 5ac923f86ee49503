package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Error is an error answer of the API.
type Error struct {
	// Status is the HTTP status.
	Status int
	// Message is the daemon's explanation.
	Message string
	// RetryAfter is when the daemon said to try again (Retry-After), 0
	// if it did not.
	RetryAfter time.Duration
}

func (e *Error) Error() string { return fmt.Sprintf("spamd: %s (HTTP %d)", e.Message, e.Status) }

// Temporary reports whether a request that failed with err may succeed
// if made again: the daemon could not be reached, did not answer in time,
// or answered 5xx, 408 or 429. A 4xx answer is final, and so is a
// canceled request. Whether the caller's own deadline has passed is its
// context's to say: a dial timing out is temporary too.
func Temporary(err error) bool {
	var e *Error
	switch {
	case err == nil, errors.Is(err, context.Canceled):
		return false
	case errors.As(err, &e):
		return e.Status >= 500 || e.Status == http.StatusRequestTimeout || e.Status == http.StatusTooManyRequests
	}
	return true
}

// maxRetryWait bounds the time a request spends waiting to be made again
// on a 503 with Retry-After: a daemon busy, or briefly unable to write.
const maxRetryWait = 30 * time.Second

// Client talks to a running daemon's control API. It is safe for
// concurrent use.
type Client struct {
	addr  string
	base  string
	token string
	hc    *http.Client
}

// NewClient returns a client of the API at addr: a unix socket, as
// "unix:/run/spamd/api.sock" or a bare absolute path, or loopback TCP, as
// "tcp://127.0.0.1:11333" or "http://127.0.0.1:11333". A token that is
// not empty is sent as the bearer token, which TCP needs.
func NewClient(addr, token string) (*Client, error) {
	c := &Client{addr: addr, token: token}
	d := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}
	switch {
	case strings.HasPrefix(addr, "unix:") || strings.HasPrefix(addr, "/"):
		path := strings.TrimPrefix(addr, "unix:")
		if !strings.HasPrefix(path, "/") {
			return nil, fmt.Errorf("control address %q: the socket path must be absolute", addr)
		}
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", path)
		}
		c.base = "http://spamd"
	case strings.HasPrefix(addr, "tcp://") || strings.HasPrefix(addr, "http://"):
		hp := strings.TrimPrefix(strings.TrimPrefix(addr, "tcp://"), "http://")
		if _, _, err := net.SplitHostPort(hp); err != nil {
			return nil, fmt.Errorf("control address %q: %v", addr, err)
		}
		tr.DialContext = d.DialContext
		c.base = "http://" + hp
	default:
		return nil, fmt.Errorf("control address %q: want unix:/PATH, /PATH, tcp://HOST:PORT or http://HOST:PORT", addr)
	}
	c.hc = &http.Client{Transport: tr}
	return c, nil
}

// Addr returns the address the client talks to.
func (c *Client) Addr() string { return c.addr }

// do sends a request and decodes the JSON answer into out. Answered 503
// with Retry-After, it makes the request again after that wait, for up to
// maxRetryWait in all and never past ctx's deadline: every request of the
// API may be made twice (training a message twice counts once).
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body []byte, out any) error {
	waited := time.Duration(0)
	for {
		err := c.once(ctx, method, path, q, body, out)
		var e *Error
		if !errors.As(err, &e) || e.Status != http.StatusServiceUnavailable || e.RetryAfter <= 0 {
			return err
		}
		wait := e.RetryAfter
		if d, ok := ctx.Deadline(); (ok && time.Until(d) < wait) || waited+wait > maxRetryWait {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		waited += wait
	}
}

// once sends a request once and decodes its JSON answer into out.
func (c *Client) once(ctx context.Context, method, path string, q url.Values, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	resp, err := c.stream(ctx, method, path, q, rd)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// stream sends one request whose body is body (nil for none) and returns
// the response, or the daemon's error for a status it answers with one
// and that is not in ok.
func (c *Client) stream(ctx context.Context, method, path string, q url.Values, body io.Reader, ok ...int) (*http.Response, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("spamd at %s: %w", c.addr, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	for _, s := range ok {
		if resp.StatusCode == s {
			return resp, nil
		}
	}
	defer resp.Body.Close()
	var e errorBody
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e); err != nil || e.Error == "" {
		e.Error = resp.Status
	}
	ae := &Error{Status: resp.StatusCode, Message: e.Error}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
		ae.RetryAfter = time.Duration(min(s, 3600)) * time.Second
	}
	return nil, ae
}

// Health checks that the daemon answers and can read its store.
func (c *Client) Health(ctx context.Context) error {
	var out map[string]string
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil, &out)
}

// Classify classifies raw for user, listing explain features toward each
// side.
func (c *Client) Classify(ctx context.Context, user string, raw []byte, explain int) (Verdict, error) {
	var v Verdict
	q := url.Values{"user": {user}}
	if explain > 0 {
		q.Set("explain", strconv.Itoa(explain))
	}
	err := c.do(ctx, http.MethodPost, "/v1/classify", q, raw, &v)
	return v, err
}

// Decide classifies raw for user and asks what the milter would do
// with it for user as its recipient (Verdict.Decision), sender being
// the envelope sender ("" for the null sender).
func (c *Client) Decide(ctx context.Context, user, sender string, raw []byte, explain int) (Verdict, error) {
	var v Verdict
	q := url.Values{"user": {user}, "decide": {"1"}, "sender": {sender}}
	if explain > 0 {
		q.Set("explain", strconv.Itoa(explain))
	}
	err := c.do(ctx, http.MethodPost, "/v1/classify", q, raw, &v)
	if err == nil && v.Decision == nil {
		err = errors.New("classify: spamd gave no decision: it is older than this spamtrain and applies no preferences for it")
	}
	return v, err
}

// Train trains, relabels or forgets items for user in one batch and
// returns what it did to each, in order.
func (c *Client) Train(ctx context.Context, user string, items []Item) ([]TrainResult, error) {
	body, err := json.Marshal(TrainRequest{Items: items})
	if err != nil {
		return nil, fmt.Errorf("encode batch: %w", err)
	}
	var out TrainResponse
	if err := c.do(ctx, http.MethodPost, "/v1/train", url.Values{"user": {user}}, body, &out); err != nil {
		return nil, err
	}
	if len(out.Results) != len(items) {
		return nil, errors.New("spamd answered a batch with the wrong number of results")
	}
	return out.Results, nil
}

// Stats returns the store's users, their message and token counts, and
// its size.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	err := c.do(ctx, http.MethodGet, "/v1/stats", nil, nil, &s)
	return s, err
}

// StatsSizes is Stats with each model's size in the store
// (UserStats.Bytes), which takes a read of all its keys.
func (c *Client) StatsSizes(ctx context.Context) (Stats, error) {
	var s Stats
	err := c.do(ctx, http.MethodGet, "/v1/stats", url.Values{"sizes": {"1"}}, nil, &s)
	return s, err
}

// Report reports that raw belongs to class for user; the daemon queues
// the report and applies it in the background. source names the channel
// in the daemon's log ("" for "api"). Unlike the other requests it is
// made once, whatever the answer: its caller decides whether and when to
// try again (Temporary, Error.RetryAfter), and says so.
func (c *Client) Report(ctx context.Context, user, class, source string, raw []byte) (ReportResponse, error) {
	var out ReportResponse
	q := url.Values{"user": {user}, "class": {class}}
	if source != "" {
		q.Set("source", source)
	}
	err := c.once(ctx, http.MethodPost, "/v1/report", q, raw, &out)
	return out, err
}

// HistoryQuery selects verdicts of the history.
type HistoryQuery struct {
	// Limit is the most entries returned, 0 for the daemon's default
	// (100).
	Limit int
	// Before and After, when not 0, keep the entries with an ID below
	// Before and above After.
	Before, After uint64
	// User keeps the mail of one user; Verdict the entries of one
	// verdict (ham, unsure, spam, skipped, error).
	User, Verdict string
}

// History returns the milter's latest verdicts that q selects, newest
// first.
func (c *Client) History(ctx context.Context, q HistoryQuery) (History, error) {
	v := url.Values{}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Before > 0 {
		v.Set("before", strconv.FormatUint(q.Before, 10))
	}
	if q.After > 0 {
		v.Set("after", strconv.FormatUint(q.After, 10))
	}
	if q.User != "" {
		v.Set("user", q.User)
	}
	if q.Verdict != "" {
		v.Set("verdict", q.Verdict)
	}
	var h History
	err := c.do(ctx, http.MethodGet, "/v1/history", v, nil, &h)
	return h, err
}
