// Package model is Strata's pure-Go CPU inference engine for the qwen3moe (Qwen3-30B-A3B
// family) and qwen3next (Qwen3-Next) architectures, and the reference the GPU engine is
// checked against.
//
// # Loading
//
// A Source serves metadata (in GGUF's key space) and tensors (in llama.cpp's names and
// ggml's dimension order). OpenGGUF maps a GGUF file through package gguf; the converter
// (model/convert) serves a Hugging Face checkpoint from memory through the same interface,
// so both paths share one loader. Load validates every hyperparameter and every tensor's
// presence and shape against them before any large read, and fails with an error naming
// the file and the key or tensor.
//
// Weights stay in their stored format (any type package quant decodes): each product
// decodes a row at a time, or uses a fused row dot (F32, Q8_0, Q4_K) for a single token.
// Matrix products split their rows over all cores (SetThreads).
//
// # Running
//
// A State is one sequence: its position, the KV cache of the attention layers and the conv
// and recurrent state of the gated delta-net layers. Forward takes the next tokens and
// returns logits; any split of a sequence into Forward calls gives the same logits (a
// test holds prefill + decode to full prefill). Trace exposes per-layer hidden states and
// router choices for comparisons with a reference (model/oracle).
//
// Arithmetic is float32 throughout, with float64 where a reduction's accuracy matters
// (RMSNorm, attention softmax and weighted sums); see the bounds in model/oracle for how
// close this is to the reference implementation.
//
// # Memory
//
// Tensors from a GGUFSource alias its read-only mapping and are valid until Close. Reads
// of the mapping happen inside Forward under debug.SetPanicOnFault, so a file truncated
// while mapped turns into an error from Forward instead of a crash.
package model
