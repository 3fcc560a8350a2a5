package quant

import (
	"fmt"
	"math"
)

// Dot is one row·activation dot product, computed two ways.
type Dot struct {
	// Exact is the mathematical value Σ w_i·a_i of the decoded weights and decoded
	// activations, rounded once to float64. It is computed from integer block sums
	// (exact) and scale products (exact in float64), accumulated without rounding.
	Exact float64
	// GGML is the float32 value ggml's own arithmetic gives; see DotCPU and DotGPU for
	// which arithmetic.
	GGML float32
}

// DotCPU is the dot product of one weight row of type t with one activation row in
// t's CPU vec_dot type (Info.VecDotType: Q8_0 for Q8_0 and Q2_0, Q8_K for the K and IQ
// types, F16 for F16, BF16 for BF16), as ggml's CPU backend pairs them.
//
// GGML reproduces ggml's generic (scalar, no FMA) vec_dot for t bit for bit: its
// integer sums, its float32 scale products and its summation order (the 8 float lanes of
// the K-quants, the final 0.125 or 0.25 of IQ2_XS and IQ3_XXS, the float64 accumulator
// of F16/BF16). ggml's SIMD builds compute the same integers and differ from it in the
// last float32 bits. Q4_K uses the activation's stored bsums, as ggml does.
func DotCPU(t Type, w, act []byte) (Dot, error) {
	in, ok := Lookup(t)
	if !ok || !in.Weight {
		return Dot{}, fmt.Errorf("quant: DotCPU: %s is not a weight type", t)
	}
	k, err := rowLen(t, w)
	if err != nil {
		return Dot{}, err
	}
	if _, err := checkRow(in.VecDotType, act, k); err != nil {
		return Dot{}, fmt.Errorf("quant: DotCPU %s: activation: %w", t, err)
	}
	var e exactAcc
	exactDot(t, w, in.VecDotType, act, k, &e)
	return Dot{Exact: e.value(), GGML: ggmlCPUDot(t, w, act, k)}, nil
}

// DotGPU is the dot product of one weight row of type t with an activation row of
// Q8_1 blocks (K/32 blocks of 36 bytes), the pairing of the GPU matrix-vector kernels.
// Only the d half of each Q8_1 block's ds is used, as by ggml-cuda's MMVQ kernels.
//
// GGML evaluates ggml-cuda's per-call MMVQ arithmetic in float32 — including the
// truncating integer divisions of IQ2_XS and IQ3_XXS, which make ggml's GPU result
// differ from the exact value (docs/quant-formats.md §5.7–5.8) — and sums the per-call
// values in block order. The real kernel sums per-thread partials and reduces across
// the warp, so its float32 result matches GGML only up to float32 accumulation order;
// the integer effects are the same.
func DotGPU(t Type, w, act []byte) (Dot, error) {
	in, ok := Lookup(t)
	if !ok || !in.Weight || t == F16 || t == BF16 {
		return Dot{}, fmt.Errorf("quant: DotGPU: %s has no integer GPU path (weights: q8_0, q2_0, q4_K, q6_K, iq2_xs, iq3_xxs, iq3_s, iq1_m)", t)
	}
	k, err := rowLen(t, w)
	if err != nil {
		return Dot{}, err
	}
	if _, err := checkRow(Q8_1, act, k); err != nil {
		return Dot{}, fmt.Errorf("quant: DotGPU %s: activation: %w", t, err)
	}
	var e exactAcc
	exactDot(t, w, Q8_1, act, k, &e)
	return Dot{Exact: e.value(), GGML: ggmlGPUDot(t, w, act, k)}, nil
}

