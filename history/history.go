// Package history keeps the daemon's recent verdicts: a bounded ring of
// the last N messages the milter answered, each with its envelope, its
// verdict and the features that weighed most, for the web console, the
// control API's /v1/history and `spamtrain history`.
//
// The ring holds at most Options.Size entries; adding one past that drops
// the oldest. Beside an entry it may hold the message as the milter
// classified it, so that the console can explain it again against the
// model as it is now and learn it as spam or ham; those bytes are bounded
// in all by Options.MaxMessageBytes, the oldest messages let go first
// (their entries stay). Adding is O(1) under one short lock, so that
// recording costs the milter nothing it would notice.
//
// The entries, not the messages, can be saved to a file and loaded again
// (Save, Load), so that the history outlives a restart: the file is
// written whole to a temporary name, synced and renamed over the old one,
// and read back with every line bounded and every bad line skipped.
//
// The ring also remembers when each model was last trained (Trained),
// which the store does not record.
package history

import (
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"
	"unicode/utf8"
)

// Bounds of what one entry records, so that an entry, and the file, stay
// small whatever a message carries.
const (
	// MaxRecipients is how many recipients an entry lists; the rest are
	// counted in MoreRecipients.
	MaxRecipients = 50
	// maxText bounds each text field of an entry (sender, recipient,
	// subject, message ID, names of features), in bytes.
	maxText = 320
	// maxFeatures bounds the features listed toward each class.
	maxFeatures = 50
	// maxTrained bounds the models whose last training is remembered,
	// maxUser the length of their names (store.MaxUserLen).
	maxTrained = 1 << 16
	maxUser    = 128
)

// Digest is a message's digest, written as hex.
type Digest [32]byte

// MarshalText writes the digest as hex.
func (d Digest) MarshalText() ([]byte, error) { return []byte(hex.EncodeToString(d[:])), nil }

// UnmarshalText reads a digest written by MarshalText.
func (d *Digest) UnmarshalText(b []byte) error {
	if len(b) != 64 {
		return fmt.Errorf("digest %q: want 64 hex digits", b)
	}
	_, err := hex.Decode(d[:], b)
	return err
}

// String returns the digest as hex.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// IsZero reports whether the digest is unset.
func (d Digest) IsZero() bool { return d == Digest{} }

// Feature is one feature's share of a verdict.
type Feature struct {
	// Name names the feature: a token such as "subject:free", or a
	// continuous feature of the message.
	Name string `json:"name"`
	// Value is the feature's count in the message, or its value for a
	// continuous feature.
	Value float64 `json:"value"`
	// Weight is the feature's share of the spam log-odds toward its class.
	Weight float64 `json:"weight"`
}

// Entry is one message the milter answered.
type Entry struct {
	// ID numbers the entries in the order they were added, from 1.
	ID uint64 `json:"id"`
	// Time is when the milter answered.
	Time time.Time `json:"time"`
	// QueueID is the MTA's queue ID, MessageID the Message-ID field.
	QueueID   string `json:"queue_id,omitempty"`
	MessageID string `json:"message_id,omitempty"`
	// Client is the SMTP client's address.
	Client string `json:"client,omitempty"`
	// Sender is the envelope sender, "" for the null sender.
	Sender string `json:"sender"`
	// Recipients lists the envelope recipients, at most MaxRecipients;
	// MoreRecipients counts those left out.
	Recipients     []string `json:"recipients"`
	MoreRecipients int      `json:"more_recipients,omitempty"`
	// Users[i] names the user of Recipients[i] by the site's naming
	// rule, "" for none: the mail is theirs. Nil when no recipient has a
	// user (under the rule "global").
	Users []string `json:"users,omitempty"`
	// Models lists the models that classified the message, "" for the
	// global one; Model is the one whose verdict stood, the least spammy.
	Models []string `json:"models,omitempty"`
	Model  string   `json:"model"`
	// Subject is the Subject field as it came, without decoding.
	Subject string `json:"subject,omitempty"`
	// Verdict is ham, unsure or spam (the filter's labels), skipped, or
	// error.
	Verdict string `json:"verdict"`
	// Reason says why a message was skipped or failed.
	Reason string `json:"reason,omitempty"`
	// Probability, Score and Required are the spam probability, the spam
	// log-odds and the score from which a message is spam; only for a
	// classified message.
	Probability float64 `json:"probability"`
	Score       float64 `json:"score"`
	Required    float64 `json:"required"`
	// Action is what the milter did: accept, quarantine, reject or
	// tempfail; Reply is the SMTP reply of a rejection.
	Action string `json:"action"`
	Reply  string `json:"reply,omitempty"`
	// Learned is the class the message was autolearned as, "" if none.
	Learned string `json:"learned,omitempty"`
	// Size is the message's size in bytes; ElapsedMS the time from its
	// end to the answer, in milliseconds.
	Size      int64   `json:"size"`
	ElapsedMS float64 `json:"elapsed_ms"`
	// Digest identifies the message as it was classified.
	Digest Digest `json:"digest"`
	// Toward lists, by class, the features that pushed hardest toward it.
	Toward map[string][]Feature `json:"toward,omitempty"`
	// Held says whether the ring still holds the message itself.
	Held bool `json:"held"`
}

