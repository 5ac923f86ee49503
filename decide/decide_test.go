package decide

import (
	"testing"

	"github.com/spamd/spamd/filter"
)

// TestLabelFor checks the label under a recipient's required score.
func TestLabelFor(t *testing.T) {
	fc := filter.DefaultConfig() // required 3, unsure from 0
	v := func(score float64, class string, unsure, untrained bool) filter.Verdict {
		return filter.Verdict{Score: score, Class: class, Unsure: unsure || untrained, Untrained: untrained}
	}
	for _, tt := range []struct {
		name     string
		v        filter.Verdict
		required float64
		want     string
	}{
		{"the filter's own at its required", v(2, filter.Ham, true, false), fc.Required(), "unsure"},
		{"spam from a lower required", v(2, filter.Ham, true, false), 1.5, "spam"},
		{"unsure under a higher required", v(5, filter.Spam, false, false), 6, "unsure"},
		{"ham under the unsure band", v(-0.5, filter.Ham, false, false), 6, "ham"},
		{"no unsure band below unsure_low", v(-2, filter.Ham, false, false), -3, "spam"},
		{"an untrained model stays unsure", v(9, filter.Spam, false, true), 1, "unsure"},
		{"another class stays itself", v(9, "newsletter", false, false), 1, "newsletter"},
	} {
		if got := labelFor(fc, tt.v, tt.required); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}
