package mailbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// ErrNotMbox reports input that does not begin with an mbox "From " line.
var ErrNotMbox = errors.New(`not an mbox: does not begin with a "From " line`)

// fromPrefix opens every mbox separator line.
var fromPrefix = []byte("From ")

// readBufSize bounds the memory the splitter needs beyond the message it
// is collecting: lines longer than this are handled in pieces.
const readBufSize = 64 << 10

// firstCapMax is the largest file whose first chunk gets the file's size
// as room from the start: far above a message, far below a mailbox.
const firstCapMax = 1 << 20

// splitter cuts an mbox stream into raw chunks, each running from its
// "From " separator line up to, not including, the next separator, so the
// chunks concatenate back to the input unless one was truncated.
//
// It reads with bufio.Reader.ReadSlice rather than a line scanner so that
// a line of any length (a megabyte of base64 without newlines) costs no
// more than the read buffer.
type splitter struct {
	br  *bufio.Reader
	max int64
	// next holds the first piece of the separator line that ended the
	// previous chunk and so begins the next one.
	next    []byte
	started bool
	eof     bool
	// firstCap, if positive, is the room the first chunk starts with.
	firstCap int64
}

func newSplitter(r io.Reader, max int64, bufSize int) *splitter {
	return &splitter{br: bufio.NewReaderSize(r, bufSize), max: max}
}

// chunk returns the next raw chunk and whether it was cut at s.max bytes.
// It returns io.EOF after the last chunk, and ErrNotMbox if the input does
// not start with a separator.
func (s *splitter) chunk() (raw []byte, truncated bool, err error) {
	if s.eof {
		return nil, false, io.EOF
	}
	add := func(p []byte) {
		room := s.max - int64(len(raw))
		if int64(len(p)) > room {
			p = p[:room]
			truncated = true
		}
		raw = append(raw, p...)
	}
	// The start of the input counts as following a blank line, so the
	// first line can be a separator.
	lineStart, prevBlank := true, true
	if !s.started && s.firstCap > 0 {
		raw = make([]byte, 0, min(s.firstCap, s.max))
	}
	if s.next != nil {
		add(s.next)
		lineStart = s.next[len(s.next)-1] == '\n'
		prevBlank = false
		s.next = nil
	}
	for {
		piece, rerr := s.br.ReadSlice('\n')
		if rerr != nil && !errors.Is(rerr, bufio.ErrBufferFull) && !errors.Is(rerr, io.EOF) {
			return raw, truncated, rerr
		}
		if lineStart && prevBlank && bytes.HasPrefix(piece, fromPrefix) {
			if s.started {
				s.next = bytes.Clone(piece)
				return raw, truncated, nil
			}
			s.started = true
		}
		if !s.started && len(piece) > 0 {
			s.eof = true
			return nil, false, ErrNotMbox
		}
		add(piece)
		if errors.Is(rerr, io.EOF) {
			s.eof = true
			if !s.started {
				return nil, false, io.EOF
			}
			return raw, truncated, nil
		}
		prevBlank = lineStart && isBlankLine(piece)
		lineStart = piece[len(piece)-1] == '\n'
	}
}

// isBlankLine reports whether a whole line, terminator included, is empty.
func isBlankLine(line []byte) bool {
	return string(line) == "\n" || string(line) == "\r\n"
}

// unmbox turns a raw chunk into the message it carries: it drops the
// "From " line and the blank line the format puts between messages, and
// undoes ">From " quoting in place.
func unmbox(raw []byte, truncated bool) []byte {
	i := bytes.IndexByte(raw, '\n')
	if i < 0 {
		return raw[:0]
	}
	msg := raw[i+1:]
	if !truncated {
		switch {
		case bytes.HasSuffix(msg, []byte("\n\r\n")):
			msg = msg[:len(msg)-2]
		case bytes.HasSuffix(msg, []byte("\n\n")):
			msg = msg[:len(msg)-1]
		}
	}
	return unquoteFrom(msg)
}

// unquoteFrom strips one '>' from every line matching ^>+From , which
// reverses mboxrd quoting exactly and mboxo quoting as well as it can be.
// It works in place and returns the shortened slice.
func unquoteFrom(msg []byte) []byte {
	out := msg[:0]
	for len(msg) > 0 {
		line := msg
		if j := bytes.IndexByte(msg, '\n'); j >= 0 {
			line = msg[:j+1]
		}
		msg = msg[len(line):]
		if quotedFrom(line) {
			line = line[1:]
		}
		out = append(out, line...)
	}
	return out
}

func quotedFrom(line []byte) bool {
	rest := bytes.TrimLeft(line, ">")
	return len(rest) < len(line) && bytes.HasPrefix(rest, fromPrefix)
}

// MboxReader splits an mbox stream into messages, holding at most one
// message (up to its read cap) and a 64 KiB buffer in memory.
type MboxReader struct {
	s *splitter
}

// NewMboxReader returns a reader of the messages in the mbox r. Messages
// longer than maxBytes are cut to maxBytes; maxBytes <= 0 means
// DefaultMaxBytes.
func NewMboxReader(r io.Reader, maxBytes int64) *MboxReader {
	return &MboxReader{s: newSplitter(r, capOrDefault(maxBytes), readBufSize)}
}

// Next returns the next message, without its "From " line and with
// ">From " quoting undone, and whether it was cut at the read cap. It
// returns io.EOF after the last message and ErrNotMbox if the stream does
// not begin with a "From " line.
func (m *MboxReader) Next() (raw []byte, truncated bool, err error) {
	raw, truncated, err = m.s.chunk()
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, ErrNotMbox) {
			return nil, false, err
		}
		return nil, false, fmt.Errorf("read mbox: %w", err)
	}
	return unmbox(raw, truncated), truncated, nil
}
