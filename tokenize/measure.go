package tokenize

import (
	"bytes"
	"math"
	"strconv"
)

// Measure describes one continuous feature of a message, a number rather
// than a word: its size, how many links it has, the share of its text in
// capitals, the hour it was written. Tokenize measures them during the
// same walk of the message that makes its tokens (Result.Measures).
//
// A model does not keep the values themselves but their level: the value
// mapped to the measure's scale (a logarithm for counts and sizes, the
// value itself for shares and hours) and rounded to a fixed grid of
// Levels steps of Step from Lo. Counting whole levels keeps a model's
// statistics integers, which training and untraining add and subtract
// exactly. A value below or above the grid counts as its first or last
// level. The grid is part of a measure's definition: a measure whose
// grid or meaning changes becomes a new measure with a new index, so
// that a store never mixes two.
type Measure struct {
	// Name names the measure in explanations, plots and configuration,
	// e.g. "links".
	Name string
	// Family names the group of measures that tell of one thing, which
	// a model weighs as one (size and words are both about length).
	Family string
	// Doc says exactly what is measured, for the documentation.
	Doc string
	// Scale says how a value maps to the grid: "log2" for log2(1+v),
	// "linear" for v, "signed-log2" for sign(v)·log2(1+|v|).
	Scale string
	// Lo is the scaled value of level 0, Step the width of a level and
	// Levels their number.
	Lo, Step float64
	Levels   int
	// Format is how a value is written: "int", "share" (two decimals),
	// "hour" (h:mm) or "minutes" (signed, in m, h or d).
	Format string
}

// The measures Tokenize takes, by their index in Result.Measures. The
// indices are stable: a store keeps statistics by them.
const (
	MeasureSize = iota
	MeasureWords
	MeasureLinks
	MeasureImages
	MeasureHTML
	MeasureCapitals
	MeasureNonASCII
	MeasureRecipients
	MeasureHops
	MeasureHour
	MeasureSkew
	// NumMeasures is the number of measures.
	NumMeasures
)

// MaxLevels bounds Measure.Levels: the levels of every measure fit in
// 0 to MaxLevels-1.
const MaxLevels = 1024

// minLetters is how many letters a body needs before the shares of its
// letters in capitals and outside ASCII are measured: fewer say nothing.
const minLetters = 20

// measures defines the measures, in index order.
var measures = [NumMeasures]Measure{
	MeasureSize: {
		Name: "size", Family: "size", Scale: "log2", Lo: 0, Step: 1.0 / 32, Levels: MaxLevels, Format: "int",
		Doc: "bytes of the message as received (its whole length, even past max_bytes), on a log2(1+bytes) scale",
	},
	MeasureWords: {
		Name: "words", Family: "size", Scale: "log2", Lo: 0, Step: 1.0 / 32, Levels: MaxLevels, Format: "int",
		Doc: "words of the body text (runs of letters and digits; a run of CJK characters counts one word per two characters), up to max_tokens, on a log2(1+n) scale",
	},
	MeasureLinks: {
		Name: "links", Family: "links", Scale: "log2", Lo: 0, Step: 1.0 / 64, Levels: MaxLevels, Format: "int",
		Doc: "URLs in the body text and link targets of HTML elements (href, src, action, background), on a log2(1+n) scale; missing when URL tokens are off (urls = false)",
	},
	MeasureImages: {
		Name: "images", Family: "links", Scale: "log2", Lo: 0, Step: 1.0 / 64, Levels: MaxLevels, Format: "int",
		Doc: "HTML img elements and image/* parts, on a log2(1+n) scale",
	},
	MeasureHTML: {
		Name: "html", Family: "html", Scale: "linear", Lo: 0, Step: 1.0 / 1000, Levels: 1001, Format: "share",
		Doc: "share of the body's text, in bytes, that came from HTML; missing when the body has no text",
	},
	MeasureCapitals: {
		Name: "capitals", Family: "text", Scale: "linear", Lo: 0, Step: 1.0 / 1000, Levels: 1001, Format: "share",
		Doc: "share of the letters of body words in upper case; missing below 20 letters",
	},
	MeasureNonASCII: {
		Name: "nonascii", Family: "text", Scale: "linear", Lo: 0, Step: 1.0 / 1000, Levels: 1001, Format: "share",
		Doc: "share of the letters of body words outside ASCII; missing below 20 letters",
	},
	MeasureRecipients: {
		Name: "recipients", Family: "route", Scale: "log2", Lo: 0, Step: 1.0 / 64, Levels: MaxLevels, Format: "int",
		Doc: "addresses in the To and Cc fields, on a log2(1+n) scale; missing when the message has neither",
	},
	MeasureHops: {
		Name: "hops", Family: "route", Scale: "log2", Lo: 0, Step: 1.0 / 64, Levels: MaxLevels, Format: "int",
		Doc: "Received fields, on a log2(1+n) scale",
	},
	MeasureHour: {
		Name: "hour", Family: "time", Scale: "linear", Lo: 0, Step: 1.0 / 40, Levels: 960, Format: "hour",
		Doc: "hour of the day of the Date field in the sender's own zone, in hours (10:30 is 10.5); missing without a Date that parses",
	},
	MeasureSkew: {
		Name: "skew", Family: "time", Scale: "signed-log2", Lo: -20, Step: 1.0 / 25, Levels: 1001, Format: "minutes",
		Doc: "minutes from the time of the newest Received field (arrival) to the Date field, negative for a Date before arrival, on a sign(m)·log2(1+|m|) scale; missing unless both parse",
	},
}

