package control

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/spamd/spamd/store"
)

// usersQuery names users as the maintenance endpoints take them.
func usersQuery(users []string) url.Values {
	q := url.Values{}
	for _, u := range users {
		q.Add("user", u)
	}
	return q
}

// Dump writes the dump of the named users' models to w, every model when
// users is nil. A dump cut short by a failure in the daemon lacks its
// end line, and restore refuses it; the caller checks it with a
// dump.Reader.
func (c *Client) Dump(ctx context.Context, users []string, w io.Writer) error {
	var q url.Values
	if users != nil {
		q = usersQuery(users)
	}
	resp, err := c.stream(ctx, http.MethodGet, "/v1/admin/dump", q, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("dump from spamd at %s: %w", c.addr, err)
	}
	return nil
}

// Restore sends the dump r holds to be restored: the models of users, or
// every model of the dump when users is nil; as renames the one model
// users names. It returns what was restored, and with an error what
// stopped the restore.
func (c *Client) Restore(ctx context.Context, r io.Reader, users []string, as string) (RestoreResult, error) {
	var q url.Values
	if users != nil {
		q = usersQuery(users)
	}
	if as != "" {
		if q == nil {
			q = url.Values{}
		}
		q.Set("as", as)
	}
	resp, err := c.stream(ctx, http.MethodPost, "/v1/admin/restore", q, r,
		http.StatusConflict, http.StatusBadRequest, http.StatusNotFound, http.StatusServiceUnavailable, http.StatusInternalServerError)
	if err != nil {
		return RestoreResult{}, err
	}
	defer resp.Body.Close()
	var out RestoreResult
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return out, fmt.Errorf("restore: decode answer (HTTP %d): %w", resp.StatusCode, err)
	}
	if out.Error != "" || resp.StatusCode/100 != 2 {
		return out, &Error{Status: resp.StatusCode, Message: out.Error}
	}
	return out, nil
}

// DeleteUsers deletes the models of users ("" is the global model).
func (c *Client) DeleteUsers(ctx context.Context, users []string) ([]Deleted, error) {
	var out DeleteResult
	err := c.do(ctx, http.MethodPost, "/v1/admin/delete-user", usersQuery(users), []byte{}, &out)
	return out.Deleted, err
}

// Check checks every model.
func (c *Client) Check(ctx context.Context) ([]Checked, error) {
	var out CheckResult
	err := c.do(ctx, http.MethodPost, "/v1/admin/check", nil, []byte{}, &out)
	return out.Models, err
}

// Compact compacts the store and returns what that did.
func (c *Client) Compact(ctx context.Context) (store.Compaction, error) {
	var out store.Compaction
	err := c.do(ctx, http.MethodPost, "/v1/admin/compact", nil, []byte{}, &out)
	return out, err
}

// Prune prunes the models of users by rule, every model when users is
// nil, and returns what it deleted.
func (c *Client) Prune(ctx context.Context, users []string, rule store.PruneRule) (PruneResult, error) {
	q := PruneQuery(rule)
	for _, u := range users {
		q.Add("user", u)
	}
	var out PruneResult
	err := c.do(ctx, http.MethodPost, "/v1/admin/prune", q, []byte{}, &out)
	return out, err
}
