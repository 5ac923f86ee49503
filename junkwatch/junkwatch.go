// Package junkwatch watches the users' maildirs and reports the messages
// they move into and out of their Junk folder: a message arriving in Junk
// is reported as spam, a message moved out of Junk into another folder of
// the same maildir (not a trash folder) as ham.
//
// # How a move is recognized
//
// Dovecot moves a message between maildir folders by linking the file
// into the destination (sometimes under a new name) and unlinking the
// source; a flag change renames the file inside its folder. So messages
// are identified by their inode, never by their file name: the watcher
// keeps the inodes (and sizes) of every message in each user's Junk, and
//
//   - a file arriving in Junk whose inode is not already there is
//     reported as spam, unless it was delivered there already judged
//     spam (its X-Spamd-Result says so: the filter needs no correction);
//     a rename inside Junk (flags, new/ to cur/) reports nothing;
//   - a file arriving in another folder whose inode is, or a moment ago
//     was, in Junk is reported as ham, once (for an inode that left Junk,
//     only with the same size and mtime, which linking and renaming keep
//     but a new file reusing the inode would not); so is one with another inode
//     but the same size and content digest (tokenize.Digest) as a message
//     in Junk, as when the move was a copy on another file system;
//   - a file from Junk arriving in a trash folder reports nothing, and
//     neither does anything else.
//
// The inodes of the other folders are never collected: reading them
// would cost a stat of every message a user has.
//
// # Events and rescans
//
// Events come from inotify (github.com/fsnotify/fsnotify), one watcher
// for everything so that events keep their order: a link into INBOX is
// seen before the unlink from Junk. The watcher watches the directory of
// the users (new users), each maildir (new folders), each folder (its cur/
// and new/ appearing) and each cur/ and new/. Every Options.Rescan, and at
// once when the kernel's event queue overflowed, every Junk folder is
// listed again: files that appeared are reported as arrivals, and for
// files that vanished the other folders are searched by inode. This also
// serves file systems that send no events (NFS), at the rescan's pace.
//
// # Limits
//
// What happens while the watcher is not running is not seen: it learns
// the Junk folders afresh when it starts. Folders nested more than one
// level below the maildir (the fs layout's Work/Projects) are not
// watched; Maildir++ (.Work.Projects) folders are. A copy of a message
// from Junk to another file system is matched by content only while the
// Junk file is still there when the copy arrives.
package junkwatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/spamd/spamd/decide"
	"github.com/spamd/spamd/reportq"
	"github.com/spamd/spamd/tokenize"
)

// The classes the watcher reports.
const (
	Spam = "spam"
	Ham  = "ham"
)

// Source is the source of the watcher's reports.
const Source = "maildir"

// departedFor is how long a message that left Junk still counts as from
// Junk when it arrives elsewhere: enough for an event handled late.
const departedFor = time.Minute

// Options configure a Watcher.
type Options struct {
	// Pattern is where the Junk folders are.
	Pattern Pattern
	// Trash names the folders, beside Junk, into which a message moved
	// out of Junk is not ham.
	Trash []string
	// Rescan is how often every Junk folder is listed again; 0 means a
	// minute.
	Rescan time.Duration
	// Report is given every report. It should return quickly (enqueue).
	Report func(ctx context.Context, r reportq.Report) error
	// Model names the model a folder's user (its %u) corrects, by the
	// site's naming rule (identity.Rule.Folder); ok false means none
	// that mail is classified with, and the move is not reported. Nil
	// means the folder's name.
	Model func(user string) (model string, ok bool)
	// Log receives a line per report and every trouble.
	Log *slog.Logger
}

// Watcher watches the maildirs of Options.Pattern.
type Watcher struct {
	opts  Options
	fsw   *fsnotify.Watcher
	users map[string]*user
	// dirs maps each watched directory to what it is.
	dirs map[string]watched
}

// kind is what a watched directory is.
type kind int

const (
	kindLevel    kind = iota // holds the users' directories, or directories on the way to them (the domains')
	kindUserRoot             // a directory on the way to a user's Junk, which may appear
	kindFolder               // a folder (the maildir itself is INBOX): cur/ and new/ may appear
	kindMessages             // a folder's cur/ or new/
)

