package convert

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hip/strata/model/tinygen"
)

// TestQwen4ExpHashConstants derives the real model's PLE constants from its config values
// and compares them with the ones the spec lists (qwen4exp.md §7, equal to a public
// engine's and to the checkpoint's I64 tensors).
func TestQwen4ExpHashConstants(t *testing.T) {
	c := &q4HFConfig{VocabSize: 248320, HiddenSize: 2560, NumLayers: 48, PLELayerIDs: []int{2}, PLEEmbedDim: 2560,
		NgramSize: 3, HeadsPerNgram: 8, NgramVocabBase: 20000000, NgramDivisible: 128, SplitNgramParts: 128}
	g, err := c.pleGeometry("test")
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, got, want any) {
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: got %v, want %v", what, got, want)
		}
	}
	check("multipliers", g.mult, []int64{23703573157769, 20109073645365, 8052911324071})
	check("head vocab sizes", g.sizes, []int64{20000003, 20000023, 20000033, 20000047, 20000059, 20000063, 20000069, 20000077,
		20000081, 20000093, 20000107, 20000147, 20000153, 20000159, 20000161, 20000171})
	check("head offsets", g.offsets, []int64{0, 20000003, 40000026, 60000059, 80000106, 100000165, 120000228, 140000297,
		160000374, 180000455, 200000548, 220000655, 240000802, 260000955, 280001114, 300001275})
	check("rows (used, padded)", []int64{g.used, g.rows}, []int64{320001446, 320001536})
	check("layer, heads, head dim", []int{g.layer, g.nHeads, g.headDim}, []int{1, 16, 160})
}

