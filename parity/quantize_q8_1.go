package parity

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/quant"
	"github.com/strata-hip/strata/runtime/gpu"
)

// quantize_q8_1: f32 rows → Q8_1 blocks {fp16 d, fp16 s, int8 q[32]}, as ggml-cuda's
// activation quantizer. Two references:
//
//   - quant.QuantizeQ8_1GPU emulates the kernel's float32 arithmetic step for step (the
//     xor-butterfly sum, a true f32 division, roundf, fp16 by round-to-nearest-even), so
//     the output must match it byte for byte;
//   - float64: each dequantized d·q must be within the quantization step of x, and s
//     within fp32-sum plus fp16 rounding of Σx; this bounds what the bytes mean, and is
//     checked on the CPU reference too (SelfCheck), so the derivations are tested
//     wherever the suite runs.
var quantizeQ81Bounds = []Bound{
	{Name: "bytes", Exact: true, Why: `
		Every step is specified in float32 and emulated exactly by quant.QuantizeQ8_1GPU:
		amax and the butterfly sum are exact f32 operations in a fixed order, d = amax/127 is
		one correctly rounded division, q = roundf(x/d) one more, fp16 conversions are
		round-to-nearest-even. No freedom is left, so any differing byte is a bug.`},
	{Name: "dequant", MaxRowRel: 5e-3, Why: `
		Per 32-value block, |x − fp16(d)·q| against scale = max(amax, 127·2⁻¹⁴) (d normal
		in fp16). Rounding q = round(x/d) errs ≤ d/2 = amax/254 (3.937e-3 of amax); fp16(d)
		errs ≤ 2⁻¹¹·d when normal or 2⁻²⁵ when subnormal, times |q| ≤ 127: ≤ 2⁻¹¹·amax,
		plus 127·2⁻²⁵ ≤ 2⁻¹¹·scale; sum 1/254 + 2·2⁻¹¹ = 4.914e-3. The f32 division and d's
		own rounding shift x/d by ≤ 127·2⁻²³ steps (≤ 1.6e-5 of amax): bound 5e-3.`},
	{Name: "sum", MaxRowRel: 1e-3, Why: `
		Per block, |fp16(s) − Σx| (float64 Σx) against scale = max(Σ|x|, 2⁻¹⁴). The f32
		butterfly adds in 5 levels: ≤ 5·2⁻²⁴·Σ|x| (3.0e-7); fp16 rounding of s: ≤ 2⁻¹¹·|s|
		when normal, 2⁻²⁵ absolute when subnormal (≤ 2⁻¹¹·scale); total ≤ 2·2⁻¹¹ + 3e-7 =
		9.77e-4: bound 1e-3. Inputs keep |Σx| < 65504 (fp16 max) by construction.`},
}

func init() {
	register(&Family{
		Name:   "quantize_q8_1",
		Bounds: map[string][]Bound{"f32": quantizeQ81Bounds},
		// Dims: rows, cols, cols_padded, x_stride.
		Cases: []Case{
			{"rows=1,cols=32", []int{1, 32, 32, 32}},
			{"rows=1,cols=7", []int{1, 7, 32, 7}},
			{"rows=7,cols=4000", []int{7, 4000, 4032, 4000}},
			{"rows=3,cols=4096,stride=4100", []int{3, 4096, 4096, 4100}},
			{"rows=2,cols=8192,padded=8256", []int{2, 8192, 8256, 8192}},
			{"rows=64,cols=2048", []int{64, 2048, 2048, 2048}},
			{"rows=70000,cols=32", []int{70000, 32, 32, 32}}, // more rows than gridDim.y: the loop
		},
		Run:       runQuantizeQ81,
		SelfCheck: selfCheckQuantizeQ81,
	})
}

// activations draws rows×stride f32 values: per-row scale 10^U(−1.5, 1), normal
// values, 1% outliers ×U(20, 100), and 5% of 32-blocks zeroed. Magnitudes stay
// ≤ ~1e3, so a block's |Σx| stays far below fp16's 65504.
func activations(rng *rand.Rand, rows, stride int) []float32 {
	x := make([]float32, rows*stride)
	for r := 0; r < rows; r++ {
		scale := math.Pow(10, -1.5+2.5*rng.Float64())
		row := x[r*stride : (r+1)*stride]
		for i := range row {
			v := rng.NormFloat64() * scale
			if rng.IntN(100) == 0 {
				v *= 20 + 80*rng.Float64()
			}
			row[i] = float32(v)
		}
		for b := 0; b+32 <= len(row); b += 32 {
			if rng.IntN(20) == 0 {
				clear(row[b : b+32])
			}
		}
	}
	return x
}

