package milter

import (
	gomilter "github.com/emersion/go-milter"

	"github.com/spamd/spamd/decide"
)

// tempfailText is the public text of a temporary failure.
const tempfailText = "Temporary failure, please try again later"

// tempfail returns the Tempfail outcome for an internal failure.
func tempfail(reason string) decide.Outcome {
	return decide.Outcome{Action: decide.Tempfail, Code: 451, Enhanced: "4.7.1", Text: tempfailText, Reason: reason}
}

// response is the final milter response carrying the outcome o; a
// quarantine is requested separately, before it.
func response(o decide.Outcome) gomilter.Response {
	if r := o.Reply(); r != "" {
		return gomilter.NewResponseStr(byte(gomilter.ActReplyCode), r)
	}
	return gomilter.RespAccept
}
