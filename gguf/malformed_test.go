package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// One malformed input per case of docs/reliability.md §1.4 (50 cases), each built with the
// Writer plus byte surgery, each asserting the specific Rule. File-level defects must fail
// Open; model-level ones (K12–K14, T5, T10, S1–S6, D4) open and fail the accessor the
// engine uses; D3 opens with a warning; D5 is a fault under the mapping.

type tspec struct {
	name string
	typ  Type
	dims []uint64
}

var baseTensors = []tspec{
	{"token_embd.weight", F32, []uint64{8, 4}},
	{"blk.0.ffn_up_exps.weight", Q8_0, []uint64{32, 3}}, // 102 bytes: padded by 26
	{"blk.1.attn_norm.weight", F32, []uint64{5}},
	{"output.weight", F32, []uint64{8, 4}},
}

func baseKVs() []KV {
	kv := func(k string, x any) KV { v, _ := ValueOf(x); return KV{k, v} }
	return []KV{
		kv("general.architecture", "qwen3moe"),
		kv("general.name", "base"),
		kv("x.u32", uint32(7)),
		kv("x.arr", []uint32{1, 2, 3}),
		kv("x.strs", []string{"one", "two"}),
		kv("tokenizer.ggml.tokens", []string{"a", "b", "c", "d"}),
		kv("tokenizer.ggml.scores", []float32{0, -1, -2, -3}),
		kv("tokenizer.ggml.token_type", []int32{1, 1, 1, 1}),
		kv("tokenizer.ggml.eos_token_id", uint32(3)),
		kv("tokenizer.chat_template", "{{ x }}\n"),
		kv("qwen3moe.block_count", uint32(2)),
		kv("qwen3moe.expert_count", uint32(4)),
		kv("qwen3moe.expert_used_count", uint32(2)),
	}
}

// build writes the base KVs plus extra, then tensors (the base set when nil); tensor data
// is a byte pattern that holds no NaN (F32 words 0x0X0X0X0X are tiny finite numbers).
func build(t testing.TB, extra []KV, tensors []tspec) []byte {
	t.Helper()
	w := NewWriter()
	for _, kv := range append(baseKVs(), extra...) {
		noErr(t, w.AddKV(kv.Key, kv.Value), kv.Key)
	}
	if tensors == nil {
		tensors = baseTensors
	}
	for _, ts := range tensors {
		size, rule := ByteSize(ts.typ, ts.dims)
		equal(t, Rule(""), rule, ts.name)
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i % 7)
		}
		noErr(t, w.AddTensor(ts.name, ts.typ, ts.dims, data), ts.name)
	}
	return encode(t, w)
}

func kvOf(k string, x any) KV { v, _ := ValueOf(x); return KV{k, v} }

// find returns the offset of the length-prefixed string s (its length field), which must
// occur exactly once in b.
func find(t testing.TB, b []byte, s string) int {
	t.Helper()
	pat := binary.LittleEndian.AppendUint64(nil, uint64(len(s)))
	pat = append(pat, s...)
	i := bytes.Index(b, pat)
	isTrue(t, i >= 0 && bytes.Index(b[i+1:], pat) < 0, "string not found exactly once:", s)
	return i
}

func typeAt(t testing.TB, b []byte, key string) int  { return find(t, b, key) + 8 + len(key) }
func valueAt(t testing.TB, b []byte, key string) int { return typeAt(t, b, key) + 4 }

// tensor info field offsets
func ndimsAt(t testing.TB, b []byte, name string) int { return find(t, b, name) + 8 + len(name) }
func dimAt(t testing.TB, b []byte, name string, j int) int {
	return ndimsAt(t, b, name) + 4 + 8*j
}
func ttypeAt(t testing.TB, b []byte, name string) int {
	n := ndimsAt(t, b, name)
	return n + 4 + 8*int(binary.LittleEndian.Uint32(b[n:]))
}
func toffAt(t testing.TB, b []byte, name string) int { return ttypeAt(t, b, name) + 4 }

