package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/spamd/spamd/filter"
)

// Axis is one setting a sweep varies, with the values it takes.
type Axis struct {
	Key    string
	Values []string
}

// ParseAxis parses "key=v1,v2,...".
func ParseAxis(s string) (Axis, error) {
	k, vs, ok := strings.Cut(s, "=")
	if !ok || k == "" || vs == "" {
		return Axis{}, fmt.Errorf("%w: sweep %q: want KEY=V1,V2,...", ErrOptions, s)
	}
	a := Axis{Key: k, Values: strings.Split(vs, ",")}
	var probe filter.Config
	for _, v := range a.Values {
		probe = filter.DefaultConfig()
		if err := probe.Set(k, v); err != nil {
			return Axis{}, fmt.Errorf("sweep %q: %w", s, err)
		}
	}
	return a, nil
}

// Row is one combination of a sweep and its report.
type Row struct {
	Values map[string]string `json:"values"`
	Report *Report           `json:"report"`
}

// Sweep runs o on c for every combination of the axes' values applied to
// base, and returns the rows sorted best first by metric (a JSON name of
// Metrics; lower is better except for accuracy, precision, recall,
// specificity, f1 and log_likelihood). progress, when not nil, is told of
// each finished row. Every run of a sweep reuses the messages parsed for
// the first run under the same tokenizer settings, and the corpus keeps
// them only until the last such run.
func Sweep(ctx context.Context, c *Corpus, base filter.Config, axes []Axis, o Options, metric string, progress func(done, total int)) ([]Row, error) {
	if _, err := MetricValue(Metrics{}, metric); err != nil {
		return nil, err
	}
	combos := []map[string]string{{}}
	for _, a := range axes {
		var next []map[string]string
		for _, cmb := range combos {
			for _, v := range a.Values {
				m := make(map[string]string, len(cmb)+1)
				for k, x := range cmb {
					m[k] = x
				}
				m[a.Key] = v
				next = append(next, m)
			}
		}
		combos = next
	}
	cfgs := make([]filter.Config, len(combos))
	// last[k] is the last combination parsed under tokenizer setting k,
	// after which the corpus need not keep those parsed messages.
	last := map[string]int{}
	for i, cmb := range combos {
		cfgs[i] = base
		for _, a := range axes {
			if err := cfgs[i].Set(a.Key, cmb[a.Key]); err != nil {
				return nil, err
			}
		}
		last[cacheKey(cfgs[i])] = i
	}
	rows := make([]Row, 0, len(combos))
	for i, cmb := range combos {
		r, err := run(ctx, c, cfgs[i], o, true)
		if last[cacheKey(cfgs[i])] == i {
			c.forget(cfgs[i])
		}
		if err != nil {
			return nil, fmt.Errorf("sweep %v: %w", cmb, err)
		}
		r.Records = nil // a sweep keeps the metrics only
		rows = append(rows, Row{Values: cmb, Report: r})
		if progress != nil {
			progress(i+1, len(combos))
		}
	}
	higher := HigherIsBetter(metric)
	slices.SortStableFunc(rows, func(a, b Row) int {
		x, _ := MetricValue(a.Report.Metrics, metric)
		y, _ := MetricValue(b.Report.Metrics, metric)
		if higher {
			x, y = y, x
		}
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	return rows, nil
}

// MetricValue returns the metric of m named by its JSON name.
func MetricValue(m Metrics, name string) (float64, error) {
	b, _ := json.Marshal(m)
	var all map[string]float64
	if err := json.Unmarshal(b, &all); err != nil {
		return 0, err
	}
	v, ok := all[name]
	if !ok {
		names := make([]string, 0, len(all))
		for k := range all {
			names = append(names, k)
		}
		slices.Sort(names)
		return 0, fmt.Errorf("%w: unknown metric %q (known: %s)", ErrOptions, name, strings.Join(names, ", "))
	}
	return v, nil
}

// HigherIsBetter reports whether a larger value of metric is better.
func HigherIsBetter(metric string) bool {
	switch metric {
	case "accuracy", "precision", "recall", "specificity", "f1", "log_likelihood":
		return true
	}
	return false
}
