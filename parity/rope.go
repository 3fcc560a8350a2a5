package parity

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/runtime/gpu"
)

// rope: NeoX rotary embedding of the first rot_dims values of each head, as model/
// forward.go's ropeNeoX: the frequency table and the f32 angle f32(pos)·freq[i] are the
// CPU engine's float32 values (ropeFreqs restates its formula); the reference rotates in
// float64 with the exact sine and cosine of that f32 angle.
var ropeX = Bound{Name: "x", MaxRowRel: 1e-6, Why: `
	Per head, |x' − x'₆₄| against the head's max |x| (input). sin/cos: the f64 reduction
	r = a − k·π/2 is exact to 3e-11 for a < 2²⁴ rad; r rounds to f32 (≤ 2⁻²⁴·π/4 = 4.7e-8
	absolute); the polynomials err ≤ 2 ulp of values ≤ 1 (1.2e-7): |Δsin|, |Δcos| ≤ 1.7e-7.
	x0·c − x1·s (fused or not) adds ≤ 2 roundings of ≤ (|x0| + |x1|)·2⁻²⁴. Total ≤
	(|x0| + |x1|)·(1.7e-7 + 1.2e-7) ≤ 2·max|x|·2.9e-7 = 5.8e-7·max|x|: bound 1e-6.
	Values past rot_dims must come back bit-identical (checked separately, no tolerance).`}

func init() {
	register(&Family{
		Name:   "rope",
		Bounds: map[string][]Bound{"neox": {ropeX}},
		// Dims: tokens, heads, hd, rot_dims, tok_stride, head_stride, max position
		// (0: positions 0..tokens−1 in order), theta.
		Cases: []Case{
			{"tokens=1,heads=16,hd=256,rot=64,pos<262144", []int{1, 16, 256, 64, 4096, 256, 262144, 10000000}},
			{"tokens=7,heads=2,hd=256,rot=64", []int{7, 2, 256, 64, 512, 256, 262144, 10000000}},
			{"tokens=5,heads=32,hd=128,rot=128", []int{5, 32, 128, 128, 4096, 128, 40960, 1000000}},
			{"tokens=3,heads=16,hd=256,rot=64,gatedq", []int{3, 16, 256, 64, 16 * 512, 512, 262144, 10000000}},
			{"tokens=100,heads=4,hd=128,rot=128,pos=0..99", []int{100, 4, 128, 128, 512, 128, 0, 1000000}},
			{"tokens=1,heads=1,hd=64,rot=2,pos=262143", []int{1, 1, 64, 2, 64, 64, -262143, 10000}},
		},
		Run:       runRoPE,
		SelfCheck: selfCheckRoPE,
	})
}

// ropeFreqs is model/forward.go's frequency, float32(1/base^(float32(2i)/float32(rd))).
func ropeFreqs(rd int, base float64) []float32 {
	f := make([]float32, rd/2)
	for i := range f {
		f[i] = float32(1 / math.Pow(base, float64(float32(2*i)/float32(rd))))
	}
	return f
}

// ropePositions draws the tokens' positions for a case (see the Dims comment).
func ropePositions(rng *rand.Rand, tokens, maxPos int) []int32 {
	pos := make([]int32, tokens)
	for t := range pos {
		switch {
		case maxPos == 0:
			pos[t] = int32(t)
		case maxPos < 0:
			pos[t] = int32(-maxPos)
		default:
			pos[t] = rng.Int32N(int32(maxPos))
		}
	}
	return pos
}

// ropeRef rotates a copy of the whole buffer x in float64.
func ropeRef(x []float32, pos []int32, freq []float32, tokens, heads, ts, hs, rd int) []float64 {
	y := moF64s(x)
	half := rd / 2
	for t := 0; t < tokens; t++ {
		for hh := 0; hh < heads; hh++ {
			off := t*ts + hh*hs
			for i := 0; i < half; i++ {
				a := float64(float32(pos[t]) * freq[i]) // the f32 angle
				c, s := math.Cos(a), math.Sin(a)
				x0, x1 := float64(x[off+i]), float64(x[off+i+half])
				y[off+i] = x0*c - x1*s
				y[off+i+half] = x1*c + x0*s
			}
		}
	}
	return y
}

func ropeInputs(rng *rand.Rand, c Case) (x []float32, pos []int32, freq []float32) {
	tokens, ts, rd, maxPos, theta := c.Dims[0], c.Dims[4], c.Dims[3], c.Dims[6], c.Dims[7]
	x = activations(rng, 1, tokens*ts)
	return x, ropePositions(rng, tokens, maxPos), ropeFreqs(rd, float64(theta))
}

