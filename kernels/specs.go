package kernels

import (
	"strconv"
	"strings"
)

// Variant axes shared by families that come in a matrix-op and a dp4a flavour. The "mma"
// value needs an int8 matrix instruction, so targets without one (gfx1030) get only "dp4a".
var axisOp = Axis{Name: "op", Values: []Value{
	{Name: "mma", Needs: NeedInt8Matrix, Promise: ISAInt8Matrix},
	{Name: "dp4a", Promise: ISADot4},
}}

// axisWeightType lists every weight type the decode families handle. Quantized types promise
// the target's dot4 instruction in mmvq (their block dots are int8 dot4 chains); F16 and
// BF16 have no integer path.
func axisWeightType(dot4 ISA) Axis {
	return Axis{Name: "type", Values: []Value{
		{Name: "f16"},
		{Name: "bf16"},
		{Name: "q80", Promise: dot4},
		{Name: "q20", Promise: dot4},
		{Name: "q4k", Promise: dot4},
		{Name: "q6k", Promise: dot4},
		{Name: "iq2xs", Promise: dot4},
		{Name: "iq3xxs", Promise: dot4},
		{Name: "iq3s", Promise: dot4},
		{Name: "iq1m", Promise: dot4},
	}}
}

// rmsnormArgs and axisRMSNormMode are shared by rmsnorm and rmsnorm_row (the same function,
// layout and variants; only the lane layout differs).
var rmsnormArgs = []Arg{
	{Name: "x", Type: ArgPtr, CType: "const float", Doc: "input rows (layout: see tok_stride, head_stride)"},
	{Name: "r", Type: ArgPtr, CType: "const float", Doc: "add variants: residual added to x, same layout; else unused"},
	{Name: "w", Type: ArgPtr, CType: "const float", Doc: "weight, n f32"},
	{Name: "xo", Type: ArgPtr, CType: "float", Doc: "add variants: x + r, same layout (may be x); else unused"},
	{Name: "y", Type: ArgPtr, CType: "float", Doc: "normalised rows, same layout (may be x); q8_1 variants: 0 = not written"},
	{Name: "q", Type: ArgPtr, CType: "u8", Doc: "q8_1 variants: rows × n/32 Q8_1 blocks (36 bytes), rows contiguous; 4-byte aligned"},
	{Name: "n", Type: ArgI32, Doc: "row length (a multiple of 32 for q8_1 variants)"},
	{Name: "rows", Type: ArgI32, Doc: "number of rows: tokens × heads"},
	{Name: "heads", Type: ArgI32, Doc: "rows per token (1 = whole rows)"},
	{Name: "tok_stride", Type: ArgI32, Doc: "f32 elements between tokens"},
	{Name: "head_stride", Type: ArgI32, Doc: "f32 elements between the heads of a token"},
	{Name: "eps", Type: ArgF32, Doc: "epsilon inside the root"},
}

var axisRMSNormMode = Axis{Name: "mode", Values: []Value{{Name: "f32"}, {Name: "add"}, {Name: "q81"}, {Name: "addq81"}}}

// axisRMSNormRowMode is rmsnorm's modes plus rmsnorm_row's previous Q8_1 step (each block's
// reductions over a whole wave, one block after the other), kept as a measurement baseline.
var axisRMSNormRowMode = Axis{Name: "mode", Values: append(append([]Value(nil), axisRMSNormMode.Values...), Value{Name: "q81wave"}, Value{Name: "addq81wave"})}

