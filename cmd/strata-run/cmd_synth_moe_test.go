package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestSynthMoE: `synth --arch qwen3moe` writes a model the CPU engine generates from, and
// its flag errors name the flag.
func TestSynthMoE(t *testing.T) {
	out := filepath.Join(t.TempDir(), "moe.gguf")
	var so, se bytes.Buffer
	// "q4_k": ggml's q4_K in the lower case that convert and the dense synth take.
	if code := run([]string{"synth", "--arch", "qwen3moe", "-o", out, "--type", "q4_k", "--layers", "2"}, &so, &se); code != 0 {
		t.Fatalf("synth exited %d: %s", code, se.String())
	}
	if !strings.Contains(so.String(), "qwen3moe, 2 layers, 16 experts (top 4)") {
		t.Errorf("synth output %q", so.String())
	}
	so.Reset()
	se.Reset()
	if code := run([]string{"-m", out, "-p", "hello", "-n", "4", "--temp", "0", "--no-display-prompt"}, &so, &se); code != 0 {
		t.Fatalf("generate exited %d: %s", code, se.String())
	}
	next := filepath.Join(t.TempDir(), "next.gguf")
	if code := run([]string{"synth", "--arch", "qwen3next", "-o", next}, &so, &se); code != 0 || !strings.Contains(so.String(), "qwen3next, 4 layers") {
		t.Fatalf("synth --arch qwen3next exited %d: %s %s", code, so.String(), se.String())
	}
	if code := run([]string{"-m", next, "-p", "hi", "-n", "3", "--temp", "0", "--backend", "cpu"}, &so, &se); code != 0 {
		t.Fatalf("generate on qwen3next exited %d: %s", code, se.String())
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"synth", "--arch", "qwen3next", "--preset", "tiny", "-o", out}, "--preset tiny is qwen3moe, not --arch qwen3next"},
		{[]string{"synth", "--preset", "huge", "-o", out}, `unknown --preset "huge"`},
		{[]string{"synth", "--preset", "tiny"}, "-o OUT.gguf is required"},
		{[]string{"synth", "--preset", "tiny", "-o", out, "--type", "q9"}, "--type"},
		{[]string{"synth", "--preset", "tiny", "-o", out, "--layers", "-1"}, "--layers -1 must not be negative"},
	} {
		se.Reset()
		if code := run(c.args, &so, &se); code != 2 || !strings.Contains(se.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, se.String(), c.want)
		}
	}
}
