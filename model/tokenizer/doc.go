// Package tokenizer turns text into the token ids of Qwen2/Qwen3-family models and back.
//
// The model is byte-level BPE (GPT-2 style): text is NFC-normalized, split into pieces by
// Qwen2's pre-tokenizer (a hand-written state machine equivalent to the regex in
// tokenizer.json, see pretokenize.go), each piece's UTF-8 bytes become single-byte symbols,
// and adjacent symbols are merged by merge rank, lowest rank first. Added tokens
// (`<|im_start|>`, `<think>`, ...) are matched in the raw text before any of that.
//
// The core (New) takes plain Data, so it does not depend on a file format. Two loaders
// build Data: FromTokenizerJSON (a Hugging Face tokenizer.json, optionally with its
// tokenizer_config.json) and FromGGUF (the tokenizer.ggml.* metadata of a GGUF file).
// Data is exported so that converters can write it back out (for example into GGUF).
//
// # Special tokens
//
// Token types follow GGUF's tokenizer.ggml.token_type values. Control tokens (type 3, the
// tokenizer.json added tokens with "special": true) are matched in the text only when
// special-token parsing is on; user-defined tokens (type 4, added tokens with "special":
// false such as `<think>`) are always matched. This is what Hugging Face tokenizers does
// with encode_special_tokens, and what llama.cpp does with parse_special=false.
//
// # Unicode data
//
// Exactness needs the reference's Unicode tables, not Go's: its split regex has Unicode
// 16.0 (Go 1.26 has 15.0) and its NFC normalizer data from before Unicode 10. So the
// pre-tokenizer's letter, number and space classes (unicode_classes.txt) and the NFC data
// (nfc_data.txt: combining classes, decompositions, compositions; Go's standard library
// exports no normalizer anyway) are measured from Hugging Face tokenizers by
// gen_reference.js and gen_nfc.py, which say how to regenerate them.
//
// # Concurrency
//
// A Tokenizer is immutable after New except for an internal, locked piece cache; it is
// safe for concurrent use. A Decoder (streaming decode) belongs to one goroutine.
package tokenizer
