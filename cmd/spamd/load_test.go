package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomilter "github.com/emersion/go-milter"

	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/decide"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/store/dump"
	"github.com/spamd/spamd/tokenize"
)

// The load of the fault and soak tests: milter sessions sending messages
// that carry forged X-Spam-* fields, each answer checked; training and
// reports through the control API, each acknowledgement recorded, to be
// found in the store afterwards; and what the daemon says of itself on
// its metrics listener (/healthz, /metrics).

// forged are the fields a spammer puts in a message to pass it off as
// judged ham. The milter must remove every one (each occurrence, whatever
// the case of its name) from every message it lets through.
var forged = [][2]string{
	{"X-Spam-Flag", "NO"},
	{"X-Spam-Status", "No, score=-99.0 required=5.0"},
	{"x-spam-flag", "NO"},
	{"X-Spamd-Result", "ham; p=0.000"},
	{"X-Spam-Score", "-99.0"},
}

// withForged returns raw with the forged fields before its header.
func withForged(raw []byte) []byte {
	var b bytes.Buffer
	for _, f := range forged {
		fmt.Fprintf(&b, "%s: %s\n", f[0], f[1])
	}
	b.Write(stripFrom(raw))
	return b.Bytes()
}

// spamFields counts the X-Spam* fields of raw's header (the forged ones
// and any the message carried already), by lower-cased name: the fields
// the milter must remove.
func spamFields(raw []byte) map[string]int {
	head, _, _ := strings.Cut(strings.ReplaceAll(string(raw), "\r\n", "\n"), "\n\n")
	out := map[string]int{}
	for _, line := range strings.Split(head, "\n") {
		name, _, ok := strings.Cut(line, ":")
		if ok && !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "\t") &&
			len(name) >= len("x-spam") && strings.EqualFold(name[:len("x-spam")], "x-spam") {
			out[strings.ToLower(name)]++
		}
	}
	return out
}

// checkAnswer checks the milter's answer (mods, act) to a message whose
// header has the X-Spam* fields want (spamFields), forged ones among
// them, under the failure action onError, and
// returns its kind: the verdict of a classified message (ham, unsure,
// spam), "error" for a message accepted unclassified on a failure,
// "tempfail", or "skipped:REASON" for one left unclassified on purpose.
func checkAnswer(mods []gomilter.ModifyAction, act *gomilter.Action, want map[string]int, onError string) (string, error) {
	switch act.Code {
	case gomilter.ActReplyCode:
		if onError == "tempfail" && act.SMTPCode == 451 && strings.HasPrefix(act.SMTPText, "4.7.1 ") {
			return "tempfail", nil
		}
		return "", fmt.Errorf("answered %d %s (on_error = %q)", act.SMTPCode, act.SMTPText, onError)
	case gomilter.ActAccept, gomilter.ActContinue:
	default:
		return "", fmt.Errorf("answered %q", act.Code)
	}
	removed := map[string]map[uint32]bool{}
	var results, flags []string
	for _, m := range mods {
		switch {
		case m.Code == gomilter.ActChangeHeader && m.HeaderValue == "":
			name := strings.ToLower(m.HeaderName)
			if removed[name] == nil {
				removed[name] = map[uint32]bool{}
			}
			removed[name][m.HeaderIndex] = true
		case m.Code == gomilter.ActAddHeader && m.HeaderName == decide.ResultHeader:
			results = append(results, m.HeaderValue)
		case m.Code == gomilter.ActAddHeader && m.HeaderName == "X-Spam-Flag":
			flags = append(flags, m.HeaderValue)
		}
	}
	for name, n := range want {
		for i := 1; i <= n; i++ {
			if !removed[name][uint32(i)] {
				return "", fmt.Errorf("accepted with field %s #%d left in (removed: %v)", name, i, removed)
			}
		}
		delete(removed, name)
	}
	if len(removed) > 0 {
		return "", fmt.Errorf("removed fields the message did not forge: %v", removed)
	}
	if len(results) != 1 {
		return "", fmt.Errorf("accepted with %d %s fields added", len(results), decide.ResultHeader)
	}
	res, err := decide.ParseResult(results[0])
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", decide.ResultHeader, results[0], err)
	}
	switch {
	case res.Verdict == decide.Skipped && res.Reason == decide.ReasonError:
		if onError != "accept" {
			return "", fmt.Errorf("accepted unclassified on an error, with on_error = %q", onError)
		}
		if len(flags) != 0 {
			return "", fmt.Errorf("accepted unclassified with X-Spam-Flag %q", flags)
		}
		return "error", nil
	case res.Verdict == decide.Skipped:
		return "skipped:" + res.Reason, nil
	case len(flags) != 1:
		return "", fmt.Errorf("classified %s with X-Spam-Flag %q, want exactly one", res.Verdict, flags)
	}
	return res.Verdict, nil
}

