package model_test

import (
	"math/rand/v2"
	"testing"

	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/quant"
)

// BenchmarkMatVec: one token through a 768×2048 matrix (an expert gate or up projection of
// Qwen3-30B-A3B) on one thread: matmul's decode path, the tensor's fused Dot where it has
// one, else decode-then-dot. cpu-ns/op (getrusage) is the figure to compare on a shared
// machine. Results: bench/results/2026-11-29-cpu-engine/.
func BenchmarkMatVec(b *testing.B) {
	const cols, rows = 2048, 768
	defer model.SetThreads(model.SetThreads(1))
	rng := rand.New(rand.NewPCG(1, 2))
	w := make([]float32, cols)
	x := make([]float32, cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for _, qt := range []quant.Type{quant.Q8_0, quant.Q4_K, quant.Q6_K} {
		b.Run(qt.String(), func(b *testing.B) {
			rb, _ := qt.RowBytes(cols)
			data := make([]byte, rows*rb)
			for r := 0; r < rows; r++ {
				for i := range w {
					w[i] = float32(rng.NormFloat64() * 0.02)
				}
				if err := quant.Quantize(qt, w, data[r*rb:(r+1)*rb]); err != nil {
					b.Fatal(err)
				}
			}
			t, err := model.NewQuantTensor("w", qt, []int{cols, rows}, data)
			if err != nil {
				b.Fatal(err)
			}
			out := make([]float32, rows)
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			c0 := cpuTime()
			for range b.N {
				model.Matmul(out, t, 0, rows, x, 1)
			}
			b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
		})
	}
}
