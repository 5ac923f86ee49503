package redisstore

import (
	"math"
	"sync"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/tokencache"
)

// nodeCache is a node's copy of the rows and totals it read, kept current
// by Redis's invalidation messages: with client tracking in broadcast
// mode, Redis tells every node the name of each key under the store's
// prefix that anyone changes, a bucket or a totals hash, and the node
// drops what it holds of it.
//
// # Regions
//
// Rows are cached in the shared token table (package tokencache), under a
// number per bucket rather than per user: a user's bucket b is a region,
// and the region's number is what the table knows as the user. Dropping a
// bucket, when its key is invalidated, is giving its region a new number:
// the rows under the old one are unreachable and age out of the table.
// A region maps from the bucket's number, which names the same bucket at
// every layout (see layout), so a node can hold regions of buckets it
// does not know the layout of yet.
//
// # Fills and invalidations
//
// A read from Redis races with the invalidations of what it read: the
// reply may come after the invalidation of a change made after the read,
// or before the invalidation of one made before it. A reader therefore
// notes, before asking Redis, the region number of each bucket it misses
// (0 for a bucket with no region), and fills the table only where nothing
// changed since:
//
//   - an invalidation gives the bucket a region with a new number, even a
//     bucket with none, so a fill that noted another number, or none,
//     finds out and drops what it read;
//   - every read carries the user's version, which each change in Redis
//     increments; a region remembers the version of its last fill, and
//     an older read does not fill it, so that two readers who meet never
//     leave the older one's rows behind the newer one's;
//   - a read fills only if the bucket layout it read under is the one the
//     node knows, since a token's bucket depends on it;
//   - losing the connection bumps the user's epoch, and a read from before
//     it fills nothing: invalidations may have been lost with it.
//
// The totals of a user follow the same rules with a sequence number for
// the region number, and so do its samples, with a sequence number of
// their own.
//
// # Staleness
//
// When the connection is lost, every region's number is kept aside as
// stale, and the totals are marked stale: they may be out of date, but a
// node whose Redis is unreachable classifies from them rather than not at
// all (see Store.Lookup). Once Redis answers again, stale regions are
// never read, and they go with their next invalidation.
type nodeCache struct {
	mu       sync.RWMutex
	off      bool // no caching at all
	tokens   tokencache.Table
	users    map[string]*userCache
	nextID   uint32 // numbers regions; 0 means none
	regions  int    // regions of all users
	maxRegs  int
	maxUsers int
	// sampBytes is what the users' samples take, current and stale, at
	// most maxSamp.
	sampBytes, maxSamp int
}

// userCache is what a node holds of one user's model.
type userCache struct {
	layout    layout
	layoutOK  bool // layout is known
	layoutVer uint64
	regions   map[uint64]region
	stale     map[uint64]uint32 // bucket → region number from before the connection was lost
	// staleLayout and staleTot are the layout and totals from before the
	// connection was lost: a server restarted empty, or another one after
	// a failover, may count versions anew.
	staleLayout layout
	staleTot    *totals
	epoch       uint64
	tot         *totals // nil if never read
	totOK       bool    // tot is current
	totSeq      uint64  // invalidations of the totals
	// samp holds the samples, current if sampOK; staleSamp those from
	// before the connection was lost.
	samp, staleSamp store.Samples
	sampOK          bool
	sampSeq         uint64 // invalidations of the samples
}

// samplesBytes returns about what samples take in memory.
func samplesBytes(s store.Samples) int {
	n := 0
	for _, byClass := range s {
		n += 24
		for _, smp := range byClass {
			n += 48 + 16*len(smp.Bins)
		}
	}
	return n
}

// setSamplesLocked replaces uc's samples, current and stale, keeping the
// count of bytes; past the budget, every other user's go.
func (c *nodeCache) setSamplesLocked(uc *userCache, cur, stale store.Samples) {
	c.sampBytes += samplesBytes(cur) + samplesBytes(stale) - samplesBytes(uc.samp) - samplesBytes(uc.staleSamp)
	uc.samp, uc.staleSamp = cur, stale
	if c.sampBytes <= c.maxSamp {
		return
	}
	for _, other := range c.users {
		if other != uc {
			c.sampBytes -= samplesBytes(other.samp) + samplesBytes(other.staleSamp)
			other.samp, other.staleSamp, other.sampOK = nil, nil, false
			other.sampSeq++
		}
	}
}

