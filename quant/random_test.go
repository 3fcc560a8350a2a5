package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestRandomRow: random rows of every type decode to finite values, the float32 and
// float64 decoders agree, and the features the generator promises occur.
func TestRandomRow(t *testing.T) {
	types := append(WeightTypes(), Q8_1, Q8_K)
	for _, typ := range types {
		t.Run(typ.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(typ), 42))
			be, bb := typ.BlockElems(), typ.BlockBytes()
			k := 4096
			zero, negScale, code3 := 0, 0, 0
			for iter := 0; iter < 8; iter++ {
				row, err := RandomRow(typ, k, rng)
				if err != nil {
					t.Fatal(err)
				}
				d32, d64 := make([]float32, k), make([]float64, k)
				if err := DecodeRow(typ, row, d32); err != nil {
					t.Fatal(err)
				}
				if err := DecodeRow64(typ, row, d64); err != nil {
					t.Fatal(err)
				}
				for i := range d32 {
					if math.IsInf(d64[i], 0) || math.IsNaN(d64[i]) || float32(d64[i]) != d32[i] {
						t.Fatalf("elem %d: DecodeRow %g, DecodeRow64 %g", i, d32[i], d64[i])
					}
				}
				if be == 1 {
					continue
				}
				for b := 0; b < len(row)/bb; b++ {
					blk := row[b*bb : (b+1)*bb]
					allZero := true
					for _, x := range blk {
						allZero = allZero && x == 0
					}
					if allZero {
						zero++
					}
					if typ == Q6_K && blk[209]&0x80 != 0 {
						negScale++
					}
					if typ == Q2_0 {
						for _, x := range blk[2:] {
							if x&3 == 3 {
								code3++
							}
						}
					}
				}
			}
			if be > 1 && zero == 0 {
				t.Error("no all-zero block in 8 rows")
			}
			if typ == Q6_K && negScale == 0 {
				t.Error("no negative Q6_K super-scale")
			}
			if typ == Q2_0 && code3 == 0 {
				t.Error("no Q2_0 code 3")
			}
		})
	}
	if _, err := RandomRow(Q4_K, 100, rand.New(rand.NewPCG(1, 1))); err == nil {
		t.Error("RandomRow accepted k = 100 for Q4_K")
	}
}

// TestIntView: the integer form reconstructs every decoded value exactly.
func TestIntView(t *testing.T) {
	for _, typ := range WeightTypes() {
		if typ == F16 || typ == BF16 {
			var v IntBlock
			if IntView(typ, make([]byte, 2), &v) == nil {
				t.Errorf("IntView(%s) did not refuse", typ)
			}
			continue
		}
		rng := rand.New(rand.NewPCG(uint64(typ), 9))
		be, bb := typ.BlockElems(), typ.BlockBytes()
		row, err := RandomRow(typ, 64*be, rng)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float64, 64*be)
		if err := DecodeRow64(typ, row, want); err != nil {
			t.Fatal(err)
		}
		var v IntBlock
		for b := 0; b < 64; b++ {
			if err := IntView(typ, row[b*bb:(b+1)*bb], &v); err != nil {
				t.Fatal(err)
			}
			if v.Elems != be {
				t.Fatalf("%s: Elems %d, want %d", typ, v.Elems, be)
			}
			for i := 0; i < be; i++ {
				g := i / v.Group
				got := v.Base*float64(v.Mult[g])*float64(v.Q[i]) + v.OffBase*float64(v.OffMult[g])
				if got != want[b*be+i] {
					t.Fatalf("%s block %d elem %d: IntView gives %g, DecodeRow64 %g", typ, b, i, got, want[b*be+i])
				}
			}
		}
		if IntView(typ, row[:bb-1], &v) == nil {
			t.Errorf("IntView(%s) accepted a short block", typ)
		}
	}
}

// TestSignOfZero: a zero quant under a negative scale decodes to −0, as ggml's
// (c−1)·d and d·sc·q do.
func TestSignOfZero(t *testing.T) {
	q2 := make([]byte, 18)
	q2[0], q2[1] = 0x00, 0xbc // d = −1
	q2[2] = 0x55              // codes 1: value 0·d
	y := make([]float32, 64)
	if err := DecodeRow(Q2_0, q2, y); err != nil {
		t.Fatal(err)
	}
	q6 := make([]byte, 210)
	q6[208], q6[209] = 0x00, 0xbc // d = −1
	q6[192] = 1                   // sub-scale 1
	for i := 0; i < 64; i++ {
		q6[i] = 0x00 // low bits 0
	}
	for i := 128; i < 192; i++ {
		q6[i] = 0xaa // high bits 2 → u = 32 → q = 0
	}
	y6 := make([]float64, 256)
	if err := DecodeRow64(Q6_K, q6, y6); err != nil {
		t.Fatal(err)
	}
	if !math.Signbit(float64(y[0])) || !math.Signbit(y6[0]) {
		t.Fatalf("Q2_0 %g (signbit %v), Q6_K %g (signbit %v): want −0", y[0], math.Signbit(float64(y[0])), y6[0], math.Signbit(y6[0]))
	}
}