type watched struct {
	kind   kind
	u      *user
	name   string // the user, for kindUserRoot
	folder string // the folder's directory
	lvl    level  // where in the pattern, for kindLevel
}

// fileID identifies a file by device and inode.
type fileID struct{ dev, ino uint64 }

// entry is a message in Junk.
type entry struct {
	size     int64
	mtime    time.Time
	names    map[string]bool // its paths in Junk
	digest   *[32]byte       // computed when first needed
	trashed  bool            // it arrived in a trash folder
	reported bool            // it was reported as ham
}

// departure is a message that left Junk.
type departure struct {
	at       time.Time
	size     int64
	mtime    time.Time
	digest   *[32]byte
	reported bool
}

// user is one user's maildir.
type user struct {
	name     string
	dir      string // the user's directory: the pattern's last variable
	root     string // the maildir: the Junk folder's parent
	junk     string // the Junk folder
	folders  map[string]bool
	entries  map[fileID]*entry
	byName   map[string]fileID
	departed map[fileID]*departure
}

// New returns a watcher with options o; Run starts it.
func New(o Options) (*Watcher, error) {
	if o.Pattern.Prefix() == "" {
		return nil, fmt.Errorf("%w: none given", ErrPattern)
	}
	if o.Report == nil {
		return nil, errors.New("junkwatch: no Report function")
	}
	if o.Rescan <= 0 {
		o.Rescan = time.Minute
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Watcher{opts: o, users: map[string]*user{}, dirs: map[string]watched{}}, nil
}

// Run watches until ctx is done and returns ctx's error, or the error
// that keeps it from watching at all.
func (w *Watcher) Run(ctx context.Context) error {
	fsw, err := fsnotify.NewBufferedWatcher(4096)
	if err != nil {
		return fmt.Errorf("junkwatch: %w", err)
	}
	w.fsw = fsw
	defer fsw.Close()
	w.safely("start", func() { w.rescan(ctx) })
	tick := time.NewTicker(w.opts.Rescan)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-fsw.Events:
			if !ok {
				return errors.New("junkwatch: the event stream ended")
			}
			w.safely("event", func() { w.event(ctx, ev) })
		case err, ok := <-fsw.Errors:
			if !ok {
				return errors.New("junkwatch: the event stream ended")
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				w.opts.Log.Warn("junkwatch: events were lost; rescanning", "err", err)
			} else {
				w.opts.Log.Warn("junkwatch: event error; rescanning", "err", err)
			}
			w.safely("rescan", func() { w.rescan(ctx) })
		case <-tick.C:
			w.safely("rescan", func() { w.rescan(ctx) })
		}
	}
}

// safely runs fn, turning a panic into a logged error: one bad event
// must not stop the watcher.
func (w *Watcher) safely(what string, fn func()) {
	defer func() {
		if v := recover(); v != nil {
			w.opts.Log.Error("junkwatch: panic", "in", what, "panic", v, "stack", string(debug.Stack()))
		}
	}()
	fn()
}

// addWatch watches dir as wd; a directory already watched is now wd.
func (w *Watcher) addWatch(dir string, wd watched) bool {
	if _, ok := w.dirs[dir]; ok {
		w.dirs[dir] = wd
		return true
	}
	if err := w.fsw.Add(dir); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			w.opts.Log.Warn("junkwatch: cannot watch; relying on rescans", "dir", dir, "err", err)
		}
		return false
	}
	w.dirs[dir] = wd
	return true
}

// forget stops tracking dir and everything below it.
func (w *Watcher) forget(dir string) {
	for d := range w.dirs {
		if d == dir || strings.HasPrefix(d, dir+"/") {
			w.fsw.Remove(d)
			delete(w.dirs, d)
		}
	}
}

