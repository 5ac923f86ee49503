package control

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/spamd/spamd/history"
)

// TestHistoryEndpoint checks /v1/history's selection and its errors, for
// a peer that reads every model (the test runs as the daemon's own uid).
func TestHistoryEndpoint(t *testing.T) {
	h, err := history.New(history.Options{Size: 100})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		h.Add(history.Entry{Time: time.Unix(int64(1700000000+i), 0), Verdict: []string{"spam", "ham", "unsure"}[i%3],
			Recipients: []string{fmt.Sprintf("u%d@example.org", i%2)}, Users: []string{fmt.Sprintf("u%d", i%2)}}, nil)
	}
	fx := newFixture(t, Options{History: h})
	ctx := context.Background()
	for _, tt := range []struct {
		name  string
		q     HistoryQuery
		first uint64
		n     int
	}{
		{"default", HistoryQuery{}, 30, 30},
		{"limit", HistoryQuery{Limit: 5}, 30, 5},
		{"before", HistoryQuery{Before: 11}, 10, 10},
		{"after", HistoryQuery{After: 25}, 30, 5},
		{"verdict", HistoryQuery{Verdict: "unsure"}, 30, 10},
		{"user", HistoryQuery{User: "u1"}, 30, 15},
		{"user and verdict", HistoryQuery{User: "u1", Verdict: "spam"}, 28, 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fx.client.History(ctx, tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Entries) != tt.n || got.Size != 100 || (tt.n > 0 && got.Entries[0].ID != tt.first) {
				t.Errorf("%d entries, first %v, size %d; want %d from %d", len(got.Entries), got.Entries[0].ID, got.Size, tt.n, tt.first)
			}
			if tt.n > 0 && len(got.Entries[0].Recipients) != 1 {
				t.Errorf("recipients %v: an admin sees them all", got.Entries[0].Recipients)
			}
		})
	}
	for _, q := range []string{"limit=0", "limit=10001", "limit=x", "before=-1", "after=z", "verdict=maybe", "user=../x"} {
		t.Run(q, func(t *testing.T) {
			hc := http.Client{Transport: fx.client.hc.Transport}
			resp, err := hc.Get("http://spamd/v1/history?" + q)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("status %d, want 400", resp.StatusCode)
			}
		})
	}
	none := newFixture(t, Options{})
	var e *Error
	if _, err := none.client.History(ctx, HistoryQuery{}); !errors.As(err, &e) || e.Status != http.StatusNotFound {
		t.Errorf("without a history: %v, want 404", err)
	}
}
