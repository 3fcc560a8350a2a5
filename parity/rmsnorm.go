package parity

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/quant"
	"github.com/strata-hip/strata/runtime/gpu"
)

// rmsnorm: y = x / sqrt(mean(x²) + eps) · w per row (model/forward.go's rmsNorm, which
// the float64 reference below restates: the CPU engine sums the squares in float64 too),
// optionally after x ← x + r and with y's Q8_1 quantization fused.
var (
	rmsnormY = Bound{Name: "y", MaxRowRel: 2e-5, Why: `
		Per element |y − y₆₄| against the row's max |y₆₄| (each element's error is relative to
		itself, so the row max is a safe scale). Σx²: n/32 fused multiply-adds per lane, then a
		5-level butterfly, all terms ≥ 0: ≤ (n/32 + 5)·2⁻²⁴ relative. mean, +eps, sqrt (≤ 1 ulp
		on AMD), 1/x: 4 more roundings (2⁻²³ for sqrt). inv takes half the Σx² error: ≤
		(½(n/32 + 5) + 5)·2⁻²⁴; (x·inv)·w adds 2·2⁻²⁴. At n = 16384 (the largest case):
		(258.5 + 7)·2⁻²⁴ = 1.58e-5: bound 2e-5.`}
	rmsnormXO = Bound{Name: "xo", Exact: true, Why: `
		x + r is one f32 addition, correctly rounded on every target and in Go's float32:
		no freedom, any difference is a bug.`}
	rmsnormQ = Bound{Name: "q", Exact: true, Why: `
		The fused quantization must equal quant.QuantizeQ8_1GPU applied to the kernel's own
		f32 y (the values it also stores): the same butterfly order, f32 division, roundf and
		fp16 RNE as quantize_q8_1, whose bytes are exact (see quantize_q8_1/f32/bytes). How
		far y is from float64 is the y check's business.`}
)

func init() {
	register(&Family{
		Name: "rmsnorm",
		Bounds: map[string][]Bound{
			"f32":    {rmsnormY},
			"add":    {rmsnormY, rmsnormXO},
			"q81":    {rmsnormY, rmsnormQ},
			"addq81": {rmsnormY, rmsnormXO, rmsnormQ},
		},
		// Dims: tokens, heads, n, tok_stride, head_stride, in place (y = x and xo = x).
		Cases: []Case{
			{"rows=1,n=32", []int{1, 1, 32, 32, 32, 0}},
			{"rows=1,n=2048", []int{1, 1, 2048, 2048, 2048, 0}},
			{"rows=7,n=4096", []int{7, 1, 4096, 4096, 4096, 0}},
			{"rows=3,n=16384", []int{3, 1, 16384, 16384, 16384, 0}},
			{"rows=9,n=2048,inplace", []int{9, 1, 2048, 2048, 2048, 1}},
			{"rows=512,n=2048", []int{512, 1, 2048, 2048, 2048, 0}},
			// Per-head q norm inside a gated q projection ([q_h | gate_h] per head).
			{"tokens=5,heads=16,hd=256,gatedq", []int{5, 16, 256, 16 * 512, 512, 0}},
			// Per-head k norm, dense heads.
			{"tokens=3,heads=4,hd=128", []int{3, 4, 128, 512, 128, 0}},
		},
		Run:       runRMSNorm,
		SelfCheck: selfCheckRMSNorm,
	})
	// rmsnorm_row: the same function with a block per row; its Σx² adds n/256 terms per
	// thread, a 5-level butterfly and 8 wave sums: fewer roundings than rmsnorm's n/32 + 5,
	// so rmsnorm's derivation and bound hold (at n = 16384: (½(64 + 13) + 5)·2⁻²⁴ + 2·2⁻²⁴
	// = 2.7e-6 ≤ 2e-5); xo and the Q8_1 bytes have no freedom, as for rmsnorm. q81wave and
	// addq81wave are the previous Q8_1 step (measurement baseline): the same function and bounds.
	register(&Family{
		Name: "rmsnorm_row",
		Bounds: map[string][]Bound{
			"f32":        {rmsnormY},
			"add":        {rmsnormY, rmsnormXO},
			"q81":        {rmsnormY, rmsnormQ},
			"addq81":     {rmsnormY, rmsnormXO, rmsnormQ},
			"q81wave":    {rmsnormY, rmsnormQ},
			"addq81wave": {rmsnormY, rmsnormXO, rmsnormQ},
		},
		Cases:     families["rmsnorm"].Cases,
		Run:       runRMSNorm,
		SelfCheck: selfCheckRMSNorm,
	})
}

