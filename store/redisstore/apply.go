package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
)

// chunkFeatures bounds the features of the ops one apply call carries, and
// so how long it holds Redis: a few milliseconds a thousand features. An
// op is never split: one bigger than this goes alone.
const chunkFeatures = 4096

// Apply carries out ops for user in order, in as few calls of the apply
// script as the chunk bound allows, each call sent when the one before
// has answered. Each op is atomic. On error, the results are those of the
// ops applied before it; when the connection is lost during a call, the
// ops of that call may have been applied too, which a retry, finding them
// trained, counts once.
func (s *Store) Apply(ctx context.Context, user string, ops []store.Op) ([]store.Result, error) {
	if err := store.ValidUser(user); err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	if err := store.ValidOps(ops); err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	defer s.life.RUnlock()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	cl, err := s.register(ctx, ops)
	if err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	results := make([]store.Result, 0, len(ops))
	for start := 0; start < len(ops); {
		if err := ctx.Err(); err != nil {
			return results, fmt.Errorf("apply op %d: %w", start, err)
		}
		end, n := start, 0
		for end < len(ops) && (end == start || n+ops[end].Bag.Len() <= chunkFeatures) {
			n += ops[end].Bag.Len()
			end++
		}
		res, err := s.applyChunk(ctx, user, ops[start:end], cl)
		results = append(results, res...)
		if err != nil {
			return results, fmt.Errorf("apply op %d: %w", start+len(res), err)
		}
		start = end
	}
	return results, nil
}

// register adds the classes of ops and of their steps not registered yet
// to the store's class list, in order of first use: an op's class, then
// its steps'. Forgetting registers nothing.
func (s *Store) register(ctx context.Context, ops []store.Op) (*classList, error) {
	cur := s.classes.Load()
	var added []string
	add := func(c string) {
		if _, ok := cur.index[c]; !ok && !slices.Contains(added, c) {
			added = append(added, c)
		}
	}
	for i := range ops {
		if ops[i].Class == "" {
			continue
		}
		add(ops[i].Class)
		for _, st := range ops[i].Steps {
			add(st.Class)
		}
	}
	if added == nil {
		return cur, nil
	}
	list, err := s.scripts.register.Exec(ctx, s.client, []string{s.keys.meta()}, append([]string{schemaVersion}, added...)).ToString()
	if err != nil {
		if re, ok := rueidis.IsRedisErr(err); ok && strings.HasPrefix(re.Error(), "SCHEMA") {
			return nil, fmt.Errorf("%w: %v", ErrSchema, err)
		}
		s.unavailable(ctx, err)
		return nil, fmt.Errorf("register classes %q: %w", added, s.wrap(err))
	}
	if err := s.setClasses(list); err != nil {
		return nil, err
	}
	return s.classes.Load(), nil
}

// applyChunk runs the apply script on ops and returns the results of the
// ops it applied, with the error that stopped it, if any.
func (s *Store) applyChunk(ctx context.Context, user string, ops []store.Op, cl *classList) ([]store.Result, error) {
	args := make([]string, 0, 5+7*len(ops))
	args = append(args, s.keys.base(user), strconv.Itoa(s.opts.BucketLoad), strconv.Itoa(maxSplits),
		strconv.FormatUint(uint64(s.upgraded), 10), strconv.Itoa(len(ops)))
	var bag []byte
	for i := range ops {
		op := &ops[i]
		class, steps, values := "-1", "", ""
		if op.Class != "" {
			class = strconv.Itoa(cl.index[op.Class])
			steps = formatSteps(op.Steps, cl.index)
			values = formatValues(op.Values)
		}
		bag = appendBag(bag[:0], op.Bag)
		args = append(args, string(op.Digest[:]), class, steps, strconv.Itoa(op.Bag.Head()), string(bag), values, formatDayMark(op.Day, op.Mark))
	}
	reply, err := s.scripts.apply.Exec(ctx, s.client, []string{s.keys.totals(user), s.keys.seen(user), s.keys.samples(user)}, args).ToArray()
	if err != nil {
		// Whatever the call did, the node's cache of what it may have
		// changed must go.
		s.cache.invalidateTokens(user, ops)
		if re, ok := rueidis.IsRedisErr(err); ok && strings.HasPrefix(re.Error(), "OOM") {
			return nil, fmt.Errorf("%w: Redis is out of memory (maxmemory), nothing of this call was applied: %w", ErrUnavailable, err)
		}
		s.unavailable(ctx, err)
		return nil, s.wrap(err)
	}
	s.answered()
	res, fail, tot, err := s.applyReply(ctx, reply, len(ops))
	if err != nil {
		s.cache.invalidateTokens(user, ops)
		return nil, err
	}
	var hashes []bow.Hash
	changed := false
	for i := range ops[:len(res)] {
		if res[i].Changed {
			changed = true
			hashes = append(hashes, ops[i].Bag.Hashes()...)
		}
	}
	if changed {
		s.cache.applied(user, hashes, tot)
	}
	if fail != "" {
		err := fmt.Errorf("%s", fail)
		if strings.HasPrefix(fail, "spamd: corrupt") {
			err = fmt.Errorf("%w: %s", store.ErrInconsistent, fail)
		}
		return res, err
	}
	return res, nil
}

// applyReply parses the apply script's reply: the results of the ops it
// applied, why it stopped short of the others, and the totals it left.
func (s *Store) applyReply(ctx context.Context, reply []rueidis.RedisMessage, n int) ([]store.Result, string, *totals, error) {
	if len(reply) != 3 {
		return nil, "", nil, fmt.Errorf("apply script: %d values", len(reply))
	}
	flat, err := reply[0].ToArray()
	if err != nil && !rueidis.IsRedisNil(err) {
		return nil, "", nil, fmt.Errorf("apply script: %w", err)
	}
	if len(flat)%2 != 0 || len(flat)/2 > n {
		return nil, "", nil, fmt.Errorf("apply script: %d result values for %d ops", len(flat), n)
	}
	var fail string
	if !reply[1].IsNil() {
		fail, _ = reply[1].ToString()
	}
	tv, err := reply[2].ToArray()
	if err != nil {
		return nil, "", nil, fmt.Errorf("apply script: %w", err)
	}
	tot, err := totalsOf(tv)
	if err != nil {
		return nil, "", nil, fmt.Errorf("apply script: %w", err)
	}
	res := make([]store.Result, len(flat)/2)
	need := 0
	prev := make([]int, len(res))
	for i := range res {
		p, err1 := flat[2*i].AsInt64()
		ch, err2 := flat[2*i+1].AsInt64()
		if err := errors.Join(err1, err2); err != nil {
			return nil, "", nil, fmt.Errorf("apply script: %w", err)
		}
		prev[i] = int(p)
		need = max(need, int(p)+1)
		res[i].Changed = ch == 1
	}
	cl, err := s.classList(ctx, need)
	if err != nil {
		return nil, "", nil, err
	}
	for i, p := range prev {
		if p >= 0 {
			res[i].Prev = cl.names[p]
		}
	}
	return res, fail, tot, nil
}
