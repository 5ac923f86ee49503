// Package mailbox finds and reads the messages spamd trains on, classifies
// and evaluates: maildirs with their Maildir++ subfolders, mbox files,
// single message files, directories of those, standard input, and
// TREC-style index files that give each message a label.
//
// A source is recognised by what it is on disk. A directory with a cur/ or
// new/ subdirectory is a maildir: every file in cur/ and new/ is one
// message, read as it is, and tmp/ is skipped because deliveries there are
// unfinished. Any other directory holds message files. A file whose first
// line starts with "From " and that has at least two separators is an
// mbox; any other file, including one with a single leading "From " line
// as in the SpamAssassin public corpus, is one message whose bytes are
// passed on unchanged.
//
// An mbox is split on "From " lines that begin the input or follow a blank
// line. Each message loses its "From " line and the blank line before the
// next one, and ">From " quoting is undone (one '>' is stripped from every
// line matching ^>+From ). LF and CRLF line endings both work, and the
// message keeps its own. The splitter streams: memory holds one message and
// a 64 KiB buffer, whatever the size of the file or of its lines.
//
// Limits:
//   - Content-Length headers (mboxcl) are ignored. An mboxo file whose
//     writer did not quote a body line "From ..." that follows a blank line
//     is split there; no reader can tell such a line from a separator.
//   - A message longer than Options.MaxBytes is cut at that length and
//     marked Truncated; the rest is skipped unread, not loaded.
//   - Names starting with '.' are skipped inside directories (editor and
//     desktop droppings), except Maildir++ folders. Symbolic links to files
//     are followed; below the top level, links to directories are not, so a
//     link cycle cannot loop.
//   - Walks are sequential and ordered: file names in byte order, a
//     maildir's cur/ before its new/, then its subfolders.
//   - A blocked read of standard input does not notice a cancelled
//     context; every other wait is between files or messages and does.
package mailbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// DefaultMaxBytes is the read cap per message when Options.MaxBytes is not
// set: far above real mail, low enough that a corrupt or hostile file
// cannot exhaust memory.
const DefaultMaxBytes = 64 << 20

// Stdin is the source name that reads standard input.
const Stdin = "-"

// Message is one message read from a source.
type Message struct {
	// Path tells a user where to find the message: the file's path, "-"
	// for standard input, or "mbox PATH#N" for the Nth message (from 1) of
	// the mbox PATH.
	Path string
	// Raw holds the message's bytes, at most the read cap.
	Raw []byte
	// Label is the class an index gave the message; "" when the message
	// was not listed in an index.
	Label string
	// Truncated is set when the message was longer than the read cap and
	// Raw holds only its beginning.
	Truncated bool
}

// Options controls a walk.
type Options struct {
	// Recursive descends into subdirectories of a plain directory and
	// into the Maildir++ subfolders (.Name/) of a maildir.
	Recursive bool
	// MaxBytes caps the bytes read of any one message; 0 or less means
	// DefaultMaxBytes.
	MaxBytes int64
	// Stdin is read for the source "-"; nil means os.Stdin.
	Stdin io.Reader
	// OnError is told about each file or directory below a source that
	// could not be read; the walk then goes on. When nil, these errors are
	// joined and returned once the walk has finished.
	OnError func(path string, err error)
}

// Walk calls fn for every message in src, which is a maildir, a directory,
// an mbox or message file, or "-" for standard input. It stops at the
// first error from fn or ctx and returns it. An src that cannot be read is
// an error; a file or directory below it that cannot be read is not, see
// Options.OnError.
func Walk(ctx context.Context, src string, o Options, fn func(Message) error) error {
	w := newWalker(ctx, o, fn)
	if err := w.source(src, ""); err != nil {
		return fmt.Errorf("walk %s: %w", src, err)
	}
	if err := errors.Join(w.errs...); err != nil {
		return fmt.Errorf("walk %s: %w", src, err)
	}
	return nil
}

// ErrUncountable is returned by Count for standard input, which can be
// read only once.
var ErrUncountable = errors.New("standard input cannot be counted before it is read")

// Count returns how many messages Walk would give for src, reading as
// little as it can: the files of a maildir or a directory are counted,
// not read, but for those that begin with "From ", which are read through
// to count the messages of an mbox. Files that cannot be read are not
// counted (Walk reports them). It is for a progress bar's total, at the
// cost of a directory listing per folder.
func Count(ctx context.Context, src string, o Options) (int, error) {
	if src == Stdin {
		return 0, ErrUncountable
	}
	n := 0
	o.OnError = func(string, error) {}
	w := newWalker(ctx, o, func(Message) error { n++; return nil })
	w.count = true
	if err := w.source(src, ""); err != nil {
		return n, fmt.Errorf("count %s: %w", src, err)
	}
	return n, nil
}

