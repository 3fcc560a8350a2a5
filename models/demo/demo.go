// Package demo holds strata-run's embedded default model: an 18.4M-parameter Qwen3-MoE
// (qwen3moe, 6 layers, 8 experts, top-2) trained on the Go standard library's source,
// stored as a Q8_0 GGUF of about 20 MB. README.md beside this file is its model card.
//
// The bytes are embedded with go:embed, so a binary that imports this package runs without
// a download. Callers get the file's bytes as a shared, read-only slice: they must not
// modify it (gguf.ParseBytes aliases it, which is what makes this free).
//
// Built with the tag strata_nodemo the package embeds nothing (nodemo.go): Default and
// Q8_0 return an empty slice and Embedded reports false. That is for binaries that only
// ever run a model named on the command line, and for test binaries carried to a GPU
// machine whose transfer is size-limited.
package demo

// FileName is the embedded GGUF's file name, for messages (it is not on disk).
const FileName = "strata-demo-go-18m-q8_0.gguf"

// MaxBytes bounds the embedded file's size: every strata-run binary carries it.
const MaxBytes = 25_000_000

// Q8_0 returns the embedded Q8_0 GGUF. The slice is shared; do not modify it.
func Q8_0() []byte { return q8_0 }

// Default returns the name and bytes of strata-run's default model (the Q8_0 file).
// The slice is shared; do not modify it.
func Default() (name string, data []byte) { return FileName, q8_0 }