type region struct {
	id  uint32
	ver uint64 // the version of the last fill
	// filled is set for a region a fill made and no invalidation has
	// renumbered since.
	filled bool
	// complete is set when the whole bucket was read into the table
	// (Warm) when it had rotated rot times: as long as the table has not
	// rotated twice since, a token not in it is not in the bucket either.
	complete bool
	rot      uint64
}

// maxUsers bounds the users a node keeps a cache of at once; past it,
// everything is dropped.
const maxUsers = 1 << 16

func newNodeCache(bytes int64) *nodeCache {
	c := &nodeCache{off: bytes < 0, users: make(map[string]*userCache), maxUsers: maxUsers}
	bytes = max(bytes, 0)
	c.tokens = tokencache.New(bytes)
	// A region holds some 20 to 100 tokens when full; they cost some 60
	// bytes each, against 32 a token.
	c.maxRegs = max(c.tokens.Room()/4, 1<<16)
	// Samples are a few kilobytes a user who trained hundreds of
	// messages; a sixteenth of the budget keeps thousands.
	c.maxSamp = int(bytes / 16)
	return c
}

// user returns the cache of user, making it if needed; c.mu must be held
// for writing.
func (c *nodeCache) user(name string) *userCache {
	uc := c.users[name]
	if uc == nil {
		if len(c.users) >= c.maxUsers {
			c.dropUsersLocked()
		}
		uc = &userCache{regions: make(map[uint64]region)}
		c.users[name] = uc
	}
	return uc
}