// Measures returns the definitions of the measures, by index.
func Measures() []Measure {
	out := make([]Measure, NumMeasures)
	copy(out, measures[:])
	return out
}

// scaled maps a value to the measure's scale.
func (m Measure) scaled(v float64) float64 {
	switch m.Scale {
	case "log2":
		return math.Log2(1 + math.Max(v, 0))
	case "signed-log2":
		return math.Copysign(math.Log2(1+math.Abs(v)), v)
	}
	return v
}

// Level returns the level of value v: its place on the measure's grid.
// v must not be NaN.
func (m Measure) Level(v float64) int {
	x := math.Round((m.scaled(v) - m.Lo) / m.Step)
	return int(math.Max(0, math.Min(float64(m.Levels-1), x)))
}

// Value returns the value at the middle of level l, the inverse of Level
// up to rounding.
func (m Measure) Value(l int) float64 {
	x := m.Lo + float64(l)*m.Step
	switch m.Scale {
	case "log2":
		return math.Exp2(x) - 1
	case "signed-log2":
		return math.Copysign(math.Exp2(math.Abs(x))-1, x)
	}
	return x
}

// Text writes value v as the measure's Format says, for explanations.
func (m Measure) Text(v float64) string {
	switch m.Format {
	case "share":
		return strconv.FormatFloat(v, 'f', 2, 64)
	case "hour":
		h := int(v)
		return strconv.Itoa(h) + ":" + pad2(int(math.Round((v-float64(h))*60)))
	case "minutes":
		a := math.Abs(v)
		sign := "+"
		if v < 0 {
			sign = "-"
		}
		switch {
		case a < 120:
			return sign + strconv.Itoa(int(math.Round(a))) + "m"
		case a < 48*60:
			return sign + strconv.Itoa(int(math.Round(a/60))) + "h"
		}
		return sign + strconv.Itoa(int(math.Round(a/1440))) + "d"
	}
	return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
}

func pad2(n int) string {
	n = min(max(n, 0), 59)
	if n < 10 {
		return "0" + strconv.Itoa(n)
	}
	return strconv.Itoa(n)
}

// tally is what the walk of a message counts for its measures.
type tally struct {
	bytes      int // the raw message's length
	words      int // body words
	links      int
	images     int
	htmlText   int // bytes of st.text that came from HTML
	letters    int // letters of body words
	upper      int // of which upper case
	nonASCII   int // of which outside ASCII
	recipients int // addresses in To and Cc
	hasRecips  bool
	hops       int
	date       []byte // the Date field's value, first one
	received   []byte // the newest Received field's value
}

// measure returns the measures of the tally, given the length of the
// body text collected and whether URLs were looked for.
func (t *tally) measure(text int, urls bool) [NumMeasures]float64 {
	var v [NumMeasures]float64
	for i := range v {
		v[i] = math.NaN()
	}
	v[MeasureSize] = float64(t.bytes)
	v[MeasureWords] = float64(t.words)
	if urls {
		v[MeasureLinks] = float64(t.links)
	}
	v[MeasureImages] = float64(t.images)
	if text > 0 {
		v[MeasureHTML] = min(1, float64(t.htmlText)/float64(text))
	}
	if t.letters >= minLetters {
		v[MeasureCapitals] = float64(t.upper) / float64(t.letters)
		v[MeasureNonASCII] = float64(t.nonASCII) / float64(t.letters)
	}
	if t.hasRecips {
		v[MeasureRecipients] = float64(t.recipients)
	}
	v[MeasureHops] = float64(t.hops)
	if t.date == nil {
		return v
	}
	d, ok := parseDate(t.date)
	if !ok {
		return v
	}
	v[MeasureHour] = float64(d.clock) / 60
	if arrival, ok := t.arrival(); ok {
		v[MeasureSkew] = float64(d.unix-arrival.unix) / 60
	}
	return v
}

// arrival returns the date of the newest Received field, which follows
// its last ';': when the message reached the last MTA that stamped it.
func (t *tally) arrival() (date, bool) {
	r := t.received
	if i := bytes.LastIndexByte(r, ';'); i >= 0 {
		return parseDate(r[i+1:])
	}
	return date{}, false
}

// arrivalUnix returns the arrival as Result.Arrival gives it.
func (t *tally) arrivalUnix() int64 {
	if a, ok := t.arrival(); ok && a.unix > 0 {
		return a.unix
	}
	return 0
}
