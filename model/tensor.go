package model

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"sync"

	"github.com/strata-hip/strata/model/safetensors"
)

// Tensor is one weight as the engine reads it: rows of Dims[0] elements, stored in some
// block format and decoded to float32 a row at a time, so a model mapped from a GGUF file is
// never widened as a whole. Dims are in ggml order (Dims[0] is the row length); a stacked
// expert tensor [cols, rows, experts] is read as experts·rows rows.
type Tensor struct {
	Name     string
	Type     string // "F32", "Q8_0", ... (for messages)
	Dims     []int
	Data     []byte
	RowBytes int
	Decode   RowDecoder
	// Dot, when set, is a fused decode-and-dot of one stored row with x (len Dims[0]);
	// single-token matrix-vector products use it to skip the widened row.
	Dot func(row []byte, x []float32) float32
}

// RowDecoder widens one row (RowBytes bytes) into dst (Dims[0] values).
type RowDecoder func(dst []float32, src []byte)

// Rows is the number of rows (the product of Dims[1:]).
func (t *Tensor) Rows() int {
	n := 1
	for _, d := range t.Dims[1:] {
		n *= d
	}
	return n
}

// Cols is the row length.
func (t *Tensor) Cols() int { return t.Dims[0] }

// Row decodes row r into dst.
func (t *Tensor) Row(dst []float32, r int) {
	t.Decode(dst[:t.Dims[0]], t.Data[r*t.RowBytes:(r+1)*t.RowBytes])
}

// Float32s decodes the whole tensor; for the small vectors (norm weights, gates) the
// engine keeps widened.
func (t *Tensor) Float32s() []float32 {
	out := make([]float32, t.Rows()*t.Cols())
	for r := 0; r < t.Rows(); r++ {
		t.Row(out[r*t.Cols():], r)
	}
	return out
}

// NewF32Tensor wraps float32 values (row-major, ggml dims) as a tensor.
func NewF32Tensor(name string, dims []int, v []float32) *Tensor {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return &Tensor{Name: name, Type: "F32", Dims: dims, Data: b, RowBytes: 4 * dims[0], Decode: DecodeF32, Dot: dotF32}
}

// DecodeF32 is the RowDecoder of F32 rows.
func DecodeF32(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

// DecodeF16 is the RowDecoder of F16 rows.
func DecodeF16(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = safetensors.F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

// DecodeBF16 is the RowDecoder of BF16 rows.
func DecodeBF16(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
	}
}

// workers is the number of goroutines the engine splits its work over.
var workers = runtime.GOMAXPROCS(0)

// SetThreads sets how many goroutines the engine uses (≤ 0: all cores); it returns the number in use.
func SetThreads(n int) int {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	workers = n
	return n
}

// parallelFor runs fn over [0,n) split into contiguous chunks, one per worker; cost is the
// rough work per item, so small jobs stay on the calling goroutine.
func parallelFor(n, cost int, fn func(lo, hi int)) {
	w := workers
	if n*cost < 1<<15 || w <= 1 || n < 2 {
		fn(0, n)
		return
	}
	if w > n {
		w = n
	}
	var wg sync.WaitGroup
	var once sync.Once
	var failure any
	for i := 0; i < w; i++ {
		lo, hi := i*n/w, (i+1)*n/w
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Workers read the model's mapping: a fault there (file truncated under us)
			// becomes a panic, carried to the caller, which Forward turns into an error.
			debug.SetPanicOnFault(true)
			defer func() {
				if r := recover(); r != nil {
					once.Do(func() { failure = r })
				}
			}()
			fn(lo, hi)
		}()
	}
	wg.Wait()
	if failure != nil {
		panic(failure)
	}
}

