// Package config is spamd's configuration: one TOML document, by default
// /etc/spamd/config.toml, decoded into Config.
//
// Every key has a default (Default), so an empty document, or none at all,
// is a working configuration. Decode starts from the defaults and
// overwrites what the document sets; a key the document sets that Config
// does not know is an error naming the key, as is a value out of range
// (Validate). The [filter] table is passed through as text, key by key,
// for the filter's own settings to interpret (see Config.Filter); its keys
// are checked by whoever applies them.
//
// The package knows nothing of the milter, the store or the filter: it
// only reads, defaults and checks values.
package config

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/spamd/spamd/identity"
	"github.com/spamd/spamd/store"
)

// DefaultPath is where spamd and spamtrain look for the configuration
// when none is named.
const DefaultPath = "/etc/spamd/config.toml"

// MaxMessageBytes is the most api.max_message_bytes may be: the largest
// message a report can carry (reportq.MaxMessage).
const MaxMessageBytes = 64 << 20

// MaxHistory is the most verdicts history.size may keep.
const MaxHistory = 1000000

// ErrInvalid is wrapped by every error about the content of a document.
var ErrInvalid = errors.New("invalid configuration")

// Config is the whole configuration of spamd.
type Config struct {
	// Store is the model store.
	Store Store `toml:"store"`
	// Milter is the mail filter the MTA talks to.
	Milter Milter `toml:"milter"`
	// Actions says what the milter does with each verdict.
	Actions Actions `toml:"actions"`
	// API is the HTTP control API spamtrain and scripts use.
	API API `toml:"api"`
	// Autolearn says which messages the milter trains on by itself.
	Autolearn Autolearn `toml:"autolearn"`
	// Reports configures the queue of misclassification reports.
	Reports Reports `toml:"reports"`
	// Watch configures the maildir watcher, which reports the messages
	// users move into and out of their Junk folders.
	Watch Watch `toml:"watch"`
	// Metrics is the Prometheus endpoint.
	Metrics Metrics `toml:"metrics"`
	// History is the record of the milter's latest verdicts.
	History History `toml:"history"`
	// Console is the web console.
	Console Console `toml:"console"`
	// Prune is the daemon's pruning of every model on a schedule.
	Prune Prune `toml:"prune"`
	// Log is the daemon's log.
	Log Log `toml:"log"`
	// Prefs holds the preferences that differ by recipient: per user,
	// per domain, and the sender lists.
	Prefs Prefs `toml:"prefs"`
	// Filter holds the [filter] table: filter settings by the names
	// `spamtrain settings` lists, each value as text (numbers formatted
	// as Go does, booleans as true/false). Unset keys keep the filter's
	// defaults.
	Filter map[string]string `toml:"-"`
}

// Store configures the model store.
type Store struct {
	// Backend is where the models are kept: "badger", an embedded store
	// in Dir that one process owns (the default), or "redis", a Redis or
	// Valkey server, Sentinel set or Cluster ([store.redis]) that any
	// number of spamd nodes share.
	Backend string `toml:"backend"`
	// Dir is the directory of the Badger store, and with either backend
	// the default parent of the report queue. Default: the first
	// directory of $STATE_DIRECTORY (set by systemd's StateDirectory=),
	// else /var/lib/spamd.
	Dir string `toml:"dir"`
	// CacheMB bounds the in-memory cache of token counts, in MiB; 0 turns
	// it off (and with Redis, classifying while Redis is down). Default
	// 64, enough for a global model of several thousand messages.
	CacheMB int `toml:"cache_mb"`
	// ReserveMB is the free space, in MiB, a Badger store leaves on its
	// filesystem: below it the store turns read-only (it classifies, and
	// refuses training, which waits in the report queue) rather than
	// risk a crash on a full disk. 0 means the store's default (256 MiB
	// or more); -1 turns the check off.
	ReserveMB int `toml:"reserve_mb"`
	// SyncWrites fsyncs every training commit of the Badger store, so
	// that it survives a power loss, at a large cost in training
	// throughput.
	SyncWrites bool `toml:"sync_writes"`
	// Redis is the server of the Redis backend.
	Redis Redis `toml:"redis"`
}

// Redis configures the Redis (or Valkey) server of the "redis" backend.
type Redis struct {
	// Address lists the server: one address ("unix:/PATH",
	// "tcp://HOST:PORT" or "HOST:PORT"), the seed nodes of a Cluster, or,
	// with SentinelMaster, the Sentinels.
	Address []string `toml:"address"`
	// SentinelMaster names the master set the Sentinels of Address
	// watch; "" when Address is a server or a Cluster.
	SentinelMaster string `toml:"sentinel_master"`
	// Username is the ACL user; "" is the default user.
	Username string `toml:"username"`
	// Password is the user's password. Prefer PasswordFile, which keeps
	// it out of this file.
	Password string `toml:"password"`
	// PasswordFile holds the password, on its first line.
	PasswordFile string `toml:"password_file"`
	// TLS encrypts the connections (not to a unix socket).
	TLS bool `toml:"tls"`
	// TLSCAFile holds the certificates that sign the server's; "" means
	// the system's.
	TLSCAFile string `toml:"tls_ca_file"`
	// TLSCertFile and TLSKeyFile are this client's certificate and key,
	// for a server that asks for one (tls-auth-clients).
	TLSCertFile string `toml:"tls_cert_file"`
	TLSKeyFile  string `toml:"tls_key_file"`
	// TLSServerName is the name the server's certificate must carry; ""
	// means the host of the address.
	TLSServerName string `toml:"tls_server_name"`
	// DB is the database number on a single server or Sentinel set; a
	// Cluster has only 0.
	DB int `toml:"db"`
	// Prefix starts every key of the store, so that several stores can
	// share a server.
	Prefix string `toml:"prefix"`
	// Timeout bounds each read: a node whose Redis does not answer in
	// time classifies from its cache.
	Timeout Duration `toml:"timeout"`
}