type walker struct {
	ctx   context.Context
	o     Options
	max   int64
	stdin io.Reader
	fn    func(Message) error
	// count makes the walk emit a message without its bytes wherever
	// it need not read them to know it is one message (Count).
	count bool
	// abort is the error from fn or ctx that ends the walk; set, it makes
	// every level return instead of reporting and going on.
	abort error
	errs  []error
}

// readers holds the buffered readers stream reads files with, of
// readBufSize: a reader sized to each file was, with the message itself,
// most of what reading a corpus allocated, and a walk of an index is a
// walk per message.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBufSize) }}

func newWalker(ctx context.Context, o Options, fn func(Message) error) *walker {
	w := &walker{ctx: ctx, o: o, max: capOrDefault(o.MaxBytes), stdin: o.Stdin, fn: fn}
	if w.stdin == nil {
		w.stdin = os.Stdin
	}
	return w
}

func capOrDefault(n int64) int64 {
	if n <= 0 {
		return DefaultMaxBytes
	}
	return n
}

// source walks a top-level source, whose own failure is returned rather
// than reported.
func (w *walker) source(src, label string) error {
	if src == Stdin {
		return w.stream(Stdin, w.stdin, label, -1)
	}
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	switch {
	case !fi.IsDir() && !fi.Mode().IsRegular():
		// Opening a FIFO waits for a writer and a device may never
		// end: only "-" reads a stream, where that is what is asked.
		return fmt.Errorf("%w: %s is a %s; to read it, give - and redirect it to standard input", ErrNotRegular, src, fileKind(fi.Mode()))
	case !fi.IsDir():
		return w.file(src, label)
	case isMaildir(src):
		return w.maildir(src, label, w.o.Recursive)
	default:
		return w.dir(src, label)
	}
}

// nested decides what an error from below the top level means: the end of
// the walk if fn or ctx asked for it, otherwise a report.
func (w *walker) nested(path string, err error) error {
	if err == nil {
		return nil
	}
	if w.abort != nil {
		return w.abort
	}
	if w.o.OnError != nil {
		w.o.OnError(path, err)
	} else {
		w.errs = append(w.errs, err)
	}
	return nil
}

func (w *walker) checkCtx() error {
	if err := w.ctx.Err(); err != nil {
		w.abort = err
		return err
	}
	return nil
}

func (w *walker) emit(m Message) error {
	if err := w.checkCtx(); err != nil {
		return err
	}
	if err := w.fn(m); err != nil {
		w.abort = fmt.Errorf("%s: %w", m.Path, err)
		return w.abort
	}
	return nil
}

func isMaildir(dir string) bool {
	for _, sub := range []string{"cur", "new"} {
		if fi, err := os.Stat(filepath.Join(dir, sub)); err == nil && fi.IsDir() {
			return true
		}
	}
	return false
}

// maildir walks cur/ and new/ of dir and, with sub, its Maildir++ folders.
func (w *walker) maildir(dir, label string, sub bool) error {
	for _, part := range []string{"cur", "new"} {
		d := filepath.Join(dir, part)
		entries, err := os.ReadDir(d)
		if errors.Is(err, fs.ErrNotExist) {
			continue // a maildir needs only one of cur/ and new/
		}
		if err := w.nested(d, err); err != nil {
			return err
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			p := filepath.Join(d, e.Name())
			isFile, err := regular(p, e)
			if err := w.nested(p, err); err != nil {
				return err
			}
			if !isFile {
				continue
			}
			if err := w.nested(p, w.message(p, label)); err != nil {
				return err
			}
		}
	}
	if !sub {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err := w.nested(dir, err); err != nil {
		return err
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		// Maildir++ folders are flat (".A.B" is B inside A), so they are
		// walked without looking for folders inside them.
		if !e.IsDir() || !strings.HasPrefix(e.Name(), ".") || !isMaildir(p) {
			continue
		}
		if err := w.maildir(p, label, false); err != nil {
			return err
		}
	}
	return nil
}

// dir walks the message files of a directory that is not a maildir and,
// when recursive, its subdirectories.
func (w *walker) dir(dir, label string) error {
	entries, err := os.ReadDir(dir)
	if err != nil && len(entries) == 0 {
		return err
	}
	// ReadDir returns what it could read along with the error: walk that
	// much, and say what was missed.
	if err := w.nested(dir, err); err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if e.IsDir() {
			if !w.o.Recursive {
				continue
			}
			var err error
			if isMaildir(p) {
				err = w.maildir(p, label, true)
			} else {
				err = w.dir(p, label)
			}
			if err := w.nested(p, err); err != nil {
				return err
			}
			continue
		}
		isFile, err := regular(p, e)
		if err := w.nested(p, err); err != nil {
			return err
		}
		if !isFile {
			continue
		}
		if err := w.nested(p, w.file(p, label)); err != nil {
			return err
		}
	}
	return nil
}

