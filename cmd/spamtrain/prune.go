package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/store"
)

// pruneArgs are the parsed arguments of prune.
type pruneArgs struct {
	mf    modelFlags
	users userList
	rule  store.PruneRule
}

// parsePruneArgs parses prune's flags into a rule for today.
func parsePruneArgs(e *env, args []string) (*pruneArgs, error) {
	fs := e.flagSet("prune")
	a := &pruneArgs{}
	a.mf.registerStore(fs)
	fs.Var(&a.users, "user", "user whose model to prune, repeatable; \"\" is the global model (default: every model)")
	count := fs.Uint64("count", 1, "with --days: prune tokens seen at most `K` times in all")
	days := fs.Int("days", 0, "prune tokens (seen at most --count times) that no message trained in the last `N` days had")
	seenDays := fs.Int("seen-days", 0, "delete the seen records of messages trained more than `N` days ago; they can no longer be relabeled or forgotten")
	maxTokens := fs.Uint64("max-tokens", 0, "keep at most `N` tokens per model, the least used and oldest going first")
	if err := fs.Parse(args); err != nil {
		return nil, usageError(err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: prune takes no arguments", errUsage)
	}
	if *days < 0 || *seenDays < 0 {
		return nil, fmt.Errorf("%w: --days and --seen-days count days from today: give 1 or more", errUsage)
	}
	if *days > 0 && *count == 0 {
		return nil, fmt.Errorf("%w: --count 0 prunes no token (none is seen 0 times): give 1 or more", errUsage)
	}
	a.rule = store.AgeRule(store.DayOf(time.Now()), *count, *days, *seenDays, *maxTokens)
	if a.rule.Zero() {
		return nil, fmt.Errorf("%w: prune needs --days, --seen-days or --max-tokens", errUsage)
	}
	return a, nil
}

func runPrune(ctx context.Context, e *env, args []string) error {
	a, err := parsePruneArgs(e, args)
	if err != nil {
		return err
	}
	st, err := a.mf.store(ctx, e)
	if err != nil {
		return err
	}
	defer st.Close()
	users, err := a.users.in(ctx, st)
	if err != nil {
		return err
	}
	out := control.PruneResult{Rule: a.rule.String()}
	for _, u := range users {
		res, err := st.Prune(ctx, u, a.rule)
		if err != nil {
			printPruned(e.stdout, out)
			return fmt.Errorf("prune %s: %w", userName(u), err)
		}
		out.Models = append(out.Models, control.Pruned{User: u, Tokens: res.Tokens, Seen: res.Seen, Vocabulary: res.Vocabulary})
	}
	printPruned(e.stdout, out)
	return nil
}

// remotePrune prunes models of the daemon's store.
func remotePrune(ctx context.Context, e *env, c *control.Client, args []string) error {
	a, err := parsePruneArgs(e, args)
	if err != nil {
		return err
	}
	var users []string
	if a.users.set {
		users = a.users.names
	}
	out, err := c.Prune(ctx, users, a.rule)
	if err != nil {
		return err
	}
	printPruned(e.stdout, out)
	return nil
}

// printPruned says what a prune deleted, a line per model.
func printPruned(w io.Writer, out control.PruneResult) {
	fmt.Fprintf(w, "prune: %s\n", out.Rule)
	for _, m := range out.Models {
		fmt.Fprintf(w, "%s: %d tokens and %d seen records deleted, %d tokens kept\n", userName(m.User), m.Tokens, m.Seen, m.Vocabulary)
	}
}
