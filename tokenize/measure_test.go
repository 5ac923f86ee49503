package tokenize

import (
	"bytes"
	"math"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseDate(t *testing.T) {
	utc := func(s string) int64 {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm.Unix()
	}
	tests := []struct {
		in    string
		ok    bool
		unix  string // RFC 3339
		clock int    // local minutes
	}{
		{"Tue, 1 Jul 2003 10:52:37 +0200", true, "2003-07-01T08:52:37Z", 10*60 + 52},
		{"Tue,  01 Jul 2003 10:52:37 +0200 (CEST)", true, "2003-07-01T08:52:37Z", 10*60 + 52},
		{"1 Jul 2003 10:52 -0700", true, "2003-07-01T17:52:00Z", 10*60 + 52},
		{"Wed, 31 Dec 97 23:59:59 GMT", true, "1997-12-31T23:59:59Z", 23*60 + 59},
		{"Sat, 1 Jan 05 00:00:00 EST", true, "2005-01-01T05:00:00Z", 0},
		{"Mon, 2 Feb 2004 3:04:05 PDT", true, "2004-02-02T10:04:05Z", 3*60 + 4},
		{"Thu, 29 Feb 2024 12:00:00 Z", true, "2024-02-29T12:00:00Z", 12 * 60},
		{"Fri, 13 Aug 2004 17:15:00 XYZ", true, "2004-08-13T17:15:00Z", 17*60 + 15},
		{"Fri Aug 13 17:15:00 2004", true, "2004-08-13T17:15:00Z", 17*60 + 15},
		{"Fri Aug 13 17:15:00 +0100 2004", true, "2004-08-13T16:15:00Z", 17*60 + 15},
		{"13-Aug-2004 17:15:00 +0000", true, "2004-08-13T17:15:00Z", 17*60 + 15},
		{"(comment (nested)) 13 August 2004 17:15 +0000", true, "2004-08-13T17:15:00Z", 17*60 + 15},
		{"13 Aug 104 17:15 +0000", true, "2004-08-13T17:15:00Z", 17*60 + 15},
		{"Wed, 18 Sep 0102 23:32:17 +0500", true, "2002-09-18T18:32:17Z", 23*60 + 32},
		{"", false, "", 0},
		{"yesterday", false, "", 0},
		{"13 Foo 2004 17:15 +0000", false, "", 0},
		{"13 Aug 2004", false, "", 0},
		{"13 Aug 2004 25:00 +0000", false, "", 0},
		{"32 Aug 2004 12:00 +0000", false, "", 0},
		{"13 Aug 2004 12:60 +0000", false, "", 0},
		{"13 Aug 1492 12:00 +0000", false, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			d, ok := parseDate([]byte(tt.in))
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			if want := utc(tt.unix); d.unix != want {
				t.Errorf("instant %v, want %v", time.Unix(d.unix, 0).UTC(), time.Unix(want, 0).UTC())
			}
			if d.clock != tt.clock {
				t.Errorf("clock %d, want %d", d.clock, tt.clock)
			}
		})
	}
}

// TestParseDateAgreesWithNetMail reads the Date fields of the fixtures and,
// with SPAMD_CORPUS set, of a corpus, and checks that every date with a
// numeric zone that net/mail parses is parsed to the same instant and
// wall clock.
func TestParseDateAgreesWithNetMail(t *testing.T) {
	var raws [][]byte
	files, _ := filepath.Glob("testdata/*.eml")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, b)
	}
	if os.Getenv("SPAMD_CORPUS") != "" {
		for _, m := range loadCorpus(t) {
			raws = append(raws, m.raw)
		}
	}
	compared, ours := 0, 0
	for _, raw := range raws {
		r := headerReader{b: skipFromLine(raw)}
		for {
			name, value, ok := r.next()
			if !ok {
				break
			}
			if !strings.EqualFold(string(name), "date") {
				continue
			}
			d, dok := parseDate(value)
			if dok {
				ours++
			}
			want, err := mail.ParseDate(string(unfold(nil, value)))
			// net/mail reads "0102", a year since 1900 printed as four
			// digits, as the year 102.
			if err != nil || !numericZone(value) || want.Year() < 1000 {
				continue
			}
			compared++
			if !dok {
				t.Errorf("%q: not parsed; net/mail reads %v", value, want)
				continue
			}
			if d.unix != want.Unix() || d.clock != want.Hour()*60+want.Minute() {
				t.Errorf("%q: %v, clock %d; net/mail reads %v", value, time.Unix(d.unix, 0).UTC(), d.clock, want)
			}
		}
	}
	t.Logf("%d dates parsed, %d compared with net/mail", ours, compared)
	if compared == 0 {
		t.Fatal("no date compared")
	}
}

