package eval

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spamd/spamd/filter"
)

// writeIndex writes c's messages to files in a new directory, with an
// index listing them in order, and returns the index's path.
func writeIndex(t *testing.T, c *Corpus) string {
	t.Helper()
	dir := t.TempDir()
	var idx strings.Builder
	for i, m := range c.Messages {
		name := fmt.Sprintf("m%d", i)
		if err := os.WriteFile(filepath.Join(dir, name), m.Raw, 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&idx, "%s %s\n", classOf(m.Spam), name)
	}
	index := filepath.Join(dir, "index")
	if err := os.WriteFile(index, []byte(idx.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return index
}

func TestOpenIndex(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("a", "Subject: a\n\na\n")
	write("b", "Subject: b\n\nb\n")
	for _, tc := range []struct {
		name    string
		index   string
		want    []Message
		wantErr string
	}{
		{"labels and paths in order", write("good", "spam a\nham b\n"),
			[]Message{{Path: filepath.Join(dir, "a"), Class: "spam", Spam: true}, {Path: filepath.Join(dir, "b"), Class: "ham"}}, ""},
		{"any class", write("three", "spam a\nnewsletter b\n"),
			[]Message{{Path: filepath.Join(dir, "a"), Class: "spam", Spam: true}, {Path: filepath.Join(dir, "b"), Class: "newsletter"}}, ""},
		{"label not a class name", write("bad", "spam a\nVirus! b\n"), nil, `invalid class name: "Virus!"`},
		{"no index", filepath.Join(dir, "none"), nil, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := OpenIndex(tc.index)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// A corpus from an index holds no mail until a run reads it.
			if !slices.EqualFunc(c.Messages, tc.want, func(a, b Message) bool {
				return a.Path == b.Path && a.Class == b.Class && a.Spam == b.Spam && a.Raw == nil
			}) {
				t.Errorf("messages %+v, want %+v without bytes", c.Messages, tc.want)
			}
		})
	}
}

// TestIndexRuns checks that a run reading its messages from files gives
// the Records of one whose corpus holds them, and that only the protocols
// that go over the corpus again keep it parsed.
func TestIndexRuns(t *testing.T) {
	held := synthetic(200)
	index := writeIndex(t, held)
	loaded, err := LoadIndex(context.Background(), index, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range loaded.Messages {
		if string(m.Raw) != string(held.Messages[i].Raw) {
			t.Fatalf("LoadIndex message %d differs from the file written", i)
		}
	}
	for _, tc := range []struct {
		name       string
		o          func(*Options)
		wantCached int
	}{
		{"split", func(o *Options) {}, 0},
		{"split test side", func(o *Options) { o.Part = "test" }, 0},
		{"online", func(o *Options) { o.Mode = "online" }, 0},
		{"online on-error", func(o *Options) { o.Mode, o.Train = "online", "on-error" }, 0},
		{"cv", func(o *Options) { o.Mode, o.Folds = "cv", 4 }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.Workers = 3
			tc.o(&o)
			want, err := Run(context.Background(), synthetic(200), filter.DefaultConfig(), o)
			if err != nil {
				t.Fatal(err)
			}
			c, err := OpenIndex(index)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Run(context.Background(), c, filter.DefaultConfig(), o)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Records, want.Records) || got.Trained != want.Trained {
				t.Errorf("from files: %d records, %d trained; differ from those of a corpus in memory (%d, %d)", len(got.Records), got.Trained, len(want.Records), want.Trained)
			}
			if len(c.cache) != tc.wantCached {
				t.Errorf("corpus keeps %d parsed settings after the run, want %d", len(c.cache), tc.wantCached)
			}
			for i, m := range c.Messages {
				if m.Raw != nil {
					t.Fatalf("message %d kept its bytes", i)
				}
			}
		})
	}
}