// DotF32 is the exact dot product of one weight row of type t with unquantized float32
// activations x (len(x) = the row length), rounded once to float64: the reference for
// kernels that do not quantize the activation (F16/BF16 mat-vec, float routers), and
// the value the quantized paths approximate.
func DotF32(t Type, w []byte, x []float32) (float64, error) {
	in, ok := Lookup(t)
	if !ok || (!in.Weight && t != F32) {
		return 0, fmt.Errorf("quant: DotF32: %s is not a weight type", t)
	}
	wd := make([]float64, len(x))
	if err := DecodeRow64(t, w, wd); err != nil {
		return 0, fmt.Errorf("quant: DotF32: %w", err)
	}
	var e exactAcc
	for i, v := range wd {
		e.addProduct(v, float64(x[i]))
	}
	return e.value(), nil
}

// VecDotCPU is DotCPU's GGML value alone: ggml's generic CPU vec_dot of weight row w
// with activation row act (in t's VecDotType), bit for bit, without the exact sum.
func VecDotCPU(t Type, w, act []byte) (float32, error) {
	in, ok := Lookup(t)
	if !ok || !in.Weight {
		return 0, fmt.Errorf("quant: VecDotCPU: %s is not a weight type", t)
	}
	k, err := rowLen(t, w)
	if err != nil {
		return 0, err
	}
	if _, err := checkRow(in.VecDotType, act, k); err != nil {
		return 0, fmt.Errorf("quant: VecDotCPU %s: activation: %w", t, err)
	}
	return ggmlCPUDot(t, w, act, k), nil
}

// rowLen returns the element count of a whole row of blocks w.
func rowLen(t Type, w []byte) (int, error) {
	in, _ := Lookup(t)
	if len(w) == 0 || len(w)%in.BlockBytes != 0 {
		return 0, fmt.Errorf("quant: %s weight row of %d bytes is not a whole number of %d-byte blocks", in.Name, len(w), in.BlockBytes)
	}
	return len(w) / in.BlockBytes * in.BlockElems, nil
}

// exactAcc sums products without rounding and rounds once at the end. Each product
// is split exactly into two float64s with an FMA (p = a·b rounded, e = a·b − p), and
// the pieces are kept as a list of non-overlapping partial sums (Shewchuk's algorithm,
// as in Python's math.fsum), whose correctly rounded total is the result. The
// magnitudes here (fp16 and float32 scales, integer sums below 2⁵³) are far from
// float64 underflow and overflow, where that splitting would stop being exact. A
// non-finite product (possible with arbitrary bytes) switches to plain float64
// arithmetic, so the result is the Inf or NaN that IEEE arithmetic gives.
type exactAcc struct {
	partials  []float64
	nonFinite bool
	plain     float64
}

// add adds a·b·n, where a·b must be exact in float64 and |n| < 2⁵³.
func (e *exactAcc) add(a, b float64, n int64) {
	e.addProduct(a*b, float64(n))
}

// addProduct adds a·b for finite float64 a and b.
func (e *exactAcc) addProduct(a, b float64) {
	p := a * b
	if e.nonFinite || math.IsInf(p, 0) || math.IsNaN(p) {
		if !e.nonFinite {
			e.plain = e.value()
			e.nonFinite = true
		}
		e.plain += p
		return
	}
	if p == 0 {
		return
	}
	e.addExact(p)
	if lo := math.FMA(a, b, -p); lo != 0 {
		e.addExact(lo)
	}
}

// addExact adds x to the partials, keeping them non-overlapping and increasing in
// magnitude.
func (e *exactAcc) addExact(x float64) {
	i := 0
	for _, y := range e.partials {
		if math.Abs(x) < math.Abs(y) {
			x, y = y, x
		}
		hi := x + y
		lo := y - (hi - x)
		if lo != 0 {
			e.partials[i] = lo
			i++
		}
		x = hi
	}
	e.partials = append(e.partials[:i], x)
}

