package gguf

import (
	"math"
	"strconv"
)

// Type is a ggml tensor type id (enum ggml_type), stored verbatim in GGUF tensor infos.
type Type uint32

// The ggml type ids this package knows. Ids 4, 5 (Q4_2, Q4_3), 31–33 and 36–38 (repacked
// layouts) are retired and rejected; 40 (NVFP4) and 41 (Q1_0) exist in ggml but have no row
// in the table yet, so files using them are rejected as unknown rather than mis-sized.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
	MXFP4   Type = 39
	Q2_0    Type = 42
)

// TypeInfo is one row of the type table: a block of BlockSize elements takes BlockBytes bytes.
// Scales lists the byte offsets inside a block of its fp16 scale fields (fp32 for Q8_K), used
// by CheckFinite; nil for plain float types (every element is checked) and integer types.
type TypeInfo struct {
	Name       string
	BlockSize  uint64 // elements per block (ne[0] must be a multiple)
	BlockBytes uint64 // bytes per block
	Scales     []int  // byte offsets of the block's fp16 scales (see CheckFinite)
	Float      bool   // elements are IEEE floats (F16, BF16, F32, F64)
	Integer    bool   // elements are plain integers (I8..I64)
}

// typeTable is ggml's type traits, as facts: sizes follow from each block struct
// (e.g. Q4_K = 2×fp16 + 12 scale bytes + 128 quant bytes = 144 for 256 elements).
var typeTable = map[Type]TypeInfo{
	F32:     {Name: "F32", BlockSize: 1, BlockBytes: 4, Float: true},
	F16:     {Name: "F16", BlockSize: 1, BlockBytes: 2, Float: true},
	Q4_0:    {Name: "Q4_0", BlockSize: 32, BlockBytes: 18, Scales: []int{0}},       // d, qs[16]
	Q4_1:    {Name: "Q4_1", BlockSize: 32, BlockBytes: 20, Scales: []int{0, 2}},    // d, m, qs[16]
	Q5_0:    {Name: "Q5_0", BlockSize: 32, BlockBytes: 22, Scales: []int{0}},       // d, qh[4], qs[16]
	Q5_1:    {Name: "Q5_1", BlockSize: 32, BlockBytes: 24, Scales: []int{0, 2}},    // d, m, qh[4], qs[16]
	Q8_0:    {Name: "Q8_0", BlockSize: 32, BlockBytes: 34, Scales: []int{0}},       // d, qs[32]
	Q8_1:    {Name: "Q8_1", BlockSize: 32, BlockBytes: 36, Scales: []int{0, 2}},    // d, s, qs[32]
	Q2_K:    {Name: "Q2_K", BlockSize: 256, BlockBytes: 84, Scales: []int{80, 82}}, // scales[16], qs[64], d, dmin
	Q3_K:    {Name: "Q3_K", BlockSize: 256, BlockBytes: 110, Scales: []int{108}},   // hmask[32], qs[64], scales[12], d
	Q4_K:    {Name: "Q4_K", BlockSize: 256, BlockBytes: 144, Scales: []int{0, 2}},  // d, dmin, scales[12], qs[128]
	Q5_K:    {Name: "Q5_K", BlockSize: 256, BlockBytes: 176, Scales: []int{0, 2}},  // d, dmin, scales[12], qh[32], qs[128]
	Q6_K:    {Name: "Q6_K", BlockSize: 256, BlockBytes: 210, Scales: []int{208}},   // ql[128], qh[64], scales[16], d
	Q8_K:    {Name: "Q8_K", BlockSize: 256, BlockBytes: 292, Scales: []int{-1}},    // d (fp32), qs[256], bsums[16]
	IQ2_XXS: {Name: "IQ2_XXS", BlockSize: 256, BlockBytes: 66, Scales: []int{0}},   // d, qs[32]u16
	IQ2_XS:  {Name: "IQ2_XS", BlockSize: 256, BlockBytes: 74, Scales: []int{0}},    // d, qs[32]u16, scales[8]
	IQ3_XXS: {Name: "IQ3_XXS", BlockSize: 256, BlockBytes: 98, Scales: []int{0}},   // d, qs[96]
	IQ1_S:   {Name: "IQ1_S", BlockSize: 256, BlockBytes: 50, Scales: []int{0}},     // d, qs[32], qh[8]u16
	IQ4_NL:  {Name: "IQ4_NL", BlockSize: 32, BlockBytes: 18, Scales: []int{0}},     // d, qs[16]
	IQ3_S:   {Name: "IQ3_S", BlockSize: 256, BlockBytes: 110, Scales: []int{0}},    // d, qs[64], qh[8], signs[32], scales[4]
	IQ2_S:   {Name: "IQ2_S", BlockSize: 256, BlockBytes: 82, Scales: []int{0}},     // d, qs[64], qh[8], scales[8]
	IQ4_XS:  {Name: "IQ4_XS", BlockSize: 256, BlockBytes: 136, Scales: []int{0}},   // d, scales_h, scales_l[4], qs[128]
	I8:      {Name: "I8", BlockSize: 1, BlockBytes: 1, Integer: true},
	I16:     {Name: "I16", BlockSize: 1, BlockBytes: 2, Integer: true},
	I32:     {Name: "I32", BlockSize: 1, BlockBytes: 4, Integer: true},
	I64:     {Name: "I64", BlockSize: 1, BlockBytes: 8, Integer: true},
	F64:     {Name: "F64", BlockSize: 1, BlockBytes: 8, Float: true},
	IQ1_M:   {Name: "IQ1_M", BlockSize: 256, BlockBytes: 56, Scales: []int{-2}}, // qs[32], qh[16], scales[8] (fp16 scale spread over the top nibbles)
	BF16:    {Name: "BF16", BlockSize: 1, BlockBytes: 2, Float: true},
	TQ1_0:   {Name: "TQ1_0", BlockSize: 256, BlockBytes: 54, Scales: []int{52}}, // qs[48], qh[4], d
	TQ2_0:   {Name: "TQ2_0", BlockSize: 256, BlockBytes: 66, Scales: []int{64}}, // qs[64], d
	MXFP4:   {Name: "MXFP4", BlockSize: 32, BlockBytes: 17},                     // e (E8M0), qs[16]
	Q2_0:    {Name: "Q2_0", BlockSize: 64, BlockBytes: 18, Scales: []int{0}},    // d, qs[16]
}

