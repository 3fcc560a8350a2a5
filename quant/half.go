package quant

import "math"

// F16ToF32 converts IEEE binary16 bits to float32. It is exact for every input,
// subnormals, infinities and NaN payloads included.
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	}
	f := float32(man) * (1.0 / (1 << 24)) // subnormal: man·2⁻²⁴, exact
	if sign != 0 {
		f = -f
	}
	return f
}

// F32ToF16 converts float32 to binary16 bits the way ggml's GGML_FP32_TO_FP16 does on
// the CPU (and __float2half on the GPU): round to nearest even, overflow to ±Inf, NaN to
// 0x7e00 with the sign kept.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	if exp == 0 { // float32 zero or subnormal: below half the smallest fp16 subnormal
		return sign
	}
	e := exp - 112 // binary16 biased exponent
	if e >= 0x1f {
		return sign | 0x7c00
	}
	m := man | 0x800000
	shift := uint(13)
	if e < 1 {
		shift += uint(1 - e)
		if shift > 24 {
			return sign
		}
	}
	q := m >> shift
	rem := m & (1<<shift - 1)
	half := uint32(1) << (shift - 1)
	if rem > half || (rem == half && q&1 == 1) {
		q++
	}
	if e < 1 {
		return sign | uint16(q) // q == 0x400 carries into the smallest normal
	}
	if q == 1<<11 {
		q >>= 1
		e++
		if e >= 0x1f {
			return sign | 0x7c00
		}
	}
	return sign | uint16(e)<<10 | uint16(q&0x3ff)
}

// BF16ToF32 converts bfloat16 bits to float32 (exact: the bits become the top half).
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 converts float32 to bfloat16 the way ggml_fp32_to_bf16_row_ref does: round
// to nearest even on the bit pattern, NaN made quiet with its sign kept. Subnormals are
// kept (the AVX512-BF16 fast path would flush them).
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b >> 16 & 1)) >> 16)
}

func f32frombits(b uint32) float32 { return math.Float32frombits(b) }
