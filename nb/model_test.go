package nb

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestPriorKindText(t *testing.T) {
	for _, k := range []PriorKind{PriorML, PriorMAP, PriorUniform} {
		t.Run(k.String(), func(t *testing.T) {
			text, err := k.MarshalText()
			if err != nil {
				t.Fatal(err)
			}
			var got PriorKind
			if err := got.UnmarshalText(text); err != nil || got != k {
				t.Errorf("round trip of %q: %v, %v", text, got, err)
			}
		})
	}
	t.Run("invalid", func(t *testing.T) {
		var k PriorKind
		if err := k.UnmarshalText([]byte("MAP")); !errors.Is(err, ErrInvalid) {
			t.Errorf("UnmarshalText(MAP) = %v, want ErrInvalid", err)
		}
		if _, err := PriorKind(7).MarshalText(); !errors.Is(err, ErrInvalid) {
			t.Errorf("MarshalText(7) = %v, want ErrInvalid", err)
		}
		if got := PriorKind(7).String(); got != "PriorKind(7)" {
			t.Errorf("String = %q", got)
		}
	})
}

func TestParamsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Params
		ok   bool
	}{
		{"zero", Params{}, true},
		{"all set", Params{Alpha: 0.1, Prior: PriorMAP, PriorAlpha: 2, Lambda: 500, LambdaPrior: 5, Normalize: 0.5, TopN: 15, Complement: true, MinCount: 2, MinSpread: 1}, true},
		{"negative alpha", Params{Alpha: -1}, false},
		{"NaN alpha", Params{Alpha: math.NaN()}, false},
		{"tiny alpha", Params{Alpha: 1e-12}, false},
		{"huge lambda", Params{Lambda: 1e12}, false},
		{"negative prior alpha", Params{PriorAlpha: -2}, false},
		{"NaN lambda prior", Params{LambdaPrior: math.NaN()}, false},
		{"unknown prior", Params{Prior: 3}, false},
		{"normalize above 1", Params{Normalize: 1.5}, false},
		{"negative normalize", Params{Normalize: -0.5}, false},
		{"negative TopN", Params{TopN: -1}, false},
		{"negative MinCount", Params{MinCount: -1}, false},
		{"negative MinSpread", Params{MinSpread: -1}, false},
		{"NaN MinSpread", Params{MinSpread: math.NaN()}, false},
		{"infinite MinCount", Params{MinCount: math.Inf(1)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.ok && err != nil || !tc.ok && !errors.Is(err, ErrInvalid) {
				t.Errorf("Validate = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// TestSmoothingMessage checks that the error for a smoothing value out of
// range says what zero stands for in this package, not that it is a
// caller's default (the filter's alpha defaults to 0.01, not to 0).
func TestSmoothingMessage(t *testing.T) {
	for _, tc := range []struct {
		p    Params
		want string
	}{
		{Params{Alpha: -1}, "Alpha -1 is not in [1e-09, 1e+09] (0 means 1)"},
		{Params{Lambda: 1e12}, "Lambda 1e+12 is not in [1e-09, 1e+09] (0 means 1000)"},
		{Params{LambdaPrior: -3}, "(0 means 10)"},
	} {
		err := tc.p.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "default") {
			t.Errorf("Validate(%+v) = %v, want it to say %q", tc.p, err, tc.want)
		}
	}
}

func TestModelValidate(t *testing.T) {
	valid := func() *Model { return withUser(spamExample()) }
	for _, tc := range []struct {
		name   string
		change func(*Model)
		ok     bool
	}{
		{"valid", func(*Model) {}, true},
		{"short totals", func(m *Model) { m.Global.Tokens = m.Global.Tokens[:1]; m.User = &Totals{} }, true},
		{"one class", func(m *Model) { m.Classes = m.Classes[:1] }, false},
		{"unnamed class", func(m *Model) { m.Classes = []string{"ham", ""} }, false},
		{"duplicate class", func(m *Model) { m.Classes = []string{"ham", "ham"} }, false},
		{"long totals", func(m *Model) { m.Global.Messages = []float64{1, 2, 3} }, false},
		{"negative total", func(m *Model) { m.Global.Tokens = []float64{-1, 2} }, false},
		{"NaN user total", func(m *Model) { m.User.Messages = []float64{math.NaN(), 2} }, false},
		{"long user totals", func(m *Model) { m.User.Tokens = []float64{1, 2, 3} }, false},
		{"infinite vocabulary", func(m *Model) { m.Vocabulary = math.Inf(1) }, false},
		{"invalid params", func(m *Model) { m.Params.TopN = -1 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := valid()
			tc.change(m)
			err := m.Validate()
			if tc.ok && err != nil || !tc.ok && !errors.Is(err, ErrInvalid) {
				t.Errorf("Validate = %v, want ok %v", err, tc.ok)
			}
		})
	}
}
