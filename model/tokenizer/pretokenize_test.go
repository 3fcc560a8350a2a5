package tokenizer

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func split(s string) []string {
	var out []string
	splitQwen2(s, func(p string) { out = append(out, p) })
	return out
}

// Expected pieces are worked out by hand from the regex (pretokenize.go's comment): the
// first alternative that matches at each position wins, with greedy backtracking inside it.
func TestSplitQwen2(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"Hello world", []string{"Hello", " world"}},
		{"I'm WE'LL it's", []string{"I", "'m", " WE", "'LL", " it", "'s"}},
		{"'Re'x", []string{"'Re", "'x"}},       // contraction, then "'" + letters
		{"x'\u017f", []string{"x", "'\u017f"}}, // long s folds to s
		{"don\u2019t", []string{"don", "\u2019t"}},
		{"123", []string{"1", "2", "3"}},
		{"a1b", []string{"a", "1", "b"}},
		{" 42", []string{" ", "4", "2"}},
		{"  hi", []string{" ", " hi"}},
		{"hi  ", []string{"hi", "  "}},
		{"a\n\nb", []string{"a", "\n\n", "b"}},
		{"a \n  b", []string{"a", " \n", " ", " b"}},
		{"x\r\ny", []string{"x", "\r\n", "y"}},
		{"\thello", []string{"\thello"}},
		{"\t\thello", []string{"\t", "\thello"}},
		{"\u00a0word", []string{"\u00a0word"}},
		{"...!!", []string{"...!!"}},
		{"a ...\n\nb", []string{"a", " ...\n\n", "b"}},
		{"(hello)", []string{"(hello", ")"}},
		{"!!abc", []string{"!!", "abc"}},
		{"\u4e2d\u6587\u5b57", []string{"\u4e2d\u6587\u5b57"}},
		{"x\u00b2\u00bd", []string{"x", "\u00b2", "\u00bd"}},
		{"e\u0301", []string{"e", "\u0301"}},
		{" \u0301", []string{" \u0301"}},
		{"a\xffb", []string{"a", "\xffb"}},
		{" \n", []string{" \n"}},
		{"\n ", []string{"\n", " "}},
		{" ", []string{" "}},
		{"", nil},
	} {
		if diff := cmp.Diff(tc.want, split(tc.in)); diff != "" {
			t.Errorf("split(%+q) (-want +got):\n%s", tc.in, diff)
		}
	}
}