// value returns the sum rounded once to float64 (to nearest, ties to even).
func (e *exactAcc) value() float64 {
	if e.nonFinite {
		return e.plain
	}
	p := e.partials
	n := len(p)
	if n == 0 {
		return 0
	}
	n--
	hi := p[n]
	var lo float64
	for n > 0 {
		x := hi
		n--
		y := p[n]
		hi = x + y
		lo = y - (hi - x)
		if lo != 0 {
			break
		}
	}
	// hi + lo is exact; if what lies below has the sign of lo and lo is exactly half
	// an ulp of hi, the rounding of hi + lo was a tie broken the wrong way.
	if n > 0 && (lo < 0 && p[n-1] < 0 || lo > 0 && p[n-1] > 0) {
		y := lo * 2
		x := hi + y
		if y == x-hi {
			hi = x
		}
	}
	return hi
}

// actView reads activation blocks: scale and quants per block of actElems.
type actView struct {
	t        Type
	b        []byte
	elems    int // elements per block
	bytes    int
	qOff     int
	f32Scale bool
}

func newActView(t Type, b []byte) actView {
	switch t {
	case Q8_0:
		return actView{t, b, 32, 34, 2, false}
	case Q8_1:
		return actView{t, b, 32, 36, 4, false}
	default: // Q8_K
		return actView{t, b, 256, 292, 4, true}
	}
}

func (v actView) d(blk int) float64 {
	if v.f32Scale {
		return float64(f32frombits(le32(v.b, blk*v.bytes)))
	}
	return float64(F16ToF32(le16(v.b, blk*v.bytes)))
}

// IntBlock is a weight block in integer form: element i equals
//
//	Base·Mult[g]·Q[i] + OffBase·OffMult[g],  g = i/Group,
//
// exactly. Base and OffBase are exact float64 values with at most 11 significant bits
// (an fp16 scale, possibly divided by a power of two), so their product with any
// activation scale is exact in float64, and the dot with a block of int8 activations
// is Base·Σ_g Mult[g]·Σ Q·q_a + OffBase·Σ_g OffMult[g]·Σ q_a, all integers.
// Per type: Q8_0, Q2_0 (Q = c−1): Base = d, Mult = 1. Q4_K: Base = d, Mult = sc,
// OffBase = −dmin, OffMult = m. Q6_K: Base = d, Mult = int8 sub-scale, Q = u−32.
// IQ2_XS: Base = d/8, Mult = 2s+1, Q = ±G. IQ3_XXS: Base = d/4, Mult = 2s+1. IQ3_S:
// Base = d, Mult = 1+2s. IQ1_M: Base = D/8, Mult = 2f+1, Q = 8G ± 1.
type IntBlock struct {
	Q       [256]int32
	Mult    [16]int32
	OffMult [16]int32
	Base    float64
	OffBase float64
	Group   int // elements per sub-scale
	Elems   int // elements in the block
}

// IntView fills v with the integer form of one block b of weight type t (not F16 or
// BF16, which have no integer form).
func IntView(t Type, b []byte, v *IntBlock) error {
	in, ok := Lookup(t)
	if !ok || !in.Weight || in.BlockElems == 1 {
		return fmt.Errorf("quant: IntView: %s has no integer block form", t)
	}
	if len(b) != in.BlockBytes {
		return fmt.Errorf("quant: IntView: a %s block is %d bytes, got %d", in.Name, in.BlockBytes, len(b))
	}
	intView(t, b[:len(b):len(b)], v)
	return nil
}

