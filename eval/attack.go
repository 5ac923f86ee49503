package eval

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"mime"
	"net/mail"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/tokenize"
)

// Attack is a good-word attack (Lowd and Meek, 2005): words that a filter
// takes for ham's are added to every spam tested, as a spammer who wants
// through would add them. It measures how far a filter's verdicts can be
// bought with innocent text, the known weakness of naive Bayes.
type Attack struct {
	// Kind chooses the words: "goodwords", the Words most hammy of the
	// ham's common words by the trained model's own scores (an attacker
	// who can query the filter), or "hamwords", Words drawn at random
	// from them (one who only knows what ordinary mail says).
	Kind string
	// Words is how many words each spam gets; 0 is no attack.
	Words int
	// Out, when not "", is a directory the attacked corpus is written to:
	// each attacked message as a file, and an index that lists them with
	// the run's other messages, so that other filters can be measured
	// under the same attack.
	Out string
}

// ParseAttack parses "goodwords:N" or "hamwords:N".
func ParseAttack(s string) (Attack, error) {
	kind, n, ok := strings.Cut(s, ":")
	words, err := strconv.Atoi(n)
	if !ok || err != nil || words < 0 || (kind != "goodwords" && kind != "hamwords") {
		return Attack{}, fmt.Errorf("%w: attack %q: want goodwords:N or hamwords:N", ErrOptions, s)
	}
	return Attack{Kind: kind, Words: words}, nil
}

// candidates is how many of the training ham's most common words an
// attack draws from: enough that the most hammy thousand are among them.
const candidates = 2000

// attackWords chooses the words of a, from the ham among the messages at
// train and, for goodwords, by how f scores each alone.
func attackWords(ctx context.Context, a Attack, f *filter.Filter, c *Corpus, train []int, seed uint64) ([]string, error) {
	if a.Words == 0 {
		return nil, nil
	}
	// Surface words, unstemmed and without header tokens, are what a
	// spammer can write into a message.
	o := tokenize.DefaultOptions()
	o.Stem, o.Headers, o.Received, o.URLs, o.HTML, o.Mailboxes = false, []string{}, false, false, false, false
	tok := tokenize.New(o)
	df := map[string]int{}
	for _, i := range train {
		if c.Messages[i].Spam {
			continue
		}
		raw, err := c.raw(i)
		if err != nil {
			return nil, err
		}
		res, err := tok.Tokenize(raw)
		if err != nil {
			continue
		}
		seen := map[string]bool{}
		for _, t := range res.Tokens[res.Header:] {
			if plainWord(t) && !seen[t] {
				seen[t] = true
				df[t]++
			}
		}
	}
	words := make([]string, 0, len(df))
	for w := range df {
		words = append(words, w)
	}
	slices.SortFunc(words, func(x, y string) int {
		return cmp.Or(cmp.Compare(df[y], df[x]), strings.Compare(x, y))
	})
	words = words[:min(len(words), candidates)]
	switch a.Kind {
	case "hamwords":
		r := rand.New(rand.NewPCG(seed, 0xa77ac))
		r.Shuffle(len(words), func(i, j int) { words[i], words[j] = words[j], words[i] })
	case "goodwords":
		score := make(map[string]float64, len(words))
		for _, w := range words {
			v, err := f.Classify(ctx, "", []byte("From: a@example.com\nTo: b@example.com\nSubject: hello\n\n"+w+"\n"), filter.ClassifyOptions{})
			if err != nil {
				return nil, fmt.Errorf("score %q: %w", w, err)
			}
			score[w] = v.Score
		}
		slices.SortFunc(words, func(x, y string) int {
			return cmp.Or(cmp.Compare(score[x], score[y]), strings.Compare(x, y))
		})
	}
	if len(words) < a.Words {
		return nil, fmt.Errorf("%w: attack of %d words: the training ham has only %d", ErrOptions, a.Words, len(words))
	}
	return words[:a.Words], nil
}

// plainWord reports whether a body token is a word of 3 to 15 ASCII
// letters, as an attacker's would be.
func plainWord(t string) bool {
	if len(t) < 3 || len(t) > 15 {
		return false
	}
	for i := 0; i < len(t); i++ {
		if t[i] < 'a' || t[i] > 'z' {
			return false
		}
	}
	return true
}

