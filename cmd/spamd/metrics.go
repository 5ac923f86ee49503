package main

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/spamd/spamd/control"
	"github.com/spamd/spamd/decide"
	"github.com/spamd/spamd/milter"
	"github.com/spamd/spamd/relabel"
	"github.com/spamd/spamd/reportq"
	"github.com/spamd/spamd/store"
)

// metrics are the daemon's Prometheus metrics. It is the Observer of the
// milter and of the control API.
type metrics struct {
	reg      *prometheus.Registry
	messages *prometheus.CounterVec
	latency  prometheus.Histogram
	errors   *prometheus.CounterVec
	requests *prometheus.CounterVec
	trained  *prometheus.CounterVec
	reloads  *prometheus.CounterVec
	reports  *prometheus.CounterVec
	// expectedHam and expectedFP sum the probabilities of ham of the
	// classified messages, and of those decided spam; classified
	// mirrors them for stats.
	expectedHam prometheus.Counter
	expectedFP  prometheus.Counter
	// isSpam, when set, says whether a verdict is a class that counts as
	// spam (the filter's spam_classes); unset, "spam" alone is.
	isSpam     atomic.Pointer[func(string) bool]
	mu         sync.Mutex
	classified control.Classified
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spamd_messages_total",
			Help: "Messages the milter answered, by verdict (ham, spam or another class of the filter, unsure, skipped, error) and action (accept, quarantine, reject, tempfail).",
		}, []string{"verdict", "action"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "spamd_milter_latency_seconds",
			Help:    "Time from the end of a message to the milter's answer.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14), // 0.5 ms to 4 s
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spamd_errors_total",
			Help: "Failures, by kind: classify, panic, timeout, protocol, limit (milter) and api.",
		}, []string{"kind"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spamd_api_requests_total",
			Help: "Control API requests, by endpoint and HTTP status.",
		}, []string{"endpoint", "code"}),
		trained: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spamd_trained_total",
			Help: "Messages whose training changed a model, by the class they are now trained as (forgotten when untrained).",
		}, []string{"class"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spamd_config_reloads_total",
			Help: "Configuration reloads, by result (ok, failed).",
		}, []string{"result"}),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spamd_reports_applied_total",
			Help: "Misclassification reports applied, by source (api, spamtrain, maildir, console), class and whether they changed the model (changed, unchanged).",
		}, []string{"source", "class", "result"}),
	}
	m.expectedHam = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "spamd_expected_ham_total",
		Help: "Sum of the probabilities of ham of the messages classified: the ham among them the filter reckons with.",
	})
	m.expectedFP = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "spamd_expected_false_positives_total",
		Help: "Sum of the probabilities of ham of the messages decided spam: the false positives the filter reckons with. Divided by spamd_expected_ham_total, the false positive rate to expect.",
	})
	m.reg.MustRegister(m.messages, m.latency, m.errors, m.requests, m.trained, m.reloads, m.reports, m.expectedHam, m.expectedFP,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, k := range []string{"classify", "panic", "timeout", "protocol", "limit", "api"} {
		m.errors.WithLabelValues(k)
	}
	return m
}

// watch adds the gauges read at each scrape: the milter's connections,
// the reports waiting and the global model's size.
func (m *metrics) watch(st modelStore, ms *milter.Server, q *reportq.Queue) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "spamd_milter_connections",
			Help: "Open MTA connections.",
		}, func() float64 { return float64(ms.Connections()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "spamd_reports_pending",
			Help: "Misclassification reports queued and not yet applied.",
		}, func() float64 { return float64(q.Len()) }),
		&modelCollector{st: st},
	)
	if hr, ok := st.(store.HealthReporter); ok {
		m.reg.MustRegister(&healthCollector{hr: hr})
	}
}

// healthCollector exports the store's health: its state and its faults
// by kind.
type healthCollector struct{ hr store.HealthReporter }

var (
	storeStateDesc = prometheus.NewDesc("spamd_store_state",
		"The store's state: 0 ok, 1 degraded (read-only: disk full or unwritable), 2 failed.", nil, nil)
	storeFaultsDesc = prometheus.NewDesc("spamd_store_faults_total",
		"Store faults met, by kind.", []string{"kind"}, nil)
)

func (c *healthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- storeStateDesc
	ch <- storeFaultsDesc
}

