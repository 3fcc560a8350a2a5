package parity

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/quant"
	"github.com/strata-hip/strata/runtime/gpu"
)

// embed: out[t] = row ids[t] of the table as f32. The reference decodes with the quant
// package's conversions (the same the CPU engine's Tensor.Row uses for these types).
var embedOut = Bound{Name: "out", Exact: true, Why: `
	Q8_0: f32(fp16 d)·q is an 11-bit by 8-bit product, exact in f32, so the order or
	fusing of the multiply cannot matter; F16 and BF16 widen to f32 exactly (subnormal
	fp16 included). The bits must be equal.`}

func init() {
	register(&Family{
		Name:   "embed",
		Bounds: map[string][]Bound{"q80": {embedOut}, "f16": {embedOut}, "bf16": {embedOut}},
		// Dims: vocab, n, tokens, out_stride.
		Cases: []Case{
			{"vocab=1000,n=2048,tokens=1", []int{1000, 2048, 1, 2048}},
			{"vocab=1000,n=2048,tokens=7", []int{1000, 2048, 7, 2048}},
			{"vocab=300,n=4096,tokens=33,stride=4160", []int{300, 4096, 33, 4160}},
			{"vocab=50,n=32,tokens=1", []int{50, 32, 1, 32}},
			{"vocab=4000,n=64,tokens=70000", []int{4000, 64, 70000, 64}}, // more tokens than gridDim.y
		},
		Run: runEmbed,
	})
}

// embedTypes is each variant's table type.
var embedTypes = map[string]quant.Type{abi.SymEmbedQ80: quant.Q8_0, abi.SymEmbedF16: quant.F16, abi.SymEmbedBf16: quant.BF16}

// embedRowBytes is the bytes of an n-element table row (n a multiple of 32, as the
// cases keep).
func embedRowBytes(symbol string, n int) int {
	rb, err := embedTypes[symbol].RowBytes(n)
	if err != nil {
		panic(err)
	}
	return rb
}

// embedTable draws a vocab-row table: Q8_0 with scales over ±2⁻¹⁰..2⁴ (some zero, some
// subnormal in fp16) and all int8 values; F16 with normal, subnormal and zero values;
// BF16 from f32 normals. No NaN (a NaN's payload could change in a legal conversion).
func embedTable(rng *rand.Rand, symbol string, vocab, n int) []byte {
	rb := embedRowBytes(symbol, n)
	t := make([]byte, vocab*rb)
	for r := 0; r < vocab; r++ {
		row := t[r*rb : (r+1)*rb]
		switch symbol {
		case abi.SymEmbedQ80:
			for b := 0; b < n/32; b++ {
				d := float32(math.Pow(2, -10+14*rng.Float64()))
				switch rng.IntN(20) {
				case 0:
					d = 0
				case 1:
					d = float32(rng.IntN(1000)+1) * 0x1p-24 // fp16 subnormal
				}
				if rng.IntN(2) == 0 {
					d = -d
				}
				binary.LittleEndian.PutUint16(row[34*b:], quant.F32ToF16(d))
				for i := 0; i < 32; i++ {
					row[34*b+2+i] = byte(rng.Uint32())
				}
			}
		case abi.SymEmbedF16:
			for i := 0; i < n; i++ {
				v := float32(rng.NormFloat64())
				if rng.IntN(50) == 0 {
					v *= 0x1p-18 // subnormal in fp16
				}
				binary.LittleEndian.PutUint16(row[2*i:], quant.F32ToF16(v))
			}
		default:
			for i := 0; i < n; i++ {
				binary.LittleEndian.PutUint16(row[2*i:], quant.F32ToBF16(float32(rng.NormFloat64()*100)))
			}
		}
	}
	return t
}

func runEmbed(h *Harness, symbol string, c Case, bounds []Bound, rng *rand.Rand) (Outcome, error) {
	vocab, n, tokens, stride := c.Dims[0], c.Dims[1], c.Dims[2], c.Dims[3]
	typ, ok := embedTypes[symbol]
	if !ok {
		return Outcome{}, fmt.Errorf("no table type for %s", symbol)
	}
	table := embedTable(rng, symbol, vocab, n)
	rb := embedRowBytes(symbol, n)
	ids := make([]int32, tokens)
	for t := range ids {
		ids[t] = rng.Int32N(int32(vocab))
	}
	ids[0] = int32(vocab - 1) // the last row
	// Output gaps between rows (stride > n) start as a pattern the kernel must keep.
	out0 := make([]float32, tokens*stride)
	for i := range out0 {
		out0[i] = float32(i)
	}
	want := append([]float32(nil), out0...)
	for t, id := range ids {
		if err := quant.DecodeRow(typ, table[int(id)*rb:(int(id)+1)*rb], want[t*stride:t*stride+n]); err != nil {
			return Outcome{}, err
		}
	}
	fn, err := h.Mod.Func(symbol)
	if err != nil {
		return Outcome{}, err
	}
	in, err := h.moInputs(table, int32Bytes(ids))
	if err != nil {
		return Outcome{}, err
	}
	var ob Buf
	if stride == n {
		ob, err = h.Output(4 * tokens * stride)
	} else {
		ob, err = h.InOut(f32Bytes(out0))
	}
	if err != nil {
		return Outcome{}, err
	}
	args := abi.EmbedArgs{Table: in[0].Ptr(), Ids: in[1].Ptr(), Out: ob.Ptr(), RowBytes: int64(rb), N: int32(n),
		Tokens: int32(tokens), OutStride: int32(stride)}
	grid := gpu.Dim3{X: uint32((n + abi.EmbedThreads - 1) / abi.EmbedThreads), Y: uint32(min(tokens, 65535)), Z: 1}
	got, el, err := h.Run(fn, grid, moBlock(abi.EmbedThreads), args.Bytes(), ob)
	if err != nil {
		return Outcome{}, err
	}
	g := bytesF32(got[0])
	gb, wb := make([]uint32, len(g)), make([]uint32, len(want))
	for i := range g {
		gb[i], wb[i] = math.Float32bits(g[i]), math.Float32bits(want[i])
	}
	reports := map[string]Report{"out": CompareExact(gb, wb)}
	o := Outcome{Reports: reports, Kernel: el.Seconds() * 1e6, Bytes: int64(tokens) * int64(rb+4+4*n)}
	return o, checkAll(bounds, reports)
}
