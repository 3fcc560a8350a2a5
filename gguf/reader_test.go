package gguf

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestTypeTable checks every row against the block struct's fields added up here (ggml's
// block layouts), and the rows docs/quant-formats.md §2 lists.
func TestTypeTable(t *testing.T) {
	const qk = 256              // K-quant super-block
	want := map[Type][2]uint64{ // {elements per block, bytes per block}
		F32: {1, 4}, F16: {1, 2}, BF16: {1, 2}, F64: {1, 8},
		I8: {1, 1}, I16: {1, 2}, I32: {1, 4}, I64: {1, 8},
		Q4_0:    {32, 2 + 32/2},                        // d, 4-bit quants
		Q4_1:    {32, 2 + 2 + 32/2},                    // d, m
		Q5_0:    {32, 2 + 4 + 32/2},                    // d, qh (1 bit each), low nibbles
		Q5_1:    {32, 2 + 2 + 4 + 32/2},                // d, m, qh, low nibbles
		Q8_0:    {32, 2 + 32},                          // d, int8
		Q8_1:    {32, 2 + 2 + 32},                      // d, s, int8
		Q2_K:    {qk, qk/16 + qk/4 + 2 + 2},            // 4-bit scale+min per 16, 2-bit quants, d, dmin
		Q3_K:    {qk, qk/8 + qk/4 + 12 + 2},            // hmask, low 2 bits, 6-bit scales, d
		Q4_K:    {qk, 2 + 2 + 12 + qk/2},               // d, dmin, scales, nibbles
		Q5_K:    {qk, 2 + 2 + 12 + qk/8 + qk/2},        // d, dmin, scales, qh, nibbles
		Q6_K:    {qk, qk/2 + qk/4 + qk/16 + 2},         // ql, qh, int8 scales, d
		Q8_K:    {qk, 4 + qk + qk/16*2},                // fp32 d, int8, int16 bsums
		IQ2_XXS: {qk, 2 + qk/8*2},                      // d, u16 qs
		IQ2_XS:  {qk, 2 + qk/8*2 + qk/32},              // d, u16 qs, scales
		IQ3_XXS: {qk, 2 + 3*qk/8},                      // d, grid indices + signs
		IQ1_S:   {qk, 2 + qk/8 + qk/32*2},              // d, qs, u16 qh
		IQ4_NL:  {32, 2 + 32/2},                        // d, nibbles
		IQ3_S:   {qk, 2 + qk/4 + qk/32 + qk/8 + qk/64}, // d, qs, qh, signs, scales
		IQ2_S:   {qk, 2 + qk/4 + qk/32 + qk/32},        // d, qs (+signs), qh, scales
		IQ4_XS:  {qk, 2 + 2 + qk/64 + qk/2},            // d, scales_h, scales_l, nibbles
		IQ1_M:   {qk, qk/8 + qk/16 + qk/32},            // qs, qh, scales (scale folded in)
		TQ1_0:   {qk, (qk-4*qk/64)/5 + qk/64 + 2},      // base-3 packed, qh, d
		TQ2_0:   {qk, qk/4 + 2},                        // 2-bit, d
		MXFP4:   {32, 1 + 32/2},                        // E8M0 exponent, fp4 pairs
		Q2_0:    {64, 2 + 64/4},                        // d, 2-bit codes (quant-formats.md §3.3)
	}
	doc := map[string]uint64{"Q8_0": 34, "Q8_1": 36, "Q4_K": 144, "Q6_K": 210, "Q8_K": 292,
		"IQ2_XS": 74, "IQ3_XXS": 98, "IQ3_S": 110, "IQ1_M": 56, "BF16": 2, "Q2_0": 18, "F16": 2, "F32": 4}
	equal(t, len(want), len(Types()), "table rows")
	for ty, w := range want {
		ti, ok := ty.Info()
		isTrue(t, ok, "missing", uint32(ty))
		equal(t, w, [2]uint64{ti.BlockSize, ti.BlockBytes}, ti.Name)
		if d, ok := doc[ti.Name]; ok {
			equal(t, d, ti.BlockBytes, ti.Name)
		}
		back, ok := TypeByName(ti.Name)
		isTrue(t, ok && back == ty, ti.Name)
		for _, o := range ti.Scales {
			isTrue(t, o < 0 || uint64(o)+2 <= ti.BlockBytes, ti.Name, "scale offset outside block")
		}
	}
	for _, retired := range []Type{4, 5, 31, 32, 33, 36, 37, 38, 40, 41, 43, 1000} {
		isTrue(t, !retired.Known(), retired)
		_, rule := ByteSize(retired, []uint64{256})
		equal(t, RuleTensorType, rule)
	}
	equal(t, "type(4)", Type(4).String())
}

