package tokenizer

import (
	"fmt"
	"unicode/utf8"
)

// Decoding joins the bytes of the tokens. Bytes that do not form valid UTF-8 are replaced
// the way Hugging Face (Rust's String::from_utf8_lossy) and Python do it: one U+FFFD per
// maximal subpart of an ill-formed sequence (Unicode §3.9, "U+FFFD substitution of maximal
// subparts"), so "\xE2\x82" is one replacement character, not two.

// DecodeBytes returns the raw bytes that ids stand for. Control and user-defined tokens
// give their text; unused padding entries give nothing.
func (t *Tokenizer) DecodeBytes(ids []int32) ([]byte, error) {
	var out []byte
	for _, id := range ids {
		b, err := t.tokenBytesOf(id)
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return out, nil
}

// Decode returns the text of ids, with ill-formed UTF-8 replaced by U+FFFD.
func (t *Tokenizer) Decode(ids []int32) (string, error) {
	b, err := t.DecodeBytes(ids)
	if err != nil {
		return "", err
	}
	return string(appendLossy(nil, b)), nil
}

func (t *Tokenizer) tokenBytesOf(id int32) ([]byte, error) {
	if id < 0 || int(id) >= len(t.bytes) {
		return nil, fmt.Errorf("tokenizer: token id %d is outside the vocabulary of %d tokens", id, len(t.bytes))
	}
	return t.bytes[id], nil
}

// Decoder decodes a stream of token ids into text as they arrive (streaming generation).
// A character whose UTF-8 bytes are split across tokens is held back until it is
// complete, so the concatenation of everything Next and Flush return equals Decode of all
// the ids. A Decoder is for one goroutine.
type Decoder struct {
	t       *Tokenizer
	pending []byte // an incomplete but so far valid UTF-8 sequence, at most 3 bytes

	// SkipControl drops control tokens (<|im_end|>, <|endoftext|>, ...) from the output.
	SkipControl bool
}

// NewDecoder returns a streaming Decoder for t.
func (t *Tokenizer) NewDecoder() *Decoder { return &Decoder{t: t} }

// Next adds one token and returns the text that is now complete (possibly "").
func (d *Decoder) Next(id int32) (string, error) {
	b, err := d.t.tokenBytesOf(id)
	if err != nil {
		return "", err
	}
	if d.SkipControl && d.t.IsControl(id) {
		return "", nil
	}
	buf := append(d.pending, b...)
	keep := incompleteTail(buf)
	out := string(appendLossy(nil, buf[:len(buf)-keep]))
	d.pending = append(d.pending[:0:0], buf[len(buf)-keep:]...)
	return out, nil
}

// Flush returns what is still held back (an incomplete sequence becomes U+FFFD) and resets
// the Decoder.
func (d *Decoder) Flush() string {
	out := string(appendLossy(nil, d.pending))
	d.pending = nil
	return out
}

// utf8Need returns the length of the sequence that lead byte c starts, and the range of
// the byte after it; need 0 means c cannot start a sequence.
func utf8Need(c byte) (need int, lo, hi byte) {
	switch {
	case c >= 0xC2 && c <= 0xDF:
		return 2, 0x80, 0xBF
	case c == 0xE0:
		return 3, 0xA0, 0xBF
	case c == 0xED:
		return 3, 0x80, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		return 3, 0x80, 0xBF
	case c == 0xF0:
		return 4, 0x90, 0xBF
	case c >= 0xF1 && c <= 0xF3:
		return 4, 0x80, 0xBF
	case c == 0xF4:
		return 4, 0x80, 0x8F
	}
	return 0, 0, 0
}

// validPrefix returns how many bytes at the start of b form a valid (possibly complete)
// prefix of one UTF-8 sequence, and the sequence's full length. For an ASCII byte it is (1, 1).
func validPrefix(b []byte) (n, need int) {
	if b[0] < 0x80 {
		return 1, 1
	}
	need, lo, hi := utf8Need(b[0])
	if need == 0 {
		return 0, 0
	}
	n = 1
	for n < need && n < len(b) {
		c := b[n]
		if n == 1 && (c < lo || c > hi) || n > 1 && (c < 0x80 || c > 0xBF) {
			break
		}
		n++
	}
	return n, need
}

// appendLossy appends b to dst with every maximal ill-formed subpart replaced by U+FFFD.
func appendLossy(dst, b []byte) []byte {
	for i := 0; i < len(b); {
		n, need := validPrefix(b[i:])
		switch {
		case n == need && n > 0:
			dst = append(dst, b[i:i+n]...)
			i += n
		default:
			dst = utf8.AppendRune(dst, utf8.RuneError)
			i += max(n, 1)
		}
	}
	return dst
}

// incompleteTail returns the length of the valid but unfinished UTF-8 sequence that ends
// b (0 when b ends with a complete character or with bytes that are ill-formed anyway).
func incompleteTail(b []byte) int {
	for k := 1; k <= 3 && k <= len(b); k++ {
		c := b[len(b)-k]
		if c >= 0x80 && c <= 0xBF {
			continue // a continuation byte: look further back for the lead
		}
		n, need := validPrefix(b[len(b)-k:])
		if n == k && need > k {
			return k
		}
		return 0
	}
	return 0
}