// ropeCompare reports the rotated heads against the reference, each head one row of hd
// values scaled by its input's max |x|; and fails if anything outside the rotated
// values (head tails past rot_dims, gaps between heads) changed at all.
func ropeCompare(got []float32, x []float32, want []float64, c Case) (Report, error) {
	tokens, heads, hd, rd, ts, hs := c.Dims[0], c.Dims[1], c.Dims[2], c.Dims[3], c.Dims[4], c.Dims[5]
	var g, w, sc []float64
	touched := make([]bool, len(x))
	for t := 0; t < tokens; t++ {
		for hh := 0; hh < heads; hh++ {
			off := t*ts + hh*hs
			var m float64
			for i := 0; i < hd; i++ {
				m = max(m, math.Abs(float64(x[off+i])))
			}
			for i := 0; i < rd; i++ {
				g, w = append(g, float64(got[off+i])), append(w, want[off+i])
				touched[off+i] = true
			}
			sc = append(sc, m)
		}
	}
	for i := range x {
		if !touched[i] && math.Float32bits(got[i]) != math.Float32bits(x[i]) {
			return Report{}, fmt.Errorf("element %d outside the rotated values changed: %v → %v", i, x[i], got[i])
		}
	}
	return CompareRows(g, w, rd, func(row int) float64 { return sc[row] }), nil
}

func runRoPE(h *Harness, symbol string, c Case, bounds []Bound, rng *rand.Rand) (Outcome, error) {
	tokens, heads, rd, ts, hs := c.Dims[0], c.Dims[1], c.Dims[3], c.Dims[4], c.Dims[5]
	x, pos, freq := ropeInputs(rng, c)
	want := ropeRef(x, pos, freq, tokens, heads, ts, hs, rd)
	fn, err := h.Mod.Func(symbol)
	if err != nil {
		return Outcome{}, err
	}
	in, err := h.moInputs(int32Bytes(pos), f32Bytes(freq))
	if err != nil {
		return Outcome{}, err
	}
	xb, err := h.InOut(f32Bytes(x))
	if err != nil {
		return Outcome{}, err
	}
	args := abi.RopeArgs{X: xb.Ptr(), Pos: in[0].Ptr(), Freq: in[1].Ptr(), Rows: int32(tokens * heads), Heads: int32(heads),
		TokStride: int32(ts), HeadStride: int32(hs), RotDims: int32(rd)}
	pairs := tokens * heads * rd / 2
	grid := gpu.Dim3{X: uint32((pairs + abi.RopeThreads - 1) / abi.RopeThreads), Y: 1, Z: 1}
	got, el, err := h.Run(fn, grid, moBlock(abi.RopeThreads), args.Bytes(), xb)
	if err != nil {
		return Outcome{}, err
	}
	rep, err := ropeCompare(bytesF32(got[0]), x, want, c)
	if err != nil {
		return Outcome{}, err
	}
	reports := map[string]Report{"x": rep}
	o := Outcome{Reports: reports, Kernel: el.Seconds() * 1e6, Bytes: int64(pairs) * 16}
	return o, checkAll(bounds, reports)
}

// selfCheckRoPE: the CPU engine's float32 rotation (model/forward.go's ropeNeoX, restated)
// is within the declared bound of the float64 reference, and the rotation keeps each
// pair's norm.
func selfCheckRoPE(c Case, rng *rand.Rand) error {
	tokens, heads, rd, ts, hs := c.Dims[0], c.Dims[1], c.Dims[3], c.Dims[4], c.Dims[5]
	x, pos, freq := ropeInputs(rng, c)
	want := ropeRef(x, pos, freq, tokens, heads, ts, hs, rd)
	cpu := append([]float32(nil), x...)
	half := rd / 2
	for t := 0; t < tokens; t++ {
		for hh := 0; hh < heads; hh++ {
			v := cpu[t*ts+hh*hs:]
			for i := 0; i < half; i++ {
				ang := float64(float32(pos[t]) * freq[i])
				cs, sn := float32(math.Cos(ang)), float32(math.Sin(ang))
				x0, x1 := v[i], v[i+half]
				v[i] = x0*cs - x1*sn
				v[i+half] = x1*cs + x0*sn
				n0 := float64(x0)*float64(x0) + float64(x1)*float64(x1)
				n1 := want[t*ts+hh*hs+i]*want[t*ts+hh*hs+i] + want[t*ts+hh*hs+i+half]*want[t*ts+hh*hs+i+half]
				if math.Abs(n0-n1) > 1e-12*max(n0, 1e-30) {
					return fmt.Errorf("pair (%d, %d, %d): norm² %.17g → %.17g", t, hh, i, n0, n1)
				}
			}
		}
	}
	rep, err := ropeCompare(cpu, x, want, c)
	if err != nil {
		return err
	}
	return ropeX.Verify(rep)
}
