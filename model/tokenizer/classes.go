package tokenizer

import (
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// The letter, number and whitespace classes of the split regex come from
// unicode_classes.txt, measured from the reference implementation by gen_classes.js,
// not from Go's unicode package: the reference's regex engine has its own Unicode version
// (16.0 for tokenizers 0.23.2; Go 1.26 has 15.0, which lacks 4924 letters and 80 numbers),
// and the split must not change when either side updates its tables.

//go:embed unicode_classes.txt
var classesText string

var classLetters, classNumbers, classSpaces = mustParseClasses(classesText)

func mustParseClasses(text string) (letters, numbers, spaces *unicode.RangeTable) {
	tables := map[string]*unicode.RangeTable{"L": {}, "N": {}, "S": {}}
	for n, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		t := tables[f[0]]
		if len(f) != 3 || t == nil {
			panic(fmt.Sprintf("tokenizer: unicode_classes.txt line %d: malformed %q", n+1, line))
		}
		lo, err1 := strconv.ParseUint(f[1], 16, 32)
		hi, err2 := strconv.ParseUint(f[2], 16, 32)
		if err1 != nil || err2 != nil || lo > hi || hi > unicode.MaxRune {
			panic(fmt.Sprintf("tokenizer: unicode_classes.txt line %d: bad range %q", n+1, line))
		}
		addRange(t, rune(lo), rune(hi))
	}
	return tables["L"], tables["N"], tables["S"]
}

// addRange appends [lo, hi] to t; ranges arrive sorted, as unicode.Is requires.
func addRange(t *unicode.RangeTable, lo, hi rune) {
	if lo <= 0xFFFF {
		h := min(hi, 0xFFFF)
		t.R16 = append(t.R16, unicode.Range16{Lo: uint16(lo), Hi: uint16(h), Stride: 1})
		if h <= unicode.MaxLatin1 {
			t.LatinOffset++
		}
		lo = h + 1
	}
	if lo <= hi {
		t.R32 = append(t.R32, unicode.Range32{Lo: uint32(lo), Hi: uint32(hi), Stride: 1})
	}
}