// Classified reports whether the filter judged the message: only then
// do Probability, Score, Required and Toward mean anything.
func (e *Entry) Classified() bool {
	return e.Verdict != "skipped" && e.Verdict != "error"
}

// Belongs reports whether the mail of the entry is user's: user is one
// of its recipients' users, or a model that classified it.
func (e *Entry) Belongs(user string) bool {
	return user != "" && (slices.Contains(e.Users, user) || slices.Contains(e.Models, user))
}

// Withheld stands, in a redacted entry, for the name of another user's
// model whose verdict stood; no model is named so.
const Withheld = "(withheld)"

// Redacted returns the entry as user may see it, whose mail it is: the
// other recipients and the models of other users left out, and the name
// of the model whose verdict stood Withheld if it is another user's. The
// verdict itself stays: user's copy of the message carries it.
func (e Entry) Redacted(user string) Entry {
	out := e
	out.Recipients, out.Users, out.MoreRecipients = nil, nil, 0
	for i, u := range e.Users {
		if u == user {
			out.Recipients = append(out.Recipients, e.Recipients[i])
			out.Users = append(out.Users, u)
		}
	}
	if out.Recipients == nil {
		out.Recipients = []string{}
	}
	out.Models = nil
	for _, m := range e.Models {
		if m == "" || m == user {
			out.Models = append(out.Models, m)
		}
	}
	if e.Model != "" && e.Model != user {
		out.Model = Withheld
	}
	return out
}

// trim bounds the entry's fields.
func (e *Entry) trim() {
	e.QueueID = clip(e.QueueID)
	e.MessageID = clip(e.MessageID)
	e.Sender = clip(e.Sender)
	e.Subject = clip(e.Subject)
	if len(e.Recipients) > MaxRecipients {
		e.MoreRecipients += len(e.Recipients) - MaxRecipients
		e.Recipients = e.Recipients[:MaxRecipients:MaxRecipients]
	}
	if len(e.Users) > len(e.Recipients) {
		e.Users = e.Users[:len(e.Recipients):len(e.Recipients)]
	}
	for i, u := range e.Users {
		e.Users[i] = clip(u)
	}
	for i, r := range e.Recipients {
		e.Recipients[i] = clip(r)
	}
	for c, fs := range e.Toward {
		if len(fs) > maxFeatures {
			fs = fs[:maxFeatures:maxFeatures]
			e.Toward[c] = fs
		}
		for i := range fs {
			fs[i].Name = clip(fs[i].Name)
		}
	}
}

