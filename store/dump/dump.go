// Package dump reads and writes models as portable text: the backup,
// restore and migration format of spamtrain dump and restore, and of the
// daemon's API.
//
// A dump is line-oriented UTF-8 (ASCII in practice), one record per line,
// fields separated by one space:
//
//	spamd-dump 3
//	user alice@example.org
//	classes ham spam
//	forgotten 2,0
//	t 00a1b2c3d4e5f607 2026-11-20 3 -5120 0 0
//	s 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 spam 2026-11-20 5d41402abc4b2a76 spam 812 -40 ham -812 40 f0=412 f2=64 f8=101
//	end tokens=1 seen=1 messages=0,1 counts=3,0 values=0,3 levels=0,577 forgotten=2,0
//	user
//	classes ham spam
//	...
//	end tokens=... seen=... messages=... counts=... values=... levels=... forgotten=...
//
// The first line names the format and its version; a reader refuses a
// version it does not know. Each user's model is a section: "user" and
// its name ("" for the global model, written as "user" alone), "classes"
// and the class names, "forgotten" and the messages per class whose seen
// records were pruned (left out when there are none), then its rows. A
// token row ("t") is the feature's hash in 16 hex digits, the last day it
// was trained (YYYY-MM-DD, UTC) and, for each class in order, its count
// and its weight (signed, in units of store.WeightUnit). A seen record
// ("s") is the message's digest in 64 hex digits, the class it was
// trained as, the day it was trained, its mark (store.Op.Mark) in 16 hex
// digits, for each weight step recorded when it was trained, the step's
// class, head and body, and for each of its measures "f", the measure's
// index, "=" and the level of its value (store.Value). "end" closes the section
// with what the section holds: the number of token rows and seen records,
// the messages per class (the seen records of each class), the sum of
// each class's counts, per class the number of values and the sum of
// their levels, and the forgotten line's messages again. A reader checks them, so a dump cut short or edited by
// hand is refused before a restore finishes, and a restore is all or
// nothing. A model's samples are not in the dump: restoring recounts them
// from the seen records' values, as it recounts the totals.
//
// Version 1, before measures, had no values and no values= and levels=
// on its end lines; version 2, before pruning, had no days, marks and
// forgotten line. A reader reads both still: their rows and seen
// records have day 0 and mark 0, and a model restored from them is
// pruned by the budget alone until it is trained again.
//
// Rows come in ascending hash order and seen records in ascending digest
// order, as store.Store.Dump gives them, so that dumping a restored model
// gives the very same bytes.
package dump

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
)

// Magic is the first word of every dump; Version is the version written.
const (
	Magic   = "spamd-dump"
	Version = 3
)

// minVersion is the oldest version a Reader reads.
const minVersion = 1

// ErrFormat is wrapped by every error about a dump's content.
var ErrFormat = errors.New("not a valid spamd dump")

// maxLine bounds one line: a seen record with a step per class of the
// longest names is far shorter, and a longer line is not a dump.
const maxLine = 64 << 10

// Writer writes a dump.
type Writer struct {
	w       *bufio.Writer
	started bool // the first line is written
	open    bool // a section is open
	classes []string
	sum     summary
	buf     []byte
}

// summary is what a section's end line states.
type summary struct {
	version      int
	tokens, seen uint64
	messages     []uint64 // per class
	counts       []uint64 // per class
	values       []uint64 // per class, from version 2
	levels       []uint64 // per class, from version 2
	forgotten    []uint64 // per class, from version 3
}

func newSummary(version, classes int) summary {
	return summary{version: version, messages: make([]uint64, classes), counts: make([]uint64, classes),
		values: make([]uint64, classes), levels: make([]uint64, classes), forgotten: make([]uint64, classes)}
}

// NewWriter returns a Writer that writes to w. Nothing is written before
// the first section begins; Close writes what is buffered.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: bufio.NewWriterSize(w, 64<<10)}
}

