package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hip/strata/model/tokenizer"
)

// TestGenerateDraftMatchesGreedy: on the tiny qwen4exp model, `--temp 0 --draft 2` must
// print the reference's greedy continuation (the same text as without drafting), and
// --stats must report the acceptance rate.
func TestGenerateDraftMatchesGreedy(t *testing.T) {
	od := filepath.Join("..", "..", "model", "testdata", "tiny-qwen4exp")
	raw, err := os.ReadFile(filepath.Join(od, "oracle.json"))
	if err != nil {
		t.Fatal(err)
	}
	var o struct {
		Prompts []struct {
			Text      string  `json:"text"`
			GreedyIDs []int32 `json:"greedy_ids"`
		} `json:"prompts"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatal(err)
	}
	dir := tinyHFDir(t, od)
	gguf := filepath.Join(dir, "q4.gguf")
	var so, se bytes.Buffer
	if code := run([]string{"convert", dir, "-o", gguf, "--type", "f32"}, &so, &se); code != 0 {
		t.Fatalf("convert exited %d: %s", code, se.String())
	}
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	p := o.Prompts[0]
	want, err := tok.Decode(p.GreedyIDs)
	if err != nil {
		t.Fatal(err)
	}
	so.Reset()
	se.Reset()
	if code := run([]string{"-m", gguf, "-p", p.Text, "-n", "16", "--temp", "0", "--draft", "2", "--stats", "--no-display-prompt"}, &so, &se); code != 0 {
		t.Fatalf("exit %d: %s", code, se.String())
	}
	if got := strings.TrimSuffix(so.String(), "\n"); got != want {
		t.Errorf("--draft 2: generated %q, want %q", got, want)
	}
	if !strings.Contains(se.String(), "acceptance rate") {
		t.Errorf("--stats: stderr lacks the acceptance rate: %q", se.String())
	}
	// A repetition penalty (which drafts cannot honour) is a clear error.
	se.Reset()
	if code := run([]string{"-m", gguf, "-p", "x", "--draft", "2", "--repeat-penalty", "1.1"}, &so, &se); code == 0 || !strings.Contains(se.String(), "repetition penalty") {
		t.Errorf("--draft with a repetition penalty: exit %d, stderr %q", code, se.String())
	}
}
