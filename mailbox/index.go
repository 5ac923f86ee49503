package mailbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrMalformedIndex reports an index line that is not a label followed by
// a path.
var ErrMalformedIndex = errors.New("malformed index line")

// Entry is one line of an index: a message and the class it belongs to.
type Entry struct {
	// Label is the line's first word, such as "spam" or "ham".
	Label string
	// Path is the message's path, made relative to the working directory
	// (or kept absolute) so that it can be opened as it is.
	Path string
}

// ReadIndex reads a TREC-style index: one "LABEL PATH" line per message,
// PATH relative to the index's directory unless absolute. Blank lines and
// lines starting with '#' are skipped. A line with a label and no path is
// an error naming the file and line, matching ErrMalformedIndex.
func ReadIndex(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read index: %w", err)
	}
	defer f.Close()
	base := filepath.Dir(path)
	var entries []Entry
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		// The rest of the line is the path, so that paths with spaces work.
		label, rel := line, ""
		if i := strings.IndexAny(line, " \t"); i >= 0 {
			label, rel = line[:i], strings.TrimSpace(line[i+1:])
		}
		if rel == "" {
			return nil, fmt.Errorf("read index %s: line %d: %w: %q", path, n, ErrMalformedIndex, line)
		}
		p := filepath.FromSlash(rel)
		if !filepath.IsAbs(p) {
			p = filepath.Join(base, p)
		}
		entries = append(entries, Entry{Label: label, Path: p})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read index %s: %w", path, err)
	}
	return entries, nil
}

// WalkIndex calls fn for every message listed in the index file, with
// Message.Label set from the index. Each entry is walked like a source of
// Walk, so it may also name an mbox or a maildir whose messages all get the
// entry's label. An index that cannot be read is an error; an entry that
// cannot be read is handled as Options.OnError says.
func WalkIndex(ctx context.Context, index string, o Options, fn func(Message) error) error {
	entries, err := ReadIndex(index)
	if err != nil {
		return err
	}
	w := newWalker(ctx, o, fn)
	for _, e := range entries {
		if err := w.nested(e.Path, w.source(e.Path, e.Label)); err != nil {
			return fmt.Errorf("walk index %s: %w", index, err)
		}
	}
	if err := errors.Join(w.errs...); err != nil {
		return fmt.Errorf("walk index %s: %w", index, err)
	}
	return nil
}
