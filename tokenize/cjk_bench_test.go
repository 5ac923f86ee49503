package tokenize

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"mime"
	"strings"
	"testing"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
)

// cjkScripts are the texts the CJK benchmark writes its messages in: a
// charset, its encoder, and common characters of the language, of which
// the bodies are drawn. (GB2312's characters encode the same in GBK.)
var cjkScripts = []struct {
	charset string
	enc     encoding.Encoding
	chars   string
}{
	{"gb2312", simplifiedchinese.GBK, "的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生自会那后能对着事其里所去行过家十用发天如然作方成者多日都三小军二无同么经法当起与好看学进种将还分此心前面又定见只主没公从免费优惠价格产品公司服务"},
	{"big5", traditionalchinese.Big5, "的一是不了人我在有他這為之大來以個中上們到說國和地也子時道出而要於就下得可你年生自會那後能對著事其裡所去行過家十用發天如然作方成者多日都三小軍二無同麼經法當起與好看學進種將還分此心前面又定見只主沒公從免費優惠價格產品公司服務"},
	{"shift_jis", japanese.ShiftJIS, "のにはをたがでてとしれさあるいうかなりもこすよえくだまやらわんアイウエオカキクケコサシスセソタチツテトナニヌネノ日本語会社東京大学時間年月人生新聞電話無料特別価格商品"},
}

// cjkMessages writes n messages per script: a subject and a body of 500
// to 4,000 characters, drawn by Zipf's law, in runs of about 60 between
// punctuation,
// encoded in the script's charset and in base64, as most CJK mail comes.
func cjkMessages(b *testing.B, n int) map[string][][]byte {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	out := map[string][][]byte{}
	for _, s := range cjkScripts {
		chars := []rune(s.chars)
		// Characters, like words, are used with Zipf's law.
		z := rand.NewZipf(rng, 1.2, 3, uint64(len(chars)-1))
		text := func(k int) string {
			var sb strings.Builder
			for i := range k {
				sb.WriteRune(chars[z.Uint64()])
				if rng.IntN(60) == 0 || i == k-1 {
					sb.WriteString("。\n")
				}
			}
			return sb.String()
		}
		for i := range n {
			body, err := s.enc.NewEncoder().String(text(500 + rng.IntN(3500)))
			if err != nil {
				b.Fatal(err)
			}
			subject, err := s.enc.NewEncoder().String(text(12))
			if err != nil {
				b.Fatal(err)
			}
			var m strings.Builder
			fmt.Fprintf(&m, "From: sender%d@example.cn\r\nTo: user@example.org\r\nSubject: %s\r\n", i,
				mime.BEncoding.Encode(s.charset, subject))
			fmt.Fprintf(&m, "Message-ID: <%d.%s@example.cn>\r\nMIME-Version: 1.0\r\n", i, s.charset)
			fmt.Fprintf(&m, "Content-Type: text/plain; charset=%s\r\nContent-Transfer-Encoding: base64\r\n\r\n", s.charset)
			enc := base64.StdEncoding.EncodeToString([]byte(body))
			for len(enc) > 76 {
				m.WriteString(enc[:76] + "\r\n")
				enc = enc[76:]
			}
			m.WriteString(enc + "\r\n")
			out[s.charset] = append(out[s.charset], []byte(m.String()))
		}
	}
	return out
}

// BenchmarkTokenizeCJK tokenizes generated Chinese and Japanese mail in
// GB2312, Big5 and Shift_JIS: decoding to UTF-8 and bigrams of long runs
// of CJK characters, the path word-splitting never takes.
func BenchmarkTokenizeCJK(b *testing.B) {
	msgs := cjkMessages(b, 50)
	for _, s := range cjkScripts {
		b.Run(s.charset, func(b *testing.B) { benchTokenize(b, msgs[s.charset]) })
	}
}
