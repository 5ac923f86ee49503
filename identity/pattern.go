package identity

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spamd/spamd/store"
)

// ErrPattern is wrapped by the error of a folder pattern ParsePattern
// cannot use.
var ErrPattern = errors.New("bad mail folder pattern")

// The variables of a folder pattern, as Dovecot's mail_location names
// them.
const (
	// VarUser is %u, the whole user name: an address for virtual users,
	// a bare account name for system users.
	VarUser = "%u"
	// VarLocal is %n, the user part: the name before '@'.
	VarLocal = "%n"
	// VarDomain is %d, the domain part: the name after '@'.
	VarDomain = "%d"
)

// Pattern is where users' mail folders are: an absolute path in which
// Dovecot's %u, %n and %d stand for parts of a user's name, each as one
// whole path element, such as /var/mail/%u/Maildir/.Junk or
// /var/vmail/%d/%n/Maildir/.Junk. It names the user of a folder as
// Dovecot does: %u whole; %n and %d as n@d; %n alone as a bare name.
type Pattern struct {
	prefix string   // the path before the first variable
	elems  []string // the elements from the first variable to the last
	suffix string   // the path after the last variable
}

// ParsePattern parses a folder pattern. It must be an absolute, clean
// path in which each variable is a whole element, at most once, after
// the first element and before the last; with %u or %n, and %d only
// beside one of them.
func ParsePattern(p string) (Pattern, error) {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return Pattern{}, fmt.Errorf("%w: %q is not an absolute, clean path", ErrPattern, p)
	}
	parts := strings.Split(p[1:], "/")
	first, last := -1, -1
	var vars []string
	for i, e := range parts {
		switch {
		case e == VarUser || e == VarLocal || e == VarDomain:
			if slices.Contains(vars, e) {
				return Pattern{}, fmt.Errorf("%w: %q has %s twice", ErrPattern, p, e)
			}
			if i == 0 || i == len(parts)-1 {
				return Pattern{}, fmt.Errorf("%w: %q: %s must be neither the first element nor the folder itself", ErrPattern, p, e)
			}
			vars = append(vars, e)
			if first < 0 {
				first = i
			}
			last = i
		case strings.Contains(e, "%"):
			return Pattern{}, fmt.Errorf("%w: %q: %%u, %%n and %%d stand each for a whole path element, and no other %% is known", ErrPattern, p)
		}
	}
	switch {
	case first < 0:
		return Pattern{}, fmt.Errorf("%w: %q has none of %%u, %%n and %%d", ErrPattern, p)
	case slices.Contains(vars, VarUser) && slices.Contains(vars, VarLocal):
		return Pattern{}, fmt.Errorf("%w: %q: %%u is the whole user name, %%n its user part: give one", ErrPattern, p)
	case len(vars) == 1 && vars[0] == VarDomain:
		return Pattern{}, fmt.Errorf("%w: %q: %%d needs %%n (or %%u) beside it to name a user", ErrPattern, p)
	}
	return Pattern{
		prefix: "/" + filepath.Join(parts[:first]...),
		elems:  slices.Clone(parts[first : last+1]),
		suffix: filepath.Join(parts[last+1:]...),
	}, nil
}

// String returns the pattern as ParsePattern reads it.
func (p Pattern) String() string {
	return filepath.Join(append(append([]string{p.prefix}, p.elems...), p.suffix)...)
}

// Prefix returns the directory before the first variable, which holds
// the users' (or the domains') directories.
func (p Pattern) Prefix() string { return p.prefix }

// Elems returns the elements from the first variable to the last:
// variables and the names between them.
func (p Pattern) Elems() []string { return slices.Clone(p.elems) }

// Suffix returns the path from a user's directory, the one the last
// variable names, to the folder.
func (p Pattern) Suffix() string { return p.suffix }

// ValidValue reports whether a directory name can stand for variable v:
// a valid user name, and for %n and %d one without '@'.
func ValidValue(v, name string) bool {
	switch v {
	case VarUser:
		return name != "" && store.ValidUser(name) == nil
	case VarLocal:
		return name != "" && !strings.Contains(name, "@") && store.ValidUser(name) == nil
	case VarDomain:
		return name != "" && !strings.Contains(name, "@") && store.ValidUser("x@"+name) == nil
	}
	return false
}

// Name returns the user name of a folder whose variables have the
// values vals: %u, or n@d, or n alone.
func (p Pattern) Name(vals map[string]string) string {
	if u, ok := vals[VarUser]; ok {
		return u
	}
	if d := vals[VarDomain]; d != "" {
		return vals[VarLocal] + "@" + d
	}
	return vals[VarLocal]
}

// Consistent reports whether values bound to the variables so far fit
// together: beside %d, %u is an address in that domain.
func Consistent(vals map[string]string) bool {
	u, uok := vals[VarUser]
	d, dok := vals[VarDomain]
	return !uok || !dok || strings.HasSuffix(u, "@"+d)
}

// Values returns the values of the variables of user's folder, or false
// when no folder of the pattern can be user's: a name with '@' where the
// pattern has %n alone, without one where it has %d, or a part that is
// no valid directory name.
func (p Pattern) Values(user string) (map[string]string, bool) {
	local, domain := user, ""
	if i := strings.LastIndexByte(user, '@'); i >= 0 {
		local, domain = user[:i], user[i+1:]
	}
	vals := map[string]string{}
	for _, e := range p.elems {
		switch e {
		case VarUser:
			vals[e] = user
		case VarLocal:
			vals[e] = local
		case VarDomain:
			vals[e] = domain
		}
	}
	for v, name := range vals {
		if !ValidValue(v, name) {
			return nil, false
		}
	}
	if !Consistent(vals) || p.Name(vals) != user {
		return nil, false
	}
	return vals, true
}

// Dir returns the directory of user's folders: the path up to the last
// variable, with user's values.
func (p Pattern) Dir(user string) (string, bool) {
	vals, ok := p.Values(user)
	if !ok {
		return "", false
	}
	path := []string{p.prefix}
	for _, e := range p.elems {
		if v, ok := vals[e]; ok {
			e = v
		}
		path = append(path, e)
	}
	return filepath.Join(path...), true
}
