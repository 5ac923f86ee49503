// Package sealed reads and writes a sealed model file: every user's
// token rows of a model trained in bulk, sorted by hash, in one
// read-only file that is mapped into memory and searched in place.
//
// A row in a log-structured tree costs its key, a version, an entry
// header and offset, and a share of the tables' indexes and filters,
// some 35 bytes for a row of 6, and a point read walks levels, filters
// and block indexes. Here a row costs the gap from the previous hash as
// a uvarint (7 bytes for a model of millions of evenly spread
// hashes), one byte, and its bytes but for those it shares with the row
// before it, and a read is a search of one index of blocks of blockRows
// rows and a scan of one block.
//
// The file is
//
//	magic | each user's blocks | each user's block index | directory | footer
//
// A block's rows are uvarint(hash − previous hash), a byte of how many
// of the row's first bytes (up to maxShared) are the previous row's in the
// block, in its top two bits, and of how many follow, in the others
// (lenEscape: a uvarint of that follows), then the bytes that follow. A
// model's rows start alike (the day they were last trained on, which a
// first training gives them all), and the shared bytes are a seventh of
// what a row would take. The previous hash of a block's first row is the
// hash its index entry holds, so its gap is 0; it shares nothing. An
// index entry is the block's first hash and its offset in the user's
// data, 12 bytes little-endian. The
// directory lists the users in ascending order, each with its row count
// and where its data and index are. The footer holds the offset of the
// index region, the directory's offset, a CRC-32C of the rows and one of
// the index region and directory, and the magic again.
//
// Open checks the footer and the metadata checksum, which are small, and
// bounds every offset, so that no later read leaves the file; the rows'
// checksum, a read of the whole file, is for Verify. A row that does not
// decode is reported where it is read, as ErrCorrupt.
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
	"math/bits"
	"runtime"
	"sort"
)

// blockRows is how many rows a block holds: a read scans half of one on
// average, and an index entry costs 12/blockRows bytes a row.
const blockRows = 16

const (
	maxShared  = 3
	lenEscape  = 63
	magic      = "spamdsl2"
	footerSize = 8 + 8 + 4 + 4 + len(magic)
	entrySize  = 12
)

// ErrCorrupt is returned for a file, or a part of one, that does not
// decode or whose checksum does not match.
var ErrCorrupt = errors.New("sealed model file corrupt")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// Writer writes a sealed file. Rows come user by user, users in
// ascending order, and within a user in ascending hash order.
type Writer struct {
	w       *bufio.Writer
	dataCRC hash.Hash32
	off     uint64 // bytes written, the magic included
	users   []section
	cur     *section
	last    uint64
	index   [][]byte // each user's index, held until the data is written
	inBlock int
	prev    []byte // the row before, in the block
	scratch []byte
	err     error
}

// section is a user's entry in the directory.
type section struct {
	user             string
	rows             uint64
	dataOff, dataLen uint64
	indexOff, blocks uint64
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
		w.users = append(w.users, section{user: user, dataOff: w.off})
		w.cur = &w.users[len(w.users)-1]
		w.index = append(w.index, nil)
		w.inBlock = 0
	case user < w.cur.user:
		return fmt.Errorf("sealed: user %q after %q", user, w.cur.user)
	case h <= w.last:
		return fmt.Errorf("sealed: user %q: hash %016x after %016x", user, h, w.last)
	}
	// Open takes no user's rows past 4 GiB: refuse them here, before
	// the file is whole.
	if w.off-w.cur.dataOff+uint64(len(row))+2*binary.MaxVarintLen64 > math.MaxUint32 {
		return fmt.Errorf("sealed: user %q: over 4 GiB of rows", user)
	}
	prev := w.last
	if w.inBlock == 0 {
		i := len(w.index) - 1
		w.index[i] = binary.LittleEndian.AppendUint64(w.index[i], h)
		w.index[i] = binary.LittleEndian.AppendUint32(w.index[i], uint32(w.off-w.cur.dataOff))
		w.cur.blocks++
		prev = h
	}
	shared := 0
	if w.inBlock > 0 {
		for shared < min(maxShared, len(w.prev), len(row)) && w.prev[shared] == row[shared] {
			shared++
		}
	}
	rest := row[shared:]
	w.scratch = binary.AppendUvarint(w.scratch[:0], h-prev)
	w.scratch = append(w.scratch, byte(shared<<6|min(len(rest), lenEscape)))
	if len(rest) >= lenEscape {
		w.scratch = binary.AppendUvarint(w.scratch, uint64(len(rest)))
	}
	w.write(w.scratch, true)
	w.write(rest, true)
	w.prev = append(w.prev[:0], row...)
	w.last = h
	w.cur.rows++
	w.inBlock = (w.inBlock + 1) % blockRows
	return w.err
}