// Begin starts the section of user's model, whose rows are indexed by
// classes; forgotten, indexed like classes, is store.Totals.Forgotten,
// nil when none was.
func (w *Writer) Begin(user string, classes []string, forgotten []uint64) error {
	if w.open {
		return errors.New("dump: Begin inside a section")
	}
	if err := store.ValidUser(user); err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	for _, c := range classes {
		if err := store.ValidClass(c); err != nil {
			return fmt.Errorf("dump: %w", err)
		}
	}
	if !w.started {
		fmt.Fprintf(w.w, "%s %d\n", Magic, Version)
		w.started = true
	}
	if user == "" {
		w.w.WriteString("user\n")
	} else {
		fmt.Fprintf(w.w, "user %s\n", user)
	}
	w.w.WriteString("classes")
	for _, c := range classes {
		w.w.WriteString(" " + c)
	}
	w.w.WriteString("\n")
	if len(forgotten) > len(classes) {
		return fmt.Errorf("dump: forgotten messages of %d classes, the section has %d", len(forgotten), len(classes))
	}
	f := make([]uint64, len(classes))
	copy(f, forgotten)
	if slices.ContainsFunc(f, func(n uint64) bool { return n != 0 }) {
		fmt.Fprintf(w.w, "forgotten %s\n", joinUints(f))
	}
	w.open, w.classes = true, classes
	w.sum = newSummary(Version, len(classes))
	copy(w.sum.forgotten, forgotten)
	return nil
}

// Write writes one record of the open section: a token row or a seen
// record. A header record (store.Record.Classes) is refused: Begin writes
// it.
func (w *Writer) Write(r store.Record) error {
	if !w.open {
		return errors.New("dump: Write outside a section")
	}
	b := w.buf[:0]
	switch {
	case r.Counts != nil:
		if len(r.Counts) > 2*len(w.classes) {
			return fmt.Errorf("dump: token %016x has counts for %d classes of %d", uint64(r.Hash), len(r.Counts)/2, len(w.classes))
		}
		b = append(b, "t "...)
		b = appendHex(b, uint64(r.Hash))
		b = append(b, ' ')
		b = appendDay(b, r.Day)
		for c := range w.classes {
			n := r.Counts.Count(c)
			w.sum.counts[c] += n
			b = append(b, ' ')
			b = strconv.AppendUint(b, n, 10)
			b = append(b, ' ')
			b = strconv.AppendInt(b, r.Counts.Weight(c), 10)
		}
		w.sum.tokens++
	case r.Class != "":
		c := r.Class
		i := slices.Index(w.classes, c)
		if i < 0 {
			return fmt.Errorf("dump: seen record of class %q, not a class of the section", c)
		}
		w.sum.messages[i]++
		b = append(b, "s "...)
		b = hex.AppendEncode(b, r.Digest[:])
		b = append(b, ' ')
		b = append(b, c...)
		b = append(b, ' ')
		b = appendDay(b, r.Day)
		b = append(b, ' ')
		b = appendHex(b, r.Mark)
		for _, s := range r.Steps {
			if err := store.ValidClass(s.Class); err != nil {
				return fmt.Errorf("dump: step of message %x: %w", r.Digest, err)
			}
			b = append(b, ' ')
			b = append(b, s.Class...)
			b = append(b, ' ')
			b = strconv.AppendInt(b, s.Head, 10)
			b = append(b, ' ')
			b = strconv.AppendInt(b, s.Body, 10)
		}
		if err := store.ValidValues(r.Values); err != nil {
			return fmt.Errorf("dump: message %x: %w", r.Digest, err)
		}
		for _, v := range r.Values {
			b = append(b, " f"...)
			b = strconv.AppendUint(b, uint64(v.Measure), 10)
			b = append(b, '=')
			b = strconv.AppendUint(b, uint64(v.Level), 10)
			w.sum.values[i]++
			w.sum.levels[i] += uint64(v.Level)
		}
		w.sum.seen++
	default:
		return errors.New("dump: a record that is neither a token row nor a seen record")
	}
	b = append(b, '\n')
	w.buf = b
	_, err := w.w.Write(b)
	return err
}

// End closes the open section with its summary line.
func (w *Writer) End() error {
	if !w.open {
		return errors.New("dump: End outside a section")
	}
	w.open = false
	_, err := fmt.Fprintf(w.w, "end %s\n", w.sum)
	return err
}

// Close flushes the dump. A dump with no section holds the first line
// alone.
func (w *Writer) Close() error {
	if w.open {
		return errors.New("dump: Close inside a section")
	}
	if !w.started {
		fmt.Fprintf(w.w, "%s %d\n", Magic, Version)
		w.started = true
	}
	return w.w.Flush()
}

