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
}

func (e *Error) Error() string { return fmt.Sprintf("spamd: %s (HTTP %d)", e.Message, e.Status) }

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

// do sends a request and decodes the JSON answer into out.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body io.Reader, out any) error {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("spamd at %s: %w", c.addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var e errorBody
		if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e); err != nil || e.Error == "" {
			e.Error = resp.Status
		}
		return &Error{Status: resp.StatusCode, Message: e.Error}
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
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
	err := c.do(ctx, http.MethodPost, "/v1/classify", q, bytes.NewReader(raw), &v)
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
	if err := c.do(ctx, http.MethodPost, "/v1/train", url.Values{"user": {user}}, bytes.NewReader(body), &out); err != nil {
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

// Report reports that raw belongs to class for user; the daemon queues
// the report and applies it in the background. source names the channel
// in the daemon's log ("" for "api").
func (c *Client) Report(ctx context.Context, user, class, source string, raw []byte) (ReportResponse, error) {
	var out ReportResponse
	q := url.Values{"user": {user}, "class": {class}}
	if source != "" {
		q.Set("source", source)
	}
	err := c.do(ctx, http.MethodPost, "/v1/report", q, bytes.NewReader(raw), &out)
	return out, err
}