// tinyQwen4ExpVariant writes the tiny qwen4exp checkpoint with edits: the tensor list is
// passed through edit, the config through editCfg.
func tinyQwen4ExpVariant(t *testing.T, edit func([]map[string]any) []map[string]any, editCfg func(map[string]any) any) string {
	t.Helper()
	od := filepath.Join("..", "testdata", "tiny-qwen4exp")
	raw, err := os.ReadFile(filepath.Join(od, "oracle.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfgRaw, err := os.ReadFile(filepath.Join(od, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var o map[string]any
	json.Unmarshal(raw, &o)
	var list []map[string]any
	b, _ := json.Marshal(o["tensors"])
	json.Unmarshal(b, &list)
	o["tensors"] = edit(list)
	raw, _ = json.Marshal(o)
	st, err := tinygen.SafetensorsFromOracle(raw)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	json.Unmarshal(cfgRaw, &cfg)
	cfgRaw, _ = json.Marshal(editCfg(cfg))
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.json"), cfgRaw, 0o644)
	os.WriteFile(filepath.Join(dir, "model.safetensors"), st, 0o644)
	return dir
}

func names(p *Plan) []string {
	var out []string
	for _, t := range p.Tensors {
		out = append(out, fmt.Sprintf("%s%v", t.Name, t.Dims))
	}
	return out
}

// TestQwen4ExpMultimodalLayout: the real checkpoint's layout (Qwen4ExpForConditionalGeneration:
// text config nested in text_config, text weights under model.language_model., a vision
// tower under model.visual.) converts to the same GGUF tensors as the text-only layout,
// with the vision tower skipped and noted; an unknown text tensor or a wrong hash constant
// is an error naming it.
func TestQwen4ExpMultimodalLayout(t *testing.T) {
	same := func(l []map[string]any) []map[string]any { return l }
	flat := func(c map[string]any) any { return c }
	textOnly, err := FromHF(tinyQwen4ExpVariant(t, same, flat))
	if err != nil {
		t.Fatal(err)
	}
	defer textOnly.Close()

	mm := tinyQwen4ExpVariant(t, func(l []map[string]any) []map[string]any {
		for _, e := range l {
			if n := e["name"].(string); strings.HasPrefix(n, "model.") {
				e["name"] = "model.language_model." + strings.TrimPrefix(n, "model.")
			}
		}
		return append(l, map[string]any{"name": "model.visual.blocks.0.attn.qkv.weight", "dtype": "BF16", "shape": []int{8, 4}, "kind": "w3"})
	}, func(c map[string]any) any {
		return map[string]any{"model_type": "qwen4_exp", "architectures": []string{"Qwen4ExpForConditionalGeneration"},
			"tie_word_embeddings": true, "text_config": c, "vision_config": map[string]any{"depth": 1}}
	})
	p, err := FromHF(mm)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if fmt.Sprint(names(p)) != fmt.Sprint(names(textOnly)) {
		t.Errorf("multimodal layout planned %v\ntext-only %v", names(p), names(textOnly))
	}
	if len(p.Notes) != 1 || !strings.Contains(p.Notes[0], "vision tower (1 model.visual.* tensors)") {
		t.Errorf("notes %q, want one about the skipped vision tower", p.Notes)
	}

	_, err = FromHF(tinyQwen4ExpVariant(t, func(l []map[string]any) []map[string]any {
		return append(l, map[string]any{"name": "model.layers.0.mystery.weight", "dtype": "BF16", "shape": []int{2}, "kind": "w3"})
	}, flat))
	if err == nil || !strings.Contains(err.Error(), "model.layers.0.mystery.weight") {
		t.Errorf("an unknown tensor: err %v, want one naming it", err)
	}
	_, err = FromHF(tinyQwen4ExpVariant(t, func(l []map[string]any) []map[string]any {
		for _, e := range l {
			if strings.HasSuffix(e["name"].(string), "layer_multipliers") {
				e["values"] = []int64{1, 3, 5}
			}
		}
		return l
	}, flat))
	if err == nil || !strings.Contains(err.Error(), "layer_multipliers") {
		t.Errorf("wrong hash multipliers: err %v, want one naming them", err)
	}
}

// TestQwen4ExpTiledValueHeads: GGUF value head j holds checkpoint head (j mod nk)·r + j/nk
// in every per-value-head tensor (here ssm_beta and ssm_dt.bias; tiny: nk 2, nv 4, r 2).
func TestQwen4ExpTiledValueHeads(t *testing.T) {
	dir := tinyQwen4ExpVariant(t, func(l []map[string]any) []map[string]any { return l }, func(c map[string]any) any { return c })
	p, err := FromHF(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	load := func(gguf string) []float32 {
		for _, tt := range p.Tensors {
			if tt.Name == gguf {
				v, err := tt.Load()
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
		}
		t.Fatalf("no tensor %s", gguf)
		return nil
	}
	hfB, err := p.read("model.layers.0.linear_attn.in_proj_b.weight")
	if err != nil {
		t.Fatal(err)
	}
	hfDT, _ := p.read("model.layers.0.linear_attn.dt_bias")
	beta, dt := load("blk.0.ssm_beta.weight"), load("blk.0.ssm_dt.bias")
	const nk, r, H = 2, 2, 64
	for j := 0; j < 4; j++ {
		src := (j%nk)*r + j/nk
		if fmt.Sprint(beta[j*H:(j+1)*H]) != fmt.Sprint(hfB[src*H:(src+1)*H]) || dt[j] != hfDT[src] {
			t.Errorf("GGUF value head %d does not hold checkpoint head %d", j, src)
		}
	}
}

// FuzzQwen4ExpConfig: any config.json gives a parsed config or an error, never a panic or
// a hang (the n-gram prime search is bounded by the config limits).
func FuzzQwen4ExpConfig(f *testing.F) {
	tiny, err := os.ReadFile(filepath.Join("..", "testdata", "tiny-qwen4exp", "config.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tiny)
	f.Add([]byte(flashNextConfig))
	f.Add([]byte(`{"model_type":"qwen4_exp","text_config":{"hidden_size":-1}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := qwen4ExpConfig(raw, "fuzz")
		if err == nil && (c.HiddenSize <= 0 || c.NumLayers <= 0 || len(c.qsa) != c.NumLayers) {
			t.Fatalf("accepted an invalid config: hidden %d, layers %d, %d layer types", c.HiddenSize, c.NumLayers, len(c.qsa))
		}
	})
}
