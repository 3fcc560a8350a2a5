package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestSynthRuns writes a synthetic model of the tiny oracle's shape with a tokenizer and
// generates from it with MTP drafting: the file is a complete qwen4exp model.
func TestSynthRuns(t *testing.T) {
	out := filepath.Join(t.TempDir(), "synth.gguf")
	cfg := filepath.Join("..", "..", "model", "testdata", "tiny-qwen4exp", "config.json")
	tok := filepath.Join("..", "..", "model", "tokenizer", "testdata", "tokenizer.json.gz")
	var so, se bytes.Buffer
	if code := run([]string{"synth", "-o", out, "--config", cfg, "--type", "q8_0", "--tokenizer", tok, "--zipf", "1.2"}, &so, &se); code != 0 {
		t.Fatalf("synth exited %d: %s", code, se.String())
	}
	if !strings.Contains(so.String(), "qwen4exp, 144 tensors") || !strings.Contains(se.String(), "router Zipf exponent 1.2") {
		t.Errorf("synth output %q, stderr %q", so.String(), se.String())
	}
	so.Reset()
	se.Reset()
	if code := run([]string{"-m", out, "-p", "hello", "-n", "6", "--temp", "0", "--draft", "2", "--stats"}, &so, &se); code != 0 {
		t.Fatalf("generate exited %d: %s", code, se.String())
	}
	if !strings.Contains(se.String(), "verification passes") {
		t.Errorf("stderr %q lacks the draft statistics", se.String())
	}
	se.Reset()
	if code := run([]string{"synth", "-o", out, "--type", "q3_x"}, &so, &se); code != 2 {
		t.Errorf("a bad --type: exit %d, stderr %q", code, se.String())
	}
}
