package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spamd/spamd/filter"
)

// runPipe serves a line protocol on standard input and output, one
// request per line, so that scripts and benchmark harnesses can drive the
// filter without starting a process per message:
//
//	classify PATH        → ok SCORE VERDICT   (SCORE: spam log-odds, unrounded)
//	train CLASS PATH     → ok learned|relabeled|known
//	forget PATH          → ok forgotten|unknown
//	save                 → ok                 (every write is durable already)
//	quit                 → ok, and exit
//
// A request that fails answers "err MESSAGE" and the session goes on.
func runPipe(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("pipe")
	var mf modelFlags
	mf.register(fs, true)
	if err := fs.Parse(args); err != nil {
		return usageError(err)
	}
	f, st, err := mf.open(ctx, e)
	if err != nil {
		return err
	}
	defer st.Close()
	in := bufio.NewScanner(e.stdin)
	in.Buffer(make([]byte, 64<<10), 1<<20)
	out := bufio.NewWriter(e.stdout)
	defer out.Flush()
	for in.Scan() {
		if err := ctx.Err(); err != nil {
			return err
		}
		reply, quit := pipeRequest(ctx, f, mf.user, in.Text())
		fmt.Fprintln(out, reply)
		if err := out.Flush(); err != nil {
			return err
		}
		if quit {
			return nil
		}
	}
	return in.Err()
}

// pipeRequest answers one request line.
func pipeRequest(ctx context.Context, f *filter.Filter, user, line string) (reply string, quit bool) {
	cmd, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
	fail := func(err error) (string, bool) {
		return "err " + strings.ReplaceAll(err.Error(), "\n", " "), false
	}
	switch cmd {
	case "classify":
		raw, err := os.ReadFile(rest)
		if err != nil {
			return fail(err)
		}
		v, err := f.Classify(ctx, user, raw, filter.ClassifyOptions{})
		if err != nil {
			return fail(err)
		}
		return "ok " + strconv.FormatFloat(v.Score, 'g', 17, 64) + " " + v.Label(), false
	case "train", "forget":
		class, path := "", rest
		if cmd == "train" {
			class, path, _ = strings.Cut(rest, " ")
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return fail(err)
		}
		r, err := f.Learn(ctx, user, raw, class)
		if err != nil {
			return fail(err)
		}
		switch {
		case !r.Changed && class == "":
			return "ok unknown", false
		case !r.Changed:
			return "ok known", false
		case class == "":
			return "ok forgotten", false
		case r.Prev != "":
			return "ok relabeled", false
		}
		return "ok learned", false
	case "save":
		return "ok", false
	case "quit":
		return "ok", true
	}
	return fmt.Sprintf("err unknown request %q", cmd), false
}
