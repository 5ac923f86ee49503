package milter

import (
	"cmp"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"net/textproto"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	gomilter "github.com/emersion/go-milter"

	"github.com/spamd/spamd/decide"
	"github.com/spamd/spamd/prefs"
)

// maxRcpts bounds the recipients remembered per message; Postfix allows
// 1000 by default.
const maxRcpts = 1000

// maxPooled is the largest message buffer kept for reuse.
const maxPooled = 4 << 20

// message is the go-milter backend for one message. go-milter makes a new
// one after each final answer; an aborted message resets it.
type message struct {
	c   *conn
	set *Settings // read when the message starts

	started   bool
	from      string // the envelope sender
	queueID   string
	messageID string
	auth      string
	rcpts     []string
	// fromAddrs lists the addresses of the From: field, and authRes
	// the values of the Authentication-Results fields, for the sender
	// lists; at most decide.MaxSenderFields of each.
	fromAddrs []string
	authRes   []string

	buf    *[]byte // headers and body, up to Milter.ClassifyBytes
	size   int64   // bytes of the whole message
	header int64   // bytes of the header
	inBody bool
	// spoofs lists the incoming X-Spam*/X-Spamd* fields by name, in the
	// order first seen, with how many of each, to be removed; spoofIndex
	// finds a name (lower-cased) in it, and forged counts the fields. At
	// most Milter.MaxSpoofedHeaders fields are noted.
	spoofs     []spoof
	spoofIndex map[string]int
	forged     int
	// fields counts the header fields the delivered copy keeps (all but
	// the forged ones), for X-Spamd-Result: a report of that copy can
	// then tell the fields added after the milter from the message's.
	fields  int
	subject *string // the first Subject field's value
	// broken says why the message gets the failure action: a callback
	// panicked.
	broken string
	// over says which bound the message passed (header bytes, forged
	// fields): it is rejected at its end, and nothing more of its header
	// is kept.
	over string
}

// spoof counts the incoming fields of one name (compared without case).
type spoof struct {
	name string
	n    int
}

// begin starts a message at its first event.
func (m *message) begin() {
	if m.started {
		return
	}
	m.started = true
	m.set = m.c.srv.settings.Load()
	m.buf = m.c.srv.bufs.Get().(*[]byte)
	m.c.begin()
}

// finish releases the message after its final answer (or abort).
func (m *message) finish(aborted bool) {
	if !m.started {
		return
	}
	if m.buf != nil && cap(*m.buf) <= maxPooled {
		*m.buf = (*m.buf)[:0]
		m.c.srv.bufs.Put(m.buf)
	}
	*m = message{c: m.c}
	m.c.end(aborted)
}

// settings returns the message's settings, or the current ones before it
// started.
func (m *message) settings() *Settings {
	if m.set != nil {
		return m.set
	}
	return m.c.srv.settings.Load()
}

// macros picks what the message needs from the macros of the last
// stage: the queue ID ("i") and the SMTP AUTH identity.
func (m *message) macros(mac map[string]string) {
	if id := mac["i"]; id != "" {
		m.queueID = id
	}
	if a := mac["{auth_authen}"]; a != "" {
		m.auth = a
	}
}

// attrs are the log attributes identifying the message.
func (m *message) attrs() []any {
	a := []any{"conn", m.c.id}
	if m.queueID != "" {
		a = append(a, "queue_id", m.queueID)
	}
	if m.messageID != "" {
		a = append(a, "message_id", m.messageID)
	}
	if m.c.client.IsValid() {
		a = append(a, "client", m.c.client.String())
	}
	return a
}

// guard turns a panic at the end of a message into the configured
// failure answer, logged and counted. go-milter writes the answer; the
// message ends there.
func (m *message) guard(mod *gomilter.Modifier, resp *gomilter.Response, err *error) {
	v := recover()
	if v == nil {
		return
	}
	reason := fmt.Sprintf("panic at end of message: %v", v)
	o := failure(m.settings(), reason)
	m.c.srv.log.Error("milter: panic; answering with the failure action", append(m.attrs(),
		"stage", "eom", "panic", v, "action", o.Action.String(), "stack", string(debug.Stack()))...)
	m.c.srv.obs.Error("panic")
	// Changes held back for the answer are dropped: the failure action
	// stands alone, but for the removal of forged fields, which an
	// accepted message must still get.
	m.c.hold, m.c.pending = false, m.c.pending[:0]
	if o.Action == decide.Accept {
		if rerr := m.removeForged(mod, reason); rerr != nil {
			o = tempfail(rerr.Error())
		}
	}
	m.c.srv.obs.Message("error", math.NaN(), o.Action, 0)
	m.finish(false)
	*resp, *err = response(o), nil
}

