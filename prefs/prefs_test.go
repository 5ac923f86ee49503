package prefs

import (
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spamd/spamd/config"
)

func f(v float64) *float64 { return &v }
func s(v string) *string   { return &v }

func testBook() *Book {
	site := SiteOf(3, config.Actions{SubjectTag: "[SPAM]", RejectScore: 10, Reject: true},
		config.Prefs{Allow: []string{"friend@partner.example"}, Deny: []string{"*@spam.example", "partner.example"}})
	file := Layer{
		Domains: map[string]config.Pref{"example.org": {Required: f(4), Action: "quarantine", Allow: []string{"*@partner.example", "*@ally.example"}}},
		Users: map[string]config.Pref{
			"alice@example.org": {Required: f(2), SubjectTag: s(""), Deny: []string{"boss@partner.example"}},
			"bob@example.org":   {RejectScore: f(6)},
		},
	}
	api := Layer{Users: map[string]config.Pref{"bob@example.org": {RejectScore: f(7), Action: "reject"}}}
	return New(site, file, api)
}

// TestPrecedence checks each setting at each level: user, then domain,
// then the site; the API's layer over the file's, key by key.
func TestPrecedence(t *testing.T) {
	b := testBook()
	for _, tt := range []struct {
		name, user, domain string
		required           float64
		tag                string
		reject             float64
		action             string
		source             map[string]Level
	}{
		{"the site", "carol@other.example", "other.example", 3, "[SPAM]", 10, "reject",
			map[string]Level{"required": Global, "subject_tag": Global, "reject_score": Global, "action": Global}},
		{"the domain", "dave@example.org", "example.org", 4, "[SPAM]", 10, "quarantine",
			map[string]Level{"required": Domain, "subject_tag": Global, "reject_score": Global, "action": Domain}},
		{"the user over the domain", "alice@example.org", "example.org", 2, "", 10, "quarantine",
			map[string]Level{"required": User, "subject_tag": User, "reject_score": Global, "action": Domain}},
		{"the API over the file", "bob@example.org", "example.org", 4, "[SPAM]", 7, "reject",
			map[string]Level{"required": Domain, "subject_tag": Global, "reject_score": User, "action": User}},
		{"no user, no domain", "", "", 3, "[SPAM]", 10, "reject",
			map[string]Level{"required": Global, "subject_tag": Global, "reject_score": Global, "action": Global}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := b.For(tt.user, tt.domain)
			if p.Required != tt.required || p.SubjectTag != tt.tag || p.RejectScore != tt.reject || p.Action != tt.action {
				t.Errorf("got required %v, tag %q, reject %v, action %q", p.Required, p.SubjectTag, p.RejectScore, p.Action)
			}
			if !reflect.DeepEqual(p.Source, tt.source) {
				t.Errorf("sources %v, want %v", p.Source, tt.source)
			}
		})
	}
}

