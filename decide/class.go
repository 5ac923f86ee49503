package decide

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/filter"
)

// ClassHeader is the name of the header carrying the class a message was
// decided as (for an unsure message, the better guess), for Sieve rules
// that file newsletters or other classes of their own.
const ClassHeader = "X-Spamd-Class"

// ValidActions reports a class in a.Classes that fc does not know: its
// action could never be taken.
func ValidActions(a config.Actions, fc filter.Config) error {
	for class := range a.Classes {
		if !fc.HasClass(class) {
			return fmt.Errorf("actions.classes: %q is not one of the filter's classes %s ([filter] classes)", class, strings.Join(fc.Classes, "+"))
		}
	}
	return nil
}

// classOutcome returns the outcome of a message decided as the class
// label (not unsure) that a.Classes names an action for, and whether its
// Subject is to be tagged; ok is false when no action is named.
func classOutcome(a config.Actions, label string, score float64) (o Outcome, tag, ok bool) {
	action, ok := a.Classes[label]
	if !ok {
		return Outcome{}, false, false
	}
	switch action {
	case "tag":
		return Outcome{Action: Accept}, true, true
	case "quarantine":
		return Outcome{Action: Quarantine, Reason: fmt.Sprintf("spamd: %s, score %.2f", label, score)}, false, true
	case "reject":
		return Outcome{Action: Reject, Code: a.RejectCode, Enhanced: a.RejectStatus, Text: a.RejectText,
			Reason: fmt.Sprintf("class %s: actions.classes says reject", label)}, false, true
	}
	return Outcome{Action: Accept}, false, true
}

// isSpam reports whether label is a spam class of fc; "unsure" is not.
func isSpam(fc filter.Config, label string) bool {
	return slices.Contains(fc.Spam(), label)
}
