package model

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
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
	return &Tensor{Name: name, Type: "F32", Dims: dims, Data: b, RowBytes: 4 * dims[0], Decode: DecodeF32}
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
	for i := 0; i < w; i++ {
		lo, hi := i*n/w, (i+1)*n/w
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	wg.Wait()
}

// matmul computes out[t][r] = Σ_c W[row0+r][c]·x[t][c] for t < T, r < rows: a slice of
// rows of w (an expert of a stacked tensor, or all of it) times T activation vectors.
// Each row is decoded once and used for all T tokens, so decoding is amortised in prefill.
func matmul(out []float32, w *Tensor, row0, rows int, x []float32, T int) {
	cols := w.Cols()
	if len(x) < T*cols || len(out) < T*rows {
		panic(fmt.Sprintf("model: matmul %s: x has %d values, out %d, need %d and %d", w.Name, len(x), len(out), T*cols, T*rows))
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

// dot accumulates in float64: the oracle is float32 GEMM with its own summation order, and
// a wider accumulator keeps our side of the difference far below the declared bounds.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += float64(a[i]) * float64(b[i])
		s1 += float64(a[i+1]) * float64(b[i+1])
		s2 += float64(a[i+2]) * float64(b[i+2])
		s3 += float64(a[i+3]) * float64(b[i+3])
	}
	for ; i < len(a); i++ {
		s0 += float64(a[i]) * float64(b[i])
	}
	return float32((s0 + s1) + (s2 + s3))
}