// dialMilter opens a milter session as an MTA would, with its timeouts.
func dialMilter(network, addr string, timeout time.Duration) (*gomilter.ClientSession, error) {
	c := gomilter.NewClientWithOptions(network, addr, gomilter.ClientOptions{
		Dialer:      &net.Dialer{Timeout: timeout},
		ReadTimeout: timeout, WriteTimeout: timeout,
		ActionMask: gomilter.OptAddHeader | gomilter.OptChangeHeader | gomilter.OptQuarantine,
	})
	s, err := c.Session()
	if err != nil {
		return nil, err
	}
	if _, err := s.Conn("client.example.net", gomilter.FamilyInet, 40000, "198.51.100.7"); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// milterLoad sends messages with forged fields over a number of milter
// sessions, one message after another on each, and checks every answer.
type milterLoad struct {
	network, addr string
	onError       string
	// timeout is the MTA's: the longest it waits for an answer.
	timeout time.Duration

	stop chan struct{}
	wg   sync.WaitGroup
	// down is set while the daemon is meant to be dead: a session that
	// breaks then is counted as lost and opened again, as an MTA would.
	down     atomic.Bool
	answered atomic.Int64

	mu         sync.Mutex
	kinds      map[string]int
	lost       int
	maxLatency time.Duration
	failures   []error
}

// startMilterLoad starts sessions sessions over (network, addr), each
// sending msgs in turn (with the forged fields added) until stopped.
func startMilterLoad(t *testing.T, network, addr string, sessions int, msgs [][]byte, onError string) *milterLoad {
	t.Helper()
	l := &milterLoad{network: network, addr: addr, onError: onError, timeout: 10 * time.Second,
		stop: make(chan struct{}), kinds: map[string]int{}}
	forgedMsgs := make([]forgedMessage, len(msgs))
	for i, m := range msgs {
		raw := withForged(m)
		forgedMsgs[i] = forgedMessage{raw: raw, fields: spamFields(raw)}
	}
	for i := range sessions {
		l.wg.Add(1)
		go l.session(i, forgedMsgs)
	}
	t.Cleanup(l.halt)
	return l
}

func (l *milterLoad) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.failures) < 100 {
		l.failures = append(l.failures, err)
	}
}

// forgedMessage is a message of the load and the X-Spam* fields of its
// header.
type forgedMessage struct {
	raw    []byte
	fields map[string]int
}

func (l *milterLoad) session(i int, msgs []forgedMessage) {
	defer l.wg.Done()
	var s *gomilter.ClientSession
	defer func() {
		if s != nil {
			s.Close()
		}
	}()
	for n := i; ; n++ {
		select {
		case <-l.stop:
			return
		default:
		}
		if s == nil {
			var err error
			if s, err = dialMilter(l.network, l.addr, l.timeout); err != nil {
				if !l.down.Load() {
					l.fail(fmt.Errorf("session %d: connect: %w", i, err))
				}
				time.Sleep(50 * time.Millisecond)
				continue
			}
		}
		start := time.Now()
		m := msgs[n%len(msgs)]
		err := sendMessage(s, m.raw)
		var mods []gomilter.ModifyAction
		var act *gomilter.Action
		if err == nil {
			mods, act, err = s.End()
		}
		elapsed := time.Since(start)
		if err != nil {
			s.Close()
			s = nil
			if l.down.Load() {
				l.mu.Lock()
				l.lost++
				l.mu.Unlock()
			} else {
				l.fail(fmt.Errorf("session %d, message %d: %w", i, n, err))
				time.Sleep(50 * time.Millisecond)
			}
			continue
		}
		kind, err := checkAnswer(mods, act, m.fields, l.onError)
		if err == nil && elapsed >= l.timeout {
			err = fmt.Errorf("answered after %v, past the MTA's timeout of %v", elapsed, l.timeout)
		}
		if err != nil {
			l.fail(fmt.Errorf("session %d, message %d: %w", i, n, err))
			continue
		}
		l.answered.Add(1)
		l.mu.Lock()
		l.kinds[kind]++
		l.maxLatency = max(l.maxLatency, elapsed)
		l.mu.Unlock()
	}
}

