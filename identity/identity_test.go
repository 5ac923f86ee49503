package identity

import (
	"errors"
	"testing"
)

func TestOf(t *testing.T) {
	tests := []struct {
		rule Rule
		in   string
		want string
	}{
		{Address, "Alice@Example.ORG", "alice@example.org"},
		{Address, "<bob@example.org>", "bob@example.org"},
		{Address, "carol", "carol"},
		{LocalPart, "Alice@Example.org", "alice"},
		{LocalPart, "carol", "carol"},
		{LocalPart, "a@b@example.org", "a@b"}, // the part before the last '@'
		{Global, "alice@example.org", ""},
		{Address, "../etc@example.org", ""},
		{Address, "", ""},
		{Address, "<>", ""},
		{LocalPart, "@example.org", ""},
	}
	for _, tt := range tests {
		if got := tt.rule.Of(tt.in); got != tt.want {
			t.Errorf("%s.Of(%q) = %q, want %q", tt.rule, tt.in, got, tt.want)
		}
	}
}

func TestFolder(t *testing.T) {
	tests := []struct {
		rule         Rule
		user, domain string
		want         string
		ok           bool
	}{
		{Address, "alice@example.org", "", "alice@example.org", true},
		{Address, "alice", "example.org", "alice@example.org", true},
		{Address, "alice", "", "", false},
		{LocalPart, "alice@example.org", "", "alice", true},
		{LocalPart, "alice", "example.org", "alice", true},
		{Global, "alice", "example.org", "", false},
	}
	for _, tt := range tests {
		got, ok := tt.rule.Folder(tt.user, tt.domain)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s.Folder(%q, %q) = %q, %v; want %q, %v", tt.rule, tt.user, tt.domain, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParse(t *testing.T) {
	for _, s := range []string{"address", "localpart", "global"} {
		if r, err := Parse(s); err != nil || string(r) != s {
			t.Errorf("Parse(%q) = %q, %v", s, r, err)
		}
	}
	if _, err := Parse("Address"); !errors.Is(err, ErrRule) {
		t.Errorf("Parse(\"Address\"): %v", err)
	}
}

func TestUnread(t *testing.T) {
	for _, tt := range []struct {
		rule   Rule
		model  string
		unread bool
	}{
		{Address, "", false},
		{Address, "alice@example.org", false},
		{Address, "alice", true},
		{Address, "Alice@example.org", true},
		{LocalPart, "alice", false},
		{LocalPart, "alice@example.org", true},
		{Global, "", false},
		{Global, "alice@example.org", true},
	} {
		if got := tt.rule.Unread(tt.model); (got != "") != tt.unread {
			t.Errorf("%s.Unread(%q) = %q, want unread %v", tt.rule, tt.model, got, tt.unread)
		}
	}
	// What Unread says is read, Of names: a recipient reaches it.
	for _, r := range []Rule{Address, LocalPart} {
		for _, rcpt := range []string{"alice@example.org", "Bob@Example.org"} {
			if m := r.Of(rcpt); r.Unread(m) != "" {
				t.Errorf("%s: the model %q of recipient %s is said unread: %s", r, m, rcpt, r.Unread(m))
			}
		}
	}
}
