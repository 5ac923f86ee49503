package eval

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/internal/parallel"
	"github.com/spamd/spamd/mailbox"
	"github.com/spamd/spamd/store"
)

// Message is one labelled message of a corpus.
type Message struct {
	Path string
	// Class is the message's gold label: spam, ham or any class of the
	// filter's.
	Class string
	// Spam says whether Class counts as spam (filter.Config.SpamClasses),
	// as the run it was last set for says; "spam" is, unless told
	// otherwise.
	Spam bool
	// Raw holds the message's bytes when the corpus keeps them (LoadIndex,
	// LoadSources); it is nil in a corpus from OpenIndex, which reads
	// them from Path when a run needs them.
	Raw []byte
}

// Corpus is labelled mail in a fixed order. Runs that go over the corpus
// more than once keep the parsed form of every message, compactly, per
// tokenizer setting.
type Corpus struct {
	Messages []Message

	// index is the index file whose entries are read from their paths
	// when needed; "" when the messages hold their bytes.
	index string

	mu    sync.Mutex
	cache map[string]parsed
}

// OpenIndex reads a TREC-format index ("CLASS PATH" per line, CLASS spam,
// ham or any other class name, paths relative to the index file) into a
// corpus of paths and labels, in index order. The messages are read when a run needs them, so that a
// corpus of any size costs only its list; a message that cannot be read
// is an error of the run.
func OpenIndex(index string) (*Corpus, error) {
	entries, err := mailbox.ReadIndex(index)
	if err != nil {
		return nil, err
	}
	c := &Corpus{Messages: make([]Message, len(entries)), index: index}
	for i, e := range entries {
		if err := store.ValidClass(e.Label); err != nil {
			return nil, fmt.Errorf("%s: entry %d (%s): %w", index, i+1, e.Path, err)
		}
		c.Messages[i] = Message{Path: e.Path, Class: e.Label, Spam: e.Label == filter.Spam}
	}
	return c, nil
}

// LoadIndex is OpenIndex for callers that need every message's bytes at
// once: it reads them all into Message.Raw, on workers goroutines (at
// least four, since reading many small files is faster with a few
// readers).
func LoadIndex(ctx context.Context, index string, workers int) (*Corpus, error) {
	c, err := OpenIndex(index)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	in := feed(ctx, all(len(c.Messages)))
	type read struct {
		i   int
		raw []byte
		err error
	}
	err = parallel.Map(ctx, max(workers, 4), in, func(i int) read {
		raw, err := c.raw(i)
		return read{i, raw, err}
	}, func(r read) error {
		c.Messages[r.i].Raw = r.raw
		return r.err
	})
	if err != nil {
		return nil, err
	}
	c.index = ""
	return c, nil
}

// readCapped reads a message file, at most mailbox.DefaultMaxBytes of it.
func readCapped(path string) ([]byte, error) {
	var raw []byte
	err := mailbox.Walk(context.Background(), path, mailbox.Options{}, func(m mailbox.Message) error {
		if raw != nil {
			return fmt.Errorf("%s holds more than one message", path)
		}
		raw = m.Raw
		return nil
	})
	return raw, err
}

