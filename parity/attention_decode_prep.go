package parity

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/quant"
	"github.com/strata-hip/strata/runtime/gpu"
)

// attention_decode/prep_*: one decode token's per-head q and k RMSNorm (rmsnorm's f32
// variant), NeoX rope of both (rope's neox variant) and the cache store of k and v
// (store_*) in one launch. The float64 reference normalises each head in float64
// (model/forward.go's rmsNorm), rotates with the exact sine and cosine of the CPU engine's
// f32 angle f32(pos)·freq[i] (as parity/rope.go), and its k and v rows are what the cache
// should hold before the cache's own rounding. The family's cases give n, nh, nkv, hd and
// the gate flag; prep writes position n − 1 (the decode step's), rotates all hd values
// without a gate (qwen3moe, theta 1e6) and hd/4 with one (qwen3next's partial rotary,
// theta 1e7), norm weights 1 + N(0, 0.2²) and eps 1e-6.
var (
	prepQ = Bound{Name: "q", MaxRowRel: 3e-6, Why: `
		Per q head, |q' − q'₆₄| against the head's max |y₆₄| (y the normed head before its
		rotation). The norm is rmsnorm's f32 variant with n = hd ≤ 256: Σx² of hd/32 ≤ 8 fused
		multiply-adds per lane and a 5-level butterfly, all terms ≥ 0: ≤ 13·2⁻²⁴ relative;
		mean, +eps, sqrt, 1/x: 4 more (2⁻²³ for sqrt on AMD); inv carries half of Σx²'s:
		≤ (6.5 + 5)·2⁻²⁴; (x·inv)·w two more: each y within 13.5·2⁻²⁴ = 8.0e-7 of itself.
		The rotation of those f32 values errs ≤ 5.8e-7·max|y| (rope/neox/x's derivation) and
		carries their error: ≤ (|Δy0| + |Δy1|) ≤ 1.6e-6·max|y|. Values past rot_dims only
		the norm's 8.0e-7. Total ≤ 2.2e-6·max|y|: bound 3e-6.`}
	prepKF16 = Bound{Name: "k", MaxRowRel: 5e-4, Why: `
		Per k head, the f16 cache row decoded against the float64 normed and rotated row
		k₆₄, against the row's max |k₆₄|. A rotation keeps each pair's norm, so max|y| ≤
		√2·max|k₆₄| (the pair holding max|y| has a rotated value ≥ its norm/√2). The f32
		value errs ≤ 2.2e-6·max|y| ≤ 3.1e-6·max|k₆₄| (the q check's derivation, the same
		operations); one fp16 round-to-nearest-even adds ≤ 2⁻¹¹ of the value, ≤ 4.883e-4 of
		max|k₆₄|·(1 + 3.1e-6); an fp16 subnormal (|v| < 2⁻¹⁴) errs ≤ 2⁻²⁵ absolute, less
		than that whenever max|k₆₄| ≥ 2⁻¹⁴ (a normed head's RMS is about its weights', ≈ 1).
		Total ≤ 4.92e-4: bound 5e-4.`}
	prepKQ8 = Bound{Name: "k", MaxRowRel: 5e-3, Why: `
		Per k head, the int8 cache row dequantized (fp16 scale × q) against k₆₄, against
		the row's max |k₆₄| (as the f16 check). Per 32-value block of the f32 row, amax ≤
		max|k₆₄|·(1 + 3.1e-6): round(x/d) errs ≤ d/2 = amax/254, the fp16 scale ≤ 2⁻¹¹·amax
		more (|q| ≤ 127), the division 1.6e-5·amax: quantize_q8_1/f32/dequant's 4.93e-3·amax;
		the f32 value's own error 3.1e-6·max|k₆₄| (f16 check). Total ≤ 4.94e-3: bound 5e-3.`}
	prepCache = Bound{Name: "cache", Exact: true, Why: `
		The v row is stored as read, by one fp16 round-to-nearest-even per value (f16) or
		store's q8 block quantization (attentionStoreRef's float32 steps): every byte must
		equal the Go emulation's. Every other byte of both caches and of the scales (rows
		other than pos, the k row's scales excepted for q8: the k check's business) must
		come back unchanged.`}
	// reduceq: reduce's out (attentionDecodeOut) and its Q8_1 form.
	reduceqOQ = Bound{Name: "oq", Exact: true, Why: `
		The Q8_1 blocks must equal quant.QuantizeQ8_1GPU applied to the kernel's own f32
		out (the values it also stores): the same butterfly order, f32 division, roundf and
		fp16 RNE as quantize_q8_1, whose bytes are exact (quantize_q8_1/f32/bytes). How
		far out is from float64 is the out check's business.`}
)

