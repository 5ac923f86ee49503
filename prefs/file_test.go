package prefs

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/spamd/spamd/config"
)

// TestFile checks that the API's layer is kept across a reopening, that
// the zero preferences remove an entry, and that bad ones change nothing.
func TestFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "prefs.json")
	pf, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if l := pf.Layer(); len(l.Users)+len(l.Domains) != 0 {
		t.Fatalf("a missing file is not empty: %+v", l)
	}
	alice := config.Pref{Required: f(5), SubjectTag: s(""), Allow: []string{"boss@example.com"}}
	if _, err := pf.SetUser("alice@example.org", alice); err != nil {
		t.Fatal(err)
	}
	if _, err := pf.SetDomain("example.org", config.Pref{Action: "quarantine"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		name string
		set  func() (Layer, error)
	}{
		{"upper-case user", func() (Layer, error) { return pf.SetUser("Alice@example.org", alice) }},
		{"the global model", func() (Layer, error) { return pf.SetUser("", alice) }},
		{"a user climbing", func() (Layer, error) { return pf.SetUser("../x", alice) }},
		{"a bad domain", func() (Layer, error) { return pf.SetDomain("a@b", alice) }},
		{"a bad action", func() (Layer, error) { return pf.SetUser("bob", config.Pref{Action: "discard"}) }},
		{"a bad entry", func() (Layer, error) { return pf.SetUser("bob", config.Pref{Deny: []string{"a b"}}) }},
	} {
		if _, err := bad.set(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", bad.name, err)
		}
	}
	again, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := Layer{Users: map[string]config.Pref{"alice@example.org": alice}, Domains: map[string]config.Pref{"example.org": {Action: "quarantine"}}}
	if got := again.Layer(); !reflect.DeepEqual(got, want) {
		t.Errorf("reopened: %+v, want %+v", got, want)
	}
	if _, err := again.SetUser("alice@example.org", config.Pref{}); err != nil {
		t.Fatal(err)
	}
	if l := again.Layer(); len(l.Users) != 0 || len(l.Domains) != 1 {
		t.Errorf("after removing alice: %+v", l)
	}
	// A file that holds what the API would refuse is refused.
	if err := os.WriteFile(path, []byte(`{"users":{"bob":{"action":"discard"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFile(path); !errors.Is(err, ErrInvalid) {
		t.Errorf("a bad file: %v", err)
	}
	if err := os.WriteFile(path, []byte(`{"users":{"bob":{"threshold":1}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFile(path); !errors.Is(err, ErrInvalid) {
		t.Errorf("an unknown key: %v", err)
	}
}

// FuzzOpenFile checks that any content of the API's preferences file is
// refused or read as a layer the API could have written, without a panic.
func FuzzOpenFile(f *testing.F) {
	for _, s := range []string{
		`{"users":{"alice@example.org":{"required":5,"subject_tag":"","allow":["boss@example.com"]}},"domains":{"example.org":{"action":"quarantine"}}}`,
		`{"users":{"Bob":{}}}`, `{"users":{"bob":{"action":"discard"}}}`, `{"domains":{"a@b":{}}}`, `{}`, `null`, ``, `{"users":{"x":{"deny":["*@[a-"]}}}`,
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "prefs.json")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		pf, err := OpenFile(path)
		if err != nil {
			return
		}
		if err := pf.Layer().Validate(); err != nil {
			t.Errorf("read %q, a layer the API would refuse: %v", b, err)
		}
	})
}