// lookupUser returns user's cache, making it if needed: a user must have
// one before a read from Redis, so that invalidations arriving during the
// read are recorded.
func (c *nodeCache) lookupUser(name string) *userCache {
	c.mu.RLock()
	uc := c.users[name]
	c.mu.RUnlock()
	if uc != nil {
		return uc
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.user(name)
}

// dropUsersLocked drops the caches of every user but the global model's,
// which every message needs: a busy server sees more recipients than it
// can keep. Their rows stay in the table, unreachable, until it rotates.
func (c *nodeCache) dropUsersLocked() {
	for name, uc := range c.users {
		if name != "" {
			c.regions -= len(uc.regions)
			c.sampBytes -= samplesBytes(uc.samp) + samplesBytes(uc.staleSamp)
			delete(c.users, name)
		}
	}
}

// forgetUser drops the cache of user, whose model was deleted or
// replaced whole; a read in flight for it fills nothing, its ticket being
// for the cache dropped.
func (c *nodeCache) forgetUser(user string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if uc := c.users[user]; uc != nil {
		c.regions -= len(uc.regions)
		c.sampBytes -= samplesBytes(uc.samp) + samplesBytes(uc.staleSamp)
		delete(c.users, user)
	}
}

// resetLocked drops everything.
func (c *nodeCache) resetLocked() {
	c.tokens.Reset()
	clear(c.users)
	c.regions = 0
	c.nextID = 0
	c.sampBytes = 0
}

// newID returns a region number never given out since the last reset.
func (c *nodeCache) newID() uint32 {
	if c.nextID >= math.MaxUint32-1 || c.regions >= c.maxRegs {
		// Users' caches go too; whoever holds one notices, as fills
		// check that it is still the user's.
		c.resetLocked()
	}
	c.nextID++
	return c.nextID
}

// ticket is what a reader notes before asking Redis, to fill the cache
// with the reply.
type ticket struct {
	uc       *userCache
	epoch    uint64
	totSeq   uint64
	sampSeq  uint64
	layout   layout
	layoutOK bool
	// The misses: indices into the hashes, and for each its bucket at
	// layout and the number of its region then (0 if it had none).
	miss   []int
	bucket []uint64
	id     []uint32
	// The hits found only in the table's old generation, to put back.
	old    []int
	oldB   []uint64
	oldID  []uint32
	oldRow []store.Counts
}

// ticket notes what a read from Redis must find unchanged to fill uc.
func (uc *userCache) ticket() *ticket {
	return &ticket{uc: uc, epoch: uc.epoch, totSeq: uc.totSeq, sampSeq: uc.sampSeq, layout: uc.layout, layoutOK: uc.layoutOK}
}

// filling returns user's cache if a read under ticket t may fill it: it
// is the one t was made for, and no connection was lost since. c.mu must
// be held for writing.
func (c *nodeCache) filling(user string, t *ticket) *userCache {
	uc := c.users[user]
	if uc != t.uc || uc.epoch != t.epoch || c.off {
		return nil
	}
	return uc
}

// getTokens sets out[i] to a copy of the cached row of hashes[i] for user
// (nil for a token known to be absent), at least width values long, and
// returns the ticket of the misses. The rows are the caller's; those of
// width values share one array.
func (c *nodeCache) getTokens(user string, hashes []bow.Hash, out []store.Counts, width int) *ticket {
	uc := c.lookupUser(user)
	c.mu.RLock()
	defer c.mu.RUnlock()
	t := uc.ticket()
	if c.users[user] != uc || !uc.layoutOK || c.off {
		for i := range hashes {
			t.miss = append(t.miss, i)
			t.bucket = append(t.bucket, 0)
			t.id = append(t.id, 0)
		}
		return t
	}
	var backing []uint64
	row := func(i, n int) []uint64 {
		if n > width {
			return make([]uint64, n)
		}
		if len(backing) == 0 {
			backing = make([]uint64, (len(hashes)-i)*width)
		}
		r := backing[:width:width]
		backing = backing[width:]
		return r
	}
	for i, h := range hashes {
		b := uc.layout.bucket(h)
		r, ok := uc.regions[b]
		if !ok {
			t.miss, t.bucket, t.id = append(t.miss, i), append(t.bucket, b), append(t.id, 0)
			continue
		}
		e, found, inOld := c.tokens.Get(r.id, h)
		if !found {
			if r.complete && c.tokens.Rotations() <= r.rot+1 && !c.tokens.Has(r.id, h) {
				continue // not in the bucket: absent
			}
			t.miss, t.bucket, t.id = append(t.miss, i), append(t.bucket, b), append(t.id, r.id)
			continue
		}
		if n := e.Len(); n > 0 {
			v := row(i, n)
			e.CopyTo(v)
			out[i] = v
		}
		if inOld {
			t.old, t.oldB, t.oldID = append(t.old, i), append(t.oldB, b), append(t.oldID, r.id)
			t.oldRow = append(t.oldRow, out[i])
		}
	}
	return t
}

// stale fills out[i], for each miss of t, with what the cache holds of
// hashes[i], current or stale, leaving nil what it does not hold.
func (c *nodeCache) stale(user string, hashes []bow.Hash, out []store.Counts, t *ticket, width int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	uc := c.users[user]
	if uc == nil {
		return
	}
	for _, i := range t.miss {
		h := hashes[i]
		var ids [2]uint32
		if uc.layoutOK {
			if r, ok := uc.regions[uc.layout.bucket(h)]; ok {
				ids[0] = r.id
			}
		}
		ids[1] = uc.stale[uc.staleLayout.bucket(h)]
		for _, id := range ids {
			if id == 0 {
				continue
			}
			if e, found, _ := c.tokens.Get(id, h); found {
				if n := e.Len(); n > 0 {
					v := make([]uint64, max(n, width))
					e.CopyTo(v)
					out[i] = v
				}
				break
			}
		}
	}
}

// fill puts what a read under ticket t found, the user's totals tot and
// rows[k] for hashes[t.miss[k]], where nothing changed since t was made,
// and puts back the hits found in the old generation.
func (c *nodeCache) fill(user string, t *ticket, hashes []bow.Hash, tot *totals, rows []store.Counts) {
	c.mu.Lock()
	defer c.mu.Unlock()
	uc := c.filling(user, t)
	if uc == nil {
		return
	}
	c.fillTotalsLocked(uc, t.totSeq, tot)
	c.adoptLocked(uc, tot.layout, tot.version)
	c.putBackLocked(uc, t, hashes)
	if uc.layout != tot.layout {
		return // the node knows a newer layout than the read's
	}
	for k, i := range t.miss {
		h := hashes[i]
		b := tot.layout.bucket(h)
		if t.layoutOK && b != t.bucket[k] {
			continue
		}
		r, ok := uc.regions[b]
		switch {
		case !ok && t.id[k] == 0:
			r = region{id: c.newID(), ver: tot.version, filled: true}
			if c.users[user] != uc {
				return // newID reset the cache
			}
			c.regions++
		case !ok:
			continue
		case t.id[k] == 0 && !r.filled:
			continue // invalidated since the read began
		case t.id[k] != 0 && r.id != t.id[k]:
			continue
		case tot.version < r.ver:
			continue // a newer read filled it
		}
		r.ver = tot.version
		uc.regions[b] = r
		c.tokens.Put(r.id, h, rows[k])
	}
}

// putBack puts back into the table's current generation the hits t found
// only in the old one, so that tokens in use survive its rotation.
func (c *nodeCache) putBack(user string, t *ticket, hashes []bow.Hash) {
	c.mu.Lock()
	defer c.mu.Unlock()
	uc := c.filling(user, t)
	if uc == nil {
		return
	}
	c.putBackLocked(uc, t, hashes)
}

func (c *nodeCache) putBackLocked(uc *userCache, t *ticket, hashes []bow.Hash) {
	for k := range t.old {
		if r, ok := uc.regions[t.oldB[k]]; ok && r.id == t.oldID[k] {
			c.tokens.Put(r.id, hashes[t.old[k]], t.oldRow[k])
		}
	}
}

// noteBuckets returns a ticket of user's cache and the region number of
// each of buckets (0 for none), to fill them with fillDump.
func (c *nodeCache) noteBuckets(user string, buckets []uint64) (*ticket, []uint32) {
	uc := c.lookupUser(user)
	c.mu.RLock()
	defer c.mu.RUnlock()
	ids := make([]uint32, len(buckets))
	for i, b := range buckets {
		ids[i] = uc.regions[b].id
	}
	return uc.ticket(), ids
}

// fillDump puts the whole content of buckets, read at once with tot after
// noteBuckets gave t and ids, for Warm: each bucket whose region is the
// one noted, or one a fill made since, not a newer read's.
func (c *nodeCache) fillDump(user string, t *ticket, ids []uint32, tot *totals, buckets []uint64, hashes [][]bow.Hash, rows [][]store.Counts) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	uc := c.filling(user, t)
	if uc == nil {
		return 0
	}
	c.fillTotalsLocked(uc, t.totSeq, tot)
	c.adoptLocked(uc, tot.layout, tot.version)
	if uc.layout != tot.layout {
		return 0
	}
	n := 0
	for k, b := range buckets {
		r, ok := uc.regions[b]
		switch {
		case !ok && ids[k] == 0:
			r = region{id: c.newID(), filled: true}
			if c.users[user] != uc {
				return n
			}
			c.regions++
		case !ok:
			continue
		case ids[k] == 0 && !r.filled, ids[k] != 0 && r.id != ids[k]:
			continue // invalidated since the read began
		case tot.version < r.ver:
			continue
		}
		r.ver, r.complete, r.rot = tot.version, c.tokens.Room() > 0, c.tokens.Rotations()
		uc.regions[b] = r
		for j, h := range hashes[k] {
			c.tokens.Put(r.id, h, rows[k][j])
		}
		n += len(hashes[k])
	}
	return n
}

