package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/badgerstore"
)

// failingApply is a Badger store whose Apply fails from its failFrom-th
// call on, as one whose disk fills up in the middle of a run.
type failingApply struct {
	store.Store
	calls, failFrom int
}

var errDiskFull = errors.New("disk full")

func (s *failingApply) Apply(ctx context.Context, user string, ops []store.Op) ([]store.Result, error) {
	if s.calls++; s.calls >= s.failFrom {
		return nil, errDiskFull
	}
	return s.Store.Apply(ctx, user, ops)
}

// TestTrainSourcesFailure checks that a batch that fails to train ends
// the run with its error, whichever batch it is, the batches before it
// counted and none after: the batches are trained on a goroutine of
// their own while the next ones are prepared.
func TestTrainSourcesFailure(t *testing.T) {
	sources := []source{{path: filepath.Join(sample, "spam"), class: "spam"}, {path: filepath.Join(sample, "ham"), class: "ham"}}
	for _, tt := range []struct {
		name        string
		failFrom    int
		wantLearned int
	}{
		{"first batch", 1, 0},
		{"third batch", 3, 20},
		{"none", 100, 40},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			bs, err := badgerstore.Open(ctx, t.TempDir(), badgerstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer bs.Close()
			st := &failingApply{Store: bs, failFrom: tt.failFrom}
			f, err := filter.New(st, filter.DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			var errOut bytes.Buffer
			e := &env{stdout: io.Discard, stderr: &errOut, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			tally, err := trainSources(ctx, e, f, "", sources, false, 2, 10)
			wantErr := tt.wantLearned < 40
			if errors.Is(err, errDiskFull) != wantErr || !wantErr && err != nil {
				t.Fatalf("trainSources: %v; want the disk full error: %v", err, wantErr)
			}
			if tally.learned != tt.wantLearned {
				t.Errorf("%d messages learned, want %d", tally.learned, tt.wantLearned)
			}
		})
	}
}
