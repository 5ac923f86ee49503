package main

import (
	"math"
	"testing"
	"time"

	"github.com/spamd/spamd/milter"
)

// TestExpectedFalsePositives checks that the expected false positives
// count every verdict of a class that counts as spam, as the filter's
// spam_classes say.
func TestExpectedFalsePositives(t *testing.T) {
	m := newMetrics()
	m.Message("phishing", 0.9, milter.Reject, time.Millisecond)
	if c := m.Classified(); c.ExpectedFalsePositives != 0 {
		t.Errorf("without spam classes, phishing counted: %+v", c)
	}
	isSpam := func(v string) bool { return v == "spam" || v == "phishing" }
	m.isSpam.Store(&isSpam)
	m.Message("phishing", 0.9, milter.Reject, time.Millisecond)
	m.Message("newsletter", 0.2, milter.Accept, time.Millisecond)
	m.Message("unsure", 0.6, milter.Accept, time.Millisecond)
	c := m.Classified()
	if c.Messages != 4 || math.Abs(c.ExpectedFalsePositives-0.1) > 1e-9 || math.Abs(c.ExpectedHam-(0.1+0.1+0.8+0.4)) > 1e-9 {
		t.Errorf("classified %+v", c)
	}
}
