package tokenize

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"strings"
	"unicode"
	"unicode/utf8"

	bleve "github.com/blevesearch/snowballstem"
	"github.com/blevesearch/snowballstem/arabic"
	"github.com/blevesearch/snowballstem/danish"
	"github.com/blevesearch/snowballstem/dutch"
	bleveEnglish "github.com/blevesearch/snowballstem/english"
	"github.com/blevesearch/snowballstem/finnish"
	"github.com/blevesearch/snowballstem/german"
	"github.com/blevesearch/snowballstem/italian"
	"github.com/blevesearch/snowballstem/portuguese"
	"github.com/blevesearch/snowballstem/romanian"
	"github.com/blevesearch/snowballstem/turkish"
	"github.com/kljensen/snowball/english"
	"github.com/kljensen/snowball/french"
	"github.com/kljensen/snowball/hungarian"
	"github.com/kljensen/snowball/norwegian"
	"github.com/kljensen/snowball/russian"
	"github.com/kljensen/snowball/spanish"
	"github.com/kljensen/snowball/swedish"
)

// Language detection reads function words rather than character trigrams:
// a trigram profile comparison (whatlanggo) costs about 0.3 ms per
// message whatever the text length, more than all the rest of the
// tokenizer, while counting function words in the first few hundred words
// costs a map lookup per word and is as reliable on e-mail prose. Its
// only job is to pick a stemmer, so it knows the languages that have one,
// plus a few neighbours that must not be mistaken for them.

// language is one language the detector can name.
type language struct {
	code  string              // ISO 639-1
	stem  func(string) string // nil: no stemmer
	words string              // frequent function words, space-separated, lower case
}

// languages is indexed by the language's bit in stopwords; at most 32.
var languages = []language{
	{"en", stemEnglish, "the and of to is in that it you for this with are was have be on not your we our will can from at by an or if as all but they has been would there their what which about more my me do i a just when how out up get so"},
	{"de", snowball(german.Stem), "der die das und ist nicht ein eine zu den mit von sie ich es auf für dem sich des auch wir wie bei oder aus wenn noch nur aber haben sind werden ihr ihre uns diese einen wird kann über können im"},
	{"fr", kljensen(french.Stem), "le la les et des est une un du que qui dans pour pas sur au vous nous avec ce il elle sont ne plus par mais ou cette votre vos leur été être aux ces je tout fait"},
	{"es", kljensen(spanish.Stem), "el la los las de que y en del un una es por con para no se su sus al lo como más pero este esta usted nuestro ha son muy sin sobre también hay todo puede ser le"},
	{"it", snowball(italian.Stem), "il di che e la per un una non sono del della con si le gli da dei è anche come più questo questa alla nel ma ha lo ci suo sua essere molto al"},
	{"pt", snowball(portuguese.Stem), "de que não é os as um uma do da dos das em no na para com por você mais mas seu sua ao são está também pelo pela isso ele ela o e"},
	{"nl", snowball(dutch.Stem), "de het een en van is dat die niet te op voor met zijn er aan ook als bij maar om dan wat wordt uw je ik we wij naar nog kunnen deze heeft hebben worden zou door over"},
	{"sv", kljensen(swedish.Stem), "och att det som en är av för på med till den har inte de om ett jag vi du men kan sig så var från eller vid nu mycket alla här ska också efter när hur"},
	{"no", kljensen(norwegian.Stem), "og i det er som en på til av for med at ikke har den de jeg vi du et men kan om så var fra eller også skal vil meg seg hva dette når hvor etter bare deg være blir"},
	{"da", snowball(danish.Stem), "og i det at er en til på som de med den for af ikke har et jeg vi du men kan om så var fra eller også skal vil mig sig hvad dette når hvor efter kun dig være bliver havde meget"},
	{"fi", snowball(finnish.Stem), "ja on ei se että oli hän olla mutta tai kun myös joka jos niin mitä ovat tämä sen vain kuin voi nyt minä sinä me te he siitä tässä olen olet"},
	{"hu", kljensen(hungarian.Stem), "a az és hogy nem is egy van meg de ez azt mint csak már még el ki be fel volt lesz vagy kell nagyon minden ha mert amely ami itt ott én ön önt ezt"},
	{"ro", snowball(romanian.Stem), "și şi în de la cu pe nu o un care este sunt pentru mai din se să ca dar sau ce ai al ale lui fi fost acest această vă noi voi dumneavoastră"},
	{"tr", snowball(turkish.Stem), "ve bir bu da de için ile çok ne daha gibi olarak ama sonra kadar var yok olan ben sen biz siz o mi mı değil her en şey ki"},
	{"ru", kljensen(russian.Stem), "и в не на что я с он как а то все она так его но да ты к у же вы за бы по только ее мне было вот от меня еще нет о из ему теперь когда для это вас мы вам уже если"},
	{"uk", nil, "і в на що не з до це як та у й для від ви ми але або бути його її вже тому також якщо цей ця які був було"},
	{"bg", nil, "и в на да се за не с от че е са по това как но ще ли до при във със си той тя те ние вие бъде този тази които който"},
	{"pl", nil, "i w na z się nie do to jest że o a jak ale po co od za przez dla tak jego są czy tylko już lub oraz może także który która które przy jako ich tym być"},
	{"cs", nil, "a se na je v to že s z do o k ve jsem jako pro ale by tak jak jsou už od po za jeho které který která byl bylo být když nebo také jen při této tento"},
	{"ar", snowball(arabic.Stem), ""},
}

