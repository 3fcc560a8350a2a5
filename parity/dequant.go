package parity

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/quant"
	"github.com/strata-hip/strata/runtime/gpu"
)

// dequant: weight rows → f32 or f16 rows. The reference is quant.DecodeRow64 (exact) and
// quant.DecodeRow (that value rounded once to f32, bit for bit ggml's to_float); both
// outputs are fully specified, so both bounds are exact.

var dequantF32 = Bound{Name: "y", Exact: true, Why: `
	Every format's exact value is base·(mult·q) with base ≤ 11 significant bits and
	|mult·q| < 2¹³ (Q6_K: 128·32), so its f32 product is exact; Q4_K's d·(sc·q) − dmin·m is
	one fma: the exact value rounded once. That is quant.DecodeRow (= ggml's to_float) for
	every element; compared by value (±0 may differ: ggml's (d·sc)·q keeps the sign of a
	negative Q6_K sub-scale on a zero quant). F16/BF16 → f32 are exact conversions.`}

var dequantF16 = Bound{Name: "y", Exact: true, Why: `
	The kernel rounds the f32 value above (exact, or RN32 of the exact value for Q4_K) to
	fp16 by round-to-nearest-even, so the reference is quant.F32ToF16(DecodeRow): fully
	specified, compared by value. (Relative to the exact value this is ≤ 2⁻¹¹ for normal
	results; Q4_K's double rounding can differ from a single RN16 only on an f32 tie.)`}

var dequantTypes = map[string]quant.Type{}

func init() {
	b := map[string][]Bound{}
	for v, t := range mmvqTypes {
		b[v+"_f32"] = []Bound{dequantF32}
		b[v+"_f16"] = []Bound{dequantF16}
		dequantTypes[v+"_f32"], dequantTypes[v+"_f16"] = t, t
	}
	register(&Family{
		Name:   "dequant",
		Bounds: b,
		// Dims: rows, k, y_stride (elements). y_stride = k throughout: the harness requires
		// every output byte to be written, and the kernel (rightly) leaves row padding alone.
		Cases: []Case{
			{"rows=1,k=256", []int{1, 256, 256}},
			{"rows=7,k=4096", []int{7, 4096, 4096}},
			{"rows=4096,k=256", []int{4096, 256, 256}},
			{"rows=3,k=14336", []int{3, 14336, 14336}},
			{"rows=300,k=14336", []int{300, 14336, 14336}},
		},
		Run:       runDequant,
		SelfCheck: selfCheckDequant,
	})
}

// dequantRef decodes rows (rowBytes apart) to f32 and, when f16, rounds to fp16; the
// result is laid out with y_stride elements per row (padding zero, never compared).
func dequantRef(t quant.Type, w []byte, rows, k int, f16 bool) ([]float32, error) {
	rb, err := t.RowBytes(k)
	if err != nil {
		return nil, err
	}
	y := make([]float32, rows*k)
	for r := 0; r < rows; r++ {
		if err := quant.DecodeRow(t, w[r*rb:(r+1)*rb], y[r*k:(r+1)*k]); err != nil {
			return nil, err
		}
	}
	if f16 {
		for i, v := range y {
			y[i] = quant.F16ToF32(quant.F32ToF16(v))
		}
	}
	return y, nil
}

func runDequant(h *Harness, symbol string, c Case, bounds []Bound, rng *rand.Rand) (Outcome, error) {
	v := variantOf(symbol, "dequant")
	t, ok := dequantTypes[v]
	if !ok {
		return Outcome{}, fmt.Errorf("no weight type for %s", symbol)
	}
	f16 := strings.HasSuffix(v, "_f16")
	rows, k, stride := c.Dims[0], c.Dims[1], c.Dims[2]
	var w []byte
	for r := 0; r < rows; r++ {
		row, err := quant.RandomRow(t, k, rng)
		if err != nil {
			return Outcome{}, err
		}
		w = append(w, row...)
	}
	want, err := dequantRef(t, w, rows, k, f16)
	if err != nil {
		return Outcome{}, err
	}
	esize := 4
	if f16 {
		esize = 2
	}
	dw, err := h.Input(w)
	if err != nil {
		return Outcome{}, err
	}
	dy, err := h.Output(esize * ((rows-1)*stride + k))
	if err != nil {
		return Outcome{}, err
	}
	fn, err := h.Mod.Func(symbol)
	if err != nil {
		return Outcome{}, err
	}
	args := abi.DequantArgs{W: dw.Ptr(), Y: dy.Ptr(), Rows: int32(rows), K: int32(k), YStride: int32(stride)}
	groups := rows * k / 32
	grid := gpu.Dim3{X: uint32(max(1, min((groups+abi.DequantThreads-1)/abi.DequantThreads, 65535))), Y: 1, Z: 1}
	got, el, err := h.Run(fn, grid, gpu.Dim3{X: abi.DequantThreads, Y: 1, Z: 1}, args.Bytes(), dy)
	if err != nil {
		return Outcome{}, err
	}
	y := make([]float32, rows*k)
	for r := 0; r < rows; r++ {
		for i := 0; i < k; i++ {
			o := r*stride + i
			if f16 {
				y[r*k+i] = quant.F16ToF32(binary.LittleEndian.Uint16(got[0][2*o:]))
			} else {
				y[r*k+i] = math.Float32frombits(binary.LittleEndian.Uint32(got[0][4*o:]))
			}
		}
	}
	reports := map[string]Report{"y": CompareExact(y, want)}
	return Outcome{Reports: reports, Kernel: el.Seconds() * 1e6, Bytes: int64(len(w) + len(got[0]))}, checkAll(bounds, reports)
}

// selfCheckDequant: the f32 reference equals the exact float64 decode rounded once, for
// every type, on the case's shape (fewer rows).
func selfCheckDequant(c Case, rng *rand.Rand) error {
	rows, k := min(c.Dims[0], 2), c.Dims[1]
	for _, t := range mmvqTypes {
		var w []byte
		for r := 0; r < rows; r++ {
			row, err := quant.RandomRow(t, k, rng)
			if err != nil {
				return err
			}
			w = append(w, row...)
		}
		y, err := dequantRef(t, w, rows, k, false)
		if err != nil {
			return err
		}
		rb := len(w) / rows
		y64 := make([]float64, k)
		for r := 0; r < rows; r++ {
			if err := quant.DecodeRow64(t, w[r*rb:(r+1)*rb], y64); err != nil {
				return err
			}
			for i, v := range y64 {
				if float32(v) != y[r*k+i] {
					return fmt.Errorf("%s row %d elem %d: f32 reference %v, exact %v", t, r, i, y[r*k+i], v)
				}
			}
		}
	}
	return nil
}