// String formats s as the fields of an end line.
func (s summary) String() string {
	line := fmt.Sprintf("tokens=%d seen=%d messages=%s counts=%s", s.tokens, s.seen, joinUints(s.messages), joinUints(s.counts))
	if s.version >= 2 {
		line += fmt.Sprintf(" values=%s levels=%s", joinUints(s.values), joinUints(s.levels))
	}
	if s.version >= 3 {
		line += " forgotten=" + joinUints(s.forgotten)
	}
	return line
}

func joinUints(v []uint64) string {
	var b []byte
	for i, n := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, n, 10)
	}
	return string(b)
}

// appendDay appends d as YYYY-MM-DD.
func appendDay(b []byte, d store.Day) []byte {
	return d.Time().AppendFormat(b, time.DateOnly)
}

// parseDay parses a day as appendDay writes it.
func parseDay(s string) (store.Day, error) {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil || t.Unix() < 0 {
		return 0, fmt.Errorf("%.20q is not a day (YYYY-MM-DD, from 1970)", s)
	}
	return store.DayOf(t), nil
}

func appendHex(b []byte, v uint64) []byte {
	const digits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, digits[(v>>uint(shift))&0xf])
	}
	return b
}

// Reader reads a dump, one section at a time.
type Reader struct {
	s       *bufio.Scanner
	version int
	line    int
	classes []string
	state   int // between sections, header to give, or in the rows
	sum     summary
	forgot  []uint64
	pending string // a line read ahead, not yet parsed
	err     error  // sticky
}

// The states of a Reader.
const (
	between = iota // before a section's user line
	header         // Record gives the header next
	rows           // Record gives rows and seen records
)

// NewReader returns a Reader of the dump r holds, gzip-compressed or not,
// and checks its first line.
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("dump: %w", err)
		}
		r = zr
	} else {
		r = br
	}
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 4096), maxLine)
	d := &Reader{s: s}
	first, err := d.next()
	if err == io.EOF {
		return nil, fmt.Errorf("%w: empty", ErrFormat)
	}
	if err != nil {
		return nil, err
	}
	magic, ver, _ := strings.Cut(first, " ")
	if magic != Magic {
		return nil, fmt.Errorf("%w: it starts with %.40q", ErrFormat, first)
	}
	v, err := strconv.Atoi(ver)
	if err != nil || v < minVersion || v > Version {
		return nil, fmt.Errorf("%w: version %q, this spamd reads versions %d to %d", ErrFormat, ver, minVersion, Version)
	}
	d.version = v
	return d, nil
}

// next returns the next line.
func (d *Reader) next() (string, error) {
	if !d.s.Scan() {
		if err := d.s.Err(); err != nil {
			return "", fmt.Errorf("dump: line %d: %w", d.line+1, err)
		}
		return "", io.EOF
	}
	d.line++
	return d.s.Text(), nil
}

// line1 returns the line read ahead, if any, else the next line.
func (d *Reader) line1() (string, error) {
	if l := d.pending; l != "" {
		d.pending = ""
		return l, nil
	}
	return d.next()
}

// errorf returns a format error at the current line.
func (d *Reader) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: line %d: %s", ErrFormat, d.line, fmt.Sprintf(format, args...))
}

// Next moves to the next section and returns its user and classes, or
// io.EOF after the last one. The previous section must have been read to
// its end.
func (d *Reader) Next() (user string, classes []string, err error) {
	if d.err != nil {
		return "", nil, d.err
	}
	if d.state != between {
		return "", nil, errors.New("dump: Next before the section was read to its end")
	}
	l, err := d.next()
	if err != nil {
		return "", nil, d.fail(err)
	}
	word, user, _ := strings.Cut(l, " ")
	if word != "user" {
		return "", nil, d.fail(d.errorf("%.40q where a section's user line belongs", l))
	}
	if err := store.ValidUser(user); err != nil {
		return "", nil, d.fail(d.errorf("%v", err))
	}
	l, err = d.next()
	if err == io.EOF {
		return "", nil, d.fail(d.errorf("the dump ends after the user line"))
	}
	if err != nil {
		return "", nil, d.fail(err)
	}
	f := strings.Fields(l)
	if len(f) == 0 || f[0] != "classes" || l != strings.Join(f, " ") {
		return "", nil, d.fail(d.errorf("%.40q where the classes line belongs", l))
	}
	classes = f[1:]
	for i, c := range classes {
		if err := store.ValidClass(c); err != nil {
			return "", nil, d.fail(d.errorf("%v", err))
		}
		for _, b := range classes[:i] {
			if b == c {
				return "", nil, d.fail(d.errorf("class %q twice", c))
			}
		}
	}
	d.classes, d.state, d.forgot = classes, header, nil
	d.sum = newSummary(d.version, len(classes))
	if d.version >= 3 {
		l, err = d.next()
		if err == io.EOF {
			return "", nil, d.fail(d.errorf("the dump ends after the classes line"))
		}
		if err != nil {
			return "", nil, d.fail(err)
		}
		if rest, ok := strings.CutPrefix(l, "forgotten "); ok {
			f := strings.Split(rest, ",")
			if len(f) != len(classes) {
				return "", nil, d.fail(d.errorf("forgotten messages of %d classes, the section has %d", len(f), len(classes)))
			}
			for _, x := range f {
				n, err := strconv.ParseUint(x, 10, 64)
				if err != nil {
					return "", nil, d.fail(d.errorf("forgotten messages %.20q", x))
				}
				d.forgot = append(d.forgot, n)
			}
			copy(d.sum.forgotten, d.forgot)
		} else {
			d.pending = l
		}
	}
	return user, classes, nil
}

