package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/schollz/progressbar/v3"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/internal/parallel"
	"github.com/spamd/spamd/mailbox"
	"github.com/spamd/spamd/store"
)

// source is a path to read messages from, with the class they are to be
// trained as ("" when unlabelled).
type source struct {
	path  string
	class string
	// indexed marks a source listed in an index, one message by the
	// index's definition.
	indexed bool
}

// item is one message on its way through a pipeline.
type item struct {
	msg mailbox.Message
	src source
	p   filter.Prepared
	err error
}

// walkSources sends every message of sources on the returned channel, in
// order, reporting unreadable sources and files to onErr. The channel is
// closed when the sources are exhausted or ctx is done; the returned
// function then gives the error that stopped the walk, if any.
func walkSources(ctx context.Context, e *env, sources []source, recursive bool, onErr func(path string, err error)) (<-chan item, func() error) {
	ch := make(chan item, 64)
	var walkErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		o := mailbox.Options{Recursive: recursive, Stdin: e.stdin, OnError: onErr}
		for _, s := range sources {
			n := 0
			err := mailbox.Walk(ctx, s.path, o, func(m mailbox.Message) error {
				select {
				case ch <- item{msg: m, src: s}:
					n++
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
			switch {
			case err != nil && ctx.Err() != nil:
				walkErr = err
				return
			case err != nil:
				// A source that cannot be read (unreadable, a loop of
				// links, refused as no regular file) is reported, and the
				// others are still walked: the run ends failed once they
				// are done.
				if inner := errors.Unwrap(err); inner != nil {
					err = inner
				}
				onErr(s.path, err)
				continue
			}
			if n == 0 {
				// Most likely a directory of folders without
				// --recursive, or the wrong path: no success.
				onErr(s.path, errNoMessages(recursive))
			}
		}
	}()
	return ch, func() error { <-done; return walkErr }
}

// errNoMessages is the error of a source that holds no message.
func errNoMessages(recursive bool) error {
	if recursive {
		return errors.New("no messages found")
	}
	return errors.New("no messages found (subfolders and subdirectories are read with --recursive)")
}

// prepareAll prepares the messages of in on workers goroutines and hands
// them to out in order.
func prepareAll(ctx context.Context, f *filter.Filter, workers int, po filter.PrepareOptions, in <-chan item, out func(item) error) error {
	return prepareAndThen(ctx, f, workers, po, in, func(it item) item { return it }, out)
}

// prepareAndThen is prepareAll with then called on each prepared item on
// the worker that prepared it, and out with what then returns.
func prepareAndThen[T any](ctx context.Context, f *filter.Filter, workers int, po filter.PrepareOptions, in <-chan item, then func(item) T, out func(T) error) error {
	return parallel.MapWindow(ctx, workers, reorderWindow, in, func(it item) T {
		if it.msg.Truncated {
			// The tokenizer reads only the start of a message anyway.
			it.p.Truncated = true
		}
		p, err := f.PrepareWith(it.msg.Raw, po)
		it.p, it.err = p, err
		it.msg.Raw = nil // free the bytes early: only the bag is needed now
		return then(it)
	}, out)
}

// reorderWindow is how many results a worker may run ahead of the oldest
// one not yet delivered (parallel.MapWindow): a verdict, or a message's
// features, once its bytes are dropped, a few kilobytes. A message takes
// from a tenth of a millisecond to tens: with 4, classifying
// SpamAssassin's last 1,209 messages on two cores left them idle 10% of
// the time, waiting behind a long one, and with 32 the run took 7% less.
const reorderWindow = 32

// tally counts what a training run did.
type tally struct {
	seen, learned, relabeled, known int
	mu                              sync.Mutex // the walk reports unreadable files from its own goroutine
	skipped                         int
}

// reporter returns the function that reports an unreadable or
// unparseable message on stderr and counts it as skipped. The walk calls
// it from its own goroutine.
func (t *tally) reporter(e *env) func(path string, err error) {
	return func(path string, err error) {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.skipped++
		fmt.Fprintf(e.stderr, "%s: %v\n", path, err)
	}
}

// count records what training one message as class did.
func (t *tally) count(class string, changed bool, prev string) {
	switch {
	case !changed:
		t.known++
	case prev != "" && class != "":
		t.relabeled++
	default:
		t.learned++
	}
}

// err is the error a run that ended well otherwise ends with: one when
// some messages could not be read or parsed.
func (t *tally) err() error {
	if t.skipped == 0 {
		return nil
	}
	return fmt.Errorf("%d messages or sources could not be read or parsed (see errors above); the rest were done", t.skipped)
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
	ctx, r, in := startTraining(ctx, e, sources, recursive)
	// One goroutine trains the batches in order while the workers prepare
	// the next: training a batch is serial work, and the workers, which
	// run at most a few messages ahead of what is taken from them, would
	// otherwise wait for it, and it for them. Two batches are held at
	// most, the one in training and the one filling.
	work := make(chan []filter.Item)
	trained := make(chan error, 1)
	go func() {
		defer close(trained)
		for batch := range work {
			res, err := f.Train(ctx, user, batch)
			if err != nil {
				trained <- err
				return
			}
			for i, res := range res {
				r.t.count(batch[i].Class, res.Changed, res.Prev)
			}
		}
	}()
	var failed error
	send := func(batch []filter.Item) error {
		select {
		case work <- batch:
			return nil
		case failed = <-trained:
			return failed
		}
	}
	batch := make([]filter.Item, 0, batchSize)
	err := prepareAll(ctx, f, workers, filter.PrepareOptions{}, in, func(it item) error {
		r.tick()
		if it.err != nil {
			r.report(it.msg.Path, it.err)
			return nil
		}
		batch = append(batch, filter.Item{Prepared: it.p, Class: it.src.class})
		if len(batch) < batchSize {
			return nil
		}
		full := batch
		batch = make([]filter.Item, 0, batchSize)
		return send(full)
	})
	if err == nil && len(batch) > 0 {
		err = send(batch)
	}
	close(work)
	if terr, ok := <-trained; ok {
		failed = terr
	}
	if err == nil {
		err = failed
	}
	return r.t, r.finish(err)
}

// training is one run of train or forget, local or through spamd: the
// walk of its sources, its progress bar and its tally.
type training struct {
	t       *tally
	report  func(path string, err error)
	bar     *progressbar.ProgressBar
	cancel  context.CancelFunc
	walkErr func() error
}

// startTraining starts walking sources and returns the context the run
// goes on in, which finish cancels to stop the walk early, and the
// messages walked.
func startTraining(ctx context.Context, e *env, sources []source, recursive bool) (context.Context, *training, <-chan item) {
	r := &training{t: &tally{}}
	r.report = r.t.reporter(e)
	ctx, r.cancel = context.WithCancel(ctx)
	var in <-chan item
	in, r.walkErr = walkSources(ctx, e, sources, recursive, r.report)
	r.bar = newProgress(e, -1, "training")
	countSources(ctx, e, sources, recursive, r.bar.ChangeMax64)
	return ctx, r, in
}

// tick counts one message walked.
func (r *training) tick() {
	r.t.seen++
	r.bar.Add(1)
}

// finish stops the walk and returns err, or else the walk's error.
func (r *training) finish(err error) error {
	r.cancel()
	r.bar.Finish()
	if werr := r.walkErr(); err == nil && werr != nil && !errors.Is(werr, context.Canceled) {
		err = werr
	}
	return err
}

// trainArgs are the parsed arguments of train and forget.
type trainArgs struct {
	mf        modelFlags
	sources   []source
	recursive bool
	batch     int
}

// parseTrainArgs parses the arguments of train (forget false: --spam and
// --ham sources) or forget (PATH... to untrain).
func parseTrainArgs(e *env, args []string, forget bool) (*trainArgs, error) {
	name := "train"
	if forget {
		name = "forget"
	}
	fs := e.flagSet(name)
	a := &trainArgs{}
	a.mf.register(fs, true)
	var spam, ham listFlag
	var index string
	var classed []source
	if !forget {
		fs.Var(&spam, "spam", "maildir, mbox, message file, directory or - holding spam (several may follow)")
		fs.Var(&ham, "ham", "maildir, mbox, message file, directory or - holding ham (several may follow)")
		fs.String("class", "", "`NAME PATH...`: the paths that follow hold messages of class NAME, one of the filter's classes (several --class may be given)")
		fs.StringVar(&index, "index", "", "TREC index file: lines 'CLASS PATH' (spam, ham or another class), paths relative to it")
		var err error
		if args, classed, err = cutClassArgs(args); err != nil {
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		args = expandMulti(args, "spam", "ham")
	}
	fs.BoolVar(&a.recursive, "recursive", false, "also read Maildir++ subfolders and subdirectories")
	fs.IntVar(&a.batch, "batch", 256, "messages written per transaction (or sent to spamd per request)")
	if err := fs.Parse(args); err != nil {
		return nil, usageError(err)
	}
	a.batch = max(1, a.batch)
	if forget {
		if fs.NArg() == 0 {
			return nil, fmt.Errorf("%w: name the messages to forget: PATH...", errUsage)
		}
		for _, p := range fs.Args() {
			a.sources = append(a.sources, source{path: p})
		}
		return a, nil
	}
	if len(spam)+len(ham)+len(classed) == 0 && index == "" || fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: give the messages with --spam PATH... and --ham PATH... (or --class NAME PATH...), or --index FILE", errUsage)
	}
	if index != "" {
		entries, err := mailbox.ReadIndex(index)
		if err != nil {
			return nil, err
		}
		for _, en := range entries {
			a.sources = append(a.sources, source{path: en.Path, class: en.Label, indexed: true})
		}
	}
	for _, p := range spam {
		a.sources = append(a.sources, source{path: p, class: filter.Spam})
	}
	for _, p := range ham {
		a.sources = append(a.sources, source{path: p, class: filter.Ham})
	}
	a.sources = append(a.sources, classed...)
	return a, nil
}

// cutClassArgs removes every --class NAME PATH... (or --class=NAME
// PATH...) from args, up to a "--", and returns the sources they name:
// the paths after NAME up to the next flag ("-" is a path).
func cutClassArgs(args []string) (rest []string, sources []source, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		var name string
		switch {
		case a == "--":
			return append(rest, args[i:]...), sources, nil
		case a == "--class" || a == "-class":
			if i+1 == len(args) {
				return nil, nil, errors.New("--class needs a class name and paths")
			}
			name = args[i+1]
			i++
		case strings.HasPrefix(a, "--class=") || strings.HasPrefix(a, "-class="):
			_, name, _ = strings.Cut(a, "=")
		default:
			rest = append(rest, a)
			continue
		}
		if err := store.ValidClass(name); err != nil {
			return nil, nil, fmt.Errorf("--class: %w", err)
		}
		n := 0
		for i+1 < len(args) && (args[i+1] == "-" || !strings.HasPrefix(args[i+1], "-")) {
			sources = append(sources, source{path: args[i+1], class: name})
			i++
			n++
		}
		if n == 0 {
			return nil, nil, fmt.Errorf("--class %s: name the messages of the class: --class %s PATH...", name, name)
		}
	}
	return rest, sources, nil
}

// checkClasses refuses, before anything is trained, sources of a class
// that is not one of classes: the whole run would fail message by
// message. The error says how to add it: in spamd's configuration, or,
// for a local run, with --set.
func checkClasses(sources []source, classes []string, local bool) error {
	var unknown []string
	for _, c := range classesOf(sources) {
		if !slices.Contains(classes, c) {
			unknown = append(unknown, c)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	all := append(slices.Clone(classes), unknown...)
	quoted := make([]string, len(unknown))
	for i, c := range unknown {
		quoted[i] = strconv.Quote(c)
	}
	err := fmt.Errorf("%w: class %s is not one of the filter's classes %s: add it to the [filter] table of spamd's configuration (classes = [\"%s\"])",
		errUsage, strings.Join(quoted, ", "), strings.Join(classes, "+"), strings.Join(all, "\", \""))
	if local {
		err = fmt.Errorf("%w, or give --set classes=%s", err, strings.Join(all, "+"))
	}
	return err
}

// classesOf lists the classes of sources, in order of first use.
func classesOf(sources []source) []string {
	var out []string
	for _, s := range sources {
		if s.class != "" && !slices.Contains(out, s.class) {
			out = append(out, s.class)
		}
	}
	return out
}

// printForget prints the summary of a forget run.
func printForget(e *env, t *tally) {
	fmt.Fprintf(e.stdout, "forget: %d messages: %d forgotten, %d were not trained", t.seen, t.learned, t.known)
	if t.skipped > 0 {
		fmt.Fprintf(e.stdout, ", %d skipped (see errors above)", t.skipped)
	}
	fmt.Fprintln(e.stdout)
}

func runTrain(ctx context.Context, e *env, args []string) error {
	return runTrainOrForget(ctx, e, args, false)
}

func runForget(ctx context.Context, e *env, args []string) error {
	return runTrainOrForget(ctx, e, args, true)
}

func runTrainOrForget(ctx context.Context, e *env, args []string, forget bool) error {
	a, err := parseTrainArgs(e, args, forget)
	if err != nil {
		return err
	}
	a.mf.loadsIfNew = !forget
	growForBulk(a.sources)
	f, st, err := a.mf.open(ctx, e)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := checkClasses(a.sources, f.Config().Classes, true); err != nil {
		return err
	}
	var t *tally
	bulk := false
	if !forget {
		if bulk, err = empty(ctx, st); err != nil {
			return err
		}
	}
	if bulk {
		t, err = bulkTrain(ctx, e, f, st, a.mf.user, a)
	} else {
		t, err = trainSources(ctx, e, f, a.mf.user, a.sources, a.recursive, a.mf.workers, a.batch)
	}
	if forget {
		printForget(e, t)
	} else {
		fmt.Fprintf(e.stdout, "train: %s\n", t)
	}
	if err != nil {
		return err
	}
	return t.err()
}
