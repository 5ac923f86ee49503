// Package sealed reads and writes a sealed model file: every user's
// token rows of a model trained in bulk, sorted by hash, in one
// read-only file that is mapped into memory and read in place.
//
// A row in a log-structured tree costs its key, a version, an entry
// header and offset, and a share of the tables' indexes and filters,
// some 35 bytes for a row of 6, and a point read walks levels, filters
// and block indexes. Here a row costs its hash but for the bits its
// bucket gives (6 bytes in a model of half a million rows), one byte,
// and its bytes but for those it shares with the row before it, and a
// read is two memory accesses: the bucket's offset, then the bucket's
// few rows. Both are addressed by the hash alone, so a batch of reads
// can fetch them all at once (Touch) where a search would wait on each
// step.
//
// The file is
//
//	magic | each user's rows | each user's bucket offsets | directory | footer
//
// A user's rows fall into 2^k buckets by their hash's top k bits, k
// chosen for some 4 to 8 rows a bucket; the rows of a bucket follow one
// another in ascending hash order, the buckets in order. A row is the
// low 8·w bytes of its hash, w = ⌈(64−k)/8⌉, little-endian, which with the
// bucket give the whole hash; a byte of how many of the row's first
// bytes (up to maxShared) are the previous row's in the bucket, in its
// top two bits, and of how many follow, in the others (lenEscape: a
// uvarint of that follows); then the bytes that follow. A model's rows
// start alike (the day they were last trained on, which a first training
// gives them all), and the shared bytes are a seventh of what a row would
// take. The bucket offsets are 2^k+1 little-endian uint32s, where each
// bucket's rows start in the user's rows and, last, their length. The
// directory lists the users in ascending order, each with its row count,
// k, and where its rows and offsets are. The footer holds the offset of
// the offsets region, the directory's offset, a CRC-32C of the rows and
// one of the offsets region and directory, and the magic again.
//
// Open checks the footer and the metadata checksum, which are small, and
// bounds every offset, so that no later read leaves the file; the rows'
// checksum, a read of the whole file, is for Verify. A row that does not
// decode is reported where it is read, as ErrCorrupt.
//
// Files of the earlier layout ("spamdsl2": rows in blocks of 16 behind a
// searched index of their first hashes) are still read, by ScanV2, so
// that a store holding one can rewrite it in this layout.
package sealed

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"runtime"
	"sort"
)

const (
	maxShared  = 3
	lenEscape  = 63
	magic      = "spamdsl3"
	footerSize = 8 + 8 + 4 + 4 + len(magic)
	offsetSize = 4
)

const (
	// bucketRows is the fewest rows a bucket holds on average: a read
	// scans half a bucket, and a bucket's offset costs offsetSize/bucketRows
	// bytes a row or less.
	bucketRows = 4
	// estimateRows is how many of a user's rows the Writer holds before
	// it chooses the user's k from them: hashes are spread evenly, so
	// where the estimateRows-th falls says how many rows there are to
	// within a few percent, and a bucket count off by that much only
	// moves the rows a bucket holds.
	estimateRows = 4096
	// maxBits bounds k, and so the offsets the Writer holds for a user
	// whose first hashes are not spread evenly, as tokens made for it
	// could make them: 16 MiB. A user of more than 8·2^maxBits rows, 33
	// million, has more than 8 rows a bucket.
	maxBits = 22
)

// ErrCorrupt is returned for a file, or a part of one, that does not
// decode or whose checksum does not match.
var ErrCorrupt = errors.New("sealed model file corrupt")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// remWidth returns how many bytes of a hash a row of a user of 2^k
// buckets holds.
func remWidth(k uint64) int { return int(64-k+7) / 8 }

// Writer writes a sealed file. Rows come user by user, users in
// ascending order, and within a user in ascending hash order.
type Writer struct {
	w       *bufio.Writer
	dataCRC hash.Hash32
	off     uint64 // bytes written, the magic included
	users   []section
	cur     *section
	last    uint64
	offsets [][]byte // each user's bucket offsets, held until the rows are written
	// The current user's first rows, held until its k is chosen.
	held     []heldRow
	heldData []byte
	chosen   bool
	next     uint64 // the next bucket whose offset is to be written
	prev     []byte // the row before, in the bucket; empty at a bucket's start
	scratch  []byte
	err      error
}

type heldRow struct {
	h          uint64
	start, end int
}

