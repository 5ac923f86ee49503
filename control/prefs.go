package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/prefs"
)

// PrefsService is what the API needs of the recipients' preferences:
// those in force, the site's [actions] they are applied with, and the
// layer set through the API, which SetUser and SetDomain change (the
// zero config.Pref removing an entry) and which the daemon applies from
// the next message on.
type PrefsService interface {
	Book() *prefs.Book
	Actions() config.Actions
	SetUser(user string, p config.Pref) error
	SetDomain(domain string, p config.Pref) error
}

// Prefs is the answer of /v1/prefs: what applies to a recipient, and
// what the API's layer sets for the user or domain asked about.
type Prefs struct {
	// User and Domain are the recipient asked about.
	User   string `json:"user,omitempty"`
	Domain string `json:"domain,omitempty"`
	// Required, SubjectTag, RejectScore and Action are in force; Source
	// says for each key ("required", …) whose it is: user, domain or
	// global.
	Required    float64                `json:"required"`
	SubjectTag  string                 `json:"subject_tag"`
	RejectScore float64                `json:"reject_score"`
	Action      string                 `json:"action"`
	Source      map[string]prefs.Level `json:"source"`
	// Set is what the API's layer sets for the user (or, asked about a
	// domain alone, the domain); the configuration file's settings are
	// not in it.
	Set config.Pref `json:"set"`
}

// prefsTarget reads whose preferences a request is about: user (its
// domain, for an address, from the name unless domain= says otherwise),
// or domain alone.
func prefsTarget(r *http.Request) (user, domain string, err error) {
	q := r.URL.Query()
	user, domain = q.Get("user"), q.Get("domain")
	if user == "" && domain == "" {
		return "", "", fail(http.StatusBadRequest, errors.New("name the user= or the domain= whose preferences"))
	}
	if user != "" {
		if err := prefs.ValidUser(user); err != nil {
			return "", "", fail(http.StatusBadRequest, err)
		}
		if i := strings.LastIndexByte(user, '@'); i >= 0 && domain == "" {
			domain = user[i+1:]
		}
	}
	if domain != "" {
		if err := config.ValidDomain(domain); err != nil {
			return "", "", fail(http.StatusBadRequest, err)
		}
	}
	return user, domain, nil
}

// mayPrefs checks that the peer may read (or, with write, change) the
// preferences of user, or of domain when user is "": its own user's,
// like its own model; a domain's only a peer that reads every model.
func (s *Server) mayPrefs(r *http.Request, user string, write bool) error {
	switch {
	case user == "" && !s.readsAll(r):
		return fail(http.StatusForbidden, fmt.Errorf("%w: a domain's preferences are the administrators'", errForbidden))
	case user == "":
		return nil
	case write:
		if err := s.mayTrain(r, user); err != nil {
			return fail(http.StatusForbidden, err)
		}
	default:
		if err := s.mayRead(r, user); err != nil {
			return fail(http.StatusForbidden, err)
		}
	}
	return nil
}

// prefsAnswer describes what applies to user at domain.
func (s *Server) prefsAnswer(user, domain string) Prefs {
	b := s.Prefs.Book()
	p := b.For(user, domain)
	out := Prefs{User: user, Domain: domain, Required: p.Required, SubjectTag: p.SubjectTag, RejectScore: p.RejectScore,
		Action: p.Action, Source: p.Source}
	if user != "" {
		out.Set = b.API().Users[user]
	} else {
		out.Set = b.API().Domains[domain]
	}
	return out
}

func (s *Server) getPrefs(_ http.ResponseWriter, r *http.Request) (any, error) {
	if s.Prefs == nil {
		return nil, fail(http.StatusNotFound, errors.New("this server keeps no preferences"))
	}
	user, domain, err := prefsTarget(r)
	if err != nil {
		return nil, err
	}
	if err := s.mayPrefs(r, user, false); err != nil {
		return nil, err
	}
	return s.prefsAnswer(user, domain), nil
}

func (s *Server) putPrefs(w http.ResponseWriter, r *http.Request) (any, error) {
	if s.Prefs == nil {
		return nil, fail(http.StatusNotFound, errors.New("this server keeps no preferences"))
	}
	user, domain, err := prefsTarget(r)
	if err != nil {
		return nil, err
	}
	if err := s.mayPrefs(r, user, true); err != nil {
		return nil, err
	}
	b, err := readBody(w, r, maxPrefsBody)
	if err != nil {
		return nil, err
	}
	var p config.Pref
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&p); err != nil {
		return nil, fail(http.StatusBadRequest, fmt.Errorf("preferences: %v", err))
	}
	if user != "" {
		err = s.Prefs.SetUser(user, p)
	} else {
		err = s.Prefs.SetDomain(domain, p)
	}
	if errors.Is(err, prefs.ErrInvalid) {
		return nil, fail(http.StatusBadRequest, err)
	}
	if err != nil {
		return nil, err
	}
	s.Log.Info("control: preferences set", "user", user, "domain", domain)
	return s.prefsAnswer(user, domain), nil
}

// maxPrefsBody bounds the body of a PUT /v1/prefs: lists of a few
// thousand entries.
const maxPrefsBody = 1 << 20

// Prefs returns what applies to user (at domain, "" to take an address's
// own) or, with user "", to domain.
func (c *Client) Prefs(ctx context.Context, user, domain string) (Prefs, error) {
	var out Prefs
	err := c.do(ctx, http.MethodGet, "/v1/prefs", prefsQuery(user, domain), nil, &out)
	return out, err
}

// SetPrefs replaces the preferences the API's layer sets for user (or,
// with user "", domain); the zero config.Pref removes them. It returns
// what then applies.
func (c *Client) SetPrefs(ctx context.Context, user, domain string, p config.Pref) (Prefs, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return Prefs{}, err
	}
	var out Prefs
	err = c.do(ctx, http.MethodPut, "/v1/prefs", prefsQuery(user, domain), b, &out)
	return out, err
}

func prefsQuery(user, domain string) url.Values {
	q := url.Values{}
	if user != "" {
		q.Set("user", user)
	}
	if domain != "" {
		q.Set("domain", domain)
	}
	return q
}
