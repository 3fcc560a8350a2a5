package tokenizer

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Tokenizer encodes text to token ids and decodes ids to text. Build one with New,
// FromTokenizerJSON or FromGGUF.
type Tokenizer struct {
	data   Data
	vocab  map[string]int32 // normal tokens by their byte-level text
	byteID [256]int32       // the token of each single byte
	merges *mergeTable      // pair of ids -> rank and result
	// bytePairs is the merge of every pair of single-byte tokens, indexed by b1<<8 | b2
	// (rank -1: none): the first lookups of every piece, kept in a small dense table.
	bytePairs []bytePair
	bytes     [][]byte // what each id decodes to

	added      []addedToken // longest first
	addedFirst [256]bool    // first bytes of added tokens, to skip quickly

	mu    sync.Mutex
	cache map[string][]int32 // BPE result per piece
}

type bytePair struct{ rank, result int32 }

type addedToken struct {
	text    string
	id      int32
	control bool // matched only with special-token parsing
}

// Piece cache limits: pieces longer than cacheMaxPiece are not cached, and the cache is
// emptied when it reaches cacheMaxEntries, so memory stays bounded on any input.
const (
	cacheMaxPiece   = 64
	cacheMaxEntries = 1 << 17
)

// New builds a Tokenizer from d after checking it. The Tokenizer keeps d's slices; the
// caller must not modify them afterwards.
func New(d Data) (*Tokenizer, error) {
	if err := d.validate(); err != nil {
		return nil, err
	}
	t := &Tokenizer{
		data:  d,
		vocab: make(map[string]int32, len(d.Tokens)),
		bytes: make([][]byte, len(d.Tokens)),
		cache: map[string][]int32{},
	}
	for id, text := range d.Tokens {
		switch d.typeOf(id) {
		case TypeNormal:
			if _, dup := t.vocab[text]; !dup {
				t.vocab[text] = int32(id)
			}
			if b, ok := tokenBytes(text); ok {
				t.bytes[id] = b
			} else {
				t.bytes[id] = []byte(text) // as Hugging Face's ByteLevel decoder does
			}
		case TypeControl, TypeUserDefined:
			t.bytes[id] = []byte(text)
			t.added = append(t.added, addedToken{text: text, id: int32(id), control: d.typeOf(id) == TypeControl})
			t.addedFirst[text[0]] = true
		case TypeUnknown:
			t.bytes[id] = []byte(text)
		case TypeUnused:
			t.bytes[id] = nil
		}
	}
	for b := 0; b < 256; b++ {
		id, ok := t.vocab[string(byteToRune[b])]
		if !ok {
			return nil, fmt.Errorf("tokenizer: the vocabulary has no token for byte 0x%02X (%q); a byte-level BPE vocabulary needs all 256", b, string(byteToRune[b]))
		}
		t.byteID[b] = id
	}
	sort.SliceStable(t.added, func(i, j int) bool { return len(t.added[i].text) > len(t.added[j].text) })
	t.merges = newMergeTable(len(d.Merges))
	for rank, m := range d.Merges {
		left, right, ok := strings.Cut(m, " ")
		if !ok || left == "" || right == "" || strings.Contains(right, " ") {
			return nil, fmt.Errorf("tokenizer: merge %d (%q) is not two tokens separated by one space", rank, clip(m))
		}
		l, lok := t.vocab[left]
		r, rok := t.vocab[right]
		res, resok := t.vocab[left+right]
		switch {
		case !lok:
			return nil, fmt.Errorf("tokenizer: merge %d (%q) names %q, which is not in the vocabulary", rank, clip(m), clip(left))
		case !rok:
			return nil, fmt.Errorf("tokenizer: merge %d (%q) names %q, which is not in the vocabulary", rank, clip(m), clip(right))
		case !resok:
			return nil, fmt.Errorf("tokenizer: merge %d (%q) makes %q, which is not in the vocabulary", rank, clip(m), clip(left+right))
		}
		t.merges.insert(l, r, int32(rank), res) // the first (lowest-rank) copy of a pair wins
	}
	t.bytePairs = make([]bytePair, 1<<16)
	for i := range t.bytePairs {
		rank, result, ok := t.merges.lookup(t.byteID[i>>8], t.byteID[i&0xFF])
		if !ok {
			rank = -1
		}
		t.bytePairs[i] = bytePair{rank, result}
	}
	return t, nil
}

