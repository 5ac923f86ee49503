package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/spamd/spamd/bow"
)

// TestMemoryCheckSamples corrupts the memory store's samples, which no
// call can, and checks that Check finds each corruption.
func TestMemoryCheckSamples(t *testing.T) {
	tests := []struct {
		name    string
		corrupt func(mod *memModel)
		want    string
	}{
		{"untouched", func(*memModel) {}, ""},
		{"a value added", func(mod *memModel) { mod.samples.Add(0, []Value{{Measure: 2, Level: 7}}, 1) }, "measure 2 of class \"spam\""},
		{"a value lost", func(mod *memModel) { mod.samples.Add(1, []Value{{Measure: 0, Level: 300}}, -1) }, "measure 0 of class \"ham\""},
		{"a value moved", func(mod *memModel) {
			mod.samples.Add(0, []Value{{Measure: 0, Level: 100}}, -1)
			mod.samples.Add(0, []Value{{Measure: 0, Level: 101}}, 1)
		}, "measure 0 of class \"spam\": stored n=1 sum=101"},
		{"a seen record's value changed", func(mod *memModel) {
			for d, rec := range mod.seen {
				if rec.class == 1 {
					rec.values = []Value{{Measure: 0, Level: 301}}
					mod.seen[d] = rec
				}
			}
		}, "measure 0 of class \"ham\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMemory()
			ctx := context.Background()
			ops := []Op{
				{Digest: Digest{1}, Class: "spam", Bag: bow.FromMaps(nil, map[bow.Hash]uint32{1: 1}), Values: []Value{{Measure: 0, Level: 100}}},
				{Digest: Digest{2}, Class: "ham", Bag: bow.FromMaps(nil, map[bow.Hash]uint32{2: 1}), Values: []Value{{Measure: 0, Level: 300}, {Measure: 4, Level: 1}}},
			}
			if _, err := m.Apply(ctx, "u", ops); err != nil {
				t.Fatal(err)
			}
			tt.corrupt(m.users["u"])
			err := m.Check(ctx, "u")
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrInconsistent) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check: %v; want ErrInconsistent saying %s", err, tt.want)
			}
		})
	}
}