// stopwords maps a function word to the set of languages (bits indexing
// languages) that use it.
var stopwords = func() map[string]uint32 {
	m := make(map[string]uint32, 800)
	for i, l := range languages {
		for _, w := range strings.Fields(l.words) {
			m[w] |= 1 << i
		}
	}
	return m
}()

// stopKeys and stopLangs hold the function words of at most 8 bytes, all
// but a few, as a table: a word's key is its bytes, little-endian,
// and its languages are stopLangs[i] where stopKeys[i] is its key, at
// stopSlot or the first slot after where the key is or that is empty.
// The lookup of a word is a multiplication and a comparison or two where
// a map's took a hash and a string comparison.
var stopKeys, stopLangs = func() (keys [1024]uint64, langs [1024]uint32) {
	for w, m := range stopwords {
		if len(w) > 8 {
			continue
		}
		k := stopKey([]byte(w))
		i := stopSlot(k)
		for keys[i] != 0 {
			i = (i + 1) % len(keys)
		}
		keys[i], langs[i] = k, m
	}
	return keys, langs
}()

// stopKey packs w, of 1 to 8 bytes, none of them 0, into a key for
// stopKeys.
func stopKey(w []byte) uint64 {
	var k uint64
	for i, c := range w {
		k |= uint64(c) << (8 * i)
	}
	return k
}

// stopSlot is the first slot of stopKeys where k may be: the top 10 bits
// of a multiplicative hash, for its 1,024 slots.
func stopSlot(k uint64) int { return int(k * 0x9e3779b97f4a7c15 >> 54) }

// stopLanguages returns the set of languages (bits indexing languages)
// that use w, a word of lower-case letters, as a function word.
func stopLanguages(w []byte) uint32 {
	if len(w) > 8 {
		return stopwords[string(w)]
	}
	return stopShort(stopKey(w))
}

// asciiKey is the stopKey of text[i:j], 1 to 8 ASCII letters, lower-cased.
// It reads eight bytes at once where text's capacity has them: text is a
// chunk of a longer text, mostly a word.
func asciiKey(text []byte, i, j int) uint64 {
	var k uint64
	if cap(text)-i >= 8 {
		k = binary.LittleEndian.Uint64(text[i : i+8])
	} else {
		k = stopKey(text[i:j])
	}
	return (k | 0x2020202020202020) & (^uint64(0) >> (64 - 8*(j-i)))
}

// stopShort returns the languages of the function word of at most 8
// bytes whose key is k, as stopLanguages.
func stopShort(k uint64) uint32 {
	for i := stopSlot(k); ; i = (i + 1) % len(stopKeys) {
		switch stopKeys[i] {
		case k:
			return stopLangs[i]
		case 0:
			return 0
		}
	}
}

// langIndex returns the index in languages of code, or -1.
func langIndex(code string) int {
	for i, l := range languages {
		if l.code == code {
			return i
		}
	}
	return -1
}

