package control

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"io"
	"math"
	"mime"
	"net/http"
	"net/mail"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/emersion/go-message/charset"

	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/history"
	"github.com/spamd/spamd/internal/version"
	"github.com/spamd/spamd/store"
)

// consoleExplain is how many features toward each class the console
// lists when it explains a message.
const consoleExplain = 25

// pageNames are the console's pages, each a template of its own beside
// the shared layout.
var pageNames = []string{"login", "error", "status", "history", "message", "classify", "models", "config"}

// parsePages parses every page with the layout.
func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"model":  modelName,
		"when":   func(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05") },
		"ago":    ago,
		"prob":   func(p float64) string { return strconv.FormatFloat(p, 'f', 4, 64) },
		"score":  func(s float64) string { return strconv.FormatFloat(s, 'f', 2, 64) },
		"weight": func(w float64) string { return strconv.FormatFloat(w, 'f', 3, 64) },
		"value":  func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) },
		"ms": func(v float64) string {
			if math.IsNaN(v) {
				return "–"
			}
			return strconv.FormatFloat(v, 'f', 1, 64)
		},
		"decode": decodeHeader,
		"bytes":  humanBytes,
		"count":  func(n uint64) string { return groupDigits(n) },
		"rate":   func(r float64) string { return strconv.FormatFloat(r, 'f', 1, 64) },
		"pct":    func(f float64) string { return strconv.FormatFloat(100*f, 'f', 2, 64) + "%" },
		"join":   strings.Join,
		"nav":    func() any { return navigation },
		"maxWeight": func(fs []history.Feature) float64 {
			m := 0.0
			for _, f := range fs {
				m = math.Max(m, math.Abs(f.Weight))
			}
			return m
		},
		"bar": func(w, max float64) string {
			if max <= 0 {
				return "0"
			}
			return strconv.FormatFloat(math.Min(100, 100*math.Abs(w)/max), 'f', 0, 64)
		},
	}
	pages := make(map[string]*template.Template, len(pageNames))
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(consoleFiles, "console/templates/layout.html", "console/templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: parse %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// render writes page name with v, in the layout.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, v *view) {
	if v.Title == "" {
		for _, n := range navigation {
			if n.Page == v.Active {
				v.Title = n.Name
			}
		}
	}
	v.Version = version.String()
	var b bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&b, "layout", v); err != nil {
		c.log.Error("console: render", "page", name, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// modelName names a model for people: "" is the global model.
func modelName(user string) string {
	if user == "" {
		return "global"
	}
	return user
}

// ago says how long ago t was, roughly.
func ago(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + " s ago"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + " min ago"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + " h ago"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + " days ago"
}

// wordDecoder decodes RFC 2047 encoded words in any charset go-message
// knows.
var wordDecoder = &mime.WordDecoder{CharsetReader: charset.Reader}

// decodeHeader decodes the encoded words of a header value, for display;
// a value that does not decode is shown as it came.
func decodeHeader(s string) string {
	d, err := wordDecoder.DecodeHeader(s)
	if err != nil {
		return s
	}
	return d
}

// humanBytes formats n bytes in KiB, MiB or GiB.
func humanBytes(n int64) string {
	f := float64(n)
	for _, u := range []string{"B", "KiB", "MiB", "GiB"} {
		if f < 1024 || u == "GiB" {
			if u == "B" {
				return strconv.FormatInt(n, 10) + " B"
			}
			return strconv.FormatFloat(f, 'f', 1, 64) + " " + u
		}
		f /= 1024
	}
	return ""
}

// groupDigits writes n with thin spaces between groups of three digits.
func groupDigits(n uint64) string {
	s := strconv.FormatUint(n, 10)
	var b strings.Builder
	for i, d := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteString("\u202f")
		}
		b.WriteRune(d)
	}
	return b.String()
}

// statusData is the status page.
type statusData struct {
	Health, HealthReason string
	// Ready is false while the global model has fewer than MinTrained
	// messages of a class: every verdict is then unsure.
	Ready      bool
	MinTrained int
	Classes    []classRow
	Vocabulary uint64
	// Disk is the store's size on disk, 0 if unknown (Redis).
	Disk       int64
	Pending    int
	Uptime     string
	Counters   *countersView
	Classified *Classified
	History    *history.Stats
}

type classRow struct {
	Class            string
	Messages, Tokens uint64
}

