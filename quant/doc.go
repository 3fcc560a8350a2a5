// Package quant implements ggml's block formats in Go: the ground truth every Strata
// kernel is proven against. It imports nothing else of this module.
//
// The arithmetic of every format is in docs/quant-formats.md (the project's copy of the
// spec); the lookup tables come from kernels/tables through gen (tables_gen.go).
//
// # Types and sizes
//
// [Type] is a ggml type id (the number GGUF stores). [Lookup] and [Types] give the
// block geometry ([Info]: elements and bytes per block, whether it is a weight or an
// activation format, and ggml's CPU vec_dot activation type). [Type.RowBytes] sizes a row.
//
// # Decoding
//
// [DecodeRow] decodes a row to float32, equal to ggml's to_float bit for bit (compare
// ±0 by value); [DecodeRow64] decodes to float64, exactly. Both reject a row whose
// length is not a whole number of blocks or whose byte count is wrong, and never read
// outside the block they decode.
//
// # Conversions
//
// [F16ToF32], [F32ToF16], [BF16ToF32] and [F32ToBF16] are the scalar conversions with
// ggml's rounding (nearest even; NaN handling as ggml's reference code).
package quant
