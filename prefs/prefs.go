// Package prefs says what applies to one recipient of a message: the
// score from which its mail is spam, the subject tag, the action spam
// gets and the score from which it is rejected, and whether the sender is
// on an allow or deny list.
//
// # Precedence
//
// Each setting is the recipient's user's, else its domain's, else the
// site's (Site: the filter's required score and [actions]). Two sources
// give user and domain settings: the configuration file and the layer set
// through the control API, which wins key by key for the same user or
// domain. Sender lists are not inherited but checked in the same order:
// the user's, then the domain's, then the site's; the first level that
// lists the sender decides, and within a level deny comes before allow.
//
// # Sender lists and forgery
//
// An entry is an address, a domain (standing for every address in it) or
// a glob of either (path.Match syntax: *@*.example.org), compared without
// case. The envelope sender and the From: addresses are both the sender's
// to write, so the lists treat them differently:
//
//   - a deny entry matches when the envelope sender or any From: address
//     matches: a forger can only get their own mail refused;
//   - an allow entry matches only when the envelope sender and every
//     From: address match it (the null sender never does), and, when the
//     site names its authserv-id, only when an Authentication-Results
//     field with that id says the From: domain passed DMARC, DKIM with
//     header.d the domain or a parent of it, or SPF with smtp.mailfrom in
//     the domain.
//
// Without an authserv-id an allow list trusts whoever writes an allowed
// address in both places; the configuration's documentation says so.
// Listed mail is never learned from automatically, so a forged allowed
// sender cannot teach the model either.
package prefs

import (
	"path"
	"slices"
	"strings"

	"github.com/spamd/spamd/config"
)

// Level is where a setting or a listing came from.
type Level string

// The levels, from the most to the least specific.
const (
	User   Level = "user"
	Domain Level = "domain"
	Global Level = "global"
)

// Site is what applies where no user or domain says otherwise.
type Site struct {
	// Required is the score from which mail is spam: the filter's
	// Config.Required.
	Required float64
	// SubjectTag, RejectScore and Action come from [actions]: Action is
	// reject if reject is on, else quarantine if quarantine_spam is,
	// else tag.
	SubjectTag  string
	RejectScore float64
	Action      string
	// Allow and Deny are [prefs] allow and deny.
	Allow, Deny []string
	// AuthservID is [prefs] authserv_id.
	AuthservID string
}

// SiteOf returns the site's settings: the filter's required score, the
// [actions] and the [prefs] lists.
func SiteOf(required float64, a config.Actions, p config.Prefs) Site {
	action := "tag"
	switch {
	case a.Reject:
		action = "reject"
	case a.QuarantineSpam:
		action = "quarantine"
	}
	return Site{Required: required, SubjectTag: a.SubjectTag, RejectScore: a.RejectScore, Action: action,
		Allow: p.Allow, Deny: p.Deny, AuthservID: p.AuthservID}
}

// Layer is a set of user and domain preferences: the configuration
// file's, or those set through the API.
type Layer struct {
	Users   map[string]config.Pref `json:"users,omitempty"`
	Domains map[string]config.Pref `json:"domains,omitempty"`
}

// Book holds everyone's preferences. Its methods are safe for concurrent
// use; a Book is not changed after New.
type Book struct {
	site Site
	// file and api are the configuration's layer and the API's.
	file, api Layer
}

// New returns the book of the site's settings and the two layers, api
// taking precedence over file.
func New(site Site, file, api Layer) *Book {
	return &Book{site: site, file: file, api: api}
}

// Site returns the site's settings.
func (b *Book) Site() Site { return b.site }

// API returns the layer set through the API.
func (b *Book) API() Layer { return b.api }

// WithAPI returns a book like b with api as the layer set through the
// API.
func (b *Book) WithAPI(api Layer) *Book { return &Book{site: b.site, file: b.file, api: api} }