// Specs is the table of kernel families, sorted by Family. A new family is one row here,
// one template kernels/templates/<Template>.tmpl, and `go generate ./...`.
var Specs = []Spec{
	{
		Family:   "attention_decode",
		Template: "attention_decode",
		Doc: "one query token against an f16 or int8 KV cache, grouped-query heads, split along the sequence: " +
			"split (grid (nkv·ceil(nh/nkv/8), nsplit, 1)) writes per-split softmax partials of up to 8 q heads of a kv group, reduce (grid (nh, 1, 1)) combines them " +
			"and applies the optional sigmoid output gate; store (grid (ceil(kv_rows·nkv·hd/64), 1, 1)) writes new f32 K/V " +
			"rows into the cache in its format; prep (grid (ceil((nh+2·nkv)/4), 1, 1)) is one decode token's per-head q and k " +
			"RMSNorm, NeoX rope of q and k and the store of k and v at the device position pos[0], in one launch (q in place); " +
			"reduceq is reduce that also writes out as Q8_1 blocks (oq); block (128, 1, 1).",
		Threads: 128,
		Args: []Arg{
			{Name: "q", Type: ArgPtr, CType: "const float", Doc: "query, nh × hd f32 (normed and rotated); prep: the projection's q, rewritten in place normed and rotated"},
			{Name: "k", Type: ArgPtr, CType: "const u8", Doc: "key cache: n × nkv × hd fp16 (f16) or int8 (q8); 16-byte aligned; store writes it"},
			{Name: "v", Type: ArgPtr, CType: "const u8", Doc: "value cache, as k"},
			{Name: "ks", Type: ArgPtr, CType: "const u16", Doc: "q8: key scales, n × nkv × hd/32 fp16; f16: unused (0)"},
			{Name: "vs", Type: ArgPtr, CType: "const u16", Doc: "q8: value scales, as ks; f16: unused (0)"},
			{Name: "gate", Type: ArgPtr, CType: "const float", Doc: "reduce: output gate logits nh × hd f32, out ·= sigmoid(gate); 0 = no gate"},
			{Name: "part", Type: ArgPtr, CType: "float", Doc: "workspace nh × nsplit × (hd+2) f32: split writes it, reduce reads it"},
			{Name: "out", Type: ArgPtr, CType: "float", Doc: "reduce: output nh × hd f32"},
			{Name: "n", Type: ArgI32, Doc: "cached positions (≥ 1), the query's own included"},
			{Name: "nh", Type: ArgI32, Doc: "query heads, a multiple of nkv"},
			{Name: "nkv", Type: ArgI32, Doc: "key/value heads"},
			{Name: "hd", Type: ArgI32, Doc: "head dimension: 64, 128 or 256"},
			{Name: "split_len", Type: ArgI32, Doc: "positions per split (> 0)"},
			{Name: "nsplit", Type: ArgI32, Doc: "ceil(n / split_len), ≤ 256 (the reduce keeps one factor per split in LDS)"},
			{Name: "scale", Type: ArgF32, Doc: "score scale, 1/√hd"},
			{Name: "kn", Type: ArgPtr, CType: "const float", Doc: "store: new keys, kv_rows × nkv × hd f32; prep: the token's projected k (normed and rotated into the cache, left as it is)"},
			{Name: "vn", Type: ArgPtr, CType: "const float", Doc: "store: new values, as kn; prep: the token's v"},
			{Name: "kv_pos", Type: ArgI32, Doc: "store: the cache position of the first new row"},
			{Name: "kv_rows", Type: ArgI32, Doc: "store: rows to write (positions kv_pos.. kv_pos+kv_rows−1)"},
			{Name: "qw", Type: ArgPtr, CType: "const float", Doc: "prep: per-head q norm weight, hd f32"},
			{Name: "kw", Type: ArgPtr, CType: "const float", Doc: "prep: per-head k norm weight, hd f32"},
			{Name: "pos", Type: ArgPtr, CType: "const int", Doc: "prep: the token's position (one int32 on the device, ≥ 0, < 2²⁴): the rope angle's and the cache row written"},
			{Name: "freq", Type: ArgPtr, CType: "const float", Doc: "prep: rot_dims/2 f32 rope frequencies, float32(1/theta^(float32(2i)/float32(rot_dims)))"},
			{Name: "oq", Type: ArgPtr, CType: "u8", Doc: "reduceq: out as nh·hd/32 Q8_1 blocks (36 bytes), as quantize_q8_1 makes them; 4-byte aligned"},
			{Name: "rot_dims", Type: ArgI32, Doc: "prep: rotated values per head (NeoX), even, ≤ hd"},
			{Name: "eps", Type: ArgF32, Doc: "prep: epsilon inside the norms' root"},
		},
		Axes: []Axis{
			{Name: "stage", Values: []Value{{Name: "split"}, {Name: "reduce"}, {Name: "store"}, {Name: "prep"}, {Name: "reduceq"}}},
			{Name: "kv", Values: []Value{{Name: "f16"}, {Name: "q8"}}},
		},
	},
	{
		Family:   "attention_prefill",
		Template: "attention_prefill",
		Doc: "causal attention of t new query tokens against an f16 or int8 KV cache whose last t positions are theirs, " +
			"grouped-query heads, tiled with online softmax, optional sigmoid output gate; " +
			"f16, q8: launch grid (ceil(t·(nh/nkv)/16), nkv, 1); " +
			"f16old, q8old (the first kernel, kept to time against): grid (ceil(t/8), nh, 1); " +
			"f16mma (NVIDIA only: f16 mma.sync, q and p rounded to f16): grid (ceil(t·(nh/nkv)/64), nkv, 1); " +
			"f16mma256 (NVIDIA only, hd 256 only: two warps per 16 rows, each half of hd): grid (ceil(t·(nh/nkv)/32), nkv, 1); block (128, 1, 1).",
		Threads: 128,
		Args: []Arg{
			{Name: "q", Type: ArgPtr, CType: "const float", Doc: "queries, t × nh × hd f32 (normed and rotated)"},
			{Name: "k", Type: ArgPtr, CType: "const u8", Doc: "key cache: n × nkv × hd fp16 (f16) or int8 (q8), the new tokens' keys last; 4-byte aligned"},
			{Name: "v", Type: ArgPtr, CType: "const u8", Doc: "value cache, as k"},
			{Name: "ks", Type: ArgPtr, CType: "const u16", Doc: "q8: key scales, n × nkv × hd/32 fp16; f16: unused (0)"},
			{Name: "vs", Type: ArgPtr, CType: "const u16", Doc: "q8: value scales, as ks; f16: unused (0)"},
			{Name: "gate", Type: ArgPtr, CType: "const float", Doc: "output gate logits t × nh × hd f32, out ·= sigmoid(gate); 0 = no gate"},
			{Name: "out", Type: ArgPtr, CType: "float", Doc: "output t × nh × hd f32"},
			{Name: "t", Type: ArgI32, Doc: "new tokens (queries), 1 ≤ t ≤ n"},
			{Name: "n", Type: ArgI32, Doc: "cached positions including the new tokens"},
			{Name: "nh", Type: ArgI32, Doc: "query heads, a multiple of nkv"},
			{Name: "nkv", Type: ArgI32, Doc: "key/value heads"},
			{Name: "hd", Type: ArgI32, Doc: "head dimension: 64, 128 or 256"},
			{Name: "scale", Type: ArgF32, Doc: "score scale, 1/√hd"},
		},
		Axes: []Axis{{Name: "kv", Values: []Value{{Name: "f16"}, {Name: "q8"}, {Name: "f16old"}, {Name: "q8old"}, {Name: "f16mma", Needs: NeedNVIDIA},
			{Name: "f16mma256", Needs: NeedNVIDIA}}}},
	},
	{
		Family:   "dequant",
		Template: "dequant",
		Doc: "weight rows → f32 or f16 rows (y[r][k] = W[r][k], ggml's to_float values); one thread per 32-element group, " +
			"grid-stride; launch grid (max(1, min(ceil(rows·k/32/256), 65535)), 1, 1), block (256, 1, 1).",
		Threads: 256,
		Args: []Arg{
			{Name: "w", Type: ArgPtr, CType: "const u8", Doc: "weights: rows × k/QK blocks, rows contiguous; 16-byte aligned"},
			{Name: "y", Type: ArgPtr, CType: "u8", Doc: "output rows of f32 or f16 (per variant), y_stride elements apart; 16-byte aligned"},
			{Name: "rows", Type: ArgI32, Doc: "number of rows (> 0)"},
			{Name: "k", Type: ArgI32, Doc: "elements per row, a positive multiple of the type's block size"},
			{Name: "y_stride", Type: ArgI32, Doc: "elements between output rows, a multiple of 8, ≥ k"},
		},
		Axes: []Axis{axisWeightType(ISANone), {Name: "out", Values: []Value{{Name: "f32"}, {Name: "f16"}}}},
	},
	{
		Family:   "embed",
		Template: "embed",
		Doc: "token embedding gather: out[t] = dequantized row ids[t] of a Q8_0, F16 or BF16 table (exact); " +
			"launch grid (ceil(n/256), min(tokens, 65535), 1), block (256, 1, 1).",
		Threads: 256,
		Args: []Arg{
			{Name: "table", Type: ArgPtr, CType: "const u8", Doc: "embedding rows, row_bytes apart; 2-byte aligned"},
			{Name: "ids", Type: ArgPtr, CType: "const int", Doc: "tokens ids, each < the table's rows (checked by the host)"},
			{Name: "out", Type: ArgPtr, CType: "float", Doc: "tokens × n f32, out_stride elements apart"},
			{Name: "row_bytes", Type: ArgI64, Doc: "bytes between table rows: 34·n/32 (q8_0), 2·n (f16, bf16)"},
			{Name: "n", Type: ArgI32, Doc: "row length (a multiple of 32 for q8_0)"},
			{Name: "tokens", Type: ArgI32, Doc: "number of ids (> 0); rows beyond gridDim.y are looped over"},
			{Name: "out_stride", Type: ArgI32, Doc: "f32 elements between output rows, ≥ n"},
		},
		Axes: []Axis{{Name: "type", Values: []Value{{Name: "q80"}, {Name: "f16"}, {Name: "bf16"}}}},
	},
	{
		Family:   "expert_fetch",
		Template: "expert_fetch",
		Doc: "mapped path's look-ahead (model/gpu ahead.go): copies each of k_used predicted experts whose slot-table " +
			"entries point into the layer's mapped host copy into its stage buffer, and writes a working copy of the " +
			"layer's slot tables pointing those experts at it (the first n_land staged ids land in VRAM slots instead: the " +
			"engine's landing); launch grid (nb, k_used + 1, 1), nb ≥ ceil(3·n_expert/256), " +
			"block (256, 1, 1).",
		Threads: 256,
		Args: []Arg{
			{Name: "ids", Type: ArgPtr, CType: "const i32", Doc: "k_used predicted expert ids (moe_decode phase 0's)"},
			{Name: "src", Type: ArgPtr, CType: "const u64", Doc: "the layer's slot tables: gate, up, down addresses, n_expert each"},
			{Name: "dst", Type: ArgPtr, CType: "u64", Doc: "the working copy written, same layout"},
			{Name: "stage", Type: ArgPtr, CType: "u8", Doc: "k_used stage buffers of total bytes in VRAM, 16-byte aligned"},
			{Name: "land", Type: ArgPtr, CType: "const u64", Doc: "n_land landing slot addresses in VRAM (16-byte aligned; 0: none): the i-th staged id lands in land[i] when i < n_land and land[i] ≠ 0, else in its stage buffer"},
			{Name: "host", Type: ArgU64, Doc: "device address of the layer's expert 0 in mapped host memory (16-byte aligned)"},
			{Name: "total", Type: ArgU64, Doc: "bytes of one expert's block (a multiple of 16), host and stage alike"},
			{Name: "n_expert", Type: ArgI32, Doc: "experts of the layer"},
			{Name: "k_used", Type: ArgI32, Doc: "predicted ids"},
			{Name: "nb", Type: ArgI32, Doc: "gridDim.x"},
			{Name: "n_land", Type: ArgI32, Doc: "entries of land (0: every staged id goes to its stage buffer)"},
		},
		Axes: []Axis{{Name: "word", Values: []Value{{Name: "u128"}}}},
	},
	{
		// Its own family because a family has one argument struct (gen's
		// TestSourcesDefineTheirSymbols): the argument struct must be runtime/gpu's probe layout
		// exactly (runtime/gpu TestProbeArgsMatchABI), which no other family's is.
		Family:   "fill",
		Template: "fill",
		Doc: "mapping probe: stores v into the n 32-bit words at p, one thread per word; runtime/gpu proves mapped host " +
			"memory with it (Device.SetProbe) where the runtime has no kernel of its own (HIP); " +
			"launch grid (ceil(n/64), 1, 1), block (64, 1, 1).",
		Threads: 64,
		Args: []Arg{
			{Name: "p", Type: ArgPtr, CType: "u32", Doc: "n words, 4-byte aligned: device memory or the device alias of mapped host memory"},
			{Name: "n", Type: ArgU32, Doc: "words to store (> 0)"},
			{Name: "v", Type: ArgU32, Doc: "the value stored into each"},
		},
		Axes: []Axis{{Name: "word", Values: []Value{{Name: "u32"}}}},
	},
	{
		Family:   "gated_delta_net",
		Template: "gated_delta_net",
		Doc: "Qwen3-Next gated delta-net after its projections: conv (grid (ceil(c/512), min(t, 65535), 1)) is the causal " +
			"kernel-4 conv1d + SiLU with carried state; recurrent (grid (nv, 1, 1)) the L2-normalised, gated delta-rule " +
			"recurrence over t tokens with f32 state, then the gated RMSNorm (silu(z) gate; recurrentsig: sigmoid(z), qwen4exp); " +
			"chunk (grid (ceil(t/16), nv, 1)) and scan (grid (nv, 1, 1)) are the chunked prefill form of recurrent; recsplit " +
			"(grid (nv, ceil(dv/32), 1)) is recurrent's prefill over column slices of 32, one barrier a token, o written before " +
			"the norm (bitwise recurrent's), then gnorm / gnormsig (grid (ceil(t·nv/4), 1, 1)) the gated RMSNorm in place on o; " +
			"recurrentq is recurrent that also writes o as Q8_1 blocks (quantize_q8_1's bytes; dv a multiple of 32), so the " +
			"output projection needs no quantize launch; " +
			"block (512, 1, 1).",
		Threads: 512,
		Args: []Arg{
			{Name: "x", Type: ArgPtr, CType: "const float", Doc: "conv: raw qkv projection, t × c f32"},
			{Name: "conv_w", Type: ArgPtr, CType: "const float", Doc: "conv: weights c × 4 f32"},
			{Name: "conv_in", Type: ArgPtr, CType: "const float", Doc: "conv: the previous 3 inputs, 3 × c f32 (zeros at the start)"},
			{Name: "conv_out", Type: ArgPtr, CType: "float", Doc: "conv: the last 3 inputs after this call, 3 × c f32 (not conv_in)"},
			{Name: "xc", Type: ArgPtr, CType: "float", Doc: "conv writes, recurrent reads: t × c f32 rows [q (nk·dk) | k (nk·dk) | v (nv·dv)]"},
			{Name: "z", Type: ArgPtr, CType: "const float", Doc: "recurrent: output-gate projection, t × nv·dv f32"},
			{Name: "ba", Type: ArgPtr, CType: "const float", Doc: "recurrent: t × 2·nv f32, per key head [b (nv/nk) | a (nv/nk)]"},
			{Name: "ssm_a", Type: ArgPtr, CType: "const float", Doc: "recurrent: nv f32 (negative: −exp(A_log))"},
			{Name: "dt_bias", Type: ArgPtr, CType: "const float", Doc: "recurrent: nv f32"},
			{Name: "state", Type: ArgPtr, CType: "float", Doc: "recurrent: S, nv × dk × dv f32, read and written back"},
			{Name: "norm_w", Type: ArgPtr, CType: "const float", Doc: "recurrent: gated RMSNorm weight, dv f32"},
			{Name: "o", Type: ArgPtr, CType: "float", Doc: "recurrent: output t × nv·dv f32"},
			{Name: "t", Type: ArgI32, Doc: "tokens in this call (> 0)"},
			{Name: "c", Type: ArgI32, Doc: "channels: 2·nk·dk + nv·dv"},
			{Name: "nk", Type: ArgI32, Doc: "key heads"},
			{Name: "nv", Type: ArgI32, Doc: "value heads, a multiple of nk"},
			{Name: "dk", Type: ArgI32, Doc: "key head dimension, a multiple of 4, ≤ 128"},
			{Name: "dv", Type: ArgI32, Doc: "value head dimension, ≤ 128"},
			{Name: "eps", Type: ArgF32, Doc: "gated RMSNorm epsilon"},
			{Name: "ws", Type: ArgPtr, CType: "float", Doc: "chunk writes, scan reads: nv × ceil(t/16) × 6660 f32 (48·128 + 516 per chunk and head); 16-byte aligned"},
			{Name: "oq", Type: ArgPtr, CType: "u8", Doc: "recurrentq: o also as t·nv·dv/32 Q8_1 blocks (36 bytes), as quantize_q8_1 makes them; 4-byte aligned"},
		},
		Axes: []Axis{{Name: "stage", Values: []Value{{Name: "conv"}, {Name: "recurrent"}, {Name: "recurrentsig"}, {Name: "chunk"}, {Name: "scan"},
			{Name: "recsplit"}, {Name: "gnorm"}, {Name: "gnormsig"}, {Name: "recurrentq"}}}},
	},
	{
		Family:   "imma_tile",
		Template: "imma_tile",
		Doc: "C[M×N] int32 += A[M×K] int8 · B[K×N] int8, one 16×16 tile of C per 32-thread block; " +
			"launch grid (N/16, M/16, 1), block (32, 1, 1).",
		Threads: 32,
		Args: []Arg{
			{Name: "a", Type: ArgPtr, CType: "const signed char", Doc: "A, M×K int8 row-major, 16-byte aligned"},
			{Name: "bt", Type: ArgPtr, CType: "const signed char", Doc: "B transposed: N×K int8 row-major (row n holds column n of B, like a weight matrix), 16-byte aligned"},
			{Name: "c", Type: ArgPtr, CType: "int", Doc: "C, M×N int32 row-major; read, accumulated into and written back"},
			{Name: "k", Type: ArgI32, Doc: "K, a positive multiple of 16"},
			{Name: "lda", Type: ArgI32, Doc: "bytes between rows of A, a multiple of 16, ≥ K"},
			{Name: "ldbt", Type: ArgI32, Doc: "bytes between rows of Bᵀ, a multiple of 16, ≥ K"},
			{Name: "ldc", Type: ArgI32, Doc: "int32 elements between rows of C, ≥ N"},
		},
		Axes: []Axis{axisOp},
	},
	{
		Family:   "mmq",
		Template: "mmq",
		Doc: "y[t][r] = Σ_k W[r][k]·x[t][k] for many tokens: quantized weights decoded to int8 tiles in LDS, Q8_1 " +
			"activations, exact int32 group sums (matrix unit or dot4), f32 scale fold; launch grid (ceil(rows/BM), " +
			"ceil(tokens/BN), 1) for tile r<BM>t<BN>, block (128, 1, 1).",
		Threads: 128,
		Args:    mmqArgs,
		Axes:    []Axis{axisPrefillType, axisOp, {Name: "tile", Values: []Value{{Name: "r64t64"}, {Name: "r128t64"}, {Name: "r64t128"}}}},
		Fits:    mmqFits,
	},
	{
		Family:   "mmq8",
		Template: "mmq",
		Doc: "mmq with 8 warps (NVIDIA mma.sync only): y[t][r] = Σ_k W[r][k]·x[t][k] as mmq, one 256-thread block of " +
			"2 × 4 warps of 32 × 32 per BM × BN tile, two blocks an SM; launch grid (ceil(rows/BM), ceil(tokens/BN), 1) " +
			"for tile r<BM>t<BN>w8, block (256, 1, 1).",
		Threads: 256,
		Args:    mmqArgs,
		// Its own family: mmq's op axis crosses every tile with dp4a, whose core is 128
		// threads, and a variant pruned on every target is refused.
		Axes: []Axis{axisPrefillType, {Name: "op", Values: axisOp.Values[:1]}, {Name: "tile", Values: []Value{{Name: "r64t128w8"}}}},
		Fits: mmqFits,
	},
	{
		Family:   "mmq8c",
		Template: "mmq",
		Doc: "mmq8 with compact scale tiles for Q2_0 (NVIDIA mma.sync only): y[t][r] = Σ_k W[r][k]·x[t][k] as " +
			"mmq8, the same arguments, activations (Q8_1) and launch (grid (ceil(rows/BM), ceil(tokens/BN), 1), block (256, 1, 1)).",
		Threads: 256,
		Args:    mmqArgs,
		// kernels/prefill.go, mmqCompact, mmqCTypes.
		Axes: []Axis{{Name: "type", Values: mmqCTypes}, {Name: "op", Values: axisOp.Values[:1]}, {Name: "tile", Values: []Value{{Name: "r64t128w8"}}}},
		Fits: mmqFits,
	},
	{
		Family:   "mmq8cz",
		Template: "mmq",
		Doc: "mmq8 with compact scale tiles for Q8_0 whose staging keeps the loaded values of jobs past the tile's rows or " +
			"tokens instead of zeroing them (NVIDIA mma.sync only; their outputs are never written); arguments, activations " +
			"and launch as mmq8.",
		Threads: 256,
		Args:    mmqArgs,
		// kernels/prefill.go, mmqCompact, mmqNoZero, mmqCZTypes.
		Axes: []Axis{{Name: "type", Values: mmqCZTypes}, {Name: "op", Values: axisOp.Values[:1]}, {Name: "tile", Values: []Value{{Name: "r64t128w8"}}}},
		Fits: mmqFits,
	},
	{
		Family:   "mmq8x4",
		Template: "mmq",
		Doc: "mmq8 for activations whose Q8_1 blocks share one d per 128-element segment (NVIDIA mma.sync only): " +
			"y[t][r] = Σ_k W[r][k]·x[t][k] with the group sums times their integer sub-scales added in int32 over the " +
			"segment (one K step) and folded in f32 once per segment; x must come from a quantizer that gives the 4 " +
			"blocks of each 128-element segment of a row the same d (quant.QuantizeQ8_1GPUSeg with 4), else the result " +
			"is wrong; launch as mmq8 (grid (ceil(rows/BM), ceil(tokens/BN), 1), block (256, 1, 1)).",
		Threads: 256,
		Args:    mmqArgs,
		// The types for which it was the fastest (kernels/prefill.go, mmqX4Types).
		Axes: []Axis{{Name: "type", Values: mmqX4Types}, {Name: "op", Values: axisOp.Values[:1]}, {Name: "tile", Values: []Value{{Name: "r64t128w8"}}}},
		Fits: mmqFits,
	},
	{
		Family:   "mmq8x4g",
		Template: "mmq",
		Doc: "mmq8x4n whose warps load each group's token fragments once for both row fragments and add the group's " +
			"16·H to the L chain after each group (one int32 chain a fragment; NVIDIA mma.sync only); x as mmq8x4 " +
			"(one d per 128-element segment, quant.QuantizeQ8_1GPUSeg with 4); launch as mmq8.",
		Threads: 256,
		Args:    mmqArgs,
		// mmq8x4n's types (kernels/prefill.go, mmqX4NTypes, mmqPlanes, mmqNoZero, mmqBOnce).
		Axes: []Axis{{Name: "type", Values: mmqX4NTypes}, {Name: "op", Values: axisOp.Values[:1]}, {Name: "tile", Values: []Value{{Name: "r64t128w8"}}}},
		Fits: mmqFits,
	},
	{
		Family:   "mmq8x4n",
		Template: "mmq",
		Doc: "mmq8x4 whose weights are staged as two int8 planes of the sub-scaled values and whose staging keeps the " +
			"loaded values of jobs past the tile's rows or tokens instead of zeroing them (NVIDIA mma.sync only; outputs " +
			"past the edge are never written): each element's integer m·q = 16·h + l, both planes decoded by " +
			"byte-permute lookups, so each group is two K=32 products chained over the K step with no integer folds; " +
			"each segment's d comes from the one activation job whose block starts its load window; the next K step's " +
			"weight and activation lines are prefetched into L1; x as mmq8x4 (one d per 128-element segment, " +
			"quant.QuantizeQ8_1GPUSeg with 4); launch as mmq8.",
		Threads: 256,
		Args:    mmqArgs,
		// The 16-split types (kernels/prefill.go, mmqX4NTypes, mmqPlanes, mmqNoZero, mmqPrefetch).
		Axes: []Axis{{Name: "type", Values: mmqX4NTypes}, {Name: "op", Values: axisOp.Values[:1]}, {Name: "tile", Values: []Value{{Name: "r64t128w8"}}}},
		Fits: mmqFits,
	},
	{
		Family:   "mmvq",
		Template: "mmvq",
		Doc: "y[z][c][r] = Σ_k W_z[r][k]·x_z[c][k] for 1..8 columns: Q8_1 activations and exact dot4 block dots with an f32 " +
			"scale fold (F16/BF16: f32 activations, f32 fma); matrices z are dense (w + z·w_mat_bytes) or experts through a slot " +
			"table; launch grid (ceil(rows/16) — ceil(rows/8) for F16/BF16 — or fewer (rows are grid-strided; blocks past the rows exit), 1, " +
			"matrices), block (256, 1, 1); decode-geometry variants <type>_g<N> (NVIDIA): one column only, grid x ceil(rows/their RowsPerBlock).",
		Threads: 256,
		Args: []Arg{
			{Name: "w", Type: ArgPtr, CType: "const u8", Doc: "weights of matrix 0 when slots is null: rows × k/QK blocks, rows contiguous, 16-byte aligned; matrix z at w + z·w_mat_bytes"},
			{Name: "slots", Type: ArgPtr, CType: "const u64", Doc: "expert slot table: slots[id] = device address of expert id's weights (16-byte aligned), 0 = not resident; null = dense matrices through w"},
			{Name: "ids", Type: ArgPtr, CType: "const i32", Doc: "with slots: ids[z] = expert id of matrix z"},
			{Name: "xq", Type: ArgPtr, CType: "const u8", Doc: "quantized types: Q8_1 activations (36-byte blocks), column c of matrix z at element z·x_mat_stride + c·x_col_stride"},
			{Name: "xf", Type: ArgPtr, CType: "const f32", Doc: "F16/BF16: f32 activations, same indexing as xq; 16-byte aligned"},
			{Name: "y", Type: ArgPtr, CType: "f32", Doc: "output: y[z·y_mat_stride + c·y_col_stride + r]"},
			{Name: "err", Type: ArgPtr, CType: "u32", Doc: "err[z] = 1 when matrix z's expert has no slot (its outputs are then zeros), else 0; may be null only when slots is null"},
			{Name: "w_mat_bytes", Type: ArgI64, Doc: "bytes between dense matrices (slots null)"},
			{Name: "rows", Type: ArgI32, Doc: "rows per matrix (> 0)"},
			{Name: "k", Type: ArgI32, Doc: "elements per row, a positive multiple of the type's block size"},
			{Name: "ncols", Type: ArgI32, Doc: "activation columns, 1..8"},
			{Name: "nslots", Type: ArgI32, Doc: "entries in slots; ids outside [0, nslots) are missing experts"},
			{Name: "x_col_stride", Type: ArgI32, Doc: "activation elements between columns, a multiple of 32, ≥ k"},
			{Name: "x_mat_stride", Type: ArgI32, Doc: "activation elements between matrices, a multiple of 32; 0 = all matrices share x"},
			{Name: "y_col_stride", Type: ArgI32, Doc: "output elements between columns, ≥ rows"},
			{Name: "y_mat_stride", Type: ArgI32, Doc: "output elements between matrices"},
			{Name: "prefetch", Type: ArgI32, Doc: "1: dense matrices only (slots null), on sm_90, each block first prefetches its share of the weights into L2, before it waits for its predecessor (for programmatic launches, where that overlaps the previous kernel); 2: as 1, and in a decode-geometry variant (<type>_g<N>) with one column and err null the wait also follows the first pass's L1 prefetch; 0: no prefetch (a plain launch only pays for it)"},
		},
		// geom: "" = the default kernel (every column count; what mmvq was before decode
		// geometries); g1..g14 = the one-column decode geometries of MmvqGeoms (NVIDIA only,
		// each its own kernel so that the default kernel's code stays its own; ncols must be
		// 1; F16/BF16 have g4 only).
		Axes: []Axis{axisWeightType(ISADot4), {Name: "geom", Values: []Value{{Name: ""},
			{Name: "g1", Needs: NeedNVIDIA}, {Name: "g2", Needs: NeedNVIDIA}, {Name: "g3", Needs: NeedNVIDIA}, {Name: "g4", Needs: NeedNVIDIA},
			{Name: "g5", Needs: NeedNVIDIA}, {Name: "g6", Needs: NeedNVIDIA}, {Name: "g7", Needs: NeedNVIDIA}, {Name: "g8", Needs: NeedNVIDIA},
			{Name: "g9", Needs: NeedNVIDIA}, {Name: "g10", Needs: NeedNVIDIA}, {Name: "g11", Needs: NeedNVIDIA}, {Name: "g12", Needs: NeedNVIDIA},
			{Name: "g13", Needs: NeedNVIDIA}, {Name: "g14", Needs: NeedNVIDIA}}}},
		Absent: func(v Variant) bool {
			t := v.Values["type"]
			return (t == "f16" || t == "bf16") && v.MmvqGeomIndex() != 0 && MmvqGeoms[v.MmvqGeomIndex()].FR == 0
		},
		// 8 waves per block; a wave owns R rows (strata_mmvq_shape / strata_mmvq_nv_shape,
		// and strata_mmvq_rows_f's one row per wave): quantized types R = 2 on every target
		// and column count, F16/BF16 one row per wave; a geometry variant its MmvqGeoms row's.
		RowsPerBlock: func(_ Target, v Variant) int {
			g := v.MmvqShape()
			if t := v.Values["type"]; t == "f16" || t == "bf16" {
				return 8 * max(g.FR, 1)
			}
			return 8 * g.R
		},
	},
	{
		Family:   "moe_decode",
		Template: "moe_decode",
		Doc: "one MoE FFN layer for decode tokens in three launches (phase 0 router top-k: grid (tokens, 1, 1); phase 1 gate/up + " +
			"SwiGLU + Q8_1 requant: grid (n_ff/32, k_used, tokens); phase 2 down + weighted sum: grid (ceil(n_embd/8), 1, tokens)), " +
			"or two (phase 3 = phases 0 and 1 in one launch, grid of phase 1, the same ids, wts, err and h), " +
			"block (256, 1, 1); experts through slot tables; F16/BF16 experts are not supported (they take mmvq's f32 path).",
		Threads: 256,
		Args: []Arg{
			{Name: "logits", Type: ArgPtr, CType: "const f32", Doc: "router logits [tokens][n_expert] (phases 0 and 3)"},
			{Name: "ids", Type: ArgPtr, CType: "i32", Doc: "selected experts [tokens][k_used]: written by phase 0 (or 3), read by 1 and 2"},
			{Name: "wts", Type: ArgPtr, CType: "f32", Doc: "their weights [tokens][k_used]: written by phase 0 (or 3), read by 2"},
			{Name: "err", Type: ArgPtr, CType: "u32", Doc: "[tokens][k_used]: 1 when the selected expert lacks a gate, up or down slot, else 0 (phase 0 or 3 writes)"},
			{Name: "slots_gate", Type: ArgPtr, CType: "const u64", Doc: "n_expert entries: device address of expert e's gate weights [n_ff][n_embd] (16-byte aligned), 0 = not resident"},
			{Name: "slots_up", Type: ArgPtr, CType: "const u64", Doc: "n_expert entries: up weights [n_ff][n_embd], 0 = not resident"},
			{Name: "slots_down", Type: ArgPtr, CType: "const u64", Doc: "n_expert entries: down weights [n_embd][n_ff], 0 = not resident"},
			{Name: "x", Type: ArgPtr, CType: "const u8", Doc: "hidden state as Q8_1 [tokens][n_embd/32 blocks] (phases 1 and 3)"},
			{Name: "h", Type: ArgPtr, CType: "u8", Doc: "SwiGLU output as Q8_1 [tokens][k_used][n_ff/32 blocks]: written by phase 1, read by 2"},
			{Name: "y", Type: ArgPtr, CType: "f32", Doc: "output [tokens][n_embd] (phase 2)"},
			{Name: "phase", Type: ArgI32, Doc: "0 router, 1 gate/up, 2 down, 3 router + gate/up (phase 1's grid)"},
			{Name: "tokens", Type: ArgI32, Doc: "tokens (> 0)"},
			{Name: "n_expert", Type: ArgI32, Doc: "experts, 1..1024"},
			{Name: "k_used", Type: ArgI32, Doc: "experts per token, 1..min(n_expert, 32)"},
			{Name: "renorm", Type: ArgI32, Doc: "nonzero: the k weights are renormalised to sum to 1"},
			{Name: "n_embd", Type: ArgI32, Doc: "hidden size, a multiple of the type's block size"},
			{Name: "n_ff", Type: ArgI32, Doc: "expert FFN size, a multiple of 32 and of the type's block size"},
		},
		Axes: []Axis{{Name: "type", Values: axisWeightType(ISADot4).Values[2:]}},
	},
	{
		Family:   "moe_prefill",
		Template: "moe_prefill",
		Doc: "one MoE FFN layer for many tokens in four launches (phase 0 route: grid (n_expert, 1, 1); phase 1 gate/up + SwiGLU + " +
			"Q8_1 requant: grid (ceil(n_ff/(BM/2)), max_tiles, 1); phase 2 down: grid (ceil(hidden/BM), max_tiles, 1); phase 3 " +
			"weighted combine: grid (ceil(hidden/128), min(tokens, 65535), 1)), block (128, 1, 1), tile r<BM>t<BN>, " +
			"max_tiles = ceil(tokens·k_used/BN) + n_expert; experts are dense stacks, or addressed through slot tables (tabs).",
		Threads: 128,
		Args: []Arg{
			{Name: "x", Type: ArgPtr, CType: "const u8", Doc: "hidden state as Q8_1 [tokens][x_row_blocks] (phase 1); 4-byte aligned"},
			{Name: "ids", Type: ArgPtr, CType: "const i32", Doc: "selected experts [tokens][k_used], distinct per token, each in [0, n_expert) (phase 0)"},
			{Name: "wts", Type: ArgPtr, CType: "const f32", Doc: "their routing weights [tokens][k_used] (phase 3)"},
			{Name: "wg", Type: ArgPtr, CType: "const u8", Doc: "gate weights: expert e at wg + e·gu_mat_bytes, [n_ff][hidden]; 16-byte aligned"},
			{Name: "wu", Type: ArgPtr, CType: "const u8", Doc: "up weights, as wg"},
			{Name: "wd", Type: ArgPtr, CType: "const u8", Doc: "down weights: expert e at wd + e·d_mat_bytes, [hidden][n_ff]; 16-byte aligned"},
			{Name: "tabs", Type: ArgPtr, CType: "const u64", Doc: "null (dense stacks: wg, wu, wd), or slot tables [3][n_expert]: device addresses of expert e's gate, up and down weights (16-byte aligned, anywhere: VRAM slots or mapped host memory); wg, wu, wd and the strides are then unused"},
			{Name: "sched", Type: ArgPtr, CType: "i32", Doc: "schedule, written by phase 0: counts[n_expert], offsets[n_expert], ntiles, then ntiles × (expert, first entry); size 2·n_expert + 1 + 2·max_tiles"},
			{Name: "list", Type: ArgPtr, CType: "i32", Doc: "pair ids t·k_used + slot grouped by expert (tokens·k_used entries), written by phase 0"},
			{Name: "hq", Type: ArgPtr, CType: "u8", Doc: "SwiGLU output as Q8_1 [tokens·k_used][n_ff/32] per pair: written by phase 1, read by 2"},
			{Name: "hf", Type: ArgPtr, CType: "f32", Doc: "null, or [tokens·k_used][n_ff] f32: phase 1 also writes h before requantisation (test hook)"},
			{Name: "yp", Type: ArgPtr, CType: "f32", Doc: "down output per pair [tokens·k_used][hidden] f32: written by phase 2, read by 3"},
			{Name: "out", Type: ArgPtr, CType: "f32", Doc: "[tokens][ldo] f32, read and accumulated into by phase 3"},
			{Name: "gu_mat_bytes", Type: ArgI64, Doc: "bytes between the experts of wg and wu"},
			{Name: "d_mat_bytes", Type: ArgI64, Doc: "bytes between the experts of wd"},
			{Name: "phase", Type: ArgI32, Doc: "0 route, 1 gate/up, 2 down, 3 combine"},
			{Name: "tokens", Type: ArgI32, Doc: "tokens (> 0)"},
			{Name: "k_used", Type: ArgI32, Doc: "experts per token (> 0)"},
			{Name: "n_expert", Type: ArgI32, Doc: "experts, 1..1024"},
			{Name: "hidden", Type: ArgI32, Doc: "hidden size: a multiple of the type's block size"},
			{Name: "n_ff", Type: ArgI32, Doc: "expert width: a multiple of 32 and of the type's block size"},
			{Name: "x_row_blocks", Type: ArgI32, Doc: "Q8_1 blocks between tokens of x, ≥ hidden/32"},
			{Name: "ldo", Type: ArgI32, Doc: "f32 elements between tokens of out, ≥ hidden"},
		},
		Axes:   []Axis{axisPrefillType, axisOp, {Name: "tile", Values: []Value{{Name: "r64t64"}, {Name: "r128t64"}, {Name: "r128t32"}, {Name: "r64t32"}, {Name: "r64t48"}, {Name: "r64t32x"}, {Name: "r64t48x"}}}},
		Fits:   mmqFits, // gate/up: two matrices of BM/2 rows, one BM-row tile (see mmqLDS)
		Absent: moePairAbsent,
	},
	{
		Family:   "quantize_q8_1",
		Template: "quantize_q8_1",
		Doc: "f32 rows → Q8_1 blocks as ggml's MMVQ activation quantizer (d = amax/127, q = roundf(x/d), " +
			"s = fp16 of the sum of the unquantized x); launch grid (ceil(ncols_padded/256), min(nrows, 65535), 1), block (256, 1, 1).",
		Threads: 256,
		Args: []Arg{
			{Name: "x", Type: ArgPtr, CType: "const float", Doc: "input rows, float32, x_stride elements apart"},
			{Name: "y", Type: ArgPtr, CType: "unsigned char", Doc: "output: nrows × ncols_padded/32 Q8_1 blocks of 36 bytes, rows contiguous"},
			{Name: "ncols", Type: ArgI32, Doc: "valid elements per input row (> 0)"},
			{Name: "ncols_padded", Type: ArgI32, Doc: "elements per output row: a multiple of 32, ≥ ncols; the tail quantizes zeros"},
			{Name: "nrows", Type: ArgI32, Doc: "number of rows (> 0); rows beyond gridDim.y are looped over"},
			{Name: "x_stride", Type: ArgI32, Doc: "float32 elements between input rows, ≥ ncols"},
		},
		Axes: []Axis{{Name: "src", Values: []Value{{Name: "f32"}}}},
	},
	{
		Family:   "rmsnorm",
		Template: "rmsnorm",
		Doc: "RMSNorm of f32 rows (or of every head of a row), optionally after the residual add and fused with the " +
			"Q8_1 quantization of its output; one wave per row, launch grid (ceil(rows/8), 1, 1), block (256, 1, 1).",
		Threads: 256,
		Args:    rmsnormArgs,
		Axes:    []Axis{axisRMSNormMode},
	},
	{
		Family:   "rmsnorm_row",
		Template: "rmsnorm_row",
		Doc: "rmsnorm's function, variants, layout and Q8_1 bytes with one 256-thread block per row instead of one wave " +
			"(decode: one row per launch); launch grid (rows, 1, 1), block (256, 1, 1).",
		Threads: 256,
		Args:    rmsnormArgs,
		Axes:    []Axis{axisRMSNormRowMode},
	},
	{
		Family:   "rope",
		Template: "rope",
		Doc: "NeoX rotary embedding in place over the first rot_dims values of every head, per-token positions, " +
			"host-computed f32 frequencies; launch grid (ceil(rows·rot_dims/2 / 256), 1, 1), block (256, 1, 1).",
		Threads: 256,
		Args: []Arg{
			{Name: "x", Type: ArgPtr, CType: "float", Doc: "rows rotated in place (layout: see tok_stride, head_stride)"},
			{Name: "pos", Type: ArgPtr, CType: "const int", Doc: "position of each token (≥ 0, < 2²⁴)"},
			{Name: "freq", Type: ArgPtr, CType: "const float", Doc: "rot_dims/2 f32: float32(1/theta^(float32(2i)/float32(rot_dims)))"},
			{Name: "rows", Type: ArgI32, Doc: "tokens × heads"},
			{Name: "heads", Type: ArgI32, Doc: "heads per token"},
			{Name: "tok_stride", Type: ArgI32, Doc: "f32 elements between tokens"},
			{Name: "head_stride", Type: ArgI32, Doc: "f32 elements between the heads of a token"},
			{Name: "rot_dims", Type: ArgI32, Doc: "rotated values per head, even, ≤ the head dimension"},
		},
		Axes: []Axis{{Name: "layout", Values: []Value{{Name: "neox"}}}},
	},
	{
		Family:   "sample",
		Template: "sample",
		Doc: "token choice per row of f32 logits: argmax (lowest index on ties), or topk: model/sample.go's draw " +
			"(top-k ≤ 64, then top-p and min-p at temperature 1, softmax at temp, one host-drawn uniform per row, in " +
			"float64); launch grid (rows, 1, 1), block (256, 1, 1). argmax in two launches: argmaxp (grid (parts, rows, 1)) " +
			"writes each block's best (index, value) of its share of the row into part, argmaxf (grid (rows, 1, 1)) picks " +
			"the best of the parts: argmax's result.",
		Threads: 256,
		Args: []Arg{
			{Name: "logits", Type: ArgPtr, CType: "const float", Doc: "rows × n f32, stride elements apart"},
			{Name: "out", Type: ArgPtr, CType: "int", Doc: "one token id per row"},
			{Name: "uniform", Type: ArgPtr, CType: "const double", Doc: "topk: one draw in [0, 1) per row from the host's seeded generator"},
			{Name: "part", Type: ArgPtr, CType: "int", Doc: "argmaxp writes, argmaxf reads: rows × parts pairs (index, f32 bits of the value); index 0x7fffffff = none"},
			{Name: "temp", Type: ArgU64, Doc: "topk: temperature (> 0), float64 bits"},
			{Name: "top_p", Type: ArgU64, Doc: "topk: nucleus mass, float64 bits; ≥ 1 or ≤ 0 = off"},
			{Name: "min_p", Type: ArgU64, Doc: "topk: minimum probability relative to the best, float64 bits; ≤ 0 = off"},
			{Name: "n", Type: ArgI32, Doc: "vocabulary size (> 0)"},
			{Name: "stride", Type: ArgI32, Doc: "f32 elements between rows, ≥ n"},
			{Name: "top_k", Type: ArgI32, Doc: "topk: candidates kept, 1 ≤ top_k ≤ min(64, n)"},
			{Name: "parts", Type: ArgI32, Doc: "argmaxp, argmaxf: blocks per row of argmaxp (its grid x), 1 ≤ parts ≤ n; part p covers [p·L, min(n, (p+1)·L)), L = ceil(n/parts)"},
		},
		Axes: []Axis{{Name: "op", Values: []Value{{Name: "argmax"}, {Name: "topk"}, {Name: "argmaxp"}, {Name: "argmaxf"}}}},
	},
}

