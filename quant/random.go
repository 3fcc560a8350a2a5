package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
)

// RandomRow returns k elements of type t as random valid blocks, for parity tests:
// every byte pattern a kernel must handle, with realistic magnitudes.
//
//   - Scales are finite and log-uniform over the range real weights produce (for
//     super-block scales about 2⁻¹⁸..2⁻⁴, fp16 subnormals included), with about one
//     block in 16 an outlier scaled up by 16..256.
//   - About one block in 16 is all zero bytes (a zero scale; for Q4_K the min is zero
//     too), as ggml writes for all-zero source blocks.
//   - Everything else is uniform over the format's fields: every grid index, sign
//     pattern and sub-scale; Q6_K sub-scales down to −128 and super-scales of both signs;
//     Q8_0 quants including −128; Q2_0 code 3 (+2d), which ggml never writes but kernels
//     must decode.
//   - F16 and BF16 rows are N(0, σ²) values with σ log-uniform and about 1 % outliers.
//
// The same rng state gives the same row. k must be a positive multiple of the block
// size; t must be a weight type or an activation block type (Q8_0, Q8_1, Q8_K).
func RandomRow(t Type, k int, rng *rand.Rand) ([]byte, error) {
	n, err := t.RowBytes(k)
	if err != nil {
		return nil, err
	}
	in, _ := Lookup(t)
	if t == F32 {
		return nil, fmt.Errorf("quant: RandomRow: use RandomActivations for f32 data")
	}
	out := make([]byte, n)
	if in.BlockElems == 1 { // F16, BF16
		sigma := logUniform(rng, 1e-3, 1)
		for i := 0; i < k; i++ {
			v := float32(rng.NormFloat64() * sigma * outlier(rng, 0.01))
			if t == F16 {
				binary.LittleEndian.PutUint16(out[2*i:], F32ToF16(v))
			} else {
				binary.LittleEndian.PutUint16(out[2*i:], F32ToBF16(v))
			}
		}
		return out, nil
	}
	for i := 0; i < n/in.BlockBytes; i++ {
		b := out[i*in.BlockBytes : (i+1)*in.BlockBytes]
		if rng.IntN(16) == 0 {
			continue // all-zero block
		}
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		// A scale for this block: log-uniform, sometimes an outlier.
		d := func(lo, hi float64) uint16 {
			return F32ToF16(float32(logUniform(rng, lo, hi) * outlier(rng, 1.0/16)))
		}
		switch t {
		case Q8_0, Q2_0, IQ2_XS, IQ3_XXS, IQ3_S:
			binary.LittleEndian.PutUint16(b[0:], d(1.0/(1<<18), 1.0/16))
		case Q8_1:
			binary.LittleEndian.PutUint16(b[0:], d(1.0/(1<<12), 1.0/8))
			// s as the GPU quantizer stores it: fp16 of a sum of 32 values.
			var sum float32
			dq := F16ToF32(le16(b, 0))
			for j := 0; j < 32; j++ {
				sum += dq * float32(int8(b[4+j]))
			}
			binary.LittleEndian.PutUint16(b[2:], F32ToF16(sum))
		case Q8_K:
			// ggml's d = 1/(−127/max) has the opposite sign of the largest value.
			dk := float32(logUniform(rng, 1.0/(1<<12), 1.0/8))
			if rng.IntN(2) == 0 {
				dk = -dk
			}
			binary.LittleEndian.PutUint32(b[0:], math.Float32bits(dk))
			for g := 0; g < 16; g++ {
				s := 0
				for j := 0; j < 16; j++ {
					s += int(int8(b[4+16*g+j]))
				}
				binary.LittleEndian.PutUint16(b[260+2*g:], uint16(int16(s)))
			}
		case Q4_K:
			binary.LittleEndian.PutUint16(b[0:], d(1.0/(1<<22), 1.0/256))
			binary.LittleEndian.PutUint16(b[2:], d(1.0/(1<<22), 1.0/256))
		case Q6_K:
			h := d(1.0/(1<<22), 1.0/512)
			if rng.IntN(2) == 0 {
				h |= 0x8000
			}
			binary.LittleEndian.PutUint16(b[208:], h)
		case IQ1_M:
			h := d(1.0/(1<<18), 1.0/16)
			for w := 0; w < 4; w++ {
				o := 48 + 2*w
				word := le16(b, o)&0x0fff | (h>>(4*w)&15)<<12
				binary.LittleEndian.PutUint16(b[o:], word)
			}
		}
	}
	return out, nil
}

// RandomActivations returns k float32 activations: N(0,1) with about 1/64 of the
// values multiplied by 6..12 (outlier channels) and, when k ≥ 64, one aligned run of 32
// zeros, so that quantized activations include a zero block.
func RandomActivations(k int, rng *rand.Rand) []float32 {
	x := make([]float32, k)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
		if rng.IntN(64) == 0 {
			x[i] *= float32(6 + 6*rng.Float64())
		}
	}
	if k >= 64 {
		z := 32 * rng.IntN(k/32)
		clear(x[z:min(k, z+32)])
	}
	return x
}

// logUniform draws from [lo, hi) with a uniform logarithm.
func logUniform(rng *rand.Rand, lo, hi float64) float64 {
	return lo * math.Exp(rng.Float64()*math.Log(hi/lo))
}

// outlier returns 1, or with probability p a factor 16..256.
func outlier(rng *rand.Rand, p float64) float64 {
	if rng.Float64() < p {
		return logUniform(rng, 16, 256)
	}
	return 1
}
