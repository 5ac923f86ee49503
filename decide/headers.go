package decide

import (
	"fmt"
	"math"
	"strings"
)

// The headers the milter adds, named as SpamAssassin names them so that
// Sieve, procmail and maildrop rules written for it keep working.
const (
	hdrFlag   = "X-Spam-Flag"
	hdrStatus = "X-Spam-Status"
	hdrScore  = "X-Spam-Score"
	hdrLevel  = "X-Spam-Level"
)

// maxStars caps X-Spam-Level, as SpamAssassin does.
const maxStars = 50

// Spoofable reports whether an incoming header field is one the milter
// owns (X-Spam-* and X-Spamd-*), which it removes before adding its own so
// that a sender cannot forge a verdict.
func Spoofable(name string) bool {
	return len(name) >= len("X-Spam") && strings.EqualFold(name[:len("X-Spam")], "X-Spam")
}

// spamHeaders returns the SpamAssassin-compatible headers for a verdict:
// X-Spam-Flag YES or NO, X-Spam-Status "Yes, score=S required=R",
// X-Spam-Score and X-Spam-Level, one star per whole point of score.
func spamHeaders(spam bool, score, required float64) [][2]string {
	flag, yes := "NO", "No"
	if spam {
		flag, yes = "YES", "Yes"
	}
	stars := 0
	if score >= 1 {
		stars = int(math.Min(score, maxStars))
	}
	return [][2]string{
		{hdrFlag, flag},
		{hdrStatus, fmt.Sprintf("%s, score=%.1f required=%.1f", yes, score, required)},
		{hdrScore, fmt.Sprintf("%.1f", score)},
		{hdrLevel, strings.Repeat("*", stars)},
	}
}