// mmqArgs is the launch-argument list of mmq, mmq8, mmq8x4, mmq8x4n, mmq8c and mmq8cz (one C struct layout).
var mmqArgs = []Arg{
	{Name: "w", Type: ArgPtr, CType: "const u8", Doc: "weights: rows × k/QK blocks, rows contiguous; 16-byte aligned"},
	{Name: "x", Type: ArgPtr, CType: "const u8", Doc: "activations: tokens × x_row_blocks Q8_1 blocks (36 bytes); 4-byte aligned"},
	{Name: "y", Type: ArgPtr, CType: "f32", Doc: "output y[t·ldy + r] f32"},
	{Name: "rows", Type: ArgI32, Doc: "weight rows (> 0)"},
	{Name: "k", Type: ArgI32, Doc: "elements per row, a positive multiple of the type's block size"},
	{Name: "tokens", Type: ArgI32, Doc: "tokens (> 0)"},
	{Name: "x_row_blocks", Type: ArgI32, Doc: "Q8_1 blocks between tokens, ≥ k/32"},
	{Name: "ldy", Type: ArgI32, Doc: "f32 elements between output tokens, ≥ rows"},
	{Name: "hook_group", Type: ArgI32, Doc: "−1; test hook: g in [0, k/32) makes y[t·ldy + r] the int32 bits of group g's exact integer sum"},
}

