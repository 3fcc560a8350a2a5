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
// NFC needs the Unicode decomposition and composition tables, which Go's standard library
// does not export. nfc_data.txt holds them (Unicode 14.0.0, from Python's unicodedata via
// gen_nfc.py; regenerate with `python3 gen_nfc.py > nfc_data.txt`). The pre-tokenizer's
// letter, number and space classes are in unicode_classes.txt, measured from the reference
// implementation by gen_classes.js (see classes.go for why not Go's unicode package).
//
// # Concurrency
//
// A Tokenizer is immutable after New except for an internal, locked piece cache; it is
// safe for concurrent use. A Decoder (streaming decode) belongs to one goroutine.
package tokenizer