// TestListed checks each rule of the sender lists: what deny and allow
// match, agreement of envelope and From:, and the order of the levels.
func TestListed(t *testing.T) {
	b := testBook()
	alice, dave, carol := b.For("alice@example.org", "example.org"), b.For("dave@example.org", "example.org"), b.For("carol@other.example", "other.example")
	for _, tt := range []struct {
		name   string
		p      Prefs
		s      Sender
		want   Listing
		listed bool
	}{
		{"not listed", carol, Sender{Envelope: "someone@else.example", From: []string{"someone@else.example"}}, Listing{}, false},
		{"site deny by envelope", carol, Sender{Envelope: "x@spam.example", From: []string{"nice@else.example"}}, Listing{"deny", Global, "*@spam.example"}, true},
		{"site deny by From", carol, Sender{Envelope: "bounce@else.example", From: []string{"X@SPAM.example"}}, Listing{"deny", Global, "*@spam.example"}, true},
		{"site deny of an address with a slash", carol, Sender{Envelope: "a/b@spam.example", From: []string{"nice@else.example"}}, Listing{"deny", Global, "*@spam.example"}, true},
		{"site deny of a domain, From: with a slash", carol, Sender{Envelope: "bounce@else.example", From: []string{"x/y@partner.example"}}, Listing{"deny", Global, "partner.example"}, true},
		{"site deny of a domain", carol, Sender{Envelope: "y@partner.example", From: []string{"y@partner.example"}}, Listing{"deny", Global, "partner.example"}, true},
		{"site deny before site allow", carol, Sender{Envelope: "friend@partner.example", From: []string{"friend@partner.example"}}, Listing{"deny", Global, "partner.example"}, true},
		{"domain allow before site deny", dave, Sender{Envelope: "y@partner.example", From: []string{"y@partner.example"}}, Listing{"allow", Domain, "*@partner.example"}, true},
		{"user deny before domain allow", alice, Sender{Envelope: "boss@partner.example", From: []string{"boss@partner.example"}}, Listing{"deny", User, "boss@partner.example"}, true},
		{"user falls through to domain", alice, Sender{Envelope: "y@partner.example", From: []string{"y@partner.example"}}, Listing{"allow", Domain, "*@partner.example"}, true},
		{"allow needs the envelope to agree", dave, Sender{Envelope: "spammer@evil.example", From: []string{"y@ally.example"}}, Listing{}, false},
		{"allow needs every From: to agree", dave, Sender{Envelope: "y@ally.example", From: []string{"y@ally.example", "z@evil.example"}}, Listing{}, false},
		{"allow needs a From:", dave, Sender{Envelope: "y@ally.example"}, Listing{}, false},
		{"allow never matches the null sender", dave, Sender{Envelope: "", From: []string{"y@ally.example"}}, Listing{}, false},
		{"envelope and From: agree", dave, Sender{Envelope: "Y@Ally.example", From: []string{"y@ally.example"}}, Listing{"allow", Domain, "*@ally.example"}, true},
		{"domain entries match only that domain", dave, Sender{Envelope: "y@sub.ally.example", From: []string{"y@sub.ally.example"}}, Listing{}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.p.Listed(tt.s)
			if ok != tt.listed || got != tt.want {
				t.Errorf("Listed = %+v, %v; want %+v, %v", got, ok, tt.want, tt.listed)
			}
		})
	}
}

// TestListedAuthenticated checks that with an authserv-id an allow entry
// needs the From: domain vouched for by a field with that id.
func TestListedAuthenticated(t *testing.T) {
	site := SiteOf(3, config.Actions{}, config.Prefs{Allow: []string{"*@partner.example", "*@*.partner.example"}, AuthservID: "mx.example.org"})
	p := New(site, Layer{}, Layer{}).For("", "")
	from := "news@partner.example"
	for _, tt := range []struct {
		name   string
		from   string
		ar     []string
		listed bool
	}{
		{"no field", from, nil, false},
		{"DMARC pass", from, []string{"mx.example.org; dmarc=pass (p=reject) header.from=partner.example"}, true},
		{"another server's field", from, []string{"mx.evil.example; dmarc=pass header.from=partner.example"}, false},
		{"DMARC fail", from, []string{"mx.example.org; dmarc=fail header.from=partner.example"}, false},
		{"DMARC pass of another domain", from, []string{"mx.example.org; dmarc=pass header.from=evil.example"}, false},
		{"DKIM pass", from, []string{"mx.example.org 1; dkim=pass header.d=partner.example header.s=sel"}, true},
		{"DKIM of a parent", "a@mail.partner.example", []string{"mx.example.org; dkim=pass header.d=partner.example"}, true},
		{"DKIM of a subdomain does not vouch for the parent", from, []string{"mx.example.org; dkim=pass header.d=mail.partner.example"}, false},
		{"SPF pass", from, []string{"mx.example.org; spf=pass smtp.mailfrom=news@partner.example"}, true},
		{"SPF softfail", from, []string{"mx.example.org; spf=softfail smtp.mailfrom=news@partner.example"}, false},
		{"one of several results", from, []string{"mx.example.org; spf=none smtp.mailfrom=x@y.example; dkim = pass (good) header.d = partner.example"}, true},
		{"a result in a comment", from, []string{"mx.example.org; dkim=fail (dkim=pass header.d=partner.example) header.d=partner.example"}, false},
		{"the id compared without case", from, []string{"MX.Example.ORG; dmarc=pass header.from=Partner.Example"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, ok := p.Listed(Sender{Envelope: tt.from, From: []string{tt.from}, AuthResults: tt.ar})
			if ok != tt.listed {
				t.Errorf("listed %v, want %v", ok, tt.listed)
			}
		})
	}
	// Each From: domain must be vouched for, not one of them.
	two := Sender{Envelope: "a@x.partner.example", From: []string{"a@x.partner.example", "b@y.partner.example"},
		AuthResults: []string{"mx.example.org; dkim=pass header.d=x.partner.example"}}
	if l, ok := p.Listed(two); ok {
		t.Errorf("one of two From: domains vouched for, listed: %+v", l)
	}
	two.AuthResults = append(two.AuthResults, "mx.example.org; dmarc=pass header.from=y.partner.example")
	if _, ok := p.Listed(two); !ok {
		t.Error("both From: domains vouched for, not listed")
	}
	// Deny entries need no authentication.
	site.Deny = []string{"*@evil.example"}
	if l, ok := New(site, Layer{}, Layer{}).For("", "").Listed(Sender{Envelope: "a@evil.example", From: []string{"a@evil.example"}}); !ok || l.List != "deny" {
		t.Errorf("deny without authentication: %+v %v", l, ok)
	}
}

