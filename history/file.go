package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// fileVersion is the version of the file's format, in its first line.
const fileVersion = 1

// maxID bounds the IDs read from a file, far from wrapping around (and
// exact in JavaScript).
const maxID = 1 << 53

// maxLine bounds one line of a history file: an entry's fields are
// bounded (trim) well below it.
const maxLine = 128 << 10

// maxHeader bounds the first line, which holds the last training of up
// to maxTrained models: a name of maxUser bytes, each escaped at worst
// to 6, and its time.
const maxHeader = maxTrained*(6*maxUser+64) + 1<<10

// header is the first line of a history file.
type header struct {
	Version int                  `json:"spamd_history"`
	Saved   time.Time            `json:"saved"`
	Trained map[string]time.Time `json:"trained,omitempty"`
}

// Save writes the entries, without their messages, and the models' last
// training to path, if anything changed since the last Save or Load; it
// reports whether it wrote. The file is written whole under a temporary
// name in the same directory, synced, and renamed over path, so that a
// crash leaves the old file or the new one, never a mix. It is readable
// by its owner alone: it names senders and recipients.
func (r *Ring) Save(path string) (bool, error) {
	r.saveMu.Lock()
	defer r.saveMu.Unlock()
	r.mu.Lock()
	if r.changes == r.saved {
		r.mu.Unlock()
		return false, nil
	}
	changes := r.changes
	entries := make([]Entry, r.count)
	for k := range r.count {
		entries[k] = r.at(k).e
		entries[k].Held = false
	}
	h := header{Version: fileVersion, Saved: time.Now().UTC(), Trained: make(map[string]time.Time, len(r.trained))}
	for u, t := range r.trained {
		h.Trained[u] = t
	}
	r.mu.Unlock()

	if err := writeFile(path, h, entries); err != nil {
		return false, fmt.Errorf("save history: %w", err)
	}
	r.mu.Lock()
	r.saved = changes
	r.mu.Unlock()
	return true, nil
}

// writeFile writes a history file atomically.
func writeFile(path string, h header, entries []Entry) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 64<<10)
	enc := json.NewEncoder(w)
	if err := enc.Encode(h); err != nil {
		return err
	}
	for i := range entries {
		if err := enc.Encode(&entries[i]); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Loaded says what Load read.
type Loaded struct {
	// Entries counts the entries added to the ring.
	Entries int
	// Skipped counts the lines that were not entries, or not newer than
	// the one before.
	Skipped int
}

// Load adds the entries of the history file at path to the ring, oldest
// first, and the models' last training. A missing file is no error: the
// history starts empty. A line that is too long, malformed or out of
// order is skipped and counted; a file whose first line is not a
// history header is ErrFormat. At most the file's last Size entries stay,
// as when they were added.
func (r *Ring) Load(path string) (Loaded, error) {
	var res Loaded
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("load history: %w", err)
	}
	defer f.Close()
	// A file this daemon wrote holds a header and at most Size lines of
	// at most maxLine bytes; one larger was not written by it.
	br := bufio.NewReaderSize(io.LimitReader(f, maxHeader+int64(r.opts.Size)*maxLine), 64<<10)
	line, _, err := readLine(br, maxHeader)
	if err != nil && !errors.Is(err, io.EOF) {
		return res, fmt.Errorf("load history %s: %w", path, err)
	}
	var h header
	if json.Unmarshal(line, &h) != nil || h.Version != fileVersion {
		return res, fmt.Errorf("load history %s: %w (version %d)", path, ErrFormat, h.Version)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for u, t := range h.Trained {
		if len(u) <= maxUser && t.After(r.trained[u]) && len(r.trained) < maxTrained {
			r.trained[u] = t
		}
	}
	for {
		line, tooLong, err := readLine(br, maxLine)
		switch {
		case tooLong:
			res.Skipped++
		case len(bytes.TrimSpace(line)) > 0:
			var e Entry
			if json.Unmarshal(line, &e) != nil || e.ID < r.next || e.ID > maxID || e.Verdict == "" {
				res.Skipped++
				break
			}
			e.trim()
			e.Held = false
			r.add(e, nil)
			res.Entries++
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return res, fmt.Errorf("load history %s: %w", path, err)
		}
	}
	res.Entries = min(res.Entries, r.count)
	r.saved = r.changes
	return res, nil
}

// readLine reads one line without its line end. A line longer than max
// bytes is read to its end and reported too long, with no bytes.
func readLine(br *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > max {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), tooLong, err
	}
}
