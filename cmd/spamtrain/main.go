// Command spamtrain trains, queries, evaluates and maintains a spamd
// filter store.
//
// Usage:
//
//	spamtrain train    --db DIR [--user NAME] [--recursive] --spam PATH... --ham PATH... [--class NAME PATH...]
//	spamtrain forget   --db DIR [--user NAME] PATH...
//	spamtrain classify --db DIR [--user NAME] [--json] [-v] PATH...|-
//	spamtrain stats    --db DIR [--json]
//	spamtrain check    --db DIR
//	spamtrain compact  --db DIR
//	spamtrain dump     --db DIR [--user NAME]... [-o FILE] [--gzip]
//	spamtrain restore  --db DIR [--user NAME]... [--as NAME] FILE|-
//	spamtrain delete-user --db DIR [--global] [NAME...]
//	spamtrain users    --db DIR [--json]
//	spamtrain reset    --db DIR --user NAME... | --global | --all
//	spamtrain eval     (--index FILE | --spam PATH... --ham PATH...) [--mode split|cv|online] ...
//	spamtrain pipe     --db DIR
//	spamtrain filter   [--db DIR] [--user NAME] [--exit-codes H,S,U,E] [--tag TAG] < MESSAGE
//	spamtrain report   --user NAME --spam|--ham [--api ADDR] FILE|-
//	spamtrain history  [--api ADDR] [--limit N] [--user NAME] [--verdict V] [--json] [-v] [-f]
//	spamtrain prefs    --user NAME|--domain DOMAIN [--clear] [KEY=VALUE...]
//	spamtrain simulate --index FILE [--user NAME=FOLDER,...]... [--lambda L,...] [--plots DIR]
//	spamtrain settings
//
// PATH is a maildir, an mbox file, a single message file, a directory of
// message files, or - for standard input. Run "spamtrain CMD -h" for the
// flags of a command.
//
// --db DIR names a Badger store; --redis ADDR (or $SPAMD_REDIS), or a
// configuration whose [store] backend is redis, names a Redis model,
// which spamtrain uses directly, beside the running spamd nodes, with the
// configuration's [store.redis] and [filter] settings (docs/cluster.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/spamd/spamd/internal/version"
)

// command is one subcommand.
type command struct {
	name  string
	usage string
	run   func(ctx context.Context, env *env, args []string) error
}

// env is what every command gets from main: its streams and logger.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	log            *slog.Logger
	// tty says that stderr is a terminal, where progress is shown.
	tty bool
	// flagSets, when not nil, is told of every flag set a command makes
	// (gendoc reads them).
	flagSets func(*flag.FlagSet)
}

// flagSet returns a command's flag set, writing its usage to stderr.
func (e *env) flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	if e.flagSets != nil {
		e.flagSets(fs)
	}
	return fs
}

var commands = []command{
	{"train", "train messages as spam or ham", runTrain},
	{"forget", "untrain messages", runForget},
	{"classify", "classify messages", runClassify},
	{"stats", "show messages and tokens per class and user", runStats},
	{"check", "verify that the store's counts agree", runCheck},
	{"compact", "reclaim disk space of the store", runCompact},
	{"dump", "write models as portable text, for a backup or a move", runDump},
	{"restore", "load models from a dump into a store without them", runRestore},
	{"delete-user", "delete users' models whole", runDeleteUser},
	{"users", "list the models: messages and tokens per class, size, last trained", runUsers},
	{"prune", "delete tokens seen rarely and long ago, or beyond a budget, and old seen records", runPrune},
	{"reset", "start users' models (or all) over from nothing", runReset},
	{"eval", "measure filter quality on labelled mail", runEval},
	{"pipe", "train and classify by commands read from standard input", runPipe},
	{"filter", "classify the message on standard input and write it with spamd's headers", runFilter},
	{"report", "report a message as spam or ham for a user to the running spamd", runReport},
	{"history", "show the running spamd's latest verdicts", runHistory},
	{"prefs", "show or set a user's or a domain's preferences in the running spamd", runPrefs},
	{"simulate", "measure per-user models fed by reports on labelled mail", runSimulate},
	{"settings", "list the filter settings --set accepts", runSettings},
}

// errUsage marks an error in the command line, answered with exit status 2.
var errUsage = errors.New("usage")

// usageError is the error of a command line its flag set refused; -h
// stays flag.ErrHelp, which is no error.
func usageError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return fmt.Errorf("%w: %v", errUsage, err)
}

func main() {
	deferFirstCollection()
	e := &env{
		stdin:  os.Stdin,
		stdout: os.Stdout,
		stderr: os.Stderr,
		log:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		tty:    term.IsTerminal(int(os.Stderr.Fd())),
	}
	stopProfile, err := startProfile()
	if err != nil {
		fmt.Fprintln(e.stderr, "spamtrain:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// A command told to stop returns at its next check of ctx; one
		// blocked in a read that ctx cannot reach (a terminal, a pipe)
		// is ended here, since the store is safe against a kill anyway.
		// A slow run interrupted is what a profile is wanted of.
		<-ctx.Done()
		time.Sleep(interruptGrace)
		fmt.Fprintln(e.stderr, "spamtrain: interrupted")
		if err := stopProfile(); err != nil {
			fmt.Fprintln(e.stderr, "spamtrain:", err)
		}
		os.Exit(exitInterrupted)
	}()
	code := run(ctx, e, os.Args[1:])
	if ctx.Err() != nil && code != 0 {
		code = exitInterrupted
	}
	if err := stopProfile(); err != nil {
		fmt.Fprintln(e.stderr, "spamtrain:", err)
	}
	os.Exit(code)
}

// interruptGrace is how long a command has to stop cleanly after SIGINT
// or SIGTERM before the process exits anyway.
const interruptGrace = 800 * time.Millisecond

// exitInterrupted is the exit status of a command stopped by a signal, as
// a shell reports one stopped by SIGINT.
const exitInterrupted = 130

// run dispatches args to a command and returns the exit status.
func run(ctx context.Context, e *env, args []string) int {
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version" || args[0] == "version") {
		fmt.Fprintln(e.stdout, "spamtrain", version.String())
		return 0
	}
	if len(args) > 0 && args[0] == "gendoc" {
		// Hidden: make's, not a user's.
		if err := runGendoc(ctx, e, args[1:]); err != nil {
			fmt.Fprintf(e.stderr, "spamtrain gendoc: %v\n", err)
			return 1
		}
		return 0
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(e.stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, e, args[1:])
		if code, ok := filterExit(e, err); ok {
			return code
		}
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			// -h printed the command's flags: what was asked.
			return 0
		case errors.Is(err, errUsage):
			fmt.Fprintf(e.stderr, "spamtrain %s: %v\n", c.name, err)
			return 2
		default:
			fmt.Fprintf(e.stderr, "spamtrain %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(e.stderr, "spamtrain: unknown command %q\n", args[0])
	usage(e.stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: spamtrain COMMAND [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.usage)
	}
	fmt.Fprintln(w, "\nRun 'spamtrain COMMAND -h' for the flags of a command, 'spamtrain --version' for the build.")
}
