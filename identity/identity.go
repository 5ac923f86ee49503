// Package identity is the one rule that names a mail user's model, shared
// by the milter (recipients), the Junk-folder watcher (mail folders) and
// the API's report channel (IMAPSieve), so that the model a user's
// correction trains is the model their mail is classified with.
//
// The rule is spamd's [milter] users setting:
//
//   - "address": the address, lower-cased: alice@example.org;
//   - "localpart": the part before '@', lower-cased: alice;
//   - "global": no user's own model; everyone has the global one.
//
// A mail folder is named as Dovecot names its user (Pattern): %u, the
// whole user name, an address for virtual users or a bare account name
// for system users; or %n@%d, the user part and the domain of a layout
// such as /var/vmail/%d/%n; or %n alone. A bare name becomes an address
// with the site's domain ([watch] domain) when the rule wants addresses.
package identity

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spamd/spamd/store"
)

// Rule names mail users' models.
type Rule string

// The rules.
const (
	Address   Rule = "address"
	LocalPart Rule = "localpart"
	Global    Rule = "global"
)

// ErrRule is wrapped by the error of an unknown rule.
var ErrRule = errors.New("unknown user naming rule")

// Parse returns the rule s names.
func Parse(s string) (Rule, error) {
	switch r := Rule(s); r {
	case Address, LocalPart, Global:
		return r, nil
	}
	return "", fmt.Errorf("%w %q: want address, localpart or global", ErrRule, s)
}

// Of returns the model name of the mail user name, an address or a bare
// account name ("<" and ">" around it are dropped): "" for the global
// model, under Global, and for a name that is no valid model name, which
// then has no model of its own.
func (r Rule) Of(name string) string {
	if r == Global {
		return ""
	}
	u := strings.ToLower(strings.Trim(name, "<> "))
	if r == LocalPart {
		if i := strings.LastIndexByte(u, '@'); i >= 0 {
			u = u[:i]
		}
	}
	if u == "" || store.ValidUser(u) != nil {
		return ""
	}
	return u
}

// Folder names the model of a mail folder's user, as Of does, a bare
// account name taking domain (when not "") under Address. ok is false
// when the folder can name no model under the rule: a bare name under
// Address without a domain, which the milter never names, or any folder
// under Global.
func (r Rule) Folder(user, domain string) (model string, ok bool) {
	if r == Address && !strings.Contains(user, "@") {
		if domain == "" {
			return "", false
		}
		user += "@" + domain
	}
	model = r.Of(user)
	return model, model != ""
}

// Unread returns why the milter never classifies mail with the model
// named model under the rule, "" when it may: the global model always
// may; under Global no other; under Address a name without '@', which
// recipients as a mail server hands them never are; under LocalPart a
// name with one; under both a name with capitals, since names are
// lower-cased.
func (r Rule) Unread(model string) string {
	switch {
	case model == "":
		return ""
	case r == Global:
		return `[milter] users = "global" classifies all mail with the global model`
	case strings.ToLower(model) != model:
		return "model names are lower-case"
	case r == Address && !strings.Contains(model, "@"):
		return `named like an account, and [milter] users = "address" names models by address`
	case r == LocalPart && strings.Contains(model, "@"):
		return `named by address, and [milter] users = "localpart" names models by the part before '@'`
	}
	return ""
}
