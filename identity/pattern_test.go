package identity

import (
	"errors"
	"testing"
)

func TestParsePattern(t *testing.T) {
	for _, tt := range []struct {
		in                    string
		prefix, elems, suffix string
		bad                   bool
	}{
		{in: "/var/mail/%u/Maildir/.Junk", prefix: "/var/mail", elems: "%u", suffix: "Maildir/.Junk"},
		{in: "/home/%n/Maildir/.Junk", prefix: "/home", elems: "%n", suffix: "Maildir/.Junk"},
		{in: "/var/vmail/%d/%n/Maildir/.Junk", prefix: "/var/vmail", elems: "%d/%n", suffix: "Maildir/.Junk"},
		{in: "/var/vmail/%n@x/.Junk", bad: true},
		{in: "/srv/%d/users/%n/.Junk", prefix: "/srv", elems: "%d/users/%n", suffix: ".Junk"},
		{in: "/srv/%n/%d/.Junk", prefix: "/srv", elems: "%n/%d", suffix: ".Junk"},
		{in: "/srv/%d/%u/.Junk", prefix: "/srv", elems: "%d/%u", suffix: ".Junk"},
		{in: "/srv/%u/%n/.Junk", bad: true},
		{in: "/srv/%d/Maildir/.Junk", bad: true},
		{in: "/srv/%u/%u/.Junk", bad: true},
		{in: "/%u/Maildir/.Junk", bad: true},
		{in: "/var/mail/%u", bad: true},
		{in: "/var/mail/%x/.Junk", bad: true},
		{in: "var/mail/%u/.Junk", bad: true},
		{in: "/var/mail/../%u/.Junk", bad: true},
		{in: "/var/mail/Maildir/.Junk", bad: true},
	} {
		p, err := ParsePattern(tt.in)
		if tt.bad {
			if !errors.Is(err, ErrPattern) {
				t.Errorf("ParsePattern(%q) = %v, want ErrPattern", tt.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParsePattern(%q): %v", tt.in, err)
			continue
		}
		elems := ""
		for i, e := range p.Elems() {
			if i > 0 {
				elems += "/"
			}
			elems += e
		}
		if p.Prefix() != tt.prefix || elems != tt.elems || p.Suffix() != tt.suffix || p.String() != tt.in {
			t.Errorf("ParsePattern(%q) = %q, %q, %q (%s)", tt.in, p.Prefix(), elems, p.Suffix(), p)
		}
	}
}

// TestPatternNames checks the names a pattern gives folders and the
// folders it gives names, as Dovecot's %u, %n and %d do.
func TestPatternNames(t *testing.T) {
	for _, tt := range []struct {
		pattern, user, dir string // dir "" when no folder can be the user's
	}{
		{"/var/mail/%u/Maildir/.Junk", "alice", "/var/mail/alice"},
		{"/var/mail/%u/Maildir/.Junk", "alice@example.org", "/var/mail/alice@example.org"},
		{"/home/%n/Maildir/.Junk", "alice", "/home/alice"},
		{"/home/%n/Maildir/.Junk", "alice@example.org", ""},
		{"/var/vmail/%d/%n/Maildir/.Junk", "alice@example.org", "/var/vmail/example.org/alice"},
		{"/var/vmail/%d/%n/Maildir/.Junk", "alice", ""},
		{"/srv/%n/%d/.Junk", "bob@example.net", "/srv/bob/example.net"},
		{"/srv/%d/%u/.Junk", "bob@example.net", "/srv/example.net/bob@example.net"},
		{"/srv/%d/%u/.Junk", "bob", ""},
		{"/var/mail/%u/Maildir/.Junk", "../etc", ""},
		{"/var/vmail/%d/%n/Maildir/.Junk", "a@b@example.org", ""},
	} {
		p, err := ParsePattern(tt.pattern)
		if err != nil {
			t.Fatal(err)
		}
		dir, ok := p.Dir(tt.user)
		if dir != tt.dir || ok != (tt.dir != "") {
			t.Errorf("%s: Dir(%q) = %q, %v; want %q", tt.pattern, tt.user, dir, ok, tt.dir)
		}
		if ok {
			vals, _ := p.Values(tt.user)
			if got := p.Name(vals); got != tt.user {
				t.Errorf("%s: Name(Values(%q)) = %q", tt.pattern, tt.user, got)
			}
		}
	}
	for _, tt := range []struct {
		v, name string
		ok      bool
	}{
		{VarUser, "alice@example.org", true},
		{VarLocal, "alice", true},
		{VarLocal, "alice@example.org", false},
		{VarDomain, "example.org", true},
		{VarDomain, "", false},
		{VarUser, "..", false},
		{VarDomain, "a/b", false},
		{"%x", "a", false},
	} {
		if got := ValidValue(tt.v, tt.name); got != tt.ok {
			t.Errorf("ValidValue(%s, %q) = %v", tt.v, tt.name, got)
		}
	}
}
