package model_test

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hip/strata/gguf"
	"github.com/strata-hip/strata/model"
)

// TestOpenGGUFErrors: a tensor the CPU engine cannot serve is an error from OpenGGUF that is
// a *gguf.Error with the checklist's rule and names the file and the tensor.
func TestOpenGGUFErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		typ  gguf.Type
		dims []uint64
		rule gguf.Rule
		says string
	}{
		// Q8_K is an activation format: a valid ggml type that quant cannot decode as weights.
		{"unsupported-type", gguf.Q8_K, []uint64{256, 2}, gguf.RuleUnsupportedType, "Q8_K"},
		{"zero-dim", gguf.Q8_0, []uint64{32, 0}, gguf.RuleZeroDim, "[32 0]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := gguf.NewWriter()
			w.AddKV("general.architecture", "qwen3moe")
			n := uint64(1)
			for _, d := range c.dims {
				n *= d
			}
			ok := []float32{1, 2, 3, 4}
			if err := w.AddTensor("output_norm.weight", gguf.F32, []uint64{4}, f32bytes(ok)); err != nil {
				t.Fatal(err)
			}
			info, _ := c.typ.Info()
			data := make([]byte, n/info.BlockSize*info.BlockBytes)
			if err := w.AddTensor("blk.0.bad.weight", c.typ, c.dims, data); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "bad.gguf")
			if err := w.WriteFile(path); err != nil {
				t.Fatal(err)
			}
			src, err := model.OpenGGUF(path)
			if err == nil {
				src.Close()
				t.Fatal("no error")
			}
			t.Log(err)
			if got := gguf.RuleOf(err); got != c.rule {
				t.Errorf("rule %q, want %q: %v", got, c.rule, err)
			}
			for _, s := range []string{path, "blk.0.bad.weight", c.says} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

func f32bytes(v []float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		u := math.Float32bits(x)
		b = append(b, byte(u), byte(u>>8), byte(u>>16), byte(u>>24))
	}
	return b
}
