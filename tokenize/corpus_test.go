package tokenize

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// corpusMsg is one message of a TREC-style corpus: an index file of lines
// "spam path" or "ham path", paths relative to the index.
type corpusMsg struct {
	label, path string
	raw         []byte
}

// loadCorpus reads the corpus in the directory named by SPAMD_CORPUS, or
// skips the test when there is none.
func loadCorpus(tb testing.TB) []corpusMsg {
	tb.Helper()
	dir := os.Getenv("SPAMD_CORPUS")
	if dir == "" {
		tb.Skip("SPAMD_CORPUS not set")
	}
	f, err := os.Open(filepath.Join(dir, "index"))
	if err != nil {
		tb.Skipf("no corpus index: %v", err)
	}
	defer f.Close()
	var msgs []corpusMsg
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		label, path, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if !ok {
			continue
		}
		path = filepath.Join(dir, path)
		raw, err := os.ReadFile(path)
		if err != nil {
			tb.Fatalf("corpus: %v", err)
		}
		msgs = append(msgs, corpusMsg{label, path, raw})
	}
	if err := sc.Err(); err != nil {
		tb.Fatalf("corpus index: %v", err)
	}
	if len(msgs) == 0 {
		tb.Skip("empty corpus")
	}
	return msgs
}

// TestCorpus tokenizes every message of the corpus named by SPAMD_CORPUS:
// none may fail. With -v it prints a summary and the tokens of the first
// spam and the first ham.
func TestCorpus(t *testing.T) {
	msgs := loadCorpus(t)
	tok := New(DefaultOptions())
	langs := map[string]int{}
	problems := map[string]int{}
	var tokens, truncated int
	shown := map[string]bool{}
	for _, m := range msgs {
		res, err := tok.Tokenize(m.raw)
		if err != nil {
			t.Errorf("%s: %v", m.path, err)
			continue
		}
		tokens += len(res.Tokens)
		langs[res.Lang]++
		if res.Truncated {
			truncated++
		}
		for _, p := range res.Problems {
			kind, _, _ := strings.Cut(p, ":")
			problems[kind]++
		}
		if testing.Verbose() && !shown[m.label] {
			shown[m.label] = true
			t.Logf("%s %s (lang %q, problems %q):\n%s", m.label, m.path, res.Lang, res.Problems, strings.Join(res.Tokens, " "))
		}
	}
	t.Logf("%d messages, %.0f tokens each on average, %d truncated", len(msgs), float64(tokens)/float64(len(msgs)), truncated)
	t.Logf("languages: %s", summary(langs))
	t.Logf("problems: %s", summary(problems))
}

func summary(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %q=%d", k, m[k])
	}
	return b.String()
}
