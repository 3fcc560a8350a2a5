package tokenizer

import (
	"testing"
	"unicode"
)

// Facts about the reference's classes, checked by running its pre-tokenizer on "X't" and
// ".Xa": U+13C30 and U+16D40 are letters and U+1CCF0 a digit (Unicode 16.0, unknown to Go
// 1.26's tables), U+10940 and U+323B0 (Unicode 17.0) are not letters.
func TestUnicodeClasses(t *testing.T) {
	for _, tc := range []struct {
		r    rune
		want runeClass
	}{
		{'A', classLetter}, {'z', classLetter}, {'\u017f', classLetter}, {'\u4e2d', classLetter}, {'\uac00', classLetter},
		{0x13C30, classLetter}, {0x16D40, classLetter}, {0x10940, classOther}, {0x323B0, classOther},
		{'5', classNumber}, {'\u00b2', classNumber}, {'\u00bd', classNumber}, {'\u0661', classNumber}, {0x1CCF0, classNumber},
		{' ', classSpace}, {'\t', classSpace}, {'\n', classSpace}, {'\r', classSpace}, {'\v', classSpace}, {'\f', classSpace},
		{0x85, classSpace}, {0xA0, classSpace}, {0x3000, classSpace}, {0x2028, classSpace},
		{0x180E, classOther}, {0x200B, classOther}, {0xFEFF, classOther}, {0x1C, classOther}, {'\'', classOther},
		{0x301, classOther}, {0xFFFD, classOther}, {0xE000, classOther}, {0x10FFFD, classOther}, {'!', classOther},
	} {
		if got := unicodeClass(tc.r); got != tc.want {
			t.Errorf("class of U+%04X = %d, want %d", tc.r, got, tc.want)
		}
	}
	count := func(tab *unicode.RangeTable) (n int) {
		for _, r := range tab.R16 {
			n += int(r.Hi-r.Lo) + 1
		}
		for _, r := range tab.R32 {
			n += int(r.Hi-r.Lo) + 1
		}
		return n
	}
	// The measured table holds 141028 letters, 1911 numbers and 25 whitespace code points.
	if l, n, s := count(classLetters), count(classNumbers), count(classSpaces); l < 140000 || n < 1900 || s != 25 {
		t.Errorf("tables hold %d letters, %d numbers, %d spaces; unicode_classes.txt looks wrong", l, n, s)
	}
}
