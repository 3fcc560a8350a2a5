package parity

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/strata-hip/strata/kernels"
	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/quant"
	"github.com/strata-hip/strata/runtime/gpu"
)

// mmvq: y[z][c][r] = Σ_k W_z[r][k]·x_z[c][k] for 1..8 columns. Quantized weights meet Q8_1
// activations (the bytes quantize_q8_1 writes) through exact integer block dots and an f32
// scale fold; F16/BF16 weights meet f32 activations. Matrices z are dense or experts found
// through a slot table. Three checks per case:
//
//   - y: the float64 value of the same operands (decoded weights · decoded activations),
//     each output's error measured against S = Σ_groups |term| (the sum of the absolute
//     per-group contributions, float64), since cancellation can make |y| ≪ S;
//   - int: a second launch on inputs whose scales are ±1 and whose activations are small
//     integers in one random 256-wide window (zero elsewhere), so that every group term and
//     every partial sum is an exact f32 value: the integer block dots must be exact and
//     then so is y — a single wrong integer anywhere in the window shows;
//   - err: err[z] = 1 exactly for matrices whose expert has no slot (their y must be 0),
//     else 0.
//
// Weight types and their Q8_1-free twins: F16 and BF16 have no integer form; their "int"
// inputs are integer-valued weights in [−8, 8] and activations in [−8, 8] over all of K.

// mmvqTypes maps each variant to its weight type.
var mmvqTypes = map[string]quant.Type{
	"f16": quant.F16, "bf16": quant.BF16, "q80": quant.Q8_0, "q20": quant.Q2_0, "q4k": quant.Q4_K,
	"q6k": quant.Q6_K, "iq2xs": quant.IQ2_XS, "iq3xxs": quant.IQ3_XXS, "iq3s": quant.IQ3_S, "iq1m": quant.IQ1_M,
}

var mmvqQuantY = Bound{Name: "y", MaxRowRel: 2.1e-6, Why: `
	Per output, |y − ref| / S with S = Σ_g |term_g| over the row's 32-element groups (float64).
	Each group's integer dot is exact (|main| < 2²⁴, so (f32)main is exact) and base·d_a is
	an exact f32 product (two fp16 significands, ≤ 22 bits). A lane adds its groups with one
	fma each (Q4_K: two, the min term's offb·d_a product rounded once more), over
	≤ ceil(K/1024) groups, then 5 butterfly additions: n ≤ 2·14 + 1 + 5 = 34 roundings of at
	most 2⁻²⁴ relative to a partial bounded by S at K = 14336. γ₃₄ = 34·2⁻²⁴/(1 − 34·2⁻²⁴)
	= 2.03e-6: bound 2.1e-6. The float64 reference is exact per term (≤ 46-bit products) and
	sums ≤ 448 terms: its own error ≤ 448·2⁻⁵³·S = 5e-14·S, negligible.
	Checked on cases with K ≤ 14336 (the "y-long" check covers the longer ones).`}

// The rounding count grows with K (each lane's chain gets one more fold per 1024 elements),
// so K > 14336 gets its own check: the same derivation evaluated at the largest K.
var mmvqQuantYLong = Bound{Name: "y-long", MaxRowRel: 5.2e-6, Why: `
	As y, for 14336 < K ≤ 40960 (the cases whose K exceeds 32768 reach the NVIDIA one-column
	path's segmented activation staging: 1024 Q8_1 groups per LDS segment). In general
	n(K) ≤ 2·ceil(K/1024) + 1 + 5 roundings (one fma per group, Q4_K two; the lane's
	groups g = ℓ, ℓ + 32, … are added in that order across segments), bound γ_n(K)·S.
	At K = 40960: n ≤ 2·40 + 6 = 86, γ₈₆ = 86·2⁻²⁴/(1 − 86·2⁻²⁴) = 5.13e-6: bound 5.2e-6.
	Reference: ≤ 1280 exact terms, error ≤ 1280·2⁻⁵³·S = 1.4e-13·S, negligible.`}