// SubjectTags returns every subject tag some recipient's spam may get:
// the site's and those users and domains set, without repeats, the empty
// tag left out.
func (b *Book) SubjectTags() []string {
	var out []string
	add := func(t string) {
		if t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	add(b.site.SubjectTag)
	for _, l := range []Layer{b.file, b.api} {
		for _, m := range []map[string]config.Pref{l.Users, l.Domains} {
			for _, p := range m {
				if p.SubjectTag != nil {
					add(*p.SubjectTag)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// Prefs is what applies to one recipient.
type Prefs struct {
	// User and Domain are the recipient's user name and domain, "" if
	// none.
	User, Domain string
	// Required, SubjectTag, RejectScore and Action are in force for the
	// recipient; Source says from which level each came, by key.
	Required    float64
	SubjectTag  string
	RejectScore float64
	Action      string
	Source      map[string]Level
	lists       []list
	authservID  string
}

// list is one level's sender lists.
type list struct {
	level       Level
	allow, deny []string
}

// For returns what applies to the recipient with user name user and
// domain domain (either may be "").
func (b *Book) For(user, domain string) Prefs {
	s := b.site
	p := Prefs{User: user, Domain: domain, Required: s.Required, SubjectTag: s.SubjectTag, RejectScore: s.RejectScore,
		Action: s.Action, authservID: s.AuthservID,
		Source: map[string]Level{"required": Global, "subject_tag": Global, "reject_score": Global, "action": Global}}
	// From the least to the most specific, each level overwrites what it
	// sets; the lists go the other way, most specific first.
	var levels []struct {
		level Level
		pref  config.Pref
	}
	if domain != "" {
		levels = append(levels, struct {
			level Level
			pref  config.Pref
		}{Domain, merge(b.file.Domains[domain], b.api.Domains[domain])})
	}
	if user != "" {
		levels = append(levels, struct {
			level Level
			pref  config.Pref
		}{User, merge(b.file.Users[user], b.api.Users[user])})
	}
	for _, l := range levels {
		q := l.pref
		if q.Required != nil {
			p.Required, p.Source["required"] = *q.Required, l.level
		}
		if q.SubjectTag != nil {
			p.SubjectTag, p.Source["subject_tag"] = *q.SubjectTag, l.level
		}
		if q.RejectScore != nil {
			p.RejectScore, p.Source["reject_score"] = *q.RejectScore, l.level
		}
		if q.Action != "" {
			p.Action, p.Source["action"] = q.Action, l.level
		}
		if len(q.Allow)+len(q.Deny) > 0 {
			p.lists = append([]list{{l.level, q.Allow, q.Deny}}, p.lists...)
		}
	}
	if len(s.Allow)+len(s.Deny) > 0 {
		p.lists = append(p.lists, list{Global, s.Allow, s.Deny})
	}
	return p
}

// merge returns base with what over sets put over it, key by key.
func merge(base, over config.Pref) config.Pref {
	if over.Required != nil {
		base.Required = over.Required
	}
	if over.SubjectTag != nil {
		base.SubjectTag = over.SubjectTag
	}
	if over.RejectScore != nil {
		base.RejectScore = over.RejectScore
	}
	if over.Action != "" {
		base.Action = over.Action
	}
	if over.Allow != nil {
		base.Allow = over.Allow
	}
	if over.Deny != nil {
		base.Deny = over.Deny
	}
	return base
}

// Sender is what a message says of its sender.
type Sender struct {
	// Envelope is the envelope sender (MAIL FROM), "" for the null
	// sender.
	Envelope string
	// From lists the addresses of the From: field.
	From []string
	// AuthResults lists the values of the Authentication-Results fields.
	AuthResults []string
}

// Listing says that a list named the sender.
type Listing struct {
	// List is "allow" or "deny".
	List string
	// Level is whose list it was.
	Level Level
	// Entry is the entry that matched.
	Entry string
}

// Listed returns the listing that decides for the sender, if any: the
// first level, most specific first, whose deny or allow list names it.
func (p Prefs) Listed(s Sender) (Listing, bool) {
	if len(p.lists) == 0 {
		return Listing{}, false
	}
	env := strings.ToLower(s.Envelope)
	from := make([]string, len(s.From))
	for i, f := range s.From {
		from[i] = strings.ToLower(f)
	}
	var auth []string // computed once, when an allow entry needs it
	authDone := false
	for _, l := range p.lists {
		for _, e := range l.deny {
			if match(e, env) || slices.ContainsFunc(from, func(f string) bool { return match(e, f) }) {
				return Listing{"deny", l.level, e}, true
			}
		}
		for _, e := range l.allow {
			if env == "" || len(from) == 0 || !match(e, env) || slices.ContainsFunc(from, func(f string) bool { return !match(e, f) }) {
				continue
			}
			if p.authservID != "" {
				if !authDone {
					auth, authDone = Authenticated(s.AuthResults, p.authservID), true
				}
				if !slices.ContainsFunc(from, func(f string) bool { return vouched(auth, domainOf(f)) }) {
					continue
				}
			}
			return Listing{"allow", l.level, e}, true
		}
	}
	return Listing{}, false
}

// match reports whether the lower-cased address addr matches the list
// entry e: an address or a glob of one, or a domain or a glob of one,
// which stands for every address in it.
func match(e, addr string) bool {
	if addr == "" {
		return false
	}
	e = strings.ToLower(e)
	if !strings.Contains(e, "@") {
		e = "*@" + e
	}
	// path.Match's wildcards stop at '/', which a local part may hold
	// (a/b@spam.example): matched as is, such an address would slip past
	// every deny entry. Entries hold no '/' nor control byte
	// (config.ValidateList), so a NUL in its place is matched by exactly
	// the wildcards that should match it, and by no literal.
	ok, _ := path.Match(e, strings.ReplaceAll(addr, "/", "\x00"))
	return ok
}

// domainOf returns the domain of an address, "" if it has none.
func domainOf(addr string) string {
	if i := strings.LastIndexByte(addr, '@'); i >= 0 {
		return addr[i+1:]
	}
	return ""
}

// vouched reports whether the domain d of a From: address is among the
// authenticated domains, or a subdomain of one vouched for by a DKIM
// signature (marked with a leading '.').
func vouched(auth []string, d string) bool {
	if d == "" {
		return false
	}
	for _, a := range auth {
		if a == d || strings.HasPrefix(a, ".") && (d == a[1:] || strings.HasSuffix(d, a)) {
			return true
		}
	}
	return false
}