// rmsnormSymbol maps a symbol of either family to its mode, and says which family.
func rmsnormSymbol(symbol string) (mode string, row bool) {
	for _, p := range []string{"strata_rmsnorm_row_", "strata_rmsnorm_"} {
		if m, ok := strings.CutPrefix(symbol, p); ok {
			return m, p == "strata_rmsnorm_row_"
		}
	}
	return "", false
}

// rmsnormRef is the float64 reference on rows of the layout: x (and r when add) are the
// full buffers; it returns xo (f32, when add), y (float64, dense rows×n) and per-row max |y|.
func rmsnormRef(x, r, w []float32, tokens, heads, n, ts, hs int, eps float32) (xo []float32, y []float64) {
	rows := tokens * heads
	if r != nil {
		xo = append([]float32(nil), x...)
	}
	y = make([]float64, rows*n)
	for row := 0; row < rows; row++ {
		off := (row/heads)*ts + (row%heads)*hs
		v := make([]float64, n)
		var ss float64
		for i := 0; i < n; i++ {
			xi := x[off+i]
			if r != nil {
				xi += r[off+i] // float32 addition, as the kernel
				xo[off+i] = xi
			}
			v[i] = float64(xi)
			ss += v[i] * v[i]
		}
		inv := 1 / math.Sqrt(ss/float64(n)+float64(eps))
		for i := 0; i < n; i++ {
			y[row*n+i] = v[i] * inv * float64(w[i])
		}
	}
	return xo, y
}

// rmsnormInputs draws the full x and r buffers (gaps in strided layouts included) and w.
func rmsnormInputs(rng *rand.Rand, tokens, n, ts int) (x, r, w []float32) {
	size := (tokens-1)*ts + ts
	x = activations(rng, 1, size)
	r = activations(rng, 1, size)
	w = make([]float32, n)
	for i := range w {
		w[i] = float32(1 + 0.3*rng.NormFloat64())
	}
	return x, r, w
}

func rowMaxScale(y []float64, n int) func(int) float64 {
	return func(row int) float64 { return maxAbs(y[row*n : (row+1)*n]) }
}

func runRMSNorm(h *Harness, symbol string, c Case, bounds []Bound, rng *rand.Rand) (Outcome, error) {
	tokens, heads, n, ts, hs, inplace := c.Dims[0], c.Dims[1], c.Dims[2], c.Dims[3], c.Dims[4], c.Dims[5] == 1
	rows := tokens * heads
	const eps = 1e-6
	mode, row := rmsnormSymbol(symbol)
	mode = strings.TrimSuffix(mode, "wave") // rmsnorm_row's baseline Q8_1 step: the same function
	add := mode == "add" || mode == "addq81"
	q81 := mode == "q81" || mode == "addq81"
	x, r, w := rmsnormInputs(rng, tokens, n, ts)
	var rIn []float32
	if add {
		rIn = r
	}
	xoWant, yWant := rmsnormRef(x, rIn, w, tokens, heads, n, ts, hs, eps)

	fn, err := h.Mod.Func(symbol)
	if err != nil {
		return Outcome{}, err
	}
	in, err := h.moInputs(f32Bytes(r), f32Bytes(w))
	if err != nil {
		return Outcome{}, err
	}
	// Outputs in the rows' layout start as a copy of x, so gaps between rows (which the
	// kernel must not touch) read back as x; in place, y and xo are x itself.
	var xb, yb, xob, qb Buf
	if xb, err = h.InOut(f32Bytes(x)); err != nil {
		return Outcome{}, err
	}
	// In place: the residual stream is updated where it lies (xo = x) and, without the
	// add, y overwrites x.
	yb, xob = xb, xb
	if !inplace || add {
		if yb, err = h.InOut(f32Bytes(x)); err != nil {
			return Outcome{}, err
		}
	}
	if add && !inplace {
		if xob, err = h.InOut(f32Bytes(x)); err != nil {
			return Outcome{}, err
		}
	}
	outs := []Buf{yb}
	args := abi.RmsnormArgs{X: xb.Ptr(), R: in[0].Ptr(), W: in[1].Ptr(), Y: yb.Ptr(), N: int32(n), Rows: int32(rows),
		Heads: int32(heads), TokStride: int32(ts), HeadStride: int32(hs), Eps: eps}
	if add {
		args.Xo = xob.Ptr()
		outs = append(outs, xob)
	}
	if q81 {
		if qb, err = h.Output(rows * n / 32 * 36); err != nil {
			return Outcome{}, err
		}
		args.Q = qb.Ptr()
		outs = append(outs, qb)
	}
	grid, block := gpu.Dim3{X: uint32((rows + 7) / 8), Y: 1, Z: 1}, moBlock(abi.RmsnormThreads)
	if row { // same argument layout (kernels/specs.go declares the same fields)
		grid, block = gpu.Dim3{X: uint32(rows), Y: 1, Z: 1}, moBlock(abi.RmsnormRowThreads)
	}
	got, el, err := h.Run(fn, grid, block, args.Bytes(), outs...)
	if err != nil {
		return Outcome{}, err
	}
	yAll := bytesF32(h.payload(outs, got, yb))
	y := make([]float64, rows*n)
	yRows := make([]float32, rows*n)
	for row := 0; row < rows; row++ {
		off := (row/heads)*ts + (row%heads)*hs
		for i := 0; i < n; i++ {
			yRows[row*n+i] = yAll[off+i]
			y[row*n+i] = float64(yAll[off+i])
		}
	}
	reports := map[string]Report{"y": CompareRows(y, yWant, n, rowMaxScale(yWant, n))}
	if yb != xb {
		// Between the rows, y must still hold x.
		if rep := rmsnormGaps(yAll, x, tokens, heads, n, ts, hs); rep.Mismatch > 0 {
			return Outcome{}, fmt.Errorf("y outside the rows changed: %s", rep.Worst)
		}
	}
	if add {
		reports["xo"] = CompareExact(bytesF32(h.payload(outs, got, xob)), xoWant)
	}
	if q81 {
		want := make([]byte, rows*n/32*36)
		for row := 0; row < rows; row++ {
			if err := quant.QuantizeQ8_1GPU(yRows[row*n:(row+1)*n], want[row*n/32*36:(row+1)*n/32*36]); err != nil {
				return Outcome{}, err
			}
		}
		reports["q"] = CompareExact(h.payload(outs, got, qb), want)
	}
	moved := int64(4*rows*n*2 + 4*n)
	if add {
		moved += int64(4 * rows * n * 2)
	}
	if q81 {
		moved += int64(rows * n / 32 * 36)
	}
	o := Outcome{Reports: reports, Kernel: el.Seconds() * 1e6, Bytes: moved}
	return o, checkAll(bounds, reports)
}

