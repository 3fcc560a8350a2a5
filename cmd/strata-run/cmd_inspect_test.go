package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hip/strata/gguf"
)

func writeInspectModel(t *testing.T) (string, []byte) {
	t.Helper()
	w := gguf.NewWriter()
	toks := make([]string, 100)
	for i := range toks {
		toks[i] = "tok" + string(rune('a'+i%26))
	}
	for _, kv := range []struct {
		k string
		v any
	}{
		{"general.architecture", "qwen3moe"},
		{"qwen3moe.block_count", uint32(1)},
		{"tokenizer.ggml.tokens", toks},
		{"x.escape", "bell\a"},
	} {
		if err := w.AddKV(kv.k, kv.v); err != nil {
			t.Fatal(err)
		}
	}
	for _, ts := range []struct {
		name string
		typ  gguf.Type
		dims []uint64
		size int
	}{
		{"token_embd.weight", gguf.Q8_0, []uint64{64, 100}, 2 * 34 * 100},
		{"blk.0.ffn_down_exps.weight", gguf.Q5_K, []uint64{256, 4, 2}, 176 * 8},
		{"output_norm.weight", gguf.F32, []uint64{64}, 256},
	} {
		if err := w.AddTensor(ts.name, ts.typ, ts.dims, make([]byte, ts.size)); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, b.Bytes()
}

func TestInspect(t *testing.T) {
	p, _ := writeInspectModel(t)
	var out, errb bytes.Buffer
	if code := run([]string{"inspect", p}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	s := out.String()
	for _, want := range []string{
		`"qwen3moe"`,
		"parameters:    8.51 K (8512)",                        // 64·100 + 256·4·2 + 64
		"tokenizer.ggml.tokens", "[]STRING[100]", "… 94 more", // a long array, summarised
		`"bell\a"`, // escaped, never raw control bytes
		"qwen3moe.block_count", "UINT32",
		"blk.0.ffn_down_exps.weight", "Q5_K", "[256, 4, 2]", "1408",
		"Q8_0  1 tensors  6.64 KiB  (6800 bytes)  supported",
		"Q5_K  1 tensors  1.38 KiB  (1408 bytes)  NOT supported",
		`architecture "qwen3moe": supported`,
		"tensor types: NOT all supported: Q5_K (1 tensors)",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.ContainsRune(s, '\a') {
		t.Error("a raw control character reached the output")
	}
}

func TestInspectErrors(t *testing.T) {
	p, raw := writeInspectModel(t)
	if err := os.WriteFile(p, raw[:len(raw)-10], 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"inspect", p}, &out, &errb); code != 1 {
		t.Fatalf("truncated file: exit %d, want 1", code)
	}
	for _, want := range []string{p, "offset ", "D2 file truncated"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("error lacks %q: %s", want, errb.String())
		}
	}
	if code := run([]string{"inspect"}, &out, &errb); code != 2 {
		t.Fatalf("no file: exit %d, want 2", code)
	}
	errb.Reset()
	if code := run([]string{"inspect", "--arrays", "-1", p}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--arrays -1") {
		t.Fatalf("--arrays -1: exit %d, stderr %q; want 2 naming the flag", code, errb.String())
	}
}