// prepShape is what the prep variants take from a family case: rot_dims, theta, the
// position and the cache rows the harness allocates (the rows written around pos: the
// kernel is given cache pointers moved back so that row pos lands on the last of them,
// so large positions need no large buffers, and guard bytes catch any write elsewhere).
type prepShape struct {
	attentionCase
	rot, rows, pos int
	theta          float64
}

func prepShapeOf(c Case) prepShape {
	s := prepShape{attentionCase: attentionShape(c)}
	s.rot, s.theta = s.hd, 1e6
	if s.gate == 1 {
		s.rot, s.theta = s.hd/4, 1e7
	}
	s.pos = s.n - 1
	s.rows = min(s.n, 3)
	return s
}

// prepInputs draws q (nh heads), k and v (nkv heads) as N(0,1) values with 1% outliers
// ×8, and the norm weights.
func prepInputs(rng *rand.Rand, s prepShape) (q, k, v, qw, kw []float32) {
	head := func(heads int) []float32 {
		x := make([]float32, heads*s.hd)
		for i := range x {
			f := rng.NormFloat64()
			if rng.IntN(100) == 0 {
				f *= 8
			}
			x[i] = float32(f)
		}
		return x
	}
	q, k, v = head(s.nh), head(s.nkv), head(s.nkv)
	w := func() []float32 {
		x := make([]float32, s.hd)
		for i := range x {
			x[i] = float32(1 + 0.2*rng.NormFloat64())
		}
		return x
	}
	return q, k, v, w(), w()
}

const prepEps = float32(1e-6)

// prepRef is the float64 reference of heads x (each hd values) normed with w and rotated:
// the rotated rows and each head's max |y₆₄| (the normed head before rotation).
func prepRef(x, w []float32, s prepShape, freq []float32) (out, ymax []float64) {
	heads := len(x) / s.hd
	out = make([]float64, len(x))
	ymax = make([]float64, heads)
	half := s.rot / 2
	for h := 0; h < heads; h++ {
		row := x[h*s.hd : (h+1)*s.hd]
		var ss float64
		for _, v := range row {
			ss += float64(v) * float64(v)
		}
		inv := 1 / math.Sqrt(ss/float64(s.hd)+float64(prepEps))
		y := out[h*s.hd : (h+1)*s.hd]
		for i, v := range row {
			y[i] = float64(v) * inv * float64(w[i])
			ymax[h] = max(ymax[h], math.Abs(y[i]))
		}
		for i := 0; i < half; i++ {
			a := float64(float32(s.pos) * freq[i]) // the f32 angle
			c, sn := math.Cos(a), math.Sin(a)
			y0, y1 := y[i], y[i+half]
			y[i], y[i+half] = y0*c-y1*sn, y1*c+y0*sn
		}
	}
	return out, ymax
}

