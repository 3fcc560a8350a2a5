package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Model-semantics helpers: the checks of reliability.md §1.4 that need to know what a model
// expects (S1–S6, T5, T10, K13, D4). Architectures and the tokenizer call these so every
// such failure is an *Error with the same Rule ids as the structural checks.

// Expect returns the named tensor after checking that it exists (S1), is non-empty (T5),
// has exactly the dims want (S2) and, if types is not empty, one of those types (T10).
func (f *File) Expect(name string, want []uint64, types ...Type) (TensorInfo, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return t, newErr(f.path, -1, RuleTensorSet, fmt.Sprintf("tensor %q", name), "required tensor is missing (wrong architecture or incomplete conversion?)")
	}
	if t.Elements() == 0 {
		return t, f.tensorErr(t, RuleZeroDim, "dims %v: the weight must not be empty", t.Dims)
	}
	if !slices.Equal(t.Dims, want) {
		return t, f.tensorErr(t, RuleTensorShape, "dims %v, the hyperparameters require %v", t.Dims, want)
	}
	if len(types) > 0 && !slices.Contains(types, t.Type) {
		return t, f.tensorErr(t, RuleUnsupportedType, "unsupported tensor type %s for tensor %s (supported here: %s)", t.Type, name, typeList(types))
	}
	return t, nil
}

func typeList(ts []Type) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.String()
	}
	return strings.Join(s, ", ")
}

// CheckTensorSet requires every name in required to be present and every tensor in the
// file to be in required or optional (S1).
func (f *File) CheckTensorSet(required, optional []string) error {
	known := make(map[string]bool, len(required)+len(optional))
	for _, n := range required {
		known[n] = true
		if _, ok := f.byName[n]; !ok {
			return newErr(f.path, -1, RuleTensorSet, fmt.Sprintf("tensor %q", n), "required tensor is missing (%d tensors in the file, %d required)", len(f.tensors), len(required))
		}
	}
	for _, n := range optional {
		known[n] = true
	}
	for _, t := range f.tensors {
		if !known[t.Name] {
			return f.tensorErr(t, RuleTensorSet, "unexpected tensor for this architecture")
		}
	}
	return nil
}

// CheckSupportedTypes fails on the first tensor whose type is not in supported (T10),
// before anything is allocated for it.
func (f *File) CheckSupportedTypes(supported []Type) error {
	for _, t := range f.tensors {
		if !slices.Contains(supported, t.Type) {
			return f.tensorErr(t, RuleUnsupportedType,
				"unsupported tensor type %s for tensor %s (supported: %s)", t.Type, t.Name, typeList(supported))
		}
	}
	return nil
}

// IntRange returns the integer value of key after checking lo ≤ v ≤ hi (S3).
func (f *File) IntRange(key string, lo, hi int) (int, error) {
	v, err := f.Int(key)
	if err != nil {
		return 0, err
	}
	if v < lo || v > hi {
		return 0, newErr(f.path, f.KeyOffset(key), RuleHparamRange, fmt.Sprintf("key %q", key), "value %d outside %d..%d", v, lo, hi)
	}
	return v, nil
}

// BlockIndex parses the layer index of a "blk.N.…" tensor name: ok is false for other
// names; N must be canonical decimal and < nBlocks (S4).
func (f *File) BlockIndex(name string, nBlocks int) (n int, ok bool, err error) {
	rest, found := strings.CutPrefix(name, "blk.")
	if !found {
		return 0, false, nil
	}
	num, _, found := strings.Cut(rest, ".")
	bad := func(why string) (int, bool, error) {
		return 0, true, newErr(f.path, f.InfoOffset(name), RuleNameIndex, fmt.Sprintf("tensor %q", name), "%s (the model has %d blocks)", why, nBlocks)
	}
	if !found || num == "" || (len(num) > 1 && num[0] == '0') {
		return bad("malformed block index")
	}
	v, perr := strconv.ParseUint(num, 10, 31)
	if perr != nil {
		return bad("block index is not a small decimal number")
	}
	if int(v) >= nBlocks {
		return bad(fmt.Sprintf("block index %d out of range", v))
	}
	return int(v), true, nil
}

// Tokenizer metadata keys.
const (
	KeyTokens       = "tokenizer.ggml.tokens"
	KeyScores       = "tokenizer.ggml.scores"
	KeyTokenType    = "tokenizer.ggml.token_type"
	KeyMerges       = "tokenizer.ggml.merges"
	KeyChatTemplate = "tokenizer.chat_template"
)

