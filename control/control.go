// Package control is spamd's control API: HTTP with JSON answers, served
// by the daemon on a unix socket (and optionally on loopback TCP), and the
// client spamtrain uses to reach it. Badger admits one process per store,
// so while the daemon runs every other program trains and classifies
// through here.
//
// # Endpoints
//
//	GET  /healthz                          {"status":"ok"}; {"status":"degraded","reason":"…"} while the
//	                                       store is read-only or the global model has learned fewer than
//	                                       min_trained messages of spam or ham; 503 if the store cannot be read
//	GET  /v1/stats                         Stats: messages and tokens per user and class
//	POST /v1/classify?user=U&explain=N     the message as the body → Verdict
//	POST /v1/classify?user=U&decide=1&sender=S  … and Verdict.Decision: what the milter would do with
//	                                       the message for the recipient U (its preferences and sender
//	                                       lists), S the envelope sender ("" or absent: the null sender)
//	POST /v1/learn?user=U&class=C          the message as the body → TrainResult
//	POST /v1/forget?user=U                 the message as the body → TrainResult
//	POST /v1/train?user=U                  TrainRequest (a batch, JSON) → TrainResponse
//	POST /v1/report?user=U&class=C[&source=S]  the message as the body → 202 ReportResponse
//	GET  /v1/history?limit=N&before=ID&after=ID&user=U&verdict=V  History: the milter's latest verdicts
//	GET  /v1/prefs?user=U[&domain=D]       Prefs: what applies to the user's mail, and from where
//	GET  /v1/prefs?domain=D                Prefs of a domain (administrators)
//	PUT  /v1/prefs?user=U|domain=D         a config.Pref (JSON) → Prefs; {} removes what the API set
//
// user defaults to the global model (""); class is any class the filter
// is configured with. A report says that the message belongs to class
// for user, who must be named: the daemon queues it durably (package
// reportq) and answers at once; in the background, the message is then
// trained as class, relabeled if it was trained as another. The history
// lists the verdicts newest first, at most limit (default 100); a peer
// that does not read every model sees only the mail of the user named
// like its account, without the other recipients or their models'
// names (Entry.Redacted). Errors are {"error": "…"} with a 4xx or 5xx
// status.
// For example:
//
//	curl --unix-socket /run/spamd/api.sock --data-binary @msg.eml \
//	    'http://spamd/v1/learn?user=bob@example.org&class=spam'
//
// # Authorization
//
// On the unix socket, which the daemon creates with mode 0660, the kernel
// names the peer (SO_PEERCRED). Root, the daemon's own uid and the
// accounts listed as admins may train and read any model, the global one
// included. Any other uid trains only the model of the user named exactly
// like its unix account, and reads (classifies with, sees in /v1/stats)
// only that model and the global one, whose verdicts every delivered
// message carries anyway: a member of the socket's group learns nothing
// of another user's mail. Reports are authorized as training is, and also
// from the accounts listed as reporters, for any user but the global
// model: the one mail account a Dovecot IMAPSieve script runs as for
// every virtual user, which names the user it reports for. Over TCP every
// request but /healthz must carry "Authorization: Bearer TOKEN", compared
// in constant time; the token holder may train and read any model. User
// names must pass store.ValidUser. Preferences (/v1/prefs) are a user's
// as their model is: a peer reads and sets those of the user named like
// its account, and only peers that read every model touch a domain's.
//
// # Limits
//
// Limits bound every request. A message may be up to Limits.MaxMessage
// bytes and a training batch up to Limits.MaxBatch bytes of JSON; larger
// ones get 413. /v1/train reads its batch as it streams in (BatchDecoder)
// and trains it chunk by chunk, so that a batch costs the memory of a few
// messages whatever its size; a message that is not one, of an unknown
// class or too large gets an error of its own in the answer, and an error
// of the whole batch (malformed JSON, too large) answers the request with
// the messages before it trained. At most Limits.MaxRequests requests
// with a body run at once, Limits.MaxTraining of them training; more
// wait their turn for up to Limits.QueueWait. HTTPServer and Listener
// put read, write and idle timeouts and a bound on connections on every
// listener.
//
// # The web console
//
// Console serves server-rendered pages (html/template, embedded with
// their style sheet and one small script) over the same server: status,
// history, a message's explanation with buttons to learn it, a box to
// classify a pasted message, the models and the configuration. It is
// served on loopback only, behind a login with the API's token; see
// Console for how its sessions and forms are kept safe.
//
// # Failures
//
// An error of the request is 4xx. Every transient failure of the daemon
// is 503 with Retry-After (seconds): the store failing, the report spool
// unwritable or full, a request waiting its turn in vain, a deadline
// passing. The Client waits and tries again on such an answer, within its
// context; Temporary tells a caller whether trying again may help. A
// panic is 500, and so is a store found inconsistent.
package control

