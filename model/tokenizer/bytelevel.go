package tokenizer

// Byte-level BPE stores every token as a string over 256 printable code points, one per
// byte value: the printable bytes '!'..'~', '¡'..'¬' and '®'..'ÿ' stand for themselves and
// the other 68 bytes (controls, space, 0x7F-0xA0, 0xAD) are shifted to U+0100 upwards in
// byte order. So byte 0x20 (space) is 'Ġ' (U+0120) and '\n' is 'Ċ' (U+010A).

// byteToRune maps a byte value to its code point in token strings.
var byteToRune [256]rune

// runeToByte is the inverse of byteToRune for code points below 0x144 (the largest one);
// -1 marks code points that stand for no byte.
var runeToByte [0x144]int16

func init() {
	printable := func(b int) bool {
		return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
	}
	next := rune(0x100)
	for b := 0; b < 256; b++ {
		if printable(b) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = next
			next++
		}
	}
	for i := range runeToByte {
		runeToByte[i] = -1
	}
	for b, r := range byteToRune {
		runeToByte[r] = int16(b)
	}
}

// tokenBytes returns the bytes a byte-level token string stands for, and false when some
// code point of s stands for no byte (such a string is not a byte-level token).
func tokenBytes(s string) ([]byte, bool) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r < 0 || int(r) >= len(runeToByte) || runeToByte[r] < 0 {
			return nil, false
		}
		out = append(out, byte(runeToByte[r]))
	}
	return out, true
}

// byteLevelString renders raw bytes as a byte-level token string (the inverse of tokenBytes).
func byteLevelString(b []byte) string {
	rs := make([]rune, len(b))
	for i, c := range b {
		rs[i] = byteToRune[c]
	}
	return string(rs)
}