// halt stops the sessions and waits for them.
func (l *milterLoad) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// summary returns the counts of answers by kind, the sessions lost while
// the daemon was down, the slowest answer and the failures.
func (l *milterLoad) summary() (kinds map[string]int, lost int, slowest time.Duration, failures []error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	kinds = map[string]int{}
	for k, v := range l.kinds {
		kinds[k] = v
	}
	return kinds, l.lost, l.maxLatency, append([]error(nil), l.failures...)
}

// waitAnswers waits until the load has had n more answers than now.
func (l *milterLoad) waitAnswers(t *testing.T, n int64, within time.Duration) {
	t.Helper()
	want := l.answered.Load() + n
	waitFor(t, within, fmt.Sprintf("%d milter answers", n), func() bool { return l.answered.Load() >= want })
}

// messageSource makes distinct messages of each class from the
// repository's sample: a sample message with a line of its own added, so
// that each has a digest and a few tokens of its own.
type messageSource struct{ byClass map[string][][]byte }

func sampleSource(t *testing.T) messageSource {
	t.Helper()
	src := messageSource{byClass: map[string][][]byte{}}
	for _, class := range []string{filter.Spam, filter.Ham} {
		dir := filepath.Join("../../testdata/sample", class)
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			src.byClass[class] = append(src.byClass[class], stripFrom(readFile(t, filepath.Join(dir, e.Name()))))
		}
	}
	return src
}

// message returns message n of the series tag, and its class: spam and
// ham in turn.
func (m messageSource) message(tag string, n int) (class string, raw []byte) {
	class = []string{filter.Spam, filter.Ham}[n%2]
	base := m.byClass[class][(n/2)%len(m.byClass[class])]
	var b bytes.Buffer
	b.Write(base)
	if !bytes.HasSuffix(base, []byte("\n")) {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "\n%s %d:", tag, n)
	for i := range 8 {
		fmt.Fprintf(&b, " %s%dw%d", tag, n, i)
	}
	b.WriteByte('\n')
	return class, b.Bytes()
}

// digestOf is the hex digest the daemon identifies raw by.
func digestOf(raw []byte) string {
	d := tokenize.Digest(raw)
	return hex.EncodeToString(d[:])
}

// trainLoad trains batches of new messages through the API, one request
// after another, and records what the daemon acknowledged.
type trainLoad struct {
	api   *control.Client
	src   messageSource
	tag   string
	batch int

	stop chan struct{}
	done chan struct{}
	// down is set while the daemon is meant to be dead: a request that
	// fails to reach it then is kept, to be sent again.
	down atomic.Bool

	mu       sync.Mutex
	acked    map[string]string // digest → class
	refused  int               // batches still answered 503 after the client's retries
	unsent   [][]control.Item  // batches cut off by the daemon's death
	failures []error
}

func startTrainLoad(t *testing.T, api *control.Client, src messageSource, tag string, batch int) *trainLoad {
	l := &trainLoad{api: api, src: src, tag: tag, batch: batch, stop: make(chan struct{}), done: make(chan struct{}),
		acked: map[string]string{}}
	go l.run()
	t.Cleanup(l.halt)
	return l
}

func (l *trainLoad) run() {
	defer close(l.done)
	for n := 0; ; n += l.batch {
		select {
		case <-l.stop:
			return
		default:
		}
		items := make([]control.Item, l.batch)
		for i := range items {
			items[i].Class, items[i].Message = l.src.message(l.tag, n+i)
		}
		if err := l.train(items); err != nil {
			l.mu.Lock()
			if len(l.failures) < 100 {
				l.failures = append(l.failures, err)
			}
			l.mu.Unlock()
		}
	}
}