func TestByteSize(t *testing.T) {
	for _, c := range []struct {
		t    Type
		ne   []uint64
		size uint64
		rule Rule
	}{
		{F32, []uint64{3, 5}, 60, ""},
		{Q4_K, []uint64{512, 3}, 2 * 144 * 3, ""},
		{Q2_0, []uint64{64, 1, 1, 7}, 7 * 18, ""},
		{Q8_0, []uint64{0, 1 << 62}, 0, ""}, // zero elements: no overflow, no division
		{Q8_0, []uint64{48}, 0, RuleBlockMultiple},
		{F16, []uint64{1 << 32, 1 << 31}, 0, RuleElementOverflow},
		{F64, []uint64{1 << 61}, 0, RuleByteOverflow},
		{Type(5), []uint64{32}, 0, RuleTensorType},
	} {
		size, rule := ByteSize(c.t, c.ne)
		equal(t, c.rule, rule, c.t, c.ne)
		equal(t, c.size, size, c.t, c.ne)
	}
}

func openBase(t *testing.T) *File {
	t.Helper()
	f, err := openBytes(t, base(t))
	noErr(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

func TestGetters(t *testing.T) {
	f := openBase(t)
	s, err := f.String("general.architecture")
	noErr(t, err)
	equal(t, "qwen3moe", s)
	u, err := f.Uint32("x.u32")
	noErr(t, err)
	equal(t, uint32(7), u)
	n, err := f.Int("x.u32")
	noErr(t, err)
	equal(t, 7, n)
	arr, err := f.Uint32s("x.arr")
	noErr(t, err)
	equal(t, []uint32{1, 2, 3}, arr)
	ints, err := f.Ints("x.arr")
	noErr(t, err)
	equal(t, []int{1, 2, 3}, ints)
	strs, err := f.Strings("x.strs")
	noErr(t, err)
	equal(t, []string{"one", "two"}, strs)
	et, l, err := f.ArrayLen("tokenizer.ggml.tokens")
	noErr(t, err)
	equal(t, TypeString, et)
	equal(t, 4, l)
	vs, err := f.VocabSize()
	noErr(t, err)
	equal(t, 4, vs)
	eos, err := f.TokenID("tokenizer.ggml.eos_token_id")
	noErr(t, err)
	equal(t, 3, eos)
	tmpl, err := f.ChatTemplate()
	noErr(t, err)
	equal(t, "{{ x }}\n", tmpl)
	bi, ok, err := f.BlockIndex("blk.1.attn_norm.weight", 2)
	noErr(t, err)
	equal(t, [2]any{1, true}, [2]any{bi, ok})
	_, ok, err = f.BlockIndex("output.weight", 2)
	noErr(t, err)
	isTrue(t, !ok)
	_, _, err = f.BlockIndex("blk.01.x", 2)
	equal(t, RuleNameIndex, RuleOf(err))
	ti, err := f.Expect("token_embd.weight", []uint64{8, 4}, F32)
	noErr(t, err)
	equal(t, "token_embd.weight", ti.Name)
	noErr(t, f.CheckTensorSet([]string{"token_embd.weight", "output.weight"}, []string{"blk.0.ffn_up_exps.weight", "blk.1.attn_norm.weight"}))
	noErr(t, f.CheckSupportedTypes([]Type{F32, Q8_0}))
	for _, ti := range f.Tensors() {
		noErr(t, f.CheckFinite(ti.Name))
	}

	// Strict types: no coercion between integer widths, signedness or kinds.
	for _, c := range []struct {
		get  func() error
		rule Rule
	}{
		{func() error { _, err := f.Uint64("x.u32"); return err }, RuleScalarType},
		{func() error { _, err := f.Int32("x.u32"); return err }, RuleScalarType},
		{func() error { _, err := f.String("x.u32"); return err }, RuleScalarType},
		{func() error { _, err := f.Float32("x.u32"); return err }, RuleScalarType},
		{func() error { _, err := f.Float64("x.u32"); return err }, RuleScalarType},
		{func() error { _, err := f.Bool("x.u32"); return err }, RuleScalarType},
		{func() error { _, err := f.Uint32("x.arr"); return err }, RuleScalarType},
		{func() error { _, err := f.Int32s("x.arr"); return err }, RuleArrayElemType},
		{func() error { _, err := f.Float32s("x.arr"); return err }, RuleArrayElemType},
		{func() error { _, err := f.Ints("x.strs"); return err }, RuleArrayElemType},
		{func() error { _, err := f.Strings("x.u32"); return err }, RuleScalarType},
		{func() error { _, err := f.Uint32("no.such.key"); return err }, RuleMissingKey},
		{func() error { _, err := f.Data("no.such.tensor"); return err }, RuleTensorSet},
	} {
		err := c.get()
		equal(t, c.rule, RuleOf(err), err)
	}
	_, err = f.Uint32("no.such.key")
	isTrue(t, errors.Is(err, ErrMissingKey), err)
}

func TestIntWidening(t *testing.T) {
	w := NewWriter()
	noErr(t, w.AddKV("a.i8", int8(-128)))
	noErr(t, w.AddKV("a.i64", int64(-1)<<62))
	noErr(t, w.AddKV("a.u64", uint64(1)<<63))
	noErr(t, w.AddKV("a.f32", float32(0.5)))
	noErr(t, w.AddKV("a.ai16", []int16{-3, 4}))
	f, err := ParseBytes("mem", encode(t, w))
	noErr(t, err)
	n, err := f.Int("a.i8")
	noErr(t, err)
	equal(t, -128, n)
	n, err = f.Int("a.i64")
	noErr(t, err)
	equal(t, -1<<62, n)
	_, err = f.Int("a.u64") // 2^63 does not fit in int
	equal(t, RuleHparamRange, RuleOf(err))
	x, err := f.Float64("a.f32")
	noErr(t, err)
	equal(t, 0.5, x)
	ns, err := f.Ints("a.ai16")
	noErr(t, err)
	equal(t, []int{-3, 4}, ns)
}

func TestHeaderOnlyAndVersion2(t *testing.T) {
	// HEADER_EMPTY: 24 bytes, no metadata, no tensors, is valid.
	hdr := []byte("GGUF\x03\x00\x00\x00" + "\x00\x00\x00\x00\x00\x00\x00\x00" + "\x00\x00\x00\x00\x00\x00\x00\x00")
	f, err := openBytes(t, hdr)
	noErr(t, err)
	equal(t, 0, len(f.KVs())+len(f.Tensors()))
	f.Close()

	w, datas := buildSample(t, 0)
	noErr(t, w.SetVersion(2))
	raw := encode(t, w)
	equal(t, uint32(2), uint32(raw[4]))
	f, err = openBytes(t, raw)
	noErr(t, err)
	defer f.Close()
	equal(t, uint32(2), f.Version())
	checkSample(t, f, datas, sampleKVs())
}

func TestWriterRejects(t *testing.T) {
	w := NewWriter()
	noErr(t, w.AddKV("k", uint8(1)))
	for _, err := range []error{
		w.AddKV("k", uint8(2)),                        // duplicate
		w.AddKV("", uint8(2)),                         // empty
		w.AddKV("sp ace", uint8(2)),                   // not a key
		w.AddKV("x", int(3)),                          // no GGUF type for int
		w.AddKV("x", [][]uint8{{1}}),                  // nested array
		w.AddKV("s", "\xff"),                          // invalid UTF-8
		w.AddKV(KeyAlignment, uint32(24)),             // not a power of two
		w.AddKV(KeyAlignment, int32(32)),              // wrong type
		w.AddKV(KeySplitCount, uint16(2)),             // reserved
		w.AddTensor("t", Q8_0, []uint64{31}, nil),     // not a block multiple
		w.AddTensor("t", F32, []uint64{2}, []byte{1}), // wrong data size
		w.AddTensor("t", F32, nil, nil),               // no dims
		w.AddTensor("t", Type(4), []uint64{32}, nil),  // retired type
		w.AddTensor(string(make([]byte, 64)), F32, []uint64{1}, make([]byte, 4)),
	} {
		isTrue(t, err != nil, "writer accepted bad input")
	}
	noErr(t, w.AddTensorFunc("short", F32, []uint64{4}, func(out io.Writer) error { return nil }))
}

func TestSplitRoundTrip(t *testing.T) {
	w, datas := buildSample(t, 64)
	dir := t.TempDir()
	paths, err := w.WriteShards(filepath.Join(dir, "model"), SplitOptions{MaxBytes: 300})
	noErr(t, err)
	isTrue(t, len(paths) >= 3, "expected several shards, got", len(paths))
	want := append(sampleKVs(), KV{KeyAlignment, Value{TypeUint32, 0, uint32(64)}},
		KV{KeySplitNo, Value{TypeUint16, 0, uint16(0)}},
		KV{KeySplitCount, Value{TypeUint16, 0, uint16(len(paths))}},
		KV{KeySplitTensorsCount, Value{TypeInt32, 0, int32(len(sampleTensors))}})
	for _, p := range paths { // any shard's name opens the whole model
		f, err := Open(p)
		noErr(t, err, p)
		equal(t, paths, f.Paths())
		checkSample(t, f, datas, want)
		shards := map[int]bool{}
		for _, ti := range f.Tensors() {
			shards[ti.Shard] = true
		}
		equal(t, len(paths), len(shards), "every shard holds tensors")
		f.Close()
	}
	// A shard of another model with the same tensor count still differs in architecture.
	w2 := NewWriter()
	noErr(t, w2.AddKV("general.architecture", "qwen3next"))
	for i, st := range sampleTensors {
		size, _ := ByteSize(st.typ, st.dims)
		noErr(t, w2.AddTensor(st.name+"x", st.typ, st.dims, datas[i][:size]))
	}
	other, err := w2.WriteShards(filepath.Join(t.TempDir(), "model"), SplitOptions{MaxBytes: 300})
	noErr(t, err)
	equal(t, len(paths), len(other))
	b, err := os.ReadFile(other[1])
	noErr(t, err)
	noErr(t, os.WriteFile(paths[1], b, 0o644))
	_, err = Open(paths[0])
	equal(t, RuleSplit, RuleOf(err), err)
}

func TestStreamingSourceSizeChecked(t *testing.T) {
	w := NewWriter()
	noErr(t, w.AddTensorFunc("t", F32, []uint64{4}, func(out io.Writer) error {
		_, err := out.Write(make([]byte, 12)) // 4 bytes short
		return err
	}))
	_, err := w.WriteTo(discard{})
	isTrue(t, err != nil, "short source accepted")
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestCheckFiniteScales puts an fp16 Inf (0x7C00) where ggml keeps each block's scale and
// expects D4, and the same bytes elsewhere in the block, which must pass.
func TestCheckFiniteScales(t *testing.T) {
	for _, c := range []struct {
		typ        Type
		scaleAt    int // byte of the scale in the second block
		harmlessAt int // bytes of quants, not a scale
	}{
		{Q8_0, 0, 10},
		{Q2_0, 0, 4},
		{Q4_K, 2, 20},    // dmin
		{Q6_K, 208, 100}, // d after ql[128], qh[64], scales[16]
		{IQ2_XS, 0, 30},  //
		{IQ3_S, 0, 50},   //
		{IQ3_XXS, 0, 40}, //
		{BF16, -1, -1},   // special-cased below
		{IQ1_M, -2, 10},  // scale spread over the top nibbles of four u16 at 48..55
		{TQ2_0, 64, 10},  // d after qs[64]
		{Q8_K, -3, 100},  // fp32 d at 0
		{Q3_K, 108, 50},  // d after hmask[32], qs[64], scales[12]
		{IQ4_XS, 0, 100}, //
		{Q5_K, 0, 100},   //
		{MXFP4, -4, 5},   // no fp16 scale: nothing checked
	} {
		t.Run(c.typ.String(), func(t *testing.T) {
			ti, _ := c.typ.Info()
			bb := int(ti.BlockBytes)
			dims := []uint64{2 * ti.BlockSize}
			mk := func(poke func(blk []byte)) error {
				data := make([]byte, 2*bb)
				poke(data[bb:])
				w := NewWriter()
				noErr(t, w.AddTensor("x", c.typ, dims, data))
				f, err := ParseBytes("m", encode(t, w))
				noErr(t, err)
				return f.CheckFinite("x")
			}
			inf := func(o int) func([]byte) {
				return func(b []byte) { binary.LittleEndian.PutUint16(b[o:], 0x7C00) }
			}
			switch c.scaleAt {
			case -1: // BF16: every element; 0x7F80 is +Inf
				equal(t, RuleNonFinite, RuleOf(mk(func(b []byte) { binary.LittleEndian.PutUint16(b[0:], 0x7F80) })))
				noErr(t, mk(inf(0))) // 0x7C00 is a finite bf16
				return
			case -2:
				equal(t, RuleNonFinite, RuleOf(mk(func(b []byte) {
					binary.LittleEndian.PutUint16(b[52:], 0xC000) // nibble 2 → bits 8..11
					binary.LittleEndian.PutUint16(b[54:], 0x7000) // nibble 3 → bits 12..15
				})))
				noErr(t, mk(func(b []byte) { binary.LittleEndian.PutUint16(b[48:], 0x0FFF) })) // low bits: sub-scales only
			case -3:
				equal(t, RuleNonFinite, RuleOf(mk(func(b []byte) { binary.LittleEndian.PutUint32(b[0:], 0x7F800000) })))
			case -4:
				noErr(t, mk(inf(0)))
				return
			default:
				equal(t, RuleNonFinite, RuleOf(mk(inf(c.scaleAt))))
			}
			noErr(t, mk(inf(c.harmlessAt)))
		})
	}
}

func TestCloseAndFailedWrite(t *testing.T) {
	f, err := openBytes(t, base(t))
	noErr(t, err)
	noErr(t, f.Close())
	noErr(t, f.Close()) // idempotent
	_, err = f.Data("output.weight")
	equal(t, RuleIO, RuleOf(err))

	p := filepath.Join(t.TempDir(), "out.gguf")
	w := NewWriter()
	noErr(t, w.AddTensorFunc("x", F32, []uint64{4}, func(io.Writer) error { return errors.New("source failed") }))
	isTrue(t, w.WriteFile(p) != nil, "a failing source must fail the write")
	_, err = os.Stat(p)
	isTrue(t, errors.Is(err, os.ErrNotExist), "a failed write left", p)
	_, err = os.Stat(p + ".partial")
	isTrue(t, errors.Is(err, os.ErrNotExist), "a failed write left its temporary file")
}
