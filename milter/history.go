package milter

import (
	"time"

	"github.com/spamd/spamd/decide"
	"github.com/spamd/spamd/history"
	"github.com/spamd/spamd/nb"
)

// record adds the message and decision d to the history: the envelope,
// the verdict, the features that weighed most and, for a classified
// message, the bytes that were classified, for the console to explain
// again and to learn from.
func (m *message) record(h *history.Ring, d decision, elapsed time.Duration) {
	e := history.Entry{
		Time:      time.Now(),
		QueueID:   m.queueID,
		MessageID: m.messageID,
		Sender:    m.from,
		// The message's own slice: finish lets go of it.
		Recipients: m.rcpts,
		Models:     d.models,
		Model:      d.model,
		Verdict:    d.Verdict,
		Reason:     d.Result.Reason,
		Action:     d.Outcome.Action.String(),
		Reply:      d.Outcome.Reply(),
		Learned:    d.learned,
		Size:       m.size,
		ElapsedMS:  float64(elapsed) / float64(time.Millisecond),
	}
	if d.Verdict == "error" {
		e.Reason = d.Outcome.Reason
	}
	if m.c.client.IsValid() {
		e.Client = m.c.client.String()
	}
	if m.subject != nil {
		e.Subject = *m.subject
	}
	if mode := m.set.Milter.Users; mode != "global" {
		e.Users = make([]string, len(m.rcpts))
		for i, r := range m.rcpts {
			e.Users[i] = userOf(r, mode)
		}
	}
	var raw []byte
	if d.Result.Verdict != decide.Skipped && d.Verdict != "error" {
		e.Probability, e.Score, e.Required = d.Result.Probability, d.Result.Score, d.Result.Required
		e.Digest = d.Result.Signature
		raw = *m.buf
		if len(d.Toward) > 0 {
			e.Toward = make(map[string][]history.Feature, len(d.Toward))
			for c, cs := range d.Toward {
				e.Toward[c] = features(cs)
			}
		}
	}
	h.Add(e, raw)
}

// features turns a verdict's explanation into the history's form. Every
// feature the explanation lists is kept, whatever its kind: a token's
// value is its count in the message.
func features(cs []nb.Contribution) []history.Feature {
	out := make([]history.Feature, len(cs))
	for i, c := range cs {
		out[i] = history.Feature{Name: c.Name, Value: c.Count, Weight: c.Weight}
	}
	return out
}
