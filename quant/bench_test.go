package quant

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkDecode measures decode throughput per type; the bytes counted are the
// blocks read, so MB/s is the GB/s of blocks ×1000.
func BenchmarkDecode(b *testing.B) {
	const k = 1 << 14
	for _, typ := range WeightTypes() {
		row, err := RandomRow(typ, k, rand.New(rand.NewPCG(1, uint64(typ))))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(typ.String()+"/f32", func(b *testing.B) {
			dst := make([]float32, k)
			b.SetBytes(int64(len(row)))
			for b.Loop() {
				if err := DecodeRow(typ, row, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(typ.String()+"/f64", func(b *testing.B) {
			dst := make([]float64, k)
			b.SetBytes(int64(len(row)))
			for b.Loop() {
				if err := DecodeRow64(typ, row, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDotCPU measures the exact+ggml dot of one row (the exact sum dominates).
func BenchmarkDotCPU(b *testing.B) {
	const k = 4096
	for _, typ := range WeightTypes() {
		w, act := dotInputs(b, typ, k)
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(int64(len(w)))
			for b.Loop() {
				if _, err := DotCPU(typ, w, act); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVecDotCPU measures ggml's float32 CPU dot alone (what an engine would use).
func BenchmarkVecDotCPU(b *testing.B) {
	const k = 4096
	for _, typ := range WeightTypes() {
		w, act := dotInputs(b, typ, k)
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(int64(len(w)))
			for b.Loop() {
				if _, err := VecDotCPU(typ, w, act); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// dotInputs is a random weight row of typ and a random activation row quantized to its
// vec_dot type, k elements each (the same for every run).
func dotInputs(b *testing.B, typ Type, k int) (w, act []byte) {
	rng := rand.New(rand.NewPCG(2, uint64(typ)))
	w, _ = RandomRow(typ, k, rng)
	in, _ := Lookup(typ)
	n, _ := in.VecDotType.RowBytes(k)
	act = make([]byte, n)
	if err := Quantize(in.VecDotType, RandomActivations(k, rng), act); err != nil {
		b.Fatal(err)
	}
	return w, act
}