// rmsnormGaps checks that the elements of a layout's buffer outside its rows equal x.
func rmsnormGaps(got, x []float32, tokens, heads, n, ts, hs int) Report {
	in := make([]bool, len(x))
	for row := 0; row < tokens*heads; row++ {
		off := (row/heads)*ts + (row%heads)*hs
		for i := 0; i < n; i++ {
			in[off+i] = true
		}
	}
	var g, w []float32
	for i := range x {
		if !in[i] {
			g, w = append(g, got[i]), append(w, x[i])
		}
	}
	return CompareExact(g, w)
}

// selfCheckRMSNorm: the reference's rows have unit RMS before the weight (a property of
// the definition, up to eps), and the CPU engine's float32 formula stays within the
// declared y bound of it.
func selfCheckRMSNorm(c Case, rng *rand.Rand) error {
	tokens, heads, n, ts, hs := c.Dims[0], c.Dims[1], c.Dims[2], c.Dims[3], c.Dims[4]
	x, r, w := rmsnormInputs(rng, tokens, n, ts)
	ones := make([]float32, n)
	for i := range ones {
		ones[i] = 1
	}
	xo, y := rmsnormRef(x, r, ones, tokens, heads, n, ts, hs, 0)
	for row := 0; row < tokens*heads; row++ {
		var ss float64
		for _, v := range y[row*n : (row+1)*n] {
			ss += v * v
		}
		if ss == 0 {
			continue // an all-zero row (zero blocks can cover a short row)
		}
		if d := math.Abs(ss/float64(n) - 1); d > 1e-12 {
			return fmt.Errorf("row %d: mean square %.15g, want 1", row, ss/float64(n))
		}
	}
	// The CPU engine's formula (float64 Σx², float32 inv, (x·inv)·w in float32).
	_, yWant := rmsnormRef(x, r, w, tokens, heads, n, ts, hs, 1e-6)
	cpu := make([]float64, len(yWant))
	for row := 0; row < tokens*heads; row++ {
		off := (row/heads)*ts + (row%heads)*hs
		var ss float64
		for i := 0; i < n; i++ {
			ss += float64(xo[off+i]) * float64(xo[off+i])
		}
		inv := float32(1 / math.Sqrt(ss/float64(n)+1e-6))
		for i := 0; i < n; i++ {
			cpu[row*n+i] = float64(xo[off+i] * inv * w[i])
		}
	}
	return rmsnormY.Verify(CompareRows(cpu, yWant, n, rowMaxScale(yWant, n)))
}
