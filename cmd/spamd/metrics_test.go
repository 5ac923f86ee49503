package main

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/spamd/spamd/decide"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/store"
)

// TestExpectedFalsePositives checks that the expected false positives
// count every verdict of a class that counts as spam, as the filter's
// spam_classes say.
func TestExpectedFalsePositives(t *testing.T) {
	m := newMetrics()
	m.Message("phishing", 0.9, decide.Reject, time.Millisecond)
	if c := m.Classified(); c.ExpectedFalsePositives != 0 {
		t.Errorf("without spam classes, phishing counted: %+v", c)
	}
	isSpam := func(v string) bool { return v == "spam" || v == "phishing" }
	m.isSpam.Store(&isSpam)
	m.Message("phishing", 0.9, decide.Reject, time.Millisecond)
	m.Message("newsletter", 0.2, decide.Accept, time.Millisecond)
	m.Message("unsure", 0.6, decide.Accept, time.Millisecond)
	c := m.Classified()
	if c.Messages != 4 || math.Abs(c.ExpectedFalsePositives-0.1) > 1e-9 || math.Abs(c.ExpectedHam-(0.1+0.1+0.8+0.4)) > 1e-9 {
		t.Errorf("classified %+v", c)
	}
}

// TestWarnClasses checks that spamd says at start when the global model
// learned a class the configuration does not list.
func TestWarnClasses(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	three := filter.DefaultConfig()
	if err := three.Set("classes", "ham+spam+newsletter"); err != nil {
		t.Fatal(err)
	}
	f, err := filter.New(st, three)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Learn(ctx, "", []byte("Subject: digest\n\nweekly digest\n"), "newsletter"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		fc   filter.Config
		warn bool
	}{{filter.DefaultConfig(), true}, {three, false}} {
		var buf bytes.Buffer
		warnClasses(ctx, slog.New(slog.NewTextHandler(&buf, nil)), st, tc.fc)
		if got := buf.String(); (got != "") != tc.warn || tc.warn && !strings.Contains(got, "classes=newsletter") {
			t.Errorf("classes %q: logged %q", tc.fc.Classes, got)
		}
	}
}