var mmvqFloatY = Bound{Name: "y", MaxRowRel: 3.1e-6, Why: `
	Per output, |y − ref| / S with S = Σ_k |w_k·x_k| (float64). A lane computes 32 of the
	row's elements at a time (one 32-element group; on NVIDIA its four 8-element pieces of a
	1024-element step) as a chain of 32 fmas from zero (one rounding each, products exact
	inside the fma), adds it to its partial (one rounding), over ≤ ceil(K/1024) chains, then
	5 butterfly additions: n ≤ 32 + 14 + 5 = 51 roundings at K = 14336, each ≤ 2⁻²⁴ relative
	to a partial bounded by S. γ₅₁ = 3.04e-6: bound 3.1e-6. The float64 reference products
	are exact (≤ 35 bits); its summation error is ≤ K·2⁻⁵³·S = 1.6e-12·S.
	Checked on cases with K ≤ 14336 (the "y-long" check covers the longer ones).`}

var mmvqFloatYLong = Bound{Name: "y-long", MaxRowRel: 4.6e-6, Why: `
	As y, for 14336 < K ≤ 40960. In general n(K) ≤ 32 + ceil(K/1024) + 5 roundings, bound
	γ_n(K)·S. At K = 40960: n ≤ 32 + 40 + 5 = 77, γ₇₇ = 77·2⁻²⁴/(1 − 77·2⁻²⁴) = 4.59e-6:
	bound 4.6e-6. Reference summation error ≤ K·2⁻⁵³·S = 4.5e-12·S.`}

// mmvqLongK is the largest K the "y" check's derivation covers; longer cases use "y-long".
const mmvqLongK = 14336

var mmvqInt = Bound{Name: "int", Exact: true, Why: `
	Scales are ±1 (fp16), activation scales 1, activation quants |q| ≤ 15 in one 256-element
	window: every group term is a multiple of 2⁻³ (IQ2_XS, IQ1_M: base d/8; IQ3_XXS: d/4;
	others 1) and Σ|terms| ≤ 15.7e6·2⁻⁰ (Q6_K: 8 groups · 32·128·32·15) < 2²⁴ times the
	granularity for every type, so every f32 partial sum in any order is exact and y must
	equal the integer reference exactly; any integer error in a block dot shows. F16/BF16:
	integer weights and activations in [−8, 8]: |partials| ≤ K·64 < 2²⁴ for K ≤ 40960
	(K·64 ≤ 2.6e6; any K < 262144 would do).`}

var mmvqErr = Bound{Name: "err", Exact: true, Why: `
	Flags, not arithmetic: err[z] = 1 exactly when ids[z] is outside [0, nslots) or its slot
	is 0, else 0; y of such a matrix must be all zeros (checked as part of y and int).`}

