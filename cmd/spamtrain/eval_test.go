//go:build !noeval

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sampleIndex writes an index of the sample corpus, spam and ham
// alternating, and returns its path.
func sampleIndex(t *testing.T) string {
	t.Helper()
	var lines [2][]string
	for k, class := range []string{"spam", "ham"} {
		dir, err := filepath.Abs(filepath.Join(sample, class))
		if err != nil {
			t.Fatal(err)
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			lines[k] = append(lines[k], class+" "+filepath.Join(dir, e.Name()))
		}
	}
	var b strings.Builder
	for i := range max(len(lines[0]), len(lines[1])) {
		for _, ls := range lines {
			if i < len(ls) {
				fmt.Fprintln(&b, ls[i])
			}
		}
	}
	index := filepath.Join(t.TempDir(), "index")
	if err := os.WriteFile(index, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return index
}

func TestEvalIndex(t *testing.T) {
	index := sampleIndex(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"split", nil, []string{"split: 8 messages", "32 trained", "(1-AUC)%"}},
		{"online", []string{"--mode", "online", "--bootstrap", "20"}, []string{"online (train all): 40 messages", "(95%:"}},
		{"online on error", []string{"--mode", "online", "--train", "on-error"}, []string{"online (train on-error): 40 messages"}},
		{"cv", []string{"--mode", "cv", "--folds", "4"}, []string{"cv: 40 messages", "(folds:"}},
		{"train side", []string{"--part", "train"}, []string{"split, train side: 6 messages", "26 trained"}},
		{"sweep", []string{"--mode", "cv", "--folds", "4", "--sweep", "osb=0,2", "--sweep", "alpha=0.1,1"}, []string{"osb  alpha", "best by one_minus_auc_pct:"}},
		{"curve", []string{"--curve", "8,32", "--draws", "2"}, []string{"learning curve:", "test (1-AUC)%"}},
		{"store", []string{"--mode", "online", "--store", filepath.Join(dir, "badger")}, []string{"online (train all): 40 messages", "40 trained"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"eval", "--index", index}, tc.args...)
			code, out, errOut := spamtrain(t, "", args...)
			if code != 0 {
				t.Fatalf("exit %d: %s%s", code, out, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestEvalIndexOutputs(t *testing.T) {
	index := sampleIndex(t)
	dir := t.TempDir()
	records := filepath.Join(dir, "records.tsv")
	code, out, errOut := spamtrain(t, "", "eval", "--index", index, "--mode", "online", "--json", "--records", records, "--plots", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	var doc struct {
		N       int `json:"n"`
		Trained int `json:"trained"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.N != 40 || doc.Trained != 40 {
		t.Errorf("JSON %+v (%v), want 40 tested and trained", doc, err)
	}
	b, err := os.ReadFile(records)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n != 41 {
		t.Errorf("records file has %d lines, want a header and 40", n)
	}
	for _, name := range []string{"roc.svg", "scores.png", "reliability.svg"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() == 0 {
			t.Errorf("%s not written: %v", name, err)
		}
	}
}

// TestEvalUnreadableMessage checks that a message the index lists but
// that cannot be read fails the run, naming it.
func TestEvalUnreadableMessage(t *testing.T) {
	index := sampleIndex(t)
	missing := filepath.Join(t.TempDir(), "gone")
	f, err := os.OpenFile(index, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "spam "+missing)
	f.Close()
	for _, mode := range []string{"split", "online", "cv"} {
		t.Run(mode, func(t *testing.T) {
			code, _, errOut := spamtrain(t, "", "eval", "--index", index, "--mode", mode, "--folds", "3")
			if code != 1 || !strings.Contains(errOut, missing) {
				t.Errorf("exit %d, stderr %q; want 1 and a message naming %s", code, errOut, missing)
			}
		})
	}
}

// TestEvalSeveralCorpora checks that repeated --index flags give one table
// per corpus, or one JSON document keyed by index, and refuse the flags
// that write one corpus's files.
func TestEvalSeveralCorpora(t *testing.T) {
	a, b := sampleIndex(t), sampleIndex(t)
	code, out, errOut := spamtrain(t, "", "eval", "--index", a, "--index", b, "--mode", "online")
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	if strings.Count(out, "online (train all): 40 messages") != 2 || !strings.Contains(out, "== "+a) || !strings.Contains(out, "== "+b) {
		t.Errorf("want a table under each index:\n%s", out)
	}
	code, out, errOut = spamtrain(t, "", "eval", "--index", a, "--index", b, "--json")
	var docs map[string]struct {
		N int `json:"n"`
	}
	if err := json.Unmarshal([]byte(out), &docs); code != 0 || err != nil || docs[a].N != 8 || docs[b].N != 8 {
		t.Errorf("exit %d, JSON %+v (%v): %s", code, docs, err, errOut)
	}
	if code, _, errOut := spamtrain(t, "", "eval", "--index", a, "--index", b, "--records", filepath.Join(t.TempDir(), "r")); code != 2 {
		t.Errorf("--records with two corpora: exit %d, %s; want a usage error", code, errOut)
	}
}
