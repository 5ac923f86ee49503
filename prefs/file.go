package prefs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/store"
)

// ErrInvalid is wrapped by the errors of preferences that are out of
// range, and of a file that holds such.
var ErrInvalid = errors.New("invalid preferences")

// maxEntries bounds the users and the domains a file may hold each.
const maxEntries = 1_000_000

// File is the layer of preferences set through the API, kept in a JSON
// file that each change replaces whole (written beside it, synced, and
// renamed over it), so that a crash leaves the old file or the new one.
// Its methods are safe for concurrent use.
type File struct {
	path string
	mu   sync.Mutex
	l    Layer
}

// OpenFile reads the layer kept at path; a file that does not exist is
// an empty layer, created at the first change.
func OpenFile(path string) (*File, error) {
	f := &File{path: path}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return f, nil
	case err != nil:
		return nil, fmt.Errorf("preferences: %w", err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&f.l); err != nil {
		return nil, fmt.Errorf("preferences %s: %w: %v", path, ErrInvalid, err)
	}
	if err := f.l.Validate(); err != nil {
		return nil, fmt.Errorf("preferences %s: %w", path, err)
	}
	return f, nil
}

// Layer returns a copy of the layer.
func (f *File) Layer() Layer {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Layer{Users: maps.Clone(f.l.Users), Domains: maps.Clone(f.l.Domains)}
}

// SetUser replaces user's preferences; the zero Pref removes them.
func (f *File) SetUser(user string, p config.Pref) (Layer, error) {
	if err := ValidUser(user); err != nil {
		return Layer{}, err
	}
	return f.set(&f.l.Users, user, p)
}

// SetDomain replaces domain's preferences; the zero Pref removes them.
func (f *File) SetDomain(domain string, p config.Pref) (Layer, error) {
	if err := config.ValidDomain(domain); err != nil {
		return Layer{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return f.set(&f.l.Domains, domain, p)
}

// set replaces the entry name of *m with p, writes the file and returns
// the new layer; on failure the layer is left as it was.
func (f *File) set(m *map[string]config.Pref, name string, p config.Pref) (Layer, error) {
	if key, err := p.Validate(); err != nil {
		return Layer{}, fmt.Errorf("%w: %s: %v", ErrInvalid, key, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	old := *m
	next := maps.Clone(old)
	if next == nil {
		next = map[string]config.Pref{}
	}
	if isZero(p) {
		delete(next, name)
	} else {
		if _, ok := next[name]; !ok && len(next) >= maxEntries {
			return Layer{}, fmt.Errorf("%w: more than %d entries", ErrInvalid, maxEntries)
		}
		next[name] = p
	}
	*m = next
	if err := f.write(); err != nil {
		*m = old
		return Layer{}, err
	}
	return Layer{Users: maps.Clone(f.l.Users), Domains: maps.Clone(f.l.Domains)}, nil
}

// write replaces the file with the layer.
func (f *File) write() error {
	b, err := json.MarshalIndent(f.l, "", "  ")
	if err != nil {
		return fmt.Errorf("preferences: %w", err)
	}
	dir := filepath.Dir(f.path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("preferences: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".prefs-*")
	if err != nil {
		return fmt.Errorf("preferences: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(append(b, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.path)
	}
	if err != nil {
		return fmt.Errorf("preferences: write %s: %w", f.path, err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// isZero reports whether p sets nothing.
func isZero(p config.Pref) bool {
	return p.Required == nil && p.SubjectTag == nil && p.RejectScore == nil && p.Action == "" && p.Allow == nil && p.Deny == nil
}

// ValidUser checks a user name preferences may be kept for: a valid,
// lower-case model name, not the global model's "".
func ValidUser(u string) error {
	if u == "" || store.ValidUser(u) != nil || u != strings.ToLower(u) {
		return fmt.Errorf("%w: %q is not a lower-case user name", ErrInvalid, u)
	}
	return nil
}

// Validate checks every user, domain and preference of the layer.
func (l Layer) Validate() error {
	for _, u := range slices.Sorted(maps.Keys(l.Users)) {
		if err := ValidUser(u); err != nil {
			return err
		}
		if key, err := l.Users[u].Validate(); err != nil {
			return fmt.Errorf("%w: user %q: %s: %v", ErrInvalid, u, key, err)
		}
	}
	for _, d := range slices.Sorted(maps.Keys(l.Domains)) {
		if err := config.ValidDomain(d); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		if key, err := l.Domains[d].Validate(); err != nil {
			return fmt.Errorf("%w: domain %q: %s: %v", ErrInvalid, d, key, err)
		}
	}
	return nil
}
