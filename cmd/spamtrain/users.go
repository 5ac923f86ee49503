package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/store"
)

// parseUsersArgs parses the flags of users.
func parseUsersArgs(e *env, args []string, mf *modelFlags) (asJSON bool, err error) {
	fs := e.flagSet("users")
	mf.registerStore(fs)
	j := fs.Bool("json", false, "print one JSON document")
	if err := fs.Parse(args); err != nil {
		return false, usageError(err)
	}
	if fs.NArg() > 0 {
		return false, fmt.Errorf("%w: users takes no arguments", errUsage)
	}
	return *j, nil
}

func runUsers(ctx context.Context, e *env, args []string) error {
	var mf modelFlags
	asJSON, err := parseUsersArgs(e, args, &mf)
	if err != nil {
		return err
	}
	mf.readsOnly = true
	st, err := mf.store(ctx, e)
	if err != nil {
		return err
	}
	defer st.Close()
	users, err := modelStats(ctx, st, mf.rule())
	if err != nil {
		return err
	}
	if sz, ok := st.Store.(store.Sizer); ok {
		for i := range users {
			if users[i].Bytes, err = sz.UserSize(ctx, users[i].User); err != nil {
				return err
			}
		}
	}
	return printUsers(e.stdout, users, asJSON)
}

// remoteUsers lists the models of the daemon's store.
func remoteUsers(ctx context.Context, e *env, c *control.Client, args []string) error {
	var mf modelFlags
	asJSON, err := parseUsersArgs(e, args, &mf)
	if err != nil {
		return err
	}
	st, err := c.StatsSizes(ctx)
	if err != nil {
		return err
	}
	users := make([]userStats, len(st.Users))
	for i, u := range st.Users {
		users[i] = userStats{User: u.User, Messages: u.Messages, Tokens: u.Tokens, Vocabulary: u.Vocabulary, Unread: u.Unread,
			LastTrained: u.LastTrained, Bytes: u.Bytes}
	}
	return printUsers(e.stdout, users, asJSON)
}

// printUsers prints one line per model: its messages and tokens, in all
// and per class, its vocabulary, the room it takes in the store and the
// last day it was trained; then the models no mail is classified with.
func printUsers(w io.Writer, users []userStats, asJSON bool) error {
	if asJSON {
		if users == nil {
			users = []userStats{}
		}
		return writeJSON(w, users)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "user\tmessages\ttokens\tvocabulary\tsize\tlast trained")
	for _, u := range users {
		size, last := "-", u.LastTrained
		if u.Bytes > 0 {
			size = mibs(u.Bytes)
		}
		if last == "" {
			last = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", userName(u.User), perClass(u.Messages), perClass(u.Tokens), u.Vocabulary, size, last)
	}
	tw.Flush()
	printUnread(w, users)
	return nil
}

// perClass formats counts by class as their sum and, for each class
// with any, its count: "6046 (ham 4150, spam 1896)".
func perClass(n map[string]uint64) string {
	var sum uint64
	var parts []string
	for _, c := range slices.Sorted(maps.Keys(n)) {
		if n[c] == 0 {
			continue
		}
		sum += n[c]
		parts = append(parts, fmt.Sprintf("%s %d", c, n[c]))
	}
	if len(parts) == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", sum, strings.Join(parts, ", "))
}

// resetArgs are the parsed arguments of reset.
type resetArgs struct {
	mf    modelFlags
	users []string
	all   bool
}

func parseResetArgs(e *env, args []string) (*resetArgs, error) {
	fs := e.flagSet("reset")
	a := &resetArgs{}
	a.mf.registerStore(fs)
	var users userList
	fs.Var(&users, "user", "the user whose model to reset (repeatable)")
	global := fs.Bool("global", false, "reset the global model")
	fs.BoolVar(&a.all, "all", false, "reset every model, the global one included: start the store over")
	if err := fs.Parse(args); err != nil {
		return nil, usageError(err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: name the models with --user NAME, --global or --all", errUsage)
	}
	a.users = users.names
	if *global {
		a.users = append(a.users, "")
	}
	if len(a.users) == 0 && !a.all {
		return nil, fmt.Errorf("%w: name the models to reset: --user NAME (repeatable), --global, or --all", errUsage)
	}
	if len(a.users) > 0 && a.all {
		return nil, fmt.Errorf("%w: --all resets every model: give it alone", errUsage)
	}
	return a, nil
}

// everyModel orders users for resetting them all: the users' models,
// then the global one, which theirs lean on.
func everyModel(users []string) []string {
	out := slices.DeleteFunc(slices.Clone(users), func(u string) bool { return u == "" })
	if len(out) < len(users) {
		out = append(out, "")
	}
	return out
}

// runReset resets models: each is deleted whole, as delete-user does,
// which is all a reset can mean here, since a user without a model of
// its own is classified with the global model and starts a new one with
// the next message trained for it.
func runReset(ctx context.Context, e *env, args []string) error {
	a, err := parseResetArgs(e, args)
	if err != nil {
		return err
	}
	st, err := a.mf.store(ctx, e)
	if err != nil {
		return err
	}
	defer st.Close()
	names := a.users
	if a.all {
		users, err := st.Users(ctx)
		if err != nil {
			return err
		}
		names = everyModel(users)
	}
	for _, u := range names {
		t, err := st.Totals(ctx, u)
		if err != nil {
			return fmt.Errorf("%s: %w", userName(u), err)
		}
		if err := st.DeleteUser(ctx, u); err != nil {
			return fmt.Errorf("%s: %w", userName(u), err)
		}
		printReset(e.stdout, u, sum(t.Messages), t.Vocabulary)
	}
	printResetAll(e.stdout, a.all, len(names))
	return nil
}

// remoteReset resets models of the daemon's store.
func remoteReset(ctx context.Context, e *env, c *control.Client, args []string) error {
	a, err := parseResetArgs(e, args)
	if err != nil {
		return err
	}
	names := a.users
	if a.all {
		st, err := c.Stats(ctx)
		if err != nil {
			return err
		}
		var users []string
		for _, u := range st.Users {
			users = append(users, u.User)
		}
		names = everyModel(users)
	}
	if len(names) > 0 {
		deleted, err := c.DeleteUsers(ctx, names)
		if err != nil {
			return err
		}
		for _, d := range deleted {
			printReset(e.stdout, d.User, d.Messages, d.Tokens)
		}
	}
	printResetAll(e.stdout, a.all, len(names))
	return nil
}

// sum adds counts up.
func sum(ns []uint64) uint64 {
	var s uint64
	for _, n := range ns {
		s += n
	}
	return s
}

// printReset says what resetting user's model did, and what follows.
func printReset(w io.Writer, user string, messages, tokens uint64) {
	switch {
	case messages == 0 && tokens == 0:
		fmt.Fprintf(w, "%s: no model; nothing to reset\n", userName(user))
	case user == "":
		fmt.Fprintf(w, "%s: reset: forgot %d messages and %d distinct tokens; until it learns again, mail that no user's own model has learned enough to judge is unsure\n", userName(user), messages, tokens)
	default:
		fmt.Fprintf(w, "%s: reset: forgot %d messages and %d distinct tokens; the global model classifies the user's mail until the user's model learns again\n", userName(user), messages, tokens)
	}
}

// printResetAll says that --all found nothing to reset.
func printResetAll(w io.Writer, all bool, n int) {
	if all && n == 0 {
		fmt.Fprintln(w, "reset: the store holds no model")
	}
}