// addWords returns raw with words added where a reader sees text: at the
// end of a single-part body, decoded and encoded again as its transfer
// encoding says, or as a text part of their own before the end of a
// multipart message. A message it cannot make sense of gets them at its
// end.
func addWords(raw []byte, words []string) []byte {
	text := wrap(words)
	// An mbox "From " line is no header field; it goes back in front.
	var from []byte
	if bytes.HasPrefix(raw, []byte("From ")) {
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			from, raw = raw[:i+1], raw[i+1:]
		}
	}
	return append(slices.Clip(from), addText(raw, text)...)
}

// addText is addWords on a message without an mbox line.
func addText(raw, text []byte) []byte {
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return append(append(slices.Clip(raw), '\n'), text...)
	}
	head := raw[:len(raw)-bodyLen(m)]
	body := raw[len(head):]
	mt, params, _ := mime.ParseMediaType(m.Header.Get("Content-Type"))
	if b := params["boundary"]; strings.HasPrefix(mt, "multipart/") && b != "" {
		end := bytes.LastIndex(body, []byte("--"+b+"--"))
		if end < 0 {
			return append(append(slices.Clip(raw), '\n'), text...)
		}
		part := "--" + b + "\nContent-Type: text/plain; charset=us-ascii\n\n" + string(text) + "\n"
		out := append(slices.Clip(head), body[:end]...)
		out = append(out, part...)
		return append(out, body[end:]...)
	}
	if strings.EqualFold(strings.TrimSpace(m.Header.Get("Content-Transfer-Encoding")), "base64") {
		dec, err := base64.StdEncoding.DecodeString(string(bytes.Join(bytes.Fields(body), nil)))
		if err == nil {
			dec = append(append(dec, '\n'), text...)
			enc := base64.StdEncoding.EncodeToString(dec)
			var b strings.Builder
			for len(enc) > 76 {
				b.WriteString(enc[:76] + "\n")
				enc = enc[76:]
			}
			b.WriteString(enc + "\n")
			return append(slices.Clip(head), b.String()...)
		}
	}
	// Plain ASCII words in short lines read the same in 7bit, 8bit and
	// quoted-printable.
	return append(append(slices.Clip(raw), '\n'), text...)
}

// bodyLen returns the length of m's body, which mail.ReadMessage leaves
// unread.
func bodyLen(m *mail.Message) int {
	var b bytes.Buffer
	b.ReadFrom(m.Body)
	return b.Len()
}

// wrap joins words in lines of at most about 70 bytes.
func wrap(words []string) []byte {
	var b []byte
	line := 0
	for _, w := range words {
		if line > 0 && line+1+len(w) > 70 {
			b = append(b, '\n')
			line = 0
		}
		if line > 0 {
			b = append(b, ' ')
			line++
		}
		b = append(b, w...)
		line += len(w)
	}
	return append(b, '\n')
}

// attacked returns src with a's words added to every spam among test,
// writing each attacked message into a.Out when it is set.
func attacked(src source, a Attack, words []string, c *Corpus, test []int) source {
	spam := make(map[int]bool)
	for _, i := range test {
		if c.Messages[i].Spam {
			spam[i] = true
		}
	}
	read := src.read
	src.read = func(i int) ([]byte, error) {
		raw, err := read(i)
		if err != nil || !spam[i] {
			return raw, err
		}
		raw = addWords(raw, words)
		if a.Out != "" {
			if err := os.WriteFile(attackedPath(a.Out, i), raw, 0o644); err != nil {
				return nil, fmt.Errorf("write attacked message: %w", err)
			}
		}
		return raw, nil
	}
	return src
}

func attackedPath(dir string, i int) string {
	return filepath.Join(dir, fmt.Sprintf("%06d.eml", i))
}

// writeAttackIndex writes a.Out's index: the messages at train and test
// in order, the attacked spams by their copies in a.Out and the others by
// their own paths, relative to the index as the format wants.
func writeAttackIndex(a Attack, c *Corpus, train, test []int) error {
	var b strings.Builder
	attackedSpam := map[int]bool{}
	for _, i := range test {
		attackedSpam[i] = c.Messages[i].Spam
	}
	for _, i := range append(slices.Clone(train), test...) {
		m := c.Messages[i]
		path := m.Path
		if attackedSpam[i] {
			path = attackedPath(a.Out, i)
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return err
		}
		out, err := filepath.Abs(a.Out)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(out, abs)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %s\n", classOf(m.Spam), rel)
	}
	return os.WriteFile(filepath.Join(a.Out, "index"), []byte(b.String()), 0o644)
}