// MmvqGeom is one of mmvq's one-column decode geometries (variant <type>_g<N>, NVIDIA): R rows
// a wave and U 32-element groups a lane a pass for the quantized types, and R for F16/BF16
// (0: F16/BF16 have no kernel of the geometry). One 8-wave block covers 8·R rows (F16/BF16:
// 8·FR, the default kernel 8), the grid's x being ceil(rows/that) (the kernel is
// grid-strided, so any x stays correct): the Spec's RowsPerBlock. Every geometry kernel (N ≥ 1)
// prefetches its block's first pass into L1 before the activation staging. The template's
// geometry kernels (mmvq.tmpl) take R, U and B from here (Variant.MmvqShape).
type MmvqGeom struct {
	R, U int // quantized: rows a wave, groups a lane a pass
	FR   int // F16/BF16: rows a wave (0: no geometry kernel; in row 0, the default path's)
	// B: the kernel's blocks an SM that ptxas must allow (NVIDIA launch_bounds' second
	// argument: at most 65536/(256·B) registers a thread); 0 = STRATA_MMVQ_MINB (2), every
	// kernel's before geometries 5–8.
	B int
	// PF: the next pass's weight lines are prefetched into L1 for every type (strata_mmvq_rows_x's
	// PFA; without it only types of ≤ STRATA_MMVQ_PF_GB = 16 bytes a group prefetch them).
	PF bool
	// W: wide loads (strata_mmvq_rows_x's WIDE) for the types with a wide form (Q8_0, Q6_K: blocks
	// only 2-byte aligned, but 8 consecutive blocks 16-byte aligned): a lane reads the 16-byte
	// aligned windows around its group's bytes and the staged activations are shifted to the
	// same byte positions, zeros elsewhere (the same integer dots). Other types, and rows or
	// matrices not 16-byte aligned, take the path R, U and PF give alone.
	W bool
}

