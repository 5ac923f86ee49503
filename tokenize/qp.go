package tokenize

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
)

// qpReader decodes quoted-printable data as mime/quotedprintable's Reader
// does, byte for byte and error for error, and as fast as its data allows:
// that Reader moves every byte through two slices and a switch, some fifty
// instructions a byte, a fifth of tokenizing an HTML newsletter sent as
// quoted-printable. qpReader copies each run of bytes that stand for
// themselves in one piece. It reads lines as that Reader does, through a
// bufio.Reader of the default size, so that a line longer than the buffer
// ends the part where it ended it; FuzzQPReader holds the two to the same
// output and errors.
type qpReader struct {
	br   *bufio.Reader
	own  *bufio.Reader // br, unless what it reads is a bufio.Reader already
	rerr error         // the error reading ended with, returned once line is done
	line []byte        // what is left of the line read last, its end rewritten
}

// literalQP marks the bytes that stand for themselves in quoted-printable
// text: the printable ones but '=', tab, CR and LF, and, as mail has them
// and as the standard library accepts them, those from 0x80 up.
var literalQP = func() (t [256]bool) {
	for b := range 256 {
		t[b] = b >= ' ' && b <= '~' && b != '=' || b == '\t' || b == '\r' || b == '\n' || b >= 0x80
	}
	return t
}()

// reset readies q to read r, through a buffer of its own, kept for the
// next part, unless r is a bufio.Reader large enough to read from
// directly, as bufio.NewReader would have it. A nil r lets go of the
// reader read last.
func (q *qpReader) reset(r io.Reader) {
	if q.own == nil {
		q.own = bufio.NewReader(nil)
	}
	if b, ok := r.(*bufio.Reader); ok && b.Size() >= q.own.Size() {
		q.br = b
	} else {
		q.own.Reset(r)
		q.br = q.own
	}
	q.rerr, q.line = nil, nil
}

// nextLine reads the next line into q.line as quoted-printable's rules
// shape it: white space at its end dropped, a soft line break ("=" at its
// end) removed and its line ending with it, any other line ending kept as
// CRLF or LF.
func (q *qpReader) nextLine() {
	whole, err := q.br.ReadSlice('\n')
	q.rerr = err
	hasLF := len(whole) > 0 && whole[len(whole)-1] == '\n'
	hasCRLF := hasLF && len(whole) > 1 && whole[len(whole)-2] == '\r'
	end := len(whole)
	for end > 0 && isQPSpace(whole[end-1]) {
		end--
	}
	line := whole[:end]
	switch {
	case end > 0 && line[end-1] == '=':
		after := bytes.TrimLeft(whole[end:], " \t")
		line = line[:end-1]
		// A soft break ends its line, but the last byte of the data may
		// be one too.
		if !bytes.HasPrefix(after, []byte("\n")) && !bytes.HasPrefix(after, []byte("\r\n")) &&
			!(len(after) == 0 && len(line) > 0 && err == io.EOF) {
			q.rerr = fmt.Errorf("quotedprintable: invalid bytes after =: %q", after)
		}
	case hasCRLF:
		line = append(line, '\r', '\n')
	case hasLF:
		line = append(line, '\n')
	}
	q.line = line
}

// isQPSpace reports whether b is white space that quoted-printable drops
// at the end of a line.
func isQPSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\r' || b == '\n' }

// Read decodes into p.
func (q *qpReader) Read(p []byte) (n int, err error) {
	for len(p) > 0 {
		if len(q.line) == 0 {
			if q.rerr != nil {
				return n, q.rerr
			}
			q.nextLine()
			continue
		}
		k := 0
		for k < len(q.line) && k < len(p) && literalQP[q.line[k]] {
			k++
		}
		if k > 0 {
			copy(p, q.line[:k])
			p, q.line, n = p[k:], q.line[k:], n+k
			continue
		}
		b := q.line[0]
		if b != '=' {
			return n, fmt.Errorf("quotedprintable: invalid unescaped byte 0x%02x in body", b)
		}
		switch v, ok := qpHex(q.line[1:]); {
		case ok:
			b, q.line = v, q.line[3:]
		case len(q.line) >= 2 && q.line[1] != '\r' && q.line[1] != '\n':
			// An "=" that no two hex digits follow, within a line, is
			// taken as itself.
			q.line = q.line[1:]
		case len(q.line) < 3:
			return n, io.ErrUnexpectedEOF
		default:
			return n, fmt.Errorf("quotedprintable: invalid hex byte 0x%02x", badHex(q.line[1:3]))
		}
		p[0] = b
		p, n = p[1:], n+1
	}
	return n, nil
}

// qpHex returns the byte that the two hex digits at the start of v stand
// for, of either case.
func qpHex(v []byte) (byte, bool) {
	if len(v) < 2 || !isHexDigit(v[0]) || !isHexDigit(v[1]) {
		return 0, false
	}
	return unhex(v[0])<<4 | unhex(v[1]), true
}

// badHex returns the first of two bytes that is not a hex digit.
func badHex(v []byte) byte {
	if !isHexDigit(v[0]) {
		return v[0]
	}
	return v[1]
}
