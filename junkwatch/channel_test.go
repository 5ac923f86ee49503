package junkwatch

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spamd/spamd/decide"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/relabel"
	"github.com/spamd/spamd/reportq"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/tokenize"
)

// TestChannel runs the maildir channel whole: real maildirs, a real
// fsnotify watcher, the durable queue, and the filter over a memory
// store.
func TestChannel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	st := store.NewMemory()
	f, err := filter.New(st, filter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var spam, ham [][]byte
	for _, c := range []struct {
		dir  string
		msgs *[][]byte
	}{{"spam", &spam}, {"ham", &ham}} {
		ents, err := os.ReadDir(filepath.Join("../testdata/sample", c.dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join("../testdata/sample", c.dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			// The mbox "From " line is not part of a delivered message.
			_, b, _ = bytes.Cut(b, []byte("\n"))
			*c.msgs = append(*c.msgs, b)
		}
	}
	for _, m := range spam[1:] {
		f.Learn(ctx, "", m, filter.Spam)
	}
	for _, m := range ham {
		f.Learn(ctx, "", m, filter.Ham)
		f.Learn(ctx, "bob", m, filter.Ham)
	}
	q, err := reportq.Open(t.TempDir(), reportq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := &relabel.Applier{Filter: func() *filter.Filter { return f }}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		q.Run(ctx, a.Apply)
	}()
	defer func() {
		cancel()
		<-stopped
	}()

	m := newMailboxes(t, "alice", "bob")
	start(t, m, func(ctx context.Context, r reportq.Report) error {
		_, err := q.Enqueue(ctx, r)
		return err
	})
	inbox, junk := m.folder("alice", ""), m.folder("alice", ".Junk")
	bobBefore := totals(t, st, "bob")
	missed := append([]byte(decide.ResultHeader+": "+decide.Result{Verdict: "ham", Probability: 0.3, Score: -0.8,
		Signature: tokenize.Digest(spam[0])}.String()+"\n"), spam[0]...)

	settle := func(t *testing.T, spam, ham uint64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			got := totals(t, st, "alice")
			if q.Len() == 0 && got[filter.Spam] == spam && got[filter.Ham] == ham {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("alice's model holds %v, want spam %d ham %d (%d reports waiting)", got, spam, ham, q.Len())
			}
			time.Sleep(10 * time.Millisecond)
		}
		if got := totals(t, st, "bob"); got[filter.Spam] != bobBefore[filter.Spam] || got[filter.Ham] != bobBefore[filter.Ham] {
			t.Fatalf("bob's model changed: %v → %v", bobBefore, got)
		}
	}
	p := m.deliver(inbox, missed)
	p = m.flag(p, "S")
	settle(t, 0, 0)
	t.Run("moved to Junk: learned as spam once", func(t *testing.T) {
		p = m.move(p, junk, false)
		settle(t, 1, 0)
	})
	t.Run("the same report again: nothing changes", func(t *testing.T) {
		// A second copy of the message arrives in Junk.
		m.deliver(junk, missed)
		time.Sleep(300 * time.Millisecond)
		settle(t, 1, 0)
	})
	t.Run("moved back: unlearned as spam, learned as ham", func(t *testing.T) {
		m.move(p, inbox, true)
		settle(t, 0, 1)
	})
	if seen, _ := st.Seen(ctx, "alice", tokenize.Digest(missed)); seen != filter.Ham {
		t.Errorf("alice's seen record says %q, want ham", seen)
	}
}

// totals returns user's message counts by class.
func totals(t *testing.T, st store.Store, user string) map[string]uint64 {
	t.Helper()
	tot, err := st.Totals(context.Background(), user)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for i, c := range tot.Classes {
		out[c] = tot.Messages[i]
	}
	return out
}