// Close writes the indexes, the directory and the footer, and flushes.
// It does not close the writer underneath.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if w.cur != nil {
		w.cur.dataLen = w.off - w.cur.dataOff
	}
	for i := 1; i < len(w.users); i++ {
		w.users[i-1].dataLen = w.users[i].dataOff - w.users[i-1].dataOff
	}
	meta := crc32.New(castagnoli)
	metaOff := w.off
	for i := range w.users {
		w.users[i].indexOff = w.off
		w.write(w.index[i], false)
		meta.Write(w.index[i])
	}
	dirOff := w.off
	dir := binary.AppendUvarint(nil, uint64(len(w.users)))
	for _, u := range w.users {
		dir = binary.AppendUvarint(dir, uint64(len(u.user)))
		dir = append(dir, u.user...)
		for _, v := range []uint64{u.rows, u.dataOff, u.dataLen, u.indexOff, u.blocks} {
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
	data  []byte // the rows
	index []byte // entrySize bytes a block
	rows  uint64
}

// Open checks data's footer, directory and indexes, and returns the File
// they describe.
func Open(data []byte) (*File, error) {
	if len(data) < len(magic)+footerSize || string(data[:len(magic)]) != magic || string(data[len(data)-len(magic):]) != magic {
		return nil, corrupt("no header or footer")
	}
	foot := data[len(data)-footerSize:]
	metaOff := binary.LittleEndian.Uint64(foot)
	dirOff := binary.LittleEndian.Uint64(foot[8:])
	end := uint64(len(data) - footerSize)
	if metaOff < uint64(len(magic)) || metaOff > dirOff || dirOff > end {
		return nil, corrupt("footer offsets %d, %d in %d bytes", metaOff, dirOff, len(data))
	}
	if crc32.Checksum(data[metaOff:end], castagnoli) != binary.LittleEndian.Uint32(foot[20:]) {
		return nil, corrupt("checksum of the index and directory")
	}
	f := &File{data: data, metaOff: metaOff, dataCRC: binary.LittleEndian.Uint32(foot[16:]), sections: map[string]*Section{}}
	dir := data[dirOff:end]
	n, dir, err := uvarint(dir)
	if err != nil {
		return nil, err
	}
	prev, dataEnd, indexEnd := "", uint64(len(magic)), metaOff
	for i := uint64(0); i < n; i++ {
		var l uint64
		if l, dir, err = uvarint(dir); err != nil {
			return nil, err
		}
		if l > uint64(len(dir)) {
			return nil, corrupt("directory: user name past its end")
		}
		user := string(dir[:l])
		dir = dir[l:]
		var v [5]uint64
		for j := range v {
			if v[j], dir, err = uvarint(dir); err != nil {
				return nil, err
			}
		}
		rows, dOff, dLen, iOff, blocks := v[0], v[1], v[2], v[3], v[4]
		switch {
		case i > 0 && user <= prev:
			return nil, corrupt("directory: user %q after %q", user, prev)
		case dOff != dataEnd || dLen > metaOff-dOff:
			return nil, corrupt("directory: user %q: rows at %d+%d", user, dOff, dLen)
		case iOff != indexEnd || blocks > (dirOff-iOff)/entrySize:
			return nil, corrupt("directory: user %q: index at %d, %d blocks", user, iOff, blocks)
		case dLen > math.MaxUint32 || blocks > rows || rows > dLen || (rows+blockRows-1)/blockRows != blocks:
			return nil, corrupt("directory: user %q: %d rows in %d blocks of %d bytes", user, rows, blocks, dLen)
		}
		s := &Section{data: data[dOff : dOff+dLen], index: data[iOff : iOff+blocks*entrySize], rows: rows}
		for b := uint64(0); b < blocks; b++ {
			h, off := s.entry(int(b))
			if b == 0 && off != 0 || off >= uint64(len(s.data)) {
				return nil, corrupt("user %q: block %d at %d of %d bytes", user, b, off, len(s.data))
			}
			if b > 0 {
				ph, poff := s.entry(int(b - 1))
				if h <= ph || off <= poff {
					return nil, corrupt("user %q: block %d out of order", user, b)
				}
			}
		}
		f.sections[user] = s
		prev, dataEnd, indexEnd = user, dOff+dLen, iOff+blocks*entrySize
	}
	if len(dir) != 0 || dataEnd != metaOff || indexEnd != dirOff {
		return nil, corrupt("directory does not cover the file")
	}
	return f, nil
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

func (s *Section) entry(b int) (h, off uint64) {
	e := s.index[b*entrySize:]
	return binary.LittleEndian.Uint64(e), uint64(binary.LittleEndian.Uint32(e[8:]))
}

// Get appends the row of h to dst and returns it, and whether there is
// one.
func (s *Section) Get(h uint64, dst []byte) ([]byte, bool, error) {
	blocks := len(s.index) / entrySize
	b := s.block(h, blocks)
	if b < 0 {
		return dst, false, nil
	}
	first, off := s.entry(b)
	end := uint64(len(s.data))
	if b+1 < blocks {
		_, end = s.entry(b + 1)
	}
	c := cursor{h: first, p: s.data[off:end]}
	for len(c.p) > 0 {
		rest, shared, err := c.next()
		if err != nil {
			return dst, false, err
		}
		if c.h >= h {
			if c.h != h {
				return dst, false, nil
			}
			return append(append(dst, c.prev[:shared]...), rest...), true, nil
		}
	}
	return dst, false, nil
}

// Touch reads, for each hash n(i) of i below n, where its row would be,
// so that the Gets of them that follow find the file's bytes in the
// processor's cache. A Get of a large file waits on memory twice, for its
// block's index entry and for the block; these reads depend on nothing
// before them, and the processor has many of them in flight at once:
// first the index entries, then, the index being cached, the blocks.
func (s *Section) Touch(n int, hash func(i int) uint64) {
	blocks := len(s.index) / entrySize
	if blocks == 0 {
		return
	}
	var sum uint64
	for i := range n {
		g, _ := bits.Mul64(hash(i), uint64(blocks))
		sum += uint64(s.index[int(g)*entrySize])
	}
	for i := range n {
		if b := s.block(hash(i), blocks); b >= 0 {
			_, off := s.entry(b)
			sum += uint64(s.data[off])
		}
	}
	// The sum is used, so that the reads are not optimized away.
	runtime.KeepAlive(sum)
}

// cursor reads a block's rows.
type cursor struct {
	p     []byte // what is left of the block
	h     uint64 // the hash of the row read last
	i     int    // the rows read
	head  [maxShared]byte
	nhead int // the first bytes of the row read last, up to maxShared
	prev  [maxShared]byte
}

// next reads the next row: its hash into c.h, and the bytes that follow
// the shared ones, which are in c.prev. It checks that hashes ascend, and
// that the block's first row shares nothing and has the index's hash.
func (c *cursor) next() (rest []byte, shared int, err error) {
	gap, p, err := uvarint(c.p)
	if err != nil {
		return nil, 0, err
	}
	if len(p) == 0 {
		return nil, 0, corrupt("row cut short")
	}
	shared, n := int(p[0]>>6), uint64(p[0]&lenEscape)
	p = p[1:]
	if n == lenEscape {
		if n, p, err = uvarint(p); err != nil {
			return nil, 0, err
		}
	}
	switch {
	case n > uint64(len(p)):
		return nil, 0, corrupt("row past its block")
	case shared > c.nhead:
		return nil, 0, corrupt("row shares more than the row before has")
	case c.i == 0 && gap != 0, c.i > 0 && gap == 0, c.i >= blockRows, c.h+gap < c.h:
		return nil, 0, corrupt("row %d of a block out of order", c.i)
	}
	rest, c.p = p[:n:n], p[n:]
	c.h += gap
	c.i++
	c.prev = c.head
	for j := shared; j < maxShared && j-shared < len(rest); j++ {
		c.head[j] = rest[j-shared]
	}
	c.nhead = min(maxShared, shared+len(rest))
	return rest, shared, nil
}

// block returns the last block whose first hash is h or below, -1 if
// none. Hashes are spread evenly, so the block of h is near h scaled to
// the index; the search gallops out from there, since a binary search
// over the whole index would miss the processor's cache at every step.
func (s *Section) block(h uint64, blocks int) int {
	if blocks == 0 {
		return -1
	}
	first := func(i int) uint64 { return binary.LittleEndian.Uint64(s.index[i*entrySize:]) }
	g, _ := bits.Mul64(h, uint64(blocks))
	// lo's first hash is h or below, hi's past h; -1 and blocks stand
	// for the ends.
	lo, hi := int(g), int(g)
	if first(lo) <= h {
		hi++
		for step := 1; hi < blocks && first(hi) <= h; step *= 2 {
			lo, hi = hi, hi+step
		}
		hi = min(hi, blocks)
	} else {
		lo--
		for step := 1; lo >= 0 && first(lo) > h; step *= 2 {
			hi, lo = lo, lo-step
		}
		lo = max(lo, -1)
	}
	// Invariant: first(lo) <= h (or lo == -1), first(hi) > h (or hi == blocks).
	for hi-lo > 1 {
		m := int(uint(lo+hi) >> 1)
		if first(m) <= h {
			lo = m
		} else {
			hi = m
		}
	}
	return lo
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
func (s *Section) Iter() *Iter { return &Iter{s: s, b: -1} }

// Iter walks a section's rows. It checks what a cursor checks, that each
// block's first hash is past the last of the block before, and that the
// rows are as many as the directory says.
type Iter struct {
	s    *Section
	b    int // the block
	c    cursor
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
	blocks := len(s.index) / entrySize
	for len(it.c.p) == 0 {
		if it.b++; it.b >= blocks {
			if it.n != s.rows {
				return it.fail(corrupt("%d rows where the directory says %d", it.n, s.rows))
			}
			it.done = true
			return false
		}
		first, off := s.entry(it.b)
		end := uint64(len(s.data))
		if it.b+1 < blocks {
			_, end = s.entry(it.b + 1)
		}
		if it.b > 0 && first <= it.c.h {
			return it.fail(corrupt("block %d out of order", it.b))
		}
		it.c = cursor{h: first, p: s.data[off:end]}
	}
	rest, shared, err := it.c.next()
	if err != nil {
		return it.fail(err)
	}
	it.row = append(append(it.row[:0], it.c.prev[:shared]...), rest...)
	it.n++
	return true
}

func (it *Iter) fail(err error) bool {
	it.err, it.done = err, true
	return false
}

// Hash returns the current row's hash.
func (it *Iter) Hash() uint64 { return it.c.h }

// Row returns the current row, which is the Iter's until Next.
func (it *Iter) Row() []byte { return it.row }

// Err returns what stopped the iterator short of the end, nil if nothing.
func (it *Iter) Err() error { return it.err }

// uvarint decodes the uvarint that starts b and returns the rest of b. A
// Get decodes half a block's gaps, most of a row's bytes, in a block
// Touch has just brought into the processor's cache, where the decoding
// itself is the cost: with eight bytes to read, the varint's end is found
// from the continuation bits of all eight at once and its 7-bit groups
// are packed in three steps, where binary.Uvarint branches on each byte.
// Sealed lookups of BenchmarkLookupSealed took 10% less time.
func uvarint(b []byte) (uint64, []byte, error) {
	if len(b) >= 8 {
		u := binary.LittleEndian.Uint64(b)
		if ends := ^u & 0x8080808080808080; ends != 0 {
			n := bits.TrailingZeros64(ends)/8 + 1
			x := u & (^uint64(0) >> (64 - 8*n)) & 0x7f7f7f7f7f7f7f7f
			x = x&0x007f007f007f007f | x&0x7f007f007f007f00>>1
			x = x&0x00003fff00003fff | x&0x3fff00003fff0000>>2
			x = x&0x000000000fffffff | x&0x0fffffff00000000>>4
			return x, b[n:], nil
		}
	}
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, corrupt("varint")
	}
	return v, b[n:], nil
}