// removeForged sends, held for the answer, what an accepted message the
// milter failed on gets: its forged fields removed and X-Spamd-Result
// saying it was skipped. It reports why it could not; the message must
// then not be accepted, since it would carry the forged fields.
func (m *message) removeForged(mod *gomilter.Modifier, reason string) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic removing forged fields: %v", v)
		}
		m.c.hold = false
		if err != nil {
			m.c.pending = m.c.pending[:0]
			m.c.srv.log.Error("milter: could not remove the forged fields; answering tempfail", append(m.attrs(), "err", err)...)
		}
	}()
	if m.set == nil {
		// No field of a message not started was read.
		return nil
	}
	m.c.hold = true
	return m.apply(mod, failedDecision(m.set, reason))
}

// note turns a panic in a callback the MTA expects no answer to into a
// note: the end of the message then answers with the failure action.
func (m *message) note(stage string) {
	v := recover()
	if v == nil {
		return
	}
	m.c.srv.log.Error("milter: panic; the message will get the failure action", append(m.attrs(),
		"stage", stage, "panic", v, "stack", string(debug.Stack()))...)
	m.c.srv.obs.Error("panic")
	reason := fmt.Sprintf("panic in %s: %v", stage, v)
	if m.started {
		m.broken = reason
	} else {
		m.c.broken = reason
	}
}

// failure is the outcome for a message the milter failed on.
func failure(set *Settings, reason string) decide.Outcome {
	if set.Actions.OnError == "tempfail" {
		return tempfail(reason)
	}
	return decide.Outcome{Action: decide.Accept, Reason: reason}
}

// Connect records the SMTP client, shared by the connection's messages.
func (m *message) Connect(host string, family string, port uint16, addr net.IP, mod *gomilter.Modifier) (gomilter.Response, error) {
	defer m.note("connect")
	if a, ok := netip.AddrFromSlice(addr); ok {
		m.c.client = a.Unmap()
	}
	return nil, nil
}

// Helo is not asked for (OptNoHelo).
func (m *message) Helo(string, *gomilter.Modifier) (gomilter.Response, error) {
	return nil, nil
}

// MailFrom starts a message and notes the envelope sender and the SMTP
// AUTH identity.
func (m *message) MailFrom(from string, mod *gomilter.Modifier) (gomilter.Response, error) {
	defer m.note("mail")
	m.begin()
	m.macros(mod.Macros)
	m.from = strings.TrimSpace(from)
	return nil, nil
}

// sender is what the message says of its sender.
func (m *message) sender() prefs.Sender {
	return prefs.Sender{Envelope: m.from, From: m.fromAddrs, AuthResults: m.authRes}
}

// RcptTo notes a recipient.
func (m *message) RcptTo(rcpt string, mod *gomilter.Modifier) (gomilter.Response, error) {
	defer m.note("rcpt")
	m.begin()
	m.macros(mod.Macros)
	if len(m.rcpts) < maxRcpts {
		m.rcpts = append(m.rcpts, rcpt)
	}
	return nil, nil
}

// Header buffers one header field, and notes the fields the milter will
// remove or change. Each field costs constant time and at most its own
// size in memory, within the bounds: past Milter.MaxHeaderBytes or
// Milter.MaxSpoofedHeaders the message is only counted, to be rejected;
// past Milter.MaxConnectionHeaderBytes the connection is closed.
func (m *message) Header(name, value string, mod *gomilter.Modifier) (gomilter.Response, error) {
	defer m.note("header")
	m.begin()
	n := int64(len(name) + len(value) + 4)
	m.size += n
	m.header += n
	if !m.c.addHeader(n) || m.over != "" {
		return nil, nil
	}
	lim := &m.set.Milter
	if lim.MaxHeaderBytes > 0 && m.header > lim.MaxHeaderBytes {
		m.overLimit(fmt.Sprintf("header over max_header_bytes (%d)", lim.MaxHeaderBytes))
		return nil, nil
	}
	if !decide.Spoofable(name) {
		m.fields++
	} else if !m.noteSpoof(name) {
		m.overLimit(fmt.Sprintf("more than max_spoofed_headers (%d) X-Spam-* fields", lim.MaxSpoofedHeaders))
		return nil, nil
	}
	switch {
	case m.subject == nil && strings.EqualFold(name, "Subject"):
		m.subject = &value
	case m.messageID == "" && strings.EqualFold(name, "Message-Id"):
		m.messageID = strings.TrimSpace(value)
	case m.fromAddrs == nil && strings.EqualFold(name, "From"):
		m.fromAddrs = append([]string{}, decide.Addresses(value)...)
	case len(m.authRes) < decide.MaxSenderFields && strings.EqualFold(name, "Authentication-Results"):
		m.authRes = append(m.authRes, value)
	}
	if len(*m.buf)+int(n) <= lim.ClassifyBytes {
		b := append(*m.buf, name...)
		b = append(b, ':', ' ')
		if strings.IndexByte(value, '\n') >= 0 {
			// Postfix sends folded fields with bare LF.
			value = strings.ReplaceAll(strings.ReplaceAll(value, "\r\n", "\n"), "\n", "\r\n")
		}
		b = append(b, value...)
		*m.buf = append(b, '\r', '\n')
	}
	return nil, nil
}