func TestAuthenticated(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{`mx.example.org; dmarc=pass header.from=a.example; dkim=pass header.d=b.example; spf=pass smtp.mailfrom=x@c.example`, []string{"a.example", ".b.example", "c.example"}},
		{`"mx.example.org"; dkim=pass header.d="q.example"`, []string{".q.example"}},
		{"mx.example.org;\r\n\tdkim=pass\r\n\theader.d=f.example", []string{".f.example"}},
		{`mx.example.org; none`, nil},
		{`mx.example.org; spf=pass smtp.mailfrom=c.example`, []string{"c.example"}},
		{`mx.example.org; dkim=pass header.d=localhost`, nil},
		{`mx.example.org; dkim/1=pass header.d=v.example`, []string{".v.example"}},
		{`mx.example.org; dkim=pass header.d=a.example (unclosed`, []string{".a.example"}},
		{``, nil},
	} {
		if got := Authenticated([]string{tt.in}, "mx.example.org"); !slices.Equal(got, tt.want) {
			t.Errorf("Authenticated(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzAuthenticated checks that any field value is read without a panic,
// and that what it vouches for comes from the value.
func FuzzAuthenticated(f *testing.F) {
	for _, s := range []string{
		"mx.example.org; dmarc=pass header.from=a.example",
		`mx.example.org 1; dkim=pass (sig "ok") header.d="b.example" header.s=x; spf=fail smtp.mailfrom=y@z.example`,
		"mx.example.org; (((;dkim=pass", `mx.example.org; dkim="pass\"`, "mx.example.org;;;=;=", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, d := range Authenticated([]string{v}, "mx.example.org") {
			if d == "" || d == "." {
				t.Errorf("empty domain from %q", v)
			}
		}
	})
}

// FuzzMatch checks that any entry a list may hold is matched against any
// address without a panic, as path.Match matches it (the maps of plain
// addresses and domains are a shortcut, not another rule), and that a
// domain entry, and its glob, match every address in the domain whatever
// its local part holds.
func FuzzMatch(f *testing.F) {
	for _, s := range [][2]string{
		{"*@spam.example", "a/b@spam.example"}, {"partner.example", "x@Partner.example"}, {"Boss@Partner.example", "boss@partner.example"},
		{"[a-c]?@*.example", "b1@x.example"}, {"*@*@*", "a@b"}, {"\\*x", "*x@y"}, {"[^a]*", "/@z.example"}, {"a@b", "a@b@b"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, entry, addr string) {
		a := normalize(addr)
		if config.ValidateList([]string{entry}) == nil {
			pattern := strings.ToLower(entry)
			if !strings.Contains(pattern, "@") {
				pattern = "*@" + pattern
			}
			want, _ := path.Match(pattern, a)
			want = want && a != ""
			if _, got := newEntries([]string{entry}).find(a); got != want {
				t.Errorf("entry %q, address %q: matched %v, path.Match says %v", entry, addr, got, want)
			}
		}
		local, domain, ok := strings.Cut(a, "@")
		if !ok || domain == "" || strings.Contains(domain, "@") || config.ValidateList([]string{domain}) != nil ||
			strings.ContainsAny(domain, "*?[]\\") {
			return
		}
		for _, e := range []string{domain, "*@" + domain} {
			if _, ok := newEntries([]string{e}).find(a); !ok {
				t.Errorf("%q does not match %q (local part %q)", addr, e, local)
			}
		}
	})
}