// rescan finds new and vanished users, watching the directories on the
// way to them for new ones, then lists every Junk folder again and
// reconciles.
func (w *Watcher) rescan(ctx context.Context) {
	var names, skipped []string
	pat := w.opts.Pattern
	err := pat.walk(pat.top(), w.watchLevel, func(name, _ string) { names = append(names, name) }, &skipped)
	if err != nil {
		w.opts.Log.Warn("junkwatch: listing users", "err", err)
		return
	}
	if len(skipped) > 0 {
		w.opts.Log.Debug("junkwatch: entries that are not users", "dir", pat.Prefix(), "skipped", skipped)
	}
	for name, u := range w.users {
		if !slices.Contains(names, name) {
			w.forget(u.dir)
			delete(w.users, name)
		}
	}
	for _, name := range names {
		if ctx.Err() != nil {
			return
		}
		if u := w.users[name]; u != nil {
			w.reconcile(ctx, u)
			continue
		}
		w.addUser(ctx, name, false)
	}
}

// addUser starts watching user name's maildir if its Junk folder exists.
// With arrivals set, files already in the other folders count as arrivals
// (the maildir appeared while the watcher ran).
func (w *Watcher) addUser(ctx context.Context, name string, arrivals bool) {
	junk, err := w.opts.Pattern.Expand(name)
	if err != nil {
		return
	}
	dir, err := w.opts.Pattern.Dir(name)
	if err != nil {
		return
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return
	}
	if !isDir(junk) {
		// Not yet: watch the directories on the way, which the maildir
		// will be made in; the rescan tries again too.
		for d := dir; d != junk; d = filepath.Join(d, strings.Split(strings.TrimPrefix(junk, d+"/"), "/")[0]) {
			if !w.addWatch(d, watched{kind: kindUserRoot, name: name}) {
				break
			}
		}
		// What was made before the watches were in place made no event.
		if !isDir(junk) {
			return
		}
	}
	u := &user{
		name: name, dir: dir, root: filepath.Dir(junk), junk: junk,
		folders:  map[string]bool{},
		entries:  map[fileID]*entry{},
		byName:   map[string]fileID{},
		departed: map[fileID]*departure{},
	}
	w.users[name] = u
	w.addWatch(dir, watched{kind: kindUserRoot, name: name, u: u})
	w.addWatch(u.root, watched{kind: kindFolder, u: u, folder: u.root})
	w.addFolder(ctx, u, u.junk, arrivals)
	for _, f := range w.listFolders(u) {
		if f != u.junk {
			w.addFolder(ctx, u, f, arrivals)
		}
	}
	w.opts.Log.Info("junkwatch: watching", "user", name, "junk", junk, "folders", len(u.folders))
}

// watchLevel watches a directory on the way to the users' directories,
// for new ones.
func (w *Watcher) watchLevel(l level) {
	w.addWatch(l.dir, watched{kind: kindLevel, lvl: l})
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// listFolders returns the folders of u's maildir: the maildir itself
// (INBOX) and each directory in it but cur, new and tmp.
func (w *Watcher) listFolders(u *user) []string {
	out := []string{u.root}
	ents, err := os.ReadDir(u.root)
	if err != nil {
		w.opts.Log.Warn("junkwatch: listing folders", "user", u.name, "err", err)
		return out
	}
	for _, e := range ents {
		switch n := e.Name(); {
		case !e.IsDir(), n == "cur", n == "new", n == "tmp":
		default:
			out = append(out, filepath.Join(u.root, n))
		}
	}
	return out
}

// addFolder watches folder of u and its cur/ and new/. With arrivals set,
// the files already there count as arrivals.
func (w *Watcher) addFolder(ctx context.Context, u *user, folder string, arrivals bool) {
	if folder != u.root {
		w.addWatch(folder, watched{kind: kindFolder, u: u, folder: folder})
	}
	u.folders[folder] = true
	for _, sub := range []string{"cur", "new"} {
		w.addMessages(ctx, u, folder, filepath.Join(folder, sub), arrivals)
	}
}

// addMessages watches a folder's cur/ or new/ directory. With arrivals
// set, the files in it count as arrivals; else Junk's are recorded.
func (w *Watcher) addMessages(ctx context.Context, u *user, folder, dir string, arrivals bool) {
	if !w.addWatch(dir, watched{kind: kindMessages, u: u, folder: folder}) {
		return
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		switch {
		case arrivals:
			// Made while watching: what is in it arrived meanwhile.
			w.arrival(ctx, u, folder, path)
		case folder == u.junk:
			w.record(u, path)
		}
	}
}

// record notes a file found in Junk without reporting it.
func (w *Watcher) record(u *user, path string) {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	id := idOf(fi)
	e := u.entries[id]
	if e == nil {
		e = &entry{size: fi.Size(), mtime: fi.ModTime(), names: map[string]bool{}}
		u.entries[id] = e
	}
	e.names[path] = true
	u.byName[path] = id
}

func idOf(fi os.FileInfo) fileID {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino}
}

