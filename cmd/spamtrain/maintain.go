package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/identity"
	"github.com/spamd/spamd/store"
)

// userStats is the JSON form of one user's model.
type userStats struct {
	User       string            `json:"user"`
	Messages   map[string]uint64 `json:"messages"`
	Tokens     map[string]uint64 `json:"tokens"`
	Vocabulary uint64            `json:"vocabulary"`
	// Unread says why the milter never classifies mail with the model,
	// "" when it may.
	Unread string `json:"unread,omitempty"`
	// LastTrained is the last day a message was trained, YYYY-MM-DD.
	LastTrained string `json:"last_trained,omitempty"`
	// Bytes is the room the model takes in the store, for users.
	Bytes int64 `json:"bytes,omitempty"`
}

type storeStats struct {
	Users    []userStats `json:"users"`
	LSMBytes int64       `json:"lsm_bytes"`
	LogBytes int64       `json:"vlog_bytes"`
	// Classified is what the running daemon classified, nil without one.
	Classified *control.Classified `json:"classified,omitempty"`
}

func runStats(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("stats")
	var mf modelFlags
	mf.register(fs, false)
	asJSON := fs.Bool("json", false, "print one JSON document")
	if err := fs.Parse(args); err != nil {
		return usageError(err)
	}
	mf.readsOnly = true
	_, st, err := mf.open(ctx, e)
	if err != nil {
		return err
	}
	defer st.Close()
	var out storeStats
	if out.Users, err = modelStats(ctx, st, mf.rule()); err != nil {
		return err
	}
	out.LSMBytes, out.LogBytes = st.Size()
	return printStats(e, out, *asJSON, "")
}

// modelStats returns the totals of every model of st, and whether the
// milter reads it under rule.
func modelStats(ctx context.Context, st store.Store, rule identity.Rule) ([]userStats, error) {
	users, err := st.Users(ctx)
	if err != nil {
		return nil, err
	}
	var out []userStats
	for _, u := range users {
		t, err := st.Totals(ctx, u)
		if err != nil {
			return nil, err
		}
		us := userStats{User: u, Messages: map[string]uint64{}, Tokens: map[string]uint64{}, Vocabulary: t.Vocabulary, Unread: rule.Unread(u),
			LastTrained: control.LastTrained(t.LastDay)}
		for i, c := range t.Classes {
			us.Messages[c] = t.Messages[i]
			us.Tokens[c] = t.Tokens[i]
		}
		out = append(out, us)
	}
	return out, nil
}

// rule returns the naming rule of spamd's configuration, by which the
// milter picks the models it classifies with; spamd's default when
// there is no configuration to read.
func (m *modelFlags) rule() identity.Rule {
	cfg, _, err := loadConfig(m.cfgPath)
	if err != nil {
		cfg = config.Default(os.Getenv)
	}
	return identity.Rule(cfg.Milter.Users)
}

// printUnread lists the models the milter never classifies with, and
// why.
func printUnread(w io.Writer, users []userStats) {
	first := true
	for _, u := range users {
		if u.Unread == "" {
			continue
		}
		if first {
			fmt.Fprintln(w, "models no mail is classified with:")
			first = false
		}
		fmt.Fprintf(w, "  %s: %s\n", userName(u.User), u.Unread)
	}
}

// printStats prints the models of a store, as JSON or as a table followed
// by the store's size and, in where, what serves it.
func printStats(e *env, out storeStats, asJSON bool, where string) error {
	if asJSON {
		return writeJSON(e.stdout, out)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "user\tclass\tmessages\ttokens\tvocabulary")
	for _, u := range out.Users {
		name := u.User
		if name == "" {
			name = "(global)"
		}
		for _, c := range slices.Sorted(maps.Keys(u.Messages)) {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\n", name, c, u.Messages[c], u.Tokens[c], u.Vocabulary)
		}
	}
	tw.Flush()
	printUnread(e.stdout, out.Users)
	fmt.Fprintf(e.stdout, "store: %.1f MiB on disk (LSM %.1f MiB, logs %.1f MiB)%s\n",
		float64(out.LSMBytes+out.LogBytes)/(1<<20), float64(out.LSMBytes)/(1<<20), float64(out.LogBytes)/(1<<20), where)
	if c := out.Classified; c != nil && c.Messages > 0 {
		fmt.Fprintf(e.stdout, "classified since start: %d messages, of which %.1f ham by their probabilities; expected false positive rate at the decision: %.3f%%\n",
			c.Messages, c.ExpectedHam, 100*c.FPRate())
	}
	return nil
}

