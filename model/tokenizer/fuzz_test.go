package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzTokenizer: any bytes encode without panic to ids inside the vocabulary; the ids'
// bytes give the input back whenever NFC leaves it unchanged (valid UTF-8 or not); for
// valid UTF-8 without added tokens, Decode gives NFC of the input; the splitter's pieces
// always rejoin to its input, and the heap and bucket BPEs agree on every piece.
func FuzzTokenizer(f *testing.F) {
	for _, s := range []string{"Hello, world!", "I'm here", "  \n\t x", "<|im_start|>user\nhi<|im_end|>",
		"<think>\n</think>", "cafe\u0301", "\u1100\u1161\u11a8", "\U0001F468\u200D\U0001F469", "\xff\xfe<|",
		"12345", "a'S'LL", "\u0958\u0301\u0327"} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, special bool) {
		tok := loadQwen3(t)
		s := string(data)
		var joined strings.Builder
		splitQwen2(s, func(p string) {
			if p == "" {
				t.Fatalf("empty piece in %+q", s)
			}
			joined.WriteString(p)
			if len(p) <= 1024 && firstDiff(tok.bpe(p, nil), tok.bpeLong(p, nil)) >= 0 {
				t.Fatalf("heap and bucket BPE differ on piece %+q", p)
			}
		})
		if joined.String() != s {
			t.Fatalf("pieces of %+q rejoin to %+q", s, joined.String())
		}
		ids := tok.Encode(s, special)
		for _, id := range ids {
			if id < 0 || int(id) >= tok.VocabSize() {
				t.Fatalf("Encode(%+q) gave id %d outside the vocabulary", s, id)
			}
		}
		b, err := tok.DecodeBytes(ids)
		if err != nil {
			t.Fatal(err)
		}
		if nfc(s) == s && string(b) != s {
			t.Fatalf("DecodeBytes(Encode(%+q)) = %+q", s, b)
		}
		text, err := tok.Decode(ids)
		if err != nil || !utf8.ValidString(text) {
			t.Fatalf("Decode(Encode(%+q)) = %+q, %v", s, text, err)
		}
		if utf8.ValidString(s) && !strings.Contains(s, "<") && text != nfc(s) {
			t.Fatalf("Decode(Encode(%+q)) = %+q, want NFC %+q", s, text, nfc(s))
		}
	})
}
