package parity

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/runtime/gpu"
)

// imma_tile: C[M×N] int32 += A[M×K] int8 · B[K×N] int8, B given transposed (Bᵀ, N×K).
// Pure integer arithmetic: the reference is exact, and so is every variant's bound.
var immaTileBound = Bound{Name: "c", Exact: true, Why: `
	Integer products and sums: |A·B| ≤ K·128² = 2²⁶ at K = 4096 and |C₀| < 2²⁰, so no
	int32 overflow occurs in any order of summation; int32 addition is associative, so
	the matrix-instruction and dot4 orders must give the reference's value exactly.`}

func init() {
	register(&Family{
		Name:   "imma_tile",
		Bounds: map[string][]Bound{"mma": {immaTileBound}, "dp4a": {immaTileBound}},
		// Dims: M, N, K, lda, ldbt, ldc. The kernel's contract makes M and N multiples
		// of 16 and K a multiple of 16: ragged shapes here are K % 32 = 16 (the mma
		// variant's half step), one 16×16 tile, and padded strides.
		Cases: []Case{
			{"m=16,n=16,k=16", []int{16, 16, 16, 16, 16, 16}},
			{"m=16,n=16,k=32", []int{16, 16, 32, 32, 32, 16}},
			{"m=32,n=48,k=80", []int{32, 48, 80, 80, 80, 48}},
			{"m=16,n=32,k=64,strided", []int{16, 32, 64, 80, 96, 40}},
			{"m=64,n=64,k=4096", []int{64, 64, 4096, 4096, 4096, 64}},
			{"m=128,n=16,k=1008", []int{128, 16, 1008, 1008, 1008, 16}},
		},
		Run: runImmaTile,
	})
}

// int8Matrix draws rows×ld int8 (padding included): uniform over all 256 values, with
// 10% of 16-wide K blocks zeroed and one row of −128s (the extreme product) when
// there are at least two rows.
func int8Matrix(rng *rand.Rand, rows, k, ld int) []byte {
	m := make([]byte, rows*ld)
	for i := range m {
		m[i] = byte(rng.Uint32())
	}
	for r := 0; r < rows; r++ {
		for b := 0; b+16 <= k; b += 16 {
			if rng.IntN(10) == 0 {
				clear(m[r*ld+b : r*ld+b+16])
			}
		}
	}
	if rows > 1 {
		r := rng.IntN(rows)
		for i := 0; i < k; i++ {
			m[r*ld+i] = 0x80
		}
	}
	return m
}

// immaTileRef is the exact reference: C[m][n] = C₀[m][n] + Σₖ A[m][k]·Bᵀ[n][k].
func immaTileRef(a, bt []byte, c0 []int32, m, n, k, lda, ldbt, ldc int) []int32 {
	c := append([]int32(nil), c0...)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s int64
			for kk := 0; kk < k; kk++ {
				s += int64(int8(a[i*lda+kk])) * int64(int8(bt[j*ldbt+kk]))
			}
			c[i*ldc+j] = int32(int64(c[i*ldc+j]) + s)
		}
	}
	return c
}

func runImmaTile(h *Harness, symbol string, c Case, bounds []Bound, rng *rand.Rand) (Outcome, error) {
	m, n, k, lda, ldbt, ldc := c.Dims[0], c.Dims[1], c.Dims[2], c.Dims[3], c.Dims[4], c.Dims[5]
	a := int8Matrix(rng, m, k, lda)
	bt := int8Matrix(rng, n, k, ldbt)
	c0 := make([]int32, m*ldc)
	for i := range c0 {
		c0[i] = rng.Int32N(1<<21) - 1<<20
	}
	want := immaTileRef(a, bt, c0, m, n, k, lda, ldbt, ldc)
	da, err := h.Input(a)
	if err != nil {
		return Outcome{}, err
	}
	dbt, err := h.Input(bt)
	if err != nil {
		return Outcome{}, err
	}
	dc, err := h.InOut(int32Bytes(c0))
	if err != nil {
		return Outcome{}, err
	}
	fn, err := h.Mod.Func(symbol)
	if err != nil {
		return Outcome{}, err
	}
	args := abi.ImmaTileArgs{A: da.Ptr(), Bt: dbt.Ptr(), C: dc.Ptr(), K: int32(k), Lda: int32(lda), Ldbt: int32(ldbt), Ldc: int32(ldc)}
	grid := gpu.Dim3{X: uint32(n / 16), Y: uint32(m / 16), Z: 1}
	got, el, err := h.Run(fn, grid, gpu.Dim3{X: abi.ImmaTileThreads, Y: 1, Z: 1}, args.Bytes(), dc)
	if err != nil {
		return Outcome{}, err
	}
	reports := map[string]Report{"c": CompareExact(bytesInt32(got[0]), want)}
	o := Outcome{Reports: reports, Kernel: el.Seconds() * 1e6, Bytes: int64(m*k + n*k + 2*4*m*n)}
	return o, checkAll(bounds, reports)
}

func int32Bytes(v []int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

func bytesInt32(b []byte) []int32 {
	if len(b)%4 != 0 {
		panic(fmt.Sprintf("parity: %d bytes is not int32 data", len(b)))
	}
	v := make([]int32, len(b)/4)
	for i := range v {
		v[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}
