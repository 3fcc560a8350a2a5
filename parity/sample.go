package parity

import (
	"math"
	"math/rand/v2"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/runtime/gpu"
)

// sample/argmax: the greedy token, as model/sample.go's Temp ≤ 0 path without a
// repetition penalty: the first index holding the largest logit (its loop keeps the first
// strictly larger value), NaN never chosen, 0 when nothing beats −inf.
var sampleArgmax = Bound{Name: "id", Exact: true, Why: `
	A comparison, no arithmetic: the chosen index must be the reference's exactly,
	ties included (lowest index).`}

func init() {
	register(&Family{
		Name:   "sample",
		Bounds: map[string][]Bound{"argmax": {sampleArgmax}},
		// Dims: rows, n, stride, special (0 none, 1 ties at the max, 2 an all −inf row,
		// 3 NaNs sprinkled, 4 the max in the last element).
		Cases: []Case{
			{"rows=1,n=151936", []int{1, 151936, 151936, 0}},
			{"rows=1,n=151936,ties", []int{1, 151936, 151936, 1}},
			{"rows=4,n=1000,stride=1024,-inf", []int{4, 1000, 1024, 2}},
			{"rows=3,n=32000,nan", []int{3, 32000, 32000, 3}},
			{"rows=2,n=7,last", []int{2, 7, 7, 4}},
			{"rows=1,n=1", []int{1, 1, 1, 0}},
			{"rows=64,n=151936", []int{64, 151936, 151936, 1}},
		},
		Run: runSample,
	})
}

// argmaxRef is the greedy choice per row.
func argmaxRef(x []float32, rows, n, stride int) []int32 {
	out := make([]int32, rows)
	for r := 0; r < rows; r++ {
		best, bl := int32(0), math.Inf(-1)
		for i := 0; i < n; i++ {
			if l := float64(x[r*stride+i]); l > bl {
				best, bl = int32(i), l
			}
		}
		out[r] = best
	}
	return out
}

func sampleLogits(rng *rand.Rand, rows, n, stride, special int) []float32 {
	x := make([]float32, rows*stride)
	for r := 0; r < rows; r++ {
		row := x[r*stride : r*stride+n]
		for i := range row {
			row[i] = float32(rng.NormFloat64() * 4)
		}
		switch special {
		case 1: // the max value three times
			m := float32(30)
			for k := 0; k < 3; k++ {
				row[rng.IntN(n)] = m
			}
		case 2:
			if r == 1 {
				for i := range row {
					row[i] = float32(math.Inf(-1))
				}
			}
		case 3:
			for k := 0; k < n/100; k++ {
				row[rng.IntN(n)] = float32(math.NaN())
			}
		case 4:
			row[n-1] = 100
		}
	}
	return x
}

func runSample(h *Harness, symbol string, c Case, bounds []Bound, rng *rand.Rand) (Outcome, error) {
	rows, n, stride, special := c.Dims[0], c.Dims[1], c.Dims[2], c.Dims[3]
	x := sampleLogits(rng, rows, n, stride, special)
	want := argmaxRef(x, rows, n, stride)
	fn, err := h.Mod.Func(symbol)
	if err != nil {
		return Outcome{}, err
	}
	in, err := h.Input(moF32Bytes(x))
	if err != nil {
		return Outcome{}, err
	}
	out, err := h.Output(4 * rows)
	if err != nil {
		return Outcome{}, err
	}
	args := abi.SampleArgs{Logits: in.Ptr(), Out: out.Ptr(), N: int32(n), Stride: int32(stride)}
	got, el, err := h.Run(fn, gpu.Dim3{X: uint32(rows), Y: 1, Z: 1}, moBlock(abi.SampleThreads), args.Bytes(), out)
	if err != nil {
		return Outcome{}, err
	}
	reports := map[string]Report{"id": CompareExact(bytesInt32(got[0]), want)}
	o := Outcome{Reports: reports, Kernel: el.Seconds() * 1e6, Bytes: int64(4*rows*n + 4*rows)}
	return o, checkAll(bounds, reports)
}
