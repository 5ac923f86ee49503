package store

import (
	"context"
	"errors"
	"io"
	"slices"
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

// TestMemoryRestoreSorted restores rows that come in hash order, as a dump
// gives them: the table then has runs as short as rows put at random make,
// where one growing as it filled packed them all into one run.
func TestMemoryRestoreSorted(t *testing.T) {
	const n = 100_000
	hashes := make([]bow.Hash, n)
	for i := range hashes {
		hashes[i] = bow.Hash(uint64(i+1) * 0x9e3779b97f4a7c15)
	}
	slices.Sort(hashes)
	recs := []Record{{Classes: []string{"spam", "ham"}}}
	for _, h := range hashes {
		recs = append(recs, Record{Hash: h, Counts: Counts{1, 0, 2, 0}, Day: 20000})
	}
	m := NewMemory()
	defer m.Close()
	i := 0
	err := m.Restore(context.Background(), "u", func() (Record, error) {
		if i == len(recs) {
			return Record{}, io.EOF
		}
		i++
		return recs[i-1], nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tab := &m.users["u"].rows
	if tab.len() != n {
		t.Fatalf("%d rows restored, want %d", tab.len(), n)
	}
	longest, run := 0, 0
	for i := range tab.slots {
		if tab.slots[i].row == 0 {
			run = 0
			continue
		}
		run++
		longest = max(longest, run)
	}
	// At four fifths full, runs of rows put at random reach some
	// hundred slots in 100,000 rows; one run of them all was the fault.
	if longest > 1000 {
		t.Errorf("the longest run of slots is %d rows", longest)
	}
}

// TestDrainReleases drains a model whose header the caller refuses: the
// model is gone and its table given back all the same.
func TestDrainReleases(t *testing.T) {
	m := NewMemory()
	defer m.Close()
	bag := map[bow.Hash]uint32{}
	for i := range 200_000 {
		bag[bow.Hash(uint64(i+1)*0x9e3779b97f4a7c15)] = 1
	}
	ctx := context.Background()
	if _, err := m.Apply(ctx, "u", []Op{{Digest: Digest{1}, Class: "spam", Bag: bow.FromMaps(nil, bag), Day: 20000}}); err != nil {
		t.Fatal(err)
	}
	mod := m.users["u"]
	if mod.rows.unmap == nil {
		t.Skip("the table is not mapped here")
	}
	refuse := errors.New("refused")
	if err := Draining(m).Drain(ctx, "u", func(Record) error { return refuse }); !errors.Is(err, refuse) {
		t.Fatalf("Drain returned %v", err)
	}
	if m.users["u"] != nil || mod.rows.slots != nil || mod.rows.unmap != nil {
		t.Error("a drain cut off at the header kept the model or its table")
	}
}
