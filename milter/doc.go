// Package milter is spamd's mail filter for Postfix and Sendmail: a
// github.com/emersion/go-milter server that collects each message, asks
// the filter for a verdict and turns it into headers and an SMTP answer.
//
// # Per message
//
// The milter asks the MTA for the connection (the client address), the
// envelope, the header and the body, and buffers the header and body up to
// Milter.ClassifyBytes; the rest is counted, never stored. At the end of
// the message it
//
//   - skips classification, tagging the message "X-Spamd-Result: skipped;
//     reason=…", for SMTP-authenticated senders ({auth_authen}), clients
//     in a trusted network, messages over Milter.MaxSize, and input that
//     is not a message at all;
//   - otherwise classifies the buffered prefix with the model of each
//     recipient that has one (user names per Milter.Users), the global
//     model for the others, once per distinct model, and applies the
//     verdict with the lowest spam score: no recipient loses mail its own
//     model would have let through;
//   - removes every incoming X-Spam-* and X-Spamd-* field (ChangeHeader
//     with an empty value, for each occurrence), so that a sender cannot
//     forge a verdict;
//   - adds X-Spam-Flag, X-Spam-Status, X-Spam-Score and X-Spam-Level as
//     SpamAssassin does, with the spam log-odds as the score, so that
//     existing Sieve and procmail rules keep working, and X-Spamd-Result
//     (see decide.Result) with the probability, the verdict, the weightiest
//     tokens and the message's signature;
//   - tags the Subject, quarantines, or rejects, as Actions say.
//
// Each recipient's decision (the label under their preferences and
// sender lists, the action, the Subject tag and the headers) is made by
// package decide, which spamtrain filter and the control API use too, so
// that mail filtered outside the MTA gets the same. What the MTA is told
// is a decide.Outcome: an action, an SMTP code, an enhanced code, a
// public text and a private reason.
//
// # Failures
//
// A classification error or a panic in a callback becomes the failure
// action (Actions.OnError: accept or tempfail), always logged and
// reported to the Observer. Every read and write on a connection has a
// deadline, so a stalled MTA connection is closed without holding others
// up. Shutdown stops accepting, closes idle connections (after a short
// grace, since an MTA sends a message's start without waiting for
// replies), and lets messages in flight finish before closing theirs.
//
// # Limits
//
// The milter trains only when Autolearn is enabled: then each
// recipient's model learns a message every judging model was very sure
// of, through the filter like any other training, so that the
// recipient's report can reverse it; X-Spamd-Result then says
// "learned=CLASS". Header changes use the MTA's header indexes,
// which count fields case-insensitively per name. The signature is the
// digest of what was buffered, so for a message longer than
// ClassifyBytes it is the digest of that prefix. go-milter speaks milter
// protocol version 2, which Postfix and Sendmail accept.
package milter
