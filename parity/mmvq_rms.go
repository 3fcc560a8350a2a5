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

// mmvq <type>_g<N>_rms (F16/BF16 at geometry 4, the quantized types at 3): the geometry with
// the decode residual stream's norm folded in. Every block computes rmsnorm_row addq81's row
// (x + r, RMSNorm by w; q81's without r) and multiplies its rows by it (the quantized types
// by its Q8_1 blocks); block (0, 0, 0) also writes x + r, the normed row and its Q8_1 blocks.
// Four checks:
//
//   - y: bitwise the same module's <type>_g<N> run on the kernel's own norm-y (F16/BF16) or
//     norm-q (quantized) (a second launch): the rows are geometry N's sums of the same values
//     in the same order, whichever block computed its copy of the row (every block's copy is
//     checked through its rows);
//   - norm-y, norm-xo, norm-q: rmsnorm_row addq81's checks (rmsnorm/y's derivation holds:
//     the same statements at n ≤ 4096, so the same ≤ (½(n/256 + 13) + 5)·2⁻²⁴ + 2·2⁻²⁴).
//
// That the norm's bits are rmsnorm_row's (the order its template comment gives) is the GPU
// engine's check: model/gpu TestGPUNormFuse compares the logits of whole decode tokens with
// and without the fold.
var (
	mmvqRmsY = Bound{Name: "y", Exact: true, Why: `
		The geometry's rows (strata_mmvq_rows_f, or strata_mmvq_rows_x with its activations
		already staged) on the normed row held in LDS (f32, or the Q8_1 blocks as staging
		leaves them) instead of read from xf or xq: the same values, the same integer dots,
		fma chains, partials and butterfly. Compared bit for bit with <type>_g<N> launched on
		the kernel's own norm-y or norm-q; any difference is a bug (a block whose row copy
		differs shows in its rows).`}
	mmvqRmsNormY  = Bound{Name: "norm-y", MaxRowRel: rmsnormY.MaxRowRel, Why: "rmsnorm/y's derivation (the same statements as rmsnorm_row at n ≤ 4096)."}
	mmvqRmsNormXO = Bound{Name: "norm-xo", Exact: true, Why: "rmsnorm/xo's: one f32 addition."}
	mmvqRmsNormQ  = Bound{Name: "norm-q", Exact: true, Why: "rmsnorm/q's: quant.QuantizeQ8_1GPU of the kernel's own norm-y."}
)

// mmvqRmsVariant reports whether an mmvq variant name or symbol has the norm folded in.
func mmvqRmsVariant(name string) bool { return strings.HasSuffix(name, "_rms") }

// mmvqRmsCase marks the cases of the _rms variants (dims 6 = 1), which run no other case.
func mmvqRmsCase(c Case) bool { return len(c.Dims) >= 7 && c.Dims[6] == 1 }

