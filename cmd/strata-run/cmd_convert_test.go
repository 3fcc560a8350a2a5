package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hip/strata/gguf"
)

// TestConvertQ2_0: `convert --type q2_0` stores every matrix whose rows are whole 64-wide
// blocks as Q2_0, falls back to Q8_0 per tensor where they are not (the tiny model's
// 32-wide expert down projections), writes LLAMA_FTYPE_MOSTLY_Q2_0, and the file runs.
func TestConvertQ2_0(t *testing.T) {
	path, prompts := tinyGGUF(t, "tiny-qwen3moe", "q2_0")
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if ft, err := f.Uint32("general.file_type"); err != nil || ft != 41 {
		t.Errorf("general.file_type = %d, %v; want 41 (LLAMA_FTYPE_MOSTLY_Q2_0)", ft, err)
	}
	n := map[gguf.Type]int{}
	for _, ti := range f.Tensors() {
		n[ti.Type]++
		if ti.Type == gguf.F32 {
			continue // 1-D tensors and routers
		}
		want := gguf.Q2_0
		if ti.Dims[0]%64 != 0 {
			want = gguf.Q8_0
		}
		if ti.Type != want {
			t.Errorf("%s %v: type %s, want %s", ti.Name, ti.Dims, ti.Type, want)
		}
	}
	if n[gguf.Q2_0] == 0 || n[gguf.Q8_0] == 0 {
		t.Errorf("tensor types %v: want both Q2_0 matrices and Q8_0 fallbacks", n)
	}
	txt := filepath.Join(t.TempDir(), "t.txt")
	os.WriteFile(txt, []byte(prompts[0].Text+"\n"+prompts[1].Text), 0o644)
	var so, se bytes.Buffer
	if code := run([]string{"perplexity", "-m", path, "--text", txt, "-c", "12"}, &so, &se); code != 0 {
		t.Fatalf("perplexity exit %d: %s", code, se.String())
	}
	lines := strings.Split(strings.TrimSpace(so.String()), "\n")
	var ppl float64
	if k, _ := fmt.Sscanf(lines[len(lines)-1], "perplexity: %g", &ppl); k != 1 || !(ppl > 1) || math.IsInf(ppl, 0) {
		t.Fatalf("perplexity output %q", so.String())
	}
}