// event handles one file system event.
func (w *Watcher) event(ctx context.Context, ev fsnotify.Event) {
	dir := filepath.Dir(ev.Name)
	wd, ok := w.dirs[dir]
	if !ok {
		return
	}
	if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
		if _, sub := w.dirs[ev.Name]; sub {
			w.forget(ev.Name)
			if u := wd.u; u != nil && (ev.Name == u.root || ev.Name == u.junk) {
				// The maildir or its Junk went away: start over.
				delete(w.users, u.name)
				w.forget(u.dir)
			}
			return
		}
	}
	switch wd.kind {
	case kindLevel:
		if !ev.Has(fsnotify.Create) {
			return
		}
		fi, err := os.Lstat(ev.Name)
		if err != nil || !fi.IsDir() {
			return
		}
		pat := w.opts.Pattern
		next, name, ok := pat.below(wd.lvl, filepath.Base(ev.Name))
		switch {
		case !ok:
		case name != "":
			if w.users[name] == nil {
				w.addUser(ctx, name, true)
			}
		default:
			// A directory on the way, a new domain's: the users in it
			// arrived with it.
			_ = pat.walk(next, w.watchLevel, func(name, _ string) {
				if w.users[name] == nil {
					w.addUser(ctx, name, true)
				}
			}, nil)
		}
	case kindUserRoot:
		// The maildir, or a directory on the way to it, appeared.
		if ev.Has(fsnotify.Create) && wd.u == nil && w.users[wd.name] == nil {
			w.addUser(ctx, wd.name, true)
		}
	case kindFolder:
		if !ev.Has(fsnotify.Create) {
			return
		}
		fi, err := os.Lstat(ev.Name)
		if err != nil || !fi.IsDir() {
			return
		}
		switch base := filepath.Base(ev.Name); {
		case base == "cur" || base == "new":
			w.addMessages(ctx, wd.u, wd.folder, ev.Name, true)
		case base == "tmp":
		case wd.folder == wd.u.root:
			w.addFolder(ctx, wd.u, ev.Name, true)
		}
	case kindMessages:
		u := wd.u
		switch {
		case ev.Has(fsnotify.Create):
			w.arrival(ctx, u, wd.folder, ev.Name)
		case ev.Has(fsnotify.Remove) && wd.folder == u.junk:
			w.gone(u, ev.Name, true)
		case ev.Has(fsnotify.Rename) && wd.folder == u.junk:
			w.gone(u, ev.Name, false)
		}
	}
}

// gone handles a file that left Junk: removed (unlinked) or renamed
// (most often inside Junk, to change flags).
func (w *Watcher) gone(u *user, path string, removed bool) {
	id, ok := u.byName[path]
	if !ok {
		return
	}
	delete(u.byName, path)
	e := u.entries[id]
	if e == nil {
		return
	}
	delete(e.names, path)
	if !removed || len(e.names) > 0 {
		// A rename: the new name arrives next. Nameless entries left
		// behind are settled by the rescan.
		return
	}
	delete(u.entries, id)
	if !e.trashed {
		u.departed[id] = &departure{at: time.Now(), size: e.size, mtime: e.mtime, digest: e.digest, reported: e.reported}
	}
}