func init() {
	b := map[string][]Bound{}
	for v, t := range mmvqTypes {
		if t == quant.F16 || t == quant.BF16 {
			b[v] = []Bound{mmvqFloatY, mmvqFloatYLong, mmvqInt, mmvqErr}
		} else {
			b[v] = []Bound{mmvqQuantY, mmvqQuantYLong, mmvqInt, mmvqErr}
		}
		// The decode-geometry kernels (NVIDIA, variant <type>_g<N>: kernels.MmvqGeoms) add
		// each row's groups in the default path's order (R and U only change which wave
		// holds a row and when; each lane's fold chain and the butterfly are the same), so
		// their bounds are the type's, as derived above. The wide-load geometries (W: Q8_0 and
		// Q6_K read 16-byte windows around a group's bytes against activations shifted to the
		// same byte positions, zeros elsewhere) form each group's integer dot from the same
		// products (exact), then fold it as the default path does: the same bounds.
		for g, m := range kernels.MmvqGeoms[1:] {
			if t != quant.F16 && t != quant.BF16 || m.FR != 0 {
				b[fmt.Sprintf("%s_g%d", v, g+1)] = b[v]
			}
		}
	}
	register(&Family{
		Name:   "mmvq",
		Bounds: b,
		// Dims: rows, k, ncols, matrices, mode (0 dense, 1 experts sharing x, 2 experts each
		// with its own x, 3 experts with missing ones), and optionally prefetch (2: dense, no
		// err pointer, a decode-geometry kernel's grid wait after the first pass's L1
		// prefetch; the launch is plain, so the wait is a no-op). The decode-geometry
		// variants (<type>_g<N>, one column only) run the one-column cases: mmvqApplies.
		Applies: mmvqApplies,
		Cases: []Case{
			{"rows=1,k=256,cols=1", []int{1, 256, 1, 1, 0}},
			{"rows=7,k=256,cols=8", []int{7, 256, 8, 1, 0}},
			{"rows=7,k=4096,cols=3", []int{7, 4096, 3, 1, 0}},
			{"rows=33,k=1024,cols=7", []int{33, 1024, 7, 1, 0}},
			{"rows=4096,k=4096,cols=1", []int{4096, 4096, 1, 1, 0}},
			{"rows=7,k=14336,cols=5", []int{7, 14336, 5, 1, 0}},
			{"rows=1,k=14336,cols=4", []int{1, 14336, 4, 1, 0}},
			{"rows=4096,k=14336,cols=2", []int{4096, 14336, 2, 1, 0}},
			{"rows=20,k=2048,cols=6,dense=3", []int{20, 2048, 6, 3, 0}},
			// 96 groups per row: the last pass of a lane holding 2 or 4 groups (sm_90's 1- and
			// 2-column shapes) is partial; odd rows leave a wave's second row empty.
			{"rows=5,k=3072,cols=1", []int{5, 3072, 1, 1, 0}},
			{"rows=9,k=3072,cols=2", []int{9, 3072, 2, 1, 0}},
			// K > 32768: more than one LDS segment (1024 Q8_1 groups) of sm_90's one-column
			// path. K = 33024: 1032 groups, the second segment 8 groups (one pass, its lanes
			// 8..31 and second group dead; F16/BF16: a partial 1024-element step); 7 rows leave
			// waves that only stage. K = 40960: 1280 groups, segments of 1024 and 256, every
			// row of 4096 (256 blocks). Checked by "y-long".
			{"rows=7,k=33024,cols=1", []int{7, 33024, 1, 1, 0}},
			{"rows=4096,k=40960,cols=1", []int{4096, 40960, 1, 1, 0}},
			{"experts=8,rows=64,k=512,cols=1,shared-x", []int{64, 512, 1, 8, 1}},
			{"experts=8,rows=40,k=768,cols=2,own-x", []int{40, 768, 2, 8, 2}},
			// One column with each expert's own x: sm_90's one-column path (its own activation
			// addressing, x_mat_stride ≠ 0) — the MoE down projection's shape.
			{"experts=8,rows=40,k=768,cols=1,own-x", []int{40, 768, 1, 8, 2}},
			{"experts=4,rows=16,k=256,cols=1,missing", []int{16, 256, 1, 4, 3}},
			// The engine's decode shapes with fewer rows, for the decode-geometry variants
			// (each runs all of them; the default variants too). The sums are the default
			// path's (each row's lane chains are unchanged), so the y bound holds as
			// derived. Rows ragged for R = 3 (37 = 12·3 + 1); U = 4 over 96 groups (a
			// partial pass); K = 33024 (segmented staging after the first-pass prefetch);
			// three dense matrices with the late wait (prefetch 2).
			{"rows=37,k=2048,cols=1,decode", []int{37, 2048, 1, 1, 0, 0}},
			{"rows=21,k=4096,cols=1,decode", []int{21, 4096, 1, 1, 0, 0}},
			{"rows=9,k=3072,cols=1,decode", []int{9, 3072, 1, 1, 0, 0}},
			{"rows=13,k=2048,cols=1,decode,prefetch=2", []int{13, 2048, 1, 1, 0, 2}},
			{"rows=20,k=2048,cols=1,dense=3,decode,prefetch=2", []int{20, 2048, 1, 3, 0, 2}},
			{"rows=40,k=256,cols=1,decode,prefetch=2", []int{40, 256, 1, 1, 0, 2}},
			// The wide-load geometries (W) with two activation segments for Q6_K (448 groups
			// of 20 staged words each: 512 groups take a second, 64-group segment).
			{"rows=3,k=16384,cols=1,decode", []int{3, 16384, 1, 1, 0, 0}},
		},
		Run:       runMmvq,
		SelfCheck: selfCheckMmvq,
	})
}

