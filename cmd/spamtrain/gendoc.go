package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spamd/spamd/internal/gendoc"
	"github.com/spamd/spamd/internal/version"
)

// The hidden gendoc command writes spamtrain(1) and spamtrain's bash and
// zsh completions from the commands' own flag sets, which it gets by
// running each command with -h; make runs it, so that the page and the
// completions cannot drift from the flags:
//
//	spamtrain gendoc man|bash|zsh [DATE]
//
// It runs in the full build only: the lean one runs eval and simulate in
// spamtrain-eval and does not know their flags.

// synopses are the arguments of each command after its program and name,
// for its synopsis. Every command has one (TestGendoc).
var synopses = map[string]string{
	"train":       "[--user NAME] [--recursive] --spam PATH... --ham PATH... [--class NAME PATH...]... | --index FILE",
	"forget":      "[--user NAME] PATH...",
	"classify":    "[--user NAME] [--json | --fields LIST] [-v] [--files-from FILE|-] PATH...|-",
	"stats":       "[--json]",
	"check":       "[--db DIR]",
	"compact":     "[--db DIR]",
	"dump":        "[--user NAME]... [-o FILE[.gz]]",
	"restore":     "[--user NAME]... [--as NAME] FILE|-",
	"delete-user": "[--global] [NAME...]",
	"eval":        "--index FILE... [--mode split|cv|online] [--sweep KEY=V1,V2]... [--plots DIR]",
	"pipe":        "[--db DIR]",
	"filter":      "[--user NAME] [--exit-codes H,S,U,E] [--tag TAG] < MESSAGE",
	"report":      "--user NAME --spam|--ham FILE|-",
	"prefs":       "--user NAME|--domain DOMAIN [--clear] [KEY=VALUE...]",
	"history":     "[--limit N] [--user NAME] [--verdict V] [--json] [-v] [-f]",
	"simulate":    "--index FILE [--lambda L1,L2...] [--plots DIR]",
	"users":       "[--json]",
	"prune":       "[--user NAME]... [--days N [--count K]] [--seen-days N] [--max-tokens N]",
	"reset":       "--user NAME... | --global | --all",
	"settings":    "",
}

// flagArgs name the values of flags whose type alone would say only
// "string" or "value".
var flagArgs = map[string]string{
	"db": "DIR", "config": "FILE", "redis": "ADDR", "user": "NAME", "set": "KEY=VALUE", "spam": "PATH", "ham": "PATH",
	"index": "FILE", "workers": "N", "batch": "N", "top": "N", "o": "FILE", "as": "NAME", "exit-codes": "H,S,U,E",
	"tag": "TAG", "timeout": "DURATION", "mode": "MODE", "part": "PART", "folds": "N", "train": "POLICY",
	"bootstrap": "N", "store": "DIR", "sweep": "KEY=V1,V2,...", "by": "METRIC", "curve": "SIZES", "draws": "N",
	"records": "FILE", "plots": "DIR", "attack": "KIND:N", "attack-out": "DIR", "split": "PERCENT", "global": "FOLDERS",
	"lambda": "L1,L2,...", "lambda-prior": "L1,L2,...", "window": "N", "domain": "DOMAIN", "api": "ADDR", "limit": "N", "verdict": "VERDICT",
}

// flagDefaults are the defaults that depend on the machine the page is
// written on, said as they are found.
var flagDefaults = map[string]string{"workers": "the number of CPUs"}

// apiFlag is the flag every command that works through the daemon takes,
// cut from the command line before its flags are parsed (viaDaemon).
var apiFlag = gendoc.Flag{Name: "api", Arg: "ADDR", Usage: "the running spamd's control API, unix:/PATH or tcp://HOST:PORT (default $SPAMD_API, else the socket of spamd's configuration)"}

// docCommands describes every command by running it with -h and reading
// the flag set it makes.
func docCommands(ctx context.Context) ([]gendoc.Command, error) {
	var out []gendoc.Command
	for _, c := range commands {
		var sets []*flag.FlagSet
		e := &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, flagSets: func(fs *flag.FlagSet) { sets = append(sets, fs) }}
		if err := locals[c.name](ctx, e, []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
			return nil, fmt.Errorf("%s -h: %v, want the help", c.name, err)
		}
		if len(sets) == 0 {
			return nil, fmt.Errorf("%s makes no flag set through env.flagSet", c.name)
		}
		flags := gendoc.FlagsOf(sets[0])
		for i, f := range flags {
			if a, ok := flagArgs[f.Name]; ok && f.Arg != "" {
				flags[i].Arg = a
			}
			if d, ok := flagDefaults[f.Name]; ok {
				flags[i].Default = d
			}
		}
		if _, ok := remoteRuns[c.name]; ok {
			flags = append(flags, apiFlag)
		}
		syn, ok := synopses[c.name]
		if !ok {
			return nil, fmt.Errorf("%s has no synopsis in gendoc.go", c.name)
		}
		out = append(out, gendoc.Command{Name: c.name, Summary: c.usage, Synopsis: syn, Flags: flags})
	}
	return out, nil
}