// intView fills v with the integer form of weight block b of type t.
func intView(t Type, b []byte, v *IntBlock) {
	v.OffBase = 0
	switch t {
	case Q8_0:
		v.Group, v.Elems = 32, 32
		v.Base, v.Mult[0] = float64(F16ToF32(le16(b, 0))), 1
		for i := 0; i < 32; i++ {
			v.Q[i] = int32(int8(b[2+i]))
		}
	case Q2_0:
		v.Group, v.Elems = 64, 64
		v.Base, v.Mult[0] = float64(F16ToF32(le16(b, 0))), 1
		for i := 0; i < 64; i++ {
			v.Q[i] = int32(b[2+i/4]>>(2*(i%4))&3) - 1
		}
	case Q4_K:
		// y = d·sc·q − dmin·m
		v.Group, v.Elems = 32, 256
		v.Base, v.OffBase = float64(F16ToF32(le16(b, 0))), -float64(F16ToF32(le16(b, 2)))
		for j := 0; j < 8; j++ {
			sc, m := q4KScaleMin(b[4:16], j)
			v.Mult[j], v.OffMult[j] = int32(sc), int32(m)
		}
		for c := 0; c < 4; c++ {
			for l := 0; l < 32; l++ {
				x := b[16+32*c+l]
				v.Q[64*c+l] = int32(x & 15)
				v.Q[64*c+32+l] = int32(x >> 4)
			}
		}
	case Q6_K:
		v.Group, v.Elems = 16, 256
		v.Base = float64(F16ToF32(le16(b, 208)))
		for j := 0; j < 16; j++ {
			v.Mult[j] = int32(int8(b[192+j]))
		}
		for n := 0; n < 2; n++ {
			for l := 0; l < 32; l++ {
				L, L2, H := b[64*n+l], b[64*n+32+l], b[128+32*n+l]
				e := 128*n + l
				v.Q[e] = int32(L&15|(H&3)<<4) - 32
				v.Q[e+32] = int32(L2&15|(H>>2&3)<<4) - 32
				v.Q[e+64] = int32(L>>4|(H>>4&3)<<4) - 32
				v.Q[e+96] = int32(L2>>4|(H>>6&3)<<4) - 32
			}
		}
	case IQ2_XS:
		// y = d/8·(2s+1)·(±G)
		v.Group, v.Elems = 16, 256
		v.Base = float64(F16ToF32(le16(b, 0))) / 8
		for ib := 0; ib < 8; ib++ {
			v.Mult[2*ib] = 2*int32(b[66+ib]&15) + 1
			v.Mult[2*ib+1] = 2*int32(b[66+ib]>>4) + 1
			for l := 0; l < 4; l++ {
				code := le16(b, 2+2*(4*ib+l))
				putSigned8(v.Q[32*ib+8*l:], iq2xsGrid[code&511], ksignsIQ2XS[code>>9])
			}
		}
	case IQ3_XXS:
		// y = d/4·(2s+1)·(±G)
		v.Group, v.Elems = 32, 256
		v.Base = float64(F16ToF32(le16(b, 0))) / 4
		for ib := 0; ib < 8; ib++ {
			a := le32(b, 66+4*ib)
			v.Mult[ib] = 2*int32(a>>28) + 1
			for l := 0; l < 4; l++ {
				g1, g2 := iq3xxsGrid[b[2+8*ib+2*l]], iq3xxsGrid[b[2+8*ib+2*l+1]]
				putSigned8(v.Q[32*ib+8*l:], uint64(g1)|uint64(g2)<<32, ksignsIQ2XS[a>>(7*l)&127])
			}
		}
	case IQ3_S:
		// y = d·(1+2s)·(±G)
		v.Group, v.Elems = 32, 256
		v.Base = float64(F16ToF32(le16(b, 0)))
		for ib := 0; ib < 8; ib++ {
			v.Mult[ib] = 1 + 2*int32(b[106+ib/2]>>(4*(ib%2))&15)
			qh := int(b[66+ib])
			for l := 0; l < 4; l++ {
				g1 := iq3sGrid[int(b[2+8*ib+2*l])|(qh>>(2*l)&1)<<8]
				g2 := iq3sGrid[int(b[2+8*ib+2*l+1])|(qh>>(2*l+1)&1)<<8]
				putSigned8(v.Q[32*ib+8*l:], uint64(g1)|uint64(g2)<<32, b[74+4*ib+l])
			}
		}
	case IQ1_M:
		// y = D·(2f+1)·(G ± 1/8) = D/8·(2f+1)·(8G ± 1).
		v.Group, v.Elems = 16, 256
		v.Base = float64(F16ToF32(iq1MScale(b))) / 8
		for ib := 0; ib < 8; ib++ {
			w := le16(b, 48+2*(ib/2)) >> (6 * (ib % 2))
			v.Mult[2*ib] = 2*int32(w&7) + 1
			v.Mult[2*ib+1] = 2*int32(w>>3&7) + 1
			for p := 0; p < 4; p++ {
				n := b[32+2*ib+p/2] >> (4 * (p % 2)) & 15
				g := iq1sGrid[int(b[4*ib+p])|int(n&7)<<8]
				delta := int32(1)
				if n&8 != 0 {
					delta = -1
				}
				for j := 0; j < 8; j++ {
					v.Q[32*ib+8*p+j] = 8*int32(int8(g>>(8*j))) + delta
				}
			}
		}
	}
}