// mmvqInputs is one case's operands in host form.
type mmvqInputs struct {
	t                          quant.Type
	rows, k, ncols, nmat, mode int
	prefetch                   int       // mmvq's prefetch argument (dims 5; 0 when absent)
	rowBytes, matStride        int       // bytes per weight row; bytes between matrices (256-aligned)
	w                          []byte    // nmat matrices, matStride apart
	xf                         []float32 // f32 activations, [xmat][col][k]
	xq                         []byte    // Q8_1 activations, [xmat][col][k/32 blocks]
	xmat                       int       // activation sets: 1 (shared) or nmat
	ids                        []int32   // experts modes: ids[z]
	slotOf                     []int     // experts modes: slot index → matrix index, −1 = null slot
	nslots                     int
}

// missing reports whether matrix z has no slot.
func (in *mmvqInputs) missing(z int) bool {
	if in.mode == 0 {
		return false
	}
	id := int(in.ids[z])
	return id < 0 || id >= in.nslots || in.slotOf[id] < 0
}

// matrixOf is the weight matrix matrix z reads (through its expert id when experts).
func (in *mmvqInputs) matrixOf(z int) int {
	if in.mode == 0 {
		return z
	}
	return in.slotOf[in.ids[z]]
}

// newMmvqInputs draws a case's operands; intMode makes the exact-integer variant.
func newMmvqInputs(t quant.Type, dims []int, intMode bool, rng *rand.Rand) (*mmvqInputs, error) {
	in := &mmvqInputs{t: t, rows: dims[0], k: dims[1], ncols: dims[2], nmat: dims[3], mode: dims[4]}
	if len(dims) >= 6 {
		in.prefetch = dims[5]
		if in.prefetch < 0 || in.prefetch > 2 || (in.prefetch == 2 && (in.mode != 0 || in.ncols != 1)) {
			return nil, fmt.Errorf("mmvq case: prefetch %d with %d columns, mode %d", in.prefetch, in.ncols, in.mode)
		}
	}
	rb, err := t.RowBytes(in.k)
	if err != nil {
		return nil, err
	}
	in.rowBytes = rb
	in.matStride = (in.rows*rb + 255) / 256 * 256
	in.w = make([]byte, in.nmat*in.matStride)
	for m := 0; m < in.nmat; m++ {
		for r := 0; r < in.rows; r++ {
			row := in.w[m*in.matStride+r*rb : m*in.matStride+(r+1)*rb]
			if intMode {
				intWeights(t, row, rng)
				continue
			}
			src, err := quant.RandomRow(t, in.k, rng)
			if err != nil {
				return nil, err
			}
			copy(row, src)
		}
	}
	in.xmat = 1
	if in.mode == 2 {
		in.xmat = in.nmat
	}
	n := in.xmat * in.ncols
	if intMode {
		if t == quant.F16 || t == quant.BF16 {
			in.xf = make([]float32, n*in.k)
			for i := range in.xf {
				in.xf[i] = float32(rng.IntN(17) - 8)
			}
		} else {
			in.xq = make([]byte, n*in.k/32*36)
			w0 := 256 * rng.IntN(in.k/256)
			for c := 0; c < n; c++ {
				for g := w0 / 32; g < w0/32+8; g++ {
					blk := in.xq[(c*in.k/32+g)*36:]
					binary.LittleEndian.PutUint16(blk, 0x3c00)
					for i := 0; i < 32; i++ {
						blk[4+i] = byte(int8(rng.IntN(31) - 15))
					}
				}
			}
		}
	} else {
		in.xf = activations(rng, n, in.k)
		if t != quant.F16 && t != quant.BF16 {
			in.xq = make([]byte, n*in.k/32*36)
			for c := 0; c < n; c++ {
				if err := quant.QuantizeQ8_1GPU(in.xf[c*in.k:(c+1)*in.k], in.xq[c*in.k/32*36:(c+1)*in.k/32*36]); err != nil {
					return nil, err
				}
			}
			in.xf = nil
		}
	}
	if in.mode != 0 {
		// 2·nmat slots in a random order; matrix m sits in one of them, the rest are null.
		in.nslots = 2 * in.nmat
		in.slotOf = make([]int, in.nslots)
		for i := range in.slotOf {
			in.slotOf[i] = -1
		}
		perm := rng.Perm(in.nslots)
		in.ids = make([]int32, in.nmat)
		for m := 0; m < in.nmat; m++ {
			in.slotOf[perm[m]] = m
			in.ids[m] = int32(perm[m])
		}
		if in.mode == 3 {
			// One id past the table and one id of a null slot.
			in.ids[1] = int32(in.nslots + rng.IntN(5))
			in.ids[in.nmat-1] = int32(perm[in.nmat+rng.IntN(in.nmat)])
		}
	}
	return in, nil
}

