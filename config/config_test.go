package config

import (
	"bufio"
	"bytes"
	"errors"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/reportq"
)

// noEnv is an environment with nothing set.
func noEnv(string) string { return "" }

const shipped = "../config.toml"

func TestShippedFileIsTheDefaults(t *testing.T) {
	c, err := Load(shipped, Default(noEnv))
	if err != nil {
		t.Fatal(err)
	}
	if want := Default(noEnv); !reflect.DeepEqual(c, want) {
		t.Errorf("the shipped config.toml differs from the defaults:\n got %+v\nwant %+v", c, want)
	}
}

// sections reads the shipped file as section → lines.
func sections(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open(shipped)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	cur := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "[") {
			cur = strings.Trim(line, "[]")
			continue
		}
		out[cur] = append(out[cur], line)
	}
	return out
}

// hasKey reports whether lines set key, commented out or not.
func hasKey(lines []string, key string) (string, bool) {
	for _, l := range lines {
		l = strings.TrimPrefix(l, "# ")
		if k, v, ok := strings.Cut(l, " = "); ok && k == key {
			return v, true
		}
	}
	return "", false
}

func TestShippedFileDocumentsEveryKey(t *testing.T) {
	secs := sections(t)
	ct := reflect.TypeFor[Config]()
	for i := range ct.NumField() {
		sf := ct.Field(i)
		sec := sf.Tag.Get("toml")
		if sec == "-" {
			continue
		}
		documents(t, secs, sec, sf.Type)
	}
}

// documents checks that section sec of the shipped file documents every
// key of typ, and its sub-tables in sections of their own.
func documents(t *testing.T, secs map[string][]string, sec string, typ reflect.Type) {
	for j := range typ.NumField() {
		f := typ.Field(j)
		key := f.Tag.Get("toml")
		if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[Duration]() {
			if _, ok := secs[sec+"."+key]; !ok {
				t.Errorf("config.toml has no [%s.%s]", sec, key)
			}
			documents(t, secs, sec+"."+key, f.Type)
			continue
		}
		if f.Type.Kind() == reflect.Map && f.Type.Elem().Kind() == reflect.Struct {
			// A table of tables is shown by a commented example of one,
			// which must name every key of its entries.
			t.Run(sec+"."+key, func(t *testing.T) {
				example := examples(secs[sec], sec+"."+key)
				if example == nil {
					t.Fatalf("config.toml shows no example [%s.%s.NAME]", sec, key)
				}
				et := f.Type.Elem()
				for k := range et.NumField() {
					if name := et.Field(k).Tag.Get("toml"); !slices.ContainsFunc(example, func(l string) bool { return strings.HasPrefix(l, name+" = ") }) {
						t.Errorf("the example [%s.%s.NAME] does not show %s", sec, key, name)
					}
				}
			})
			continue
		}
		t.Run(sec+"."+key, func(t *testing.T) {
			if _, ok := hasKey(secs[sec], key); !ok {
				t.Errorf("config.toml does not document %s.%s", sec, key)
			}
		})
	}
}

// examples returns the lines of the commented example tables of lines
// whose headers start with "# [table.", uncommented; nil if there is none.
func examples(lines []string, table string) []string {
	var out []string
	in := false
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "# ["+table+"."):
			in = true
		case in && strings.HasPrefix(l, "# ["):
			in = false
		case in && strings.HasPrefix(l, "# "):
			out = append(out, strings.TrimPrefix(l, "# "))
		case in:
			in = false
		}
	}
	return out
}

