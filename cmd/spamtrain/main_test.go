package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// sample is the small corpus shipped for the README's first command.
const sample = "../../testdata/sample"

// spamtrain runs the command line args and returns its exit status and
// output.
func spamtrain(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := &env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	code := run(context.Background(), e, args)
	return code, out.String(), errOut.String()
}

func TestTrainClassifyCheckForget(t *testing.T) {
	db := t.TempDir()
	spam, ham := filepath.Join(sample, "spam"), filepath.Join(sample, "ham")
	code, out, errOut := spamtrain(t, "", "train", "--db", db, "--spam", spam, "--ham", ham)
	if code != 0 {
		t.Fatalf("train: exit %d: %s%s", code, out, errOut)
	}
	if !strings.Contains(out, "40 messages: 40 learned") {
		t.Errorf("train output %q, want 40 learned", out)
	}
	// Training the same messages again counts nothing twice.
	code, out, _ = spamtrain(t, "", "train", "--db", db, "--spam", spam)
	if code != 0 || !strings.Contains(out, "20 already known") {
		t.Errorf("retrain: exit %d, output %q, want 20 already known", code, out)
	}

	code, out, errOut = spamtrain(t, "", "classify", "--db", db, "--json", spam, ham)
	if code != 0 {
		t.Fatalf("classify: exit %d: %s", code, errOut)
	}
	lines, unsure := 0, 0
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var c struct {
			Path        string   `json:"path"`
			Verdict     string   `json:"verdict"`
			Probability *float64 `json:"probability"`
			Score       *float64 `json:"score"`
			TrainedAs   string   `json:"trained_as"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if c.Path == "" || c.Verdict == "" || c.Probability == nil || c.Score == nil {
			t.Errorf("line lacks a key: %s", sc.Text())
		}
		// Messages classified after training on them: the verdict must
		// match the label they were trained with, or be unsure, which a
		// model of 40 messages may honestly be.
		switch c.Verdict {
		case c.TrainedAs:
		case "unsure":
			unsure++
		default:
			t.Errorf("%s: verdict %s, trained as %s", c.Path, c.Verdict, c.TrainedAs)
		}
		lines++
	}
	if lines != 40 {
		t.Errorf("classify printed %d lines, want 40", lines)
	}
	if unsure > 4 {
		t.Errorf("%d of 40 trained messages unsure", unsure)
	}

	if code, out, errOut = spamtrain(t, "", "check", "--db", db); code != 0 || !strings.Contains(out, "(global): ok") {
		t.Errorf("check: exit %d: %s%s", code, out, errOut)
	}
	if code, out, _ = spamtrain(t, "", "forget", "--db", db, spam); code != 0 || !strings.Contains(out, "20 forgotten") {
		t.Errorf("forget: exit %d: %q", code, out)
	}
	code, out, _ = spamtrain(t, "", "stats", "--db", db, "--json")
	var st storeStats
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil {
		t.Fatalf("stats: exit %d, %v: %s", code, err, out)
	}
	if len(st.Users) != 1 || st.Users[0].Messages["spam"] != 0 || st.Users[0].Messages["ham"] != 20 {
		t.Errorf("stats after forgetting the spam: %+v", st.Users)
	}
}

func TestTrainFromIndex(t *testing.T) {
	dir := t.TempDir()
	// An index's paths are relative to the index file.
	abs, err := filepath.Abs(sample)
	if err != nil {
		t.Fatal(err)
	}
	var index strings.Builder
	for _, class := range []string{"spam", "ham"} {
		names, err := os.ReadDir(filepath.Join(sample, class))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			rel, err := filepath.Rel(dir, filepath.Join(abs, class, n.Name()))
			if err != nil {
				t.Fatal(err)
			}
			index.WriteString(class + " " + rel + "\n")
		}
	}
	idx := filepath.Join(dir, "index")
	if err := os.WriteFile(idx, []byte(index.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "db")
	code, out, errOut := spamtrain(t, "", "train", "--db", db, "--index", idx)
	if code != 0 || !strings.Contains(out, "40 messages: 40 learned") {
		t.Fatalf("train --index: exit %d: %s%s", code, out, errOut)
	}
	code, out, _ = spamtrain(t, "", "stats", "--db", db, "--json")
	var st storeStats
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil {
		t.Fatalf("stats: exit %d, %v: %s", code, err, out)
	}
	if st.Users[0].Messages["spam"] != 20 || st.Users[0].Messages["ham"] != 20 {
		t.Errorf("trained %v, want 20 of each", st.Users[0].Messages)
	}

	bad := filepath.Join(dir, "bad")
	first, _, _ := strings.Cut(index.String(), "\n")
	if err := os.WriteFile(bad, []byte("phish"+strings.TrimPrefix(first, "spam")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := spamtrain(t, "", "train", "--db", db, "--index", bad); code != 2 || !strings.Contains(errOut, `class "phish"`) {
		t.Errorf("unknown class: exit %d, stderr %q; want 2 and the class named", code, errOut)
	}
	// A model gains a class: listed in the classes, it trains, from an
	// index or from --class, and classify reports its posterior.
	three := []string{"--set", "classes=ham+spam+phish"}
	if code, out, errOut := spamtrain(t, "", append([]string{"train", "--db", db, "--index", bad}, three...)...); code != 0 || !strings.Contains(out, "1 messages: 0 learned, 1 relabeled") {
		t.Errorf("train --index of class phish: exit %d: %s%s", code, out, errOut)
	}
	phish := filepath.Join(sample, "spam")
	if code, out, errOut := spamtrain(t, "", append([]string{"train", "--db", db, "--class", "phish", phish}, three...)...); code != 0 || !strings.Contains(out, "20 messages: 0 learned, 19 relabeled, 1 already known") {
		t.Errorf("train --class phish: exit %d: %s%s", code, out, errOut)
	}
	code, out, _ = spamtrain(t, "", "stats", "--db", db, "--json")
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || st.Users[0].Messages["phish"] != 20 || st.Users[0].Messages["spam"] != 0 {
		t.Errorf("stats after training phish: exit %d, %v: %+v", code, err, st.Users)
	}
	code, out, errOut = spamtrain(t, "", append(append([]string{"classify", "--db", db, "--json"}, three...), filepath.Join(phish, firstName(t, phish)))...)
	var c classification
	if err := json.Unmarshal([]byte(out), &c); code != 0 || err != nil || len(c.Posterior) != 3 || c.Class != "phish" {
		t.Errorf("classify: exit %d, %v: %s%s", code, err, out, errOut)
	}
	code, out, _ = spamtrain(t, "", append(append([]string{"classify", "--db", db}, three...), filepath.Join(phish, firstName(t, phish)))...)
	if f := strings.Split(strings.TrimSpace(out), "\t"); code != 0 || len(f) != 5 || !strings.Contains(f[4], "phish=") || !strings.Contains(f[4], "ham=") {
		t.Errorf("classify prints %q, want the posteriors in a fifth column", out)
	}
}

// firstName returns the name of the first file in dir.
func firstName(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) == 0 {
		t.Fatalf("read %s: %v", dir, err)
	}
	return ents[0].Name()
}

func TestMalformedMessageIsSkipped(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.eml")
	if err := os.WriteFile(junk, []byte("\x00\x01\x02\xff\xfe binary junk with no header at all\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(sample, "spam")
	code, out, errOut := spamtrain(t, "", "train", "--db", filepath.Join(dir, "db"), "--spam", junk, good)
	// The good messages are trained, and the exit status says that not
	// all were.
	if code != 1 || !strings.Contains(errOut, "1 messages or sources could not be read or parsed") {
		t.Fatalf("train: exit %d, want 1: %s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, junk) {
		t.Errorf("stderr %q does not name the malformed file", errOut)
	}
	if !strings.Contains(out, "20 learned") || !strings.Contains(out, "1 skipped") {
		t.Errorf("output %q, want 20 learned and 1 skipped", out)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no command", nil},
		{"unknown command", []string{"frobnicate"}},
		{"train without sources", []string{"train", "--db", "x"}},
		{"classify without db", []string{"classify", "-"}},
		{"bad user", []string{"classify", "--db", "x", "--user", "../etc", "-"}},
		{"bad setting", []string{"train", "--db", "x", "--set", "alpha=much", "--spam", "-"}},
		{"eval without input", []string{"eval"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SPAMD_DB", "")
			if code, _, errOut := spamtrain(t, "", tc.args...); code != 2 || errOut == "" {
				t.Errorf("exit %d, stderr %q; want 2 and a message", code, errOut)
			}
		})
	}
}

func TestExpandMulti(t *testing.T) {
	got := strings.Join(expandMulti([]string{"--db", "d", "--spam", "a", "b", "--ham", "c", "-", "--user", "u"}, "spam", "ham"), " ")
	want := "--db d --spam a --spam b --ham c --ham - --user u"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestStdinAndPipe(t *testing.T) {
	db := t.TempDir()
	raw, err := os.ReadFile(filepath.Join(sample, "spam", "00027.d1d0f97e096fe08fc80a4939355759e7"))
	if err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := spamtrain(t, string(raw), "train", "--db", db, "--spam", "-"); code != 0 || !strings.Contains(out, "1 learned") {
		t.Fatalf("train from stdin: exit %d: %s%s", code, out, errOut)
	}
	hamFile := filepath.Join(sample, "ham", "00005.5d1df4d5ad2e8ca4e8a5ffbbb0e5bd4e")
	if _, err := os.Stat(hamFile); err != nil {
		entries, _ := os.ReadDir(filepath.Join(sample, "ham"))
		hamFile = filepath.Join(sample, "ham", entries[0].Name())
	}
	req := "train ham " + hamFile + "\ntrain ham " + hamFile + "\nclassify " + hamFile + "\nforget " + hamFile + "\nbogus\nquit\n"
	code, out, errOut := spamtrain(t, req, "pipe", "--db", db)
	if code != 0 {
		t.Fatalf("pipe: exit %d: %s", code, errOut)
	}
	replies := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{"ok learned", "ok known", "ok ", "ok forgotten", "err ", "ok"}
	if len(replies) != len(want) {
		t.Fatalf("replies %q, want %d", replies, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(replies[i], w) {
			t.Errorf("reply %d = %q, want prefix %q", i, replies[i], w)
		}
	}
}

// TestRobustCLI checks what the command line does with input that is not
// a message source, with -h and --version, and that it finds the store
// in spamd's configuration.
func TestRobustCLI(t *testing.T) {
	t.Setenv("SPAMD_API", "")
	t.Setenv("SPAMD_DB", "")
	db := t.TempDir()
	if code, out, errOut := spamtrain(t, "", "train", "--db", db, "--spam", filepath.Join(sample, "spam"), "--ham", filepath.Join(sample, "ham")); code != 0 {
		t.Fatalf("train: exit %d: %s%s", code, out, errOut)
	}
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(t.TempDir(), "dangling")
	os.Symlink("/nonexistent", dangling)
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"a FIFO", []string{"classify", "--db", db, fifo}, 1, "is a named pipe; to read it, give -"},
		{"a device", []string{"train", "--db", db, "--spam", "/dev/zero"}, 1, "is a character device"},
		{"a dangling link", []string{"classify", "--db", db, dangling}, 1, "no such file"},
		{"a directory of folders", []string{"classify", "--db", db, sample}, 1, "no messages found (subfolders and subdirectories are read with --recursive)"},
		{"train a directory of folders", []string{"train", "--db", db, "--ham", sample}, 1, "could not be read"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := spamtrain(t, "", tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.want) {
				t.Errorf("exit %d (want %d): %s%s; want %q", code, tt.code, out, errOut, tt.want)
			}
		})
	}
	for _, c := range commands {
		code, out, errOut := spamtrain(t, "", c.name, "-h")
		if code != 0 || !strings.Contains(errOut, "Usage of "+c.name) || out != "" {
			t.Errorf("%s -h: exit %d, stdout %q, stderr %.80q", c.name, code, out, errOut)
		}
	}
	if code, out, _ := spamtrain(t, "", "--version"); code != 0 || !strings.HasPrefix(out, "spamtrain ") {
		t.Errorf("--version: exit %d, %q", code, out)
	}

	// With no --db, the store of spamd's configuration.
	cfg := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(cfg, []byte("[store]\ndir = \""+db+"\"\n[api]\nsocket = \""+filepath.Join(t.TempDir(), "none.sock")+"\"\n"), 0o644)
	t.Setenv("SPAMD_CONFIG", cfg)
	if code, out, errOut := spamtrain(t, "", "check"); code != 0 || !strings.Contains(out, "(global): ok") {
		t.Errorf("check by the configuration's store: exit %d: %s%s", code, out, errOut)
	}
}

// TestProgressTotal checks that training's progress learns the total from
// the folders counted, or from an index, and then shows the share done and
// the time left, and that standard input leaves it a count.
func TestProgressTotal(t *testing.T) {
	spam, ham := filepath.Join(sample, "spam"), filepath.Join(sample, "ham")
	for _, tt := range []struct {
		name    string
		sources []source
		total   int64
	}{
		{"folders", []source{{path: spam, class: "spam"}, {path: ham, class: "ham"}}, 40},
		{"an index", []source{{path: "a", class: "spam", indexed: true}, {path: "b", class: "ham", indexed: true}, {path: ham, class: "ham"}}, 22},
		{"standard input", []source{{path: spam, class: "spam"}, {path: "-", class: "ham"}}, -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out syncBuffer
			e := &env{stderr: &out, tty: true, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			bar := newProgress(e, -1, "training")
			totals := make(chan int64, 1)
			counting := countSources(context.Background(), e, tt.sources, false, func(n int64) { totals <- n })
			if counting != (tt.total >= 0) {
				t.Fatalf("counting %v", counting)
			}
			if !counting {
				return
			}
			total := <-totals
			if total != tt.total {
				t.Fatalf("total %d, want %d", total, tt.total)
			}
			bar.ChangeMax64(total)
			// "training   0% |     | (0/40, 0 msg/hr) [0s:0s]": the share,
			// the count of the total, elapsed:left.
			got := out.String()
			if want := fmt.Sprintf("(0/%d, ", tt.total); !strings.Contains(got, want) || !regexp.MustCompile(`\[\d+s:\d+s\]`).MatchString(got) {
				t.Errorf("progress %q, want %q and [elapsed:left]", got, want)
			}
		})
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestClassifyMeasures trains the sample and classifies it with measures
// on: -v lists the measures that weighed most, each with its value and
// weight, and --json gives them with their log ratios.
func TestClassifyMeasures(t *testing.T) {
	db := t.TempDir()
	spam, ham := filepath.Join(sample, "spam"), filepath.Join(sample, "ham")
	if code, out, errOut := spamtrain(t, "", "train", "--db", db, "--spam", spam, "--ham", ham); code != 0 {
		t.Fatalf("train: exit %d: %s%s", code, out, errOut)
	}
	sets := []string{"--set", "measures=parzen"}
	for _, fam := range []string{"size", "links", "html", "text", "route", "time"} {
		sets = append(sets, "--set", "weight_"+fam+"=1")
	}
	args := append([]string{"classify", "--db", db, "-v", "--top", "3"}, sets...)
	code, out, errOut := spamtrain(t, "", append(args, spam)...)
	if code != 0 {
		t.Fatalf("classify -v: exit %d: %s", code, errOut)
	}
	n := 0
	for _, l := range strings.Split(out, "\n") {
		m, ok := strings.CutPrefix(l, "\tmeasures: ")
		if !ok {
			continue
		}
		n++
		if f := strings.Fields(m); len(f) != 6 || !strings.Contains(f[0], "=") || !strings.HasPrefix(f[1], "(") {
			t.Errorf("measures line %q: want three NAME=VALUE (WEIGHT)", l)
		}
	}
	if n != 20 {
		t.Errorf("%d measures lines for 20 messages:\n%s", n, out)
	}
	args = append([]string{"classify", "--db", db, "-v", "--json"}, sets...)
	code, out, errOut = spamtrain(t, "", append(args, filepath.Join(spam, "00027.d1d0f97e096fe08fc80a4939355759e7"))...)
	if code != 0 {
		t.Fatalf("classify --json: exit %d: %s", code, errOut)
	}
	var c classification
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Measures) == 0 || c.Measures[0].Name == "" || c.Measures[0].Value == "" || c.Measures[0].LogRatio == 0 {
		t.Errorf("measures in JSON: %+v", c.Measures)
	}
}

// failingWriter refuses every write, as a closed pipe or a full disk does.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, syscall.EPIPE }

// TestClassifyWriteError: verdicts that cannot be written, which classify
// buffers, fail the run when they are flushed, not silently.
func TestClassifyWriteError(t *testing.T) {
	db := t.TempDir()
	spam, ham := filepath.Join(sample, "spam"), filepath.Join(sample, "ham")
	if code, out, errOut := spamtrain(t, "", "train", "--db", db, "--spam", spam, "--ham", ham); code != 0 {
		t.Fatalf("train: exit %d: %s%s", code, out, errOut)
	}
	for _, asJSON := range []bool{false, true} {
		args := []string{"classify", "--db", db}
		if asJSON {
			args = append(args, "--json")
		}
		args = append(args, spam)
		var errOut bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: failingWriter{}, stderr: &errOut, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		if code := run(context.Background(), e, args); code == 0 || !strings.Contains(errOut.String(), "broken pipe") {
			t.Errorf("json %v: exit %d, stderr %q; want a failure naming the broken pipe", asJSON, code, errOut.String())
		}
	}
}

// TestClassifyFilesFrom: --files-from reads the paths to classify from a
// file or standard input, beside those named, in order; a path it lists
// that cannot be read is reported as a named one is, and the rest are
// classified.
func TestClassifyFilesFrom(t *testing.T) {
	db := t.TempDir()
	spam, ham := filepath.Join(sample, "spam"), filepath.Join(sample, "ham")
	if code, out, errOut := spamtrain(t, "", "train", "--db", db, "--spam", spam, "--ham", ham); code != 0 {
		t.Fatalf("train: exit %d: %s%s", code, out, errOut)
	}
	msgs, err := filepath.Glob(filepath.Join(spam, "*"))
	if err != nil || len(msgs) < 3 {
		t.Fatalf("sample spam: %v, %d files", err, len(msgs))
	}
	dir := t.TempDir()
	list := filepath.Join(dir, "list")
	// A CRLF line and an empty one are read as a path and skipped.
	if err := os.WriteFile(list, []byte(msgs[1]+"\r\n\n"+msgs[2]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.eml")
	for _, tc := range []struct {
		name     string
		stdin    string
		args     []string
		want     []string // paths printed, in order
		wantCode int
		wantErr  string
	}{
		{"file", "", []string{"--files-from", list}, msgs[1:3], 0, ""},
		{"named first", "", []string{"--files-from", list, msgs[0]}, msgs[:3], 0, ""},
		{"stdin", msgs[2] + "\n" + msgs[0] + "\n", []string{"--files-from", "-"}, []string{msgs[2], msgs[0]}, 0, ""},
		{"unreadable path", missing + "\n" + msgs[0] + "\n", []string{"--files-from", "-"}, []string{msgs[0]}, 1, "missing.eml"},
		{"no list", "", []string{"--files-from", filepath.Join(dir, "nolist")}, nil, 1, "--files-from"},
		{"stdin twice", "", []string{"--files-from", "-", "-"}, nil, 2, "standard input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"classify", "--db", db}, tc.args...)
			code, out, errOut := spamtrain(t, tc.stdin, args...)
			if code != tc.wantCode || !strings.Contains(errOut, tc.wantErr) {
				t.Fatalf("exit %d, stderr %q; want exit %d naming %q", code, errOut, tc.wantCode, tc.wantErr)
			}
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if p, _, ok := strings.Cut(line, "\t"); ok {
					got = append(got, p)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("classified %q, want %q", got, tc.want)
			}
		})
	}
}

func TestClassifyFields(t *testing.T) {
	db := trainSample(t)
	msgs, err := filepath.Glob(filepath.Join(sample, "spam", "*"))
	if err != nil || len(msgs) < 2 {
		t.Fatalf("sample spam: %v, %d files", err, len(msgs))
	}
	msgs = msgs[:2]
	// The JSON's values are the ones the fields must print.
	code, out, errOut := spamtrain(t, "", append([]string{"classify", "--db", db, "--json"}, msgs...)...)
	if code != 0 {
		t.Fatalf("classify --json: exit %d: %s", code, errOut)
	}
	var want []classification
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var c classification
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatal(err)
		}
		want = append(want, c)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		line     func(c classification) string
		wantCode int
		wantErr  string
	}{
		{"bench order", []string{"--fields", "path,score,verdict"}, func(c classification) string {
			return fmt.Sprintf("%s\t%s\t%s", c.Path, strconv.FormatFloat(c.Score, 'g', -1, 64), c.Verdict)
		}, 0, ""},
		{"every field", []string{"--fields", "verdict, class,probability,used,trained_as"}, func(c classification) string {
			return fmt.Sprintf("%s\t%s\t%s\t%d\t%s", c.Verdict, c.Class, strconv.FormatFloat(c.Probability, 'g', -1, 64), c.Used, c.TrainedAs)
		}, 0, ""},
		{"unknown field", []string{"--fields", "path,spamicity"}, nil, 2, `no field "spamicity"`},
		{"with --json", []string{"--fields", "path", "--json"}, nil, 2, "--fields"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"classify", "--db", db}, tc.args...), msgs...)
			code, out, errOut := spamtrain(t, "", args...)
			if code != tc.wantCode || !strings.Contains(errOut, tc.wantErr) {
				t.Fatalf("exit %d, stderr %q; want exit %d naming %q", code, errOut, tc.wantCode, tc.wantErr)
			}
			if tc.line == nil {
				return
			}
			var lines []string
			for _, c := range want {
				lines = append(lines, tc.line(c))
			}
			if got := strings.TrimSuffix(out, "\n"); got != strings.Join(lines, "\n") {
				t.Errorf("printed\n%s\nwant\n%s", got, strings.Join(lines, "\n"))
			}
		})
	}
	// A message that cannot be classified keeps its line, verdict error,
	// so that lines and messages stay in step without the path.
	empty := filepath.Join(t.TempDir(), "empty.eml")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = spamtrain(t, "", "classify", "--db", db, "--fields", "verdict,score", empty, msgs[0])
	wantOut := "error\t\n" + want[0].Verdict + "\t" + strconv.FormatFloat(want[0].Score, 'g', -1, 64) + "\n"
	if code != 1 || out != wantOut || !strings.Contains(errOut, "empty.eml") {
		t.Errorf("with a message not classified: exit %d, printed %q, stderr %q; want exit 1, %q", code, out, errOut, wantOut)
	}
}