// getTotals returns the cached totals of user if they are current, and
// a ticket to fill them with otherwise.
func (c *nodeCache) getTotals(user string) (*totals, *ticket) {
	uc := c.lookupUser(user)
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.users[user] == uc && uc.totOK && !c.off {
		return uc.tot, nil
	}
	return nil, uc.ticket()
}

// getSamples returns the cached samples of user if they are current, and
// a ticket to fill them with otherwise.
func (c *nodeCache) getSamples(user string) (store.Samples, *ticket) {
	uc := c.lookupUser(user)
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.users[user] == uc && uc.sampOK && !c.off {
		return uc.samp, nil
	}
	return nil, uc.ticket()
}

// fillSamples puts samples read under ticket t, unless they changed since.
func (c *nodeCache) fillSamples(user string, t *ticket, smp store.Samples) {
	c.mu.Lock()
	defer c.mu.Unlock()
	uc := c.filling(user, t)
	if uc == nil || uc.sampSeq != t.sampSeq {
		return
	}
	c.setSamplesLocked(uc, smp, uc.staleSamp)
	uc.sampOK = c.users[user] == uc
}

// staleSamples returns the samples the cache holds of user, current or
// not, and whether it holds any.
func (c *nodeCache) staleSamples(user string) (store.Samples, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if uc := c.users[user]; uc != nil {
		if uc.samp != nil {
			return uc.samp, true
		}
		if uc.staleSamp != nil {
			return uc.staleSamp, true
		}
	}
	return nil, false
}

