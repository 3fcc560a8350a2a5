package quant

import (
	"fmt"
	"sort"
)

// Type is a ggml type id, the same number GGUF stores in a tensor info.
type Type uint32

// The ggml types this package knows. The ids are ggml's enum ggml_type (see
// docs/quant-formats.md §2); they are also what GGUF files store.
const (
	F32     Type = 0
	F16     Type = 1
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q4_K    Type = 12
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ3_S   Type = 21
	IQ1_M   Type = 29
	BF16    Type = 30
	Q2_0    Type = 42
)

// Info describes one type: block geometry and how ggml uses it.
type Info struct {
	Type       Type
	Name       string // ggml's type name, e.g. "q4_K"
	BlockElems int    // elements per block (1 for F32/F16/BF16)
	BlockBytes int    // bytes per block
	Weight     bool   // a weight format: DecodeRow and the dots accept it
	Activation bool   // an activation format (Q8_0, Q8_1, Q8_K)
	// VecDotType is the activation type ggml's CPU vec_dot pairs with these weights
	// (ggml's vec_dot_type); meaningful only when Weight is true.
	VecDotType Type
}

// typeTable is keyed by ggml type id; an entry with BlockBytes == 0 is a type this
// package does not know. Numbers: docs/quant-formats.md §2 and §5.0.
var typeTable = [...]Info{
	F32:     {F32, "f32", 1, 4, false, false, F32},
	F16:     {F16, "f16", 1, 2, true, false, F16},
	Q8_0:    {Q8_0, "q8_0", 32, 34, true, true, Q8_0},
	Q8_1:    {Q8_1, "q8_1", 32, 36, false, true, 0},
	Q4_K:    {Q4_K, "q4_K", 256, 144, true, false, Q8_K},
	Q6_K:    {Q6_K, "q6_K", 256, 210, true, false, Q8_K},
	Q8_K:    {Q8_K, "q8_K", 256, 292, false, true, 0},
	IQ2_XS:  {IQ2_XS, "iq2_xs", 256, 74, true, false, Q8_K},
	IQ3_XXS: {IQ3_XXS, "iq3_xxs", 256, 98, true, false, Q8_K},
	IQ3_S:   {IQ3_S, "iq3_s", 256, 110, true, false, Q8_K},
	IQ1_M:   {IQ1_M, "iq1_m", 256, 56, true, false, Q8_K},
	BF16:    {BF16, "bf16", 1, 2, true, false, BF16},
	Q2_0:    {Q2_0, "q2_0", 64, 18, true, false, Q8_0},
}

// Lookup returns the description of t, and false if this package does not know t.
func Lookup(t Type) (Info, bool) {
	if int(t) >= len(typeTable) || typeTable[t].BlockBytes == 0 {
		return Info{}, false
	}
	return typeTable[t], true
}

// Types returns every known type, sorted by id.
func Types() []Info {
	var out []Info
	for _, in := range typeTable {
		if in.BlockBytes != 0 {
			out = append(out, in)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// WeightTypes returns the weight formats (Info.Weight), sorted by id.
func WeightTypes() []Type {
	var out []Type
	for _, in := range Types() {
		if in.Weight {
			out = append(out, in.Type)
		}
	}
	return out
}

// ParseType returns the type with ggml's name (e.g. "q4_K", "iq3_s").
func ParseType(name string) (Type, error) {
	for _, in := range Types() {
		if in.Name == name {
			return in.Type, nil
		}
	}
	return 0, fmt.Errorf("quant: unknown type name %q (known: f32, f16, bf16, q8_0, q8_1, q8_K, q2_0, q4_K, q6_K, iq2_xs, iq3_xxs, iq3_s, iq1_m)", name)
}

// String returns ggml's name for t, or "type(N)" for an unknown id.
func (t Type) String() string {
	if in, ok := Lookup(t); ok {
		return in.Name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockElems returns the elements per block of t, or 0 for an unknown type.
func (t Type) BlockElems() int {
	in, _ := Lookup(t)
	return in.BlockElems
}

// BlockBytes returns the bytes per block of t, or 0 for an unknown type.
func (t Type) BlockBytes() int {
	in, _ := Lookup(t)
	return in.BlockBytes
}

// RowBytes returns the size in bytes of a row of k elements of type t. k must be a
// positive multiple of the block size (ggml rejects other tensors too).
func (t Type) RowBytes(k int) (int, error) {
	in, ok := Lookup(t)
	if !ok {
		return 0, fmt.Errorf("quant: unknown type id %d", uint32(t))
	}
	if k <= 0 || k%in.BlockElems != 0 {
		return 0, fmt.Errorf("quant: %s row of %d elements: the length must be a positive multiple of the block size %d", in.Name, k, in.BlockElems)
	}
	return k / in.BlockElems * in.BlockBytes, nil
}

// checkRow validates a row of k elements of type t stored in src.
func checkRow(t Type, src []byte, k int) (Info, error) {
	in, ok := Lookup(t)
	if !ok {
		return in, fmt.Errorf("quant: unknown type id %d", uint32(t))
	}
	n, err := t.RowBytes(k)
	if err != nil {
		return in, err
	}
	if len(src) != n {
		return in, fmt.Errorf("quant: %s row of %d elements is %d bytes, got %d", in.Name, k, n, len(src))
	}
	return in, nil
}