// intWeights fills one row with random valid blocks whose scales are ±1, or (F16/BF16)
// with integers in [−8, 8].
func intWeights(t quant.Type, row []byte, rng *rand.Rand) {
	k := len(row) / 2
	if t == quant.F16 || t == quant.BF16 {
		for i := 0; i < k; i++ {
			v := float32(rng.IntN(17) - 8)
			h := quant.F32ToF16(v)
			if t == quant.BF16 {
				h = quant.F32ToBF16(v)
			}
			binary.LittleEndian.PutUint16(row[2*i:], h)
		}
		return
	}
	in, _ := quant.Lookup(t)
	for i := range row {
		row[i] = byte(rng.Uint32())
	}
	for b := 0; b < len(row)/in.BlockBytes; b++ {
		blk := row[b*in.BlockBytes : (b+1)*in.BlockBytes]
		switch t {
		case quant.Q4_K:
			binary.LittleEndian.PutUint16(blk[0:], 0x3c00)
			binary.LittleEndian.PutUint16(blk[2:], 0x3c00)
		case quant.Q6_K:
			binary.LittleEndian.PutUint16(blk[208:], 0x3c00|uint16(rng.IntN(2))<<15)
		case quant.IQ1_M:
			for w := 0; w < 4; w++ {
				o := 48 + 2*w
				word := binary.LittleEndian.Uint16(blk[o:])&0x0fff | (0x3c00>>(4*w)&15)<<12
				binary.LittleEndian.PutUint16(blk[o:], word)
			}
		default:
			binary.LittleEndian.PutUint16(blk[0:], 0x3c00)
		}
	}
}

// mmvqRef is the float64 reference: y[z][c][r] and S[z][c][r] = Σ|terms| in the kernel's
// output order. Missing matrices give 0, 0.
func mmvqRef(in *mmvqInputs) (y, s []float64) {
	y = make([]float64, in.nmat*in.ncols*in.rows)
	s = make([]float64, len(y))
	var ib quant.IntBlock
	for z := 0; z < in.nmat; z++ {
		if in.missing(z) {
			continue
		}
		xz := 0
		if in.xmat > 1 {
			xz = z
		}
		w := in.w[in.matrixOf(z)*in.matStride:]
		for c := 0; c < in.ncols; c++ {
			col := xz*in.ncols + c
			for r := 0; r < in.rows; r++ {
				row := w[r*in.rowBytes : (r+1)*in.rowBytes]
				var sum, abs float64
				if in.xf != nil {
					wf := make([]float64, in.k)
					if err := quant.DecodeRow64(in.t, row, wf); err != nil {
						panic("parity: " + err.Error())
					}
					for i, wv := range wf {
						p := wv * float64(in.xf[col*in.k+i])
						sum += p
						abs += math.Abs(p)
					}
				} else {
					sum, abs = q81RowDot(in.t, row, in.xq[col*in.k/32*36:], in.k, &ib)
				}
				o := (z*in.ncols+c)*in.rows + r
				y[o], s[o] = sum, abs
			}
		}
	}
	return y, s
}

// mmvqErrRef is the expected err output.
func mmvqErrRef(in *mmvqInputs) []uint32 {
	e := make([]uint32, in.nmat)
	for z := range e {
		if in.missing(z) {
			e[z] = 1
		}
	}
	return e
}