import (
	"net/http"

	"github.com/spamd/spamd/store"
)

// Verdict is the answer to a classification.
type Verdict struct {
	// Verdict is the label: the class decided on (ham, spam, or another
	// configured class), or unsure.
	Verdict string `json:"verdict"`
	// Class is the class decided on; for an unsure message, the better
	// guess.
	Class string `json:"class"`
	// Spam is set when Class is one of the classes that count as spam
	// and the message is not unsure: what X-Spam-Flag says.
	Spam bool `json:"spam"`
	// Probability is the spam probability: the posterior of the classes
	// that count as spam, summed.
	Probability float64 `json:"probability"`
	// Score is the spam log-odds, the logit of Probability.
	Score float64 `json:"score"`
	// Posterior is every class's posterior probability, for the classes
	// the model scored.
	Posterior map[string]float64 `json:"posterior"`
	// Positive is the spam class whose features Toward lists on the
	// spam side.
	Positive string `json:"positive"`
	// Required is the score at and above which a message is spam.
	Required float64 `json:"required"`
	// Used is the number of the message's features that were scored.
	Used int `json:"used"`
	// Digest is the hex digest identifying the message.
	Digest string `json:"digest"`
	// TrainedAs is the class the message is already trained as, if any.
	TrainedAs string `json:"trained_as,omitempty"`
	// Toward lists, by class, the features that pushed hardest toward it;
	// only when asked for with explain.
	Toward map[string][]Weight `json:"toward,omitempty"`
	// Measures lists the measures (continuous features) that weighed
	// most either way, with their weights toward spam; only when asked
	// for with explain, and measures are on.
	Measures []Measure `json:"measures,omitempty"`
	// Problems lists non-fatal trouble met while parsing.
	Problems []string `json:"problems,omitempty"`
	// Decision is what the milter would do with the message for the
	// user as its recipient; only when asked for with decide=1.
	Decision *Decision `json:"decision,omitempty"`
}

// Decision is what the milter would do with a message for one recipient,
// under their preferences and sender lists (package decide): what a
// pipe filter applies to deliver it as the milter would.
type Decision struct {
	// Verdict is the label that stands: the model's under the
	// recipient's required score, or a sender list's.
	Verdict string `json:"verdict"`
	// Spam is set when Verdict is a spam class: what X-Spam-Flag says.
	Spam bool `json:"spam"`
	// Class is what X-Spamd-Class says.
	Class string `json:"class"`
	// Required is the recipient's required score.
	Required float64 `json:"required"`
	// Listed is "allow" or "deny" when a sender list decided, and By
	// whose list it was: user, domain or global.
	Listed string `json:"listed,omitempty"`
	By     string `json:"by,omitempty"`
	// Tag is set when the Subject is to be tagged (spam, or a class
	// [actions.classes] tags), with SubjectTag ("" for no tag).
	Tag        bool   `json:"tag"`
	SubjectTag string `json:"subject_tag,omitempty"`
	// Action is what the milter would tell the MTA: accept, quarantine
	// or reject.
	Action string `json:"action"`
	// Headers are the fields to add, in order, as name and value; the
	// values are unfolded.
	Headers [][2]string `json:"headers"`
}

// Weight is one feature's share of a score.
type Weight struct {
	Token  string  `json:"token"`
	Count  float64 `json:"count"`
	Weight float64 `json:"weight"`
}