// stemEnglish stems w as kljensen/snowball's english.Stem(w, false) does,
// whose stems the models hold. A word of lower-case ASCII letters, nearly
// every word the tokenizer stems as English, goes to the Snowball
// project's English stemmer as its compiler writes it in Go
// (github.com/blevesearch/snowballstem), which takes under half the time:
// kljensen's converts each word to runes and back. The two agree on every
// such word of both evaluation corpora and on millions of random ones
// (FuzzStemEnglish); they differ where kljensen rewrites apostrophes and
// bytes that are not UTF-8, so any other word goes to kljensen's. Its
// rules for short words and stop words come first, as in its Stem.
func stemEnglish(w string) string {
	for i := range len(w) {
		if w[i] < 'a' || w[i] > 'z' {
			return english.Stem(w, false)
		}
	}
	if len(w) <= 2 || english.IsStopWord(w) {
		return w
	}
	return snowballEnglish(w)
}

var snowballEnglish = snowball(bleveEnglish.Stem)

func kljensen(f func(string, bool) string) func(string) string {
	return func(w string) string { return f(w, false) }
}

func snowball(f func(*bleve.Env) bool) func(string) string {
	return func(w string) string {
		env := bleve.NewEnv(w)
		f(env)
		return env.Current()
	}
}

// Limits of the text sample language detection reads.
const (
	langSampleBytes = 4096
	langSampleWords = 400
)

// script classes counted by detectLang.
const (
	scriptLatin = iota
	scriptCyrillic
	scriptGreek
	scriptArabic
	scriptHebrew
	scriptHan
	scriptKana
	scriptHangul
	scriptThai
	scriptOther
	numScripts
)

// detectLang guesses the language of the texts, read in order, up to
// langSampleBytes in all. It returns an index in languages for a language
// with a stemmer or a known neighbour, or -1 with a code for a language
// recognized by script alone ("ja", "el"...), or -1 and "" when unsure.
// buf is scratch space; its grown form is returned.
func detectLang(buf []byte, texts ...[]byte) (idx int, code string, scratch []byte) {
	var d langCounts
	budget := langSampleBytes
	for _, text := range texts {
		if len(text) > budget {
			text = text[:budget]
		}
		budget -= len(text)
		if buf = d.count(buf, text); d.settled {
			break
		}
	}
	idx, code = d.decide()
	return idx, code, buf
}

// langCounts holds what detectLang has counted so far.
type langCounts struct {
	scripts [numScripts]int
	hits    [32]int // function words met, by index in languages
	words   int
	settled bool // one language leads by so much that reading on is useless
}

// count reads the words of text, skipping URLs and e-mail addresses,
// whose words ("com", "www") are no language's.
func (d *langCounts) count(buf, text []byte) []byte {
	for len(text) > 0 && d.words < langSampleWords && !d.settled {
		i := 0
		for i < len(text) && isSpace(text[i]) {
			i++
		}
		j, seen := chunkEnd(text, i, &langByte)
		chunk := text[i:j]
		text = text[j:]
		if seen&langAt != 0 || seen&langColon != 0 && bytes.Contains(chunk, []byte("://")) || hasPrefixFold(chunk, "www.") {
			continue
		}
		buf = d.countWords(buf, chunk)
	}
	return buf
}

// langByte marks the bytes count looks for: white space (byteSpace),
// '@' and ':'.
var langByte = [256]uint8{
	' ': byteSpace, '\n': byteSpace, '\r': byteSpace, '\t': byteSpace, '\f': byteSpace, '\v': byteSpace,
	'@': langAt, ':': langColon,
}

const (
	langAt    = 2
	langColon = 4
)

// countWords reads the words of a chunk of text without white space.
func (d *langCounts) countWords(buf, text []byte) []byte {
	for i := 0; i < len(text) && d.words < langSampleWords; {
		c := text[i]
		if c < utf8.RuneSelf && !isASCIILetter(c) {
			i++
			continue
		}
		// Most words are ASCII letters only, and short enough for their
		// key to be read from the text without a copy.
		j := i
		for j < len(text) && isASCIILetter(text[j]) {
			j++
		}
		var langs uint32
		if j > i && (j == len(text) || text[j] < utf8.RuneSelf) {
			d.scripts[scriptLatin] += j - i
			switch {
			case j-i <= 8:
				langs = stopShort(asciiKey(text, i, j))
			case j-i <= 24:
				buf = lowerASCII(buf[:0], text[i:j])
				langs = stopwords[string(buf)]
			}
			i = j
		} else {
			if buf, i = d.readWord(buf[:0], text, i); len(buf) == 0 {
				i++ // a rune that is not a letter
				continue
			}
			if len(buf) <= 24 {
				langs = stopLanguages(buf)
			}
		}
		d.words++
		for ; langs != 0; langs &= langs - 1 {
			d.hits[bits.TrailingZeros32(langs)]++
		}
		if d.words%16 == 0 && d.words >= 48 {
			best, second := d.leaders()
			if b, s := d.hits[best], d.hits[second]; b >= 12 && b >= 3*s {
				d.settled = true
				return buf
			}
		}
	}
	return buf
}