// section is a user's entry in the directory.
type section struct {
	user             string
	rows, bits       uint64
	dataOff, dataLen uint64
	offsetsOff       uint64
}

// NewWriter returns a Writer that writes to w, which it buffers.
func NewWriter(w io.Writer) *Writer {
	sw := &Writer{w: bufio.NewWriterSize(w, 1<<16), dataCRC: crc32.New(castagnoli)}
	sw.write([]byte(magic), false)
	return sw
}

func (w *Writer) write(b []byte, data bool) {
	if w.err != nil {
		return
	}
	if _, err := w.w.Write(b); err != nil {
		w.err = err
		return
	}
	if data {
		w.dataCRC.Write(b)
	}
	w.off += uint64(len(b))
}

// Add appends row as user's row of hash h.
func (w *Writer) Add(user string, h uint64, row []byte) error {
	if w.err != nil {
		return w.err
	}
	switch {
	case w.cur == nil || user > w.cur.user:
		w.finish()
		w.users = append(w.users, section{user: user, dataOff: w.off})
		w.cur = &w.users[len(w.users)-1]
		w.offsets = append(w.offsets, nil)
		w.chosen, w.next, w.prev = false, 0, w.prev[:0]
	case user < w.cur.user:
		return fmt.Errorf("sealed: user %q after %q", user, w.cur.user)
	case h <= w.last:
		return fmt.Errorf("sealed: user %q: hash %016x after %016x", user, h, w.last)
	}
	// Open takes no user's rows past 4 GiB: refuse them here, before
	// the file is whole.
	const maxHeader = 8 + 1 + binary.MaxVarintLen64
	if w.off-w.cur.dataOff+uint64(len(w.heldData)+len(row))+uint64(len(w.held)+1)*maxHeader > math.MaxUint32 {
		return fmt.Errorf("sealed: user %q: over 4 GiB of rows", user)
	}
	w.last = h
	w.cur.rows++
	if w.chosen {
		w.put(h, row)
		return w.err
	}
	w.held = append(w.held, heldRow{h, len(w.heldData), len(w.heldData) + len(row)})
	w.heldData = append(w.heldData, row...)
	if len(w.held) == estimateRows {
		// The user's rows are estimateRows/(h/2^64).
		rows := float64(estimateRows) / (float64(h>>11+1) / (1 << 53))
		w.choose(rows)
	}
	return w.err
}

// bitsFor returns k for rows rows: 4 to 8 rows a bucket.
func bitsFor(rows float64) uint64 {
	k := uint64(0)
	for k < maxBits && rows >= 2*bucketRows*float64(uint64(1)<<k) {
		k++
	}
	return k
}

// choose sets the current user's k for about rows rows and writes the
// rows held.
func (w *Writer) choose(rows float64) {
	w.cur.bits, w.chosen = bitsFor(rows), true
	for _, r := range w.held {
		w.put(r.h, w.heldData[r.start:r.end])
	}
	w.held, w.heldData = w.held[:0], w.heldData[:0]
}

// put writes a row of the current user, whose k is chosen.
func (w *Writer) put(h uint64, row []byte) {
	k := w.cur.bits
	i := len(w.offsets) - 1
	for b := h >> (64 - k); w.next <= b; w.next++ {
		w.offsets[i] = binary.LittleEndian.AppendUint32(w.offsets[i], uint32(w.off-w.cur.dataOff))
		w.prev = w.prev[:0]
	}
	shared := 0
	for shared < min(maxShared, len(w.prev), len(row)) && w.prev[shared] == row[shared] {
		shared++
	}
	rest := row[shared:]
	w.scratch = binary.LittleEndian.AppendUint64(w.scratch[:0], h)[:remWidth(k)]
	w.scratch = append(w.scratch, byte(shared<<6|min(len(rest), lenEscape)))
	if len(rest) >= lenEscape {
		w.scratch = binary.AppendUvarint(w.scratch, uint64(len(rest)))
	}
	w.write(w.scratch, true)
	w.write(rest, true)
	w.prev = append(w.prev[:0], row...)
}