// noteSpoof notes one incoming field the milter owns, to be removed; it
// reports false, noting nothing, once Milter.MaxSpoofedHeaders are noted.
func (m *message) noteSpoof(name string) bool {
	if max := m.set.Milter.MaxSpoofedHeaders; max > 0 && m.forged >= max {
		return false
	}
	m.forged++
	key := strings.ToLower(name)
	if i, ok := m.spoofIndex[key]; ok {
		m.spoofs[i].n++
		return true
	}
	if m.spoofIndex == nil {
		m.spoofIndex = map[string]int{}
	}
	m.spoofIndex[key] = len(m.spoofs)
	m.spoofs = append(m.spoofs, spoof{name: name, n: 1})
	return true
}

// overLimit notes that the message passed a bound: it is rejected at its
// end, and what was kept of its header is let go now.
func (m *message) overLimit(reason string) {
	m.over = reason
	m.spoofs, m.spoofIndex, m.subject = nil, nil, nil
	m.c.srv.log.Warn("milter: the message will be rejected: "+reason, append(m.attrs(), "header_bytes", m.header)...)
	m.c.srv.obs.Error("limit")
}

// Headers is not asked for (OptNoEOH).
func (m *message) Headers(textproto.MIMEHeader, *gomilter.Modifier) (gomilter.Response, error) {
	return nil, nil
}

// BodyChunk buffers the body up to the classified prefix and counts the
// rest.
func (m *message) BodyChunk(chunk []byte, mod *gomilter.Modifier) (gomilter.Response, error) {
	defer m.note("body")
	m.begin()
	limit := m.set.Milter.ClassifyBytes
	if !m.inBody {
		m.inBody = true
		m.size += 2
		if len(*m.buf)+2 <= limit {
			*m.buf = append(*m.buf, '\r', '\n')
		}
	}
	m.size += int64(len(chunk))
	if room := limit - len(*m.buf); room > 0 {
		*m.buf = append(*m.buf, chunk[:min(room, len(chunk))]...)
	}
	return nil, nil
}

// Body judges the message at its end and answers.
func (m *message) Body(mod *gomilter.Modifier) (resp gomilter.Response, err error) {
	defer m.guard(mod, &resp, &err)
	m.begin()
	m.macros(mod.Macros)
	if !m.inBody {
		// A message with an empty body: the header still ends.
		*m.buf = append(*m.buf, '\r', '\n')
		m.size += 2
	}
	start := time.Now()
	d := m.judge()
	m.c.hold = true
	err = m.apply(mod, d)
	m.c.hold = false
	if err != nil {
		m.c.srv.log.Warn("milter: could not send changes to the MTA", append(m.attrs(), "err", err)...)
		m.finish(false)
		return nil, fmt.Errorf("milter: end of message: %w", err)
	}
	elapsed := time.Since(start)
	m.report(d, elapsed)
	if h := m.set.History; h != nil {
		m.record(h, d, elapsed)
	}
	m.finish(false)
	return response(d.Outcome), nil
}

// Abort forgets the message; the connection stays.
func (m *message) Abort(*gomilter.Modifier) (err error) {
	defer func() {
		if v := recover(); v != nil {
			m.c.srv.log.Error("milter: panic in abort", append(m.attrs(), "panic", v, "stack", string(debug.Stack()))...)
			m.c.srv.obs.Error("panic")
			err = nil
		}
	}()
	m.finish(true)
	return nil
}

