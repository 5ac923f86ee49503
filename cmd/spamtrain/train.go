package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync"

	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/internal/parallel"
	"github.com/spamd/spamd/mailbox"
)

// source is a path to read messages from, with the class they are to be
// trained as ("" when unlabelled).
type source struct {
	path  string
	class string
}

// item is one message on its way through a pipeline.
type item struct {
	msg mailbox.Message
	src source
	p   filter.Prepared
	err error
}

// walkSources sends every message of sources on the returned channel, in
// order, reporting unreadable files to onErr. The channel is closed when
// the sources are exhausted or ctx is done; the returned function then
// gives the error that stopped the walk, if any.
func walkSources(ctx context.Context, e *env, sources []source, recursive bool, onErr func(path string, err error)) (<-chan item, func() error) {
	ch := make(chan item, 64)
	var walkErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		o := mailbox.Options{Recursive: recursive, Stdin: e.stdin, OnError: onErr}
		for _, s := range sources {
			err := mailbox.Walk(ctx, s.path, o, func(m mailbox.Message) error {
				select {
				case ch <- item{msg: m, src: s}:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
			if err != nil {
				walkErr = err
				return
			}
		}
	}()
	return ch, func() error { <-done; return walkErr }
}

// prepareAll prepares the messages of in on workers goroutines and hands
// them to out in order.
func prepareAll(ctx context.Context, f *filter.Filter, workers int, names bool, in <-chan item, out func(item) error) error {
	return parallel.Map(ctx, workers, in, func(it item) item {
		if it.msg.Truncated {
			// The tokenizer reads only the start of a message anyway.
			it.p.Truncated = true
		}
		p, err := f.Prepare(it.msg.Raw, names)
		it.p, it.err = p, err
		it.msg.Raw = nil // free the bytes early: only the bag is needed now
		return it
	}, out)
}

// tally counts what a training run did.
type tally struct {
	seen, learned, relabeled, known int
	mu                              sync.Mutex // the walk reports unreadable files from its own goroutine
	skipped                         int
}

func (t *tally) String() string {
	s := fmt.Sprintf("%d messages: %d learned, %d relabeled, %d already known", t.seen, t.learned, t.relabeled, t.known)
	if t.skipped > 0 {
		s += fmt.Sprintf(", %d skipped (see errors above)", t.skipped)
	}
	return s
}

// trainSources trains (or, for sources with class "", forgets) every
// message of sources for user, in batches of batchSize messages. A message
// that cannot be read or parsed is reported on stderr and skipped.
func trainSources(ctx context.Context, e *env, f *filter.Filter, user string, sources []source, recursive bool, workers, batchSize int) (*tally, error) {
	t := &tally{}
	report := func(path string, err error) {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.skipped++
		fmt.Fprintf(e.stderr, "%s: %v\n", path, err)
	}
	// Cancelling stops the walk when training fails.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	in, walkErr := walkSources(ctx, e, sources, recursive, report)
	bar := newProgress(e.stderr, -1, "training")
	defer bar.Finish()

	var batch []filter.Item
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		res, err := f.Train(ctx, user, batch)
		if err != nil {
			return err
		}
		for i, r := range res {
			switch {
			case !r.Changed:
				t.known++
			case r.Prev != "" && batch[i].Class != "":
				t.relabeled++
			default:
				t.learned++
			}
		}
		batch = batch[:0]
		return nil
	}
	err := prepareAll(ctx, f, workers, false, in, func(it item) error {
		t.seen++
		bar.Add(1)
		if it.err != nil {
			report(it.msg.Path, it.err)
			return nil
		}
		batch = append(batch, filter.Item{Prepared: it.p, Class: it.src.class})
		if len(batch) >= batchSize {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	cancel()
	if werr := walkErr(); err == nil && werr != nil && !errors.Is(werr, context.Canceled) {
		err = werr
	}
	return t, err
}

func runTrain(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var mf modelFlags
	mf.register(fs, true)
	var spam, ham listFlag
	fs.Var(&spam, "spam", "maildir, mbox, message file, directory or - holding spam (several may follow)")
	fs.Var(&ham, "ham", "maildir, mbox, message file, directory or - holding ham (several may follow)")
	recursive := fs.Bool("recursive", false, "also read Maildir++ subfolders and subdirectories")
	batch := fs.Int("batch", 256, "messages written to the store per transaction")
	if err := fs.Parse(expandMulti(args, "spam", "ham")); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if len(spam)+len(ham) == 0 || fs.NArg() > 0 {
		return fmt.Errorf("%w: give the messages with --spam PATH... and --ham PATH...", errUsage)
	}
	var sources []source
	for _, p := range spam {
		sources = append(sources, source{p, filter.Spam})
	}
	for _, p := range ham {
		sources = append(sources, source{p, filter.Ham})
	}
	f, st, err := mf.open(ctx, e)
	if err != nil {
		return err
	}
	defer st.Close()
	t, err := trainSources(ctx, e, f, mf.user, sources, *recursive, mf.workers, max(1, *batch))
	fmt.Fprintf(e.stdout, "train: %s\n", t)
	return err
}

func runForget(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("forget", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var mf modelFlags
	mf.register(fs, true)
	recursive := fs.Bool("recursive", false, "also read Maildir++ subfolders and subdirectories")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: name the messages to forget: PATH...", errUsage)
	}
	var sources []source
	for _, p := range fs.Args() {
		sources = append(sources, source{path: p})
	}
	f, st, err := mf.open(ctx, e)
	if err != nil {
		return err
	}
	defer st.Close()
	t, err := trainSources(ctx, e, f, mf.user, sources, *recursive, mf.workers, 256)
	fmt.Fprintf(e.stdout, "forget: %d messages: %d forgotten, %d were not trained", t.seen, t.learned, t.known)
	if t.skipped > 0 {
		fmt.Fprintf(e.stdout, ", %d skipped (see errors above)", t.skipped)
	}
	fmt.Fprintln(e.stdout)
	return err
}
