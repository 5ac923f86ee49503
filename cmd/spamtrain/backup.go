package main

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/dump"
)

// userList is a repeatable --user flag; "" names the global model.
type userList struct {
	names []string
	set   bool
}

func (u *userList) String() string { return strings.Join(u.names, ",") }
func (u *userList) Set(v string) error {
	if err := store.ValidUser(v); err != nil {
		return err
	}
	u.names, u.set = append(u.names, v), true
	return nil
}

// in returns the users the list names, or every user of st with a model
// when it names none.
func (u *userList) in(ctx context.Context, st store.Store) ([]string, error) {
	if u.set {
		return u.names, nil
	}
	return st.Users(ctx)
}

// wants reports whether the list names user, or is empty (every user).
func (u *userList) wants(user string) bool { return !u.set || slices.Contains(u.names, user) }

// userName is how output names a user.
func userName(u string) string {
	if u == "" {
		return "(global)"
	}
	return u
}

// dumpArgs are the parsed arguments of dump.
type dumpArgs struct {
	mf    modelFlags
	users userList
	out   string
	gz    bool
}

func parseDumpArgs(e *env, args []string) (*dumpArgs, error) {
	fs := e.flagSet("dump")
	a := &dumpArgs{}
	a.mf.registerStore(fs)
	fs.Var(&a.users, "user", "user whose model to dump, repeatable; \"\" is the global model (default: every model)")
	fs.StringVar(&a.out, "o", "-", "file to write, - for standard output; a name ending in .gz is compressed")
	fs.BoolVar(&a.gz, "gzip", false, "compress with gzip")
	if err := fs.Parse(args); err != nil {
		return nil, usageError(err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: dump takes no arguments (give --user NAME)", errUsage)
	}
	return a, nil
}

func runDump(ctx context.Context, e *env, args []string) error {
	a, err := parseDumpArgs(e, args)
	if err != nil {
		return err
	}
	a.mf.readsOnly = true
	st, err := a.mf.store(ctx, e)
	if err != nil {
		return err
	}
	defer st.Close()
	names, err := a.users.in(ctx, st)
	if err != nil {
		return err
	}
	return writeDump(a.out, a.gz, e.stdout, func(w *dump.Writer) error {
		for _, u := range names {
			if err := dump.Model(ctx, w, st, u); err != nil {
				return err
			}
		}
		return nil
	})
}

// remoteDump dumps the models of the daemon's store. What the daemon
// sends is read as a dump and written anew, so a dump the daemon could
// not finish is an error here, not a file that looks whole.
func remoteDump(ctx context.Context, e *env, c *control.Client, args []string) error {
	a, err := parseDumpArgs(e, args)
	if err != nil {
		return err
	}
	var users []string
	if a.users.set {
		users = a.users.names
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(c.Dump(ctx, users, pw)) }()
	defer pr.Close()
	return writeDump(a.out, a.gz, e.stdout, func(w *dump.Writer) error {
		r, err := dump.NewReader(pr)
		if err != nil {
			return err
		}
		for {
			user, classes, err := r.Next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			head, err := r.Record()
			if err != nil {
				return err
			}
			if err := w.Begin(user, classes, head.Forgotten); err != nil {
				return err
			}
			for {
				rec, err := r.Record()
				if err == io.EOF {
					break
				}
				if err != nil {
					return err
				}
				if err := w.Write(rec); err != nil {
					return err
				}
			}
			if err := w.End(); err != nil {
				return err
			}
		}
	})
}

// writeDump writes a dump with fill to path ("-" for stdout), gzipped if
// asked or if path ends in .gz. A file is written beside its final name
// and renamed into place once complete, so that a dump that failed never
// stands where a good one is expected.
func writeDump(path string, gz bool, stdout io.Writer, fill func(*dump.Writer) error) (err error) {
	gz = gz || strings.HasSuffix(path, ".gz")
	var f *os.File
	out := stdout
	if path != "-" {
		f, err = os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
		if err != nil {
			return fmt.Errorf("dump: %w", err)
		}
		defer func() {
			if err != nil {
				f.Close()
				os.Remove(f.Name())
			}
		}()
		out = f
	}
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(out)
		out = zw
	}
	w := dump.NewWriter(out)
	if err := fill(w); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return fmt.Errorf("dump: %w", err)
		}
	}
	if f == nil {
		return nil
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	return nil
}