// finish ends the current user's rows, if any: it writes the rows held,
// and the offsets of the buckets past the last row's. Where the rows
// turn out fewer than the estimate said, as when their first hashes were
// not spread evenly, it merges buckets down to k for the rows there are,
// or to the least k whose rows hold as many of the hash's bytes, since
// the rows are written: a bucket's offset is then that of the first of
// the buckets merged into it. A row that starts a bucket merged into
// another shares nothing, which a reader takes as it is.
func (w *Writer) finish() {
	if w.cur == nil {
		return
	}
	if !w.chosen {
		w.choose(float64(len(w.held)))
	}
	i := len(w.offsets) - 1
	k := w.cur.bits
	for ; w.next <= 1<<k; w.next++ {
		w.offsets[i] = binary.LittleEndian.AppendUint32(w.offsets[i], uint32(w.off-w.cur.dataOff))
	}
	if fit := max(bitsFor(float64(w.cur.rows)), uint64(64-8*remWidth(k))); fit < k {
		// Entry j·step moves to j, at or below it: each is read
		// before it is written over.
		offs, step := w.offsets[i], uint64(1)<<(k-fit)
		for j := range uint64(1)<<fit + 1 {
			copy(offs[j*offsetSize:], offs[j*step*offsetSize:j*step*offsetSize+offsetSize])
		}
		w.offsets[i] = offs[:(uint64(1)<<fit+1)*offsetSize]
		w.cur.bits = fit
	}
	w.cur.dataLen = w.off - w.cur.dataOff
}

// Close writes the offsets, the directory and the footer, and flushes.
// It does not close the writer underneath.
func (w *Writer) Close() error {
	w.finish()
	if w.err != nil {
		return w.err
	}
	meta := crc32.New(castagnoli)
	metaOff := w.off
	for i := range w.users {
		w.users[i].offsetsOff = w.off
		w.write(w.offsets[i], false)
		meta.Write(w.offsets[i])
	}
	dirOff := w.off
	dir := binary.AppendUvarint(nil, uint64(len(w.users)))
	for _, u := range w.users {
		dir = binary.AppendUvarint(dir, uint64(len(u.user)))
		dir = append(dir, u.user...)
		for _, v := range []uint64{u.rows, u.bits, u.dataOff, u.dataLen, u.offsetsOff} {
			dir = binary.AppendUvarint(dir, v)
		}
	}
	w.write(dir, false)
	meta.Write(dir)
	foot := binary.LittleEndian.AppendUint64(nil, metaOff)
	foot = binary.LittleEndian.AppendUint64(foot, dirOff)
	foot = binary.LittleEndian.AppendUint32(foot, w.dataCRC.Sum32())
	foot = binary.LittleEndian.AppendUint32(foot, meta.Sum32())
	foot = append(foot, magic...)
	w.write(foot, false)
	if w.err != nil {
		return w.err
	}
	return w.w.Flush()
}

// File is an opened sealed file. It reads its bytes in place: they must
// stay as they are while the File is used.
type File struct {
	data     []byte
	metaOff  uint64
	dataCRC  uint32
	sections map[string]*Section
}

// Section is one user's rows in a File.
type Section struct {
	data    []byte // the rows
	offsets []byte // offsetSize bytes a bucket, and the rows' length
	rows    uint64
	shift   uint64 // 64 − k
	width   int    // the bytes of a hash a row holds
	remMask uint64 // the bits of a hash a row holds
}

// ErrOldLayout is returned by Open for a file of the earlier layout,
// which ScanV2 reads.
var ErrOldLayout = errors.New("sealed model file of the earlier layout")

