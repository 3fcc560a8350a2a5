package parity

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/strata-hip/strata/quant"
)

// The float64 reference of the int8 prefill families (mmq, moe_prefill): weights in integer
// form per 32-element group (quant.IntView), activations as the Q8_1 bytes the kernel reads,
// exact integer group sums, and the kernel's fold structure for the error scale S.

// intRows is a weight matrix in integer form, group by group.
type intRows struct {
	t        quant.Type
	rows, k  int
	ng       int        // groups of 32 per row
	q        []int8     // rows × k integer weights (IntView's Q; IQ1_M's 8G ± 1 fits int8)
	base     []float64  // rows × ng exact base scale
	mult     [][2]int32 // rows × ng: multipliers of elements 0..15 and 16..31
	offBase  []float64  // rows × ng: Q4_K −dmin, else 0
	offMult  []int32    // rows × ng: Q4_K 6-bit min, else 0
	rowBytes int
}

// newIntRows decodes rows × k weights of type t (rows contiguous, rowBytes apart).
func newIntRows(t quant.Type, w []byte, rows, k int) (*intRows, error) {
	info, ok := quant.Lookup(t)
	if !ok || info.BlockElems == 1 {
		return nil, fmt.Errorf("parity: %v has no integer form", t)
	}
	rb, err := t.RowBytes(k)
	if err != nil {
		return nil, err
	}
	ng := k / 32
	m := &intRows{t: t, rows: rows, k: k, ng: ng, rowBytes: rb,
		q: make([]int8, rows*k), base: make([]float64, rows*ng), mult: make([][2]int32, rows*ng),
		offBase: make([]float64, rows*ng), offMult: make([]int32, rows*ng)}
	var ib quant.IntBlock
	for r := 0; r < rows; r++ {
		for b := 0; b < k/info.BlockElems; b++ {
			o := r*rb + b*info.BlockBytes
			if err := quant.IntView(t, w[o:o+info.BlockBytes], &ib); err != nil {
				return nil, err
			}
			for e := 0; e < info.BlockElems; e++ {
				q := ib.Q[e]
				if q < -128 || q > 127 {
					return nil, fmt.Errorf("parity: %v integer weight %d does not fit int8", t, q)
				}
				m.q[r*k+b*info.BlockElems+e] = int8(q)
			}
			for j := 0; j < info.BlockElems/32; j++ {
				g := r*ng + b*info.BlockElems/32 + j
				m.base[g], m.offBase[g] = ib.Base, ib.OffBase
				m.mult[g] = [2]int32{ib.Mult[32*j/ib.Group], ib.Mult[(32*j+16)/ib.Group]}
				m.offMult[g] = ib.OffMult[32*j/ib.Group]
			}
		}
	}
	return m, nil
}

// q81Rows is Q8_1 activations: tokens rows of k/32 blocks, rowBlocks blocks apart.
type q81Rows struct {
	tokens, k int
	q         []int8    // tokens × k
	d         []float64 // tokens × k/32 (fp16 d, exact)
	sum       []int64   // tokens × k/32: Σ of the group's quants
}

func newQ81Rows(xq []byte, tokens, k, rowBlocks int) *q81Rows {
	ng := k / 32
	x := &q81Rows{tokens: tokens, k: k, q: make([]int8, tokens*k), d: make([]float64, tokens*ng), sum: make([]int64, tokens*ng)}
	for t := 0; t < tokens; t++ {
		for g := 0; g < ng; g++ {
			blk := xq[(t*rowBlocks+g)*36:]
			x.d[t*ng+g] = float64(quant.F16ToF32(binary.LittleEndian.Uint16(blk)))
			var s int64
			for i := 0; i < 32; i++ {
				v := int8(blk[4+i])
				x.q[t*k+32*g+i] = v
				s += int64(v)
			}
			x.sum[t*ng+g] = s
		}
	}
	return x
}

// groupInt is the exact integer main sum of group g of weight row r with token t:
// Σ_i mult(i)·q_w(i)·q_x(i) — what the kernel's int32 tile sum times its multiplier is.
func groupInt(w *intRows, r int, x *q81Rows, t, g int) (lo, hi int64) {
	wq, xq := w.q[r*w.k+32*g:], x.q[t*x.k+32*g:]
	for i := 0; i < 16; i++ {
		lo += int64(wq[i]) * int64(xq[i])
	}
	for i := 16; i < 32; i++ {
		hi += int64(wq[i]) * int64(xq[i])
	}
	m := w.mult[r*w.ng+g]
	return int64(m[0]) * lo, int64(m[1]) * hi
}

// prefillDot is the float64 value y = Σ_k W[r][k]·x[t][k] of the decoded operands and
// S = Σ |fold term| over the terms the kernel folds one by one (per 32-element group, plus the
// Q4_K min term), the scale its f32 rounding errors are bounded against. Every term is exact
// in float64 (≤ 11 + 11 + 24 bits).
func prefillDot(w *intRows, r int, x *q81Rows, t int) (y, s float64) {
	for g := 0; g < w.ng; g++ {
		lo, hi := groupInt(w, r, x, t, g)
		a := w.base[r*w.ng+g] * x.d[t*x.k/32+g] * float64(lo+hi)
		y += a
		s += math.Abs(a)
		if om := w.offMult[r*w.ng+g]; om != 0 {
			a := w.offBase[r*w.ng+g] * x.d[t*x.k/32+g] * float64(int64(om)*x.sum[t*x.k/32+g])
			y += a
			s += math.Abs(a)
		}
	}
	return y, s
}

// gammaN is γ_n = n·u/(1 − n·u) for f32 (u = 2⁻²⁴): the relative bound of n roundings.
func gammaN(n int) float64 {
	u := math.Ldexp(1, -24)
	return float64(n) * u / (1 - float64(n)*u)
}

// parallelFor runs f(0..n−1) on all cores (the references of large cases are the slow part
// of a GPU parity run); f must only write to index-disjoint places.
func parallelFor(n int, f func(i int)) {
	workers := min(n, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				f(i)
			}
		}()
	}
	wg.Wait()
}
