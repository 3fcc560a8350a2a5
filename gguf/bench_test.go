package gguf

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkOpen10GB opens and validates a sparse 10.45 GB file shaped like a 40-layer MoE
// model (Q4_K experts, Q8_0 attention): the cost must be the header's, not a read of the
// data. Results: bench/results/2026-11-29-gguf-open/.
func BenchmarkOpen10GB(b *testing.B) {
	for _, vocab := range []int{0, 151936} {
		b.Run(fmt.Sprintf("vocab=%d", vocab), func(b *testing.B) {
			p, size := sparseModel(b, vocab)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				f, err := Open(p)
				if err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
			b.ReportMetric(float64(size)/1e9, "GB")
		})
	}
}

func sparseModel(b *testing.B, vocab int) (string, int64) {
	w := NewWriter()
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	must(w.AddKV("general.architecture", "qwen3moe"))
	must(w.AddKV("qwen3moe.block_count", uint32(40)))
	if vocab > 0 {
		toks := make([]string, vocab)
		types := make([]int32, vocab)
		for i := range toks {
			toks[i] = fmt.Sprintf("tok%06d", i)
			types[i] = 1
		}
		must(w.AddKV(KeyTokens, toks))
		must(w.AddKV(KeyTokenType, types))
		merges := make([]string, vocab)
		for i := range merges {
			merges[i] = fmt.Sprintf("t%d u%d", i, i+1)
		}
		must(w.AddKV(KeyMerges, merges))
	}
	never := func(io.Writer) error { panic("sparse benchmark file: data is never written") }
	add := func(name string, t Type, dims ...uint64) { must(w.AddTensorFunc(name, t, dims, never)) }
	add("token_embd.weight", Q8_0, 2048, 151936)
	for l := 0; l < 40; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		add(p+"attn_norm.weight", F32, 2048)
		add(p+"attn_q.weight", Q8_0, 2048, 4096)
		add(p+"attn_k.weight", Q8_0, 2048, 512)
		add(p+"attn_v.weight", Q8_0, 2048, 512)
		add(p+"attn_output.weight", Q8_0, 4096, 2048)
		add(p+"attn_q_norm.weight", F32, 128)
		add(p+"attn_k_norm.weight", F32, 128)
		add(p+"ffn_norm.weight", F32, 2048)
		add(p+"ffn_gate_inp.weight", F32, 2048, 128)
		add(p+"ffn_gate_exps.weight", Q4_K, 2048, 512, 128)
		add(p+"ffn_up_exps.weight", Q4_K, 2048, 512, 128)
		add(p+"ffn_down_exps.weight", Q4_K, 512, 2048, 128)
	}
	add("output_norm.weight", F32, 2048)
	add("output.weight", Q6_K, 2048, 151936)
	hdr, dataSize, err := w.EncodeHeader()
	must(err)
	p := filepath.Join(b.TempDir(), "sparse.gguf")
	fh, err := os.Create(p)
	must(err)
	_, err = fh.Write(hdr)
	must(err)
	size := int64(len(hdr)) + int64(dataSize)
	must(fh.Truncate(size)) // a hole: no data blocks are written or read
	must(fh.Close())
	return p, size
}
