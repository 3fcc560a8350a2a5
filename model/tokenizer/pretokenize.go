package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// The Qwen2 pre-tokenizer splits normalized text with the regex
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// keeping every match as a piece. Go's regexp has no lookahead, and a regex engine is
// slower than needed anyway, so splitQwen2 is that regex written out as a state machine:
// at each position it tries the alternatives in order, exactly as a backtracking engine
// would, and every decision looks at most one rune ahead or scans one run, so the whole
// split is linear. The alternatives cover every rune, so there are no unmatched gaps.

// runeClass is what the regex distinguishes about a rune.
type runeClass uint8

const (
	classOther  runeClass = iota // none of the below; also bytes that are not valid UTF-8
	classLetter                  // \p{L}
	classNumber                  // \p{N}
	classSpace                   // \s (Unicode White_Space), which includes \r and \n
)

var asciiClass [128]runeClass

func init() {
	for c := 0; c < 128; c++ {
		asciiClass[c] = unicodeClass(rune(c))
	}
}

// unicodeClass classifies r with the reference's tables (classes.go).
func unicodeClass(r rune) runeClass {
	switch {
	case unicode.Is(classLetters, r):
		return classLetter
	case unicode.Is(classNumbers, r):
		return classNumber
	case unicode.Is(classSpaces, r):
		return classSpace
	}
	return classOther
}

// classAt returns the class and byte width of the rune at s[i:]; i < len(s).
func classAt(s string, i int) (runeClass, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && w == 1 {
		return classOther, 1
	}
	return unicodeClass(r), w
}

// scanClass returns the end of the run of runes of class cls that starts at i.
func scanClass(s string, i int, cls runeClass) int {
	for i < len(s) {
		c, w := classAt(s, i)
		if c != cls {
			break
		}
		i += w
	}
	return i
}

func isNewline(c byte) bool { return c == '\r' || c == '\n' }

// contractionLen returns the length of the contraction ('s 't 're 've 'm 'll 'd, any case)
// that starts at the apostrophe s[i], or 0. Under Unicode case folding U+017F (ſ) matches 's' too.
func contractionLen(s string, i int) int {
	rest := s[i+1:]
	lower := func(c byte) byte { return c | 0x20 }
	if len(rest) >= 2 {
		switch a, b := lower(rest[0]), lower(rest[1]); {
		case a == 'r' && b == 'e', a == 'v' && b == 'e', a == 'l' && b == 'l':
			return 3
		}
	}
	if len(rest) >= 1 {
		switch lower(rest[0]) {
		case 's', 't', 'm', 'd':
			return 2
		}
	}
	if len(rest) >= 2 && rest[0] == 0xC5 && rest[1] == 0xBF { // ſ
		return 3
	}
	return 0
}

// splitQwen2 calls fn with each piece of s, in order; the pieces concatenate to s.
func splitQwen2(s string, fn func(piece string)) {
	for i := 0; i < len(s); {
		end := qwen2PieceEnd(s, i)
		fn(s[i:end])
		i = end
	}
}

// qwen2PieceEnd returns the end of the regex match that starts at i (i < len(s)).
func qwen2PieceEnd(s string, i int) int {
	c := s[i]
	if c == '\'' {
		if n := contractionLen(s, i); n > 0 {
			return i + n // (?i:'s|'t|'re|'ve|'m|'ll|'d)
		}
	}
	cls, w := classAt(s, i)
	switch cls {
	case classLetter:
		return scanClass(s, i+w, classLetter) // \p{L}+ (the optional prefix matched empty)
	case classNumber:
		return i + w // \p{N}
	}
	next, nw := classOther, 0
	if i+w < len(s) {
		next, nw = classAt(s, i+w)
	}
	if nw > 0 && next == classLetter && !isNewline(c) {
		return scanClass(s, i+w+nw, classLetter) // [^\r\n\p{L}\p{N}]\p{L}+
	}
	if cls == classOther || (c == ' ' && nw > 0 && next == classOther) {
		j := i
		if c == ' ' {
			j++
		}
		j = scanClass(s, j, classOther) // ' '?[^\s\p{L}\p{N}]+
		for j < len(s) && isNewline(s[j]) {
			j++ // [\r\n]*
		}
		return j
	}
	// cls == classSpace: scan the whole whitespace run.
	j, lastNewline, lastStart, runes := i, -1, i, 0
	for j < len(s) {
		c, w := classAt(s, j)
		if c != classSpace {
			break
		}
		if isNewline(s[j]) {
			lastNewline = j + 1
		}
		lastStart = j
		j += w
		runes++
	}
	switch {
	case lastNewline >= 0:
		return lastNewline // \s*[\r\n]+ : backtracks to the last newline of the run
	case j == len(s):
		return j // \s+(?!\S) at the end of the text
	case runes >= 2:
		return lastStart // \s+(?!\S): leave the last space for the word after it
	}
	return j // \s+
}