// readWord appends to buf the lower case of the word of letters, of any
// script, that starts at text[i], counting its letters by script, and
// returns where the word ends.
func (d *langCounts) readWord(buf, text []byte, i int) ([]byte, int) {
	latin := 0
	for i < len(text) {
		c := text[i]
		if c < utf8.RuneSelf {
			if !isASCIILetter(c) {
				break
			}
			buf = append(buf, c|0x20)
			latin++
			i++
			continue
		}
		r, n := decodeRune(text[i:])
		if !unicode.IsLetter(r) && !unicode.IsMark(r) {
			break
		}
		d.scripts[scriptOf(r)]++
		buf = utf8.AppendRune(buf, unicode.ToLower(r))
		i += n
	}
	d.scripts[scriptLatin] += latin
	return buf, i
}

func isASCIILetter(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

// leaders returns the indexes of the two languages with the most hits.
func (d *langCounts) leaders() (best, second int) {
	best, second = 0, 1
	if d.hits[1] > d.hits[0] {
		best, second = 1, 0
	}
	for i := 2; i < len(languages); i++ {
		switch {
		case d.hits[i] > d.hits[best]:
			best, second = i, best
		case d.hits[i] > d.hits[second]:
			second = i
		}
	}
	return best, second
}

// decide turns the counts into a language, as detectLang returns it.
func (d *langCounts) decide() (int, string) {
	letters, top := 0, 0
	for s, c := range d.scripts {
		letters += c
		if c > d.scripts[top] {
			top = s
		}
	}
	if letters < 20 || d.scripts[top]*2 < letters {
		return -1, ""
	}
	switch top {
	case scriptHan, scriptKana, scriptHangul:
		cjk := d.scripts[scriptHan] + d.scripts[scriptKana] + d.scripts[scriptHangul]
		switch {
		case d.scripts[scriptHangul]*2 > cjk:
			return -1, "ko"
		case d.scripts[scriptKana]*10 >= cjk:
			return -1, "ja"
		}
		return -1, "zh"
	case scriptGreek:
		return -1, "el"
	case scriptArabic:
		return langIndex("ar"), "ar"
	case scriptHebrew:
		return -1, "he"
	case scriptThai:
		return -1, "th"
	case scriptOther:
		return -1, ""
	}
	best, second := d.leaders()
	// Trust a guess only when function words are common enough to be prose
	// and one language clearly leads its closest neighbour.
	b, s := d.hits[best], d.hits[second]
	if b < 4 || b*8 < d.words || b*4 < s*5 {
		return -1, ""
	}
	return best, languages[best].code
}

// scriptOf classifies a letter by script.
func scriptOf(r rune) int {
	switch {
	case r < 0x250:
		return scriptLatin
	case r >= 0x400 && r < 0x530:
		return scriptCyrillic
	case r >= 0x370 && r < 0x400:
		return scriptGreek
	case r >= 0x590 && r < 0x600:
		return scriptHebrew
	case r >= 0x600 && r < 0x780:
		return scriptArabic
	case r >= 0xE00 && r < 0xE80:
		return scriptThai
	case r >= 0x1100 && r < 0x1200, r >= 0xAC00 && r < 0xD7B0, r >= 0x3130 && r < 0x3190:
		return scriptHangul
	case r >= 0x3040 && r < 0x3100, r >= 0xFF66 && r < 0xFFA0:
		return scriptKana
	case unicode.Is(unicode.Han, r):
		return scriptHan
	case unicode.Is(unicode.Latin, r):
		return scriptLatin
	case unicode.Is(unicode.Cyrillic, r):
		return scriptCyrillic
	}
	return scriptOther
}