// Info returns the type's table row; ok is false for unknown and retired ids.
func (t Type) Info() (TypeInfo, bool) {
	ti, ok := typeTable[t]
	return ti, ok
}

// Known reports whether t has a row in the type table.
func (t Type) Known() bool { _, ok := typeTable[t]; return ok }

// String is the ggml name ("Q4_K"), or "type(N)" for an id without a row.
func (t Type) String() string {
	if ti, ok := typeTable[t]; ok {
		return ti.Name
	}
	return "type(" + strconv.FormatUint(uint64(t), 10) + ")"
}

// Types lists every known type in id order.
func Types() []Type {
	out := make([]Type, 0, len(typeTable))
	for id := Type(0); id < 64; id++ {
		if _, ok := typeTable[id]; ok {
			out = append(out, id)
		}
	}
	return out
}

// TypeByName returns the type with ggml name name ("IQ3_S"); ok is false if none.
func TypeByName(name string) (Type, bool) {
	for t, ti := range typeTable {
		if ti.Name == name {
			return t, true
		}
	}
	return 0, false
}

// ByteSize returns the bytes a tensor of type t with dims ne occupies, with every step
// checked. It returns the Rule that fails (T8 unknown type, T9 ne[0] not a multiple of the
// block, T6 element count over 2^63-1, T7 byte size over 64 bits) or "" and the size.
// Zero dimensions are valid and give 0 bytes; nothing is divided by a dim.
func ByteSize(t Type, ne []uint64) (uint64, Rule) {
	ti, ok := typeTable[t]
	if !ok {
		return 0, RuleTensorType
	}
	if len(ne) > 0 && ne[0]%ti.BlockSize != 0 {
		return 0, RuleBlockMultiple
	}
	n := uint64(1)
	for _, d := range ne {
		if d == 0 {
			return 0, "" // a zero-element tensor, whatever the other dims
		}
	}
	for _, d := range ne {
		var ok bool
		if n, ok = mulU64(n, d); !ok || n > math.MaxInt64 {
			return 0, RuleElementOverflow
		}
	}
	size, ok := mulU64(n/ti.BlockSize, ti.BlockBytes)
	if !ok {
		return 0, RuleByteOverflow
	}
	return size, ""
}