// parseStoreCommand parses the flags of a command that takes nothing but
// the store: check and compact.
func parseStoreCommand(e *env, name string, args []string) (*modelFlags, error) {
	fs := e.flagSet(name)
	var mf modelFlags
	mf.register(fs, false)
	if err := fs.Parse(args); err != nil {
		return nil, usageError(err)
	}
	return &mf, nil
}

func runCheck(ctx context.Context, e *env, args []string) error {
	mf, err := parseStoreCommand(e, "check", args)
	if err != nil {
		return err
	}
	mf.readsOnly = true
	_, st, err := mf.open(ctx, e)
	if err != nil {
		return err
	}
	defer st.Close()
	users, err := st.Users(ctx)
	if err != nil {
		return err
	}
	checks := make([]control.Checked, len(users))
	for i, u := range users {
		checks[i].User = u
		if err := st.Check(ctx, u); err != nil {
			checks[i].Error = err.Error()
		}
	}
	return printChecks(e, checks)
}

// remoteCheck checks the models of the daemon's store.
func remoteCheck(ctx context.Context, e *env, c *control.Client, args []string) error {
	if _, err := parseStoreCommand(e, "check", args); err != nil {
		return err
	}
	checks, err := c.Check(ctx)
	if err != nil {
		return err
	}
	return printChecks(e, checks)
}

// printChecks prints a line per model checked, and fails when any is
// inconsistent.
func printChecks(e *env, checks []control.Checked) error {
	bad := 0
	for _, c := range checks {
		if c.Error != "" {
			bad++
			fmt.Fprintf(e.stdout, "%s: %s\n", userName(c.User), c.Error)
			continue
		}
		fmt.Fprintf(e.stdout, "%s: ok\n", userName(c.User))
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d models inconsistent (see above)", bad, len(checks))
	}
	return nil
}

func runCompact(ctx context.Context, e *env, args []string) error {
	mf, err := parseStoreCommand(e, "compact", args)
	if err != nil {
		return err
	}
	_, st, err := mf.open(ctx, e)
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := st.Compact(ctx)
	if err != nil {
		return err
	}
	printCompacted(e, c)
	return nil
}

// remoteCompact compacts the daemon's store.
func remoteCompact(ctx context.Context, e *env, c *control.Client, args []string) error {
	if _, err := parseStoreCommand(e, "compact", args); err != nil {
		return err
	}
	res, err := c.Compact(ctx)
	if err != nil {
		return err
	}
	printCompacted(e, res)
	return nil
}

// printCompacted says what compacting did to the store.
func printCompacted(e *env, c store.Compaction) {
	fmt.Fprintf(e.stdout, "compact: %s → %s on disk\n", mibs(c.Before()), mibs(c.After()))
	fmt.Fprintf(e.stdout, "  tables: %s in %s → %s in %s\n",
		mibs(c.LSMBefore), tree(c.TablesBefore, c.LevelsBefore), mibs(c.LSMAfter), tree(c.TablesAfter, c.LevelsAfter))
	fmt.Fprintf(e.stdout, "  logs:   %s → %s", mibs(c.LogsBefore), mibs(c.LogsAfter))
	switch {
	case c.Flushed:
		fmt.Fprint(e.stdout, "; memtables written into tables")
	case c.FlushSkipped != "":
		fmt.Fprintf(e.stdout, "; memtables left in place: %s", c.FlushSkipped)
	}
	fmt.Fprintf(e.stdout, "; %d value-log files rewritten\n", c.Rewritten)
}

// tree describes an LSM tree by its tables and levels.
func tree(tables, levels int) string {
	s := fmt.Sprintf("%d tables on %d levels", tables, levels)
	if levels == 1 {
		s = strings.TrimSuffix(s, "s")
	}
	if tables == 1 {
		s = strings.Replace(s, "tables", "table", 1)
	}
	return s
}

// mibs formats a size in bytes in MiB.
func mibs(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func runSettings(_ context.Context, e *env, args []string) error {
	fs := e.flagSet("settings")
	if err := fs.Parse(args); err != nil {
		return usageError(err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: settings takes no arguments", errUsage)
	}
	cfg := filter.DefaultConfig()
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "key\tdefault\tmeaning")
	for _, k := range filter.Keys() {
		v, _ := cfg.Get(k)
		fmt.Fprintf(tw, "%s\t%s\t%s\n", k, v, filter.Doc(k))
	}
	return tw.Flush()
}
