package control

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
)

// Counters are the daemon's counters since it started: the ones /metrics
// exports, read from the same registry.
type Counters struct {
	// Messages counts the milter's answers by verdict: ham, unsure,
	// spam, skipped, error.
	Messages map[string]uint64
	// Actions counts them by action: accept, quarantine, reject,
	// tempfail.
	Actions map[string]uint64
	// Trained counts the messages whose training changed a model, by the
	// class they are now trained as ("forgotten" when untrained).
	Trained map[string]uint64
	// Errors counts failures by kind.
	Errors map[string]uint64
	// Latency is the histogram of the milter's answer times.
	Latency Histogram
}

// Histogram is a cumulative histogram, as Prometheus keeps one.
type Histogram struct {
	// Bounds are the buckets' upper bounds in seconds, ascending;
	// Counts[i] counts the observations up to Bounds[i].
	Bounds []float64
	Counts []uint64
	// Count and Sum are the number of observations and their sum in
	// seconds.
	Count uint64
	Sum   float64
}

// Sub returns h less an earlier snapshot of it.
func (h Histogram) Sub(earlier Histogram) Histogram {
	out := Histogram{Bounds: h.Bounds, Counts: make([]uint64, len(h.Counts)), Count: h.Count - earlier.Count, Sum: h.Sum - earlier.Sum}
	for i, n := range h.Counts {
		if i < len(earlier.Counts) {
			n -= earlier.Counts[i]
		}
		out.Counts[i] = n
	}
	return out
}

// Quantile estimates the q-quantile in seconds by linear interpolation
// within its bucket, as Prometheus's histogram_quantile does: NaN without
// observations, the highest bound for a quantile past it.
func (h Histogram) Quantile(q float64) float64 {
	if h.Count == 0 || len(h.Bounds) == 0 {
		return math.NaN()
	}
	rank := q * float64(h.Count)
	lower, below := 0.0, uint64(0)
	for i, b := range h.Bounds {
		n := h.Counts[i]
		if float64(n) >= rank {
			if n == below {
				return b
			}
			return lower + (b-lower)*(rank-float64(below))/float64(n-below)
		}
		lower, below = b, n
	}
	return h.Bounds[len(h.Bounds)-1]
}

// sample is the counters at one moment.
type sample struct {
	at time.Time
	c  Counters
}

// Sampling of the counters, for the rates of the status page.
const (
	sampleEvery = 10 * time.Second
	// rateWindow is the span rates are computed over.
	rateWindow = 5 * time.Minute
)

// rates holds the latest samples, oldest first, over rateWindow.
type rates struct {
	samples []sample
}

// Run samples the counters every 10 s until ctx is done, so that the
// status page can show rates over the last minutes.
func (c *Console) Run(ctx context.Context) {
	if c.o.Counters == nil {
		return
	}
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		c.takeSample(time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// takeSample adds a sample of the counters taken at now, letting go of
// those older than rateWindow.
func (c *Console) takeSample(now time.Time) {
	s := sample{at: now, c: c.o.Counters()}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rates.samples = append(c.rates.samples, s)
	k := 0
	for k < len(c.rates.samples)-1 && now.Sub(c.rates.samples[k].at) > rateWindow {
		k++
	}
	c.rates.samples = slices.Delete(c.rates.samples, 0, k)
}

// countersView is what the status page shows of the counters: totals
// since the start, rates per minute and latency over Window.
type countersView struct {
	// Window says over what span the rates are; Windowed is false when
	// that is since the start.
	Window   string
	Windowed bool
	Verdicts []rateRow
	Actions  []rateRow
	Trained  []rateRow
	Errors   []rateRow
	// Latency over the window and since the start.
	Recent, All latencyView
}

type rateRow struct {
	Name   string
	Total  uint64
	PerMin float64
}

type latencyView struct {
	Count               uint64
	Mean, P50, P90, P99 float64 // milliseconds; NaN without messages
}

// countersView reads the counters now and computes the rates since the
// oldest sample, or since the start when there is none at least 30 s
// old.
func (c *Console) countersView(now time.Time) *countersView {
	cur := c.o.Counters()
	base := sample{at: c.started}
	c.mu.Lock()
	if len(c.rates.samples) > 0 && now.Sub(c.rates.samples[0].at) >= 30*time.Second {
		base = c.rates.samples[0]
	}
	c.mu.Unlock()
	span := now.Sub(base.at)
	v := &countersView{Window: "since the start"}
	if base.at != c.started {
		v.Windowed = true
		v.Window = fmt.Sprintf("over the last %d min", int(span.Round(time.Minute)/time.Minute))
		if span < time.Minute {
			v.Window = fmt.Sprintf("over the last %d s", int(span.Round(time.Second)/time.Second))
		}
	}
	minutes := math.Max(span.Minutes(), 1.0/60)
	rows := func(now, then map[string]uint64, order []string, skipZero bool) []rateRow {
		names := slices.Clone(order)
		for _, k := range slices.Sorted(maps.Keys(now)) {
			if !slices.Contains(names, k) {
				names = append(names, k)
			}
		}
		var out []rateRow
		for _, k := range names {
			if skipZero && now[k] == 0 {
				continue
			}
			out = append(out, rateRow{Name: k, Total: now[k], PerMin: float64(now[k]-then[k]) / minutes})
		}
		return out
	}
	v.Verdicts = rows(cur.Messages, base.c.Messages, []string{"ham", "unsure", "spam", "skipped", "error"}, false)
	v.Actions = rows(cur.Actions, base.c.Actions, []string{"accept", "quarantine", "reject", "tempfail"}, false)
	v.Trained = rows(cur.Trained, base.c.Trained, nil, false)
	v.Errors = rows(cur.Errors, base.c.Errors, nil, true)
	v.All = latency(cur.Latency)
	v.Recent = latency(cur.Latency.Sub(base.c.Latency))
	return v
}

func latency(h Histogram) latencyView {
	ms := func(s float64) float64 { return 1000 * s }
	l := latencyView{Count: h.Count, Mean: math.NaN(), P50: ms(h.Quantile(0.5)), P90: ms(h.Quantile(0.9)), P99: ms(h.Quantile(0.99))}
	if h.Count > 0 {
		l.Mean = ms(h.Sum / float64(h.Count))
	}
	return l
}