func (c *healthCollector) Collect(ch chan<- prometheus.Metric) {
	h := c.hr.Health()
	ch <- prometheus.MustNewConstMetric(storeStateDesc, prometheus.GaugeValue, float64(h.State))
	for kind, n := range h.Faults {
		ch <- prometheus.MustNewConstMetric(storeFaultsDesc, prometheus.CounterValue, float64(n), kind)
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Message implements milter.Observer.
func (m *metrics) Message(verdict string, spam float64, a decide.Action, elapsed time.Duration) {
	m.messages.WithLabelValues(verdict, a.String()).Inc()
	m.latency.Observe(elapsed.Seconds())
	if !(spam >= 0 && spam <= 1) {
		return
	}
	ham := 1 - spam
	m.expectedHam.Add(ham)
	fp := 0.0
	spamVerdict := verdict == "spam"
	if f := m.isSpam.Load(); f != nil {
		spamVerdict = (*f)(verdict)
	}
	if spamVerdict {
		fp = ham
		m.expectedFP.Add(ham)
	}
	m.mu.Lock()
	m.classified.Messages++
	m.classified.ExpectedHam += ham
	m.classified.ExpectedFalsePositives += fp
	m.mu.Unlock()
}

// Classified sums up the messages classified since the start, for stats.
func (m *metrics) Classified() control.Classified {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.classified
}

// Error implements milter.Observer.
func (m *metrics) Error(kind string) { m.errors.WithLabelValues(kind).Inc() }

// Request implements control.Observer.
func (m *metrics) Request(endpoint string, status int) {
	m.requests.WithLabelValues(endpoint, strconv.Itoa(status)).Inc()
	if status >= 500 {
		m.errors.WithLabelValues("api").Inc()
	}
}

// Trained implements control.Observer.
func (m *metrics) Trained(class string) {
	if class == "" {
		class = "forgotten"
	}
	m.trained.WithLabelValues(class).Inc()
}

// applied counts an applied report.
func (m *metrics) applied(o relabel.Outcome) {
	result := "unchanged"
	if o.Changed {
		result = "changed"
		m.Trained(o.Class)
	}
	m.reports.WithLabelValues(o.Source, o.Class, result).Inc()
}

// modelCollector reports the global model's size and the store's, read
// when scraped, and whether the store answers from a stale cache.
type modelCollector struct{ st modelStore }

var (
	modelMessages = prometheus.NewDesc("spamd_model_messages", "Messages trained into the global model, by class.", []string{"class"}, nil)
	modelTokens   = prometheus.NewDesc("spamd_model_tokens", "Token occurrences in the global model, by class.", []string{"class"}, nil)
	modelVocab    = prometheus.NewDesc("spamd_model_vocabulary", "Distinct tokens in the global model.", nil, nil)
	storeBytes    = prometheus.NewDesc("spamd_store_bytes", "Size of the store on disk, by part (lsm, vlog).", []string{"part"}, nil)
	storeStale    = prometheus.NewDesc("spamd_store_stale", "1 while Redis does not answer and the node classifies from its cache, which may be out of date.", nil, nil)
	staleReads    = prometheus.NewDesc("spamd_store_stale_reads_total", "Reads answered from the node's cache because Redis did not answer.", nil, nil)
)

func (c *modelCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- modelMessages
	ch <- modelTokens
	ch <- modelVocab
	ch <- storeBytes
	ch <- storeStale
	ch <- staleReads
}

func (c *modelCollector) Collect(ch chan<- prometheus.Metric) {
	if sz, ok := c.st.(sizer); ok {
		lsm, vlog := sz.Size()
		ch <- prometheus.MustNewConstMetric(storeBytes, prometheus.GaugeValue, float64(lsm), "lsm")
		ch <- prometheus.MustNewConstMetric(storeBytes, prometheus.GaugeValue, float64(vlog), "vlog")
	}
	if sl, ok := c.st.(staler); ok {
		stale, reads := sl.Stale()
		v := 0.0
		if stale {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(storeStale, prometheus.GaugeValue, v)
		ch <- prometheus.MustNewConstMetric(staleReads, prometheus.CounterValue, float64(reads))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	t, err := c.st.Totals(ctx, "")
	if err != nil {
		ch <- prometheus.NewInvalidMetric(modelMessages, err)
		return
	}
	for i, class := range t.Classes {
		ch <- prometheus.MustNewConstMetric(modelMessages, prometheus.GaugeValue, float64(t.Messages[i]), class)
		ch <- prometheus.MustNewConstMetric(modelTokens, prometheus.GaugeValue, float64(t.Tokens[i]), class)
	}
	ch <- prometheus.MustNewConstMetric(modelVocab, prometheus.GaugeValue, float64(t.Vocabulary))
}

// Counters reads the counters the console's status page shows, from the
// metrics /metrics exports.
func (m *metrics) Counters() control.Counters {
	c := control.Counters{Messages: map[string]uint64{}, Actions: map[string]uint64{}, Trained: map[string]uint64{}, Errors: map[string]uint64{}}
	each(m.messages, func(d *dto.Metric) {
		n := uint64(d.GetCounter().GetValue())
		c.Messages[label(d, "verdict")] += n
		c.Actions[label(d, "action")] += n
	})
	each(m.trained, func(d *dto.Metric) { c.Trained[label(d, "class")] += uint64(d.GetCounter().GetValue()) })
	each(m.errors, func(d *dto.Metric) { c.Errors[label(d, "kind")] += uint64(d.GetCounter().GetValue()) })
	each(m.latency, func(d *dto.Metric) {
		h := d.GetHistogram()
		c.Latency.Count, c.Latency.Sum = h.GetSampleCount(), h.GetSampleSum()
		for _, b := range h.GetBucket() {
			c.Latency.Bounds = append(c.Latency.Bounds, b.GetUpperBound())
			c.Latency.Counts = append(c.Latency.Counts, b.GetCumulativeCount())
		}
	})
	return c
}

// each calls fn with every metric c collects, as /metrics writes it.
func each(c prometheus.Collector, fn func(*dto.Metric)) {
	ch := make(chan prometheus.Metric, 16)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) == nil {
			fn(&d)
		}
	}
}

// label returns the value of a metric's label name.
func label(d *dto.Metric, name string) string {
	for _, l := range d.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
