package tokenizer

import (
	"strings"
	"testing"
)

// The first row is the example of Unicode §3.9 ("U+FFFD substitution of maximal
// subparts"): the ill-formed parts F1 80 80 | E1 80 | C2 | 80 | 80 | BF each become one U+FFFD.
func TestAppendLossy(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a\xF1\x80\x80\xE1\x80\xC2b\x80c\x80\xBFd", "a\uFFFD\uFFFD\uFFFDb\uFFFDc\uFFFD\uFFFDd"},
		{"\xE2\x82", "\uFFFD"},                 // a truncated 3-byte sequence is one subpart
		{"\xF0\x80", "\uFFFD\uFFFD"},           // F0 80 is not a prefix of any character
		{"\xED\xA0\x80", "\uFFFD\uFFFD\uFFFD"}, // surrogates are ill-formed
		{"\xC0\xAF", "\uFFFD\uFFFD"},           // overlong
		{"ok \u20ac\U0001F600", "ok \u20ac\U0001F600"},
	} {
		if got := string(appendLossy(nil, []byte(tc.in))); got != tc.want {
			t.Errorf("appendLossy(%+q) = %+q, want %+q", tc.in, got, tc.want)
		}
	}
}

// TestDecoderSplitCharacters streams single-byte tokens, so every multi-byte character
// arrives split.
func TestDecoderSplitCharacters(t *testing.T) {
	tok := loadQwen3(t)
	for _, tc := range []struct {
		in   string
		want []string // output after each byte, then Flush
	}{
		{"\U0001F600!", []string{"", "", "", "\U0001F600", "!", ""}},
		{"\xF0a", []string{"", "\uFFFDa", ""}},
		{"\xE2\x82", []string{"", "", "\uFFFD"}},
		{"\xE2\x82\xE2\x82\xAC", []string{"", "", "\uFFFD", "", "\u20ac", ""}},
	} {
		d := tok.NewDecoder()
		var got []string
		for i := 0; i < len(tc.in); i++ {
			s, err := d.Next(tok.byteID[tc.in[i]])
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, s)
		}
		got = append(got, d.Flush())
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("stream %+q: got %+q, want %+q", tc.in, got, tc.want)
		}
	}
}

// TestDecoderMatchesDecode streams the ids of every reference case and of the emoji
// category's byte-split tokens; the pieces must join to Decode's result.
func TestDecoderMatchesDecode(t *testing.T) {
	tok := loadQwen3(t)
	for _, c := range readQwen3Cases(t) {
		for _, ids := range [][]int32{c.IDs, c.IDsWithSpecialParsing} {
			d := tok.NewDecoder()
			var b strings.Builder
			for _, id := range ids {
				s, err := d.Next(id)
				if err != nil {
					t.Fatal(err)
				}
				b.WriteString(s)
			}
			b.WriteString(d.Flush())
			want, _ := tok.Decode(ids)
			if b.String() != want {
				t.Errorf("line %d: streamed %+q, Decode %+q", c.Line, clip(b.String()), clip(want))
			}
		}
	}
}

func TestDecoderSkipControl(t *testing.T) {
	tok := loadQwen3(t)
	ids := tok.Encode("<|im_start|>hi<think><|im_end|>", true)
	d := tok.NewDecoder()
	d.SkipControl = true
	var b strings.Builder
	for _, id := range ids {
		s, _ := d.Next(id)
		b.WriteString(s)
	}
	if b.String() != "hi<think>" {
		t.Errorf("got %q, want %q (control tokens dropped, user-defined kept)", b.String(), "hi<think>")
	}
}

func TestDecodeErrors(t *testing.T) {
	tok := loadQwen3(t)
	for _, id := range []int32{-1, int32(tok.VocabSize()), 1 << 30} {
		if _, err := tok.Decode([]int32{1, id}); err == nil || !strings.Contains(err.Error(), "outside the vocabulary") {
			t.Errorf("Decode(%d): error %v", id, err)
		}
		if _, err := tok.NewDecoder().Next(id); err == nil {
			t.Errorf("Decoder.Next(%d): no error", id)
		}
	}
}