func runGendoc(ctx context.Context, e *env, args []string) error {
	if !withEval {
		return errors.New("gendoc runs in the full build, which knows the flags of eval and simulate: go run ./cmd/spamtrain gendoc")
	}
	if len(args) < 1 || len(args) > 2 {
		return fmt.Errorf("%w: gendoc man|bash|zsh [DATE]", errUsage)
	}
	// Defaults read from the environment are not the page's to say.
	for _, v := range []string{"SPAMD_DB", "SPAMD_REDIS", "SPAMD_API", "SPAMD_CONFIG"} {
		os.Unsetenv(v)
	}
	cmds, err := docCommands(ctx)
	if err != nil {
		return err
	}
	global := []gendoc.Flag{{Name: "version", Usage: "print the build and exit"}, {Name: "help", Usage: "list the commands"}}
	switch args[0] {
	case "man":
		p := manual(cmds)
		if len(args) == 2 {
			p.Date = args[1]
		}
		return p.Man(e.stdout)
	case "bash":
		return gendoc.Bash(e.stdout, "spamtrain", global, cmds)
	case "zsh":
		return gendoc.Zsh(e.stdout, "spamtrain", global, cmds)
	}
	return fmt.Errorf("%w: gendoc man|bash|zsh, not %q", errUsage, args[0])
}

// manual is spamtrain(1).
func manual(cmds []gendoc.Command) gendoc.Page {
	return gendoc.Page{
		Name: "spamtrain", Section: 1, Title: "train, query, evaluate and maintain spamd's filter",
		Source:   "spamd " + version.Short(),
		Synopsis: []string{"spamtrain COMMAND [flags] [arguments]", "spamtrain --version"},
		Description: `spamtrain trains spamd's models on labelled mail, classifies messages, evaluates the filter on held-out mail, backs up, restores and maintains the store, filters a message on its way to a mailbox, and reports users' corrections to the running daemon.

PATH is a maildir (cur/ and new/; Maildir++ subfolders with --recursive), an mbox file, a single message file, a directory of message files, or - for standard input. A message that cannot be read or parsed is reported with its path and skipped, and the run ends with exit status 1 once the rest is done. An index (--index) has one "spam PATH" or "ham PATH" line per message, paths relative to the index file.

The store is --db DIR, else $SPAMD_DB, else the store of spamd's configuration; --redis ADDR names a Redis model. While spamd runs it owns a Badger store, and spamtrain goes through its control API instead (found by --api ADDR, $SPAMD_API, or the [api] socket of spamd's configuration), so that training and classifying work the same with the daemon up or down.

Every command takes -h. Flags take one dash or two. --set KEY=VALUE changes a filter setting for the command (spamtrain settings lists them); keep the settings that shape tokens fixed for a store.

eval and simulate draw plots with libraries the other commands do without: where spamtrain is built without them (make install does), it runs spamtrain-eval, installed beside it, for these two commands.`,
		Commands: cmds,
		Sections: []gendoc.Section{
			{Title: "Environment", Text: `SPAMD_DB: the Badger store, when --db is not given.

SPAMD_REDIS: a Redis model's server, when --redis is not given.

SPAMD_CONFIG: spamd's configuration (default /etc/spamd/config.toml), read for the daemon's socket, its store and its [filter] and [store.redis] settings.

SPAMD_API: the running spamd's control API, unix:/PATH or tcp://HOST:PORT; SPAMD_API_TOKEN: the bearer token over TCP.

SPAMTRAIN_CPUPROFILE: a file to write a CPU profile of the run to, for go tool pprof.`},
			{Title: "Exit status", Text: `0 on success, 1 when the command failed or some messages could not be read (the rest were done), 2 for a wrong command line, 130 when stopped by a signal.

filter says the verdict: 0 ham, 1 spam, 2 unsure, 3 when the message could not be judged (it is then passed on unchanged); --exit-codes changes them.`},
			{Title: "Examples", Text: `Train on a user's folders, then classify new mail with the weightiest features:

  spamtrain train --spam ~/Maildir/.Junk --ham ~/Maildir/cur
  spamtrain classify -v ~/Maildir/new

Measure the filter on a labelled corpus, train on 80% and test on the rest:

  spamtrain eval --index corpus/index --mode split

Filter in procmail:

  :0fw
  | spamtrain filter --exit-codes 0,0,0,0`},
			{Title: "See also", Text: "spamd(8), spamd.conf(5)"},
		},
	}
}
