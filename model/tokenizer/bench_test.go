package tokenizer

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// mixedText builds n bytes of deterministic mixed text: English prose from a word list and
// from random syllables (so that many pieces are new to the cache), Go-like code, Chinese,
// Russian, numbers, URLs, emoji, and runs of spaces and newlines.
func mixedText(n int) string {
	rng := rand.New(rand.NewPCG(2026, 11))
	words := strings.Fields(`the of and to in is was that for it with as his on be at by had are but from or
		have an they which one you were her all she there would their we him been has when who will more no if
		out so said what up its about into than them can only other new some could time these two may then do
		first any my now such like our over man me even most made after also did many before must through back
		years where much your way well down should because each just those people how too little state good very
		make world still own see men work long get here between both life being under never day same another know
		while last might us great old year off come since against go came right used take three`)
	syllables := strings.Fields("ka lo mi ne ru sa ti vo ze bra cre dri flo gri pla stru tho whe qua xen")
	han := []rune("的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长")
	cyr := strings.Fields("и в не на я быть он с что а по это она этот к но они мы как из у который то за свой")
	emoji := []string{"\U0001F600", "\U0001F44D\U0001F3FD", "\U0001F468\u200D\U0001F469\u200D\U0001F467", "\U0001F1EF\U0001F1F5", "\u2764\uFE0F"}
	var b strings.Builder
	b.Grow(n + 256)
	for b.Len() < n {
		switch k := rng.IntN(20); {
		case k < 9: // prose
			for i := range rng.IntN(40) + 5 {
				if i > 0 {
					b.WriteByte(' ')
				}
				if rng.IntN(6) == 0 {
					for range rng.IntN(3) + 2 {
						b.WriteString(syllables[rng.IntN(len(syllables))])
					}
				} else {
					w := words[rng.IntN(len(words))]
					if rng.IntN(12) == 0 {
						w = strings.ToUpper(w[:1]) + w[1:]
					}
					b.WriteString(w)
				}
				if rng.IntN(10) == 0 {
					b.WriteString([]string{",", ".", "'s", "'t", ";", ":", "!", "?"}[rng.IntN(8)])
				}
			}
			b.WriteString(".\n\n")
		case k < 12: // code
			name := words[rng.IntN(len(words))] + strconv.Itoa(rng.IntN(100))
			b.WriteString("func " + name + "(x int) (int, error) {\n\tif x > " + strconv.Itoa(rng.IntN(1000)) +
				" {\n\t\treturn 0, fmt.Errorf(\"" + name + ": %d too big\", x)\n\t}\n\treturn x * 2, nil\n}\n\n")
		case k < 15: // Chinese
			for range rng.IntN(60) + 10 {
				b.WriteRune(han[rng.IntN(len(han))])
			}
			b.WriteString("。\n")
		case k < 16: // Russian
			for range rng.IntN(20) + 3 {
				b.WriteString(cyr[rng.IntN(len(cyr))] + " ")
			}
			b.WriteString("\n")
		case k < 18: // numbers and URLs
			b.WriteString("Order #" + strconv.Itoa(rng.IntN(1e9)) + " costs $" + strconv.Itoa(rng.IntN(1e4)) + "." +
				strconv.Itoa(rng.IntN(100)) + " on 2026-" + strconv.Itoa(rng.IntN(12)+1) + "-" + strconv.Itoa(rng.IntN(28)+1) +
				", see https://example.com/" + words[rng.IntN(len(words))] + "?id=" + strconv.Itoa(rng.IntN(1e6)) + "\n")
		case k < 19: // emoji
			for range rng.IntN(6) + 1 {
				b.WriteString(emoji[rng.IntN(len(emoji))] + " ")
			}
			b.WriteString("\n")
		default: // whitespace runs
			b.WriteString(strings.Repeat(" ", rng.IntN(12)) + strings.Repeat("\n", rng.IntN(3)) + strings.Repeat("\t", rng.IntN(3)))
		}
	}
	return b.String()[:n]
}

var benchText = sync.OnceValue(func() string { return mixedText(10 << 20) })

// BenchmarkEncode10MB encodes 10 MB of mixed text; after the first iteration the piece
// cache is warm, as it is in a long-running process.
func BenchmarkEncode10MB(b *testing.B) {
	tok := loadQwen3(b)
	text := benchText()
	b.SetBytes(int64(len(text)))
	var n int
	defer reportCPU(b, processCPU())
	for b.Loop() {
		n = len(tok.Encode(text, false))
	}
	b.ReportMetric(float64(len(text))/float64(n), "bytes/token")
}

// BenchmarkEncode10MBCold empties the piece cache before every iteration.
func BenchmarkEncode10MBCold(b *testing.B) {
	tok := loadQwen3(b)
	text := benchText()
	b.SetBytes(int64(len(text)))
	defer reportCPU(b, processCPU())
	for b.Loop() {
		b.StopTimer()
		tok.mu.Lock()
		clear(tok.cache)
		tok.mu.Unlock()
		b.StartTimer()
		tok.Encode(text, false)
	}
}

// BenchmarkEncodeLongWord encodes 1 MB of random lowercase letters: one piece, no cache.
func BenchmarkEncodeLongWord(b *testing.B) {
	tok := loadQwen3(b)
	rng := rand.New(rand.NewPCG(3, 4))
	word := make([]byte, 1<<20)
	for i := range word {
		word[i] = 'a' + byte(rng.IntN(26))
	}
	s := string(word)
	b.SetBytes(int64(len(s)))
	defer reportCPU(b, processCPU())
	for b.Loop() {
		tok.Encode(s, false)
	}
}

// BenchmarkDecode10MB decodes the ids of the 10 MB text.
func BenchmarkDecode10MB(b *testing.B) {
	tok := loadQwen3(b)
	text := benchText()
	ids := tok.Encode(text, false)
	b.SetBytes(int64(len(text)))
	defer reportCPU(b, processCPU())
	for b.Loop() {
		if _, err := tok.Decode(ids); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoad measures loading the gzip-compressed tokenizer.json.
func BenchmarkLoad(b *testing.B) {
	defer reportCPU(b, processCPU())
	for b.Loop() {
		if _, err := LoadTokenizerJSON(qwen3TokenizerPath); err != nil {
			b.Fatal(err)
		}
	}
}
