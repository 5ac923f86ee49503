package tokenize

import (
	"bytes"
	"crypto/sha256"
	"hash"
	"sync"
)

// DigestMaxBody is how many bytes of normalized body Digest hashes; two
// messages that differ only past it have the same digest.
const DigestMaxBody = 16 << 20

// digestFields are the header fields Digest hashes, in this order. They are
// set by the author's software and left alone by MTAs and delivery agents,
// unlike trace fields (Received, Return-Path, Delivered-To, X-Spam-*...),
// which are prepended on the way.
var digestFields = [...]string{"message-id", "date", "from", "to", "subject"}

// Digest identifies a message for records of what was trained: SHA-256
// over the first Message-ID, Date, From, To and Subject fields (each
// tagged with its name, unfolded, runs of white space made one space) and
// then the body with line endings made LF, white space at line ends and
// blank lines at the end removed, and the '>'s that mbox files put before
// "From " at the start of a line dropped,
// up to DigestMaxBody bytes. It is thus the same whether the message comes
// with CRLF or LF line endings, with or without an mbox "From " line, and
// before or after trace fields were prepended. It reads raw in place and
// allocates nothing in proportion to its size.
func Digest(raw []byte) [32]byte {
	d, _ := identify(raw, false)
	return d
}

// markFields are the fields Mark hashes, the first three of digestFields:
// those no MTA, filter or delivery agent rewrites. Subject is left out,
// since a filter may tag it, and To, which a list or an alias may
// rewrite.
const markFields = 3

// Mark identifies a message as every copy of it is marked, however the
// path changed its headers: the first 8 bytes of SHA-256 over its
// Message-ID, Date and From fields and its body, normalized as Digest
// does. It is 0 for a message without a Message-ID, whose copies could
// not be told from other messages of the same body.
func Mark(raw []byte) uint64 {
	_, m := identify(raw, true)
	return m
}

// Identify returns Digest(raw) and Mark(raw), reading raw once.
func Identify(raw []byte) (digest [32]byte, mark uint64) {
	return identify(raw, true)
}

// identify returns the digest of raw and, if mark is set, its mark: the
// fields of each go to a hash of its own, the normalized body, written
// once, to both.
func identify(raw []byte, mark bool) (digest [32]byte, m uint64) {
	raw = skipFromLine(raw)
	var values [len(digestFields)][]byte
	var lname [32]byte
	body := raw
	if r := (headerReader{b: raw}); r.valid() {
		for {
			name, value, ok := r.next()
			if !ok {
				break
			}
			if len(name) > len(lname) {
				continue
			}
			ln := lowerASCII(lname[:0], name)
			for i, f := range digestFields {
				if values[i] == nil && string(ln) == f {
					values[i] = value
				}
			}
		}
		body = r.rest()
	}

	hd := sha256.New()
	w := digestWriters.Get().(*digestWriter)
	defer w.release()
	w.hs = append(w.hs[:0], hd)
	w.fields(values[:], len(digestFields))
	var hm hash.Hash
	if mark = mark && len(bytes.TrimSpace(values[0])) > 0; mark {
		hm = sha256.New()
		w.hs[0] = hm
		w.fields(values[:], markFields)
		w.hs = append(w.hs[:0], hd, hm)
	}
	w.write([]byte("\n"))
	w.body(body)
	w.flush()
	hd.Sum(digest[:0])
	if mark {
		var sum [32]byte
		hm.Sum(sum[:0])
		for _, b := range sum[:8] {
			m = m<<8 | uint64(b)
		}
		m = max(m, 1)
	}
	return digest, m
}

// digestWriter buffers small writes to the hashes hs.
type digestWriter struct {
	hs    []hash.Hash
	buf   [4096]byte
	n     int
	nbody int // body bytes written
}

// digestWriters pools digestWriters: the buffer, which the hashes' Write
// makes escape, was some 5 KB of the 21 KB allocated a message prepared.
var digestWriters = sync.Pool{New: func() any { return new(digestWriter) }}

// release gives w back to digestWriters, empty.
func (w *digestWriter) release() {
	clear(w.hs)
	w.hs, w.n, w.nbody = w.hs[:0], 0, 0
	digestWriters.Put(w)
}

// fields writes the first n of digestFields, each tagged with its name,
// with values, and flushes them to the hashes.
func (w *digestWriter) fields(values [][]byte, n int) {
	for i, f := range digestFields[:n] {
		w.write([]byte(f))
		w.write([]byte(":"))
		w.collapsed(values[i])
		w.write([]byte("\n"))
	}
	w.flush()
}

func (w *digestWriter) write(b []byte) {
	for len(b) > 0 {
		if w.n == len(w.buf) {
			w.flush()
		}
		c := copy(w.buf[w.n:], b)
		w.n += c
		b = b[c:]
	}
}

func (w *digestWriter) flush() {
	for _, h := range w.hs {
		h.Write(w.buf[:w.n])
	}
	w.n = 0
}

// collapsed writes v with each run of white space, line breaks included,
// made one space.
func (w *digestWriter) collapsed(v []byte) {
	space := false
	for _, c := range v {
		if c == ' ' || c == '\t' || c == '\r' || c == '\n' {
			space = true
			continue
		}
		if space {
			w.write([]byte{' '})
			space = false
		}
		w.write([]byte{c})
	}
}

// body writes the normalized body.
func (w *digestWriter) body(b []byte) {
	blank := 0 // blank lines held back until a line with text follows
	for len(b) > 0 && w.nbody < DigestMaxBody {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		line = bytes.TrimRight(line, " \t\r")
		if len(line) == 0 {
			blank++
			continue
		}
		if q := bytes.TrimLeft(line, ">"); bytes.HasPrefix(q, []byte("From ")) {
			line = q // all '>'s: mboxo and mboxrd quote differently
		}
		for ; blank > 0; blank-- {
			w.write([]byte("\n"))
			w.nbody++
		}
		line = line[:min(len(line), DigestMaxBody-w.nbody)]
		w.write(line)
		w.write([]byte("\n"))
		w.nbody += len(line) + 1
	}
}