// quantizeQ81Ref is the byte-exact reference: each row's ncols values through
// quant.QuantizeQ8_1GPU, then zero blocks up to ncols_padded.
func quantizeQ81Ref(x []float32, rows, cols, padded, stride int) ([]byte, error) {
	rowBytes := padded / 32 * 36
	out := make([]byte, rows*rowBytes)
	for r := 0; r < rows; r++ {
		n := (cols + 31) / 32 * 36
		if err := quant.QuantizeQ8_1GPU(x[r*stride:r*stride+cols], out[r*rowBytes:r*rowBytes+n]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// quantizeQ81Float64 compares Q8_1 blocks with the float64 values they encode:
// "dequant" (d·q vs x per block) and "sum" (s vs Σx per block).
func quantizeQ81Float64(q []byte, x []float32, rows, cols, padded, stride int) map[string]Report {
	nb := padded / 32
	xs := make([]float64, rows*padded) // x with the padding as zeros
	for r := 0; r < rows; r++ {
		for i := 0; i < cols; i++ {
			xs[r*padded+i] = float64(x[r*stride+i])
		}
	}
	deq := make([]float64, len(xs))
	sums, refSums := make([]float64, rows*nb), make([]float64, rows*nb)
	amax, sabs := make([]float64, rows*nb), make([]float64, rows*nb)
	for b := 0; b < rows*nb; b++ {
		blk := q[b*36 : b*36+36]
		d := float64(quant.F16ToF32(binary.LittleEndian.Uint16(blk[0:])))
		sums[b] = float64(quant.F16ToF32(binary.LittleEndian.Uint16(blk[2:])))
		for i := 0; i < 32; i++ {
			v := xs[b*32+i]
			deq[b*32+i] = d * float64(int8(blk[4+i]))
			refSums[b] += v
			amax[b] = max(amax[b], math.Abs(v))
			sabs[b] += math.Abs(v)
		}
	}
	return map[string]Report{
		"dequant": CompareRows(deq, xs, 32, func(b int) float64 { return max(amax[b], 127*0x1p-14) }),
		"sum":     CompareRows(sums, refSums, 1, func(b int) float64 { return max(sabs[b], 0x1p-14) }),
	}
}

func runQuantizeQ81(h *Harness, symbol string, c Case, bounds []Bound, rng *rand.Rand) (Outcome, error) {
	rows, cols, padded, stride := c.Dims[0], c.Dims[1], c.Dims[2], c.Dims[3]
	x := activations(rng, rows, stride)
	want, err := quantizeQ81Ref(x, rows, cols, padded, stride)
	if err != nil {
		return Outcome{}, err
	}
	xb := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(xb[4*i:], math.Float32bits(v))
	}
	in, err := h.Input(xb)
	if err != nil {
		return Outcome{}, err
	}
	out, err := h.Output(len(want))
	if err != nil {
		return Outcome{}, err
	}
	fn, err := h.Mod.Func(symbol)
	if err != nil {
		return Outcome{}, err
	}
	args := abi.QuantizeQ81Args{X: in.Ptr(), Y: out.Ptr(), Ncols: int32(cols), NcolsPadded: int32(padded), Nrows: int32(rows), XStride: int32(stride)}
	grid := gpu.Dim3{X: uint32((padded + abi.QuantizeQ81Threads - 1) / abi.QuantizeQ81Threads), Y: uint32(min(rows, 65535)), Z: 1}
	got, el, err := h.Run(fn, grid, gpu.Dim3{X: abi.QuantizeQ81Threads, Y: 1, Z: 1}, args.Bytes(), out)
	if err != nil {
		return Outcome{}, err
	}
	reports := quantizeQ81Float64(got[0], x, rows, cols, padded, stride)
	reports["bytes"] = CompareExact(got[0], want)
	o := Outcome{Reports: reports, Kernel: el.Seconds() * 1e6, Bytes: int64(4*rows*cols + len(want))}
	return o, checkAll(bounds, reports)
}

// selfCheckQuantizeQ81 holds the CPU reference to the float64 bounds.
func selfCheckQuantizeQ81(c Case, rng *rand.Rand) error {
	rows, cols, padded, stride := c.Dims[0], c.Dims[1], c.Dims[2], c.Dims[3]
	x := activations(rng, rows, stride)
	q, err := quantizeQ81Ref(x, rows, cols, padded, stride)
	if err != nil {
		return err
	}
	reports := quantizeQ81Float64(q, x, rows, cols, padded, stride)
	for _, b := range quantizeQ81Bounds {
		if b.Exact {
			continue
		}
		if err := b.Verify(reports[b.Name]); err != nil {
			return fmt.Errorf("the reference itself fails %w", err)
		}
	}
	return nil
}
