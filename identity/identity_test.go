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