// launch runs one mmvq launch on in and returns y and err.
func (in *mmvqInputs) launch(h *Harness, fn *gpu.Func) ([]float64, []uint32, float64, error) {
	dw, err := h.Input(in.w)
	if err != nil {
		return nil, nil, 0, err
	}
	args := abi.MmvqArgs{W: dw.Ptr(), WMatBytes: int64(in.matStride), Rows: int32(in.rows), K: int32(in.k),
		Ncols: int32(in.ncols), XColStride: int32(in.k), YColStride: int32(in.rows), YMatStride: int32(in.ncols * in.rows)}
	if in.xmat > 1 {
		args.XMatStride = int32(in.ncols * in.k)
	}
	if in.xf != nil {
		b, err := h.Input(f32Bytes(in.xf))
		if err != nil {
			return nil, nil, 0, err
		}
		args.Xf = b.Ptr()
	} else {
		b, err := h.Input(in.xq)
		if err != nil {
			return nil, nil, 0, err
		}
		args.Xq = b.Ptr()
	}
	if in.mode != 0 {
		slots := make([]byte, 8*in.nslots)
		for i, m := range in.slotOf {
			if m >= 0 {
				binary.LittleEndian.PutUint64(slots[8*i:], dw.Ptr()+uint64(m*in.matStride))
			}
		}
		ds, err := h.Input(slots)
		if err != nil {
			return nil, nil, 0, err
		}
		ids := make([]byte, 4*in.nmat)
		for z, id := range in.ids {
			binary.LittleEndian.PutUint32(ids[4*z:], uint32(id))
		}
		di, err := h.Input(ids)
		if err != nil {
			return nil, nil, 0, err
		}
		args.Slots, args.Ids, args.Nslots = ds.Ptr(), di.Ptr(), int32(in.nslots)
	}
	dy, err := h.Output(4 * in.nmat * in.ncols * in.rows)
	if err != nil {
		return nil, nil, 0, err
	}
	outs := []Buf{dy}
	args.Y = dy.Ptr()
	args.Prefetch = int32(in.prefetch)
	if in.prefetch != 2 { // the late wait needs err null: no err buffer, e is all zeros
		de, err := h.Output(4 * in.nmat)
		if err != nil {
			return nil, nil, 0, err
		}
		args.Err = de.Ptr()
		outs = append(outs, de)
	}
	if mmvqGeomVariant(fn.Symbol()) && in.ncols != 1 {
		return nil, nil, 0, fmt.Errorf("mmvq %s: a decode-geometry kernel with %d columns", fn.Symbol(), in.ncols)
	}
	// The variant's grid (kernels/abi): a decode-geometry kernel's covers its own rows a block.
	gx, err := mmvqGridX("", fn.Symbol(), in.rows)
	if err != nil {
		return nil, nil, 0, err
	}
	grid := gpu.Dim3{X: uint32(gx), Y: 1, Z: uint32(in.nmat)}
	got, el, err := h.Run(fn, grid, gpu.Dim3{X: abi.MmvqThreads, Y: 1, Z: 1}, args.Bytes(), outs...)
	if err != nil {
		return nil, nil, 0, err
	}
	ys := bytesF32(got[0])
	y := make([]float64, len(ys))
	for i, v := range ys {
		y[i] = float64(v)
	}
	e := make([]uint32, in.nmat)
	if len(got) > 1 {
		for i, v := range bytesInt32(got[1]) {
			e[i] = uint32(v)
		}
	}
	return y, e, el.Seconds() * 1e6, nil
}

func runMmvq(h *Harness, symbol string, c Case, bounds []Bound, rng *rand.Rand) (Outcome, error) {
	t, ok := mmvqTypes[mmvqTypeVariant(variantOf(symbol, "mmvq"))]
	if !ok {
		return Outcome{}, fmt.Errorf("no weight type for %s", symbol)
	}
	fn, err := h.Mod.Func(symbol)
	if err != nil {
		return Outcome{}, err
	}
	in, err := newMmvqInputs(t, c.Dims, false, rng)
	if err != nil {
		return Outcome{}, err
	}
	y, e, us, err := in.launch(h, fn)
	if err != nil {
		return Outcome{}, err
	}
	want, s := mmvqRef(in)
	yName := "y"
	if in.k > mmvqLongK {
		yName = "y-long"
	}
	reports := map[string]Report{yName: CompareRows(y, want, 1, func(i int) float64 { return s[i] })}
	errRep := CompareExact(e, mmvqErrRef(in))
	iin, err := newMmvqInputs(t, c.Dims, true, rng)
	if err != nil {
		return Outcome{}, err
	}
	iy, ie, _, err := in.relaunch(h, fn, iin)
	if err != nil {
		return Outcome{}, err
	}
	iwant, _ := mmvqRef(iin)
	reports["int"] = CompareExact(iy, iwant)
	ie2 := CompareExact(ie, mmvqErrRef(iin))
	errRep.N += ie2.N
	if errRep.Mismatch == 0 && ie2.Mismatch > 0 {
		errRep.Worst = "int run: " + ie2.Worst
	}
	errRep.Mismatch += ie2.Mismatch
	reports["err"] = errRep
	bytes := int64(in.nmat*in.rows*in.rowBytes + len(in.xq) + 4*len(in.xf) + 4*len(y))
	return Outcome{Reports: reports, Kernel: us, Bytes: bytes}, checkAll(mmvqCaseBounds(bounds, in.k), reports)
}

