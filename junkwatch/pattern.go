package junkwatch

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"

	"github.com/spamd/spamd/identity"
	"github.com/spamd/spamd/store"
)

// ErrPattern is returned for a pattern ParsePattern cannot use.
var ErrPattern = errors.New("bad Junk folder pattern")

// Pattern is where the users' Junk folders are: an absolute path in which
// Dovecot's %u (the user name), %n (its user part) and %d (its domain)
// stand for whole path elements, such as /var/mail/%u/Maildir/.Junk or
// /var/vmail/%d/%n/Maildir/.Junk (identity.Pattern). A folder's user is
// named as Dovecot names it: %u, or n@d, or n alone.
type Pattern struct {
	p identity.Pattern
}

// ParsePattern parses a Junk folder pattern.
func ParsePattern(s string) (Pattern, error) {
	p, err := identity.ParsePattern(s)
	if err != nil {
		return Pattern{}, fmt.Errorf("%w: %v", ErrPattern, err)
	}
	return Pattern{p}, nil
}

// String returns the pattern as ParsePattern reads it.
func (p Pattern) String() string { return p.p.String() }

// Prefix returns the directory holding the users' directories (or the
// domains'): the part of the pattern before its first variable.
func (p Pattern) Prefix() string { return p.p.Prefix() }

// Dir returns user's directory: the path up to the pattern's last
// variable, which holds the user's maildir. The user name must be one
// the pattern can give a folder, each part a valid user name, so that it
// stays in path elements of its own that cannot climb out of the prefix
// ("..", "a/b").
func (p Pattern) Dir(user string) (string, error) {
	dir, ok := p.p.Dir(user)
	if !ok {
		return "", fmt.Errorf("%w: %q names no folder of %s", store.ErrInvalidUser, user, p)
	}
	return dir, nil
}

// Expand returns user's Junk folder.
func (p Pattern) Expand(user string) (string, error) {
	dir, err := p.Dir(user)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, p.p.Suffix()), nil
}

// level is a directory on the way from the prefix to the users'
// directories: its entries stand for the pattern's element at, below
// the values vals bound above it.
type level struct {
	dir  string
	at   int
	vals map[string]string
}

// top returns the prefix's level.
func (p Pattern) top() level { return level{dir: p.p.Prefix(), vals: map[string]string{}} }

// below returns the level an entry name of l makes, whether it is a user's
// directory (then user is the user's name), and false when name stands
// for nothing of the pattern.
func (p Pattern) below(l level, name string) (next level, user string, ok bool) {
	elems := p.p.Elems()
	e := elems[l.at]
	vals := l.vals
	switch e {
	case identity.VarUser, identity.VarLocal, identity.VarDomain:
		if !identity.ValidValue(e, name) {
			return level{}, "", false
		}
		vals = maps.Clone(vals)
		vals[e] = name
		if !identity.Consistent(vals) {
			return level{}, "", false
		}
	default:
		if name != e {
			return level{}, "", false
		}
	}
	next = level{dir: filepath.Join(l.dir, name), at: l.at + 1, vals: vals}
	if next.at == len(elems) {
		return next, p.p.Name(vals), true
	}
	return next, "", true
}

// walk goes down from l to the users' directories: it calls onLevel for
// every level directory, l included, and onUser for every user with
// their directory. Entries that are not directories (symbolic links are
// not), or stand for nothing of the pattern, go to skipped, by their
// path below the prefix. Only the prefix's not being listable is an
// error; a directory below that vanished is skipped.
func (p Pattern) walk(l level, onLevel func(level), onUser func(name, dir string), skipped *[]string) error {
	onLevel(l)
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		if l.at == 0 {
			return fmt.Errorf("list users in %s: %w", l.dir, err)
		}
		return nil
	}
	for _, e := range ents {
		next, user, ok := p.below(l, e.Name())
		if !e.IsDir() || !ok {
			if rel, err := filepath.Rel(p.p.Prefix(), filepath.Join(l.dir, e.Name())); err == nil && skipped != nil {
				*skipped = append(*skipped, rel)
			}
			continue
		}
		if user != "" {
			onUser(user, next.dir)
			continue
		}
		if err := p.walk(next, onLevel, onUser, skipped); err != nil {
			return err
		}
	}
	return nil
}

// Users returns the user names the pattern finds: the directories (not
// symbolic links) that its variables can stand for, down from the
// prefix, named as identity.Pattern.Name says. Other entries are
// returned in skipped, by their path below the prefix.
func (p Pattern) Users() (users, skipped []string, err error) {
	err = p.walk(p.top(), func(level) {}, func(name, _ string) { users = append(users, name) }, &skipped)
	if err != nil {
		return nil, nil, err
	}
	return users, skipped, nil
}
