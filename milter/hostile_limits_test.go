package milter

import "time"

// limits are the bounds a hostile-client test sets; the zero value of a
// field keeps the default.
type limits struct {
	read, message  time.Duration
	connections    int
	header         int64
	connHeader     int64
	spoofedHeaders int
}

// set applies l to s.
func (l limits) set(s *Settings) {
	m := &s.Milter
	if l.read > 0 {
		m.ReadTimeout.Duration = l.read
	}
	if l.message > 0 {
		m.MessageTimeout.Duration = l.message
	}
	if l.connections > 0 {
		m.MaxConnections = l.connections
	}
	if l.header > 0 {
		m.MaxHeaderBytes = l.header
	}
	if l.connHeader > 0 {
		m.MaxConnectionHeaderBytes = l.connHeader
	}
	if l.spoofedHeaders > 0 {
		m.MaxSpoofedHeaders = l.spoofedHeaders
	}
}