func TestRunUnreadableMessage(t *testing.T) {
	index := writeIndex(t, synthetic(50))
	missing := filepath.Join(filepath.Dir(index), "m30")
	if err := os.Remove(missing); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"split", "online", "cv"} {
		t.Run(mode, func(t *testing.T) {
			c, err := OpenIndex(index)
			if err != nil {
				t.Fatal(err)
			}
			o := DefaultOptions()
			o.Mode, o.Folds = mode, 3
			_, err = Run(context.Background(), c, filter.DefaultConfig(), o)
			if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
				t.Errorf("error %v, want one naming %s as missing", err, missing)
			}
		})
	}
}

// TestCompact checks that a compacted message trains and scores as the
// parsed one: the same digest and the same features, counts and header
// split, whatever their order.
func TestCompact(t *testing.T) {
	msg := "From: a@example.com\nSubject: cheap pills cheap\n\ncheap pills today, order now: http://x.example/buy now\n"
	for _, tc := range []struct {
		name string
		raw  string
		set  map[string]string
	}{
		{"default", msg, nil},
		{"term frequency, unigrams", msg, map[string]string{"counts": "tf", "osb": "0"}},
		{"wide bigram window", msg, map[string]string{"osb": "5"}},
		{"runs of the body", msg, map[string]string{"run_length": "2"}},
		{"not a message", "\x00\x01", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filter.DefaultConfig()
			for k, v := range tc.set {
				if err := cfg.Set(k, v); err != nil {
					t.Fatal(err)
				}
			}
			c := &Corpus{Messages: []Message{{Raw: []byte(tc.raw)}}}
			src, err := c.parser(cfg)
			if err != nil {
				t.Fatal(err)
			}
			p := src.prepare(0, c.Messages[0].Raw)
			q := compact(p)
			if q.Digest != p.Digest || q.Bag.Head() != p.Bag.Head() || q.Bag.Len() != p.Bag.Len() {
				t.Fatalf("compacted: digest %x, head %d, %d features; want %x, %d, %d", q.Digest[:4], q.Bag.Head(), q.Bag.Len(), p.Digest[:4], p.Bag.Head(), p.Bag.Len())
			}
			// The header's features stay the header's.
			head := func(p filter.Prepared) []uint64 {
				var hs []uint64
				for _, h := range p.Bag.Hashes()[:p.Bag.Head()] {
					hs = append(hs, uint64(h))
				}
				slices.Sort(hs)
				return hs
			}
			want := p.Bag.Map()
			for h, n := range q.Bag.Map() {
				if want[h] != n {
					t.Errorf("feature %x counts %d, want %d", h, n, want[h])
				}
			}
			if !slices.Equal(head(q), head(p)) {
				t.Error("compacting moved features across the header split")
			}
			if len(q.Runs) != len(p.Runs) || tc.set["run_length"] != "" && len(p.Runs) < 2 {
				t.Fatalf("compacted: %d runs of the body, parsed %d", len(q.Runs), len(p.Runs))
			}
			for i, r := range q.Runs {
				if r.Head() != p.Runs[i].Head() || !maps.Equal(r.Map(), p.Runs[i].Map()) {
					t.Errorf("run %d changed in compacting", i)
				}
			}
		})
	}
}