// staleTotals returns the totals the cache holds of user, current or not,
// nil if none.
func (c *nodeCache) staleTotals(user string) *totals {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if uc := c.users[user]; uc != nil {
		if uc.tot != nil {
			return uc.tot
		}
		return uc.staleTot
	}
	return nil
}

// fillTotals puts totals read under ticket t.
func (c *nodeCache) fillTotals(user string, t *ticket, tot *totals) {
	c.mu.Lock()
	defer c.mu.Unlock()
	uc := c.filling(user, t)
	if uc == nil {
		return
	}
	c.fillTotalsLocked(uc, t.totSeq, tot)
	c.adoptLocked(uc, tot.layout, tot.version)
}

func (c *nodeCache) fillTotalsLocked(uc *userCache, seq uint64, tot *totals) {
	if uc.totSeq != seq || uc.tot != nil && tot.version < uc.tot.version {
		return
	}
	uc.tot, uc.totOK = tot, true
}

// adoptLocked makes l, read at version ver, the user's layout if it is
// newer than the one the node knows, dropping the regions of the buckets
// split since.
func (c *nodeCache) adoptLocked(uc *userCache, l layout, ver uint64) {
	if uc.layoutOK && (ver <= uc.layoutVer || l == uc.layout) {
		uc.layoutVer = max(uc.layoutVer, ver)
		return
	}
	if uc.layoutOK {
		drop := func(b uint64) {
			if _, ok := uc.regions[b]; ok {
				delete(uc.regions, b)
				c.regions--
			}
		}
		// Walk the splits from the old layout to the new one, or the
		// regions, whichever is shorter.
		if n := int(l.buckets()) - int(uc.layout.buckets()); n >= 0 && n < len(uc.regions) {
			cur := uc.layout
			for cur.buckets() < l.buckets() && cur.level <= maxLevel {
				drop(1<<cur.level + cur.split)
				if cur.split++; cur.split == 1<<cur.level {
					cur.level, cur.split = cur.level+1, 0
				}
			}
		} else {
			for b := range uc.regions {
				if !l.has(b) {
					drop(b)
				}
			}
		}
	}
	uc.layout, uc.layoutOK, uc.layoutVer = l, true, ver
}

// invalidate handles the invalidation of keys, as Redis names them; nil
// means that invalidations may have been lost, with a connection, or that
// Redis dropped every key (FLUSHALL).
func (c *nodeCache) invalidate(k keys, names []string, lost bool, classes func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if lost {
		for _, uc := range c.users {
			// Keep what was current as stale, beside what was already
			// (each connection lost says so, and there are several).
			if uc.stale == nil {
				uc.stale = make(map[uint64]uint32, len(uc.regions))
			}
			for b, r := range uc.regions {
				uc.stale[b] = r.id
			}
			c.regions -= len(uc.regions)
			uc.regions = make(map[uint64]region)
			uc.epoch++
			if uc.layoutOK {
				uc.staleLayout = uc.layout
			}
			if uc.tot != nil {
				uc.staleTot = uc.tot
			}
			uc.layoutOK, uc.layoutVer, uc.tot = false, 0, nil
			uc.totOK = false
			uc.totSeq++
			if uc.samp != nil {
				c.setSamplesLocked(uc, nil, uc.samp)
			}
			uc.sampOK = false
			uc.sampSeq++
		}
		classes()
		return
	}
	for _, name := range names {
		p := k.parse(name)
		switch p.kind {
		case 'm':
			classes()
		case 't':
			if uc := c.users[p.user]; uc != nil {
				uc.totOK = false
				uc.totSeq++
			}
		case 'd':
			if uc := c.users[p.user]; uc != nil {
				uc.sampOK = false
				uc.sampSeq++
			}
		case 'b':
			if uc := c.users[p.user]; uc != nil {
				c.renumberLocked(p.user, uc, p.bucket)
			}
		}
	}
}