// prepF32 is an f32 rendering of the kernel's order (per-lane sums then the xor butterfly,
// f32 sine and cosine of the f32 angle): SelfCheck holds it to the declared bounds.
func prepF32(x, w []float32, s prepShape, freq []float32) []float32 {
	heads := len(x) / s.hd
	out := make([]float32, len(x))
	half := s.rot / 2
	for h := 0; h < heads; h++ {
		row := x[h*s.hd : (h+1)*s.hd]
		var lanes [32]float32
		for l := range lanes {
			for i := l; i < s.hd; i += 32 {
				lanes[l] += row[i] * row[i]
			}
		}
		for m := 16; m >= 1; m /= 2 {
			var nx [32]float32
			for l := range lanes {
				nx[l] = lanes[l] + lanes[l^m]
			}
			lanes = nx
		}
		inv := 1 / float32(math.Sqrt(float64(lanes[0]/float32(s.hd)+prepEps)))
		y := out[h*s.hd : (h+1)*s.hd]
		for i, v := range row {
			y[i] = (v * inv) * w[i]
		}
		for i := 0; i < half; i++ {
			a := float64(float32(s.pos) * freq[i])
			c, sn := float32(math.Cos(a)), float32(math.Sin(a))
			y0, y1 := y[i], y[i+half]
			y[i], y[i+half] = y0*c-y1*sn, y1*c+y0*sn
		}
	}
	return out
}

// prepKDecode is the k row the cache holds (f16 or q8 bytes at row, scales for q8)
// widened to float64.
func prepKDecode(cache, scales []byte, row, rowVals int, q8 bool) []float64 {
	out := make([]float64, rowVals)
	for i := range out {
		e := row*rowVals + i
		if !q8 {
			out[i] = float64(quant.F16ToF32(binary.LittleEndian.Uint16(cache[2*e:])))
			continue
		}
		d := quant.F16ToF32(binary.LittleEndian.Uint16(scales[2*(e/32):]))
		out[i] = float64(d * float32(int8(cache[e])))
	}
	return out
}

// prepKRows quantizes f32 k rows as the cache would hold them (for SelfCheck).
func prepKRows(k []float32, rowVals int, q8 bool) []float64 {
	vb := 2
	if q8 {
		vb = 1
	}
	cache, sc := make([]byte, vb*rowVals), make([]byte, 2*rowVals/32)
	attentionStoreRef(cache, sc, k, 0, rowVals, q8)
	return prepKDecode(cache, sc, 0, rowVals, q8)
}

