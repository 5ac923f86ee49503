package junkwatch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spamd/spamd/store"
)

// ErrPattern is returned for a pattern ParsePattern cannot use.
var ErrPattern = errors.New("bad Junk folder pattern")

// Pattern is where the users' Junk folders are: an absolute path with %u
// standing for the user name as one whole element, neither the first nor
// the last, such as /var/mail/%u/Maildir/.Junk.
type Pattern struct {
	prefix string // the directory holding the users' directories
	suffix string // the path from a user's directory to the Junk folder
}

// ParsePattern parses a Junk folder pattern.
func ParsePattern(p string) (Pattern, error) {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return Pattern{}, fmt.Errorf("%w: %q is not an absolute, clean path", ErrPattern, p)
	}
	elems := strings.Split(p[1:], "/")
	at := -1
	for i, e := range elems {
		switch {
		case e == "%u" && at < 0 && i > 0 && i < len(elems)-1:
			at = i
		case strings.Contains(e, "%"):
			return Pattern{}, fmt.Errorf("%w: %q: want %%u once, as a whole path element, neither the first nor the last", ErrPattern, p)
		}
	}
	if at < 0 {
		return Pattern{}, fmt.Errorf("%w: %q has no %%u element", ErrPattern, p)
	}
	return Pattern{
		prefix: "/" + filepath.Join(elems[:at]...),
		suffix: filepath.Join(elems[at+1:]...),
	}, nil
}

// String returns the pattern as ParsePattern reads it.
func (p Pattern) String() string { return filepath.Join(p.prefix, "%u", p.suffix) }

// Prefix returns the directory holding the users' directories: the part
// of the pattern before %u.
func (p Pattern) Prefix() string { return p.prefix }

// Expand returns user's Junk folder. The user name must be one that
// store.ValidUser accepts and not empty, so that it stays one path
// element that cannot climb out of the prefix ("..", "a/b").
func (p Pattern) Expand(user string) (string, error) {
	if err := checkUser(user); err != nil {
		return "", err
	}
	return filepath.Join(p.prefix, user, p.suffix), nil
}

// checkUser checks a user name taken from a path.
func checkUser(user string) error {
	if user == "" {
		return fmt.Errorf("%w: empty", store.ErrInvalidUser)
	}
	return store.ValidUser(user)
}

// Users returns the user names the pattern finds: the entries of the
// prefix directory that are directories (not symbolic links) named as
// store.ValidUser accepts. Others are returned in skipped.
func (p Pattern) Users() (users, skipped []string, err error) {
	ents, err := os.ReadDir(p.prefix)
	if err != nil {
		return nil, nil, fmt.Errorf("list users in %s: %w", p.prefix, err)
	}
	for _, e := range ents {
		if !e.IsDir() || checkUser(e.Name()) != nil {
			skipped = append(skipped, e.Name())
			continue
		}
		users = append(users, e.Name())
	}
	return users, skipped, nil
}