// matmul computes out[t][r] = Σ_c W[row0+r][c]·x[t][c] for t < T, r < rows: a slice of
// rows of w (an expert of a stacked tensor, or all of it) times T activation vectors.
// Each row is decoded once and used for all T tokens, so decoding is amortised in prefill;
// a single token uses the tensor's fused Dot when it has one.
func matmul(out []float32, w *Tensor, row0, rows int, x []float32, T int) {
	cols := w.Cols()
	if len(x) < T*cols || len(out) < T*rows {
		panic(fmt.Sprintf("model: matmul %s: x has %d values, out %d, need %d and %d", w.Name, len(x), len(out), T*cols, T*rows))
	}
	// A fused dot costs about one decode plus one dot, so it wins while few tokens share
	// each decoded row: decode and one token, and MoE experts in prefill (most get 1-3).
	if T <= fusedMaxTokens && w.Dot != nil {
		rb := w.RowBytes
		parallelFor(rows, cols*T, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				o := (row0 + r) * rb
				for t := 0; t < T; t++ {
					out[t*rows+r] = w.Dot(w.Data[o:o+rb], x[t*cols:(t+1)*cols])
				}
			}
		})
		return
	}
	parallelFor(rows, cols*T+cols, func(lo, hi int) {
		buf := make([]float32, cols)
		for r := lo; r < hi; r++ {
			w.Row(buf, row0+r)
			for t := 0; t < T; t++ {
				out[t*rows+r] = dot(buf, x[t*cols:(t+1)*cols])
			}
		}
	})
}

// fusedMaxTokens is the largest batch that uses a tensor's fused Dot.
const fusedMaxTokens = 3

// dot is a float32 dot product with eight partial sums (the scalar code Go generates is
// bound by the add latency, so independent sums run ~1.5× faster than one). Its rounding
// differs from the reference's GEMM by ~1e-7·√n relative, far inside the declared bounds.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
		s4 += a[i+4] * b[i+4]
		s5 += a[i+5] * b[i+5]
		s6 += a[i+6] * b[i+6]
		s7 += a[i+7] * b[i+7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}

// dotQ8_0 is the fused dot of a Q8_0 row (blocks of an fp16 scale d and 32 int8 q) with x:
// Σ_blocks d·Σ_i q_i·x_i, the same value as decoding (d·q_i exactly in float32) then dot,
// up to float32 rounding order.
func dotQ8_0(row []byte, x []float32) float32 {
	var acc float32
	for b := 0; b+34 <= len(row); b += 34 {
		d := safetensors.F16ToF32(binary.LittleEndian.Uint16(row[b:]))
		q := row[b+2 : b+34 : b+34]
		xs := x[(b/34)*32 : (b/34)*32+32 : (b/34)*32+32]
		var s0, s1, s2, s3 float32
		for i := 0; i < 32; i += 4 {
			s0 += float32(int8(q[i])) * xs[i]
			s1 += float32(int8(q[i+1])) * xs[i+1]
			s2 += float32(int8(q[i+2])) * xs[i+2]
			s3 += float32(int8(q[i+3])) * xs[i+3]
		}
		acc += d * ((s0 + s1) + (s2 + s3))
	}
	return acc
}

