package milter

import (
	"strings"
	"testing"

	"github.com/spamd/spamd/store"
)

// TestResultMeasures runs a message through a real milter session with
// measures on: X-Spamd-Result lists the measures that weighed most, each
// with its value and weight toward spam.
func TestResultMeasures(t *testing.T) {
	f, spam, _ := trainedFilter(t, store.NewMemory())
	sets := map[string]string{"measures": "parzen", "min_trained": "1"}
	for _, fam := range []string{"size", "links", "html", "text", "route", "time"} {
		sets["weight_"+fam] = "1"
	}
	f = withFilter(t, f, sets)
	_, addr := startServer(t, testSettings(f), &recorder{})
	res := sendOne(t, addr, defaultEnvelope(), withCRLF(spam)).result(t)
	if len(res.Measures) == 0 {
		t.Fatalf("no measures in %+v", res)
	}
	for _, m := range res.Measures {
		name, rest, ok := strings.Cut(m, "=")
		if !ok || name == "" || !strings.Contains(rest, " (") || !strings.HasSuffix(rest, ")") {
			t.Errorf("measure %q is not NAME=VALUE (WEIGHT)", m)
		}
	}
}