// numericZone reports whether a date value ends in a numeric zone,
// comments aside, which is where net/mail and parseDate are meant to
// agree to the minute.
func numericZone(v []byte) bool {
	if i := bytes.IndexByte(v, '('); i >= 0 {
		v = v[:i]
	}
	f := bytes.Fields(v)
	if len(f) == 0 {
		return false
	}
	z := f[len(f)-1]
	return len(z) == 5 && (z[0] == '+' || z[0] == '-') && isDigits(z[1:])
}

func FuzzParseDate(f *testing.F) {
	for _, s := range []string{
		"Tue, 1 Jul 2003 10:52:37 +0200", "Fri Aug 13 17:15:00 2004", "((((", "1 Jan 99 0:00 PST",
		"31 Dec 9999 23:59:60 -2400", "01-Jan-1900 00:00 +9999",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, ok := parseDate(b)
		if !ok {
			return
		}
		if d.clock < 0 || d.clock >= 24*60 {
			t.Fatalf("clock %d out of a day", d.clock)
		}
		if lo, hi := daysFromCivil(1899, 12, 30)*86400, daysFromCivil(10000, 1, 2)*86400; d.unix < lo || d.unix > hi {
			t.Fatalf("instant %d out of years 1900 to 9999", d.unix)
		}
	})
}