func runAttentionPrep(h *Harness, symbol string, c Case, bounds []Bound, rng *rand.Rand) (Outcome, error) {
	s := prepShapeOf(c)
	q8 := strings.HasSuffix(symbol, "_q8")
	q, k, v, qw, kw := prepInputs(rng, s)
	freq := ropeFreqs(s.rot, s.theta)
	wantQ, qmax := prepRef(q, qw, s, freq)
	wantK, _ := prepRef(k, kw, s, freq)
	rowVals := s.nkv * s.hd
	vb := 2
	if q8 {
		vb = 1
	}
	draw := func(n int) []byte { return randomBytes(rng, n) }
	// The caches hold s.rows rows; the kernel writes row pos, which is the last of them.
	last := s.rows - 1
	k0, v0 := draw(vb*s.rows*rowVals), draw(vb*s.rows*rowVals)
	var ks0, vs0 []byte
	if q8 {
		ks0, vs0 = draw(2*s.rows*rowVals/32), draw(2*s.rows*rowVals/32)
	}
	fn, err := h.Mod.Func(symbol)
	if err != nil {
		return Outcome{}, err
	}
	in, err := h.moInputs(f32Bytes(k), f32Bytes(v), f32Bytes(qw), f32Bytes(kw), int32Bytes([]int32{int32(s.pos)}), f32Bytes(freq))
	if err != nil {
		return Outcome{}, err
	}
	qb, err := h.InOut(f32Bytes(q))
	if err != nil {
		return Outcome{}, err
	}
	kb, err := h.InOut(k0)
	if err != nil {
		return Outcome{}, err
	}
	vbuf, err := h.InOut(v0)
	if err != nil {
		return Outcome{}, err
	}
	shift := uint64(s.pos-last) * uint64(rowVals) // elements before the buffers' first row
	outs := []Buf{qb, kb, vbuf}
	args := abi.AttentionDecodeArgs{Q: qb.Ptr(), K: kb.Ptr() - shift*uint64(vb), V: vbuf.Ptr() - shift*uint64(vb),
		Kn: in[0].Ptr(), Vn: in[1].Ptr(), Qw: in[2].Ptr(), Kw: in[3].Ptr(), Pos: in[4].Ptr(), Freq: in[5].Ptr(),
		N: int32(s.n), Nh: int32(s.nh), Nkv: int32(s.nkv), Hd: int32(s.hd), RotDims: int32(s.rot), Eps: prepEps}
	var ksb, vsb Buf
	if q8 {
		if ksb, err = h.InOut(ks0); err != nil {
			return Outcome{}, err
		}
		if vsb, err = h.InOut(vs0); err != nil {
			return Outcome{}, err
		}
		args.Ks, args.Vs = ksb.Ptr()-shift/32*2, vsb.Ptr()-shift/32*2
		outs = append(outs, ksb, vsb)
	}
	waves := s.nh + 2*s.nkv
	grid := gpu.Dim3{X: uint32((waves + abi.AttentionDecodeThreads/32 - 1) / (abi.AttentionDecodeThreads / 32)), Y: 1, Z: 1}
	got, el, err := h.Run(fn, grid, moBlock(abi.AttentionDecodeThreads), args.Bytes(), outs...)
	if err != nil {
		return Outcome{}, err
	}
	gq := bytesF32(h.payload(outs, got, qb))
	gk, gv := h.payload(outs, got, kb), h.payload(outs, got, vbuf)
	var gks, gvs []byte
	if q8 {
		gks, gvs = h.payload(outs, got, ksb), h.payload(outs, got, vsb)
	}
	reports := map[string]Report{
		"q": CompareRows(moF64s(gq), wantQ, s.hd, func(r int) float64 { return qmax[r] }),
		"k": CompareRows(prepKDecode(gk, gks, last, rowVals, q8), wantK, s.hd, rowMaxScale(wantK, s.hd)),
	}
	// Exact: the v row as store writes it, and every other byte as it was; the k row (and
	// its scales) taken from the kernel's output, checked above.
	wk, wv := bytes.Clone(k0), bytes.Clone(v0)
	wks, wvs := bytes.Clone(ks0), bytes.Clone(vs0)
	attentionStoreRef(wv, wvs, v, last, rowVals, q8)
	copy(wk[vb*last*rowVals:], gk[vb*last*rowVals:vb*(last+1)*rowVals])
	gotAll := append(append([]byte(nil), gk...), gv...)
	wantAll := append(append([]byte(nil), wk...), wv...)
	if q8 {
		copy(wks[2*last*rowVals/32:], gks[2*last*rowVals/32:2*(last+1)*rowVals/32])
		gotAll = append(append(gotAll, gks...), gvs...)
		wantAll = append(append(wantAll, wks...), wvs...)
	}
	reports["cache"] = CompareExact(gotAll, wantAll)
	// Bytes: q read and written, k and v read, their rows written, the weights.
	o := Outcome{Reports: reports, Kernel: el.Seconds() * 1e6, Bytes: int64(8*s.nh*s.hd + 8*rowVals + 2*vb*rowVals + 8*s.hd)}
	return o, checkAll(bounds, reports)
}

// selfCheckAttentionPrep: the f32 rendering of the kernel's order, and the cache's
// rounding of its k rows, stay within the declared bounds of the float64 reference.
func selfCheckAttentionPrep(c Case, rng *rand.Rand) error {
	s := prepShapeOf(c)
	q, k, _, qw, kw := prepInputs(rng, s)
	freq := ropeFreqs(s.rot, s.theta)
	wantQ, qmax := prepRef(q, qw, s, freq)
	if err := prepQ.Verify(CompareRows(moF64s(prepF32(q, qw, s, freq)), wantQ, s.hd, func(r int) float64 { return qmax[r] })); err != nil {
		return err
	}
	wantK, _ := prepRef(k, kw, s, freq)
	kf := prepF32(k, kw, s, freq)
	for _, b := range []struct {
		q8 bool
		b  Bound
	}{{false, prepKF16}, {true, prepKQ8}} {
		if err := b.b.Verify(CompareRows(prepKRows(kf, s.nkv*s.hd, b.q8), wantK, s.hd, rowMaxScale(wantK, s.hd))); err != nil {
			return err
		}
	}
	return nil
}
