package quant

import (
	"math"
	"testing"
)

// FuzzDecode: decoding arbitrary bytes as any type never panics and never reads past
// the block: each block is handed to the decoder as a slice whose capacity ends at the
// block, so a read beyond it would panic. The float32 and float64 decoders must agree,
// and the dots must not panic either.
func FuzzDecode(f *testing.F) {
	f.Add(uint8(12), make([]byte, 144))
	f.Add(uint8(29), []byte("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"))
	f.Add(uint8(42), []byte("\x00\x7c\x55\x55\x55\x55\x55\x55\x55\x55\x55\x55\x55\x55\x55\x55\x55\x55"))
	f.Fuzz(func(t *testing.T, id uint8, data []byte) {
		types := append(WeightTypes(), Q8_0, Q8_1, Q8_K, F32)
		typ := types[int(id)%len(types)]
		in, _ := Lookup(typ)
		nb := len(data) / in.BlockBytes
		if nb == 0 {
			// Too short for one block: must be refused, not decoded.
			if err := DecodeRow(typ, data, make([]float32, in.BlockElems)); err == nil {
				t.Fatalf("%s: %d bytes decoded as a block of %d", typ, len(data), in.BlockBytes)
			}
			return
		}
		row := data[: nb*in.BlockBytes : nb*in.BlockBytes]
		k := nb * in.BlockElems
		d32, d64 := make([]float32, k), make([]float64, k)
		if err := DecodeRow(typ, row, d32); err != nil {
			t.Fatal(err)
		}
		if err := DecodeRow64(typ, row, d64); err != nil {
			t.Fatal(err)
		}
		for i := range d32 {
			a, b := d32[i], float32(d64[i])
			if a != b && !(math.IsNaN(float64(a)) && math.IsNaN(float64(b))) {
				t.Fatalf("%s elem %d: DecodeRow %g, DecodeRow64 %g", typ, i, a, d64[i])
			}
		}
		if err := DecodeRow(typ, row, d32[:k-1]); err == nil && k > 1 {
			t.Fatalf("%s: a row of %d bytes decoded into %d elements", typ, len(row), k-1)
		}
		if in.Weight && typ != F32 {
			// The weight bytes double as activation bytes of the right size.
			act := make([]byte, mustRowBytes(t, in.VecDotType, k))
			copy(act, data)
			_, _ = DotCPU(typ, row, act)
			if typ != F16 && typ != BF16 {
				q81 := make([]byte, k/32*36)
				copy(q81, data)
				_, _ = DotGPU(typ, row, q81)
			}
		}
	})
}
