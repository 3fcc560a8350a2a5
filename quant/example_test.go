package quant_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/strata-hip/strata/quant"
)

// A Q8_0 round trip: d = fp16(amax/127) = fp16(0.01) = 0.010002136…, q = roundf(x/d).
func ExampleQuantize() {
	x := make([]float32, 32)
	x[0], x[1], x[2] = 1.27, -0.5, 0.03
	row := make([]byte, 34)
	if err := quant.Quantize(quant.Q8_0, x, row); err != nil {
		panic(err)
	}
	y := make([]float32, 32)
	if err := quant.DecodeRow(quant.Q8_0, row, y); err != nil {
		panic(err)
	}
	fmt.Println(int8(row[2]), int8(row[3]), int8(row[4]), y[:3])
	// Output: 127 -50 3 [1.2702713 -0.5001068 0.030006409]
}

// The exact and ggml values of one row's dot product on the CPU path: Q4_K weights
// against a Q8_K activation.
func ExampleDotCPU() {
	rng := rand.New(rand.NewPCG(1, 2))
	w, err := quant.RandomRow(quant.Q4_K, 512, rng)
	if err != nil {
		panic(err)
	}
	act := make([]byte, 2*292)
	if err := quant.Quantize(quant.Q8_K, quant.RandomActivations(512, rng), act); err != nil {
		panic(err)
	}
	d, err := quant.DotCPU(quant.Q4_K, w, act)
	if err != nil {
		panic(err)
	}
	fmt.Printf("exact %.6g, ggml %.6g\n", d.Exact, d.GGML)
}