// fail makes err sticky.
func (d *Reader) fail(err error) error {
	if err != io.EOF {
		d.err = err
	}
	return err
}

// Record returns the next record of the section, as store.Store.Restore
// takes them: first a header with the section's classes, then its rows
// and seen records. It returns io.EOF at the section's end line, once the
// line agrees with what was read; a dump that ends early, or whose end
// line disagrees, is an error.
func (d *Reader) Record() (store.Record, error) {
	if d.err != nil {
		return store.Record{}, d.err
	}
	switch d.state {
	case between:
		return store.Record{}, io.EOF
	case header:
		d.state = rows
		return store.Record{Classes: slices.Clone(d.classes), Forgotten: slices.Clone(d.forgot)}, nil
	}
	l, err := d.line1()
	if err == io.EOF {
		return store.Record{}, d.fail(d.errorf("the dump ends inside a section: it was cut short"))
	}
	if err != nil {
		return store.Record{}, d.fail(err)
	}
	r, err := d.parse(l)
	if err != nil {
		return store.Record{}, d.fail(err)
	}
	if r == nil {
		d.state = between
		return store.Record{}, io.EOF
	}
	return *r, nil
}

// parse parses a line of a section: a row, a seen record, or the end line
// (nil).
func (d *Reader) parse(l string) (*store.Record, error) {
	f := strings.Split(l, " ")
	switch f[0] {
	case "t":
		var day store.Day
		if d.version >= 3 {
			if len(f) < 3 {
				return nil, d.errorf("a token row of %d fields", len(f))
			}
			var err error
			if day, err = parseDay(f[2]); err != nil {
				return nil, d.errorf("token %.20q: %v", f[1], err)
			}
			f = append(f[:2:2], f[3:]...)
		}
		if len(f) != 2+2*len(d.classes) {
			return nil, d.errorf("a token row of %d fields, not %d", len(f), 2+2*len(d.classes))
		}
		h, err := parseHash(f[1])
		if err != nil {
			return nil, d.errorf("token %.20q: %v", f[1], err)
		}
		c := make(store.Counts, 2*len(d.classes))
		zero := true
		for i := range d.classes {
			n, err := strconv.ParseUint(f[2+2*i], 10, 64)
			if err != nil {
				return nil, d.errorf("token %s: count %.20q", f[1], f[2+2*i])
			}
			w, err := strconv.ParseInt(f[3+2*i], 10, 64)
			if err != nil {
				return nil, d.errorf("token %s: weight %.20q", f[1], f[3+2*i])
			}
			c[2*i], c[2*i+1] = n, uint64(w)
			zero = zero && n == 0 && w == 0
			if d.sum.counts[i]+n < d.sum.counts[i] {
				return nil, d.errorf("token %s: the counts of class %s overflow", f[1], d.classes[i])
			}
			d.sum.counts[i] += n
		}
		if zero {
			return nil, d.errorf("token %s: a row of zeros", f[1])
		}
		d.sum.tokens++
		return &store.Record{Hash: bow.Hash(h), Counts: c, Day: day}, nil
	case "s":
		var day store.Day
		var mark uint64
		if d.version >= 3 {
			if len(f) < 5 {
				return nil, d.errorf("a seen record of %d fields", len(f))
			}
			var err error
			if day, err = parseDay(f[3]); err != nil {
				return nil, d.errorf("message %.20q: %v", f[1], err)
			}
			if mark, err = parseHash(f[4]); err != nil {
				return nil, d.errorf("message %.20q: mark %.20q: %v", f[1], f[4], err)
			}
			f = append(f[:3:3], f[5:]...)
		}
		// Steps come in threes, then values, which have a '='.
		vals := len(f)
		for k := 3; k < len(f); k++ {
			if strings.Contains(f[k], "=") {
				vals = k
				break
			}
		}
		if len(f) < 3 || (vals-3)%3 != 0 {
			return nil, d.errorf("a seen record of %d fields", len(f))
		}
		r := store.Record{Day: day, Mark: mark}
		if len(f[1]) != 2*len(r.Digest) {
			return nil, d.errorf("digest %.20q is not %d hex digits", f[1], 2*len(r.Digest))
		}
		if _, err := hex.Decode(r.Digest[:], []byte(f[1])); err != nil {
			return nil, d.errorf("digest %.20q: %v", f[1], err)
		}
		r.Class = f[2]
		i := slices.Index(d.classes, r.Class)
		if i < 0 {
			return nil, d.errorf("message %s: class %.20q is not one of the section's", f[1], r.Class)
		}
		for k := 3; k < vals; k += 3 {
			s := store.Step{Class: f[k]}
			if !slices.Contains(d.classes, s.Class) {
				return nil, d.errorf("message %s: step class %.20q is not one of the section's", f[1], s.Class)
			}
			var err1, err2 error
			s.Head, err1 = strconv.ParseInt(f[k+1], 10, 64)
			s.Body, err2 = strconv.ParseInt(f[k+2], 10, 64)
			if err1 != nil || err2 != nil {
				return nil, d.errorf("message %s: step %.40q", f[1], strings.Join(f[k:k+3], " "))
			}
			r.Steps = append(r.Steps, s)
		}
		if vals < len(f) && d.version < 2 {
			return nil, d.errorf("message %s: values in a dump of version %d", f[1], d.version)
		}
		for _, x := range f[vals:] {
			v, err := parseValue(x)
			if err != nil {
				return nil, d.errorf("message %s: value %.20q: %v", f[1], x, err)
			}
			r.Values = append(r.Values, v)
			d.sum.values[i]++
			d.sum.levels[i] += uint64(v.Level)
		}
		if err := store.ValidValues(r.Values); err != nil {
			return nil, d.errorf("message %s: %v", f[1], err)
		}
		d.sum.messages[i]++
		d.sum.seen++
		return &r, nil
	case "end":
		if got := "end " + d.sum.String(); l != got {
			return nil, d.errorf("the section says %q, but holds %q: the dump is damaged", strings.TrimPrefix(l, "end "), d.sum)
		}
		return nil, nil
	}
	return nil, d.errorf("%.40q is no record", l)
}