func (c *Console) statusPage(r *http.Request, v *view) error {
	d := &statusData{Uptime: time.Since(c.started).Round(time.Second).String()}
	v.Data = d
	if res, err := c.api.health(nil, r); err != nil {
		d.Health, d.HealthReason = "failed", err.Error()
	} else if m, ok := res.(map[string]string); ok {
		d.Health, d.HealthReason = m["status"], m["reason"]
	}
	f := c.api.Filter()
	fc := f.Config()
	d.MinTrained = fc.MinTrained
	t, err := f.Store().Totals(r.Context(), "")
	if err != nil {
		return fmt.Errorf("totals of the global model: %w", err)
	}
	d.Ready = true
	for _, class := range fc.Classes {
		row := classRow{Class: class}
		if i := t.Index(class); i >= 0 {
			row.Messages, row.Tokens = t.Messages[i], t.Tokens[i]
		}
		if (class == fc.Positive || class == fc.Negative) && row.Messages < uint64(fc.MinTrained) {
			d.Ready = false
		}
		d.Classes = append(d.Classes, row)
	}
	d.Vocabulary = t.Vocabulary
	if c.api.Size != nil {
		lsm, vlog := c.api.Size()
		d.Disk = lsm + vlog
	}
	if c.api.Pending != nil {
		d.Pending = c.api.Pending()
	}
	if c.api.Classified != nil {
		cl := c.api.Classified()
		d.Classified = &cl
	}
	if c.api.History != nil {
		st := c.api.History.Stats()
		d.History = &st
	}
	if c.o.Counters != nil {
		d.Counters = c.countersView(time.Now())
	}
	return nil
}

// historyData is the history page.
type historyData struct {
	Entries  []history.Entry
	Verdict  string
	User     string
	Verdicts []string
	// Older is the before= of the next page, 0 if there is none.
	Older uint64
	Size  int
	None  bool // the daemon keeps no history
}

// historyPage lists the latest verdicts, 50 at a time, filtered by
// verdict and user.
func (c *Console) historyPage(r *http.Request, v *view) error {
	d := &historyData{Verdicts: verdicts}
	v.Data = d
	if c.api.History == nil {
		d.None = true
		return nil
	}
	q, err := parseHistoryQuery(r)
	if err != nil {
		return fail(http.StatusBadRequest, err)
	}
	const page = 50
	q.Limit = page + 1
	d.Verdict, d.User = r.URL.Query().Get("verdict"), r.URL.Query().Get("user")
	q.Match = func(e *history.Entry) bool {
		return (d.Verdict == "" || e.Verdict == d.Verdict) && (d.User == "" || e.Belongs(d.User))
	}
	d.Entries = c.api.History.List(q)
	if len(d.Entries) > page {
		d.Entries = d.Entries[:page]
		d.Older = d.Entries[page-1].ID
	}
	d.Size = c.api.History.Size()
	return nil
}

// messageData is the message page.
type messageData struct {
	Entry history.Entry
	// Header lists the message's header fields, decoded for display.
	Header [][2]string
	// Now explains the message again against each model that judged it,
	// as the model is now.
	Now []explained
	// Delivery is the explanation recorded when the milter answered.
	Delivery []towardClass
	// Classes are the classes it can be learned as.
	Classes []string
}

// explained is a verdict of one model on a message, with its
// explanation.
type explained struct {
	Model       string
	Verdict     string
	Probability float64
	Score       float64
	Required    float64
	TrainedAs   string
	Toward      []towardClass
	Err         string
}

type towardClass struct {
	Class    string
	Features []history.Feature
}

// towardList orders an explanation by class: the positive class first.
func towardList(fc filter.Config, m map[string][]history.Feature) []towardClass {
	var out []towardClass
	for _, class := range fc.Classes {
		if fs, ok := m[class]; ok {
			out = append(out, towardClass{class, fs})
		}
	}
	slices.SortStableFunc(out, func(a, b towardClass) int {
		switch {
		case a.Class == fc.Positive:
			return -1
		case b.Class == fc.Positive:
			return 1
		}
		return 0
	})
	return out
}

// entryID reads the {id} of the request's path.
func entryID(r *http.Request) (uint64, error) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil {
		return 0, fail(http.StatusBadRequest, fmt.Errorf("%q is not an entry of the history", r.PathValue("id")))
	}
	return id, nil
}

// errGone is the error of an entry the history no longer has.
var errGone = errors.New("the history no longer has this message: it keeps the latest [history] size verdicts")