// apply sends the changes of decision d to the MTA, in order: the
// removal of forged fields, the added headers, the subject tag and a
// quarantine. A rejected or tempfailed message gets none.
func (m *message) apply(mod *gomilter.Modifier, d decision) error {
	if d.Outcome.Action == decide.Reject || d.Outcome.Action == decide.Tempfail {
		return nil
	}
	for _, s := range m.spoofs {
		// From the last to the first, so that, however an MTA numbers
		// fields after a removal, each index still names the right one.
		for i := s.n; i >= 1; i-- {
			if err := mod.ChangeHeader(i, s.name, ""); err != nil {
				return err
			}
		}
	}
	for _, h := range d.headers {
		v := h[1]
		if h[0] == decide.ResultHeader {
			// A line feed and a tab fold it; the MTA adds the CR.
			v = decide.Fold(v, len(h[0]), "\n\t")
		}
		if err := mod.AddHeader(h[0], v); err != nil {
			return err
		}
	}
	if tag := d.SubjectTag; tag != "" && d.Tag {
		switch {
		case m.subject == nil:
			if err := mod.AddHeader("Subject", tag); err != nil {
				return err
			}
		case !strings.HasPrefix(strings.TrimSpace(*m.subject), tag):
			if err := mod.ChangeHeader(1, "Subject", tag+" "+strings.TrimLeft(*m.subject, " \t")); err != nil {
				return err
			}
		}
	}
	if d.Outcome.Action == decide.Quarantine {
		return mod.Quarantine(d.Outcome.Reason)
	}
	return nil
}

// report logs the message and tells the observer: who sent it to whom,
// whose decision stood and why, with numbers to three significant
// digits.
func (m *message) report(d decision, elapsed time.Duration) {
	a := m.attrs()
	a = append(a, "sender", cmp.Or(m.from, "<>"), "rcpts", rcptList(m.rcpts))
	if d.Verdict != decide.Skipped && d.Verdict != "error" {
		model := cmp.Or(d.model, "global")
		a = append(a, "user", d.user, "model", model)
		if len(d.models) > 1 {
			names := make([]string, len(d.models))
			for i, u := range d.models {
				names[i] = cmp.Or(u, "global")
			}
			a = append(a, "models", names)
		}
	}
	a = append(a, "verdict", d.Verdict)
	spam := math.NaN()
	if d.Verdict != decide.Skipped && d.Verdict != "error" {
		spam = d.Result.Probability
		a = append(a, "p", sig3(d.Result.Probability), "score", sig3(d.Result.Score), "required", sig3(d.Result.Required))
	}
	if d.Result.Listed != "" {
		a = append(a, "listed", d.Result.Listed, "by", d.Result.By, "entry", d.Listing.Entry)
	}
	if d.learned != "" {
		a = append(a, "learned", d.learned)
	}
	a = append(a, "action", d.Outcome.Action.String())
	if r := d.Outcome.Reply(); r != "" {
		a = append(a, "reply", r)
	}
	if d.Outcome.Reason != "" {
		a = append(a, "reason", d.Outcome.Reason)
	}
	a = append(a, "size", m.size, "elapsed", round3(elapsed))
	level := slog.LevelInfo
	if d.Verdict == "error" {
		level = slog.LevelError
	}
	m.c.srv.log.Log(m.c.srv.ctx, level, "milter: message", a...)
	m.c.srv.obs.Message(d.Verdict, spam, d.Outcome.Action, elapsed)
}

// maxLoggedRcpts bounds the recipients a log line names.
const maxLoggedRcpts = 10

// rcptList is the recipients as logged: at most maxLoggedRcpts, then how
// many more there were.
func rcptList(rcpts []string) []string {
	if len(rcpts) <= maxLoggedRcpts {
		return rcpts
	}
	return append(slices.Clip(rcpts[:maxLoggedRcpts]), fmt.Sprintf("+%d more", len(rcpts)-maxLoggedRcpts))
}

// sig3 rounds x to three significant digits, for a log line a person
// reads; the exact values are in the message's X-Spamd-Result.
func sig3(x float64) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 3, 64), 64)
	return r
}

// round3 rounds a duration to three significant digits.
func round3(d time.Duration) time.Duration {
	unit := time.Duration(1)
	for v := d; v >= 1000; v /= 10 {
		unit *= 10
	}
	return d.Round(unit)
}