func put16(b []byte, off int, v uint16) []byte { binary.LittleEndian.PutUint16(b[off:], v); return b }
func put32(b []byte, off int, v uint32) []byte { binary.LittleEndian.PutUint32(b[off:], v); return b }
func put64(b []byte, off int, v uint64) []byte { binary.LittleEndian.PutUint64(b[off:], v); return b }

// rename overwrites the bytes of a length-prefixed string with another of the same length.
func rename(t testing.TB, b []byte, from, to string) []byte {
	t.Helper()
	equal(t, len(from), len(to))
	copy(b[find(t, b, from)+8:], to)
	return b
}

type malformed struct {
	rule Rule
	name string
	// file returns the bytes of a file that Open must reject with rule; nil if the case
	// is checked by open instead.
	file func(t testing.TB) []byte
	// open, if set, opens what the case builds and returns the error to check (model-level
	// accessors, split sets, faults); dir is a fresh temp dir.
	open func(t *testing.T, dir string) error
}

func bytesOf(b []byte) func(testing.TB) []byte { return func(testing.TB) []byte { return b } }

// withFile builds a file, opens it (which must succeed) and applies check.
func withFile(build func(t testing.TB) []byte, check func(f *File) error) func(*testing.T, string) error {
	return func(t *testing.T, dir string) error {
		p := filepath.Join(dir, "m.gguf")
		noErr(t, os.WriteFile(p, build(t), 0o644))
		f, err := Open(p)
		noErr(t, err, "the file is structurally valid; the model-level check must catch it")
		defer f.Close()
		return check(f)
	}
}

func base(t testing.TB) []byte { return build(t, nil, nil) }