// Measure is one measure's share of a score.
type Measure struct {
	// Name names the measure and Value writes its value, as "links" and
	// "41".
	Name  string `json:"name"`
	Value string `json:"value"`
	// LogRatio is log p(x|spam) − log p(x|ham), and Weight the share of
	// the score it makes, LogRatio times the measure's weight.
	LogRatio float64 `json:"log_ratio"`
	Weight   float64 `json:"weight"`
}

// Item is one message of a training batch.
type Item struct {
	// Class is the class to train the message as; "" forgets it.
	Class string `json:"class"`
	// Message is the raw message (base64 in JSON).
	Message []byte `json:"message"`
}

// TrainRequest is a batch of messages to train for one user.
type TrainRequest struct {
	Items []Item `json:"items"`
}

// TrainResult says what training one message did.
type TrainResult struct {
	// Digest is the hex digest identifying the message.
	Digest string `json:"digest,omitempty"`
	// Prev is the class the message was trained as before, "" if none.
	Prev string `json:"prev,omitempty"`
	// Changed is false when training changed nothing: the message was
	// already trained as that class, or never trained when forgetting it.
	Changed bool `json:"changed"`
	// Error says why this message could not be trained (it is not a
	// message at all); the other messages of the batch are trained.
	Error string `json:"error,omitempty"`
}

// ReportResponse answers a report: it is queued.
type ReportResponse struct {
	// ID names the report in the daemon's queue and log.
	ID string `json:"id"`
}

func (ReportResponse) status() int { return http.StatusAccepted }

// TrainResponse answers a TrainRequest, one result per item, in order.
type TrainResponse struct {
	Results []TrainResult `json:"results"`
}

// Stats describes the store.
type Stats struct {
	// Dir is the store's directory, so that a client can tell whether a
	// store it was given is the daemon's.
	Dir string `json:"dir,omitempty"`
	// Classes are the classes the daemon's filter is configured with:
	// those it trains and scores.
	Classes []string `json:"classes"`
	// Users lists every model, the global one ("") included.
	Users []UserStats `json:"users"`
	// LSMBytes and LogBytes are the store's size on disk.
	LSMBytes int64 `json:"lsm_bytes"`
	LogBytes int64 `json:"vlog_bytes"`
	// PendingReports counts the reports queued and not yet applied.
	PendingReports int `json:"pending_reports"`
	// Classified sums up the mail the milter classified since the
	// daemon started; nil when nothing told the server.
	Classified *Classified `json:"classified,omitempty"`
}

// Classified sums up classified mail by its probabilities, which needs no
// label: with calibrated probabilities, ExpectedFalsePositives over
// ExpectedHam is the false positive rate to expect at the configured
// decision.
type Classified struct {
	// Messages counts the messages classified.
	Messages uint64 `json:"messages"`
	// ExpectedHam is the sum of their probabilities of ham: how many of
	// them the filter itself reckons were ham.
	ExpectedHam float64 `json:"expected_ham"`
	// ExpectedFalsePositives is the same sum over the messages decided
	// spam: how many of those it reckons were ham after all.
	ExpectedFalsePositives float64 `json:"expected_false_positives"`
}

// FPRate returns the expected false positive rate, 0 before any ham is
// expected.
func (c Classified) FPRate() float64 {
	if c.ExpectedHam <= 0 {
		return 0
	}
	return c.ExpectedFalsePositives / c.ExpectedHam
}

// UserStats describes one user's model.
type UserStats struct {
	User       string            `json:"user"`
	Messages   map[string]uint64 `json:"messages"`
	Tokens     map[string]uint64 `json:"tokens"`
	Vocabulary uint64            `json:"vocabulary"`
	// Unread says why the milter never classifies mail with this model
	// under the daemon's naming rule ([milter] users); "" when it may.
	Unread string `json:"unread,omitempty"`
	// LastTrained is the last day a message was trained (YYYY-MM-DD),
	// "" for a model never trained.
	LastTrained string `json:"last_trained,omitempty"`
	// Bytes is the room the model takes in the store, when asked for
	// (GET /v1/stats?sizes=1) and the store can tell (store.Sizer).
	Bytes int64 `json:"bytes,omitempty"`
}

// LastTrained formats a model's last day trained, "" for none.
func LastTrained(d store.Day) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// errorBody is the JSON body of an error answer.
type errorBody struct {
	Error string `json:"error"`
}