// putSigned8 writes the eight unsigned grid bytes of grid (low byte first) into dst[:8],
// negating byte j where bit j of signs (kmaskIQ2XS[j]) is set: the IQ2/IQ3 group layout.
func putSigned8(dst []int32, grid uint64, signs uint8) {
	for j := 0; j < 8; j++ {
		g := int32(uint8(grid >> (8 * j)))
		if signs&kmaskIQ2XS[j] != 0 {
			g = -g
		}
		dst[j] = g
	}
}

// halfPair returns element i of the F16 or BF16 rows w and act as float32 (exact).
func halfPair(t Type, w, act []byte, i int) (x, y float32) {
	if t == F16 {
		tab := f16Table()
		return tab[le16(w, 2*i)], tab[le16(act, 2*i)]
	}
	return BF16ToF32(le16(w, 2*i)), BF16ToF32(le16(act, 2*i))
}

// exactDot adds the exact dot of weight row w (type t, k elements) with activation row
// act (type at) to e. Weight groups and activation blocks are aligned powers of two, so
// the row splits into segments with one weight scale and one activation scale each.
func exactDot(t Type, w []byte, at Type, act []byte, k int, e *exactAcc) {
	if t == F16 || t == BF16 {
		for i := 0; i < k; i++ {
			x, y := halfPair(t, w, act, i)
			// Halves have ≤ 11 (bf16: 8) significant bits: x·y·1 is exact in float64.
			e.add(float64(x), float64(y), 1)
		}
		return
	}
	in, _ := Lookup(t)
	av := newActView(at, act)
	var v IntBlock
	for blk := 0; blk < k/in.BlockElems; blk++ {
		intView(t, w[blk*in.BlockBytes:(blk+1)*in.BlockBytes:(blk+1)*in.BlockBytes], &v)
		base := blk * in.BlockElems
		// One activation block at a time (or the whole weight block, if smaller): one
		// activation scale, so Σ mult·Σq·q_a is a single integer.
		span := min(av.elems, v.Elems)
		for s := 0; s < v.Elems; s += span {
			ab := (base + s) / av.elems
			qa := av.b[ab*av.bytes+av.qOff+(base+s)%av.elems:][:span] // activation quants of this span
			var dot, off int64
			chunk := min(v.Group, span) // Q2_0's 64-group spans two q8_0/q8_1 blocks
			for c := 0; c < span; c += chunk {
				g := (s + c) / v.Group
				var gd, gs int64
				for i, x := range qa[c : c+chunk] {
					q := int64(int8(x))
					gd += int64(v.Q[s+c+i]) * q
					gs += q
				}
				dot += int64(v.Mult[g]) * gd
				off += int64(v.OffMult[g]) * gs
			}
			da := av.d(ab)
			e.add(v.Base, da, dot)
			if v.OffBase != 0 {
				e.add(v.OffBase, da, off)
			}
		}
	}
}