// VocabSize returns the number of tokens after checking that scores (FLOAT32[]) and
// token_type (INT32[]), where present, have one entry per token (K12, K13) and that
// token_embd.weight and output.weight, where present, have one row per token (K13).
func (f *File) VocabSize() (int, error) {
	toks, err := f.Strings(KeyTokens)
	if err != nil {
		return 0, err
	}
	n := len(toks)
	check := func(key string, l int) error {
		if l != n {
			return newErr(f.path, f.KeyOffset(key), RuleArrayMismatch, fmt.Sprintf("key %q", key), "has %d entries, %s has %d", l, KeyTokens, n)
		}
		return nil
	}
	if f.Has(KeyScores) {
		s, err := f.Float32s(KeyScores)
		if err != nil {
			return 0, err
		}
		if err := check(KeyScores, len(s)); err != nil {
			return 0, err
		}
	}
	if f.Has(KeyTokenType) {
		s, err := f.Int32s(KeyTokenType)
		if err != nil {
			return 0, err
		}
		if err := check(KeyTokenType, len(s)); err != nil {
			return 0, err
		}
	}
	for _, name := range []string{"token_embd.weight", "output.weight"} {
		if t, ok := f.Tensor(name); ok && (len(t.Dims) < 2 || t.Dims[1] != uint64(n)) {
			return 0, f.tensorErr(t, RuleArrayMismatch, "dims %v: expected %d rows, one per token of %s", t.Dims, n, KeyTokens)
		}
	}
	return n, nil
}

// TokenID returns the token id under key (e.g. tokenizer.ggml.eos_token_id), which must be
// below the vocabulary size (S5).
func (f *File) TokenID(key string) (int, error) {
	n, err := f.VocabSize()
	if err != nil {
		return 0, err
	}
	id, err := f.Int(key)
	if err != nil {
		return 0, err
	}
	if id < 0 || id >= n {
		return 0, newErr(f.path, f.KeyOffset(key), RuleTokenizer, fmt.Sprintf("key %q", key), "token id %d outside the vocabulary of %d tokens", id, n)
	}
	return id, nil
}

// ChatTemplate returns tokenizer.chat_template as data for a sandboxed renderer (it is
// attacker-controlled: never evaluate it with side effects). It must be plain text
// without control characters other than tab and newlines (S6).
func (f *File) ChatTemplate() (string, error) {
	s, err := f.String(KeyChatTemplate)
	if err != nil {
		return "", err
	}
	if !plainText(s) {
		return "", newErr(f.path, f.KeyOffset(KeyChatTemplate), RuleChatTemplate, fmt.Sprintf("key %q", KeyChatTemplate), "template contains control characters; refusing to hand it to a renderer")
	}
	return s, nil
}

// CheckFinite scans the named tensor for NaN and Inf (D4): every element of float tensors,
// the scales of every block of quantized ones (types without a known scale are not
// checked). It reads the whole tensor, so it is optional (like llama.cpp's --check-tensors).
// A fault while reading (file truncated under the mapping) is a D5 error.
func (f *File) CheckFinite(name string) error {
	data, err := f.Data(name)
	if err != nil {
		return err
	}
	t, _ := f.Tensor(name)
	ti, _ := t.Type.Info()
	bad := int64(-1)
	err = guardFault(func() string { return f.shards[t.Shard].path }, data, func() error {
		bad = firstNonFinite(t.Type, ti, data)
		return nil
	})
	if err != nil {
		return err
	}
	if bad >= 0 {
		return newErr(f.shards[t.Shard].path, int64(t.FileOffset)+bad, RuleNonFinite, fmt.Sprintf("tensor %q", name),
			"NaN or Inf at byte %d of the tensor (%s); the file is corrupt or was quantized from broken weights", bad, t.Type)
	}
	return nil
}

// firstNonFinite returns the byte offset of the first NaN/Inf value or scale, or -1.
func firstNonFinite(t Type, ti TypeInfo, b []byte) int64 {
	le := binary.LittleEndian
	f16Bad := func(h uint16) bool { return h&0x7C00 == 0x7C00 }
	switch t {
	case F32:
		for i := 0; i+4 <= len(b); i += 4 {
			if le.Uint32(b[i:])&0x7F800000 == 0x7F800000 {
				return int64(i)
			}
		}
		return -1
	case F64:
		for i := 0; i+8 <= len(b); i += 8 {
			if v := math.Float64frombits(le.Uint64(b[i:])); math.IsNaN(v) || math.IsInf(v, 0) {
				return int64(i)
			}
		}
		return -1
	case F16:
		for i := 0; i+2 <= len(b); i += 2 {
			if f16Bad(le.Uint16(b[i:])) {
				return int64(i)
			}
		}
		return -1
	case BF16:
		for i := 0; i+2 <= len(b); i += 2 {
			if le.Uint16(b[i:])&0x7F80 == 0x7F80 {
				return int64(i)
			}
		}
		return -1
	}
	bb := int(ti.BlockBytes)
	for blk := 0; blk+bb <= len(b); blk += bb {
		for _, o := range ti.Scales {
			switch o {
			case -1: // Q8_K: fp32 d at byte 0
				if le.Uint32(b[blk:])&0x7F800000 == 0x7F800000 {
					return int64(blk)
				}
			case -2: // IQ1_M: fp16 scale in the top nibbles of the four u16 at bytes 48..55
				sc := b[blk+48:]
				h := le.Uint16(sc)>>12 | (le.Uint16(sc[2:])>>8)&0x00F0 | (le.Uint16(sc[4:])>>4)&0x0F00 | le.Uint16(sc[6:])&0xF000
				if f16Bad(h) {
					return int64(blk + 48)
				}
			default:
				if f16Bad(le.Uint16(b[blk+o:])) {
					return int64(blk + o)
				}
			}
		}
	}
	return -1
}