func (c *Console) messagePage(r *http.Request, v *view) error {
	if c.api.History == nil {
		return fail(http.StatusNotFound, errors.New("this daemon keeps no history ([history] size is 0)"))
	}
	id, err := entryID(r)
	if err != nil {
		return err
	}
	e, raw, ok := c.api.History.Get(id)
	if !ok {
		return fail(http.StatusNotFound, errGone)
	}
	f := c.api.Filter()
	d := &messageData{Entry: e, Classes: f.Config().Classes, Delivery: towardList(f.Config(), e.Toward)}
	v.Data, v.Title = d, "Message "+strconv.FormatUint(id, 10)
	v.Notice = learnedNotice(r.URL.Query(), d.Classes, judges(e))
	if raw == nil {
		return nil
	}
	if m, err := mail.ReadMessage(bytes.NewReader(raw)); err == nil {
		for k, vs := range m.Header {
			for _, val := range vs {
				d.Header = append(d.Header, [2]string{k, decodeHeader(val)})
			}
		}
		slices.SortStableFunc(d.Header, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	}
	release, err := c.api.withBody(r, false)
	if err != nil {
		return err
	}
	defer release()
	models := judges(e)
	p, err := f.Prepare(raw, true)
	if err != nil {
		return fmt.Errorf("prepare the message: %w", filterError(err))
	}
	for _, u := range models {
		d.Now = append(d.Now, c.explain(r.Context(), f, u, p))
	}
	return nil
}

// judges returns the models that judged e, the global one when none is
// named.
func judges(e history.Entry) []string {
	if len(e.Models) == 0 {
		return []string{""}
	}
	return e.Models
}

// learnedNotice says what learning a message did, from the query the
// learn action redirects with. The query is only a link's: a value that
// is not one of classes, or a model not one of models, says nothing, so
// that a link from elsewhere cannot put its words on the page.
func learnedNotice(q url.Values, classes, models []string) string {
	l, model, prev := q.Get("learned"), q.Get("model"), q.Get("prev")
	if !slices.Contains(classes, l) || !slices.Contains(models, model) || (prev != "" && !slices.Contains(classes, prev)) {
		return ""
	}
	n := fmt.Sprintf("Learned as %s for the %s model", l, modelName(model))
	switch {
	case q.Get("changed") != "1":
		return n + ": it was already trained as " + l + ", nothing changed."
	case prev != "":
		return n + ", untrained as " + prev + " first."
	}
	return n + "."
}

// explain classifies a prepared message with user's model and explains
// the verdict.
func (c *Console) explain(ctx context.Context, f *filter.Filter, user string, p filter.Prepared) explained {
	ex := explained{Model: user}
	vd, err := f.ClassifyPrepared(ctx, user, p, filter.ClassifyOptions{Explain: consoleExplain, TrainedAs: true})
	if err != nil {
		ex.Err = err.Error()
		return ex
	}
	ex.Verdict, ex.Probability, ex.Score, ex.Required, ex.TrainedAs = vd.Label(), vd.Probability, vd.Score, f.Config().Required(), vd.TrainedAs
	m := make(map[string][]history.Feature, len(vd.Toward))
	for class, cs := range vd.Toward {
		fs := make([]history.Feature, len(cs))
		for i, c := range cs {
			fs[i] = history.Feature{Name: c.Name, Value: c.Count, Weight: c.Weight}
		}
		m[class] = fs
	}
	ex.Toward = towardList(f.Config(), m)
	return ex
}

// learn trains a message of the history as a class for one of the
// models that judged it, through the relabel path reports take, and
// shows the message again with what it did.
func (c *Console) learn(w http.ResponseWriter, r *http.Request) error {
	if c.api.History == nil {
		return fail(http.StatusNotFound, errors.New("this daemon keeps no history"))
	}
	id, err := entryID(r)
	if err != nil {
		return err
	}
	e, raw, ok := c.api.History.Get(id)
	switch {
	case !ok:
		return fail(http.StatusNotFound, errGone)
	case raw == nil:
		return fail(http.StatusGone, errors.New("the message itself is no longer held ([history] message_mb, or spamd restarted): learn it from the mailbox with spamtrain train or report"))
	}
	class, user := r.PostFormValue("class"), r.PostFormValue("model")
	f := c.api.Filter()
	if err := checkClass(f, class); err != nil || class == "" {
		return fail(http.StatusBadRequest, fmt.Errorf("class %q: want one of %q", class, f.Config().Classes))
	}
	models := judges(e)
	if !slices.Contains(models, user) {
		return fail(http.StatusBadRequest, fmt.Errorf("model %q did not judge this message (%q did)", user, models))
	}
	release, err := c.api.withBody(r, true)
	if err != nil {
		return err
	}
	defer release()
	prev, changed, err := c.o.Relabel(r.Context(), user, class, raw, store.Digest(e.Digest))
	if err != nil {
		return filterError(err)
	}
	if changed {
		c.api.History.Trained(user, time.Now())
	}
	c.log.Info("console: learned a message", "entry", id, "queue_id", e.QueueID, "user", user, "class", class,
		"prev", prev, "changed", changed, "remote", r.RemoteAddr)
	http.Redirect(w, r, fmt.Sprintf("/console/message/%d?learned=%s&model=%s&prev=%s&changed=%s", id,
		url.QueryEscape(class), url.QueryEscape(user), url.QueryEscape(prev), map[bool]string{true: "1", false: "0"}[changed]), http.StatusSeeOther)
	return nil
}

// classifyData is the classify page.
type classifyData struct {
	Model  string
	Result *explained
	Digest string
	Size   int64
	Limit  int64
}

func (c *Console) classifyForm(r *http.Request, v *view) error {
	v.Data = &classifyData{Limit: c.api.Limits.MaxMessage}
	return nil
}

// classifyPost classifies a pasted or uploaded message with a chosen
// model and explains the verdict; nothing is learned.
func (c *Console) classifyPost(r *http.Request, v *view) error {
	d := &classifyData{Limit: c.api.Limits.MaxMessage, Model: strings.TrimSpace(r.PostFormValue("model"))}
	v.Data = d
	if err := store.ValidUser(d.Model); err != nil {
		return fail(http.StatusBadRequest, err)
	}
	raw := []byte(r.PostFormValue("message"))
	if file, _, err := r.FormFile("file"); err == nil {
		b, err := io.ReadAll(io.LimitReader(file, c.api.Limits.MaxMessage+1))
		file.Close()
		if err != nil {
			return fail(http.StatusBadRequest, fmt.Errorf("read the file: %w", err))
		}
		if len(b) > 0 {
			raw = b
		}
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return fail(http.StatusBadRequest, errors.New("paste a message, header and body, or choose a file"))
	}
	if int64(len(raw)) > c.api.Limits.MaxMessage {
		return fail(http.StatusRequestEntityTooLarge, fmt.Errorf("the message is larger than %d bytes ([api] max_message_bytes)", c.api.Limits.MaxMessage))
	}
	// A pasted message has the browser's line ends; a message has CRLF.
	raw = bytes.ReplaceAll(bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n")), []byte("\n"), []byte("\r\n"))
	d.Size = int64(len(raw))
	release, err := c.api.withBody(r, false)
	if err != nil {
		return err
	}
	defer release()
	f := c.api.Filter()
	p, err := f.Prepare(raw, true)
	if err != nil {
		return filterError(err)
	}
	ex := c.explain(r.Context(), f, d.Model, p)
	d.Result = &ex
	d.Digest = fmt.Sprintf("%x", p.Digest[:8])
	return nil
}

// modelRow is one model on the models page.
type modelRow struct {
	User        string
	Classes     []classRow
	Messages    uint64
	Vocabulary  uint64
	LastTrained time.Time
}

// modelsData is the models page.
type modelsData struct {
	Models []modelRow
	Total  int
	Query  string
	Shown  int
}

// maxModelRows bounds the models listed at once: each is a store read.
const maxModelRows = 200

func (c *Console) modelsPage(r *http.Request, v *view) error {
	d := &modelsData{Query: strings.TrimSpace(r.URL.Query().Get("q"))}
	v.Data = d
	st := c.api.Filter().Store()
	users, err := st.Users(r.Context())
	if err != nil {
		return fmt.Errorf("list the models: %w", err)
	}
	d.Total = len(users)
	if d.Query != "" {
		users = slices.DeleteFunc(users, func(u string) bool { return !strings.Contains(u, d.Query) })
	}
	slices.Sort(users)
	d.Shown = min(len(users), maxModelRows)
	for _, u := range users[:d.Shown] {
		t, err := st.Totals(r.Context(), u)
		if err != nil {
			return fmt.Errorf("totals of %q: %w", u, err)
		}
		row := modelRow{User: u, Vocabulary: t.Vocabulary}
		for i, class := range t.Classes {
			row.Classes = append(row.Classes, classRow{Class: class, Messages: t.Messages[i], Tokens: t.Tokens[i]})
			row.Messages += t.Messages[i]
		}
		if c.api.History != nil {
			row.LastTrained, _ = c.api.History.LastTrained(u)
		}
		d.Models = append(d.Models, row)
	}
	return nil
}

// configData is the configuration page.
type configData struct{ Text string }

func (c *Console) configPage(r *http.Request, v *view) error {
	v.Data = &configData{Text: c.o.Config()}
	return nil
}