// restoreArgs are the parsed arguments of restore.
type restoreArgs struct {
	mf    modelFlags
	users userList
	as    string
	path  string
}

func parseRestoreArgs(e *env, args []string) (*restoreArgs, error) {
	fs := e.flagSet("restore")
	a := &restoreArgs{}
	a.mf.registerStore(fs)
	fs.Var(&a.users, "user", "restore only this user's model, repeatable; \"\" is the global model (default: every model in the dump)")
	fs.StringVar(&a.as, "as", "", "restore the one model chosen by --user under this user name instead")
	if err := fs.Parse(args); err != nil {
		return nil, usageError(err)
	}
	if fs.NArg() != 1 {
		return nil, fmt.Errorf("%w: restore reads one dump: FILE, or - for standard input", errUsage)
	}
	a.path = fs.Arg(0)
	if a.as != "" {
		if len(a.users.names) != 1 {
			return nil, fmt.Errorf("%w: --as renames one model: name it with one --user", errUsage)
		}
		if err := store.ValidUser(a.as); err != nil {
			return nil, fmt.Errorf("%w: --as: %v", errUsage, err)
		}
	}
	return a, nil
}

func runRestore(ctx context.Context, e *env, args []string) error {
	a, err := parseRestoreArgs(e, args)
	if err != nil {
		return err
	}
	in, closeIn, err := openInput(a.path, e.stdin)
	if err != nil {
		return err
	}
	defer closeIn()
	st, err := a.mf.store(ctx, e)
	if err != nil {
		return err
	}
	defer st.Close()
	// A restore writes its rows through Badger's memtables, some 35
	// bytes a row on disk. Into a new store it ends with a compaction,
	// which folds them into the sealed file a first training writes, 12
	// or 13 bytes a row: trec07-late's model of 2.1 million rows, restored
	// into a new store in 8.4 s, took 69 MB, and 27 MB after a compaction
	// of 0.8 s. Into a store with other models, compacting would rewrite
	// them all, and is left to spamtrain compact.
	fresh := false
	if st.badger != nil {
		if fresh, err = empty(ctx, st); err != nil {
			return err
		}
	}
	if err := restoreDump(ctx, e.stdout, st, in, &a.users, a.as); err != nil {
		return err
	}
	if !fresh {
		return nil
	}
	c, err := st.Compact(ctx)
	if err != nil {
		return fmt.Errorf("the models are restored, but compacting the new store failed: %w; run spamtrain compact", err)
	}
	printCompacted(e, c)
	return nil
}

// remoteRestore restores a dump into the daemon's store.
func remoteRestore(ctx context.Context, e *env, c *control.Client, args []string) error {
	a, err := parseRestoreArgs(e, args)
	if err != nil {
		return err
	}
	in, closeIn, err := openInput(a.path, e.stdin)
	if err != nil {
		return err
	}
	defer closeIn()
	var users []string
	if a.users.set {
		users = a.users.names
	}
	res, err := c.Restore(ctx, in, users, a.as)
	for _, r := range res.Restored {
		fmt.Fprintf(e.stdout, "%s: restored %d tokens and %d messages of classes %s\n", userName(r.User), r.Tokens, r.Seen, strings.Join(r.Classes, ", "))
	}
	if err != nil {
		return fmt.Errorf("%w; no model is restored in part", err)
	}
	return nil
}