// parseValue parses a value, "f" measure "=" level, in decimal.
func parseValue(s string) (store.Value, error) {
	m, l, ok := strings.Cut(s, "=")
	if !ok || !strings.HasPrefix(m, "f") {
		return store.Value{}, errors.New(`not f<measure>=<level>`)
	}
	mi, err1 := strconv.ParseUint(m[1:], 10, 8)
	li, err2 := strconv.ParseUint(l, 10, 16)
	if err1 != nil || err2 != nil {
		return store.Value{}, errors.New(`not f<measure>=<level>`)
	}
	return store.Value{Measure: uint8(mi), Level: uint16(li)}, nil
}

// parseHash parses a token's hash, 16 hex digits.
func parseHash(s string) (uint64, error) {
	if len(s) != 16 {
		return 0, errors.New("not 16 hex digits")
	}
	var b [8]byte
	if _, err := hex.Decode(b[:], []byte(s)); err != nil {
		return 0, err
	}
	var h uint64
	for _, x := range b {
		h = h<<8 | uint64(x)
	}
	return h, nil
}

// Skip reads the rest of the section, checking it as Record does.
func (d *Reader) Skip() error {
	for {
		if _, err := d.Record(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// Model writes user's model in st as a section of w, from one snapshot
// of the store.
func Model(ctx context.Context, w *Writer, st store.Store, user string) error {
	begun := false
	err := st.Dump(ctx, user, func(r store.Record) error {
		if !begun {
			begun = true
			return w.Begin(user, r.Classes, r.Forgotten)
		}
		return w.Write(r)
	})
	if err != nil {
		return fmt.Errorf("dump of %q: %w", user, err)
	}
	return w.End()
}