// mmvqCaseBounds is the declared checks that apply at K: "y" up to mmvqLongK, "y-long"
// above (the other checks always). A declared check the case does not measure still fails
// (checkAll), so a case can never skip its y check.
func mmvqCaseBounds(bounds []Bound, k int) []Bound {
	skip := "y-long"
	if k > mmvqLongK {
		skip = "y"
	}
	out := make([]Bound, 0, len(bounds))
	for _, b := range bounds {
		if b.Name != skip {
			out = append(out, b)
		}
	}
	return out
}

// relaunch runs the integer inputs in a fresh harness on the same module (so the first
// launch's buffers are not refilled and re-checked).
func (in *mmvqInputs) relaunch(h *Harness, fn *gpu.Func, iin *mmvqInputs) ([]float64, []uint32, float64, error) {
	h2 := &Harness{Dev: h.Dev, Mod: h.Mod}
	y, e, us, err := iin.launch(h2, fn)
	if cerr := h2.Close(); err == nil {
		err = cerr
	}
	return y, e, us, err
}

// selfCheckMmvq holds the float64 reference to quant's exact dots (DotGPU for the integer
// types; DecodeRow64 products for F16/BF16) on every case shape with fewer rows.
func selfCheckMmvq(c Case, rng *rand.Rand) error {
	dims := append([]int(nil), c.Dims...)
	dims[0] = min(dims[0], 3)
	for _, t := range []quant.Type{quant.Q8_0, quant.Q2_0, quant.Q4_K, quant.Q6_K, quant.IQ2_XS, quant.IQ3_XXS, quant.IQ3_S, quant.IQ1_M, quant.F16, quant.BF16} {
		for _, intMode := range []bool{false, true} {
			in, err := newMmvqInputs(t, dims, intMode, rng)
			if err != nil {
				return err
			}
			y, s := mmvqRef(in)
			for z := 0; z < in.nmat; z++ {
				for col := 0; col < in.ncols; col++ {
					for r := 0; r < in.rows; r++ {
						o := (z*in.ncols+col)*in.rows + r
						if in.missing(z) {
							if y[o] != 0 || s[o] != 0 {
								return fmt.Errorf("%s: missing matrix %d has reference %v", t, z, y[o])
							}
							continue
						}
						want, err := exactDot(in, z, col, r)
						if err != nil {
							return err
						}
						if math.Abs(y[o]-want) > 1e-12*s[o] || (s[o] == 0 && y[o] != 0) {
							return fmt.Errorf("%s (int=%v) matrix %d col %d row %d: reference %v, quant's exact dot %v (S %v)", t, intMode, z, col, r, y[o], want, s[o])
						}
					}
				}
			}
		}
	}
	return nil
}

// exactDot is quant's own exact value of one output.
func exactDot(in *mmvqInputs, z, c, r int) (float64, error) {
	xz := 0
	if in.xmat > 1 {
		xz = z
	}
	col := xz*in.ncols + c
	row := in.w[in.matrixOf(z)*in.matStride+r*in.rowBytes : in.matrixOf(z)*in.matStride+(r+1)*in.rowBytes]
	if in.xf != nil {
		w := make([]float64, in.k)
		if err := quant.DecodeRow64(in.t, row, w); err != nil {
			return 0, err
		}
		var s float64
		for i := range w {
			s += w[i] * float64(in.xf[col*in.k+i])
		}
		return s, nil
	}
	d, err := quant.DotGPU(in.t, row, in.xq[col*in.k/32*36:(col+1)*in.k/32*36])
	return d.Exact, err
}