// train sends one batch and records the answer; it returns an error for
// an answer that breaks the rules: anything but an acknowledgement of
// every message or a 503 that says to try later.
func (l *trainLoad) train(items []control.Item) error {
	// A client that waits for an answer as long as spamtrain does,
	// Retry-After waits included: a short fault passes unseen.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	res, err := l.api.Train(ctx, "", items)
	var ae *control.Error
	switch {
	case err == nil:
		l.mu.Lock()
		defer l.mu.Unlock()
		for i, r := range res {
			if r.Error != "" {
				return fmt.Errorf("message %d of a batch: %s", i, r.Error)
			}
			if r.Digest != digestOf(items[i].Message) {
				return fmt.Errorf("trained as digest %s, tokenize.Digest says %s", r.Digest, digestOf(items[i].Message))
			}
			l.acked[r.Digest] = items[i].Class
		}
		return nil
	case errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable && ae.RetryAfter > 0:
		l.mu.Lock()
		l.refused++
		l.mu.Unlock()
		time.Sleep(100 * time.Millisecond)
		return nil
	case l.down.Load():
		l.mu.Lock()
		l.unsent = append(l.unsent, items)
		l.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
		return nil
	}
	return fmt.Errorf("train, at %s, for %v: %w", start.Format("15:04:05.000"), time.Since(start).Round(time.Millisecond), err)
}

func (l *trainLoad) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

// waitAcked waits until n more messages than now are acknowledged.
func (l *trainLoad) waitAcked(t *testing.T, n int, within time.Duration) {
	t.Helper()
	want := l.ackedLen() + n
	waitFor(t, within, fmt.Sprintf("%d more messages trained", n), func() bool { return l.ackedLen() >= want })
}

func (l *trainLoad) ackedLen() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// reportLoad reports messages through /v1/report, one at a time, every
// interval, and records the reports the daemon accepted.
type reportLoad struct {
	api      *control.Client
	next     func(n int) (user, class string, raw []byte)
	interval time.Duration

	stop   chan struct{}
	done   chan struct{}
	paused atomic.Bool

	mu       sync.Mutex
	acked    map[string]map[string]string // user → digest → class
	accepted int
	refused  int
	failures []error
}

// startReportLoad reports the messages next gives, in turn, every
// interval. A report refused with 503 is made again, as spamtrain report
// does.
func startReportLoad(t *testing.T, api *control.Client, interval time.Duration, next func(n int) (user, class string, raw []byte)) *reportLoad {
	l := &reportLoad{api: api, next: next, interval: interval, stop: make(chan struct{}), done: make(chan struct{}),
		acked: map[string]map[string]string{}}
	go l.run()
	t.Cleanup(l.halt)
	return l
}

func (l *reportLoad) run() {
	defer close(l.done)
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for n := 0; ; {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		if l.paused.Load() {
			continue
		}
		user, class, raw := l.next(n)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := l.api.Report(ctx, user, class, "", raw)
		cancel()
		var ae *control.Error
		l.mu.Lock()
		switch {
		case err == nil:
			if l.acked[user] == nil {
				l.acked[user] = map[string]string{}
			}
			l.acked[user][digestOf(raw)] = class
			l.accepted++
			n++
		case errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable && ae.RetryAfter > 0:
			l.refused++
		default:
			if len(l.failures) < 100 {
				l.failures = append(l.failures, fmt.Errorf("report: %w", err))
			}
		}
		l.mu.Unlock()
	}
}

func (l *reportLoad) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

func (l *reportLoad) ackedLen() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.accepted
}

// waitAcked waits until n more reports than now are accepted.
func (l *reportLoad) waitAcked(t *testing.T, n int, within time.Duration) {
	t.Helper()
	want := l.ackedLen() + n
	waitFor(t, within, fmt.Sprintf("%d more reports accepted", n), func() bool { return l.ackedLen() >= want })
}

// waitApplied waits until the daemon has no report waiting.
func waitApplied(t *testing.T, api *control.Client, within time.Duration) {
	t.Helper()
	waitFor(t, within, "the queued reports to be applied", func() bool {
		st, err := api.Stats(context.Background())
		return err == nil && st.PendingReports == 0
	})
}

