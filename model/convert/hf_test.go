package convert

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-hip/strata/model/safetensors"
	"github.com/strata-hip/strata/model/tinygen"
)

// TestQwen3NextTransforms checks each tensor transform of the converter against the
// Hugging Face layout as transformers documents it (model/testdata/README.md and the
// tiny-qwen3next model card): in_proj_qkvz groups its rows per key head as
// [q dk | k dk | v r·dv | z r·dv]; norms other than linear_attn.norm are stored as 1 + w;
// A_log becomes −exp(A_log); experts stack in expert order; conv1d drops its middle dim.
func TestQwen3NextTransforms(t *testing.T) {
	cfg, err := os.ReadFile(filepath.Join("..", "testdata", "tiny-qwen3next", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := tinygen.Safetensors(cfg, 5, "w3")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644)
	os.WriteFile(filepath.Join(dir, "model.safetensors"), st, 0o644)
	p, err := FromHF(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ck, err := safetensors.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	hf := func(n string) []float32 {
		v, _, err := ck.Float32(n)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	out := map[string]*Tensor{}
	for _, tt := range p.Tensors {
		out[tt.Name] = tt
	}
	load := func(n string) ([]float32, []int) {
		tt := out[n]
		if tt == nil {
			t.Fatalf("plan has no tensor %s", n)
		}
		v, err := tt.Load()
		if err != nil {
			t.Fatal(err)
		}
		return v, tt.Dims
	}
	const H, nk, nv, dk, dv = 64, 2, 4, 16, 16
	r := nv / nk
	// attn_qkv row j, attn_gate row j → the in_proj_qkvz row they came from.
	qkvz := hf("model.layers.0.linear_attn.in_proj_qkvz.weight")
	grp := 2*dk + 2*r*dv
	srcRow := func(part, j int) int { // part 0 q, 1 k, 2 v, 3 z; j within the part over all heads
		size := []int{dk, dk, r * dv, r * dv}[part]
		off := []int{0, dk, 2 * dk, 2*dk + r*dv}[part]
		return (j/size)*grp + off + j%size
	}
	qkv, dims := load("blk.0.attn_qkv.weight")
	if dims[0] != H || dims[1] != 2*nk*dk+nv*dv {
		t.Fatalf("attn_qkv dims %v", dims)
	}
	for j := 0; j < dims[1]; j++ {
		part, jj := 0, j
		if jj >= nk*dk {
			part, jj = 1, jj-nk*dk
			if jj >= nk*dk {
				part, jj = 2, jj-nk*dk
			}
		}
		s := srcRow(part, jj)
		for c := 0; c < H; c++ {
			if qkv[j*H+c] != qkvz[s*H+c] {
				t.Fatalf("attn_qkv row %d (part %d) col %d = %g, want in_proj_qkvz row %d = %g", j, part, c, qkv[j*H+c], s, qkvz[s*H+c])
			}
		}
	}
	gate, _ := load("blk.0.attn_gate.weight")
	for j := 0; j < nv*dv; j++ {
		s := srcRow(3, j)
		if gate[j*H] != qkvz[s*H] || gate[j*H+H-1] != qkvz[s*H+H-1] {
			t.Fatalf("attn_gate row %d is not in_proj_qkvz row %d", j, s)
		}
	}
	alog := hf("model.layers.0.linear_attn.A_log")
	a, _ := load("blk.0.ssm_a")
	for i := range alog {
		if want := float32(-math.Exp(float64(alog[i]))); a[i] != want {
			t.Fatalf("ssm_a[%d] = %g, want -exp(%g) = %g", i, a[i], alog[i], want)
		}
	}
	for gg, h := range map[string]string{"blk.3.attn_q_norm.weight": "model.layers.3.self_attn.q_norm.weight", "output_norm.weight": "model.norm.weight", "blk.1.post_attention_norm.weight": "model.layers.1.post_attention_layernorm.weight"} {
		g, _ := load(gg)
		w := hf(h)
		for i := range w {
			if g[i] != w[i]+1 {
				t.Fatalf("%s[%d] = %g, want 1 + %g", gg, i, g[i], w[i])
			}
		}
	}
	sn, _ := load("blk.0.ssm_norm.weight")
	if w := hf("model.layers.0.linear_attn.norm.weight"); sn[3] != w[3] {
		t.Fatalf("ssm_norm shifted: %g vs %g", sn[3], w[3])
	}
	conv, cd := load("blk.2.ssm_conv1d.weight")
	if cd[0] != 4 || cd[1] != 2*nk*dk+nv*dv || conv[5*4+2] != hf("model.layers.2.linear_attn.conv1d.weight")[5*4+2] {
		t.Fatalf("ssm_conv1d dims %v or layout wrong", cd)
	}
	down, dd := load("blk.1.ffn_down_exps.weight")
	if dd[0] != 32 || dd[1] != H || dd[2] != 8 {
		t.Fatalf("ffn_down_exps dims %v", dd)
	}
	e5 := hf("model.layers.1.mlp.experts.5.down_proj.weight")
	for i := range e5 {
		if down[5*H*32+i] != e5[i] {
			t.Fatalf("expert 5 of ffn_down_exps differs at %d", i)
		}
	}
	if _, ok := out["output.weight"]; ok {
		t.Fatal("tied embeddings must not produce output.weight")
	}
}