// TestCachedRuns checks that runs over the compacted messages score as
// runs over freshly parsed ones, to far below what the metrics show.
func TestCachedRuns(t *testing.T) {
	for _, mode := range []string{"split", "online"} {
		t.Run(mode, func(t *testing.T) {
			c := synthetic(300)
			o := DefaultOptions()
			o.Mode = mode
			fresh, err := run(context.Background(), c, filter.DefaultConfig(), o, false)
			if err != nil {
				t.Fatal(err)
			}
			cached, err := run(context.Background(), c, filter.DefaultConfig(), o, true)
			if err != nil {
				t.Fatal(err)
			}
			if len(c.cache) != 1 {
				t.Errorf("corpus keeps %d parsed settings, want 1", len(c.cache))
			}
			if len(fresh.Records) != len(cached.Records) {
				t.Fatalf("%d records cached, %d fresh", len(cached.Records), len(fresh.Records))
			}
			for k, a := range fresh.Records {
				b := cached.Records[k]
				if a.Pos != b.Pos || a.Verdict != b.Verdict || a.Score-b.Score > 1e-9 || b.Score-a.Score > 1e-9 {
					t.Fatalf("record %d: cached %+v, fresh %+v", k, b, a)
				}
			}
			if fresh.OneMinusAUCPct-cached.OneMinusAUCPct > 1e-9 || fresh.LamPct != cached.LamPct {
				t.Errorf("cached (1-AUC)%% %v lam%% %v, fresh %v %v", cached.OneMinusAUCPct, cached.LamPct, fresh.OneMinusAUCPct, fresh.LamPct)
			}
		})
	}
}

// TestSweepForgets checks that a sweep keeps a tokenizer setting's parsed
// messages only until its last run under that setting.
func TestSweepForgets(t *testing.T) {
	for _, tc := range []struct {
		name string
		axes []string
	}{
		{"classifier settings", []string{"alpha=0.1,1"}},
		{"tokenizer settings", []string{"osb=0,2", "alpha=0.1,1"}},
		{"tokenizer settings varying fastest", []string{"alpha=0.1,1", "osb=0,2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var axes []Axis
			for _, s := range tc.axes {
				a, err := ParseAxis(s)
				if err != nil {
					t.Fatal(err)
				}
				axes = append(axes, a)
			}
			c := synthetic(100)
			peak := 0
			_, err := Sweep(context.Background(), c, filter.DefaultConfig(), axes, DefaultOptions(), "lam_pct", func(int, int) {
				peak = max(peak, len(c.cache))
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(c.cache) != 0 {
				t.Errorf("corpus keeps %d parsed settings after the sweep, want none", len(c.cache))
			}
			want := 1
			if strings.HasSuffix(tc.name, "fastest") {
				want = 2 // the first value comes back
			}
			if peak > want {
				t.Errorf("sweep kept %d parsed settings at once, want at most %d", peak, want)
			}
		})
	}
}

func TestEach(t *testing.T) {
	c := synthetic(50)
	parse, err := c.parser(filter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	badRead := parse
	badRead.read = func(i int) ([]byte, error) {
		if i == 3 {
			return nil, boom
		}
		return c.raw(i)
	}
	cached, err := c.parsed(context.Background(), filter.DefaultConfig(), 2)
	if err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		idx     []int
		src     source
		stopAt  int // fn fails at this position, when >= 0
		want    []int
		wantErr error
	}{
		{"in the order given", context.Background(), []int{5, 1, 40, 2, 2}, parse, -1, []int{5, 1, 40, 2, 2}, nil},
		{"kept parsed", context.Background(), []int{5, 1, 40, 2, 2}, cached.source(), -1, []int{5, 1, 40, 2, 2}, nil},
		{"none", context.Background(), nil, parse, -1, nil, nil},
		{"fn fails", context.Background(), all(50), parse, 7, all(7), boom},
		{"fn fails on kept", context.Background(), all(50), cached.source(), 7, all(7), boom},
		{"read fails", context.Background(), all(50), badRead, -1, all(3), boom},
		{"canceled", canceled, all(50), parse, -1, nil, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []int
			err := each(tc.ctx, 2, tc.idx, tc.src, func(i int, p filter.Prepared) error {
				if i == tc.stopAt {
					return boom
				}
				if p.Bag.Len() == 0 {
					t.Errorf("message %d came with an empty bag", i)
				}
				got = append(got, i)
				return nil
			})
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != context.Canceled && !slices.Equal(got, tc.want) {
				t.Errorf("fn saw %v, want %v", got, tc.want)
			}
		})
	}
}
