// Package tokenize turns one raw RFC 5322 message into the ordered list of
// tokens a naive Bayes spam filter counts.
//
// # Method
//
// The header section is split by a lenient scanner of this package (spam
// often carries header lines that a strict parser rejects), and only the
// fields named in Options.Headers, the Received trace lines and a few
// presence tests become tokens. The body is walked with go-message: its
// textproto multipart reader splits MIME parts, and message.New undoes
// base64 and quoted-printable and converts every text part to UTF-8
// through the charsets of golang.org/x/text. Content-Type and
// Content-Disposition are parsed leniently here and handed to go-message in
// clean form, so a malformed parameter does not hide a part. Nested
// message/rfc822 parts are parsed again, down to a fixed depth.
//
// Broken structure is read the way its sender meant it rather than the
// way a strict reader would show it, because that is what the words are:
// a body that is plainly multipart (a "--boundary" line followed by
// Content- fields) is split into parts even when its header lost the
// Content-Type or names another boundary; a multipart whose parts cannot
// be found is read as text, lines of base64 left out; a text part with no
// charset that is not UTF-8 is read in the charset the message declares
// elsewhere (on the top-level Content-Type, or in its encoded Subject or
// From). HTML is reduced to its visible text with the golang.org/x/net/html
// tokenizer, also when a part labelled text/plain is HTML: script, style and
// iframe contents are dropped, image alt text is kept, and link targets
// become URL tokens.
//
// Body text is split into words on runes that are not letters, marks or
// digits; apostrophes inside words and format characters (zero-width
// spaces, soft hyphens) are dropped without splitting, "1,000.00" stays
// one number, and a currency sign stays on the number it precedes
// ("$100"). Words are NFKC-normalized and lower-cased with
// unicode.ToLower, a simple per-rune mapping rather than full case
// folding: "ß" stays "ß". Runs of Han, Hiragana, Katakana and Hangul
// become overlapping character bigrams. URLs (with a scheme, starting
// "www.", or a bare name ending .com, .net, .org, .biz or .info) and
// e-mail addresses become host tokens instead of words.
//
// The body's language is guessed from the function words of its first few
// hundred words (or, for a script that one language uses, from the
// script), and body words are reduced with the Snowball stemmer of that
// language; a body too short to tell is stemmed in Options.FallbackLang.
// Stems and tokens are cached per Tokenizer.
//
// # Tokens
//
// Body words stand alone ("money", "$100", "特価"). Every other token names
// its field before a colon, so that a consumer can keep fields apart:
//
//	subject:free          words of a configured header, not stemmed
//	from:example.com      domain of an address header, and its registrable parent
//	received:mx.example.com, received:192.0.2.1, received:192.0.2
//	url:www.example.co.uk, url:example.co.uk, urlpath:unsubscribe, email:example.org
//	attach:type:application/pdf, attach:ext:pdf
//	mime:text/html, mime:cte:base64, mime:charset:koi8-r, mime:charset-hint:gb2312,
//	mime:sniffed-html, mime:guessed-multipart
//	html:tag:font, html:attr:bgcolor   (when Options.HTML)
//	long:50               a word longer than Options.MaxTokenLen, by length
//	meta:hops:3, meta:no:message-id, meta:problem:charset
//
// # Limits
//
// Only the first Options.MaxBytes of a message are read, and at most
// Options.MaxTokens tokens are made; Result.Truncated reports either.
// Scripts written without spaces other than the CJK ones (Thai, Lao,
// Khmer, Myanmar) are not segmented and end up as long-word tokens.
// Language detection knows the function words of fifteen European
// languages with a stemmer, plus Ukrainian, Bulgarian, Polish and Czech so
// that those are not mistaken for one of them; text in another Latin or
// Cyrillic language gets Lang "" and the fallback stemmer. A charset the x/text tables do not know, and bytes that
// are not valid UTF-8 in a part without a usable charset, are read as
// Windows-1252. Attachments are never decoded: only their type and
// file-name extension are looked at.
package tokenize
