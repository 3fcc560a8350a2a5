package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/model/tinygen"
	"github.com/strata-hip/strata/model/tokenizer"
)

// tinyHFDir writes the tiny model of the oracle directory od, with the test tokenizer,
// as a Hugging Face directory for convert, and returns it.
func tinyHFDir(t *testing.T, od string) string {
	t.Helper()
	dir := t.TempDir()
	if err := tinygen.WriteHF(od, dir); err != nil {
		t.Fatal(err)
	}
	tokDir := filepath.Join("..", "..", "model", "tokenizer", "testdata")
	for _, n := range []string{"tokenizer.json.gz", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(tokDir, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// tinyGGUF converts a tiny oracle model to GGUF through `strata-run convert` and returns
// the file and the model's oracle.json prompts.
func tinyGGUF(t *testing.T, name, typ string) (string, []struct {
	Text      string  `json:"text"`
	IDs       []int32 `json:"ids"`
	GreedyIDs []int32 `json:"greedy_ids"`
}) {
	t.Helper()
	od := filepath.Join("..", "..", "model", "testdata", name)
	raw, err := os.ReadFile(filepath.Join(od, "oracle.json"))
	if err != nil {
		t.Fatal(err)
	}
	var o struct {
		Prompts []struct {
			Text      string  `json:"text"`
			IDs       []int32 `json:"ids"`
			GreedyIDs []int32 `json:"greedy_ids"`
		} `json:"prompts"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatal(err)
	}
	dir := tinyHFDir(t, od)
	out := filepath.Join(dir, name+".gguf")
	var so, se bytes.Buffer
	if code := run([]string{"convert", dir, "-o", out, "--type", typ}, &so, &se); code != 0 {
		t.Fatalf("convert exited %d: %s", code, se.String())
	}
	return out, o.Prompts
}

// TestGenerateGreedyMatchesOracle: `strata-run -m M -p TEXT -n 16 --temp 0` must print the
// text of the reference's greedy continuation (tokenizer, prefill, cached decode, greedy
// sampling and streaming detokenization, end to end).
func TestGenerateGreedyMatchesOracle(t *testing.T) {
	tok, err := tokenizer.Load(filepath.Join("..", "..", "model", "tokenizer", "testdata", "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"tiny-qwen3moe", "tiny-qwen3next"} {
		t.Run(name, func(t *testing.T) {
			gguf, prompts := tinyGGUF(t, name, "f32")
			for _, p := range prompts {
				want, err := tok.Decode(p.GreedyIDs)
				if err != nil {
					t.Fatal(err)
				}
				var so, se bytes.Buffer
				code := run([]string{"-m", gguf, "-p", p.Text, "-n", "16", "--temp", "0", "--no-display-prompt"}, &so, &se)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, se.String())
				}
				if got := strings.TrimSuffix(so.String(), "\n"); got != want {
					t.Errorf("prompt %q: generated %q, want %q (ids %v)", p.Text, got, want, p.GreedyIDs)
				}
				if !strings.Contains(se.String(), "tok/s") {
					t.Errorf("stderr lacks the tokens/s report: %q", se.String())
				}
			}
			// Bad input is a clear usage error, not a panic.
			var so, se bytes.Buffer
			if code := run([]string{"-m", gguf, "-p", "x", "-c", "1"}, &so, &se); code == 0 || !strings.Contains(se.String(), "-c/--ctx-size") {
				t.Errorf("a prompt longer than -c: exit %d, stderr %q", code, se.String())
			}
			se.Reset()
			if code := run([]string{"-m", gguf, "-p", "x", "-c", "100000"}, &so, &se); code != 2 || !strings.Contains(se.String(), gguf) || !strings.Contains(se.String(), ".context_length 4096") {
				t.Errorf("-c beyond the model: exit %d, stderr %q", code, se.String())
			}
		})
	}
}

// TestPerplexityRuns checks the perplexity report: one line per chunk and a total that
// lies between the smallest and largest chunk values (it is their token-weighted
// geometric mean).
func TestPerplexityRuns(t *testing.T) {
	gguf, prompts := tinyGGUF(t, "tiny-qwen3moe", "q8_0")
	txt := filepath.Join(t.TempDir(), "t.txt")
	os.WriteFile(txt, []byte(prompts[0].Text+"\n"+prompts[1].Text), 0o644)
	var so, se bytes.Buffer
	if code := run([]string{"perplexity", "-m", gguf, "--text", txt, "-c", "12"}, &so, &se); code != 0 {
		t.Fatalf("exit %d: %s", code, se.String())
	}
	lines := strings.Split(strings.TrimSpace(so.String()), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[len(lines)-1], "perplexity: ") {
		t.Fatalf("output %q", so.String())
	}
	var total float64
	fmt.Sscanf(lines[len(lines)-1], "perplexity: %g", &total)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, l := range lines[:len(lines)-1] {
		var i int
		var v float64
		if n, _ := fmt.Sscanf(l, "[%d] %g", &i, &v); n != 2 {
			t.Fatalf("chunk line %q", l)
		}
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if !(total >= lo && total <= hi && lo > 1) {
		t.Fatalf("total perplexity %g outside the chunk range [%g, %g]", total, lo, hi)
	}
}

// TestCheckLogitsCLI runs `strata-run check-logits` on a tiny model's directory (converted
// on the fly) against its own oracle, which must pass, and against the other tiny model's
// oracle (same shapes, different weights), which must fail with a non-zero exit.
func TestCheckLogitsCLI(t *testing.T) {
	gguf, _ := tinyGGUF(t, "tiny-qwen3next", "f32")
	dir := filepath.Dir(gguf)
	od := func(n string) string { return filepath.Join("..", "..", "model", "testdata", n) }
	var so, se bytes.Buffer
	if code := run([]string{"check-logits", "--model", dir, "--oracle", od("tiny-qwen3next")}, &so, &se); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, so.String(), se.String())
	}
	var passed, failed int
	last := strings.Split(strings.TrimSpace(so.String()), "\n")
	if n, _ := fmt.Sscanf(last[len(last)-1], "%d passed, %d failed", &passed, &failed); n != 2 || passed == 0 || failed != 0 {
		t.Fatalf("last line %q", last[len(last)-1])
	}
	so.Reset()
	se.Reset()
	if code := run([]string{"check-logits", "--model", gguf, "--oracle", od("tiny-qwen3moe")}, &so, &se); code == 0 || !strings.Contains(so.String(), "FAIL") {
		t.Fatalf("the wrong oracle passed (exit %d):\n%s", code, so.String())
	}
}

// TestUnusedMask: padding rows inside the vocabulary (a GGUF padded to the embedding's row
// count) and ids past it must never be sampled, even where their logits are the largest.
func TestUnusedMask(t *testing.T) {
	base, err := tokenizer.Load(filepath.Join("..", "..", "model", "tokenizer", "testdata", "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	d := base.Data()
	V := len(d.Tokens)
	d.PadTo(V + 2) // ids V and V+1 are "[PADn]": inside the vocabulary, type unused
	tok, err := tokenizer.New(d)
	if err != nil {
		t.Fatal(err)
	}
	unused := func(id int) bool { return id >= V || base.Type(int32(id)) == tokenizer.TypeUnused }
	mask := unusedMask(tok)
	for _, n := range []int{V + 4, V + 2} { // V+4: two logit rows past the vocabulary; then a new length
		logits := make([]float32, n)
		best := 0
		for i := range logits {
			logits[i] = float32(i) // padding ids, at the end, have the largest logits
			if !unused(i) {
				best = i
			}
		}
		mask(logits)
		for id, l := range logits {
			if masked := math.IsInf(float64(l), -1); masked != unused(id) {
				t.Errorf("n=%d: logit of id %d (type %d) = %v after the mask", n, id, tok.Type(int32(id)), l)
			}
		}
		if id := model.NewSampler(model.SamplerConfig{Temp: 0}).Sample(logits); int(id) != best {
			t.Errorf("n=%d: greedy sampling picked id %d; want %d, the best used id", n, id, best)
		}
		// The GPU's greedy path takes the argmax of the first usedPrefix logits: every
		// unused id lies past them (else there is no prefix, 0), and the best used id is
		// among them.
		u := usedPrefix(tok, n)
		for id := 0; id < n; id++ {
			if unused(id) && id < u || !unused(id) && id >= u {
				t.Fatalf("n=%d: used prefix %d, id %d unused %v", n, u, id, unused(id))
			}
		}
		if u <= best {
			t.Errorf("n=%d: used prefix %d leaves out the best used id %d", n, u, best)
		}
	}
	d.PadTo(V + 3)
	d.Types[V-10] = tokenizer.TypeUnused // an unused id inside: no prefix without it
	if tok, err = tokenizer.New(d); err != nil {
		t.Fatal(err)
	}
	if u := usedPrefix(tok, V+3); u != 0 {
		t.Errorf("an unused id V-10 inside the vocabulary: used prefix %d, want 0", u)
	}
}