// isTrash reports whether folder is a trash folder of u.
func (w *Watcher) isTrash(u *user, folder string) bool {
	return filepath.Dir(folder) == u.root && slices.Contains(w.opts.Trash, filepath.Base(folder))
}

// arrival handles a file that appeared in folder.
func (w *Watcher) arrival(ctx context.Context, u *user, folder, path string) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return // already renamed again, or gone: its next name arrives too
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	id := idOf(fi)
	w.expire(u)
	if folder == u.junk {
		if e := u.entries[id]; e != nil {
			e.names[path] = true
			u.byName[path] = id
			return
		}
		raw, ok := w.read(u, f, fi, path)
		if !ok {
			return
		}
		d := tokenize.Digest(raw)
		u.entries[id] = &entry{size: fi.Size(), mtime: fi.ModTime(), names: map[string]bool{path: true}, digest: &d}
		u.byName[path] = id
		if res, err := decide.ResultOf(raw); err == nil && res.Verdict == Spam {
			w.opts.Log.Debug("junkwatch: delivered to Junk as spam; nothing to report", "user", u.name, "path", path)
			return
		}
		w.report(ctx, u, Spam, raw, path)
		return
	}
	e, d := u.entries[id], u.departed[id]
	if d != nil && (d.size != fi.Size() || !d.mtime.Equal(fi.ModTime())) {
		// The inode of a message deleted from Junk, reused by a new
		// file: linking and renaming keep a file's size and mtime.
		d = nil
	}
	if w.isTrash(u, folder) {
		if e != nil {
			e.trashed = true
		}
		delete(u.departed, id)
		return
	}
	switch {
	case e != nil && e.reported, d != nil && d.reported:
		return
	case e != nil || d != nil:
	default:
		// Another inode: a copy from Junk has the same size and content.
		if e, d = w.sameContent(u, f, fi, path); e == nil && d == nil {
			return
		}
	}
	raw, ok := w.read(u, f, fi, path)
	if !ok {
		return
	}
	if e != nil {
		e.reported = true
	}
	if d != nil {
		d.reported = true
	}
	w.report(ctx, u, Ham, raw, path)
}

// sameContent returns the message in Junk, or recently departed from it,
// that has the size and content of the open file f, if any.
func (w *Watcher) sameContent(u *user, f *os.File, fi os.FileInfo, path string) (*entry, *departure) {
	var digest *[32]byte
	sum := func() *[32]byte {
		if digest == nil {
			raw, ok := w.read(u, f, fi, path)
			if !ok {
				return nil
			}
			d := tokenize.Digest(raw)
			digest = &d
		}
		return digest
	}
	for _, e := range u.entries {
		if e.size != fi.Size() {
			continue
		}
		if e.digest == nil {
			for name := range e.names {
				if raw, err := readFile(name); err == nil {
					d := tokenize.Digest(raw)
					e.digest = &d
					break
				}
			}
		}
		if s := sum(); s != nil && e.digest != nil && *e.digest == *s {
			return e, nil
		}
	}
	for _, d := range u.departed {
		if d.size == fi.Size() && d.digest != nil {
			if s := sum(); s != nil && *d.digest == *s {
				return nil, d
			}
		}
	}
	return nil, nil
}

// expire forgets departures from Junk older than departedFor.
func (w *Watcher) expire(u *user) {
	for id, d := range u.departed {
		if time.Since(d.at) > departedFor {
			delete(u.departed, id)
		}
	}
}

// read reads the open file f from its start, at most
// reportq.MaxMessage bytes.
func (w *Watcher) read(u *user, f *os.File, fi os.FileInfo, path string) ([]byte, bool) {
	if fi.Size() > reportq.MaxMessage || fi.Size() == 0 {
		w.opts.Log.Warn("junkwatch: message not reported: size out of range", "user", u.name, "path", path, "size", fi.Size())
		return nil, false
	}
	raw := make([]byte, fi.Size())
	if _, err := f.ReadAt(raw, 0); err != nil && !errors.Is(err, io.EOF) {
		w.opts.Log.Warn("junkwatch: reading a message", "user", u.name, "path", path, "err", err)
		return nil, false
	}
	return raw, true
}

