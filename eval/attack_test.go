package eval

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/tokenize"
)

func TestParseAttack(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Attack
		ok   bool
	}{
		{"goodwords:50", Attack{Kind: "goodwords", Words: 50}, true},
		{"hamwords:0", Attack{Kind: "hamwords"}, true},
		{"goodwords", Attack{}, false},
		{"goodwords:-1", Attack{}, false},
		{"badwords:5", Attack{}, false},
	} {
		got, err := ParseAttack(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseAttack(%q) = %+v, %v", tc.in, got, err)
		}
	}
}

// TestAddWords checks that the words reach the tokens a filter reads, in
// a plain, a base64 and a multipart message, behind an mbox line too.
func TestAddWords(t *testing.T) {
	words := []string{"zebra", "quokka", "narwhal"}
	b64 := base64.StdEncoding.EncodeToString([]byte("buy cheap pills now\n"))
	for _, tc := range []struct {
		name, raw string
	}{
		{"plain", "From: a@example.com\nSubject: hi\n\nbuy cheap pills now\n"},
		{"mbox line", "From a@example.com Mon Jan  1 00:00:00 2007\nFrom: a@example.com\nSubject: hi\n\nbuy cheap pills now\n"},
		{"base64", "From: a@example.com\nContent-Type: text/plain\nContent-Transfer-Encoding: base64\n\n" + b64 + "\n"},
		{"multipart", "From: a@example.com\nContent-Type: multipart/alternative; boundary=\"XX\"\n\n--XX\nContent-Type: text/html\n\n<p>buy cheap pills now</p>\n--XX--\nepilogue\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := addWords([]byte(tc.raw), words)
			res, err := tokenize.New(tokenize.DefaultOptions()).Tokenize(out)
			if err != nil {
				t.Fatal(err)
			}
			body := strings.Join(res.Tokens[res.Header:], " ")
			for _, w := range append([]string{"cheap"}, words...) {
				if !strings.Contains(body, w) {
					t.Errorf("body tokens lack %q: %s", w, body)
				}
			}
			if strings.HasPrefix(tc.raw, "From ") && !bytes.HasPrefix(out, []byte("From a@example.com Mon")) {
				t.Errorf("mbox line lost: %q", out)
			}
		})
	}
}

// TestAttackRun checks that an attack makes a split run miss more spam,
// that the words it reports are the ham's, and that it writes the corpus
// it tested.
func TestAttackRun(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := synthetic(300)
	// Attacked copies need message files to stand beside.
	for i := range c.Messages {
		p := filepath.Join(dir, "m", c.Messages[i].Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, c.Messages[i].Raw, 0o644); err != nil {
			t.Fatal(err)
		}
		c.Messages[i].Path = p
	}
	cfg := filter.DefaultConfig()
	cfg.CostFP, cfg.UnsureLow, cfg.UnsureHigh = 1, 0, 0
	o := DefaultOptions()
	clean, err := Run(ctx, c, cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	o.Attack = Attack{Kind: "goodwords", Words: 8, Out: filepath.Join(dir, "attacked")}
	r, err := Run(ctx, c, cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	if r.FN <= clean.FN {
		t.Errorf("FN %d under attack, %d clean: the attack did nothing", r.FN, clean.FN)
	}
	if len(r.AttackWords) != 8 || r.Attack != "goodwords:8" {
		t.Errorf("attack %q with words %q", r.Attack, r.AttackWords)
	}
	hamWords := "meeting agenda review project parser release lunch build test notes the a to of and you your please today week"
	for _, w := range r.AttackWords[:3] {
		if !strings.Contains(hamWords, w) {
			t.Errorf("attack word %q is not a ham word", w)
		}
	}
	index, err := os.ReadFile(filepath.Join(o.Attack.Out, "index"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(index), "\n"); n != 300 {
		t.Errorf("index of %d lines, want 300", n)
	}
	copies, _ := filepath.Glob(filepath.Join(o.Attack.Out, "*.eml"))
	if len(copies) != clean.Spam {
		t.Errorf("%d attacked copies, want one per tested spam (%d)", len(copies), clean.Spam)
	}
	if _, err := Run(ctx, c, cfg, Options{Mode: "online", Split: 0.8, Attack: Attack{Kind: "goodwords", Words: 1}}); err == nil {
		t.Error("an online attack ran")
	}
}
