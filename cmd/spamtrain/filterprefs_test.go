package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gomilter "github.com/emersion/go-milter"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/milter"
	"github.com/spamd/spamd/prefs"
	"github.com/spamd/spamd/store/badgerstore"
)

// plainMessage returns the sample message at path as an MTA hands it
// on: without the mbox "From " line and the Return-Path, with from as
// its From: address.
func plainMessage(t *testing.T, path, from string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	head, body, _ := strings.Cut(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n\n")
	var out []string
	for _, l := range strings.Split(head, "\n") {
		switch {
		case strings.HasPrefix(l, "From "), strings.HasPrefix(strings.ToLower(l), "return-path:"):
			continue
		case strings.HasPrefix(strings.ToLower(l), "from:"):
			l = "From: Someone <" + from + ">"
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n") + "\n\n" + body
}

// throughMilter passes raw through spamd's milter from sender to rcpt
// and returns the message as the MTA then delivers it: the header with
// the milter's changes applied in order (fields removed, the Subject
// changed, fields added at the end), then the body; or, for a message
// the milter rejects, its reply. raw has LF line ends, as plainMessage
// makes it.
func throughMilter(t *testing.T, addr, sender, rcpt, raw string) (delivered, reply string) {
	t.Helper()
	c := gomilter.NewClientWithOptions("tcp", addr, gomilter.ClientOptions{
		Dialer: &net.Dialer{Timeout: 5 * time.Second}, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
		ActionMask: gomilter.OptAddHeader | gomilter.OptChangeHeader | gomilter.OptQuarantine,
	})
	s, err := c.Session()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	head, body, _ := strings.Cut(raw, "\n\n")
	var fields [][2]string
	for _, l := range strings.Split(head, "\n") {
		if (l[0] == ' ' || l[0] == '\t') && len(fields) > 0 {
			fields[len(fields)-1][1] += "\n" + l
			continue
		}
		name, value, _ := strings.Cut(l, ":")
		fields = append(fields, [2]string{name, strings.TrimPrefix(value, " ")})
	}
	must := func(act *gomilter.Action, err error) {
		t.Helper()
		if err != nil || act.Code != gomilter.ActContinue {
			t.Fatalf("milter: %v %+v", err, act)
		}
	}
	if _, err := s.Conn("client.example.net", gomilter.FamilyInet, 40000, "198.51.100.7"); err != nil {
		t.Fatal(err)
	}
	must(s.Mail("<"+sender+">", nil))
	must(s.Rcpt("<"+rcpt+">", nil))
	for _, f := range fields {
		must(s.HeaderField(f[0], f[1]))
	}
	must(s.HeaderEnd())
	must(s.BodyChunk([]byte(strings.ReplaceAll(body, "\n", "\r\n"))))
	mods, act, err := s.End()
	switch {
	case err != nil:
		t.Fatal(err)
	case act.Code == gomilter.ActReplyCode:
		return "", fmt.Sprintf("%d %s", act.SMTPCode, act.SMTPText)
	case act.Code != gomilter.ActAccept:
		t.Fatalf("milter answered %+v", act)
	}
	for _, m := range mods {
		switch m.Code {
		case gomilter.ActChangeHeader:
			n := 0
			for i := range fields {
				if strings.EqualFold(fields[i][0], m.HeaderName) {
					if n++; n == int(m.HeaderIndex) {
						fields[i][1] = m.HeaderValue
					}
				}
			}
		case gomilter.ActAddHeader:
			fields = append(fields, [2]string{m.HeaderName, m.HeaderValue})
		}
	}
	var b strings.Builder
	for _, f := range fields {
		b.WriteString(f[0] + ": " + f[1] + "\n")
	}
	return b.String() + "\n" + body, ""
}

// TestFilterPrefs filters mail for recipients with preferences at
// every level, through the local store and through spamd, and checks
// that each delivers byte for byte what spamd's milter delivers for the
// same recipient, sender and message, with the exit status of the
// verdict.
func TestFilterPrefs(t *testing.T) {
	isolate(t)
	spamDir, hamDir, _ := sampleDirs(t)
	local := t.TempDir()
	mustRun(t, "", "train", "--db", local, "--spam", spamDir, "--ham", hamDir)
	spamPath, hamPath := filepath.Join(spamDir, firstName(t, spamDir)), filepath.Join(hamDir, firstName(t, hamDir))
	// The scores of the two messages set the preferences' thresholds.
	scores := map[string]float64{}
	{
		st, err := badgerstore.Open(context.Background(), local, badgerstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		f, err := filter.New(st, filter.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		for name, p := range map[string]string{"spam": spamPath, "ham": hamPath} {
			v, err := f.Classify(context.Background(), "", []byte(plainMessage(t, p, "a@b.example")), filter.ClassifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			scores[name] = v.Score
		}
		st.Close()
	}
	vs, vh := scores["spam"], scores["ham"]
	if !(vs > 3 && vh < 0) {
		t.Fatalf("sample scores: spam %v, ham %v", vs, vh)
	}
	cfgPath := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(cfgPath, fmt.Appendf(nil, `[api]
socket = %q

[actions]
subject_tag = "[SPAM]"

[prefs]
deny = ["*@spammer.example"]
allow = ["friend@partner.example"]

[prefs.domain."example.org"]
required = %g
subject_tag = "[ORG]"

[prefs.user."alice@example.org"]
required = %g
subject_tag = "[ALICE]"

[prefs.user."erin@example.org"]
allow = ["*@spammer.example"]

[prefs.user."rita@example.net"]
action = "reject"
`, filepath.Join(t.TempDir(), "none.sock"), vs+1, vh-1), 0o644)
	t.Setenv("SPAMD_CONFIG", cfgPath)
	cfg, err := config.Load(cfgPath, config.Default(os.Getenv))
	if err != nil {
		t.Fatal(err)
	}

	// spamd: its API and its milter over one store and one book of
	// preferences, as the daemon serves them.
	d := startDaemonPrefs(t, cfg.Actions, cfg.Prefs)
	mustRun(t, "", "train", "--api=unix:"+d.sock, "--spam", spamDir, "--ham", hamDir)
	// What the API sets, the daemon keeps in prefs.json; the local path
	// reads the one beside its store.
	dave := config.Pref{Required: fp(vh - 1)}
	if err := d.prefs.SetUser("dave@example.org", dave); err != nil {
		t.Fatal(err)
	}
	pf, err := prefs.OpenFile(filepath.Join(local, "prefs.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pf.SetUser("dave@example.org", dave); err != nil {
		t.Fatal(err)
	}
	ms := cfg.Milter
	ms.ReadTimeout.Duration, ms.WriteTimeout.Duration = 5*time.Second, 5*time.Second
	ml := milter.New(&milter.Settings{Filter: d.f, Milter: ms, Actions: cfg.Actions, Prefs: d.prefs.Book()},
		slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go ml.Serve(ln)
	t.Cleanup(func() { ml.Shutdown(context.Background()) })

	const elsewhere = "someone@elsewhere.example"
	for _, tt := range []struct {
		name, rcpt, sender string
		path, from         string // the message, and its From: address
		returnPath         bool   // the sender in a Return-Path field, not --sender
		code               int
		wants              []string
		// reply is the milter's reply to a message it rejects: the pipe
		// then delivers what the milter adds to mail it accepts.
		reply string
	}{
		{"site: spam, the site's tag", "x@other.example", elsewhere, spamPath, elsewhere, false, 1,
			[]string{"X-Spam-Flag: YES\n", "Subject: [SPAM] ", "required=3.00"}, ""},
		{"domain over site: its required score makes spam unsure", "bob@example.org", elsewhere, spamPath, elsewhere, false, 2,
			[]string{"X-Spam-Flag: NO\n", "X-Spamd-Result: unsure; ", fmt.Sprintf("required=%.2f", vs+1)}, ""},
		{"user over domain: their required score and tag", "alice@example.org", elsewhere, hamPath, elsewhere, false, 1,
			[]string{"X-Spam-Flag: YES\n", "Subject: [ALICE] ", fmt.Sprintf("required=%.2f", vh-1)}, ""},
		{"allow-listed sender", "x@other.example", "friend@partner.example", spamPath, "friend@partner.example", false, 0,
			[]string{"X-Spam-Flag: NO\n", "X-Spamd-Result: ham; ", "listed=allow; by=global"}, ""},
		{"deny-listed sender", "x@other.example", "bulk@spammer.example", hamPath, elsewhere, false, 1,
			[]string{"X-Spam-Flag: YES\n", "Subject: [SPAM] ", "listed=deny; by=global"}, ""},
		{"deny-listed sender in Return-Path", "x@other.example", "bulk@spammer.example", hamPath, elsewhere, true, 1,
			[]string{"X-Spam-Flag: YES\n", "listed=deny; by=global"}, ""},
		{"the user's allow list over the site's deny list", "erin@example.org", "bulk@spammer.example", spamPath, "bulk@spammer.example", false, 0,
			[]string{"X-Spam-Flag: NO\n", "listed=allow; by=user"}, ""},
		{"set through the API, with the domain's tag", "dave@example.org", elsewhere, hamPath, elsewhere, false, 1,
			[]string{"X-Spam-Flag: YES\n", "Subject: [ORG] ", fmt.Sprintf("required=%.2f", vh-1)}, ""},
		{"rejected: spam's status and headers in a pipe", "rita@example.net", "bulk@spammer.example", hamPath, elsewhere, false, 1,
			[]string{"X-Spam-Flag: YES\n", "Subject: [SPAM] ", "listed=deny; by=global"}, "550 5.7.1 Message rejected as spam"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			raw := plainMessage(t, tt.path, tt.from)
			args := []string{"--user", tt.rcpt}
			if tt.returnPath {
				raw = "Return-Path: <" + tt.sender + ">\n" + raw
			} else {
				args = append(args, "--sender", tt.sender)
			}
			want, reply := throughMilter(t, ln.Addr().String(), tt.sender, tt.rcpt, raw)
			if reply != tt.reply {
				t.Fatalf("the milter answered %q, want %q", reply, tt.reply)
			}
			if reply != "" {
				// What the milter would add had it accepted it: the
				// same decision for a recipient whose action is tag.
				want, _ = throughMilter(t, ln.Addr().String(), tt.sender, "x@other.example", raw)
			}
			for _, w := range tt.wants {
				if !strings.Contains(want, w) {
					t.Errorf("the milter delivered no %q:\n%.1500s", w, want)
				}
			}
			for _, path := range []struct{ name, flag string }{{"local", "--db=" + local}, {"spamd", "--api=unix:" + d.sock}} {
				code, out, errOut := spamtrain(t, raw, append([]string{"filter", path.flag}, args...)...)
				if code != tt.code {
					t.Errorf("%s: exit %d, want %d: %s", path.name, code, tt.code, errOut)
				}
				if out != want {
					t.Errorf("%s: delivered\n%s\nthe milter delivers\n%s", path.name, header(out), header(want))
				}
			}
		})
	}
}

// header returns the header of a message.
func header(raw string) string {
	h, _, _ := strings.Cut(raw, "\n\n")
	return h
}

func fp(v float64) *float64 { return &v }