// readFile reads a message file without following a symbolic link.
func readFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, reportq.MaxMessage))
}

// report hands a report on.
func (w *Watcher) report(ctx context.Context, u *user, class string, raw []byte, path string) {
	model := u.name
	if w.opts.Model != nil {
		var ok bool
		if model, ok = w.opts.Model(u.name); !ok {
			// Training a model nothing classifies with would look like
			// learning and change nothing.
			w.opts.Log.Warn("junkwatch: not reported: the folder's user names no model the milter reads (see [milter] users and [watch] domain)",
				"folder_user", u.name, "class", class, "path", path)
			return
		}
	}
	err := w.opts.Report(ctx, reportq.Report{User: model, Class: class, Source: Source, Message: raw})
	if err != nil {
		w.opts.Log.Error("junkwatch: report not queued", "user", model, "class", class, "path", path, "err", err)
		return
	}
	w.opts.Log.Info("junkwatch: reported", "user", model, "folder_user", u.name, "class", class, "path", path)
}

// reconcile lists u's folders again: new folders are watched, files that
// appeared in Junk are arrivals, and files that left it are looked for in
// the other folders by inode.
func (w *Watcher) reconcile(ctx context.Context, u *user) {
	if fi, err := os.Stat(u.junk); err != nil || !fi.IsDir() {
		delete(w.users, u.name)
		w.forget(u.dir)
		return
	}
	w.expire(u)
	for _, f := range w.listFolders(u) {
		if !u.folders[f] {
			w.addFolder(ctx, u, f, true)
		} else {
			// A watch that could not be added (cur/ made late).
			for _, sub := range []string{"cur", "new"} {
				if _, ok := w.dirs[filepath.Join(f, sub)]; !ok {
					w.addMessages(ctx, u, f, filepath.Join(f, sub), true)
				}
			}
		}
	}
	present := map[string]bool{}
	for _, sub := range []string{"cur", "new"} {
		dir := filepath.Join(u.junk, sub)
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if !e.Type().IsRegular() {
				continue
			}
			path := filepath.Join(dir, e.Name())
			present[path] = true
			if _, ok := u.byName[path]; !ok {
				w.arrival(ctx, u, u.junk, path)
			}
		}
	}
	for path := range u.byName {
		if !present[path] {
			w.gone(u, path, false)
		}
	}
	// Entries without a name left Junk unseen: find where they went.
	left := map[fileID]*entry{}
	sizes := map[int64]bool{}
	for id, e := range u.entries {
		if len(e.names) == 0 {
			left[id] = e
			sizes[e.size] = true
			delete(u.entries, id)
		}
	}
	if len(left) == 0 {
		return
	}
	for f := range u.folders {
		if f == u.junk {
			continue
		}
		for _, sub := range []string{"cur", "new"} {
			dir := filepath.Join(f, sub)
			ents, _ := os.ReadDir(dir)
			for _, de := range ents {
				if n, ok := sizeInName(de.Name()); ok && !sizes[n] {
					continue
				}
				fi, err := os.Lstat(filepath.Join(dir, de.Name()))
				if err != nil || !fi.Mode().IsRegular() {
					continue
				}
				id := idOf(fi)
				e := left[id]
				if e == nil {
					continue
				}
				delete(left, id)
				if e.trashed || e.reported || w.isTrash(u, f) {
					continue
				}
				// arrival reports it: it is a recent departure now.
				u.departed[id] = &departure{at: time.Now(), size: e.size, mtime: e.mtime, digest: e.digest}
				w.arrival(ctx, u, f, filepath.Join(dir, de.Name()))
			}
		}
	}
}

// sizeInName returns the size a Dovecot maildir file name carries
// (",S=1234"), if it has one.
func sizeInName(name string) (int64, bool) {
	_, after, ok := strings.Cut(name, ",S=")
	if !ok {
		return 0, false
	}
	end := strings.IndexFunc(after, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(after)
	}
	n, err := strconv.ParseInt(after[:end], 10, 64)
	return n, err == nil
}
