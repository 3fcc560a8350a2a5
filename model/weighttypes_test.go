package model_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/quant"
)

// smallMoE is a 2-layer qwen3moe with rows of 256 (the K and IQ block size) whose
// matrices are random valid rows of type qt (quant.RandomRow); norms and router F32.
// With widen, every matrix is instead the float32 decode of the same bytes.
func smallMoE(t *testing.T, qt quant.Type, widen bool) *synthSource {
	const H, V, E, F, nh, nkv, hd = 256, 300, 4, 256, 2, 1, 128
	a := "qwen3moe"
	s := &synthSource{tensors: map[string]*model.Tensor{}, meta: model.MapMeta{
		"general.architecture": a, a + ".context_length": uint32(64), a + ".embedding_length": uint32(H),
		a + ".block_count": uint32(2), a + ".attention.head_count": uint32(nh), a + ".attention.head_count_kv": uint32(nkv),
		a + ".attention.key_length": uint32(hd), a + ".expert_count": uint32(E), a + ".expert_used_count": uint32(2),
		a + ".expert_feed_forward_length": uint32(F), a + ".rope.freq_base": float32(1e4), a + ".attention.layer_norm_rms_epsilon": float32(1e-6)}}
	rng := rand.New(rand.NewPCG(7, uint64(qt)))
	add := func(name string, typ quant.Type, dims ...int) {
		cols, rows := dims[0], 1
		for _, d := range dims[1:] {
			rows *= d
		}
		var data []byte
		if typ == quant.F32 {
			v := make([]float32, rows*cols)
			for i := range v {
				v[i] = float32(rng.NormFloat64() * 0.1)
				if len(dims) == 1 {
					v[i] += 1
				}
			}
			s.tensors[name] = model.NewF32Tensor(name, dims, v)
			s.names = append(s.names, name)
			return
		}
		for r := 0; r < rows; r++ {
			row, err := quant.RandomRow(typ, cols, rng)
			if err != nil {
				t.Fatal(err)
			}
			data = append(data, row...)
		}
		tt, err := model.NewQuantTensor(name, typ, dims, data)
		if err != nil {
			t.Fatal(err)
		}
		if widen {
			tt = model.NewF32Tensor(name, dims, tt.Float32s())
		}
		s.tensors[name] = tt
		s.names = append(s.names, name)
	}
	add("token_embd.weight", qt, H, V)
	add("output_norm.weight", quant.F32, H)
	for i := 0; i < 2; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		add(p+"attn_norm.weight", quant.F32, H)
		add(p+"attn_q.weight", qt, H, nh*hd)
		add(p+"attn_k.weight", qt, H, nkv*hd)
		add(p+"attn_v.weight", qt, H, nkv*hd)
		add(p+"attn_output.weight", qt, nh*hd, H)
		add(p+"attn_q_norm.weight", quant.F32, hd)
		add(p+"attn_k_norm.weight", quant.F32, hd)
		add(p+"ffn_norm.weight", quant.F32, H)
		add(p+"ffn_gate_inp.weight", quant.F32, H, E)
		add(p+"ffn_gate_exps.weight", qt, H, F, E)
		add(p+"ffn_up_exps.weight", qt, H, F, E)
		add(p+"ffn_down_exps.weight", qt, F, H, E)
	}
	return s
}

// TestEveryWeightType runs a model stored in each weight type quant decodes and compares
// its logits with the same model whose matrices were widened to F32 beforehand. Both do
// the same float32 arithmetic on the same values except for summation order (fused
// single-row dots vs decode-then-dot), so they agree to 1e-4 of the logit range; prefill
// (decode-then-dot) and decode (fused dots where the type has one) are both covered.
func TestEveryWeightType(t *testing.T) {
	ids := []int32{3, 141, 59, 26, 5}
	for _, qt := range quant.WeightTypes() {
		t.Run(qt.String(), func(t *testing.T) {
			run := func(widen bool) []float32 {
				m, err := model.Load(smallMoE(t, qt, widen))
				if err != nil {
					t.Fatal(err)
				}
				st, _ := m.NewState(8)
				all, err := st.Forward(ids[:4], true, nil)
				if err != nil {
					t.Fatal(err)
				}
				last, err := st.Forward(ids[4:], false, nil)
				if err != nil {
					t.Fatal(err)
				}
				return append(all, last...)
			}
			got, want := run(false), run(true)
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, v := range want {
				lo, hi = math.Min(lo, float64(v)), math.Max(hi, float64(v))
			}
			for i := range want {
				if d := math.Abs(float64(got[i] - want[i])); !(d <= 1e-4*(hi-lo)) {
					t.Fatalf("logit %d: %g vs %g widened (range %g)", i, got[i], want[i], hi-lo)
				}
			}
		})
	}
}