func malformedCases() []malformed {
	return []malformed{
		// Header
		{RuleTruncatedHeader, "empty", bytesOf(nil), nil},
		{RuleTruncatedHeader, "23_bytes", func(t testing.TB) []byte { return base(t)[:23] }, nil},
		{RuleBadMagic, "ggml_magic", func(t testing.TB) []byte { b := base(t); copy(b, "GGML"); return b }, nil},
		{RuleBadMagic, "binary_garbage", bytesOf([]byte("\x00\xff\x1b[2J plus more than 24 bytes of text")), nil},
		{RuleVersionZero, "v0", func(t testing.TB) []byte { return put32(base(t), 4, 0) }, nil},
		{RuleVersionOne, "v1", func(t testing.TB) []byte { return put32(base(t), 4, 1) }, nil},
		{RuleVersionFuture, "v4", func(t testing.TB) []byte { return put32(base(t), 4, 4) }, nil},
		{RuleEndianness, "big_endian_v3", func(t testing.TB) []byte { return put32(base(t), 4, 0x03000000) }, nil},
		{RuleTensorCount, "n_tensors_max", func(t testing.TB) []byte { return put64(base(t), 8, math.MaxUint64) }, nil},
		{RuleTensorCount, "n_tensors_2^63", func(t testing.TB) []byte { return put64(base(t), 8, 1<<63) }, nil},
		{RuleTensorCount, "n_tensors_over_remaining", func(t testing.TB) []byte {
			b := base(t)
			return put64(b, 8, uint64(len(b)-24)/25+1)
		}, nil},
		{RuleKVCount, "n_kv_max", func(t testing.TB) []byte { return put64(base(t), 16, math.MaxUint64) }, nil},
		{RuleKVCount, "n_kv_over_remaining", func(t testing.TB) []byte {
			b := base(t)
			return put64(b, 16, uint64(len(b)-24)/14+1)
		}, nil},

		// Metadata
		{RuleStringLength, "key_len_huge", func(t testing.TB) []byte {
			b := base(t)
			return put64(b, find(t, b, "x.u32"), math.MaxUint64)
		}, nil},
		{RuleStringLength, "key_len_over_cap", func(t testing.TB) []byte {
			b := base(t)
			return put64(b, find(t, b, "x.u32"), MaxKeyLen+1)
		}, nil},
		{RuleStringLength, "value_len_over_cap", func(t testing.TB) []byte {
			b := base(t)
			return put64(b, valueAt(t, b, "general.name"), MaxStringLen+1)
		}, nil},
		{RuleStringLength, "value_len_over_remaining", func(t testing.TB) []byte {
			b := base(t)
			return put64(b, valueAt(t, b, "general.name"), uint64(len(b)))
		}, nil},
		{RuleEmptyKey, "empty_key", func(t testing.TB) []byte {
			b := base(t)
			return put64(b, find(t, b, "x.u32"), 0)
		}, nil},
		{RuleDuplicateKey, "duplicate_key", func(t testing.TB) []byte {
			b := build(t, []KV{kvOf("dup.a", uint8(1)), kvOf("dup.b", uint8(2))}, nil)
			return rename(t, b, "dup.b", "dup.a")
		}, nil},
		{RuleValueType, "type_13", func(t testing.TB) []byte {
			b := base(t)
			return put32(b, typeAt(t, b, "x.u32"), 13)
		}, nil},
		{RuleValueType, "type_negative", func(t testing.TB) []byte {
			b := base(t)
			return put32(b, typeAt(t, b, "x.u32"), 0xFFFFFFFF)
		}, nil},
		{RuleValueType, "array_elem_type_13", func(t testing.TB) []byte {
			b := base(t)
			return put32(b, valueAt(t, b, "x.arr"), 13)
		}, nil},
		{RuleValueType, "bool_byte_2", func(t testing.TB) []byte {
			b := build(t, []KV{kvOf("x.flag", true)}, nil)
			b[valueAt(t, b, "x.flag")] = 2
			return b
		}, nil},
		{RuleValueType, "bool_array_byte_2", func(t testing.TB) []byte {
			b := build(t, []KV{kvOf("x.flags", []bool{true, false})}, nil)
			b[valueAt(t, b, "x.flags")+4+8+1] = 2
			return b
		}, nil},
		{RuleNestedArray, "array_of_arrays", func(t testing.TB) []byte {
			b := base(t)
			return put32(b, valueAt(t, b, "x.arr"), uint32(TypeArray))
		}, nil},
		{RuleArrayLength, "count_2^63", func(t testing.TB) []byte {
			b := base(t)
			return put64(b, valueAt(t, b, "x.arr")+4, 1<<63)
		}, nil},
		{RuleArrayLength, "count_times_size_wraps", func(t testing.TB) []byte {
			b := base(t)
			return put64(b, valueAt(t, b, "x.arr")+4, 1<<62) // ×4 = 2^64 → 0 if unchecked
		}, nil},
		{RuleArrayLength, "count_over_remaining", func(t testing.TB) []byte {
			b := base(t)
			return put64(b, valueAt(t, b, "x.arr")+4, uint64(len(b))/4)
		}, nil},
		{RuleStringArray, "count_times_8_over_remaining", func(t testing.TB) []byte {
			b := base(t)
			return put64(b, valueAt(t, b, "x.strs")+4, uint64(len(b))/8)
		}, nil},
		{RuleStringArray, "element_oversized", func(t testing.TB) []byte {
			b := base(t)
			return put64(b, find(t, b, "two"), MaxStringLen+1)
		}, nil},
		{RuleAlignmentType, "alignment_int32", func(t testing.TB) []byte {
			b := build(t, []KV{kvOf("general.alignmenX", int32(32))}, nil)
			return rename(t, b, "general.alignmenX", KeyAlignment)
		}, nil},
		{RuleAlignmentValue, "alignment_0", func(t testing.TB) []byte {
			b := build(t, []KV{kvOf(KeyAlignment, uint32(32))}, nil)
			return put32(b, valueAt(t, b, KeyAlignment), 0)
		}, nil},
		{RuleAlignmentValue, "alignment_13", func(t testing.TB) []byte {
			b := build(t, []KV{kvOf(KeyAlignment, uint32(32))}, nil)
			return put32(b, valueAt(t, b, KeyAlignment), 13)
		}, nil},
		{RuleAlignmentValue, "alignment_4", func(t testing.TB) []byte {
			b := build(t, []KV{kvOf(KeyAlignment, uint32(32))}, nil)
			return put32(b, valueAt(t, b, KeyAlignment), 4)
		}, nil},
		{RuleAlignmentHuge, "alignment_2^31", func(t testing.TB) []byte {
			b := build(t, []KV{kvOf(KeyAlignment, uint32(32))}, nil)
			return put32(b, valueAt(t, b, KeyAlignment), 1<<31)
		}, nil},
		{RuleEncoding, "non_ascii_key", func(t testing.TB) []byte {
			b := base(t)
			b[find(t, b, "x.u32")+8] = 0xC3
			return b
		}, nil},
		{RuleEncoding, "invalid_utf8_value", func(t testing.TB) []byte {
			b := base(t)
			b[valueAt(t, b, "general.name")+8] = 0xFF
			return b
		}, nil},
		{RuleArrayElemType, "scores_as_u8", nil, withFile(func(t testing.TB) []byte {
			b := build(t, []KV{kvOf("tokenizer.ggml.scorez", []uint8{0, 1, 2, 3})}, nil)
			b = rename(t, b, "tokenizer.ggml.scores", "tokenizer.ggml.xxxxxx")
			return rename(t, b, "tokenizer.ggml.scorez", "tokenizer.ggml.scores")
		}, func(f *File) error { _, err := f.Float32s(KeyScores); return err })},
		{RuleArrayMismatch, "scores_vs_tokens", nil, withFile(func(t testing.TB) []byte {
			b := build(t, []KV{kvOf("tokenizer.ggml.scorez", []float32{0, 1, 2})}, nil)
			b = rename(t, b, "tokenizer.ggml.scores", "tokenizer.ggml.xxxxxx")
			return rename(t, b, "tokenizer.ggml.scorez", "tokenizer.ggml.scores")
		}, func(f *File) error { _, err := f.VocabSize(); return err })},
		{RuleArrayMismatch, "vocab_vs_token_embd", nil, withFile(func(t testing.TB) []byte {
			b := base(t)
			put64(b, dimAt(t, b, "token_embd.weight", 0), 16) // [8,4] → [16,2]: same bytes, 2 rows
			return put64(b, dimAt(t, b, "token_embd.weight", 1), 2)
		}, func(f *File) error { _, err := f.VocabSize(); return err })},
		{RuleScalarType, "block_count_as_string", nil, withFile(func(t testing.TB) []byte {
			b := build(t, []KV{kvOf("qwen3moe.block_counX", "2")}, nil)
			b = rename(t, b, "qwen3moe.block_count", "qwen3moe.xxxxx_count")
			return rename(t, b, "qwen3moe.block_counX", "qwen3moe.block_count")
		}, func(f *File) error { _, err := f.Uint32("qwen3moe.block_count"); return err })},
		{RuleScalarType, "expert_count_as_f32", nil, withFile(func(t testing.TB) []byte {
			b := base(t)
			return put32(b, typeAt(t, b, "qwen3moe.expert_count"), uint32(TypeFloat32))
		}, func(f *File) error { _, err := f.Int("qwen3moe.expert_count"); return err })},

		// Tensor infos
		{RuleTensorName, "name_len_64", func(t testing.TB) []byte {
			long := strings.Repeat("n", 63)
			b := build(t, nil, append([]tspec{{long, F32, []uint64{1}}}, baseTensors...))
			return put64(b, find(t, b, long), 64)
		}, nil},
		{RuleTensorName, "name_len_huge", func(t testing.TB) []byte {
			b := base(t)
			return put64(b, find(t, b, "output.weight"), math.MaxUint64)
		}, nil},
		{RuleTensorName, "name_not_utf8", func(t testing.TB) []byte {
			b := base(t)
			b[find(t, b, "output.weight")+8] = 0xFE
			return b
		}, nil},
		{RuleTensorName, "name_bidi_override", func(t testing.TB) []byte {
			b := base(t)
			copy(b[find(t, b, "output.weight")+8:], "\u202e") // 3 bytes over "out"
			return b
		}, nil},
		{RuleTensorName, "name_empty", func(t testing.TB) []byte {
			b := base(t)
			return put64(b, find(t, b, "output.weight"), 0)
		}, nil},
		{RuleDuplicateTensor, "duplicate_name", func(t testing.TB) []byte {
			b := build(t, nil, append(baseTensors[:len(baseTensors):len(baseTensors)], tspec{"dup.a", F32, []uint64{4}}, tspec{"dup.b", F32, []uint64{4}}))
			return rename(t, b, "dup.b", "dup.a")
		}, nil},
		{RuleNDims, "n_dims_5", func(t testing.TB) []byte {
			b := base(t)
			return put32(b, ndimsAt(t, b, "output.weight"), 5)
		}, nil},
		{RuleNDims, "n_dims_max", func(t testing.TB) []byte {
			b := base(t)
			return put32(b, ndimsAt(t, b, "output.weight"), math.MaxUint32)
		}, nil},
		{RuleNDims, "n_dims_0", func(t testing.TB) []byte {
			b := base(t)
			return put32(b, ndimsAt(t, b, "output.weight"), 0)
		}, nil},
		{RuleDimNegative, "dim_2^63", func(t testing.TB) []byte {
			b := base(t)
			return put64(b, dimAt(t, b, "output.weight", 1), 1<<63)
		}, nil},
		{RuleZeroDim, "zero_dim_weight", nil, withFile(func(t testing.TB) []byte {
			return build(t, nil, []tspec{{"token_embd.weight", F32, []uint64{8, 0}}})
		}, func(f *File) error { _, err := f.Expect("token_embd.weight", []uint64{8, 4}); return err })},
		{RuleElementOverflow, "ne_product", func(t testing.TB) []byte {
			b := base(t)
			put64(b, dimAt(t, b, "output.weight", 0), 1<<40)
			return put64(b, dimAt(t, b, "output.weight", 1), 1<<40)
		}, nil},
		{RuleByteOverflow, "f32_2^62_elements", func(t testing.TB) []byte {
			b := base(t)
			return put64(b, dimAt(t, b, "blk.1.attn_norm.weight", 0), 1<<62) // ×4 bytes = 2^64
		}, nil},
		{RuleTensorType, "type_99", func(t testing.TB) []byte {
			b := base(t)
			return put32(b, ttypeAt(t, b, "output.weight"), 99)
		}, nil},
		{RuleTensorType, "type_negative", func(t testing.TB) []byte {
			b := base(t)
			return put32(b, ttypeAt(t, b, "output.weight"), math.MaxUint32)
		}, nil},
		{RuleTensorType, "retired_q4_2", func(t testing.TB) []byte {
			b := base(t)
			return put32(b, ttypeAt(t, b, "output.weight"), 4)
		}, nil},
		{RuleBlockMultiple, "q8_0_ne0_33", func(t testing.TB) []byte {
			b := base(t)
			return put64(b, dimAt(t, b, "blk.0.ffn_up_exps.weight", 0), 33)
		}, nil},
		{RuleUnsupportedType, "q5_k_weight", nil, withFile(func(t testing.TB) []byte {
			return build(t, nil, []tspec{{"token_embd.weight", Q5_K, []uint64{256, 4}}})
		}, func(f *File) error { return f.CheckSupportedTypes([]Type{F32, F16, Q8_0, Q4_K}) })},
		{RuleTensorAlign, "offset_unaligned", func(t testing.TB) []byte {
			b := base(t)
			at := toffAt(t, b, "blk.1.attn_norm.weight")
			return put64(b, at, binary.LittleEndian.Uint64(b[at:])+8)
		}, nil},
		{RuleTensorOffset, "offset_max", func(t testing.TB) []byte {
			b := base(t)
			return put64(b, toffAt(t, b, "output.weight"), math.MaxUint64)
		}, nil},
		{RuleTensorOffset, "offset_wraps_aligned", func(t testing.TB) []byte {
			b := base(t)
			return put64(b, toffAt(t, b, "output.weight"), math.MaxUint64-31)
		}, nil},
		{RulePaddingOverflow, "pad_wraps", func(t testing.TB) []byte {
			b := base(t)
			return put64(b, dimAt(t, b, "blk.1.attn_norm.weight", 0), 1<<62-1) // 2^64-4 bytes
		}, nil},
		{RuleDataSizeOverflow, "running_total_wraps", func(t testing.TB) []byte {
			b := build(t, nil, append(baseTensors[:len(baseTensors):len(baseTensors)], tspec{"blk.1.ffn_norm.weight", F32, []uint64{5}}))
			put64(b, dimAt(t, b, "blk.1.attn_norm.weight", 0), 1<<61+16)       // 2^63+64 bytes
			return put64(b, dimAt(t, b, "blk.1.ffn_norm.weight", 0), 1<<61+16) // twice: 2^64+128
		}, nil},
		{RuleTensorOverlap, "overlap", func(t testing.TB) []byte {
			b := base(t)
			return put64(b, toffAt(t, b, "blk.1.attn_norm.weight"), 0)
		}, nil},
		{RuleTensorOverlap, "gap", func(t testing.TB) []byte {
			b := base(t)
			at := toffAt(t, b, "output.weight")
			return put64(b, at, binary.LittleEndian.Uint64(b[at:])+32)
		}, nil},
		{RuleTensorOverlap, "out_of_order", func(t testing.TB) []byte {
			b := base(t)
			a1, a2 := toffAt(t, b, "blk.0.ffn_up_exps.weight"), toffAt(t, b, "blk.1.attn_norm.weight")
			o1, o2 := binary.LittleEndian.Uint64(b[a1:]), binary.LittleEndian.Uint64(b[a2:])
			put64(b, a1, o2)
			return put64(b, a2, o1)
		}, nil},
		{RuleTotalOverflow, "data_end_over_int64", func(t testing.TB) []byte {
			b := base(t)
			return put64(b, dimAt(t, b, "blk.1.attn_norm.weight", 0), 1<<61) // 2^63 bytes
		}, nil},

		// Data section
		{RuleDataStart, "data_start_beyond_eof", func(t testing.TB) []byte {
			b := base(t)
			end := toffAt(t, b, "output.weight") + 8 // end of the tensor infos
			isTrue(t, end%32 != 0, "base layout must leave padding before the data")
			return b[:end]
		}, nil},
		{RuleTruncated, "last_tensor_cut", func(t testing.TB) []byte {
			b := base(t)
			return b[:len(b)-1]
		}, nil},
		{RuleTruncated, "tensor_info_cut", func(t testing.TB) []byte {
			b := base(t)
			return b[:ttypeAt(t, b, "output.weight")+2]
		}, nil},
		{RuleTrailingBytes, "trailing_bytes_warn", nil, func(t *testing.T, dir string) error {
			p := filepath.Join(dir, "m.gguf")
			noErr(t, os.WriteFile(p, append(base(t), make([]byte, 100)...), 0o644))
			f, err := Open(p)
			noErr(t, err, "trailing bytes are accepted")
			defer f.Close()
			equal(t, 1, len(f.Warnings()))
			return f.Warnings()[0]
		}},
		{RuleNonFinite, "f32_nan", nil, withFile(func(t testing.TB) []byte {
			b := base(t)
			off := 0
			f, err := openBytes(t, b)
			noErr(t, err)
			ti, _ := f.Tensor("output.weight")
			off = int(ti.FileOffset) + 4*5
			f.Close()
			return put32(b, off, 0x7FC00000)
		}, func(f *File) error { return f.CheckFinite("output.weight") })},
		{RuleNonFinite, "q8_0_inf_scale", nil, withFile(func(t testing.TB) []byte {
			b := base(t)
			f, err := openBytes(t, b)
			noErr(t, err)
			ti, _ := f.Tensor("blk.0.ffn_up_exps.weight")
			f.Close()
			return put16(b, int(ti.FileOffset)+2*34, 0x7C00) // third block's d = +Inf
		}, func(f *File) error { return f.CheckFinite("blk.0.ffn_up_exps.weight") })},
		{RuleFault, "truncated_under_mapping", nil, func(t *testing.T, dir string) error {
			if !usesMmap {
				t.Skip("this platform reads files into memory: nothing can fault")
			}
			big := []tspec{{"token_embd.weight", F32, []uint64{4096, 8}}} // 128 KiB: many pages
			p := filepath.Join(dir, "m.gguf")
			noErr(t, os.WriteFile(p, build(t, nil, big), 0o644))
			f, err := Open(p)
			noErr(t, err)
			defer f.Close()
			data, err := f.Data("token_embd.weight")
			noErr(t, err)
			noErr(t, os.Truncate(p, 0))
			dst := make([]byte, len(data))
			_, err = CopyOut(dst, data)
			return err
		}},

		// Model semantics
		{RuleTensorSet, "missing_required", nil, withFile(base, func(f *File) error {
			return f.CheckTensorSet([]string{"token_embd.weight", "blk.0.ffn_up_exps.weight", "blk.1.attn_norm.weight", "output.weight", "output_norm.weight"}, nil)
		})},
		{RuleTensorSet, "unexpected_extra", nil, withFile(base, func(f *File) error {
			return f.CheckTensorSet([]string{"token_embd.weight", "blk.0.ffn_up_exps.weight", "output.weight"}, nil)
		})},
		{RuleTensorShape, "shape_vs_hparams", nil, withFile(base, func(f *File) error {
			_, err := f.Expect("blk.0.ffn_up_exps.weight", []uint64{32, 3, 4}) // n_expert = 4
			return err
		})},
		{RuleHparamRange, "expert_used_0", nil, withFile(func(t testing.TB) []byte {
			b := base(t)
			return put32(b, valueAt(t, b, "qwen3moe.expert_used_count"), 0)
		}, func(f *File) error { _, err := f.IntRange("qwen3moe.expert_used_count", 1, 4); return err })},
		{RuleNameIndex, "blk_index_out_of_range", nil, withFile(func(t testing.TB) []byte {
			b := base(t)
			return rename(t, b, "blk.1.attn_norm.weight", "blk.9.attn_norm.weight")
		}, func(f *File) error {
			for _, ti := range f.Tensors() {
				if _, _, err := f.BlockIndex(ti.Name, 2); err != nil {
					return err
				}
			}
			return nil
		})},
		{RuleTokenizer, "eos_beyond_vocab", nil, withFile(func(t testing.TB) []byte {
			b := base(t)
			return put32(b, valueAt(t, b, "tokenizer.ggml.eos_token_id"), 4)
		}, func(f *File) error { _, err := f.TokenID("tokenizer.ggml.eos_token_id"); return err })},
		{RuleChatTemplate, "template_escape_sequence", nil, withFile(func(t testing.TB) []byte {
			b := base(t)
			b[valueAt(t, b, KeyChatTemplate)+8+2] = 0x1b // "{{\x1bx }}": a terminal escape
			return b
		}, func(f *File) error { _, err := f.ChatTemplate(); return err })},
		{RuleSplit, "missing_shard", nil, func(t *testing.T, dir string) error {
			paths := writeSplit(t, dir, "m", 2)
			noErr(t, os.Remove(paths[1]))
			_, err := Open(paths[0])
			return err
		}},
		{RuleSplit, "split_no_wrong", nil, func(t *testing.T, dir string) error {
			paths := writeSplit(t, dir, "m", 2)
			b, _ := os.ReadFile(paths[1])
			noErr(t, os.WriteFile(paths[1], put16(b, valueAt(t, b, KeySplitNo), 0), 0o644))
			_, err := Open(paths[0])
			return err
		}},
		{RuleSplit, "shard_from_other_model", nil, func(t *testing.T, dir string) error {
			paths := writeSplit(t, dir, "m", 2)
			b, _ := os.ReadFile(paths[1])
			noErr(t, os.WriteFile(paths[1], put32(b, valueAt(t, b, KeySplitTensorsCount), 7), 0o644))
			_, err := Open(paths[0])
			return err
		}},
		{RuleSplit, "shard_opened_alone", nil, func(t *testing.T, dir string) error {
			paths := writeSplit(t, dir, "m", 2)
			lone := filepath.Join(dir, "renamed.gguf")
			noErr(t, os.Rename(paths[0], lone))
			_, err := Open(lone)
			return err
		}},
	}
}