// ErrNotRegular is wrapped by the error of a source that is neither a
// directory nor a regular file.
var ErrNotRegular = errors.New("not a regular file")

// fileKind names the kind of a file that is not regular.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// regular reports whether a directory entry is, or links to, a regular
// file; sockets, pipes and devices are skipped because opening one can
// block or never end.
func regular(path string, e fs.DirEntry) (bool, error) {
	if e.Type().IsRegular() {
		return true, nil
	}
	if e.Type()&fs.ModeSymlink == 0 {
		return false, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return false, err
	}
	return fi.Mode().IsRegular(), nil
}

// message reads a maildir file: always one message, kept as it is.
func (w *walker) message(path, label string) error {
	if err := w.checkCtx(); err != nil {
		return err
	}
	if w.count {
		return w.emit(Message{Path: path, Label: label})
	}
	f, size, err := openRegular(path)
	if err != nil {
		return err
	}
	defer f.Close()
	raw, truncated, err := readCapped(f, w.max, size)
	if err != nil {
		return err
	}
	return w.emit(Message{Path: path, Raw: raw, Label: label, Truncated: truncated})
}

// file reads a file that may be one message or an mbox.
func (w *walker) file(path, label string) error {
	if err := w.checkCtx(); err != nil {
		return err
	}
	f, size, err := openRegular(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return w.stream(path, f, label, size)
}

// stream reads r, named name, as one message or, if it begins with a
// "From " line and has more than one, as an mbox. size is r's size, or
// -1 if unknown.
func (w *walker) stream(name string, r io.Reader, label string, size int64) error {
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	// What a message emitted holds is its own: chunk and readCapped copy
	// out of br.
	defer func() {
		br.Reset(nil)
		readers.Put(br)
	}()
	head, err := br.Peek(len(fromPrefix))
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if !bytes.Equal(head, fromPrefix) {
		if w.count {
			return w.emit(Message{Path: name, Label: label})
		}
		raw, truncated, err := readCapped(br, w.max, size)
		if err != nil {
			return err
		}
		return w.emit(Message{Path: name, Raw: raw, Label: label, Truncated: truncated})
	}
	s := newSplitter(br, w.max, readBufSize)
	// A file that starts like an mbox is mostly one message with its
	// envelope line (a TREC corpus, a saved message): the first chunk
	// gets the whole file's room at once, unless the file is large
	// enough to be a true mbox, whose first message would then hold
	// room for them all.
	if size <= firstCapMax {
		s.firstCap = size
	}
	first, firstTrunc, err := s.chunk()
	if err != nil {
		return err
	}
	raw, truncated, err := s.chunk()
	if errors.Is(err, io.EOF) {
		return w.emit(Message{Path: name, Raw: first, Label: label, Truncated: firstTrunc})
	}
	if err != nil {
		return err
	}
	// The first message of a true mbox gives back the rest of the room.
	first = bytes.Clone(first)
	m := Message{Path: mboxPath(name, 1), Raw: unmbox(first, firstTrunc), Label: label, Truncated: firstTrunc}
	if err := w.emit(m); err != nil {
		return err
	}
	for n := 2; ; n++ {
		m := Message{Path: mboxPath(name, n), Raw: unmbox(raw, truncated), Label: label, Truncated: truncated}
		if err := w.emit(m); err != nil {
			return err
		}
		raw, truncated, err = s.chunk()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func mboxPath(name string, n int) string {
	return fmt.Sprintf("mbox %s#%d", name, n)
}

// readCapped reads r to its end or to max bytes, whichever comes first.
// size is what r is expected to hold, or -1 if unknown.
func readCapped(r io.Reader, max, size int64) ([]byte, bool, error) {
	// One byte past the cap tells a message of exactly max bytes from a
	// longer one, and one past the size finds the end without growing.
	raw := make([]byte, 0, min(max, size)+1)
	if size < 0 {
		raw = make([]byte, 0, 512)
	}
	lr := io.LimitReader(r, max+1)
	for {
		if len(raw) == cap(raw) {
			raw = slices.Grow(raw, 1)
		}
		n, err := lr.Read(raw[len(raw):cap(raw)])
		raw = raw[:len(raw)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, false, err
		}
	}
	if int64(len(raw)) > max {
		return raw[:max], true, nil
	}
	return raw, false, nil
}
