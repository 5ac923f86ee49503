package sealed

import (
	"encoding/binary"
	"hash/crc32"
	"math"
)

// The earlier layout, read only to be rewritten in this one:
//
//	magicV2 | each user's blocks | each user's block index | directory | footer
//
// A block holds blockRowsV2 rows, each the uvarint of its hash's gap
// from the row before (0 for a block's first, whose hash its index entry
// holds), then the shared-prefix byte and bytes of a row of this layout.
// An index entry is the block's first hash and its offset in the user's
// data, 12 bytes little-endian; a directory entry holds the user's rows,
// where its data and index are, and its blocks. The footer is as here.
const (
	magicV2     = "spamdsl2"
	blockRowsV2 = 16
	entrySizeV2 = 12
)

// ScanV2 calls f with every row of a file of the earlier layout, user by
// user in ascending order and, within a user, in ascending hash order, as
// a Writer takes them, and stops at the first error f returns. It checks
// the whole file first, the rows' checksum included.
func ScanV2(data []byte, f func(user string, h uint64, row []byte) error) error {
	metaOff, dirOff, dataCRC, err := footer(data, magicV2)
	if err != nil {
		return err
	}
	if crc32.Checksum(data[len(magicV2):metaOff], castagnoli) != dataCRC {
		return corrupt("checksum of the rows")
	}
	dir := data[dirOff : len(data)-footerSize]
	n, dir, err := uvarint(dir)
	if err != nil {
		return err
	}
	prev, dataEnd, indexEnd := "", uint64(len(magicV2)), metaOff
	var row []byte
	for i := uint64(0); i < n; i++ {
		var user string
		if user, dir, err = dirUser(dir); err != nil {
			return err
		}
		var v [5]uint64
		for j := range v {
			if v[j], dir, err = uvarint(dir); err != nil {
				return err
			}
		}
		rows, dOff, dLen, iOff, blocks := v[0], v[1], v[2], v[3], v[4]
		switch {
		case i > 0 && user <= prev:
			return corrupt("directory: user %q after %q", user, prev)
		case dOff != dataEnd || dLen > metaOff-dOff || dLen > math.MaxUint32:
			return corrupt("directory: user %q: rows at %d+%d", user, dOff, dLen)
		case iOff != indexEnd || blocks > (dirOff-iOff)/entrySizeV2 || (rows+blockRowsV2-1)/blockRowsV2 != blocks:
			return corrupt("directory: user %q: index at %d, %d blocks of %d rows", user, iOff, blocks, rows)
		}
		rowsData, index := data[dOff:dOff+dLen], data[iOff:iOff+blocks*entrySizeV2]
		var last uint64
		for b := range blocks {
			e := index[b*entrySizeV2:]
			h, off := binary.LittleEndian.Uint64(e), uint64(binary.LittleEndian.Uint32(e[8:]))
			end := dLen
			if b+1 < blocks {
				end = uint64(binary.LittleEndian.Uint32(e[entrySizeV2+8:]))
			}
			if b == 0 && off != 0 || b > 0 && h <= last || off >= end || end > dLen {
				return corrupt("user %q: block %d out of order or out of bounds", user, b)
			}
			p := rowsData[off:end]
			var nhead int
			var head [maxShared]byte
			for r := 0; len(p) > 0; r++ {
				var gap uint64
				if gap, p, err = uvarint(p); err != nil {
					return err
				}
				if r == 0 && gap != 0 || r > 0 && gap == 0 || r >= blockRowsV2 || h+gap < h || len(p) == 0 || rows == 0 {
					return corrupt("user %q: row %d of block %d out of order", user, r, b)
				}
				h += gap
				shared, l := int(p[0]>>6), uint64(p[0]&lenEscape)
				p = p[1:]
				if l == lenEscape {
					if l, p, err = uvarint(p); err != nil {
						return err
					}
				}
				if l > uint64(len(p)) || shared > nhead {
					return corrupt("user %q: row %d of block %d does not decode", user, r, b)
				}
				row = append(append(row[:0], head[:shared]...), p[:l]...)
				p = p[l:]
				nhead = copy(head[:], row)
				if err := f(user, h, row); err != nil {
					return err
				}
				rows--
			}
			last = h
		}
		if rows != 0 {
			return corrupt("user %q: rows other than the directory says", user)
		}
		prev, dataEnd, indexEnd = user, dOff+dLen, iOff+blocks*entrySizeV2
	}
	if len(dir) != 0 || dataEnd != metaOff || indexEnd != dirOff {
		return corrupt("directory does not cover the file")
	}
	return nil
}
