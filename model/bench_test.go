package model_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/model/convert"
	"github.com/strata-hip/strata/quant"
)

// Benchmarks of the CPU engine. Each reports prefill and decode tokens/s; results and the
// command are committed under bench/results/2026-11-29-cpu-engine/.

type synthSource struct {
	meta    model.MapMeta
	tensors map[string]*model.Tensor
	names   []string
}

func (s *synthSource) Path() string                          { return "synthetic" }
func (s *synthSource) Meta() model.Meta                      { return s.meta }
func (s *synthSource) Tensor(n string) (*model.Tensor, bool) { t, ok := s.tensors[n]; return t, ok }
func (s *synthSource) Names() []string                       { return s.names }

// add makes a tensor of type qt: a pool of 16 rows of N(0, 0.02²) values quantized with
// quant.Quantize and tiled over all rows (values do not change the work; realistic
// scales keep the float arithmetic free of subnormals).
func (s *synthSource) add(name string, qt quant.Type, dims ...int) {
	cols, rows := dims[0], 1
	for _, d := range dims[1:] {
		rows *= d
	}
	rb, err := qt.RowBytes(cols)
	if err != nil {
		panic(err)
	}
	rng := rand.New(rand.NewPCG(uint64(len(s.names)), 1))
	const pool = 16
	pb := make([]byte, pool*rb)
	x := make([]float32, cols)
	for r := 0; r < pool; r++ {
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 0.02)
			if len(dims) == 1 {
				x[i] += 1 // norm weights
			}
		}
		if err := quant.Quantize(qt, x, pb[r*rb:(r+1)*rb]); err != nil {
			panic(err)
		}
	}
	data := make([]byte, rows*rb)
	for off := 0; off < len(data); off += len(pb) {
		copy(data[off:], pb)
	}
	t, err := model.NewQuantTensor(name, qt, dims, data)
	if err != nil {
		panic(err)
	}
	s.tensors[name] = t
	s.names = append(s.names, name)
}

// synth30B is a Qwen3-30B-A3B-shaped qwen3moe with `layers` decoder layers: hidden 2048,
// 32 query / 4 KV heads of 128, 128 experts of 768 with 8 used, vocab 151936. Matrices are
// qt; norms and the router are F32 as the converter writes them.
func synth30B(qt quant.Type, layers int) *synthSource {
	const H, V, E, F, nh, nkv, hd = 2048, 151936, 128, 768, 32, 4, 128
	a := "qwen3moe"
	s := &synthSource{tensors: map[string]*model.Tensor{}, meta: model.MapMeta{
		"general.architecture": a, a + ".context_length": uint32(40960), a + ".embedding_length": uint32(H),
		a + ".block_count": uint32(layers), a + ".attention.head_count": uint32(nh), a + ".attention.head_count_kv": uint32(nkv),
		a + ".attention.key_length": uint32(hd), a + ".expert_count": uint32(E), a + ".expert_used_count": uint32(8),
		a + ".expert_feed_forward_length": uint32(F), a + ".rope.freq_base": float32(1e6), a + ".attention.layer_norm_rms_epsilon": float32(1e-6)}}
	s.add("token_embd.weight", qt, H, V)
	s.add("output_norm.weight", quant.F32, H)
	s.add("output.weight", qt, H, V)
	for i := 0; i < layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		s.add(p+"attn_norm.weight", quant.F32, H)
		s.add(p+"attn_q.weight", qt, H, nh*hd)
		s.add(p+"attn_k.weight", qt, H, nkv*hd)
		s.add(p+"attn_v.weight", qt, H, nkv*hd)
		s.add(p+"attn_output.weight", qt, nh*hd, H)
		s.add(p+"attn_q_norm.weight", quant.F32, hd)
		s.add(p+"attn_k_norm.weight", quant.F32, hd)
		s.add(p+"ffn_norm.weight", quant.F32, H)
		s.add(p+"ffn_gate_inp.weight", quant.F32, H, E)
		s.add(p+"ffn_gate_exps.weight", qt, H, F, E)
		s.add(p+"ffn_up_exps.weight", qt, H, F, E)
		s.add(p+"ffn_down_exps.weight", qt, F, H, E)
	}
	return s
}

// runPrefillDecode times a prefill of nPrompt tokens and nDecode single-token steps.
func runPrefillDecode(b *testing.B, m *model.Model, nPrompt, nDecode int) {
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([]int32, nPrompt)
	for i := range ids {
		ids[i] = int32(rng.IntN(m.Vocab))
	}
	var pre, dec, preCPU, decCPU time.Duration
	for i := 0; i < b.N; i++ {
		st, err := m.NewState(nPrompt + nDecode)
		if err != nil {
			b.Fatal(err)
		}
		t0, c0 := time.Now(), cpuTime()
		if _, err := st.Forward(ids, false, nil); err != nil {
			b.Fatal(err)
		}
		t1, c1 := time.Now(), cpuTime()
		for k := 0; k < nDecode; k++ {
			if _, err := st.Forward(ids[k:k+1], false, nil); err != nil {
				b.Fatal(err)
			}
		}
		pre += t1.Sub(t0)
		dec += time.Since(t1)
		preCPU += c1 - c0
		decCPU += cpuTime() - c1
	}
	// CPU time per token is what the engine costs; wall-clock tok/s also depends on how
	// many of the cores other processes are using at the time.
	b.ReportMetric(float64(preCPU.Milliseconds())/float64(nPrompt*b.N), "prefill-cpu-ms/tok")
	b.ReportMetric(float64(decCPU.Milliseconds())/float64(nDecode*b.N), "decode-cpu-ms/tok")
	b.ReportMetric(float64(nPrompt*b.N)/pre.Seconds(), "prefill-tok/s")
	b.ReportMetric(float64(nDecode*b.N)/dec.Seconds(), "decode-tok/s")
	b.ReportMetric(float64(runtime.GOMAXPROCS(0)), "threads")
}

// BenchmarkTiny: the two 4-layer tiny oracle models (hidden 64, vocab 151936: the
// lm_head dominates), converted to GGUF in each weight type.
func BenchmarkTiny(b *testing.B) {
	for _, name := range []string{"tiny-qwen3moe", "tiny-qwen3next"} {
		for _, typ := range []string{"f32", "q8_0"} {
			b.Run(name+"/"+typ, func(b *testing.B) {
				p, err := convert.FromHF(tinyHF(b, name))
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close()
				path := b.TempDir() + "/m.gguf"
				if err := p.WriteGGUF(path, convert.OutputTypes[typ], nil); err != nil {
					b.Fatal(err)
				}
				src, err := model.OpenGGUF(path)
				if err != nil {
					b.Fatal(err)
				}
				defer src.Close()
				m, err := model.Load(src)
				if err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				runPrefillDecode(b, m, 64, 16)
			})
		}
	}
}

// BenchmarkSynthetic30BA3B: two decoder layers of Qwen3-30B-A3B's shape plus its
// embedding and lm_head, in Q8_0 and Q4_K.
func BenchmarkSynthetic30BA3B(b *testing.B) {
	for _, qt := range []quant.Type{quant.Q8_0, quant.Q4_K} {
		b.Run(qt.String(), func(b *testing.B) {
			m, err := model.Load(synth30B(qt, 2))
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			runPrefillDecode(b, m, 32, 4)
		})
	}
}