// LoadSources reads every message of the spam and ham sources (maildirs,
// mboxes, files or directories), spam first, then ham, and shuffles them
// with seed so that the classes are interleaved as in real mail. The
// corpus keeps every message's bytes: a message of an mbox has no file of
// its own to be read again from.
func LoadSources(ctx context.Context, spam, ham []string, recursive bool, seed uint64) (*Corpus, error) {
	c := &Corpus{}
	var errs []error
	o := mailbox.Options{Recursive: recursive, OnError: func(p string, err error) { errs = append(errs, fmt.Errorf("%s: %w", p, err)) }}
	for _, set := range []struct {
		paths []string
		spam  bool
	}{{spam, true}, {ham, false}} {
		for _, p := range set.paths {
			err := mailbox.Walk(ctx, p, o, func(m mailbox.Message) error {
				c.Messages = append(c.Messages, Message{Path: m.Path, Class: classOf(set.spam), Spam: set.spam, Raw: m.Raw})
				return nil
			})
			if err != nil {
				return nil, err
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	r.Shuffle(len(c.Messages), func(i, j int) { c.Messages[i], c.Messages[j] = c.Messages[j], c.Messages[i] })
	return c, nil
}

// Label returns the message's class: Class, or for a message made
// without one, spam or ham as Spam says.
func (m Message) Label() string {
	if m.Class != "" {
		return m.Class
	}
	return classOf(m.Spam)
}

// Classes returns the classes of the corpus's messages, sorted.
func (c *Corpus) Classes() []string {
	seen := map[string]bool{}
	for _, m := range c.Messages {
		seen[m.Label()] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

// label sets each message's Spam as cfg counts its class, and fails when
// a message's class is not one of cfg's: the filter would refuse to
// train it.
func (c *Corpus) label(cfg filter.Config) error {
	var unknown []string
	for _, class := range c.Classes() {
		if !cfg.HasClass(class) {
			unknown = append(unknown, class)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("%w: the corpus has messages of %s, which are not among the classes %s: set classes (--set classes=%s), and negative and spam_classes to fit",
			ErrOptions, strings.Join(unknown, ", "), strings.Join(cfg.Classes, "+"), strings.Join(c.Classes(), "+"))
	}
	for i := range c.Messages {
		c.Messages[i].Spam = cfg.IsSpam(c.Messages[i].Label())
	}
	return nil
}

// raw returns the bytes of message i, reading them from its file in a
// corpus that does not hold them.
func (c *Corpus) raw(i int) ([]byte, error) {
	if c.index == "" {
		return c.Messages[i].Raw, nil
	}
	raw, err := readCapped(c.Messages[i].Path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.index, err)
	}
	return raw, nil
}

// source makes the messages of a corpus ready for a run.
type source struct {
	// read returns message i's bytes; nil when prepare needs none.
	read func(i int) ([]byte, error)
	// prepare makes message i ready to score or train.
	prepare func(i int, raw []byte) filter.Prepared
}

// parser returns the source that reads and parses messages under cfg's
// tokenizer and bag settings. A message that does not parse gets an empty
// bag, as the milter would score it.
func (c *Corpus) parser(cfg filter.Config) (source, error) {
	f, err := filter.New(store.NewMemory(), cfg)
	if err != nil {
		return source{}, err
	}
	return source{read: c.raw, prepare: func(i int, raw []byte) filter.Prepared {
		p, err := f.Prepare(raw, false)
		if err != nil {
			p.Digest = digestOf(i)
		}
		return p
	}}, nil
}

// digestOf gives an unparseable message a digest of its own, so that it
// trains as one message.
func digestOf(i int) store.Digest {
	var d store.Digest
	copy(d[:], "unparsed:"+strconv.Itoa(i))
	return d
}

// parsed holds every message of a corpus as parsed under one tokenizer
// setting, for runs that go over the corpus more than once.
type parsed []filter.Prepared

func (ps parsed) source() source {
	return source{prepare: func(i int, _ []byte) filter.Prepared { return ps[i] }}
}

// compact keeps of p only what a run needs, its digest, its bags and its
// measures, and the bags in slices about as long as their features: the
// tokenizer's bag keeps room for every token and pair, which made a
// parsed corpus take twice the memory. bow builds a bag from counts only in ascending hash
// order within each part, so scores summed over a compacted bag may
// differ from those over the parsed one in their last bits.
func compact(p filter.Prepared) filter.Prepared {
	out := filter.Prepared{Digest: p.Digest, Bag: compactBag(p.Bag), Measures: p.Measures, Values: p.Values}
	for _, r := range p.Runs {
		out.Runs = append(out.Runs, compactBag(r))
	}
	return out
}

func compactBag(b bow.Bag) bow.Bag {
	head := make(map[bow.Hash]uint32, b.Head())
	body := make(map[bow.Hash]uint32, b.Len()-b.Head())
	for k, h := range b.Hashes() {
		if k < b.Head() {
			head[h] = b.Counts()[k]
		} else {
			body[h] = b.Counts()[k]
		}
	}
	return bow.FromMaps(head, body)
}

// source returns how a run gets messages ready under cfg: read and parsed
// as it comes to them or, with reuse, from those c keeps parsed, parsing
// them all first if it has none for cfg's settings.
func (c *Corpus) source(ctx context.Context, cfg filter.Config, workers int, reuse bool) (source, error) {
	if !reuse {
		return c.parser(cfg)
	}
	ps, err := c.parsed(ctx, cfg, workers)
	if err != nil {
		return source{}, err
	}
	return ps.source(), nil
}

// cacheKey names cfg's settings that change how a message parses, the
// runs of its body included.
func cacheKey(cfg filter.Config) string {
	return fmt.Sprintf("%+v|%+v|%d", cfg.Tokenize, cfg.Bag, cfg.RunLength)
}

// parsed returns every message parsed under cfg's tokenizer and bag
// settings, parsing on workers goroutines the first time.
func (c *Corpus) parsed(ctx context.Context, cfg filter.Config, workers int) (parsed, error) {
	key := cacheKey(cfg)
	c.mu.Lock()
	defer c.mu.Unlock()
	if ps, ok := c.cache[key]; ok {
		return ps, nil
	}
	src, err := c.parser(cfg)
	if err != nil {
		return nil, err
	}
	// Compacting on the workers, right after parsing, keeps the tokenizer's
	// bags from piling up.
	parse := src.prepare
	src.prepare = func(i int, raw []byte) filter.Prepared { return compact(parse(i, raw)) }
	ps := make(parsed, 0, len(c.Messages))
	err = each(ctx, workers, all(len(c.Messages)), src, func(_ int, p filter.Prepared) error {
		ps = append(ps, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if c.cache == nil {
		c.cache = map[string]parsed{}
	}
	c.cache[key] = ps
	return ps, nil
}

// forget drops what the corpus keeps parsed under cfg's settings.
func (c *Corpus) forget(cfg filter.Config) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.cache, cacheKey(cfg))
}

// all returns the positions 0 to n-1.
func all(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// each makes the messages at idx ready on workers goroutines, reading
// them on at least four, and calls fn with each in idx's order. Reading
// many small files is faster with a few readers, and ahead of the parsers
// it keeps them busy. Each stage runs only a few messages ahead of the
// next, so that a run holds no more than those at any time.
func each(ctx context.Context, workers int, idx []int, src source, fn func(i int, p filter.Prepared) error) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type message struct {
		i   int
		raw []byte
		err error
	}
	in := feed(ctx, idx)
	msgs := make(chan message)
	wg.Go(func() {
		defer close(msgs)
		send := func(m message) error {
			select {
			case msgs <- m:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if src.read == nil {
			for i := range in {
				if send(message{i: i}) != nil {
					return
				}
			}
			return
		}
		// A failed read travels on as the message's error, so this ends
		// early only when the run does.
		_ = parallel.Map(ctx, max(workers, 4), in, func(i int) message {
			raw, err := src.read(i)
			return message{i, raw, err}
		}, send)
	})
	type prepared struct {
		i   int
		p   filter.Prepared
		err error
	}
	return parallel.Map(ctx, workers, msgs, func(m message) prepared {
		if m.err != nil {
			return prepared{i: m.i, err: m.err}
		}
		return prepared{i: m.i, p: src.prepare(m.i, m.raw)}
	}, func(r prepared) error {
		if r.err != nil {
			return r.err
		}
		return fn(r.i, r.p)
	})
}

// feed sends the positions of idx on the channel it returns, until ctx is
// done: parallel.Map may return before reading them all.
func feed(ctx context.Context, idx []int) <-chan int {
	in := make(chan int)
	go func() {
		defer close(in)
		for _, i := range idx {
			select {
			case in <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	return in
}