// restoreDump restores the models of the dump in that users wants into
// st, under the name as when it is not "", printing one line per model.
// Each model is restored whole or not at all; the first failure ends the
// restore, and the models restored before it stay.
func restoreDump(ctx context.Context, out io.Writer, st store.Store, in io.Reader, users *userList, as string) error {
	r, err := dump.NewReader(in)
	if err != nil {
		return err
	}
	restored := 0
	for {
		user, classes, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if !users.wants(user) {
			if err := r.Skip(); err != nil {
				return err
			}
			continue
		}
		target := user
		if as != "" {
			target = as
		}
		var rows, seen int
		next := func() (store.Record, error) {
			if err := ctx.Err(); err != nil {
				return store.Record{}, err
			}
			rec, err := r.Record()
			switch {
			case err != nil:
			case rec.Counts != nil:
				rows++
			case rec.Class != "":
				seen++
			}
			return rec, err
		}
		if err := st.Restore(ctx, target, next); err != nil {
			if errors.Is(err, store.ErrExists) {
				del := "delete-user " + target
				if target == "" {
					del = "delete-user --global"
				}
				return fmt.Errorf("%s: %w; nothing of it was changed. Delete it first with 'spamtrain %s', or restore it under another name with --user %q --as NEW",
					userName(target), err, del, user)
			}
			return fmt.Errorf("%s: %w; nothing of it was restored", userName(target), err)
		}
		restored++
		fmt.Fprintf(out, "%s: restored %d tokens and %d messages of classes %s\n", userName(target), rows, seen, strings.Join(classes, ", "))
	}
	if users.set && restored < len(users.names) {
		return fmt.Errorf("the dump holds %d of the %d models asked for", restored, len(users.names))
	}
	return nil
}

// openInput opens path for reading, "-" being in.
func openInput(path string, in io.Reader) (io.Reader, func(), error) {
	if path == "-" {
		return in, func() {}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s is not a regular file: give - to read standard input", path)
	}
	return f, func() { f.Close() }, nil
}

// parseDeleteArgs parses the arguments of delete-user and returns the
// users named.
func parseDeleteArgs(e *env, args []string, mf *modelFlags) ([]string, error) {
	fs := e.flagSet("delete-user")
	mf.registerStore(fs)
	global := fs.Bool("global", false, "delete the global model too")
	if err := fs.Parse(args); err != nil {
		return nil, usageError(err)
	}
	names := fs.Args()
	if *global {
		names = append(names, "")
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: name the users whose models to delete (--global for the global model)", errUsage)
	}
	for _, u := range names {
		if err := store.ValidUser(u); err != nil {
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	return names, nil
}

func runDeleteUser(ctx context.Context, e *env, args []string) error {
	var mf modelFlags
	names, err := parseDeleteArgs(e, args, &mf)
	if err != nil {
		return err
	}
	st, err := mf.store(ctx, e)
	if err != nil {
		return err
	}
	defer st.Close()
	return deleteUsers(ctx, e.stdout, st, names)
}

// remoteDeleteUser deletes models of the daemon's store.
func remoteDeleteUser(ctx context.Context, e *env, c *control.Client, args []string) error {
	var mf modelFlags
	names, err := parseDeleteArgs(e, args, &mf)
	if err != nil {
		return err
	}
	deleted, err := c.DeleteUsers(ctx, names)
	if err != nil {
		return err
	}
	for _, d := range deleted {
		printDeleted(e.stdout, d.User, d.Messages, d.Tokens)
	}
	return nil
}

// printDeleted says what deleting user's model did.
func printDeleted(out io.Writer, user string, messages, tokens uint64) {
	if messages == 0 && tokens == 0 {
		fmt.Fprintf(out, "%s: no model\n", userName(user))
		return
	}
	fmt.Fprintf(out, "%s: deleted a model of %d messages and %d tokens\n", userName(user), messages, tokens)
}

// deleteUsers deletes the models of names from st, one line for each.
func deleteUsers(ctx context.Context, out io.Writer, st store.Store, names []string) error {
	for _, u := range names {
		t, err := st.Totals(ctx, u)
		if err != nil {
			return fmt.Errorf("%s: %w", userName(u), err)
		}
		if err := st.DeleteUser(ctx, u); err != nil {
			return fmt.Errorf("%s: %w", userName(u), err)
		}
		var msgs uint64
		for _, n := range t.Messages {
			msgs += n
		}
		printDeleted(out, u, msgs, t.Vocabulary)
	}
	return nil
}