// Open checks data's footer, directory and offsets, and returns the File
// they describe.
func Open(data []byte) (*File, error) {
	if len(data) >= len(magic) && string(data[:len(magic)]) == magicV2 {
		return nil, ErrOldLayout
	}
	metaOff, dirOff, dataCRC, err := footer(data, magic)
	if err != nil {
		return nil, err
	}
	f := &File{data: data, metaOff: metaOff, dataCRC: dataCRC, sections: map[string]*Section{}}
	dir := data[dirOff : len(data)-footerSize]
	n, dir, err := uvarint(dir)
	if err != nil {
		return nil, err
	}
	prev, dataEnd, offsetsEnd := "", uint64(len(magic)), metaOff
	for i := uint64(0); i < n; i++ {
		var user string
		if user, dir, err = dirUser(dir); err != nil {
			return nil, err
		}
		var v [5]uint64
		for j := range v {
			if v[j], dir, err = uvarint(dir); err != nil {
				return nil, err
			}
		}
		rows, k, dOff, dLen, oOff := v[0], v[1], v[2], v[3], v[4]
		switch {
		case i > 0 && user <= prev:
			return nil, corrupt("directory: user %q after %q", user, prev)
		case dOff != dataEnd || dLen > metaOff-dOff || dLen > math.MaxUint32:
			return nil, corrupt("directory: user %q: rows at %d+%d", user, dOff, dLen)
		case k > maxBits || oOff != offsetsEnd || (1<<k+1)*offsetSize > dirOff-oOff:
			return nil, corrupt("directory: user %q: offsets at %d, k %d", user, oOff, k)
		case rows > dLen/uint64(remWidth(k)+1):
			return nil, corrupt("directory: user %q: %d rows in %d bytes", user, rows, dLen)
		}
		nOff := uint64(1)<<k + 1
		s := &Section{
			data:    data[dOff : dOff+dLen : dOff+dLen],
			offsets: data[oOff : oOff+nOff*offsetSize : oOff+nOff*offsetSize],
			rows:    rows,
			shift:   64 - k,
			width:   remWidth(k),
			remMask: ^uint64(0) >> (64 - 8*remWidth(k)),
		}
		last := uint32(0)
		for b := range nOff {
			o := binary.LittleEndian.Uint32(s.offsets[b*offsetSize:])
			if b == 0 && o != 0 || o < last || b == nOff-1 && uint64(o) != dLen {
				return nil, corrupt("user %q: bucket %d at %d of %d bytes", user, b, o, dLen)
			}
			last = o
		}
		f.sections[user] = s
		prev, dataEnd, offsetsEnd = user, dOff+dLen, oOff+nOff*offsetSize
	}
	if len(dir) != 0 || dataEnd != metaOff || offsetsEnd != dirOff {
		return nil, corrupt("directory does not cover the file")
	}
	return f, nil
}

// footer checks data's magic, footer and metadata checksum, and returns
// the footer's offsets and rows' checksum.
func footer(data []byte, magic string) (metaOff, dirOff uint64, dataCRC uint32, err error) {
	if len(data) < len(magic)+footerSize || string(data[:len(magic)]) != magic || string(data[len(data)-len(magic):]) != magic {
		return 0, 0, 0, corrupt("no header or footer")
	}
	foot := data[len(data)-footerSize:]
	metaOff = binary.LittleEndian.Uint64(foot)
	dirOff = binary.LittleEndian.Uint64(foot[8:])
	end := uint64(len(data) - footerSize)
	if metaOff < uint64(len(magic)) || metaOff > dirOff || dirOff > end {
		return 0, 0, 0, corrupt("footer offsets %d, %d in %d bytes", metaOff, dirOff, len(data))
	}
	if crc32.Checksum(data[metaOff:end], castagnoli) != binary.LittleEndian.Uint32(foot[20:]) {
		return 0, 0, 0, corrupt("checksum of the offsets and directory")
	}
	return metaOff, dirOff, binary.LittleEndian.Uint32(foot[16:]), nil
}

// dirUser reads a user's name from the directory.
func dirUser(dir []byte) (string, []byte, error) {
	l, dir, err := uvarint(dir)
	if err != nil {
		return "", nil, err
	}
	if l > uint64(len(dir)) {
		return "", nil, corrupt("directory: user name past its end")
	}
	return string(dir[:l]), dir[l:], nil
}

// Verify checks the rows' checksum, which reads the whole file.
func (f *File) Verify() error {
	if crc32.Checksum(f.data[len(magic):f.metaOff], castagnoli) != f.dataCRC {
		return corrupt("checksum of the rows")
	}
	return nil
}

// Section returns user's rows, or nil if the file has none.
func (f *File) Section(user string) *Section { return f.sections[user] }

// Users returns the users the file holds rows of, in ascending order.
func (f *File) Users() []string {
	us := make([]string, 0, len(f.sections))
	for u := range f.sections {
		us = append(us, u)
	}
	sort.Strings(us)
	return us
}

// Len returns the number of bytes the file holds.
func (f *File) Len() int64 { return int64(len(f.data)) }

// Bytes returns the file's bytes, not a copy.
func (f *File) Bytes() []byte { return f.data }

// Rows returns the number of rows.
func (s *Section) Rows() uint64 { return s.rows }

// bucket returns where the rows of bucket b start and end. It slices
// the two offsets it reads at once: a slice's bounds are checked against
// its capacity, which Open makes its length.
func (s *Section) bucket(b uint64) (start, end uint32) {
	o := s.offsets[b*offsetSize : (b+2)*offsetSize]
	return binary.LittleEndian.Uint32(o), binary.LittleEndian.Uint32(o[offsetSize:])
}