func openBytes(t testing.TB, b []byte) (*File, error) {
	return Open(writeTemp(t, "x.gguf", b))
}

// writeSplit writes the base model as n shards (two tensors per shard).
func writeSplit(t testing.TB, dir, prefix string, n int) []string {
	w := NewWriter()
	for _, kv := range baseKVs() {
		noErr(t, w.AddKV(kv.Key, kv.Value))
	}
	for _, ts := range baseTensors {
		size, _ := ByteSize(ts.typ, ts.dims)
		noErr(t, w.AddTensor(ts.name, ts.typ, ts.dims, make([]byte, size)))
	}
	paths, err := w.WriteShards(filepath.Join(dir, prefix), SplitOptions{MaxTensors: (len(baseTensors) + n - 1) / n})
	noErr(t, err)
	equal(t, n, len(paths))
	return paths
}

func TestMalformed(t *testing.T) {
	seen := map[Rule]bool{}
	for _, c := range malformedCases() {
		seen[c.rule] = true
		t.Run(string(c.rule)+"/"+c.name, func(t *testing.T) {
			var err error
			if c.file != nil {
				b := c.file(t)
				p := writeTemp(t, "m.gguf", b)
				var f *File
				f, err = Open(p)
				if err == nil {
					f.Close()
				}
			} else {
				err = c.open(t, t.TempDir())
			}
			var ge *Error
			isTrue(t, errors.As(err, &ge), "want an *Error with rule", c.rule, "got", err)
			equal(t, c.rule, ge.Rule, err.Error())
			isTrue(t, ge.Path != "", "error names no file")
			isTrue(t, strings.Contains(err.Error(), string(c.rule)+" "), "message lacks the rule id:", err)
			if c.file != nil {
				isTrue(t, ge.Offset >= 0, "structural error without an offset:", err)
			}
		})
	}
	for _, id := range checklistIDs() {
		isTrue(t, seen[id], "no malformed case for", id)
	}
}

// checklistIDs lists the 50 case ids of reliability.md §1.4, written out independently
// of the Rule constants.
func checklistIDs() []Rule {
	var ids []Rule
	for _, g := range []struct {
		p string
		n int
	}{{"H", 8}, {"K", 14}, {"T", 16}, {"D", 5}, {"S", 7}} {
		for i := 1; i <= g.n; i++ {
			ids = append(ids, Rule(g.p+itoa(i)))
		}
	}
	return ids
}