// healthz asks the daemon's metrics listener at addr how it is: "ok",
// "degraded" or "failed", with the reason.
func healthz(addr string) (state, reason string, err error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/healthz")
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	var body struct{ Status, Reason, Error string }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return "", "", fmt.Errorf("/healthz: HTTP %d: %w", resp.StatusCode, err)
	}
	switch {
	case resp.StatusCode == http.StatusOK && body.Status == "ok":
		return "ok", "", nil
	case resp.StatusCode == http.StatusOK && body.Status == "degraded":
		return "degraded", body.Reason, nil
	case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "":
		return "failed", body.Error, nil
	}
	return "", "", fmt.Errorf("/healthz: HTTP %d %+v", resp.StatusCode, body)
}

// healthWatch polls /healthz and keeps each change of what it says.
type healthWatch struct {
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	changes []healthChange
	errs    []error
}

type healthChange struct {
	at            time.Time
	state, reason string
}

func watchHealth(t *testing.T, addr string) *healthWatch {
	w := &healthWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			state, reason, err := healthz(addr)
			w.mu.Lock()
			switch {
			case err != nil:
				w.errs = append(w.errs, err)
			case len(w.changes) == 0 || w.changes[len(w.changes)-1].state != state:
				w.changes = append(w.changes, healthChange{time.Now(), state, reason})
			}
			w.mu.Unlock()
			select {
			case <-w.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(w.halt)
	return w
}

func (w *healthWatch) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// now returns what /healthz said last.
func (w *healthWatch) now() healthChange {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.changes) == 0 {
		return healthChange{}
	}
	return w.changes[len(w.changes)-1]
}

// since returns the changes from t on, and the one in force at t.
func (w *healthWatch) since(t time.Time) []healthChange {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []healthChange
	for i, c := range w.changes {
		if !c.at.Before(t) || i == len(w.changes)-1 || !w.changes[i+1].at.Before(t) {
			out = append(out, c)
		}
	}
	return out
}

func (c healthChange) String() string {
	if c.reason == "" {
		return c.state
	}
	return c.state + " (" + c.reason + ")"
}

// scrape reads the metrics at addr as "name{labels}" → value.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// errorsTotal sums spamd_errors_total over its kinds.
func errorsTotal(m map[string]float64) (sum float64, byKind map[string]float64) {
	byKind = map[string]float64{}
	for k, v := range m {
		if kind, ok := strings.CutPrefix(k, `spamd_errors_total{kind="`); ok && v != 0 {
			byKind[strings.TrimSuffix(kind, `"}`)] = v
			sum += v
		}
	}
	return sum, byKind
}

// seenRecords dumps every model through the API and returns its seen
// records, user → digest → class, after checking the dump reads whole.
func seenRecords(t *testing.T, api *control.Client) map[string]map[string]string {
	t.Helper()
	var b bytes.Buffer
	if err := api.Dump(context.Background(), nil, &b); err != nil {
		t.Fatalf("dump: %v", err)
	}
	r, err := dump.NewReader(&b)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	for {
		user, _, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("dump: %v", err)
		}
		seen := map[string]string{}
		out[user] = seen
		for {
			rec, err := r.Record()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("dump of %q: %v", user, err)
			}
			if rec.Class != "" {
				seen[hex.EncodeToString(rec.Digest[:])] = rec.Class
			}
		}
	}
}

// verifyModels checks what `spamtrain check` checks, every model
// consistent, and that every training and report acknowledged is in the
// store, trained as its class.
func verifyModels(t *testing.T, api *control.Client, trained map[string]string, reported map[string]map[string]string) {
	t.Helper()
	checks, err := api.Check(context.Background())
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	for _, c := range checks {
		if c.Error != "" {
			t.Errorf("check of %q: %s", c.User, c.Error)
		}
	}
	seen := seenRecords(t, api)
	lost := func(what string, acked, got map[string]string) {
		n := 0
		for d, class := range acked {
			if got[d] != class {
				if n++; n <= 5 {
					t.Errorf("%s %s acknowledged as %s, stored as %q", what, d, class, got[d])
				}
			}
		}
		if n > 0 {
			t.Errorf("%d of %d acknowledged %ss lost", n, len(acked), what)
		}
	}
	lost("training", trained, seen[""])
	nreported := 0
	for user, acked := range reported {
		lost("report for "+user+" of", acked, seen[user])
		nreported += len(acked)
	}
	t.Logf("check: %d models consistent; %d trainings and %d reported messages acknowledged, all in the store", len(checks), len(trained), nreported)
}
