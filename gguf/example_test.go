package gguf_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/strata-hip/strata/gguf"
)

func Example() {
	dir, _ := os.MkdirTemp("", "gguf-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "tiny.gguf")

	w := gguf.NewWriter()
	w.AddKV("general.architecture", "qwen3moe")
	w.AddKV("qwen3moe.block_count", uint32(1))
	w.AddTensor("output_norm.weight", gguf.F32, []uint64{4}, make([]byte, 16))
	if err := w.WriteFile(path); err != nil {
		fmt.Println(err)
		return
	}

	f, err := gguf.Open(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	arch, _ := f.Architecture()
	n, _ := f.Uint32(arch + ".block_count")
	_, err = f.Float32(arch + ".block_count") // wrong type: an error, never a conversion
	fmt.Println(arch, n, gguf.RuleOf(err))
	for _, t := range f.Tensors() {
		fmt.Println(t.Name, t.Type, t.Dims, t.Size)
	}
	// Output:
	// qwen3moe 1 K14
	// output_norm.weight F32 [4] 16
}