// variantOf strips "strata_<family>_" from a symbol.
func variantOf(symbol, family string) string {
	p := "strata_" + family + "_"
	if len(symbol) > len(p) && symbol[:len(p)] == p {
		return symbol[len(p):]
	}
	return ""
}

// q81RowDot is the exact dot of one weight row (k elements, an integer type) with one row of
// Q8_1 blocks, and S = Σ|term| over its 32-element group terms d_w·d_a·Σ mult·q·q_a (and
// Q4_K's min terms), each exact in float64 (≤ 46-bit products).
func q81RowDot(t quant.Type, row, act []byte, k int, ib *quant.IntBlock) (sum, abs float64) {
	info, _ := quant.Lookup(t)
	for b := 0; b < k/info.BlockElems; b++ {
		if err := quant.IntView(t, row[b*info.BlockBytes:(b+1)*info.BlockBytes], ib); err != nil {
			panic("parity: " + err.Error())
		}
		for g := 0; g < info.BlockElems/32; g++ {
			blk := act[(b*info.BlockElems/32+g)*36:]
			da := float64(quant.F16ToF32(binary.LittleEndian.Uint16(blk)))
			var main, off int64
			for i := 0; i < 32; i++ {
				e := 32*g + i
				qa := int64(int8(blk[4+i]))
				main += int64(ib.Mult[e/ib.Group]) * int64(ib.Q[e]) * qa
				off += int64(ib.OffMult[e/ib.Group]) * qa
			}
			t1, t2 := ib.Base*da*float64(main), ib.OffBase*da*float64(off)
			sum += t1 + t2
			abs += math.Abs(t1) + math.Abs(t2)
		}
	}
	return sum, abs
}

// mmvqGridX is the launch grid's x that covers rows once: ceil(rows / RowsPerBlock) of the
// variant with this symbol, as kernels/abi declares it (the engine launches from the same
// field). target "" takes the symbol's entry of every target, which must all agree (the
// Spec's rows per block depends on the type alone; the error says when that stops holding):
// the harness knows the module, not its target.
func mmvqGridX(target, symbol string, rows int) (int, error) {
	rpb := 0
	for _, co := range abi.CodeObjects {
		if co.Family != "mmvq" || (target != "" && co.Target != target) {
			continue
		}
		for _, v := range co.Variants {
			if v.Symbol != symbol {
				continue
			}
			if v.RowsPerBlock <= 0 || (rpb != 0 && v.RowsPerBlock != rpb) {
				return 0, fmt.Errorf("mmvq %s: rows per block %d on %s, %d elsewhere (kernels/abi)", symbol, v.RowsPerBlock, co.Target, rpb)
			}
			rpb = v.RowsPerBlock
		}
	}
	if rpb == 0 {
		return 0, fmt.Errorf("mmvq %s: no rows per block in kernels/abi for target %q", symbol, target)
	}
	return (rows + rpb - 1) / rpb, nil
}

// mmvqGeomVariant reports whether an mmvq variant name or symbol is a decode-geometry
// kernel's (<type>_g<N>, kernels.MmvqGeoms).
func mmvqGeomVariant(name string) bool {
	i := strings.LastIndex(name, "_g")
	if i < 0 || len(name) < i+3 || len(name) > i+4 || name[i+2] == '0' {
		return false
	}
	for _, c := range name[i+2:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// mmvqTypeVariant is the default variant (the weight type's name) of mmvq variant name:
// <type> for <type>_g<N>, name itself otherwise.
func mmvqTypeVariant(name string) string {
	if mmvqGeomVariant(name) {
		return name[:strings.LastIndex(name, "_g")]
	}
	return name
}

// mmvqApplies: the decode-geometry variants (one column only) run the one-column cases of at
// most 2²² weight elements (the decode shapes, the small expert and ragged cases; the
// default variants keep the large ones); the default variants run every case.
func mmvqApplies(variant string, c Case) bool {
	return !mmvqGeomVariant(variant) || (c.Dims[2] == 1 && c.Dims[0]*c.Dims[1] <= 1<<22)
}