// TestShippedFilterTable checks that [filter] lists every filter setting
// with its description and default, and that each line, uncommented, is
// accepted.
func TestShippedFilterTable(t *testing.T) {
	lines := sections(t)["filter"]
	def := filter.DefaultConfig()
	for _, k := range filter.Keys() {
		t.Run(k, func(t *testing.T) {
			v, ok := hasKey(lines, k)
			if !ok {
				t.Fatalf("[filter] does not list %s", k)
			}
			doc := strings.Join(lines, "\n")
			if !strings.Contains(doc, "# "+filter.Doc(k)+"\n# "+k+" = ") {
				t.Errorf("[filter] %s is not preceded by its description %q", k, filter.Doc(k))
			}
			c, err := Decode(strings.NewReader("[filter]\n"+k+" = "+v+"\n"), Default(noEnv))
			if err != nil {
				t.Fatal(err)
			}
			want, _ := def.Get(k)
			if c.Filter[k] != want {
				t.Errorf("config.toml shows %s = %s, the default is %s", k, c.Filter[k], want)
			}
			fc := filter.DefaultConfig()
			if err := fc.Set(k, c.Filter[k]); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestDefaultFromEnvironment(t *testing.T) {
	env := map[string]string{"STATE_DIRECTORY": "/var/lib/spamd2:/other", "RUNTIME_DIRECTORY": "/run/spamd2"}
	c := Default(func(k string) string { return env[k] })
	if c.Store.Dir != "/var/lib/spamd2" || c.API.Socket != "/run/spamd2/api.sock" {
		t.Errorf("got store %q, socket %q", c.Store.Dir, c.API.Socket)
	}
	c = Default(noEnv)
	if c.Store.Dir != "/var/lib/spamd" || c.API.Socket != "/run/spamd/api.sock" {
		t.Errorf("got store %q, socket %q", c.Store.Dir, c.API.Socket)
	}
}

func TestDecode(t *testing.T) {
	c, err := Decode(strings.NewReader(`
[milter]
listen = "unix:/run/spamd/milter.sock"
read_timeout = "90s"
trusted_networks = ["192.0.2.0/24", "::1/128"]
[actions]
reject = true
reject_code = 554
subject_tag = "[NEWS]"
classes = { newsletter = "tag", phishing = "reject" }
[filter]
alpha = 0.5
stem = false
counts = "boolean"
top = 20
classes = ["ham", "spam", "newsletter", "phishing"]
spam_classes = ["spam", "phishing"]
loss = [[0, 1, 1, 1], [20, 0, 20, 1], [1, 1, 0, 1], [20, 1, 20, 0.5]]
`), Default(noEnv))
	if err != nil {
		t.Fatal(err)
	}
	if c.Milter.Listen != "unix:/run/spamd/milter.sock" || c.Milter.ReadTimeout.Duration != 90*time.Second {
		t.Errorf("milter: %+v", c.Milter)
	}
	if want := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("::1/128")}; !reflect.DeepEqual(c.Milter.TrustedNetworks, want) {
		t.Errorf("trusted networks %v, want %v", c.Milter.TrustedNetworks, want)
	}
	if !c.Actions.Reject || c.Actions.RejectCode != 554 || c.Actions.RejectText != "Message rejected as spam" {
		t.Errorf("actions: %+v", c.Actions)
	}
	if want := map[string]string{"newsletter": "tag", "phishing": "reject"}; !reflect.DeepEqual(c.Actions.Classes, want) {
		t.Errorf("actions.classes %v, want %v", c.Actions.Classes, want)
	}
	if c.Prefs.User != nil || c.Prefs.Domain != nil {
		t.Errorf("prefs: %+v", c.Prefs)
	}
	want := map[string]string{"alpha": "0.5", "stem": "false", "counts": "boolean", "top": "20",
		"classes": "ham+spam+newsletter+phishing", "spam_classes": "spam+phishing",
		"loss": "0 1 1 1; 20 0 20 1; 1 1 0 1; 20 1 20 0.5"}
	if !reflect.DeepEqual(c.Filter, want) {
		t.Errorf("filter %v, want %v", c.Filter, want)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tt := range []struct {
		name, doc, want string
	}{
		{"unknown section", "[milterr]\nlisten = \"x\"", `unknown key "milterr"`},
		{"unknown key", "[milter]\nlisten_addr = \"tcp://127.0.0.1:1\"", `unknown key "milter.listen_addr"`},
		{"unknown top key", "verbose = true", `unknown key "verbose"`},
		{"bad listen", "[milter]\nlisten = \"127.0.0.1:11332\"", "milter.listen"},
		{"relative socket", "[milter]\nlisten = \"unix:milter.sock\"", "milter.listen"},
		{"bad duration", "[milter]\nread_timeout = \"soon\"", "read_timeout"},
		{"zero timeout", "[milter]\nwrite_timeout = \"0s\"", "milter.write_timeout"},
		{"bad network", "[milter]\ntrusted_networks = [\"10.0.0.1\"]", "trusted_networks"},
		{"small prefix", "[milter]\nclassify_bytes = 10", "milter.classify_bytes"},
		{"bad users", "[milter]\nusers = \"recipient\"", "milter.users"},
		{"no message timeout", "[milter]\nmessage_timeout = \"0s\"", "milter.message_timeout"},
		{"no milter connections", "[milter]\nmax_connections = 0", "milter.max_connections"},
		{"tiny header", "[milter]\nmax_header_bytes = 100", "milter.max_header_bytes"},
		{"connection header under message header", "[milter]\nmax_connection_header_bytes = 2048", "milter.max_connection_header_bytes"},
		{"few spoofed headers", "[milter]\nmax_spoofed_headers = 2", "milter.max_spoofed_headers"},
		{"bad reject code", "[actions]\nreject_code = 450", "actions.reject_code"},
		{"bad status", "[actions]\nreject_status = \"4.7.1\"", "actions.reject_status"},
		{"bad text", "[actions]\nreject_text = \"100% spam\"", "actions.reject_text"},
		{"bad on_error", "[actions]\non_error = \"discard\"", "actions.on_error"},
		{"tcp without token", "[api]\ntcp = \"127.0.0.1:11333\"", "api.token_file"},
		{"tcp not loopback", "[api]\ntcp = \"0.0.0.0:11333\"\ntoken_file = \"/etc/spamd/token\"", "api.tcp"},
		{"no api read timeout", "[api]\nread_timeout = \"0s\"", "api.read_timeout"},
		{"negative api idle timeout", "[api]\nidle_timeout = \"-1s\"", "api.idle_timeout"},
		{"no api connections", "[api]\nmax_connections = 0", "api.max_connections"},
		{"no api requests", "[api]\nmax_requests = 0", "api.max_requests"},
		{"more training than requests", "[api]\nmax_requests = 2\nmax_training = 3", "api.max_training"},
		{"message over reportq's limit", "[api]\nmax_message_bytes = 67108865", "api.max_message_bytes"},
		{"batch under a message", "[api]\nmax_batch_bytes = 1024", "api.max_batch_bytes"},
		{"metrics not loopback", "[metrics]\nlisten = \"192.0.2.1:9000\"", "metrics.listen"},
		{"bad level", "[log]\nlevel = \"verbose\"", "log.level"},
		{"filter table value", "[filter]\nalpha = [1, 2]", "filter.alpha"},
		{"filter list with '+'", "[filter]\nclasses = [\"ham+x\", \"spam\"]", "filter.classes"},
		{"filter matrix of words", "[filter]\nloss = [[0, \"a\"], [1, 0]]", "filter.loss"},
		{"class action unknown", "[actions]\nclasses = { newsletter = \"drop\" }", "actions.classes"},
		{"class action tag without a tag", "[actions]\nclasses = { newsletter = \"tag\" }", "actions.classes"},
		{"class action of a bad name", "[actions]\nclasses = { News = \"accept\" }", "actions.classes"},
		{"autolearn thresholds crossed", "[autolearn]\nspam_score = -1.0\nham_score = 1.0", "autolearn.spam_score"},
		{"autolearn ratio", "[autolearn]\nmax_ratio = 0.5", "autolearn.max_ratio"},
		{"relative spool", "[reports]\nspool = \"reports\"", "reports.spool"},
		{"no pending reports", "[reports]\nmax_pending = 0", "reports.max_pending"},
		{"junk without %u", "[watch]\njunk = \"/var/mail/Maildir/.Junk\"", "watch.junk"},
		{"junk with %u in an element", "[watch]\njunk = \"/var/mail/u%u/Maildir/.Junk\"", "watch.junk"},
		{"junk relative", "[watch]\njunk = \"mail/%u/.Junk\"", "watch.junk"},
		{"junk climbing", "[watch]\njunk = \"/var/mail/../%u/.Junk\"", "watch.junk"},
		{"trash with a slash", "[watch]\ntrash = [\"../Trash\"]", "watch.trash"},
		{"rescan too often", "[watch]\nrescan = \"10ms\"", "watch.rescan"},
		{"wrong type", "[store]\ncache_mb = \"big\"", "cache_mb"},
		{"unknown backend", "[store]\nbackend = \"postgres\"", "store.backend"},
		{"redis without address", "[store]\nbackend = \"redis\"", "store.redis.address"},
		{"redis bad address", "[store]\nbackend = \"redis\"\n[store.redis]\naddress = [\"redis.example.org\"]", "store.redis.address"},
		{"redis relative socket", "[store]\nbackend = \"redis\"\n[store.redis]\naddress = [\"unix:redis.sock\"]", "store.redis.address"},
		{"redis two passwords", "[store]\nbackend = \"redis\"\n[store.redis]\naddress = [\"/r.sock\"]\npassword = \"a\"\npassword_file = \"/p\"", "store.redis.password"},
		{"redis key without cert", "[store]\nbackend = \"redis\"\n[store.redis]\naddress = [\"h:1\"]\ntls = true\ntls_key_file = \"/k\"", "store.redis.tls_cert_file"},
		{"redis tls files without tls", "[store]\nbackend = \"redis\"\n[store.redis]\naddress = [\"h:1\"]\ntls_ca_file = \"/ca\"", "store.redis.tls"},
		{"redis cluster db", "[store]\nbackend = \"redis\"\n[store.redis]\naddress = [\"h:1\", \"h:2\"]\ndb = 2", "store.redis.db"},
		{"redis prefix brace", "[store]\nbackend = \"redis\"\n[store.redis]\naddress = [\"h:1\"]\nprefix = \"a{b}\"", "store.redis.prefix"},
		{"redis timeout", "[store]\nbackend = \"redis\"\n[store.redis]\naddress = [\"h:1\"]\ntimeout = \"1ms\"", "store.redis.timeout"},
		{"redis unknown key", "[store.redis]\nhost = \"h\"", `unknown key "store.redis.host"`},
		{"negative history", "[history]\nsize = -1", "history.size"},
		{"huge history", "[history]\nsize = 1000001", "history.size"},
		{"history message memory", "[history]\nmessage_mb = -1", "history.message_mb"},
		{"relative history file", "[history]\nfile = \"history.jsonl\"", "history.file"},
		{"prune of tokens seen 0 times", "[prune]\ndays = 30\ncount = 0", "prune.count"},
		{"negative prune days", "[prune]\ndays = -1", "prune"},
		{"console without a listener", "[console]\nenabled = true\n[api]\ntoken_file = \"/t\"", "console.listen"},
		{"console without a token", "[console]\nenabled = true\nlisten = \"127.0.0.1:11335\"", "api.token_file"},
		{"console not loopback", "[console]\nenabled = true\nlisten = \"0.0.0.0:11335\"\n[api]\ntoken_file = \"/t\"", "console.listen"},
		{"not toml", "[store\n", "invalid configuration"},
		{"allow entry with a space", "[prefs]\nallow = [\"a b@example.org\"]", "prefs.allow"},
		{"deny glob broken", "[prefs]\ndeny = [\"[a@example.org\"]", "prefs.deny"},
		{"two @", "[prefs]\ndeny = [\"a@b@example.org\"]", "prefs.deny"},
		{"authserv-id with ;", "[prefs]\nauthserv_id = \"mx;x\"", "prefs.authserv_id"},
		{"relative prefs file", "[prefs]\nfile = \"prefs.json\"", "prefs.file"},
		{"upper-case domain", "[prefs.domain.\"Example.org\"]\nrequired = 1.0", "prefs.domain"},
		{"domain with @", "[prefs.domain.\"a@example.org\"]\nrequired = 1.0", "prefs.domain"},
		{"upper-case user", "[prefs.user.\"Alice@example.org\"]\nrequired = 1.0", "prefs.user"},
		{"unknown action", "[prefs.user.\"alice@example.org\"]\naction = \"discard\"", `prefs.user."alice@example.org".action`},
		{"infinite required", "[prefs.domain.\"example.org\"]\nrequired = inf", `prefs.domain."example.org".required`},
		{"tag with %", "[prefs.user.\"bob\"]\nsubject_tag = \"100%\"", `prefs.user."bob".subject_tag`},
		{"user allow entry", "[prefs.user.\"bob\"]\nallow = [\"\"]", `prefs.user."bob".allow`},
		{"unknown pref key", "[prefs.user.\"bob\"]\nthreshold = 5.0", `unknown key "prefs.user.bob.threshold"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(strings.NewReader(tt.doc), Default(noEnv))
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not wrap ErrInvalid and name %q", err, tt.want)
			}
		})
	}
}

// TestRedis decodes the settings of a Redis backend, and reads the
// password and TLS files they name.
func TestRedis(t *testing.T) {
	dir := t.TempDir()
	pass := dir + "/redis.pass"
	if err := os.WriteFile(pass, []byte("s3cret\nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Decode(strings.NewReader(`
[store]
backend = "redis"
[store.redis]
address = ["10.0.0.1:6379", "tcp://10.0.0.2:6379", "unix:/run/redis.sock"]
username = "spamd"
password_file = "`+pass+`"
prefix = "mx:"
timeout = "250ms"
`), Default(noEnv))
	if err != nil {
		t.Fatal(err)
	}
	r := c.Store.Redis
	if c.Store.Backend != "redis" || len(r.Address) != 3 || r.Username != "spamd" || r.Prefix != "mx:" || r.Timeout.Duration != 250*time.Millisecond {
		t.Errorf("store: %+v", c.Store)
	}
	if p, err := r.LoadPassword(); err != nil || p != "s3cret" {
		t.Errorf("LoadPassword = %q, %v", p, err)
	}
	if tc, err := r.LoadTLS(); err != nil || tc != nil {
		t.Errorf("LoadTLS without tls = %v, %v", tc, err)
	}
	r.TLS, r.TLSCAFile = true, pass
	if _, err := r.LoadTLS(); err == nil {
		t.Error("LoadTLS accepted a CA file without a certificate")
	}
	r.TLSCAFile, r.TLSServerName = "", "redis.example.org"
	if tc, err := r.LoadTLS(); err != nil || tc.ServerName != "redis.example.org" {
		t.Errorf("LoadTLS = %+v, %v", tc, err)
	}
	// The defaults keep Badger, and say nothing of Redis that a
	// switch to it would have to undo.
	d := Default(noEnv)
	if d.Store.Backend != "badger" || len(d.Store.Redis.Address) != 0 || d.Store.Redis.Prefix != "spamd:" {
		t.Errorf("defaults: %+v", d.Store)
	}
}

func TestSplitAddr(t *testing.T) {
	for _, tt := range []struct {
		in, network, address string
		ok                   bool
	}{
		{"tcp://127.0.0.1:11332", "tcp", "127.0.0.1:11332", true},
		{"tcp://[::1]:11332", "tcp", "[::1]:11332", true},
		{"unix:/run/spamd/milter.sock", "unix", "/run/spamd/milter.sock", true},
		{"inet:127.0.0.1:11332", "", "", false},
		{"tcp://localhost", "", "", false},
	} {
		t.Run(tt.in, func(t *testing.T) {
			n, a, err := SplitAddr(tt.in)
			if (err == nil) != tt.ok || n != tt.network || a != tt.address {
				t.Errorf("SplitAddr(%q) = %q, %q, %v", tt.in, n, a, err)
			}
		})
	}
}

// FuzzDecode feeds arbitrary documents to Decode: it must not panic, and
// what it accepts must be valid.
func FuzzDecode(f *testing.F) {
	b, err := os.ReadFile(shipped)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("[milter]\nlisten = \"unix:/x\"\ntrusted_networks = [\"::/0\"]\n[filter]\nalpha = 2\n"))
	f.Add([]byte("[actions]\nreject = true\nreject_score = -1e300\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := Decode(bytes.NewReader(doc), Default(noEnv))
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Decode accepted an invalid configuration: %v", err)
		}
	})
}

// FuzzSplitAddr checks that SplitAddr never panics and that what it
// accepts is a network net.Listen knows with an address in its form.
func FuzzSplitAddr(f *testing.F) {
	for _, s := range []string{"tcp://127.0.0.1:11332", "tcp://[::1]:1", "unix:/run/spamd/milter.sock", "unix:x", "inet:1@h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, addr string) {
		network, address, err := SplitAddr(addr)
		if err != nil {
			return
		}
		switch network {
		case "tcp":
			if addr != "tcp://"+address {
				t.Fatalf("%q split into %q", addr, address)
			}
		case "unix":
			if addr != "unix:"+address || !strings.HasPrefix(address, "/") {
				t.Fatalf("%q split into %q", addr, address)
			}
		default:
			t.Fatalf("%q gave network %q", addr, network)
		}
	})
}

func TestMaxMessageBytesIsReportqs(t *testing.T) {
	if MaxMessageBytes != reportq.MaxMessage {
		t.Errorf("config.MaxMessageBytes %d, reportq.MaxMessage %d", MaxMessageBytes, reportq.MaxMessage)
	}
}

// TestText checks that the configuration in force reads back as itself,
// with the Redis password hidden and the [filter] values typed.
func TestText(t *testing.T) {
	c := Default(noEnv)
	c.Store.Redis.Password = "s3cret-password"
	c.Store.Redis.Address = []string{"h:1"}
	c.Filter = map[string]string{"alpha": "0.25", "stem": "false", "min_trained": "5", "prior": "global"}
	text, err := c.Text()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text, "s3cret") || !strings.Contains(text, `password = "`+Hidden+`"`) {
		t.Errorf("the password is not hidden:\n%s", text)
	}
	for _, want := range []string{"alpha = 0.25", "stem = false", "min_trained = 5", `prior = "global"`, "[console]", "size = 1000"} {
		if !strings.Contains(text, want) {
			t.Errorf("the text lacks %q:\n%s", want, text)
		}
	}
	back, err := Decode(strings.NewReader(text), Default(noEnv))
	if err != nil {
		t.Fatalf("the text does not decode: %v\n%s", err, text)
	}
	c.Store.Redis.Password = Hidden
	if !reflect.DeepEqual(back, c) {
		t.Errorf("read back as\n%+v\nwant\n%+v", back, c)
	}
}

// TestChanged checks that a reload can name the keys that changed, and
// only those.
func TestChanged(t *testing.T) {
	base := Default(func(string) string { return "" })
	for _, tt := range []struct {
		name string
		doc  string
		want []string
	}{
		{"nothing", "", nil},
		{"same as the default", "[milter]\nexplain = 3\n", nil},
		{"one key", "[milter]\nexplain = 5\n", []string{"milter.explain"}},
		{"several sections", "[actions]\nsubject_tag = \"[SPAM]\"\n[store.redis]\npassword = \"secret\"\n[milter]\nread_timeout = \"1m\"\n",
			[]string{"actions.subject_tag", "milter.read_timeout", "store.redis.password"}},
		{"a list", "[milter]\ntrusted_networks = [\"10.0.0.0/8\"]\n", []string{"milter.trusted_networks"}},
		{"the filter table", "[filter]\nalpha = 0.1\n", []string{"filter.alpha"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Decode(strings.NewReader(tt.doc), base)
			if err != nil {
				t.Fatal(err)
			}
			got := Changed(base, c)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Changed = %q, want %q", got, tt.want)
			}
			if back := Changed(c, base); !slices.Equal(back, tt.want) {
				t.Errorf("Changed back = %q, want %q", back, tt.want)
			}
		})
	}
}

// TestShippedPrefsExample checks that the commented example tables of
// [prefs] in the shipped file, uncommented, are a valid configuration
// that says what the comments say.
func TestShippedPrefsExample(t *testing.T) {
	lines := sections(t)["prefs"]
	var doc strings.Builder
	in := false
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "# [prefs."):
			in = true
		case in && (l == "#" || !strings.HasPrefix(l, "# ")):
			in = false
			continue
		}
		if in {
			doc.WriteString(strings.TrimPrefix(l, "# ") + "\n")
		}
	}
	c, err := Decode(strings.NewReader(doc.String()), Default(noEnv))
	if err != nil {
		t.Fatalf("%v\n%s", err, doc.String())
	}
	d, u := c.Prefs.Domain["example.org"], c.Prefs.User["alice@example.org"]
	if d.Required == nil || *d.Required != 4 || d.Action != "quarantine" || !slices.Equal(d.Allow, []string{"*@partner.example"}) {
		t.Errorf("domain: %+v", d)
	}
	if u.SubjectTag == nil || *u.SubjectTag != "" || u.Action != "reject" || u.RejectScore == nil || *u.RejectScore != 8 {
		t.Errorf("user: %+v", u)
	}
}

// TestDocsExamples decodes every TOML example of the documentation that
// is a configuration.
func TestDocsExamples(t *testing.T) {
	for _, doc := range []string{"../docs/prefs.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		blocks := strings.Split(string(b), "```toml\n")[1:]
		if len(blocks) == 0 {
			t.Errorf("%s has no TOML example", doc)
		}
		for _, blk := range blocks {
			example, _, _ := strings.Cut(blk, "```")
			if _, err := Decode(strings.NewReader(example), Default(noEnv)); err != nil {
				t.Errorf("%s: %v\n%s", doc, err, example)
			}
		}
	}
}

// TestTextPrefs checks that preferences, with their unset keys, read back
// from the text of the configuration in force.
func TestTextPrefs(t *testing.T) {
	c, err := Decode(strings.NewReader("[prefs]\ndeny = [\"*@x.example\"]\n[prefs.user.\"a@b.example\"]\nrequired = 4.5\nsubject_tag = \"\"\n"+
		"[prefs.domain.\"b.example\"]\naction = \"reject\"\n"), Default(noEnv))
	if err != nil {
		t.Fatal(err)
	}
	text, err := c.Text()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(strings.NewReader(text), Default(noEnv))
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if !reflect.DeepEqual(back, c) {
		t.Errorf("read back as %+v, want %+v", back.Prefs, c.Prefs)
	}
}
