package tokenize_test

import (
	"fmt"
	"strings"

	"github.com/spamd/spamd/tokenize"
)

func ExampleTokenizer_Tokenize() {
	raw := "From: \"Deals\" <offers@mail.example.com>\r\n" +
		"Subject: Cheap watches\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n" +
		"\r\n" +
		"Buy watches now for only $99 at http://www.example.co.uk/buy\r\n"
	tok := tokenize.New(tokenize.DefaultOptions())
	res, err := tok.Tokenize([]byte(raw))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.Join(res.Tokens, "\n"))
	// Output:
	// from:deals
	// from:mail.example.com
	// from:example.com
	// from:addr:offers@mail.example.com
	// subject:cheap
	// subject:watches
	// content-type:text/plain
	// content-type:charset:utf-8
	// meta:hops:0
	// meta:no:message-id
	// meta:no:date
	// meta:no:to
	// meta:no:mailer
	// mime:text/plain
	// mime:charset:utf-8
	// buy
	// watch
	// now
	// for
	// only
	// $99
	// at
	// url:www.example.co.uk
	// url:example.co.uk
	// urlpath:buy
}

func ExampleDigest() {
	lf := "Message-ID: <1@example.com>\nSubject: hi\n\nbody\n"
	crlf := "From MAILER-DAEMON Mon Jan  1 00:00:00 2024\r\n" +
		"Received: from mx.example.org\r\n" +
		"Message-ID: <1@example.com>\r\nSubject: hi\r\n\r\nbody\r\n\r\n"
	fmt.Println(tokenize.Digest([]byte(lf)) == tokenize.Digest([]byte(crlf)))
	// Output: true
}
