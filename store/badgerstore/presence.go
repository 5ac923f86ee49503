package badgerstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/dgraph-io/badger/v4"
	"github.com/spamd/spamd/bow"
)

// presence remembers, per user, which tokens have a key in Badger, in a
// Bloom filter, so that Apply need not ask Badger about a token it never
// stored. Training a corpus, most tokens of a batch that are not cached
// are new, and Badger takes some microseconds to say so: a skiplist search
// in each memtable and a Bloom filter probe for each table. A filter says
// it in one cache miss.
//
// A user's filter is built by scanning the user's token keys, once Apply
// has asked Badger about more of them than an eighth of the vocabulary,
// the point where the scan (under a microsecond a key) costs less than the
// reads it saves (several microseconds each). A user trained from empty
// gets one at once, for free, and so does a user whose rows are sealed
// (seal.go), whose filter holds only the keys over the sealed file. From
// then on every commit of Apply and of Prune adds the tokens it writes or
// deletes: a deleted one stays in, as a false positive, which only costs
// a Badger read, and over a sealed row a deletion is a tombstone key,
// which must be in. This relies on Apply and Prune being the only writers
// of token keys, both under s.wmu, which guards the filters too.
//
// Filters live as long as the Store, within a bound of memory
// (maxPresenceBytes for a Store), beyond which other users' filters are
// dropped.
type presence struct {
	filters map[string]*filter
	// misses counts, for users without a filter, the Badger token reads
	// Apply made since the last build or eviction.
	misses map[string]int
	bytes  int64 // of all filters
	max    int64 // bound of bytes
}

// maxPresenceBytes bounds the memory of all filters: some 13 million
// tokens at 10 bits each.
const maxPresenceBytes = 16 << 20

// maxMissUsers bounds the users misses are counted for; past it, the
// counts start over.
const maxMissUsers = 1 << 12

func newPresence(max int64) *presence {
	return &presence{filters: make(map[string]*filter), misses: make(map[string]int), max: max}
}

// get returns user's filter, building it first if that pays: misses more
// Badger reads are about to be made, and the user has vocabulary tokens.
// It returns nil when there is no filter to use; then every token must be
// read.
func (p *presence) get(ctx context.Context, db *badger.DB, user string, misses int, vocabulary uint64) (*filter, error) {
	if f := p.filters[user]; f != nil {
		return f, nil
	}
	if len(p.misses) >= maxMissUsers {
		clear(p.misses)
	}
	p.misses[user] += misses
	if uint64(p.misses[user])*8 < vocabulary {
		return nil, nil
	}
	delete(p.misses, user)
	// Room for the vocabulary to double before the filter grows.
	f := newFilter(max(2*vocabulary, 1<<16))
	if err := f.scan(ctx, db, user); err != nil {
		return nil, fmt.Errorf("scan tokens: %w", err)
	}
	if !p.make(user, f.bytes()) {
		return nil, nil
	}
	p.filters[user] = f
	return f, nil
}

// add records the keys a commit wrote or deleted for user. A key deleted
// stays in, as a false positive; a sealed model's commit writes
// tombstones where it deletes, which must be in.
func (p *presence) add(user string, hashes []bow.Hash) {
	f := p.filters[user]
	if f == nil {
		return
	}
	for _, h := range hashes {
		if f.full() {
			// A new layer twice the size of the last.
			l := newLayer(2 * f.layers[len(f.layers)-1].capacity)
			if !p.make(user, l.bytes()) {
				p.drop(user)
				return
			}
			f.layers = append(f.layers, l)
		}
		f.add(h)
	}
}

// make frees room for n more bytes of user's filter, evicting other
// users' filters if needed, and accounts for them. It reports false if
// there is no such room.
func (p *presence) make(user string, n int64) bool {
	for u := range p.filters {
		if p.bytes+n <= p.max {
			break
		}
		if u != user {
			p.drop(u)
		}
	}
	if p.bytes+n > p.max {
		return false
	}
	p.bytes += n
	return true
}

// drop forgets user's filter, if any.
func (p *presence) drop(user string) {
	if f := p.filters[user]; f != nil {
		p.bytes -= f.bytes()
		delete(p.filters, user)
	}
}

// filter is a scalable Bloom filter of token hashes: layers of blocked
// Bloom filters, each twice the capacity of the one before; a hash is
// added to the last and looked for in all.
type filter struct {
	layers []*layer
}

func newFilter(capacity uint64) *filter { return &filter{layers: []*layer{newLayer(capacity)}} }

func (f *filter) bytes() int64 {
	var n int64
	for _, l := range f.layers {
		n += l.bytes()
	}
	return n
}

func (f *filter) full() bool {
	l := f.layers[len(f.layers)-1]
	return l.n >= l.capacity
}

func (f *filter) add(h bow.Hash) { f.layers[len(f.layers)-1].add(h) }

// mayHave reports whether h may have been added; false is certain.
func (f *filter) mayHave(h bow.Hash) bool {
	for _, l := range f.layers {
		if l.mayHave(h) {
			return true
		}
	}
	return false
}

// scan adds every token key user has in db.
func (f *filter) scan(ctx context.Context, db *badger.DB, user string) error {
	txn := db.NewTransaction(false)
	defer txn.Discard()
	prefix := userPrefix(kindToken, user)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	n := 0
	for it.Rewind(); it.Valid(); it.Next() {
		if n++; n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		// A malformed key is no token's: leaving it out changes no read.
		if k := it.Item().Key(); len(k) == len(prefix)+8 {
			if f.full() {
				f.layers = append(f.layers, newLayer(2*f.layers[len(f.layers)-1].capacity))
			}
			f.add(bow.Hash(binary.BigEndian.Uint64(k[len(prefix):])))
		}
	}
	return ctx.Err()
}

// layer is a blocked Bloom filter: each hash sets bitsPerHash bits in one
// 512-bit block, so a probe costs one cache miss. At 10 bits per hash it
// errs about 1% of the time.
type layer struct {
	blocks   [][8]uint64
	capacity uint64 // hashes it was sized for
	n        uint64 // hashes added
}

const (
	bitsPerToken = 10
	bitsPerHash  = 7
)

func newLayer(capacity uint64) *layer {
	nblocks := (capacity*bitsPerToken + 511) / 512
	return &layer{blocks: make([][8]uint64, nblocks), capacity: capacity}
}

func (l *layer) bytes() int64 { return int64(len(l.blocks)) * 64 }

// probe returns the block of h and the two halves of a second hash whose
// combinations pick the bits. Token hashes are hashes already, but tests
// use small numbers: mixing them first spreads those too.
func (l *layer) probe(h bow.Hash) (block *[8]uint64, a, b uint32) {
	x := mix(uint64(h))
	i, _ := bits.Mul64(x, uint64(len(l.blocks)))
	y := mix(x)
	return &l.blocks[i], uint32(y), uint32(y>>32) | 1
}

func (l *layer) add(h bow.Hash) {
	blk, a, b := l.probe(h)
	for range bitsPerHash {
		blk[a>>6&7] |= 1 << (a & 63)
		a += b
	}
	l.n++
}

func (l *layer) mayHave(h bow.Hash) bool {
	blk, a, b := l.probe(h)
	for range bitsPerHash {
		if blk[a>>6&7]&(1<<(a&63)) == 0 {
			return false
		}
		a += b
	}
	return true
}

// mix is the finalizer of MurmurHash3, a bijection that spreads every
// input bit over all output bits.
func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}
