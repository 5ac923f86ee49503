package main

import (
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/prefs"
	"github.com/spamd/spamd/prefs/prefstest"
	"github.com/spamd/spamd/store"
)

// TestPrefsCommand shows and sets preferences through a daemon's API
// with spamtrain prefs.
func TestPrefsCommand(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	pf, err := prefs.OpenFile(filepath.Join(dir, "prefs.json"))
	if err != nil {
		t.Fatal(err)
	}
	site := prefs.SiteOf(3, config.Actions{SubjectTag: "[SPAM]", RejectScore: 10}, config.Prefs{})
	pd := prefstest.New(pf, config.Actions{}, site, prefs.Layer{Domains: map[string]config.Pref{"example.org": {Action: "quarantine"}}})
	f, err := filter.New(store.NewMemory(), filter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: control.NewServer(control.Options{Filter: func() *filter.Filter { return f }, Prefs: pd}).Handler(),
		ConnContext: control.ConnContext}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	api := "--api=unix:" + sock
	for _, tt := range []struct {
		name  string
		args  []string
		code  int
		wants []string
	}{
		{"show", []string{api, "--user", "alice@example.org"}, 0, []string{"alice@example.org (domain example.org):",
			"required 3", "action quarantine domain", `subject_tag "[SPAM]" global`, "set through the API: nothing"}},
		{"set", []string{api, "--user", "alice@example.org", "required=4.5", "deny=*@bulk.example,spam.example", "subject_tag="}, 0,
			[]string{"required 4.5", `subject_tag ""`, `set through the API: required=4.5 subject_tag="" deny=*@bulk.example,spam.example`}},
		{"set one more key, keeping the others", []string{api, "--user", "alice@example.org", "action=reject"}, 0,
			[]string{"action reject user", "required=4.5", "deny=*@bulk.example"}},
		{"remove a key", []string{api, "--user", "alice@example.org", "required="}, 0, []string{"required 3 ", "global"}},
		{"a domain", []string{api, "--domain", "other.example", "required=6"}, 0, []string{"domain other.example:", "required 6 domain"}},
		{"clear", []string{api, "--user", "alice@example.org", "--clear"}, 0, []string{"set through the API: nothing"}},
		{"unknown key", []string{api, "--user", "alice@example.org", "threshold=1"}, 2, []string{"KEY one of required"}},
		{"not a number", []string{api, "--user", "alice@example.org", "required=high"}, 2, []string{"not a number"}},
		{"an action spamd refuses", []string{api, "--user", "alice@example.org", "action=discard"}, 1, []string{"action"}},
		{"nobody named", []string{api}, 2, []string{"--user or the --domain"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := spamtrain(t, "", append([]string{"prefs"}, tt.args...)...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d: %s %s", code, tt.code, out, errOut)
			}
			// Columns are aligned with spaces: one will do.
			flat := strings.Join(strings.Fields(out+errOut), " ")
			for _, w := range tt.wants {
				if !strings.Contains(flat, w) {
					t.Errorf("no %q in\n%s%s", w, out, errOut)
				}
			}
		})
	}
	if l := pd.Book().API(); len(l.Users) != 0 || l.Domains["other.example"].Required == nil {
		t.Errorf("the API's layer at the end: %+v", l)
	}
}
