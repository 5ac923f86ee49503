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
	"cmp"
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
	// siteList, userLists and domainLists are the sender lists made
	// ready for matching once, here, rather than for every recipient of
	// every message.
	siteList               *list
	userLists, domainLists map[string]*list
}

// New returns the book of the site's settings and the two layers, api
// taking precedence over file.
func New(site Site, file, api Layer) *Book {
	return &Book{site: site, file: file, api: api,
		siteList:    newList(Global, site.Allow, site.Deny),
		userLists:   lists(User, file.Users, api.Users),
		domainLists: lists(Domain, file.Domains, api.Domains)}
}

// lists makes ready the sender lists of every user (or domain) of the
// file's and the API's layers, the API's lists over the file's.
func lists(level Level, file, api map[string]config.Pref) map[string]*list {
	out := map[string]*list{}
	for _, m := range []map[string]config.Pref{file, api} {
		for name := range m {
			if _, done := out[name]; !done {
				q := merge(file[name], api[name])
				out[name] = newList(level, q.Allow, q.Deny)
			}
		}
	}
	return out
}

// Site returns the site's settings.
func (b *Book) Site() Site { return b.site }

// API returns the layer set through the API.
func (b *Book) API() Layer { return b.api }

// WithAPI returns a book like b with api as the layer set through the
// API.
func (b *Book) WithAPI(api Layer) *Book { return New(b.site, b.file, api) }

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
	// lists are the sender lists of the recipient's levels, the most
	// specific first.
	lists      []*list
	authservID string
}

// list is one level's sender lists.
type list struct {
	level       Level
	allow, deny entries
}

// newList returns a level's lists made ready for matching, nil if both
// are empty.
func newList(level Level, allow, deny []string) *list {
	if len(allow)+len(deny) == 0 {
		return nil
	}
	return &list{level: level, allow: newEntries(allow), deny: newEntries(deny)}
}

// entries is a sender list made ready for matching: its plain addresses
// and domains in maps, so that a list of thousands costs a message a
// few lookups, and its globs, tried in turn. Keys and patterns are
// lower-cased; the values are the entries as written, for the log.
type entries struct {
	addrs, domains map[string]string
	globs          []glob
}

// glob is a list entry with wildcards.
type glob struct{ pattern, entry string }

func newEntries(l []string) entries {
	es := entries{addrs: map[string]string{}, domains: map[string]string{}}
	for _, e := range l {
		k := strings.ToLower(e)
		switch {
		case strings.ContainsAny(k, `*?[\`):
			if !strings.Contains(k, "@") {
				k = "*@" + k // a domain's glob
			}
			es.globs = append(es.globs, glob{k, e})
		case strings.Contains(k, "@"):
			es.addrs[k] = cmp.Or(es.addrs[k], e)
		default:
			es.domains[k] = cmp.Or(es.domains[k], e)
		}
	}
	return es
}

// find returns the entry that matches the address addr (normalized by
// normalize), if any.
func (es entries) find(addr string) (string, bool) {
	if addr == "" {
		return "", false
	}
	if e, ok := es.addrs[addr]; ok {
		return e, true
	}
	if e, ok := es.domains[domainOf(addr)]; ok {
		return e, true
	}
	for _, g := range es.globs {
		if ok, _ := path.Match(g.pattern, addr); ok {
			return g.entry, true
		}
	}
	return "", false
}

// agreeing returns the entry that matches the envelope sender env and
// every From: address of from (all normalized), if any.
func (es entries) agreeing(env string, from []string) (string, bool) {
	if env == "" || len(from) == 0 {
		return "", false
	}
	every := func(ok func(string) bool) bool {
		return !slices.ContainsFunc(from, func(f string) bool { return !ok(f) })
	}
	if e, ok := es.addrs[env]; ok && every(func(f string) bool { return f == env }) {
		return e, true
	}
	if d := domainOf(env); d != "" {
		if e, ok := es.domains[d]; ok && every(func(f string) bool { return domainOf(f) == d }) {
			return e, true
		}
	}
	for _, g := range es.globs {
		match := func(a string) bool { ok, _ := path.Match(g.pattern, a); return ok }
		if match(env) && every(match) {
			return g.entry, true
		}
	}
	return "", false
}

// normalize returns an address as the lists match it: lower-cased, and
// with a NUL for each '/'. path.Match's wildcards stop at '/', which a
// local part may hold (a/b@spam.example): matched as is, such an address
// would slip past every deny glob. Entries hold no '/' nor control byte
// (config.ValidateList), so a NUL is matched by exactly the wildcards
// that should match a '/', and by no plain entry.
func normalize(addr string) string {
	return strings.ReplaceAll(strings.ToLower(addr), "/", "\x00")
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
	}
	// The lists, most specific first.
	for _, l := range []*list{b.userLists[user], b.domainLists[domain], b.siteList} {
		if l != nil {
			p.lists = append(p.lists, l)
		}
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
	env := normalize(s.Envelope)
	from := make([]string, len(s.From))
	for i, f := range s.From {
		from[i] = normalize(f)
	}
	var auth []string // computed once, when an allow entry needs it
	authDone := false
	for _, l := range p.lists {
		if e, ok := l.deny.find(env); ok {
			return Listing{"deny", l.level, e}, true
		}
		for _, f := range from {
			if e, ok := l.deny.find(f); ok {
				return Listing{"deny", l.level, e}, true
			}
		}
		e, ok := l.allow.agreeing(env, from)
		if !ok {
			continue
		}
		if p.authservID != "" {
			if !authDone {
				auth, authDone = Authenticated(s.AuthResults, p.authservID), true
			}
			// Every From: domain vouched for: the entry matched them
			// all, and each is the sender's to write.
			if slices.ContainsFunc(from, func(f string) bool { return !vouched(auth, domainOf(f)) }) {
				continue
			}
		}
		return Listing{"allow", l.level, e}, true
	}
	return Listing{}, false
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