func TestMeasures(t *testing.T) {
	nan := math.NaN()
	html := "From: a@example.com\nTo: b@example.org, C <c@example.net>\nCc: d@example.com\n" +
		"Received: from x by y; Tue, 1 Jul 2003 11:00:00 +0000\nReceived: from z by x; Tue, 1 Jul 2003 10:58:00 +0000\n" +
		"Date: Tue, 1 Jul 2003 12:30:00 +0200\nContent-Type: text/html\n\n" +
		"<html><body><p>HELLO World, visit <a href=\"http://a.example.com/x\">here</a> and www.b.example.com now" +
		" <img src=\"http://c.example.com/i.gif\"></p></body></html>\n"
	tests := []struct {
		name string
		raw  string
		opts func(*Options)
		want map[int]float64
	}{
		{
			name: "html",
			raw:  html,
			want: map[int]float64{
				MeasureSize: float64(len(html)), MeasureWords: 6, MeasureLinks: 3, MeasureImages: 1, MeasureHTML: 1,
				MeasureCapitals: 6.0 / 25, MeasureNonASCII: 0, MeasureRecipients: 3, MeasureHops: 2,
				MeasureHour: 12.5, MeasureSkew: -30,
			},
		},
		{
			name: "links missing without URL tokens",
			raw:  html,
			opts: func(o *Options) { o.URLs = false },
			want: map[int]float64{MeasureLinks: nan, MeasureImages: 1},
		},
		{
			name: "plain, few letters, no date, no recipients",
			raw:  "From: a@example.com\nSubject: hi\n\nÉté ok\n",
			want: map[int]float64{
				MeasureWords: 2, MeasureLinks: 0, MeasureImages: 0, MeasureHTML: 0, MeasureCapitals: nan,
				MeasureNonASCII: nan, MeasureRecipients: nan, MeasureHops: 0, MeasureHour: nan, MeasureSkew: nan,
			},
		},
		{
			name: "non-ASCII letters and capitals",
			raw:  "To: x@example.com\nDate: garbage\n\nÉTÉ été ÉTÉ été ÉTÉ été ÉTÉ été abcd\n",
			want: map[int]float64{
				MeasureCapitals: 12.0 / 28, MeasureNonASCII: 16.0 / 28, MeasureRecipients: 1,
				MeasureHour: nan, MeasureSkew: nan,
			},
		},
		{
			name: "image attachment, no text",
			raw: "Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: image/png\n" +
				"Content-Transfer-Encoding: base64\n\niVBORw0KGgo=\n--b--\n",
			want: map[int]float64{MeasureImages: 1, MeasureHTML: nan, MeasureWords: 0},
		},
		{
			name: "a date without Received",
			raw:  "Date: Tue, 1 Jul 2003 23:45 -0000\n\nx\n",
			want: map[int]float64{MeasureHour: 23.75, MeasureSkew: nan},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			if tt.opts != nil {
				tt.opts(&o)
			}
			res, err := New(o).Tokenize([]byte(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range tt.want {
				got := res.Measures[i]
				if math.IsNaN(want) != math.IsNaN(got) || !math.IsNaN(want) && math.Abs(got-want) > 1e-9 {
					t.Errorf("%s = %v, want %v", measures[i].Name, got, want)
				}
			}
		})
	}
}

func TestMeasureSizeIsWholeMessage(t *testing.T) {
	o := DefaultOptions()
	o.MaxBytes = 100
	raw := "From a@b Sat Jan  3 01:05:34 1996\nSubject: x\n\n" + strings.Repeat("word ", 100)
	res, err := New(o).Tokenize([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if want := float64(len(raw) - len("From a@b Sat Jan  3 01:05:34 1996\n")); res.Measures[MeasureSize] != want {
		t.Errorf("size %v, want %v: the whole message but its mbox line", res.Measures[MeasureSize], want)
	}
}

func TestMeasureGrid(t *testing.T) {
	for i, m := range Measures() {
		if m.Levels < 2 || m.Levels > MaxLevels || !(m.Step > 0) || m.Name == "" || m.Family == "" || m.Doc == "" {
			t.Errorf("measure %d %+v is not well defined", i, m)
		}
		for l := 0; l < m.Levels; l += 7 {
			if got := m.Level(m.Value(l)); got != l {
				t.Errorf("%s: Level(Value(%d)) = %d", m.Name, l, got)
			}
		}
		if m.Level(-1e300) != 0 || m.Level(1e300) != m.Levels-1 {
			t.Errorf("%s: values off the grid are not clamped to it", m.Name)
		}
	}
	tests := []struct {
		m    int
		v    float64
		want string
	}{
		{MeasureLinks, 41, "41"},
		{MeasureHTML, 0.934, "0.93"},
		{MeasureHour, 12.5, "12:30"},
		{MeasureHour, 9.05, "9:03"},
		{MeasureSkew, -30, "-30m"},
		{MeasureSkew, 600, "+10h"},
		{MeasureSkew, 5 * 1440, "+5d"},
	}
	for _, tt := range tests {
		if got := measures[tt.m].Text(tt.v); got != tt.want {
			t.Errorf("%s.Text(%v) = %q, want %q", measures[tt.m].Name, tt.v, got, tt.want)
		}
	}
}

// TestMeasuresDocumented checks that docs/evaluation.md defines every
// measure as the code does: a table row of its name, family and Doc.
func TestMeasuresDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/evaluation.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range Measures() {
		row := "| " + m.Name + " | " + m.Family + " | " + strings.ReplaceAll(m.Doc, "|", `\|`) + " |"
		if !bytes.Contains(doc, []byte(row)) {
			t.Errorf("docs/evaluation.md lacks the row\n%s", row)
		}
	}
}

// TestArrival checks that the arrival is the newest Received field's
// date, whatever the Date field says, and 0 without one that parses.
func TestArrival(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want int64
	}{
		{"newest of two", "Received: from x by y; Tue, 1 Jul 2003 11:00:00 +0000\nReceived: from z by x; Tue, 1 Jul 2003 10:58:00 +0000\nDate: Mon, 1 Jan 2001 00:00:00 +0000\n\nx\n", 1057057200},
		{"no Received", "Date: Tue, 1 Jul 2003 23:45 -0000\n\nx\n", 0},
		{"a Received without a date", "Received: from x by y\n\nx\n", 0},
		{"a date before 1970", "Received: from x by y; Tue, 1 Jul 1969 11:00:00 +0000\n\nx\n", 0},
	}
	tok := New(DefaultOptions())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := tok.Tokenize([]byte(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			if res.Arrival != tt.want {
				t.Errorf("Arrival = %d, want %d", res.Arrival, tt.want)
			}
		})
	}
}