// runMmvqRms runs an _rms variant: dims rows, n (= k), 1, 1, 0, prefetch, 1 [, 1: no r (q81)].
func runMmvqRms(h *Harness, symbol string, c Case, bounds []Bound, rng *rand.Rand) (Outcome, error) {
	base := strings.TrimSuffix(symbol, "_rms")
	t, ok := mmvqTypes[mmvqTypeVariant(variantOf(base, "mmvq"))]
	if !ok {
		return Outcome{}, fmt.Errorf("mmvq %s: no weight type", symbol)
	}
	fl := t == quant.F16 || t == quant.BF16
	rows, n, prefetch := c.Dims[0], c.Dims[1], c.Dims[5]
	add := len(c.Dims) < 8 || c.Dims[7] == 0
	in, err := newMmvqInputs(t, []int{rows, n, 1, 1, 0, prefetch}, false, rng)
	if err != nil {
		return Outcome{}, err
	}
	x, r, w := rmsnormInputs(rng, 1, n, n)
	const eps = 1e-6
	var rIn []float32
	if add {
		rIn = r
	}
	xoWant, yWant := rmsnormRef(x, rIn, w, 1, 1, n, n, n, eps)
	fn, err := h.Mod.Func(symbol)
	if err != nil {
		return Outcome{}, err
	}
	g4, err := h.Mod.Func(base)
	if err != nil {
		return Outcome{}, err
	}
	bufs := make([]Buf, 4)
	for i, d := range [][]byte{in.w, f32Bytes(x), f32Bytes(r), f32Bytes(w)} {
		if bufs[i], err = h.Input(d); err != nil {
			return Outcome{}, err
		}
	}
	outs := make([]Buf, 4)
	for i, nb := range []int{4 * rows, 4 * n, 4 * n, n / 32 * 36} {
		if outs[i], err = h.Output(nb); err != nil {
			return Outcome{}, err
		}
	}
	a := abi.MmvqArgs{W: bufs[0].Ptr(), Y: outs[0].Ptr(), Rows: int32(rows), K: int32(n), Ncols: 1, XColStride: int32(n), YColStride: int32(rows),
		Prefetch: int32(prefetch), NormN: int32(n), NormEps: eps, NormX: bufs[1].Ptr(), NormR: bufs[2].Ptr(), NormW: bufs[3].Ptr(),
		NormXo: outs[1].Ptr(), NormY: outs[2].Ptr(), NormQ: outs[3].Ptr()}
	if !add { // q81: no addition, no x + r (the harness's poisoned norm_xo must come back written by nothing)
		a.NormR, a.NormXo = 0, 0
		outs = []Buf{outs[0], outs[2], outs[3]}
	}
	gx, err := mmvqGridX("", symbol, rows)
	if err != nil {
		return Outcome{}, err
	}
	block := gpu.Dim3{X: abi.MmvqThreads, Y: 1, Z: 1}
	got, el, err := h.Run(fn, gpu.Dim3{X: uint32(gx), Y: 1, Z: 1}, block, a.Bytes(), outs...)
	if err != nil {
		return Outcome{}, err
	}
	if !add {
		got = [][]byte{got[0], nil, got[1], got[2]}
	}
	ny := bytesF32(got[2])
	// The reference rows: <type>_g4 on norm-y, in a fresh harness on the same module.
	h2 := &Harness{Dev: h.Dev, Mod: h.Mod}
	defer h2.Close()
	dw, err := h2.Input(in.w)
	if err != nil {
		return Outcome{}, err
	}
	act := got[2] // F16/BF16: the normed row; quantized: its Q8_1 blocks
	if !fl {
		act = got[3]
	}
	dx, err := h2.Input(act)
	if err != nil {
		return Outcome{}, err
	}
	dy, err := h2.Output(4 * rows)
	if err != nil {
		return Outcome{}, err
	}
	a2 := abi.MmvqArgs{W: dw.Ptr(), Xf: dx.Ptr(), Y: dy.Ptr(), Rows: int32(rows), K: int32(n), Ncols: 1, XColStride: int32(n), YColStride: int32(rows), Prefetch: int32(prefetch)}
	if !fl {
		a2.Xf, a2.Xq = 0, dx.Ptr()
	}
	gx2, err := mmvqGridX("", base, rows)
	if err != nil {
		return Outcome{}, err
	}
	got2, _, err := h2.Run(g4, gpu.Dim3{X: uint32(gx2), Y: 1, Z: 1}, block, a2.Bytes(), dy)
	if err != nil {
		return Outcome{}, err
	}
	qWant := make([]byte, n/32*36)
	if err := quant.QuantizeQ8_1GPU(ny, qWant); err != nil {
		return Outcome{}, err
	}
	reports := map[string]Report{
		"y":      CompareExact(f32Bits(bytesF32(got[0])), f32Bits(bytesF32(got2[0]))),
		"norm-y": CompareRows(moF64s(ny), yWant, n, rowMaxScale(yWant, n)),
		"norm-q": CompareExact(got[3], qWant),
	}
	if add {
		reports["norm-xo"] = CompareExact(f32Bits(bytesF32(got[1])), f32Bits(xoWant))
	} else { // q81: there is no x + r to check
		var kept []Bound
		for _, b := range bounds {
			if b.Name != "norm-xo" {
				kept = append(kept, b)
			}
		}
		bounds = kept
	}
	bytes := int64(rows*in.rowBytes + 4*(3*n+rows) + 4*2*n + n/32*36)
	return Outcome{Reports: reports, Kernel: el.Seconds() * 1e6, Bytes: bytes}, checkAll(bounds, reports)
}

// f32Bits is v's bit patterns (an exact comparison that tells −0 from +0 and NaNs apart).
func f32Bits(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}
