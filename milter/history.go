package milter

import (
	"time"

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
		Verdict:    d.verdict,
		Reason:     d.result.Reason,
		Action:     d.outcome.Action.String(),
		Reply:      d.outcome.Reply(),
		Learned:    d.learned,
		Size:       m.size,
		ElapsedMS:  float64(elapsed) / float64(time.Millisecond),
	}
	if d.verdict == "error" {
		e.Reason = d.outcome.Reason
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
	if d.result.Verdict != Skipped && d.verdict != "error" {
		e.Probability, e.Score, e.Required = d.result.Probability, d.result.Score, d.result.Required
		e.Digest = d.result.Signature
		raw = *m.buf
		if len(d.toward) > 0 {
			e.Toward = make(map[string][]history.Feature, len(d.toward))
			for c, cs := range d.toward {
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
