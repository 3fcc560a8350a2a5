package quant

import (
	"encoding/binary"
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

// FuzzQuantize: quantizing arbitrary float32 bit patterns with every reference
// quantizer never panics; non-finite input is refused, finite input gives a row that
// decodes without error.
func FuzzQuantize(f *testing.F) {
	f.Add(uint8(12), []byte("\x00\x00\x80\x3f\x00\x00\x80\xbf"))
	f.Add(uint8(14), []byte("\xff\xff\x7f\x7f\x01\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, id uint8, data []byte) {
		types := []Type{F32, F16, BF16, Q8_0, Q8_1, Q8_K, Q2_0, Q4_K, Q6_K}
		typ := types[int(id)%len(types)]
		be := typ.BlockElems()
		n := len(data) / 4
		x := make([]float32, (n+be-1)/be*be+be)
		finite := true
		for i := 0; i < n; i++ {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
			finite = finite && !math.IsNaN(float64(x[i])) && !math.IsInf(float64(x[i]), 0)
		}
		dst := make([]byte, mustRowBytes(t, typ, len(x)))
		err := Quantize(typ, x, dst)
		if typ.BlockElems() > 1 && !finite {
			if err == nil {
				t.Fatal("non-finite input accepted")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := DecodeRow(typ, dst, make([]float32, len(x))); err != nil {
			t.Fatal(err)
		}
		if finite {
			if err := QuantizeQ8_1GPU(x, make([]byte, (len(x)+31)/32*36)); err != nil {
				t.Fatal(err)
			}
		}
	})
}