// MmvqGeoms is indexed by the geometry number N of variant <type>_g<N>; 0 is the default
// variant <type> (what the kernel ran before geometries existed). 1–4 are the engine
// shapes' (bench/results/2026-11-30-mmvqs-s7); 5–8 were counted for issue 5's 4096×14336
// (bench/results/2026-11-30-mmvq4-s8): one row a wave puts 512 blocks on the H200, one
// wave only at 4 blocks an SM (5, 6, 8: ≤ 64 registers), 7 doubles the groups a lane of
// the default's two rows, and 9 is 1 with the next pass prefetched into L1 for every type.
// 10–14 are wide-load forms (W): of 1, of 2×1 with the next-pass prefetch, of 9, of 5, and
// of 1×1 at 4 blocks an SM with the next-pass prefetch (bench/results/2026-11-30-mmvq-s9).
var MmvqGeoms = []MmvqGeom{
	{R: 2, U: 2},
	{R: 2, U: 2},
	{R: 1, U: 4},
	{R: 3, U: 2},
	{R: 1, U: 2, FR: 1},
	{R: 1, U: 2, B: 4},
	{R: 1, U: 4, B: 4},
	{R: 2, U: 4},
	{R: 1, U: 3, B: 4},
	{R: 2, U: 2, PF: true},
	{R: 2, U: 2, W: true},
	{R: 2, U: 1, PF: true, W: true},
	{R: 2, U: 2, PF: true, W: true},
	{R: 1, U: 2, B: 4, W: true},
	{R: 1, U: 1, B: 4, PF: true, W: true},
}

// MmvqGeomIndex is mmvq variant v's decode geometry: N for <type>_g<N>, 0 for the default.
func (v Variant) MmvqGeomIndex() int {
	if g, ok := strings.CutPrefix(v.Values["geom"], "g"); ok && g != "" && g[0] != '0' {
		if n, err := strconv.Atoi(g); err == nil && n >= 1 && n < len(MmvqGeoms) {
			return n
		}
	}
	return 0
}

// MmvqShape is mmvq variant v's row of MmvqGeoms.
func (v Variant) MmvqShape() MmvqGeom { return MmvqGeoms[v.MmvqGeomIndex()] }
