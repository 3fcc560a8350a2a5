// Package gguf reads and writes GGUF model files (versions 2 and 3, little-endian), the
// format llama.cpp uses, hardened against malformed and malicious input.
//
// # Reading
//
//	f, err := gguf.Open("model.gguf")            // or "model-00001-of-00003.gguf": all shards
//	defer f.Close()
//	arch, err := f.String("general.architecture")
//	n, err := f.Uint32(arch + ".block_count")     // exact type, else an error (no coercion)
//	toks, err := f.Strings("tokenizer.ggml.tokens")
//	for _, t := range f.Tensors() { ... }         // file order: Name, Type, Dims, Size, Offset, Shard
//	b, err := f.Data("blk.0.ffn_down_exps.weight") // a slice of the mapping, no copy
//	n, err := gguf.CopyOut(staging, b)             // a fault (file truncated under us) → error
//
// ParseBytes applies the same validation to a file held in memory (an embedded model).
//
// Open maps every shard read-only (syscall.Mmap on unix; a read into memory elsewhere) and
// validates the header, every metadata entry, every tensor info and the data layout before
// returning, by arithmetic on the mapped header alone: the data section is never read, so
// opening a 100 GB model costs milliseconds. All sizes derived from the file use checked
// 64-bit arithmetic; every count and length is capped by the bytes left before anything is
// allocated; tensors must be of a known type, lie inside the file, be aligned and follow
// each other in info order without overlap or gaps (llama.cpp's rule).
//
// Getters are strict: String, Uint32, Uint64, Int32, Float32, Bool require exactly that
// GGUF type; Int and Float64 widen among integer / float types only; array getters
// (Strings, Int32s, Uint32s, Uint8s, Float32s, Bools, Ints) check the element type. A
// missing key is an *Error with Rule RuleMissingKey that wraps ErrMissingKey.
//
// The model-semantics helpers (Expect, CheckTensorSet, CheckSupportedTypes, IntRange,
// BlockIndex, VocabSize, TokenID, ChatTemplate, CheckFinite) give callers the checklist's
// S rules and D4 with the same error type.
//
// # Errors
//
// Every error about a file is an *Error with the file's path, the byte offset of the
// offending field (or -1), a Rule and a detail that says what to do. The Rule values are
// the case ids of docs/reliability.md §1.4 (H1..H8, K1..K14, T1..T16, D1..D5, S1..S7):
// branch on Rule (or RuleOf(err)), never on message text. Trailing bytes after the last
// tensor (D3) are accepted and reported by Warnings.
//
// # Writing
//
//	w := gguf.NewWriter()
//	w.AddKV("general.architecture", "qwen3moe")    // Go types map to GGUF types; order kept
//	w.AddKV("general.alignment", uint32(64))       // optional, default 32
//	w.AddTensor("token_embd.weight", gguf.Q8_0, []uint64{1024, 151936}, data)
//	w.AddTensorFunc("blk.0.ffn_up_exps.weight", gguf.Q4_K, dims, func(out io.Writer) error { ... })
//	err := w.WriteFile("out.gguf")                 // or w.WriteShards("out", gguf.SplitOptions{MaxBytes: 4 << 30})
//
// What the Writer writes, Open reads back exactly: the same metadata in the same order and
// types, the same tensors in the same order, with the same alignment.
//
// # Types
//
// Type is a ggml type id; Type.Info gives its block size and bytes per block (the table is
// ggml's type traits), ByteSize the checked byte size of a tensor.
//
// # Memory
//
// Slices from Data alias a read-only mapping: writing to them faults, and they are invalid
// after Close. Reading them directly is fine while the file is intact; if the file can be
// truncated or replaced while mapped, copy through CopyOut, which converts the resulting
// SIGBUS into an error (debug.SetPanicOnFault) instead of crashing the process.
package gguf