// LoadPassword returns the password: Password, or the first line of
// PasswordFile.
func (r Redis) LoadPassword() (string, error) {
	if r.PasswordFile == "" {
		return r.Password, nil
	}
	b, err := os.ReadFile(r.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("store.redis.password_file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimRight(line, "\r"), nil
}

// LoadTLS returns the TLS configuration of the connections, nil without
// TLS, reading the files it names.
func (r Redis) LoadTLS() (*tls.Config, error) {
	if !r.TLS {
		return nil, nil
	}
	c := &tls.Config{ServerName: r.TLSServerName, MinVersion: tls.VersionTLS12}
	if r.TLSCAFile != "" {
		pem, err := os.ReadFile(r.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("store.redis.tls_ca_file: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("store.redis.tls_ca_file: %s holds no PEM certificate", r.TLSCAFile)
		}
	}
	if r.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(r.TLSCertFile, r.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("store.redis.tls_cert_file: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// Milter configures the milter.
type Milter struct {
	// Listen is where the milter listens: "tcp://HOST:PORT" or
	// "unix:/PATH".
	Listen string `toml:"listen"`
	// ReadTimeout is the longest the milter waits for the MTA's next
	// command before closing the connection.
	ReadTimeout Duration `toml:"read_timeout"`
	// WriteTimeout is the longest one reply to the MTA may take, and the
	// longest classifying one message may take.
	WriteTimeout Duration `toml:"write_timeout"`
	// ShutdownTimeout is how long a stopping daemon lets messages in
	// flight finish before it closes their connections.
	ShutdownTimeout Duration `toml:"shutdown_timeout"`
	// ClassifyBytes is how much of a message, headers included, is
	// classified; the milter never buffers more.
	ClassifyBytes int `toml:"classify_bytes"`
	// MaxSize: a message larger than this many bytes is not classified,
	// only tagged as skipped. 0 means no limit.
	MaxSize int64 `toml:"max_size"`
	// Users says whose model classifies a message: "address" (the
	// recipient address, lower-cased, as the user name), "localpart" (the
	// part before '@'), or "global" (always the global model). A
	// recipient without a trained model of its own gets the global model.
	Users string `toml:"users"`
	// SkipAuthenticated leaves mail from SMTP-authenticated senders (the
	// {auth_authen} macro) unclassified.
	SkipAuthenticated bool `toml:"skip_authenticated"`
	// TrustedNetworks lists client networks, in CIDR form, whose mail is
	// not classified.
	TrustedNetworks []netip.Prefix `toml:"trusted_networks"`
	// Explain is how many tokens toward each side X-Spamd-Result lists; 0
	// lists none.
	Explain int `toml:"explain"`
	// MessageTimeout is the longest one message may take, from its first
	// command (MAIL) to its end; past it the connection is closed, logged,
	// and the MTA applies its own failure action (Postfix's
	// milter_default_action).
	MessageTimeout Duration `toml:"message_timeout"`
	// MaxConnections bounds the MTA connections open at once; one more is
	// closed at once, logged.
	MaxConnections int `toml:"max_connections"`
	// MaxHeaderBytes bounds the header of one message, in bytes (each
	// field's name and value plus 4). Past it the rest of the header is
	// only counted and the message is rejected at its end (552 5.6.0).
	MaxHeaderBytes int64 `toml:"max_header_bytes"`
	// MaxConnectionHeaderBytes bounds the header bytes of all the messages
	// of one connection; past it the connection is closed, logged.
	MaxConnectionHeaderBytes int64 `toml:"max_connection_header_bytes"`
	// MaxSpoofedHeaders bounds the incoming X-Spam-* and X-Spamd-* fields
	// of one message, which the milter removes one by one; a message with
	// more is rejected at its end (552 5.6.0), since they could not all be
	// removed.
	MaxSpoofedHeaders int `toml:"max_spoofed_headers"`
}

// Actions says what the milter does with a verdict. Headers are added to
// every message that is classified and not rejected.
type Actions struct {
	// SubjectTag, when not empty, is put before the Subject of spam.
	SubjectTag string `toml:"subject_tag"`
	// QuarantineSpam puts spam on hold (the milter quarantine action;
	// Postfix's hold queue).
	QuarantineSpam bool `toml:"quarantine_spam"`
	// QuarantineUnsure puts unsure messages on hold.
	QuarantineUnsure bool `toml:"quarantine_unsure"`
	// Reject rejects spam scoring at least RejectScore.
	Reject bool `toml:"reject"`
	// RejectScore is the score (spam log-odds, as in X-Spam-Score) from
	// which spam is rejected when Reject is set.
	RejectScore float64 `toml:"reject_score"`
	// RejectCode is the SMTP reply code of a rejection, 5xx.
	RejectCode int `toml:"reject_code"`
	// RejectStatus is the enhanced status code of a rejection, 5.x.x.
	RejectStatus string `toml:"reject_status"`
	// RejectText is the text of a rejection, seen by the sender.
	RejectText string `toml:"reject_text"`
	// OnError is what happens to a message the milter fails on (an
	// internal error or a panic): "accept" it unclassified, or "tempfail"
	// it so the sender retries. Either way it is logged and counted.
	OnError string `toml:"on_error"`
	// Classes maps a class of the filter to what the milter does with a
	// message decided as it (and not unsure): "accept" it, "tag" its
	// Subject with SubjectTag, "quarantine" it, or "reject" it with
	// RejectCode, RejectStatus and RejectText whatever its score. A
	// spam class without an entry is handled as spam (SubjectTag,
	// QuarantineSpam, Reject from RejectScore), any other accepted.
	Classes map[string]string `toml:"classes"`
}

// ClassActions are the actions Actions.Classes may name.
var ClassActions = []string{"accept", "tag", "quarantine", "reject"}

// API configures the control API.
type API struct {
	// Socket is the path of the API's unix socket, created with mode
	// 0660. Default: $RUNTIME_DIRECTORY/api.sock (systemd's
	// RuntimeDirectory=), else /run/spamd/api.sock.
	Socket string `toml:"socket"`
	// TCP, when set, also serves the API on this loopback HOST:PORT, to
	// clients presenting the bearer token of TokenFile.
	TCP string `toml:"tcp"`
	// TokenFile holds the bearer token for TCP clients (one line, at
	// least 16 bytes).
	TokenFile string `toml:"token_file"`
	// Admins lists unix accounts that may train and read any user's model
	// over the socket, and maintain the store (/v1/admin/*), besides root
	// and the daemon's own account. Any
	// other account reads (classifies with, and sees the statistics of)
	// the global model and the model named like itself only.
	Admins []string `toml:"admins"`
	// Reporters lists unix accounts that may report messages (POST
	// /v1/report) for any user but the global model, and do nothing else
	// another account could not: the account a Dovecot IMAPSieve script
	// runs as, shared by every virtual user.
	Reporters []string `toml:"reporters"`
	// ReadTimeout is the longest reading one request may take, header and
	// body; /v1/train gets it again for each message of its batch.
	ReadTimeout Duration `toml:"read_timeout"`
	// WriteTimeout is the longest one request may take from its header to
	// the end of the answer; /v1/train gets it again for each message.
	WriteTimeout Duration `toml:"write_timeout"`
	// IdleTimeout is how long a kept-alive connection may wait for its
	// next request.
	IdleTimeout Duration `toml:"idle_timeout"`
	// MaxConnections bounds the connections served at once on each
	// listener; more wait to be accepted.
	MaxConnections int `toml:"max_connections"`
	// MaxRequests bounds the requests with a message body (classify,
	// learn, forget, train, report) served at once; more wait, and after
	// 10 s get 503 with Retry-After.
	MaxRequests int `toml:"max_requests"`
	// MaxTraining bounds, among those, the training requests (learn,
	// forget, train) served at once.
	MaxTraining int `toml:"max_training"`
	// MaxMessageBytes bounds one message: the body of classify, learn,
	// forget and report, and each message of a /v1/train batch.
	MaxMessageBytes int64 `toml:"max_message_bytes"`
	// MaxBatchBytes bounds a /v1/train request, which is read and
	// trained as it streams in.
	MaxBatchBytes int64 `toml:"max_batch_bytes"`
}

// Autolearn configures training on messages the filter is very sure of.
// Each recipient's model learns the message (the global model when
// milter.users is "global"), with a seen record like any other training,
// so that the user's report can reverse it.
type Autolearn struct {
	// Enabled turns autolearn on.
	Enabled bool `toml:"enabled"`
	// SpamScore: a message every model scored at or above this spam
	// log-odds is learned as spam.
	SpamScore float64 `toml:"spam_score"`
	// HamScore: a message every model scored at or below this spam
	// log-odds is learned as ham.
	HamScore float64 `toml:"ham_score"`
	// MaxRatio keeps a model balanced: a class is not learned while the
	// model holds more than MaxRatio times as many messages of it as of
	// the other class (counting one more of each). 0 means no limit.
	MaxRatio float64 `toml:"max_ratio"`
}

// Reports configures the queue every report channel (the API, spamtrain
// report, the maildir watcher) feeds.
type Reports struct {
	// Spool is the directory of the durable report queue. Default: the
	// directory "reports" inside store.dir.
	Spool string `toml:"spool"`
	// MaxPending bounds the reports waiting to be applied; past it a
	// report is refused.
	MaxPending int `toml:"max_pending"`
}

// Watch configures the maildir watcher.
type Watch struct {
	// Junk is the pattern of the users' Junk folders, with Dovecot's %u
	// (the user name), %n (its user part) and %d (its domain) each
	// standing for one whole path element, for example
	// "/var/mail/%u/Maildir/.Junk" or "/var/vmail/%d/%n/Maildir/.Junk"; a
	// folder's user is %u, or n@d, or n alone. Its parent is the user's
	// maildir, whose other folders are watched too. "" turns the watcher
	// off.
	Junk string `toml:"junk"`
	// Trash names the folders, beside Junk, into which a message moved
	// out of Junk is not reported as ham.
	Trash []string `toml:"trash"`
	// Rescan is how often every watched folder is listed again, for what
	// events missed: an overflowing event queue, or a file system that
	// sends none (NFS).
	Rescan Duration `toml:"rescan"`
	// Domain is the mail domain of folders named by a bare account
	// (%u or %n alone = "alice", system users), so that under [milter] users =
	// "address" a folder's moves train alice@Domain, the model the
	// milter classifies alice's mail with. "" for folders named by
	// address.
	Domain string `toml:"domain"`
}

// Metrics configures the Prometheus endpoint.
type Metrics struct {
	// Listen is the loopback HOST:PORT serving /metrics and /healthz; ""
	// turns it off.
	Listen string `toml:"listen"`
}

// History configures the record of the milter's latest verdicts, which
// the web console, the API's /v1/history and `spamtrain history` show.
type History struct {
	// Size is how many verdicts are kept, the oldest dropped first; 0
	// keeps none.
	Size int `toml:"size"`
	// MessageMB is the memory, in MiB, for the messages themselves,
	// kept beside the latest verdicts so that the console can explain
	// them again and learn them as spam or ham; 0 keeps none.
	MessageMB int `toml:"message_mb"`
	// Persist keeps the verdicts (not the messages) across restarts, in
	// File.
	Persist bool `toml:"persist"`
	// File is where the verdicts are kept across restarts. Default: the
	// file history.jsonl inside store.dir.
	File string `toml:"file"`
}

// Prune configures the pruning of every model that the daemon runs on a
// schedule, as `spamtrain prune` does by hand. Nothing is pruned unless
// Days or SeenDays is set; a budget of tokens per model is the filter's
// model_tokens, kept as training goes.
type Prune struct {
	// Every is how often: the first prune runs this long after start.
	Every Duration `toml:"every"`
	// Days and Count: the tokens seen at most Count times in all that no
	// message trained in the last Days days had are deleted; 0 days keeps
	// them.
	Days  int `toml:"days"`
	Count int `toml:"count"`
	// SeenDays: the seen records of messages trained more than SeenDays
	// days ago are deleted, after which those messages can no longer be
	// relabeled or forgotten; 0 keeps them.
	SeenDays int `toml:"seen_days"`
}

// Console configures the web console.
type Console struct {
	// Enabled serves the console. It needs the API's token
	// (api.token_file), which logging in asks for.
	Enabled bool `toml:"enabled"`
	// Listen is the loopback HOST:PORT of a listener of the console's
	// own; "" serves it at /console/ on the API's TCP listener
	// (api.tcp).
	Listen string `toml:"listen"`
}

// Log configures the daemon's log, written to standard error.
type Log struct {
	// Level is the least severe level logged: debug, info, warn or error.
	Level string `toml:"level"`
	// Format is text (key=value) or json.
	Format string `toml:"format"`
}

// Prefs configures what differs by recipient. Each recipient's setting
// is its user's, else its domain's, else the site's: [actions], the
// filter's required score, and the lists here. Users are named as
// [milter] users names them (the address, under "global" too); a domain
// is the recipient address's, lower-cased.
type Prefs struct {
	// Allow lists senders whose mail is ham for every recipient, unless
	// the recipient's user or domain lists them: an address, a domain
	// (for every address in it), or a glob (*@*.example.org). An entry
	// matches only when the envelope sender and every From: address
	// match it, and, with AuthservID, when the From: domain is
	// authenticated: From: alone is forged at will.
	Allow []string `toml:"allow"`
	// Deny lists senders whose mail is spam for every recipient, unless
	// the recipient's user or domain lists them: it matches the envelope
	// sender or any From: address, since a forged one harms only the
	// forger.
	Deny []string `toml:"deny"`
	// AuthservID is the authserv-id of the Authentication-Results fields
	// this site's own MTA or milters add (OpenDKIM, OpenDMARC). When set,
	// an allow entry matches only mail whose From: domain such a field
	// says passed DMARC, DKIM (header.d the domain or a parent of it) or
	// SPF (smtp.mailfrom in the domain). Fields with this id arriving
	// from outside must be removed before spamd sees them (OpenDKIM's
	// RemoveARAll), or a forger writes the pass.
	AuthservID string `toml:"authserv_id"`
	// File keeps the preferences set through the API (PUT /v1/prefs),
	// which take precedence over this file's for the same user or
	// domain, key by key. Default: prefs.json in store.dir.
	File string `toml:"file"`
	// Domain holds preferences by recipient domain.
	Domain map[string]Pref `toml:"domain"`
	// User holds preferences by user name.
	User map[string]Pref `toml:"user"`
}

// Pref is one user's or one domain's preferences. A key left out is the
// next level's: the domain's for a user, the site's for a domain.
type Pref struct {
	// Required is the score (spam log-odds) from which mail is spam;
	// between the filter's unsure_low and it, mail is unsure.
	Required *float64 `toml:"required" json:"required,omitempty"`
	// SubjectTag is put before the Subject of spam; "" tags nothing.
	SubjectTag *string `toml:"subject_tag" json:"subject_tag,omitempty"`
	// RejectScore is the score from which spam is rejected when the
	// action is reject.
	RejectScore *float64 `toml:"reject_score" json:"reject_score,omitempty"`
	// Action is what spam gets: "tag" (delivered with the headers and
	// the subject tag), "quarantine" (held), or "reject" (rejected from
	// RejectScore; below it held if [actions] quarantine_spam, else
	// tagged; a deny-listed sender whatever the score).
	Action string `toml:"action" json:"action,omitempty"`
	// Allow and Deny list senders as the site's allow and deny lists
	// do, for this user or domain; they are checked before the next
	// level's.
	Allow []string `toml:"allow" json:"allow,omitempty"`
	Deny  []string `toml:"deny" json:"deny,omitempty"`
}

// SpamActions are the values of Pref.Action.
var SpamActions = []string{"tag", "quarantine", "reject"}

// Duration is a time.Duration written as "30s", "5m" or "1h30m".
type Duration struct{ time.Duration }

// UnmarshalText parses a duration such as "30s".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// MarshalText formats the duration as UnmarshalText reads it.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Default returns the configuration used for keys a document leaves out.
// getenv reads the environment (os.Getenv in the daemon): systemd's
// STATE_DIRECTORY and RUNTIME_DIRECTORY choose the store directory and the
// API socket.
func Default(getenv func(string) string) Config {
	dir := "/var/lib/spamd"
	if s, _, _ := strings.Cut(getenv("STATE_DIRECTORY"), ":"); s != "" {
		dir = s
	}
	sock := "/run/spamd/api.sock"
	if s, _, _ := strings.Cut(getenv("RUNTIME_DIRECTORY"), ":"); s != "" {
		sock = filepath.Join(s, "api.sock")
	}
	return Config{
		Store: Store{Backend: "badger", Dir: dir, CacheMB: 64, Redis: Redis{
			Address: []string{},
			Prefix:  "spamd:",
			Timeout: Duration{time.Second},
		}},
		Milter: Milter{
			Listen:            "tcp://127.0.0.1:11332",
			ReadTimeout:       Duration{5 * time.Minute},
			WriteTimeout:      Duration{30 * time.Second},
			ShutdownTimeout:   Duration{30 * time.Second},
			ClassifyBytes:     1 << 20,
			MaxSize:           10 << 20,
			Users:             "address",
			SkipAuthenticated: true,
			TrustedNetworks:   []netip.Prefix{},
			Explain:           3,

			MessageTimeout:           Duration{30 * time.Minute},
			MaxConnections:           256,
			MaxHeaderBytes:           1 << 20,
			MaxConnectionHeaderBytes: 256 << 20,
			MaxSpoofedHeaders:        100,
		},
		Actions: Actions{
			RejectScore:  10,
			RejectCode:   550,
			RejectStatus: "5.7.1",
			RejectText:   "Message rejected as spam",
			OnError:      "accept",
			Classes:      map[string]string{},
		},
		API: API{Socket: sock, Admins: []string{}, Reporters: []string{},
			ReadTimeout:     Duration{time.Minute},
			WriteTimeout:    Duration{5 * time.Minute},
			IdleTimeout:     Duration{time.Minute},
			MaxConnections:  64,
			MaxRequests:     8,
			MaxTraining:     2,
			MaxMessageBytes: 16 << 20,
			MaxBatchBytes:   256 << 20,
		},
		Autolearn: Autolearn{SpamScore: 5, HamScore: -5, MaxRatio: 3},
		Reports:   Reports{MaxPending: 10000},
		Watch:     Watch{Trash: []string{".Trash"}, Rescan: Duration{time.Minute}},
		Metrics:   Metrics{Listen: "127.0.0.1:11334"},
		History:   History{Size: 1000, MessageMB: 32, Persist: true},
		Prune:     Prune{Every: Duration{24 * time.Hour}, Count: 1},
		Log:       Log{Level: "info", Format: "text"},
		Prefs:     Prefs{Allow: []string{}, Deny: []string{}},
		Filter:    map[string]string{},
	}
}

// document is what a TOML document decodes into: Config, with the
// [filter] table still untyped.
type document struct {
	Config
	Filter map[string]any `toml:"filter"`
}

// Decode reads a TOML document from r on top of base (normally Default)
// and validates the result. Unknown keys are an error naming them.
func Decode(r io.Reader, base Config) (Config, error) {
	doc := document{Config: base}
	doc.Config.Filter = nil
	md, err := toml.NewDecoder(r).Decode(&doc)
	if err != nil {
		return Config{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if un := md.Undecoded(); len(un) > 0 {
		keys := make([]string, len(un))
		for i, k := range un {
			keys[i] = strconv.Quote(k.String())
		}
		return Config{}, fmt.Errorf("%w: unknown key %s", ErrInvalid, strings.Join(keys, ", "))
	}
	c := doc.Config
	c.Filter = make(map[string]string, len(base.Filter)+len(doc.Filter))
	for k, v := range base.Filter {
		c.Filter[k] = v
	}
	for k, v := range doc.Filter {
		s, err := scalar(v)
		if err != nil {
			return Config{}, fmt.Errorf("%w: filter.%s: %v", ErrInvalid, k, err)
		}
		c.Filter[k] = s
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// scalar formats a TOML value of the [filter] table as text, as the
// filter's settings take it: a list of names (["ham", "spam"]) as
// "ham+spam", a matrix of numbers ([[0, 20], [1, 0]]) as "0 20; 1 0".
func scalar(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	case []any:
		if names, ok := nameList(x); ok {
			return strings.Join(names, "+"), nil
		}
		if rows, ok := matrix(x); ok {
			return strings.Join(rows, "; "), nil
		}
	}
	return "", fmt.Errorf("want a number, a boolean, a string, a list of names or a matrix of numbers, not %v", v)
}

// nameList returns the elements of a non-empty array of strings without
// '+', which separates them in text.
func nameList(a []any) ([]string, bool) {
	names := make([]string, len(a))
	for i, e := range a {
		s, ok := e.(string)
		if !ok || s == "" || strings.Contains(s, "+") {
			return nil, false
		}
		names[i] = s
	}
	return names, len(a) > 0
}

// matrix returns the rows of a non-empty array of non-empty arrays of
// numbers, each as its numbers separated by spaces.
func matrix(a []any) ([]string, bool) {
	rows := make([]string, len(a))
	for i, e := range a {
		r, ok := e.([]any)
		if !ok || len(r) == 0 {
			return nil, false
		}
		fs := make([]string, len(r))
		for j, x := range r {
			switch n := x.(type) {
			case int64:
				fs[j] = strconv.FormatInt(n, 10)
			case float64:
				fs[j] = strconv.FormatFloat(n, 'g', -1, 64)
			default:
				return nil, false
			}
		}
		rows[i] = strings.Join(fs, " ")
	}
	return rows, len(a) > 0
}

// Load reads the document at path on top of base.
func Load(path string, base Config) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read configuration: %w", err)
	}
	c, err := Decode(bytes.NewReader(b), base)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Validate reports the first value that is out of range, naming its key.
func (c Config) Validate() error {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalid, key, fmt.Sprintf(format, args...))
	}
	if c.Store.Dir == "" {
		return bad("store.dir", "must not be empty")
	}
	if c.Store.ReserveMB < -1 {
		return bad("store.reserve_mb", "want MiB, 0 for the default or -1 for no check, not %d", c.Store.ReserveMB)
	}
	if c.Store.CacheMB < 0 {
		return bad("store.cache_mb", "must not be negative")
	}
	switch c.Store.Backend {
	case "badger":
	case "redis":
		if err := c.Store.Redis.validate(bad); err != nil {
			return err
		}
	default:
		return bad("store.backend", "want badger or redis, not %q", c.Store.Backend)
	}
	m := c.Milter
	if _, _, err := SplitAddr(m.Listen); err != nil {
		return bad("milter.listen", "%v", err)
	}
	for _, d := range []struct {
		key string
		d   Duration
	}{{"milter.read_timeout", m.ReadTimeout}, {"milter.write_timeout", m.WriteTimeout}, {"milter.shutdown_timeout", m.ShutdownTimeout},
		{"milter.message_timeout", m.MessageTimeout}, {"api.read_timeout", c.API.ReadTimeout},
		{"api.write_timeout", c.API.WriteTimeout}, {"api.idle_timeout", c.API.IdleTimeout}} {
		if d.d.Duration <= 0 {
			return bad(d.key, "must be positive, not %v", d.d)
		}
	}
	if m.ClassifyBytes < 1024 {
		return bad("milter.classify_bytes", "must be at least 1024, not %d", m.ClassifyBytes)
	}
	if m.MaxSize < 0 {
		return bad("milter.max_size", "must not be negative")
	}
	if _, err := identity.Parse(m.Users); err != nil {
		return bad("milter.users", "%v", err)
	}
	if m.Explain < 0 || m.Explain > 10 {
		return bad("milter.explain", "must be 0 to 10, not %d", m.Explain)
	}
	if m.MaxConnections < 1 {
		return bad("milter.max_connections", "must be at least 1, not %d", m.MaxConnections)
	}
	if m.MaxHeaderBytes < 1024 {
		return bad("milter.max_header_bytes", "must be at least 1024, not %d", m.MaxHeaderBytes)
	}
	if m.MaxConnectionHeaderBytes < m.MaxHeaderBytes {
		return bad("milter.max_connection_header_bytes", "must be at least milter.max_header_bytes (%d), not %d", m.MaxHeaderBytes, m.MaxConnectionHeaderBytes)
	}
	if m.MaxSpoofedHeaders < 10 {
		return bad("milter.max_spoofed_headers", "must be at least 10, not %d", m.MaxSpoofedHeaders)
	}
	a := c.Actions
	if err := replyText(a.SubjectTag); err != nil {
		return bad("actions.subject_tag", "%v", err)
	}
	if a.RejectCode < 500 || a.RejectCode > 599 {
		return bad("actions.reject_code", "must be 5xx, not %d", a.RejectCode)
	}
	if err := enhancedStatus(a.RejectStatus, '5'); err != nil {
		return bad("actions.reject_status", "%v", err)
	}
	if err := replyText(a.RejectText); err != nil || a.RejectText == "" {
		return bad("actions.reject_text", "want printable ASCII without %%, not %q", a.RejectText)
	}
	if a.OnError != "accept" && a.OnError != "tempfail" {
		return bad("actions.on_error", "want accept or tempfail, not %q", a.OnError)
	}
	for _, class := range slices.Sorted(maps.Keys(a.Classes)) {
		action := a.Classes[class]
		if err := store.ValidClass(class); err != nil {
			return bad("actions.classes", "%v", err)
		}
		if !slices.Contains(ClassActions, action) {
			return bad("actions.classes", "%s: want accept, tag, quarantine or reject, not %q", class, action)
		}
		if action == "tag" && a.SubjectTag == "" {
			return bad("actions.classes", "%s: tag needs actions.subject_tag", class)
		}
	}
	if c.API.Socket == "" {
		return bad("api.socket", "must not be empty")
	}
	if c.API.TCP != "" {
		if err := loopback(c.API.TCP); err != nil {
			return bad("api.tcp", "%v", err)
		}
		if c.API.TokenFile == "" {
			return bad("api.token_file", "api.tcp needs a token file")
		}
	}
	for _, n := range []struct {
		key string
		n   int
	}{{"api.max_connections", c.API.MaxConnections}, {"api.max_requests", c.API.MaxRequests}, {"api.max_training", c.API.MaxTraining}} {
		if n.n < 1 {
			return bad(n.key, "must be at least 1, not %d", n.n)
		}
	}
	if c.API.MaxTraining > c.API.MaxRequests {
		return bad("api.max_training", "must be at most api.max_requests (%d), not %d", c.API.MaxRequests, c.API.MaxTraining)
	}
	if c.API.MaxMessageBytes < 1024 || c.API.MaxMessageBytes > MaxMessageBytes {
		return bad("api.max_message_bytes", "must be 1024 to %d, not %d", MaxMessageBytes, c.API.MaxMessageBytes)
	}
	if c.API.MaxBatchBytes < c.API.MaxMessageBytes {
		return bad("api.max_batch_bytes", "must be at least api.max_message_bytes (%d), not %d", c.API.MaxMessageBytes, c.API.MaxBatchBytes)
	}
	if al := c.Autolearn; !(al.SpamScore > al.HamScore) || math.IsInf(al.SpamScore, 0) || math.IsInf(al.HamScore, 0) {
		return bad("autolearn.spam_score", "must be finite and above autolearn.ham_score (%v ≤ %v)", al.SpamScore, al.HamScore)
	}
	if c.Autolearn.MaxRatio != 0 && !(c.Autolearn.MaxRatio >= 1) {
		return bad("autolearn.max_ratio", "must be 0 (no limit) or at least 1, not %v", c.Autolearn.MaxRatio)
	}
	if c.Reports.Spool != "" && !filepath.IsAbs(c.Reports.Spool) {
		return bad("reports.spool", "must be an absolute path, not %q", c.Reports.Spool)
	}
	if c.Reports.MaxPending < 1 {
		return bad("reports.max_pending", "must be at least 1, not %d", c.Reports.MaxPending)
	}
	if err := junkPattern(c.Watch.Junk); err != nil {
		return bad("watch.junk", "%v", err)
	}
	for _, t := range c.Watch.Trash {
		if t == "" || t == "." || t == ".." || strings.ContainsAny(t, "/\x00") {
			return bad("watch.trash", "%q is not a folder's directory name", t)
		}
	}
	if d := c.Watch.Domain; d != "" && ValidDomain(d) != nil {
		return bad("watch.domain", "%q is not a lower-case mail domain", d)
	}
	if c.Watch.Rescan.Duration < time.Second {
		return bad("watch.rescan", "must be at least 1s, not %v", c.Watch.Rescan)
	}
	if c.Metrics.Listen != "" {
		if err := loopback(c.Metrics.Listen); err != nil {
			return bad("metrics.listen", "%v", err)
		}
	}
	if h := c.History; h.Size < 0 || h.Size > MaxHistory {
		return bad("history.size", "must be 0 to %d, not %d", MaxHistory, h.Size)
	}
	if h := c.History; h.MessageMB < 0 || h.MessageMB > 4096 {
		return bad("history.message_mb", "must be 0 to 4096, not %d", h.MessageMB)
	}
	if f := c.History.File; f != "" && !filepath.IsAbs(f) {
		return bad("history.file", "must be an absolute path, not %q", f)
	}
	if p := c.Prune; p.Every.Duration < time.Second {
		return bad("prune.every", "must be at least 1s, not %v", p.Every)
	}
	if p := c.Prune; p.Days < 0 || p.SeenDays < 0 || p.Count < 0 {
		return bad("prune", "days, seen_days and count must not be negative (days %d, seen_days %d, count %d)", p.Days, p.SeenDays, p.Count)
	}
	if p := c.Prune; p.Days > 0 && p.Count < 1 {
		// No token is seen 0 times: such a rule would delete nothing
		// every day, and say it did.
		return bad("prune.count", "must be at least 1 with days, not %d", p.Count)
	}
	if co := c.Console; co.Enabled {
		switch {
		case co.Listen != "":
			if err := loopback(co.Listen); err != nil {
				return bad("console.listen", "%v", err)
			}
		case c.API.TCP == "":
			return bad("console.listen", "the console needs a listener: a loopback HOST:PORT of its own, or the API's (api.tcp)")
		}
		if c.API.TokenFile == "" {
			return bad("api.token_file", "the console needs the API's token, which logging in asks for")
		}
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		return bad("log.level", "want debug, info, warn or error, not %q", c.Log.Level)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		return bad("log.format", "want text or json, not %q", c.Log.Format)
	}
	return c.Prefs.validate(bad)
}

// validate checks the preferences, reporting through bad.
func (p Prefs) validate(bad func(key, format string, args ...any) error) error {
	if err := ValidateList(p.Allow); err != nil {
		return bad("prefs.allow", "%v", err)
	}
	if err := ValidateList(p.Deny); err != nil {
		return bad("prefs.deny", "%v", err)
	}
	if p.AuthservID != "" && (strings.ContainsAny(p.AuthservID, " \t;()\"") || !isPrint(p.AuthservID)) {
		return bad("prefs.authserv_id", "%q is not an authserv-id", p.AuthservID)
	}
	if p.File != "" && !filepath.IsAbs(p.File) {
		return bad("prefs.file", "must be an absolute path, not %q", p.File)
	}
	for _, d := range slices.Sorted(maps.Keys(p.Domain)) {
		if err := ValidDomain(d); err != nil {
			return bad("prefs.domain", "%v", err)
		}
		if key, err := p.Domain[d].Validate(); err != nil {
			return bad(fmt.Sprintf("prefs.domain.%q.%s", d, key), "%v", err)
		}
	}
	for _, u := range slices.Sorted(maps.Keys(p.User)) {
		if err := store.ValidUser(u); err != nil || u == "" || u != strings.ToLower(u) {
			return bad("prefs.user", "%q is not a lower-case user name", u)
		}
		if key, err := p.User[u].Validate(); err != nil {
			return bad(fmt.Sprintf("prefs.user.%q.%s", u, key), "%v", err)
		}
	}
	return nil
}

// Validate reports the first key of p whose value is out of range, and
// what is wrong with it.
func (p Pref) Validate() (key string, err error) {
	for _, f := range []struct {
		key string
		v   *float64
	}{{"required", p.Required}, {"reject_score", p.RejectScore}} {
		if f.v != nil && (math.IsNaN(*f.v) || math.IsInf(*f.v, 0)) {
			return f.key, fmt.Errorf("must be a finite number, not %v", *f.v)
		}
	}
	if p.SubjectTag != nil {
		if err := replyText(*p.SubjectTag); err != nil {
			return "subject_tag", err
		}
	}
	if p.Action != "" && !slices.Contains(SpamActions, p.Action) {
		return "action", fmt.Errorf("want tag, quarantine or reject, not %q", p.Action)
	}
	if err := ValidateList(p.Allow); err != nil {
		return "allow", err
	}
	if err := ValidateList(p.Deny); err != nil {
		return "deny", err
	}
	return "", nil
}

// maxListEntries bounds a sender list: it is matched against every
// message.
const maxListEntries = 10000

// ValidateList checks a sender list: each entry an address, a domain or
// a glob of either (path.Match's syntax), at most 254 bytes of printable
// ASCII without spaces.
func ValidateList(l []string) error {
	if len(l) > maxListEntries {
		return fmt.Errorf("%d entries, more than %d", len(l), maxListEntries)
	}
	for _, e := range l {
		if e == "" || len(e) > 254 || strings.ContainsAny(e, " \t/") || !isPrint(e) || strings.Count(e, "@") > 1 {
			return fmt.Errorf("%q is not an address, a domain or a glob of either", e)
		}
		if _, err := path.Match(e, ""); err != nil {
			return fmt.Errorf("%q: %v", e, err)
		}
	}
	return nil
}

// ValidDomain checks a mail domain: lower-case, no '@', a valid part of
// a user name.
func ValidDomain(d string) error {
	if d == "" || strings.ContainsAny(d, "@") || store.ValidUser("a@"+d) != nil || d != strings.ToLower(d) {
		return fmt.Errorf("%q is not a lower-case mail domain", d)
	}
	return nil
}

// isPrint reports whether s is printable ASCII.
func isPrint(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// validate checks the settings of the Redis backend, reporting through
// bad.
func (r Redis) validate(bad func(key, format string, args ...any) error) error {
	if len(r.Address) == 0 {
		return bad("store.redis.address", "the redis backend needs the address of a server, Cluster or Sentinels")
	}
	for _, a := range r.Address {
		if err := redisAddr(a); err != nil {
			return bad("store.redis.address", "%v", err)
		}
	}
	if r.Password != "" && r.PasswordFile != "" {
		return bad("store.redis.password", "give password or password_file, not both")
	}
	if r.PasswordFile != "" && !filepath.IsAbs(r.PasswordFile) {
		return bad("store.redis.password_file", "must be an absolute path, not %q", r.PasswordFile)
	}
	if (r.TLSCertFile == "") != (r.TLSKeyFile == "") {
		return bad("store.redis.tls_cert_file", "tls_cert_file and tls_key_file go together")
	}
	if !r.TLS && (r.TLSCAFile != "" || r.TLSCertFile != "" || r.TLSServerName != "") {
		return bad("store.redis.tls", "tls_* settings are given but tls is off")
	}
	if r.DB < 0 {
		return bad("store.redis.db", "must not be negative, not %d", r.DB)
	}
	if r.DB != 0 && len(r.Address) > 1 && r.SentinelMaster == "" {
		return bad("store.redis.db", "a Cluster has only database 0")
	}
	if r.Prefix == "" || len(r.Prefix) > 64 || strings.ContainsAny(r.Prefix, "{}*?[]\\ \t\r\n") {
		return bad("store.redis.prefix", "want 1 to 64 bytes without braces, glob characters or spaces, not %q", r.Prefix)
	}
	if r.Timeout.Duration < 10*time.Millisecond {
		return bad("store.redis.timeout", "must be at least 10ms, not %v", r.Timeout)
	}
	return nil
}

// redisAddr checks one address of a Redis server.
func redisAddr(a string) error {
	switch {
	case strings.HasPrefix(a, "unix:"):
		if !filepath.IsAbs(strings.TrimPrefix(a, "unix:")) {
			return fmt.Errorf("%q: the socket path must be absolute", a)
		}
		return nil
	case strings.HasPrefix(a, "/"):
		return nil
	}
	hp := strings.TrimPrefix(a, "tcp://")
	if _, port, err := net.SplitHostPort(hp); err != nil || port == "" {
		return fmt.Errorf("%q: want unix:/PATH, tcp://HOST:PORT or HOST:PORT", a)
	}
	return nil
}

// junkPattern checks the pattern of the Junk folders: "" (no watcher),
// or one identity.ParsePattern takes.
func junkPattern(p string) error {
	if p == "" {
		return nil
	}
	_, err := identity.ParsePattern(p)
	return err
}

// SplitAddr splits a listening address, "tcp://HOST:PORT" or "unix:/PATH",
// into the network and address net.Listen takes.
func SplitAddr(addr string) (network, address string, err error) {
	switch {
	case strings.HasPrefix(addr, "tcp://"):
		hp := strings.TrimPrefix(addr, "tcp://")
		if _, _, err := net.SplitHostPort(hp); err != nil {
			return "", "", fmt.Errorf("%q: %v", addr, err)
		}
		return "tcp", hp, nil
	case strings.HasPrefix(addr, "unix:"):
		p := strings.TrimPrefix(addr, "unix:")
		if !filepath.IsAbs(p) {
			return "", "", fmt.Errorf("%q: the socket path must be absolute", addr)
		}
		return "unix", p, nil
	}
	return "", "", fmt.Errorf("%q: want tcp://HOST:PORT or unix:/PATH", addr)
}

// loopback checks that hostport names a loopback address.
func loopback(hostport string) error {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("%q: %v", hostport, err)
	}
	if host == "localhost" {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address", hostport)
	}
	return nil
}

// enhancedStatus checks an RFC 3463 status code of the given class.
func enhancedStatus(s string, class byte) error {
	parts := strings.Split(s, ".")
	if len(parts) != 3 || len(s) == 0 || s[0] != class {
		return fmt.Errorf("want %c.x.y, not %q", class, s)
	}
	for _, p := range parts[1:] {
		if n, err := strconv.Atoi(p); err != nil || n < 0 || n > 999 || len(p) > 3 {
			return fmt.Errorf("want %c.x.y, not %q", class, s)
		}
	}
	return nil
}

// replyText checks text that goes into an SMTP reply or a header: printable
// ASCII, and no '%', which Sendmail would take for a format directive.
func replyText(s string) error {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' || s[i] == '%' {
			return fmt.Errorf("byte %q not allowed (printable ASCII without %%)", s[i])
		}
	}
	return nil
}

// Hidden stands for a secret in Text.
const Hidden = "(hidden)"

// Text returns the configuration as a TOML document: every key with the
// value in force, the defaults included, and every secret (the Redis
// password) replaced by Hidden. Files that hold secrets are named, never
// read.
func (c Config) Text() (string, error) {
	if c.Store.Redis.Password != "" {
		c.Store.Redis.Password = Hidden
	}
	doc := document{Config: c, Filter: make(map[string]any, len(c.Filter))}
	for k, v := range c.Filter {
		doc.Filter[k] = typed(v)
	}
	var b bytes.Buffer
	if err := toml.NewEncoder(&b).Encode(doc); err != nil {
		return "", fmt.Errorf("encode configuration: %w", err)
	}
	return b.String(), nil
}

// typed is the TOML value a [filter] setting's text stands for.
func typed(s string) any {
	if b, err := strconv.ParseBool(s); err == nil {
		return b
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
		return f
	}
	return s
}