// clip cuts s to maxText bytes, at a rune boundary.
func clip(s string) string {
	if len(s) <= maxText {
		return s
	}
	n := maxText
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Options configure a Ring.
type Options struct {
	// Size is the most entries the ring holds; at least 1.
	Size int
	// MaxMessageBytes bounds the bytes of the messages held beside the
	// entries; 0 holds none.
	MaxMessageBytes int64
}

// slot is one entry of the ring and the message it holds, if any.
type slot struct {
	e   Entry
	msg []byte
}

// Ring is the bounded history. Its methods are safe for concurrent use.
type Ring struct {
	opts Options

	mu    sync.Mutex
	slots []slot // circular: head is the oldest, count are in use
	head  int
	count int
	next  uint64 // the ID of the next entry
	// held is the bytes of the messages held; heldFrom is the ID from
	// which messages may still be held (every older one is let go).
	held     int64
	heldFrom uint64
	// changes counts the changes made, saved those the file has, for
	// Save to tell whether there is anything new; saveMu makes one Save
	// at a time.
	changes, saved uint64
	saveMu         sync.Mutex
	trained        map[string]time.Time
}

// New returns an empty ring.
func New(o Options) (*Ring, error) {
	if o.Size < 1 {
		return nil, fmt.Errorf("history: size %d: want at least 1", o.Size)
	}
	if o.MaxMessageBytes < 0 {
		return nil, fmt.Errorf("history: message bytes %d: must not be negative", o.MaxMessageBytes)
	}
	return &Ring{opts: o, slots: make([]slot, o.Size), next: 1, heldFrom: 1, trained: map[string]time.Time{}}, nil
}

// Size returns the most entries the ring holds.
func (r *Ring) Size() int { return r.opts.Size }

// Add adds e, with the message raw as it was classified (nil for none),
// and returns its ID. The ring keeps e's slices: the caller must not
// change them afterwards. raw is copied.
func (r *Ring) Add(e Entry, raw []byte) uint64 {
	e.trim()
	var msg []byte
	if raw != nil && int64(len(raw)) <= r.opts.MaxMessageBytes {
		msg = slices.Clone(raw)
	}
	e.Held = msg != nil
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.add(e, msg)
}

// add adds e and msg; r.mu is held.
func (r *Ring) add(e Entry, msg []byte) uint64 {
	if e.ID == 0 || e.ID < r.next {
		e.ID = r.next
	}
	r.next = e.ID + 1
	i := (r.head + r.count) % len(r.slots)
	if r.count == len(r.slots) {
		r.held -= int64(len(r.slots[i].msg))
		r.head = (r.head + 1) % len(r.slots)
	} else {
		r.count++
	}
	r.slots[i] = slot{e: e, msg: msg}
	r.held += int64(len(msg))
	r.letGo()
	r.changes++
	return e.ID
}

// letGo drops the oldest messages held until they fit in
// MaxMessageBytes; r.mu is held.
func (r *Ring) letGo() {
	if r.held <= r.opts.MaxMessageBytes {
		return
	}
	for k := r.index(r.heldFrom); k < r.count && r.held > r.opts.MaxMessageBytes; k++ {
		s := r.at(k)
		r.held -= int64(len(s.msg))
		s.msg, s.e.Held = nil, false
		r.heldFrom = s.e.ID + 1
	}
}

// at returns the k-th oldest slot; r.mu is held.
func (r *Ring) at(k int) *slot { return &r.slots[(r.head+k)%len(r.slots)] }

// index returns the position, oldest first, of the first entry whose ID
// is at least id; r.mu is held.
func (r *Ring) index(id uint64) int {
	return sort.Search(r.count, func(k int) bool { return r.at(k).e.ID >= id })
}

// Query selects entries.
type Query struct {
	// Before and After, when not 0, keep the entries with an ID below
	// Before and above After.
	Before, After uint64
	// Limit is the most entries returned; 0 means all.
	Limit int
	// Match, if not nil, keeps the entries it returns true for.
	Match func(*Entry) bool
}

// List returns the entries q selects, newest first. Entries share their
// slices with the ring, which never changes them.
func (r *Ring) List(q Query) []Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	end := r.count
	if q.Before != 0 {
		end = r.index(q.Before)
	}
	var out []Entry
	for k := end - 1; k >= 0; k-- {
		e := &r.at(k).e
		if q.After != 0 && e.ID <= q.After {
			break
		}
		if q.Match != nil && !q.Match(e) {
			continue
		}
		out = append(out, *e)
		if q.Limit > 0 && len(out) == q.Limit {
			break
		}
	}
	return out
}

// Get returns the entry id and the message it holds, nil if none; ok is
// false when the ring no longer has the entry.
func (r *Ring) Get(id uint64) (e Entry, msg []byte, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := r.index(id)
	if k == r.count || r.at(k).e.ID != id {
		return Entry{}, nil, false
	}
	s := r.at(k)
	return s.e, s.msg, true
}

// Stats describes the ring.
type Stats struct {
	// Entries is the number of entries held, Size the most it holds.
	Entries int `json:"entries"`
	Size    int `json:"size"`
	// Messages and MessageBytes count the messages held and their bytes;
	// MaxMessageBytes bounds those.
	Messages        int   `json:"messages"`
	MessageBytes    int64 `json:"message_bytes"`
	MaxMessageBytes int64 `json:"max_message_bytes"`
}

// Stats returns the ring's size and content.
func (r *Ring) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Stats{Entries: r.count, Size: len(r.slots), MessageBytes: r.held, MaxMessageBytes: r.opts.MaxMessageBytes}
	for k := r.index(r.heldFrom); k < r.count; k++ {
		if r.at(k).msg != nil {
			s.Messages++
		}
	}
	return s
}

// Trained notes that user's model was trained at t. A name longer than
// any model's is ignored.
func (r *Ring) Trained(user string, t time.Time) {
	if len(user) > maxUser {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.trained[user]; !ok && len(r.trained) >= maxTrained {
		// The model trained longest ago is forgotten.
		oldest, first := "", true
		for u, at := range r.trained {
			if first || at.Before(r.trained[oldest]) {
				oldest, first = u, false
			}
		}
		delete(r.trained, oldest)
	}
	if t.After(r.trained[user]) {
		r.trained[user] = t
		r.changes++
	}
}

// LastTrained returns when user's model was last trained, as far as the
// ring was told; ok is false if it was not.
func (r *Ring) LastTrained(user string) (t time.Time, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok = r.trained[user]
	return t, ok
}

// ErrFormat is wrapped by the error of a history file that is not one.
var ErrFormat = errors.New("not a spamd history file")
