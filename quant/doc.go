// Package quant implements ggml's block formats in Go: the ground truth every Strata
// kernel is proven against. It imports nothing else of this module.
//
// The arithmetic of every format is in the project's docs/quant-formats.md (kept with
// DESIGN.md, not in this repository); the comments here carry what the code needs. The
// IQ lookup tables come from kernels/tables through gen (tables_gen.go), the
// same data the kernels' C include is rendered from. Everything here is checked against
// ggml's own outputs by TestVectors (go test ./quant -run TestVectors -v [-vectors DIR]).
//
// # Types and sizes
//
// [Type] is a ggml type id, the number GGUF stores: [F32], [F16], [BF16], [Q8_0],
// [Q8_1], [Q8_K], [Q2_0], [Q4_K], [Q6_K], [IQ2_XS], [IQ3_XXS], [IQ3_S], [IQ1_M].
// [Lookup] returns its [Info] (name, elements and bytes per block, weight or activation
// format, and VecDotType: the activation type ggml's CPU pairs with the weights);
// [Types] and [WeightTypes] list them; [ParseType] maps ggml's names back;
// [Type.RowBytes] sizes a row and rejects a length that is not whole blocks.
//
// # Decoding
//
// [DecodeRow] decodes a row to float32, equal to ggml's to_float bit for bit (compare
// ±0 by value: ggml writes −0 for a zero quant under a negative Q6_K scale).
// [DecodeRow64] decodes to float64, exactly; float32(DecodeRow64) == DecodeRow. Both
// also decode the activation formats Q8_0, Q8_1 and Q8_K, never read outside the block
// they decode (FuzzDecode), and return an error for a wrong byte or element count.
// [IntView] gives a weight block in integer form ([IntBlock]: int quants, integer
// sub-scale multipliers, and one or two exact float64 super-scales), the form the
// integer dot products and the kernels work in.
//
// # Quantizing
//
// [Quantize] is ggml's reference quantizer for F16, BF16, Q8_0, Q8_1
// (quantize_row_q8_1_ref, s = fp16(d·Σq)), Q8_K, Q2_0, Q4_K and Q6_K; it reproduces
// ggml's bytes (all vectors' weights and activations). [QuantizeQ8_1GPU] is the
// activation quantizer of the GPU matrix-vector kernels (x/d with half-away rounding,
// s = fp16 of the warp-butterfly sum of x), which is not the CPU reference.
// The IQ types need an importance matrix and ggml's search tables to quantize; for
// tests, [RandomRow] makes random valid blocks of every type (realistic scales, fp16
// subnormals, outliers, all-zero blocks, every grid index and sign pattern) and
// [RandomActivations] makes float activations with outlier channels and a zero block.
//
// # Dot products
//
// [DotCPU] (activation in the type's VecDotType) and [DotGPU] (activation as Q8_1
// blocks) return a [Dot]: Exact is Σ w·a of the decoded operands rounded once to
// float64, computed from exact integer block sums; GGML is the float32 value ggml's
// arithmetic gives — for DotCPU bit for bit ggml's generic CPU vec_dot, for DotGPU
// ggml-cuda's MMVQ per-block arithmetic including the truncating integer divisions of
// IQ2_XS and IQ3_XXS, summed in block order. [VecDotCPU] is the GGML value alone,
// without the cost of the exact sum. [DotF32] is the exact dot with unquantized float32
// activations (the reference for F16/BF16 mat-vec and the value the quantized paths
// approximate).
//
// # Conversions
//
// [F16ToF32], [F32ToF16], [BF16ToF32] and [F32ToBF16] are the scalar conversions with
// ggml's rounding (nearest even; NaN and subnormal handling as ggml's reference code).
//
// # What does not match ggml
//
// Quantize writes zero bsums for an all-zero Q8_K block, where ggml leaves whatever the
// buffer held. The quantizers follow ggml's reference C code compiled without FMA
// contraction (as the vectors' ggml was); a ggml built with -mfma and GCC's default
// -ffp-contract=fast can round a few K-quant search steps differently and so, rarely,
// choose other bytes. Nothing else is known to differ; no vector case fails.
package quant