// renumberLocked gives bucket b of user's cache uc a region with a new
// number: what the old one holds is out of date. It reports false if
// that reset the cache, uc with it.
func (c *nodeCache) renumberLocked(user string, uc *userCache, b uint64) bool {
	id := c.newID()
	if c.users[user] != uc {
		return false
	}
	if _, ok := uc.regions[b]; !ok {
		c.regions++
	}
	uc.regions[b] = region{id: id}
	delete(uc.stale, b)
	return true
}

// applied records what an Apply for user wrote: the tokens of its ops
// changed (their buckets renumbered, at the layout before and after) and
// the totals are tot. The node's own invalidations arrive too, but later:
// this makes a node read its own writes.
func (c *nodeCache) applied(user string, hashes []bow.Hash, tot *totals) {
	c.mu.Lock()
	defer c.mu.Unlock()
	uc := c.user(user)
	before := uc.layout
	known := uc.layoutOK
	c.adoptLocked(uc, tot.layout, tot.version)
	done := make(map[uint64]bool)
	for _, h := range hashes {
		for _, l := range []layout{before, uc.layout} {
			if l == before && !known {
				continue
			}
			if b := l.bucket(h); !done[b] {
				done[b] = true
				if !c.renumberLocked(user, uc, b) {
					return
				}
			}
		}
	}
	c.wroteLocked(uc, tot)
}

// pruned records what a prune call for user wrote: rows deleted from
// buckets (numbers at tot's layout), seen records deleted when buckets is
// nil; the totals are tot and the samples may have changed. As applied
// does for training, this makes a node read its own prune at once.
func (c *nodeCache) pruned(user string, buckets []uint64, tot *totals) {
	c.mu.Lock()
	defer c.mu.Unlock()
	uc := c.user(user)
	c.adoptLocked(uc, tot.layout, tot.version)
	for _, b := range buckets {
		if !c.renumberLocked(user, uc, b) {
			return
		}
	}
	c.wroteLocked(uc, tot)
}

// wroteLocked takes tot, the totals a call of this node wrote, unless
// newer ones are known, and has the samples, which the call may have
// changed, read again.
func (c *nodeCache) wroteLocked(uc *userCache, tot *totals) {
	uc.totSeq++
	if !c.off && (uc.tot == nil || tot.version >= uc.tot.version) {
		uc.tot, uc.totOK = tot, true
	} else {
		uc.totOK = false
	}
	uc.sampOK = false
	uc.sampSeq++
}

// invalidateTokens drops what the node holds of the buckets of the tokens
// of ops, at the layout it knows, and of user's totals: for a call whose
// outcome is unknown.
func (c *nodeCache) invalidateTokens(user string, ops []store.Op) {
	c.mu.Lock()
	defer c.mu.Unlock()
	uc := c.users[user]
	if uc == nil {
		return
	}
	uc.totOK = false
	uc.totSeq++
	uc.sampOK = false
	uc.sampSeq++
	if !uc.layoutOK {
		return
	}
	done := make(map[uint64]bool)
	for i := range ops {
		for _, h := range ops[i].Bag.Hashes() {
			if b := uc.layout.bucket(h); !done[b] {
				done[b] = true
				if !c.renumberLocked(user, uc, b) {
					return
				}
			}
		}
	}
}