// Data returns the data t was built from. The slices are shared: do not modify their
// elements. Their capacity is clipped, so appending (Data.PadTo) copies instead of
// writing into memory another Data shares.
func (t *Tokenizer) Data() Data {
	d := t.data
	d.Tokens = slices.Clip(d.Tokens)
	d.Types = slices.Clip(d.Types)
	d.Merges = slices.Clip(d.Merges)
	return d
}

// VocabSize returns the number of token ids (the length of Data().Tokens).
func (t *Tokenizer) VocabSize() int { return len(t.data.Tokens) }

// BOS returns the beginning-of-sequence id, -1 when absent (Qwen has none).
func (t *Tokenizer) BOS() int32 { return t.data.BOS }

// EOS returns the end-of-sequence id, -1 when absent.
func (t *Tokenizer) EOS() int32 { return t.data.EOS }

// PAD returns the padding id, -1 when absent.
func (t *Tokenizer) PAD() int32 { return t.data.PAD }

// TokenID returns the id of a control or user-defined token by its text ("<|im_end|>").
func (t *Tokenizer) TokenID(text string) (int32, bool) {
	for _, a := range t.added {
		if a.text == text {
			return a.id, true
		}
	}
	return 0, false
}

// Type returns the type of token id; ids outside the vocabulary are TypeUnused. A sampler
// can mask TypeUnused ids (padding rows such as "[PAD151669]"), which decode to nothing.
func (t *Tokenizer) Type(id int32) TokenType {
	if id < 0 || int(id) >= len(t.data.Tokens) {
		return TypeUnused
	}
	return t.data.typeOf(int(id))
}

// IsControl reports whether id is a control token (such as <|im_end|> or <|endoftext|>).
func (t *Tokenizer) IsControl(id int32) bool {
	return id >= 0 && int(id) < len(t.data.Tokens) && t.data.typeOf(int(id)) == TypeControl
}

// Encode returns the token ids of text. With parseSpecial, control tokens written in the
// text ("<|im_start|>") become their ids; without it they are encoded as ordinary text.
// User-defined added tokens ("<think>") are matched either way. Text that is not valid
// UTF-8 is encoded byte for byte and never fails.
func (t *Tokenizer) Encode(text string, parseSpecial bool) []int32 {
	out := make([]int32, 0, len(text)/3+2)
	if t.data.AddBOS {
		out = append(out, t.data.BOS)
	}
	start := 0
	for i := 0; i < len(text); {
		if !t.addedFirst[text[i]] {
			i++
			continue
		}
		a, ok := t.matchAdded(text, i)
		switch {
		case !ok:
			i++
		case a.control && !parseSpecial:
			// Like Hugging Face: the match is consumed as plain text, so no other added
			// token can start inside it.
			i += len(a.text)
		default:
			out = t.encodeText(text[start:i], out)
			out = append(out, a.id)
			i += len(a.text)
			start = i
		}
	}
	out = t.encodeText(text[start:], out)
	if t.data.AddEOS {
		out = append(out, t.data.EOS)
	}
	return out
}

// matchAdded returns the longest added token that starts at text[i].
func (t *Tokenizer) matchAdded(text string, i int) (addedToken, bool) {
	for _, a := range t.added {
		if strings.HasPrefix(text[i:], a.text) {
			return a, true
		}
	}
	return addedToken{}, false
}

// encodeText appends the ids of text that contains no added token.
func (t *Tokenizer) encodeText(text string, out []int32) []int32 {
	if text == "" {
		return out
	}
	splitQwen2(nfc(text), func(piece string) { out = t.encodePiece(piece, out) })
	return out
}

// encodePiece appends the BPE ids of one pre-tokenized piece, through the cache.
func (t *Tokenizer) encodePiece(piece string, out []int32) []int32 {
	if len(piece) == 1 {
		return append(out, t.byteID[piece[0]])
	}
	if len(piece) >= longPieceMin {
		return t.bpeLong(piece, out)
	}
	if len(piece) > cacheMaxPiece {
		return t.bpe(piece, out)
	}
	t.mu.Lock()
	ids, ok := t.cache[piece]
	t.mu.Unlock()
	if ok {
		return append(out, ids...)
	}
	n := len(out)
	out = t.bpe(piece, out)
	ids = append([]int32(nil), out[n:]...)
	t.mu.Lock()
	if len(t.cache) >= cacheMaxEntries {
		clear(t.cache)
	}
	t.cache[strings.Clone(piece)] = ids
	t.mu.Unlock()
	return out
}
