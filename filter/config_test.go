package filter

import (
	"math"
	"testing"
)

func TestRequired(t *testing.T) {
	for _, tc := range []struct {
		name           string
		costFP, lo, hi float64
		want           float64
	}{
		{"no band: the cost's threshold", 4, 0, 0, math.Log(4)},
		{"band above the threshold: its top", 4, 0, 13.5, 13.5},
		{"band below the threshold: the threshold", 4, -5, 1, math.Log(4)},
		{"empty band: the threshold", 4, 3, 3, math.Log(4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.CostFP, c.CostFN, c.UnsureLow, c.UnsureHigh = tc.costFP, 1, tc.lo, tc.hi
			if got := c.Required(); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("Required() = %v, want %v", got, tc.want)
			}
		})
	}
}
