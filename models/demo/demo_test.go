//go:build !strata_nodemo

package demo

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"testing"

	"github.com/strata-hip/strata/gguf"
)

// wantSHA256 is the sha256 of the shipped file, as recorded in README.md. A new model
// changes it, the card and bench/results/2026-11-29-demo-model/ together.
const wantSHA256 = "0421d66bd43b3e784a257d900f80b6a9b7d189fcb8eea681a7920b73a7a04349"

func TestEmbeddedFile(t *testing.T) {
	name, b := Default()
	if name != FileName {
		t.Fatalf("Default() name %q, want %q", name, FileName)
	}
	if len(b) == 0 || len(b) > MaxBytes {
		t.Fatalf("embedded model is %d bytes, want 1..%d", len(b), MaxBytes)
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != wantSHA256 {
		t.Fatalf("%s sha256 %s, want %s (update README.md and wantSHA256 together)", FileName, got, wantSHA256)
	}
	if &Q8_0()[0] != &b[0] {
		t.Fatal("Q8_0() and Default() return different slices")
	}
}

func TestEmbeddedGGUF(t *testing.T) {
	f, err := gguf.ParseBytes(FileName, Q8_0())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	arch, err := f.String("general.architecture")
	if err != nil || arch != "qwen3moe" {
		t.Fatalf("general.architecture = %q, %v; want qwen3moe", arch, err)
	}
	for key, want := range map[string]int{
		"qwen3moe.block_count":        6,
		"qwen3moe.expert_count":       8,
		"qwen3moe.expert_used_count":  2,
		"qwen3moe.embedding_length":   512,
		"qwen3moe.context_length":     1024,
		"tokenizer.ggml.eos_token_id": 8189,
	} {
		got, err := f.Int(key)
		if err != nil || got != want {
			t.Errorf("%s = %d, %v; want %d", key, got, err, want)
		}
	}
	toks, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil || len(toks) != 8192 || toks[8189] != "<|endoftext|>" {
		t.Fatalf("tokenizer.ggml.tokens: %d tokens, err %v; want 8192 with <|endoftext|> at 8189", len(toks), err)
	}
	if n := len(f.Tensors()); n != 74 {
		t.Errorf("%d tensors, want 74 (6 layers x 12 + embedding + output norm)", n)
	}
}

// TestHeldOutText guards the perplexity text against edits: the numbers in README.md were
// computed on exactly these bytes ($GOROOT/src/container/ring/ring.go of go1.26.8).
func TestHeldOutText(t *testing.T) {
	b, err := os.ReadFile("testdata/heldout.txt")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	const want = "afd2489e5a3ee55297061be3273ef9a0331aee2c3871b4f13c0b25ceb5783451"
	if got := hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("testdata/heldout.txt sha256 %s, want %s", got, want)
	}
}