// dotF32 is the fused dot of an F32 row with x.
func dotF32(row []byte, x []float32) float32 {
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += math.Float32frombits(binary.LittleEndian.Uint32(row[4*i:])) * x[i]
		s1 += math.Float32frombits(binary.LittleEndian.Uint32(row[4*i+4:])) * x[i+1]
		s2 += math.Float32frombits(binary.LittleEndian.Uint32(row[4*i+8:])) * x[i+2]
		s3 += math.Float32frombits(binary.LittleEndian.Uint32(row[4*i+12:])) * x[i+3]
	}
	for ; i < len(x); i++ {
		s0 += math.Float32frombits(binary.LittleEndian.Uint32(row[4*i:])) * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// dotQ4K is the fused dot of a Q4_K row with x. A 256-element super-block holds fp16 d
// and dmin, 12 bytes packing eight 6-bit (scale, min) pairs, and 128 bytes of 4-bit
// quants; element i of 32-wide sub-block j is d·sc_j·q_i − dmin·m_j, so the block's dot
// is d·sc_j·Σq_i·x_i − dmin·m_j·Σx_i. Sub-blocks 2c and 2c+1 take the low and high
// nibbles of the same 32 bytes.
func dotQ4K(row []byte, x []float32) float32 {
	var acc float32
	for b, xb := 0, 0; b+144 <= len(row); b, xb = b+144, xb+256 {
		d := safetensors.F16ToF32(binary.LittleEndian.Uint16(row[b:]))
		dmin := safetensors.F16ToF32(binary.LittleEndian.Uint16(row[b+2:]))
		sc := row[b+4 : b+16 : b+16]
		qs := row[b+16 : b+144 : b+144]
		for c := 0; c < 4; c++ {
			q := qs[32*c : 32*c+32 : 32*c+32]
			xl := x[xb+64*c : xb+64*c+32 : xb+64*c+32]
			xh := x[xb+64*c+32 : xb+64*c+64 : xb+64*c+64]
			var ql0, ql1, qh0, qh1, sl, sh float32
			for i := 0; i < 32; i += 2 {
				ql0 += float32(q[i]&15) * xl[i]
				ql1 += float32(q[i+1]&15) * xl[i+1]
				qh0 += float32(q[i]>>4) * xh[i]
				qh1 += float32(q[i+1]>>4) * xh[i+1]
				sl += xl[i] + xl[i+1]
				sh += xh[i] + xh[i+1]
			}
			s0, m0 := q4KScaleMin(sc, 2*c)
			s1, m1 := q4KScaleMin(sc, 2*c+1)
			acc += d*(float32(s0)*(ql0+ql1)+float32(s1)*(qh0+qh1)) - dmin*(float32(m0)*sl+float32(m1)*sh)
		}
	}
	return acc
}

// dotQ6K is the fused dot of a Q6_K row with x. A 256-element super-block holds 128 bytes
// ql (low 4 bits), 64 bytes qh (high 2 bits), sixteen int8 sub-scales and fp16 d; element
// i of 16-wide sub-block j is d·sc_j·(q_i − 32), so the block's dot is
// d·Σ_j sc_j·Σ_i (q_i − 32)·x_i. Per 128-element half n and l < 32 (ggml's layout, as in
// quant's decoder): ql[l] holds the low nibbles of elements l and l+64, ql[l+32] those of
// l+32 and l+96, qh[l] the four high 2-bit pairs; element l+32k uses sub-scale 2k + l/16.
func dotQ6K(row []byte, x []float32) float32 {
	var acc float32
	for b, xb := 0, 0; b+210 <= len(row); b, xb = b+210, xb+256 {
		blk := row[b : b+210 : b+210]
		var bs float32
		for n := 0; n < 2; n++ {
			ql := blk[64*n : 64*n+64 : 64*n+64]
			qh := blk[128+32*n : 128+32*n+32 : 128+32*n+32]
			sc := blk[192+8*n : 192+8*n+8 : 192+8*n+8]
			xn := x[xb+128*n : xb+128*n+128 : xb+128*n+128]
			for h := 0; h < 2; h++ { // l in [16h, 16h+16): sub-scales sc[h], sc[h+2], sc[h+4], sc[h+6]
				var s1, s2, s3, s4 float32
				for l := 16 * h; l < 16*h+16; l++ {
					L, L2, H := ql[l], ql[l+32], qh[l]
					s1 += float32(int8(L&15|(H&3)<<4)-32) * xn[l]
					s2 += float32(int8(L2&15|(H>>2&3)<<4)-32) * xn[l+32]
					s3 += float32(int8(L>>4|(H>>4&3)<<4)-32) * xn[l+64]
					s4 += float32(int8(L2>>4|(H>>6&3)<<4)-32) * xn[l+96]
				}
				bs += (float32(int8(sc[h]))*s1 + float32(int8(sc[h+2]))*s2) + (float32(int8(sc[h+4]))*s3 + float32(int8(sc[h+6]))*s4)
			}
		}
		acc += safetensors.F16ToF32(binary.LittleEndian.Uint16(blk[208:])) * bs
	}
	return acc
}

// q4KScaleMin unpacks the 6-bit scale and min of sub-block j (ggml's get_scale_min_k4).
func q4KScaleMin(s []byte, j int) (sc, m uint8) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return s[j+4]&0xF | (s[j-4]>>6)<<4, s[j+4]>>4 | (s[j]>>6)<<4
}
