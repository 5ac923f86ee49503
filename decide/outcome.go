package decide

import "fmt"

// Action is what the MTA is told to do with a message.
type Action int

// The actions, from the most to the least lenient.
const (
	// Accept lets the message through with the headers the milter added
	// (SMFIR_ACCEPT).
	Accept Action = iota
	// Quarantine lets the message through but puts it on hold
	// (SMFIR_QUARANTINE, then SMFIR_ACCEPT); Postfix moves it to the hold
	// queue.
	Quarantine
	// Reject refuses the message with a permanent 5xx reply
	// (SMFIR_REPLYCODE).
	Reject
	// Tempfail refuses the message with a temporary 4xx reply
	// (SMFIR_REPLYCODE); the sender retries later.
	Tempfail
)

// String returns the action's name as logged and used in metrics.
func (a Action) String() string {
	switch a {
	case Accept:
		return "accept"
	case Quarantine:
		return "quarantine"
	case Reject:
		return "reject"
	case Tempfail:
		return "tempfail"
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// Outcome is the milter's answer about one message, typed like maddy's
// exterrors.SMTPError: what the MTA does, the reply the sender sees, and
// the reason only the log sees.
type Outcome struct {
	// Action is what the MTA does with the message.
	Action Action
	// Code is the SMTP reply code of a Reject (5xx) or Tempfail (4xx).
	Code int
	// Enhanced is the RFC 3463 enhanced status code of the reply, e.g.
	// "5.7.1".
	Enhanced string
	// Text is the reply text the sender sees: generic, never the
	// verdict's detail.
	Text string
	// Reason is the private detail, logged and, for Quarantine, given to
	// the MTA as the hold reason.
	Reason string
}

// Reply returns the SMTP reply of a Reject or Tempfail outcome, as
// "550 5.7.1 Message rejected as spam"; "" for the other actions.
func (o Outcome) Reply() string {
	if o.Action != Reject && o.Action != Tempfail {
		return ""
	}
	return fmt.Sprintf("%03d %s %s", o.Code, o.Enhanced, o.Text)
}