// Get appends the row of h to dst and returns it, and whether there is
// one.
func (s *Section) Get(h uint64, dst []byte) ([]byte, bool, error) {
	head, shared, rest, ok, err := s.Find(h)
	if !ok || err != nil {
		return dst, ok, err
	}
	d := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, head)[:d+shared]
	return append(dst, rest...), true, nil
}

// Find returns the row of h, if there is one, without copying it: the
// row is head's low shared bytes, those it shares with the row before
// it, then rest, the file's bytes. It reads the bucket with the checks a
// cursor makes, but holds the first bytes of the row read last in a
// word rather than in arrays copied at every row: a lookup reads three
// rows on average to find one, and those copies were a third of its
// instructions. It decodes the rows itself rather than through a cursor
// changed to match: the call a row and the cursor's fields in memory
// took 4% more of a bulk classify's instructions, so the two readers of
// a row must change together.
func (s *Section) Find(h uint64) (head uint32, shared int, rest []byte, ok bool, err error) {
	start, end := s.bucket(h >> s.shift)
	p := s.data[start:end]
	want, mask, w := h&s.remMask, s.remMask, s.width
	// head holds the first bytes of the row read last, its first byte
	// lowest, up to maxShared, which is under 4, and up to nhead, the
	// most the next row may share; the bytes past those mean nothing.
	// The next row's hash bits are next or more: the row before's and
	// one, which cannot overflow, since a row of the greatest hash bits
	// ends the search.
	var nhead int
	var next uint64
	for i := 0; len(p) > 0; i++ {
		var rem uint64
		if len(p) > 8 {
			rem = binary.LittleEndian.Uint64(p) & mask
		} else {
			if len(p) <= w {
				return 0, 0, nil, false, corrupt("row cut short")
			}
			for k := w - 1; k >= 0; k-- {
				rem = rem<<8 | uint64(p[k])
			}
		}
		c := p[w]
		r := w + 1
		sh, n := int(c>>6), uint64(c&lenEscape)
		if n == lenEscape {
			v, m := binary.Uvarint(p[r:])
			if m <= 0 {
				return 0, 0, nil, false, corrupt("varint")
			}
			n, r = v, r+m
		}
		switch {
		case n > uint64(len(p)-r):
			return 0, 0, nil, false, corrupt("row past its bucket")
		case sh > nhead:
			return 0, 0, nil, false, corrupt("row shares more than the row before has")
		case rem < next:
			return 0, 0, nil, false, corrupt("row %d of a bucket out of order", i)
		}
		if rem >= want {
			if rem != want {
				return 0, 0, nil, false, nil
			}
			return head, sh, p[r : r+int(n) : r+int(n)], true, nil
		}
		// The row's first bytes: the shared ones, then its own. Where
		// four bytes do not follow, no whole row does.
		if len(p)-r >= 4 {
			head = head&headMask[sh] | binary.LittleEndian.Uint32(p[r:r+4])<<(8*sh)
		}
		nhead = sh + int(n)
		next = rem + 1
		p = p[r+int(n):]
	}
	return 0, 0, nil, false, nil
}

// headMask[n] keeps a word's first n bytes.
var headMask = [maxShared + 1]uint32{0, 0xff, 0xffff, 0xffffff}

// Touch reads, for each of hashes, where its row would be in s, so that
// the Gets of them that follow find the file's bytes in the processor's
// cache. A Get of a large file waits on memory twice, for its bucket's
// offset and for the bucket; these reads depend on nothing before them,
// and the processor has many of them in flight at once: first the
// offsets, then the buckets. It is a function of any slice of hashes,
// not a method taking a function, so that its loops call nothing.
func Touch[H ~uint64](s *Section, hashes []H) {
	var sum uint64
	for _, h := range hashes {
		sum += uint64(s.offsets[(uint64(h)>>s.shift)*offsetSize])
	}
	for _, h := range hashes {
		if start, end := s.bucket(uint64(h) >> s.shift); start < end {
			// A bucket of some 50 to 100 bytes often spans two
			// cache lines.
			sum += uint64(s.data[start]) + uint64(s.data[end-1])
		}
	}
	// The sum is used, so that the reads are not optimized away.
	runtime.KeepAlive(sum)
}

