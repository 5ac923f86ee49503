package main

import (
	"bytes"
	"cmp"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spamd/spamd/identity"
	"github.com/spamd/spamd/junkwatch"
)

// TestWarnIdentity checks that spamd says at start when the Junk folders
// and the milter can never name the same user.
func TestWarnIdentity(t *testing.T) {
	for _, tt := range []struct {
		name    string
		folders []string
		rule    identity.Rule
		domain  string
		warn    string
		layout  string // "" is %u
	}{
		{"accounts under address", []string{"alice", "bob"}, identity.Address, "", "named by account (such as alice)", ""},
		{"accounts with a domain", []string{"alice"}, identity.Address, "example.org", "", ""},
		{"addresses", []string{"alice@example.org"}, identity.Address, "", "", ""},
		{"local parts", []string{"alice"}, identity.LocalPart, "", "", ""},
		{"global", []string{"alice"}, identity.Global, "", "not learned", ""},
		{"domains and local parts", []string{"example.org/alice"}, identity.Address, "", "", "%d/%n"},
		{"local parts alone under address", []string{"alice"}, identity.Address, "", "named by account (such as alice)", "%n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			for _, f := range tt.folders {
				if err := os.MkdirAll(filepath.Join(base, f, "Maildir", ".Junk"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			pat, err := junkwatch.ParsePattern(filepath.Join(base, cmp.Or(tt.layout, "%u"), "Maildir", ".Junk"))
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			warnIdentity(slog.New(slog.NewTextHandler(&buf, nil)), pat, tt.rule, tt.domain)
			if got := buf.String(); (tt.warn == "") != (got == "") || !strings.Contains(got, tt.warn) {
				t.Errorf("logged %q, want a warning saying %q", got, tt.warn)
			}
		})
	}
}
