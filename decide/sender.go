package decide

import (
	"bytes"
	"net/mail"
	"strings"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/prefs"
)

// MaxSenderFields bounds the From: addresses and the
// Authentication-Results fields read of a message for the sender lists.
const MaxSenderFields = 20

// SenderOf returns what raw says of its sender, with envelope as the
// envelope sender ("" for the null sender): the addresses of its first
// From: field that holds any and the values of its Authentication-Results fields, at
// most MaxSenderFields of each, read as the milter reads the fields the
// MTA sends it (line ends as bare LF, the white space after the colon
// left out).
func SenderOf(raw []byte, envelope string) prefs.Sender {
	s := prefs.Sender{Envelope: strings.TrimSpace(envelope)}
	fields, _, _ := splitHeader(raw)
	for _, f := range fields {
		name, value, ok := bytes.Cut(f, []byte(":"))
		if !ok {
			continue
		}
		v := strings.ReplaceAll(string(value), "\r\n", "\n")
		v = strings.TrimRight(strings.TrimLeft(v, " \t"), "\n")
		switch n := string(bytes.TrimRight(name, " \t")); {
		case s.From == nil && strings.EqualFold(n, "From"):
			s.From = Addresses(v)
		case len(s.AuthResults) < MaxSenderFields && strings.EqualFold(n, "Authentication-Results"):
			s.AuthResults = append(s.AuthResults, v)
		}
	}
	return s
}

// Addresses returns the addresses of an address-list field value, at
// most MaxSenderFields: as net/mail reads them, else, for a value it
// cannot read (an unknown charset in a display name, a stray quote),
// every word that holds an '@', without its angle brackets.
func Addresses(v string) []string {
	var out []string
	if list, err := mail.ParseAddressList(v); err == nil {
		for _, a := range list {
			out = append(out, a.Address)
		}
	} else {
		for _, w := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == '\t' || r == ',' || r == '\n' || r == '\r' }) {
			if i := strings.IndexByte(w, '<'); i >= 0 {
				w = w[i+1:]
			}
			if w = strings.Trim(w, "<>\"'();"); strings.Count(w, "@") == 1 {
				out = append(out, w)
			}
		}
	}
	return out[:min(len(out), MaxSenderFields)]
}

// DomainOf returns the lower-cased domain of a recipient address, "" if
// it has none that could name preferences: the domain
// whose preferences apply to the recipient.
func DomainOf(rcpt string) string {
	a := strings.Trim(rcpt, "<> ")
	i := strings.LastIndexByte(a, '@')
	if i < 0 {
		return ""
	}
	d := strings.ToLower(a[i+1:])
	if config.ValidDomain(d) != nil {
		return ""
	}
	return d
}