// cursor reads a bucket's rows.
type cursor struct {
	s     *Section
	p     []byte // what is left of the bucket
	rem   uint64 // the hash's bits of the row read last
	i     int    // the rows read
	head  [maxShared]byte
	nhead int // the first bytes of the row read last, up to maxShared
	prev  [maxShared]byte
}

// next reads the next row: its hash's bits into c.rem, and the bytes
// that follow the shared ones, which are in c.prev. It checks that the
// hashes ascend and that the bucket's first row shares nothing.
func (c *cursor) next() (rest []byte, shared int, err error) {
	w := c.s.width
	if len(c.p) <= w {
		return nil, 0, corrupt("row cut short")
	}
	var rem uint64
	if len(c.p) >= 8 {
		rem = binary.LittleEndian.Uint64(c.p) & c.s.remMask
	} else {
		for j := w - 1; j >= 0; j-- {
			rem = rem<<8 | uint64(c.p[j])
		}
	}
	p := c.p[w:]
	shared, n := int(p[0]>>6), uint64(p[0]&lenEscape)
	p = p[1:]
	if n == lenEscape {
		if n, p, err = uvarint(p); err != nil {
			return nil, 0, err
		}
	}
	switch {
	case n > uint64(len(p)):
		return nil, 0, corrupt("row past its bucket")
	case shared > c.nhead:
		return nil, 0, corrupt("row shares more than the row before has")
	case c.i > 0 && rem <= c.rem:
		return nil, 0, corrupt("row %d of a bucket out of order", c.i)
	}
	rest, c.p = p[:n:n], p[n:]
	c.rem = rem
	c.i++
	c.prev = c.head
	for j := shared; j < maxShared && j-shared < len(rest); j++ {
		c.head[j] = rest[j-shared]
	}
	c.nhead = min(maxShared, shared+len(rest))
	return rest, shared, nil
}

// Scan calls f with each row in ascending hash order until f returns
// false, and returns what Iter's Err would. A row is f's only until f
// returns.
func (s *Section) Scan(f func(h uint64, row []byte) bool) error {
	it := s.Iter()
	for it.Next() {
		if !f(it.Hash(), it.Row()) {
			return nil
		}
	}
	return it.Err()
}

// Iter returns an iterator over the section's rows in ascending hash
// order.
func (s *Section) Iter() *Iter { return &Iter{s: s, c: cursor{s: s}} }

// Iter walks a section's rows. It checks what a cursor checks, that each
// row's hash falls in its bucket, and that the rows are as many as the
// directory says.
type Iter struct {
	s    *Section
	b    uint64 // the bucket after the cursor's
	c    cursor
	h    uint64
	row  []byte
	n    uint64
	err  error
	done bool
}

// Next moves to the next row, and reports whether there is one; at the
// end or on an error, Err says which.
func (it *Iter) Next() bool {
	if it.done {
		return false
	}
	s := it.s
	buckets := uint64(len(s.offsets)/offsetSize - 1)
	for len(it.c.p) == 0 {
		if it.b >= buckets {
			if it.n != s.rows {
				return it.fail(corrupt("%d rows where the directory says %d", it.n, s.rows))
			}
			it.done = true
			return false
		}
		start, end := s.bucket(it.b)
		it.c = cursor{s: s, p: s.data[start:end]}
		it.b++
	}
	rest, shared, err := it.c.next()
	if err != nil {
		return it.fail(err)
	}
	// The bucket gives the hash's top bits; those of them the row holds
	// too must agree.
	b := it.b - 1
	h := b<<s.shift | it.c.rem&(^uint64(0)>>(64-s.shift))
	if h&s.remMask != it.c.rem {
		return it.fail(corrupt("row of hash %016x in bucket %d", it.c.rem, b))
	}
	it.h = h
	it.row = append(append(it.row[:0], it.c.prev[:shared]...), rest...)
	it.n++
	return true
}

func (it *Iter) fail(err error) bool {
	it.err, it.done = err, true
	return false
}

// Hash returns the current row's hash.
func (it *Iter) Hash() uint64 { return it.h }

// Row returns the current row, which is the Iter's until Next.
func (it *Iter) Row() []byte { return it.row }

// Err returns what stopped the iterator short of the end, nil if nothing.
func (it *Iter) Err() error { return it.err }

// uvarint decodes the uvarint that starts b and returns the rest of b.
func uvarint(b []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, corrupt("varint")
	}
	return v, b[n:], nil
}
