// Package prefstest keeps preferences for tests as spamd does: the API's
// layer saved in a prefs.File, over the site's settings and the
// configuration file's layer, behind the control API's PrefsService.
package prefstest

import (
	"sync"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/prefs"
)

// Service is a PrefsService over a file. It is safe for concurrent use.
type Service struct {
	mu      sync.Mutex
	file    *prefs.File
	actions config.Actions
	book    *prefs.Book
}

// New returns a Service whose API layer is file's, over site and the
// configuration's layer conf, with the site's [actions] actions.
func New(file *prefs.File, actions config.Actions, site prefs.Site, conf prefs.Layer) *Service {
	return &Service{file: file, actions: actions, book: prefs.New(site, conf, file.Layer())}
}

// Actions returns the site's [actions].
func (s *Service) Actions() config.Actions { return s.actions }

// Book returns the preferences in force.
func (s *Service) Book() *prefs.Book {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.book
}

// SetUser sets user's preferences, saved in the file.
func (s *Service) SetUser(user string, pref config.Pref) error {
	return s.set(func() (prefs.Layer, error) { return s.file.SetUser(user, pref) })
}

// SetDomain sets domain's preferences, saved in the file.
func (s *Service) SetDomain(domain string, pref config.Pref) error {
	return s.set(func() (prefs.Layer, error) { return s.file.SetDomain(domain, pref) })
}

func (s *Service) set(change func() (prefs.Layer, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, err := change()
	if err == nil {
		s.book = s.book.WithAPI(l)
	}
	return err
}
