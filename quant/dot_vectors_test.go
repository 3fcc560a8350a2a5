package quant

import (
	"math"
	"testing"
)

func init() {
	vectorChecks = append(vectorChecks, checkDotVectors)
}

// checkDotVectors compares DotCPU with the vectors' exact dot and ggml's scalar build
// bit for bit, and DotGPU's exact value with the exact dot against the CPU-reference
// q8_1 activation.
func checkDotVectors(t *testing.T, v *vectorFile, typ Type, _ []float32, wq []byte) counts {
	c := counts{}
	act, q81 := v.section("act_q"), v.section("act_q8_1")
	for r := 0; r < v.Rows; r++ {
		row := wq[r*v.RowBytes : (r+1)*v.RowBytes]
		d, err := DotCPU(typ, row, act)
		if err != nil {
			t.Fatalf("row %d: %v", r, err)
		}
		if d.Exact != v.Dot.ExactQ[r] {
			t.Errorf("row %d: DotCPU exact %.17g, vectors %.17g (diff %.3g of l1)", r, d.Exact, v.Dot.ExactQ[r], math.Abs(d.Exact-v.Dot.ExactQ[r])/v.L1[r])
		}
		if want := parseBits(t, v.Dot.ScalarBits[r]); math.Float32bits(d.GGML) != math.Float32bits(want) {
			t.Errorf("row %d: DotCPU ggml %.9g (%#08x), ggml scalar build %.9g (%s)", r, d.GGML, math.Float32bits(d.GGML), want, v.Dot.ScalarBits[r])
		}
		if g, err := VecDotCPU(typ, row, act); err != nil || g != d.GGML {
			t.Errorf("row %d: VecDotCPU %g (%v), DotCPU ggml %g", r, g, err, d.GGML)
		}
		if f, err := DotF32(typ, row, f32s(v.section("act_f32"))); err != nil || f != v.Dot.ExactF32[r] {
			t.Errorf("row %d: DotF32 %.17g (%v), vectors %.17g", r, f, err, v.Dot.ExactF32[r])
		}
		c["cpu-dots"]++
		c["f32-dots"]++
		if typ == F16 || typ == BF16 {
			continue
		}
		g, err := DotGPU(typ, row, q81)
		if err != nil {
			t.Fatalf("row %d: %v", r, err)
		}
		if g.Exact != v.Dot.ExactQ81[r] {
			t.Errorf("row %d: DotGPU exact %.17g, vectors %.17g", r, g.Exact, v.Dot.ExactQ81[r])
		}
		// The GPU float32 fold differs from the exact value by float32 rounding and,
		// for IQ2_XS and IQ3_XXS, by ggml-cuda's truncating divisions (≈1e-5 of l1).
		if e := math.Abs(float64(g.GGML)-g.Exact) / v.L1[r]; e > 1e-4 {
			t.Errorf("row %d: DotGPU ggml %g vs exact %g: %.3g of l1", r, g.GGML, g.Exact, e)
		}
		c["gpu-dots"]++
	}
	return c
}
