package tokenizer

import (
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// NFC normalization (Unicode canonical decomposition followed by canonical composition),
// which Qwen's tokenizer.json applies before splitting. Go's standard library has no
// exported normalizer and the module may not grow, so the data lives in nfc_data.txt
// (measured from the reference by gen_reference.js and gen_nfc.py: the reference's
// normalizer predates Unicode 10, so about a hundred newer marks are starters to it) and
// the algorithm is the one in Unicode Standard Annex #15.

//go:embed nfc_data.txt
var nfcDataText string

// nfcTables is the parsed form of nfc_data.txt.
type nfcTables struct {
	ccc     map[rune]uint8
	decomp  map[rune][]rune
	compose map[uint64]rune
	// unsafe has a bit set for every rune that can make a string change under NFC: a
	// nonzero combining class, a rune that NFC maps to something else, or a rune that can
	// compose with the rune before it. A string without such runes is already in NFC.
	unsafe []uint64
}

// Hangul syllables decompose and compose by arithmetic (Unicode §3.12).
const (
	hangulSBase  = 0xAC00
	hangulLBase  = 0x1100
	hangulVBase  = 0x1161
	hangulTBase  = 0x11A7
	hangulLCount = 19
	hangulVCount = 21
	hangulTCount = 28
	hangulNCount = hangulVCount * hangulTCount
	hangulSCount = hangulLCount * hangulNCount
)

var nfcData = sync.OnceValue(func() *nfcTables {
	t, err := parseNFCData(nfcDataText)
	if err != nil {
		panic("tokenizer: embedded nfc_data.txt: " + err.Error())
	}
	return t
})

func parseNFCData(text string) (*nfcTables, error) {
	t := &nfcTables{
		ccc:     map[rune]uint8{},
		decomp:  map[rune][]rune{},
		compose: map[uint64]rune{},
		unsafe:  make([]uint64, (utf8.MaxRune+1)/64),
	}
	mark := func(r rune) { t.unsafe[r/64] |= 1 << (r % 64) }
	for n, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		cps := make([]rune, 0, len(f))
		for _, x := range f[1:] {
			v, err := strconv.ParseUint(x, 16, 32)
			if err != nil || v > utf8.MaxRune {
				return nil, fmt.Errorf("line %d: bad code point %q", n+1, x)
			}
			cps = append(cps, rune(v))
		}
		switch {
		case f[0] == "c" && len(cps) == 2:
			v, err := strconv.ParseUint(f[2], 10, 8)
			if err != nil {
				return nil, fmt.Errorf("line %d: bad combining class %q", n+1, f[2])
			}
			t.ccc[cps[0]] = uint8(v)
			mark(cps[0])
		case f[0] == "d" && len(cps) >= 2:
			t.decomp[cps[0]] = cps[1:]
		case f[0] == "p" && len(cps) == 3:
			t.compose[uint64(cps[0])<<32|uint64(cps[1])] = cps[2]
			mark(cps[1])
		case f[0] == "n" && len(cps) == 1:
			mark(cps[0])
		default:
			return nil, fmt.Errorf("line %d: malformed %q", n+1, line)
		}
	}
	// Hangul vowel and trailing jamo compose with the syllable or jamo before them.
	for r := rune(hangulVBase); r < hangulVBase+hangulVCount; r++ {
		mark(r)
	}
	for r := rune(hangulTBase + 1); r < hangulTBase+hangulTCount; r++ {
		mark(r)
	}
	return t, nil
}

// nfcSafeBelow is the first rune that may be NFC-unsafe: every rune below U+0300 is a
// starter that no canonical composition takes as its second part (TestNFCSafeBelow).
const nfcSafeBelow = 0x300

// nfc returns s in Normalization Form C. Bytes that are not valid UTF-8 pass through
// unchanged and block composition across them.
func nfc(s string) string {
	var t *nfcTables
	for i := 0; i < len(s); {
		c := s[i]
		if c < 0x80 {
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		i += w
		if r < nfcSafeBelow || (r == utf8.RuneError && w == 1) {
			continue
		}
		if t == nil {
			t = nfcData()
		}
		if t.unsafe[r/64]&(1<<(r%64)) != 0 {
			return t.normalize(s)
		}
	}
	return s
}

// invalidByteRune encodes a byte that is not valid UTF-8 as a negative rune, so that the
// slow path can carry it through decomposition and composition unchanged.
func invalidByteRune(b byte) rune { return -1 - rune(b) }

func (t *nfcTables) normalize(s string) string {
	buf := make([]rune, 0, len(s))
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && w == 1 {
			buf = append(buf, invalidByteRune(s[i]))
			i++
			continue
		}
		i += w
		switch {
		case r >= hangulSBase && r < hangulSBase+hangulSCount:
			si := r - hangulSBase
			buf = append(buf, hangulLBase+si/hangulNCount, hangulVBase+(si%hangulNCount)/hangulTCount)
			if ti := si % hangulTCount; ti != 0 {
				buf = append(buf, hangulTBase+ti)
			}
		case t.decomp[r] != nil:
			buf = append(buf, t.decomp[r]...)
		default:
			buf = append(buf, r)
		}
	}
	// Canonical ordering: a stable sort of every run of non-starters by combining class.
	for i := 1; i < len(buf); i++ {
		c := t.class(buf[i])
		if c == 0 {
			continue
		}
		for j := i; j > 0; j-- {
			p := t.class(buf[j-1])
			if p <= c {
				break
			}
			buf[j-1], buf[j] = buf[j], buf[j-1]
		}
	}
	// Canonical composition. lastClass is the class of the last rune kept after the current
	// starter: 0 means the starter itself is adjacent, 256 means there is no usable starter.
	if len(buf) > 0 {
		starter := 0
		lastClass := 256
		if t.class(buf[0]) == 0 {
			lastClass = 0
		}
		out := 1
		for i := 1; i < len(buf); i++ {
			r := buf[i]
			c := t.class(r)
			if lastClass == 0 || (lastClass != 256 && lastClass < int(c)) {
				if comp, ok := t.composePair(buf[starter], r); ok {
					buf[starter] = comp
					continue
				}
			}
			if c == 0 {
				starter = out
				lastClass = 0
			} else if lastClass != 256 {
				lastClass = int(c)
			}
			buf[out] = r
			out++
		}
		buf = buf[:out]
	}
	var sb strings.Builder
	sb.Grow(len(s))
	for _, r := range buf {
		if r < 0 {
			sb.WriteByte(byte(-1 - r))
		} else {
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

func (t *nfcTables) class(r rune) uint8 {
	if r < nfcSafeBelow {
		return 0
	}
	return t.ccc[r]
}

func (t *nfcTables) composePair(a, b rune) (rune, bool) {
	if a < 0 || b < 0 {
		return 0, false
	}
	if a >= hangulLBase && a < hangulLBase+hangulLCount && b >= hangulVBase && b < hangulVBase+hangulVCount {
		return hangulSBase + ((a-hangulLBase)*hangulVCount+(b-hangulVBase))*hangulTCount, true
	}
	if a >= hangulSBase && a < hangulSBase+hangulSCount && (a-hangulSBase)%hangulTCount == 0 &&
		b > hangulTBase && b < hangulTBase+hangulTCount {
		return a + (b - hangulTBase), true
	}
	r, ok := t.compose[uint64(a)<<32|uint64(b)]
	return r, ok
}
