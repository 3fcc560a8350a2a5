package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Quantize converts one row of float32 values to type t exactly as ggml's reference
// quantizer for t does (ggml_quantize_chunk without an importance matrix, or the
// activation converters of the CPU backend): the bytes are ggml's bytes.
//
// Supported: F32, F16 (ggml_fp32_to_fp16_row), BF16 (ggml_fp32_to_bf16_row_ref), Q8_0,
// Q8_1 (quantize_row_q8_1_ref: s = fp16(d·Σq)), Q8_K, Q2_0, Q4_K, Q6_K. The IQ types
// need an importance matrix and ggml's search tables to quantize; use [RandomRow]
// for test data of those. dst must be exactly the row's size.
//
// The block formats reject NaN and ±Inf input with an error (ggml's quantizers have no
// defined result for them); F32, F16 and BF16 convert them as ggml does. Finite values
// too large for an fp16 scale give an infinite scale, as in ggml.
//
// One deliberate difference: for an all-zero Q8_K block ggml leaves bsums untouched
// (whatever the buffer held); Quantize writes zeros there.
func Quantize(t Type, x []float32, dst []byte) error {
	in, err := checkRow(t, dst, len(x))
	if err != nil {
		return err
	}
	var block func(x []float32, y []byte)
	switch t {
	case F32:
		for i, v := range x {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
		return nil
	case F16:
		for i, v := range x {
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToF16(v))
		}
		return nil
	case BF16:
		for i, v := range x {
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToBF16(v))
		}
		return nil
	case Q8_0:
		block = quantizeQ8_0
	case Q8_1:
		block = quantizeQ8_1
	case Q8_K:
		block = quantizeQ8_K
	case Q2_0:
		block = quantizeQ2_0
	case Q4_K:
		block = quantizeQ4_K
	case Q6_K:
		block = quantizeQ6_K
	default:
		return fmt.Errorf("quant: no reference quantizer for %s (IQ formats need an importance matrix; use RandomRow for test data)", in.Name)
	}
	if err := checkFinite(x); err != nil {
		return fmt.Errorf("quant: Quantize %s: %w", in.Name, err)
	}
	be, bb := in.BlockElems, in.BlockBytes
	for i := 0; i < len(x)/be; i++ {
		y := dst[i*bb : (i+1)*bb : (i+1)*bb]
		clear(y)
		block(x[i*be:(i+1)*be:(i+1)*be], y)
	}
	return nil
}

// QuantizeQ8_1GPU quantizes an activation row to Q8_1 blocks exactly as the GPU
// matrix-vector kernels do it (ggml-cuda quantize_q8_1, and Strata's quantize kernel):
// per 32 values amax = max|x|, sum = the xor-butterfly warp sum of x (offsets 16, 8,
// 4, 2, 1, in float32), d = amax/127, q = roundf(x/d) (a true division, half away from
// zero; 0 when amax is 0), stored as (fp16(d), fp16(sum)). x may be any length; the
// last block is padded with zeros, as the kernel pads the row. dst must be
// ceil(len(x)/32)·36 bytes. x must be finite. One corner is undefined in C: when amax
// is a float32 subnormal below 127·2⁻¹⁴⁹, d underflows to 0 and x/d is ±Inf or NaN;
// here the conversion saturates (NaN gives 0), like a saturating GPU cvt.
func QuantizeQ8_1GPU(x []float32, dst []byte) error {
	return quantizeQ8_1GPU("QuantizeQ8_1GPU", x, dst, 1)
}

// QuantizeQ8_1GPUSeg is QuantizeQ8_1GPU with one d for each segment of seg consecutive
// blocks (seg·32 values; the last segment may be shorter): d = amax/127 over the segment,
// every block of it stores the same fp16(d) and its own sum, and q = roundf(x/d). The bytes
// are ordinary Q8_1 blocks that every Q8_1 reader takes; kernels that fold a segment's
// groups at once (families mmq8x4, mmq8x4n: seg = 4) need the shared d. A block quieter than its segment
// gets a coarser grid than QuantizeQ8_1GPU gives it: its rounding error is at most half the
// segment's d instead of half its own. seg = 1 is QuantizeQ8_1GPU.
func QuantizeQ8_1GPUSeg(x []float32, dst []byte, seg int) error {
	if seg < 1 {
		return fmt.Errorf("quant: QuantizeQ8_1GPUSeg: segment of %d blocks", seg)
	}
	return quantizeQ8_1GPU("QuantizeQ8_1GPUSeg", x, dst, seg)
}

func quantizeQ8_1GPU(name string, x []float32, dst []byte, seg int) error {
	nb := (len(x) + 31) / 32
	if len(x) == 0 || len(dst) != nb*36 {
		return fmt.Errorf("quant: %s: %d values need %d bytes of q8_1 blocks, got %d", name, len(x), nb*36, len(dst))
	}
	if err := checkFinite(x); err != nil {
		return fmt.Errorf("quant: %s: %w", name, err)
	}
	var v [32]float32
	for s0 := 0; s0 < nb; s0 += seg {
		s1 := min(nb, s0+seg)
		var amax float32
		for _, xi := range x[32*s0 : min(len(x), 32*s1)] {
			amax = max(amax, float32(math.Abs(float64(xi))))
		}
		d := amax / 127
		for b := s0; b < s1; b++ {
			clear(v[:])
			copy(v[:], x[32*b:min(len(x), 32*b+32)])
			sum := warpSum(v)
			y := dst[36*b : 36*b+36]
			binary.LittleEndian.PutUint16(y[0:], F32ToF16(d))
			binary.LittleEndian.PutUint16(y[2:], F32ToF16(sum))
			for i, xi := range v {
				var q int8
				if amax != 0 {
					q = satInt8(math.Round(float64(xi / d)))
				}
				y[4+i] = byte(q)
			}
		}
	}
	return nil
}

// warpSum is the value every lane holds after a width-32 xor-butterfly reduction:
// lane i adds lane i^off for off = 16, 8, 4, 2, 1, each step rounded to float32.
func warpSum(v [32]float32) float32 {
	for off := 16; off > 0; off >>= 1 {
		var next [32]float32
		for i := range v {
			next[i] = v[i] + v[i^off]
		}
		v = next
	}
	return v[0]
}

// roundf is C's roundf: round half away from zero.
func roundf(x float32) float32 { return float32(math.Round(float64(x))) }

// nearestInt is ggml's nearest_int: adds 1.5·2²³ in float32 and reads the low mantissa
// bits, i.e. round half to even, valid for |x| ≤ 2²².
func nearestInt(x float32) int {
	v := x + 12582912
	return int(math.Float32bits(v)&0x007fffff) - 0x00400000
}

func putF16(y []byte, o int, f float32) { binary.LittleEndian.PutUint16(y[o:], F32ToF16(f)) }

// q8Scale is the scale both 8-bit quantizers use: d = amax/127 and its inverse (0 for an
// all-zero block).
func q8Scale(x []float32) (d, id float32) {
	var amax float32
	for _, v := range x {
		amax = max(amax, abs32(v))
	}
	d = amax / 127
	if d != 0 {
		id = 1 / d
	}
	return d, id
}

// quantizeQ8_0 is quantize_row_q8_0_ref: d = amax/127, q = roundf(x·(1/d)).
func quantizeQ8_0(x []float32, y []byte) {
	d, id := q8Scale(x)
	putF16(y, 0, d)
	for j, v := range x {
		y[2+j] = byte(int8(roundf(v * id)))
	}
}

// quantizeQ8_1 is quantize_row_q8_1_ref: as Q8_0, and s = fp16(float(Σq)·d).
func quantizeQ8_1(x []float32, y []byte) {
	d, id := q8Scale(x)
	putF16(y, 0, d)
	sum := 0
	for j, v := range x {
		q := int8(roundf(v * id))
		y[4+j] = byte(q)
		sum += int(q)
	}
	putF16(y, 2, float32(sum)*d)
}

// quantizeQ8_K is quantize_row_q8_K_ref: one float32 scale per 256 from the signed
// value of largest magnitude, half-to-even rounding, and bsums per 16.
func quantizeQ8_K(x []float32, y []byte) {
	var amax, mx float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, mx = a, v
		}
	}
	if amax == 0 {
		return // d = 0, quants 0 (Quantize cleared the block)
	}
	iscale := -127 / mx
	for j, v := range x {
		y[4+j] = byte(int8(min(127, nearestInt(iscale*v))))
	}
	for g := 0; g < 16; g++ {
		s := 0
		for i := 0; i < 16; i++ {
			s += int(int8(y[4+16*g+i]))
		}
		binary.LittleEndian.PutUint16(y[260+2*g:], uint16(int16(s)))
	}
	binary.LittleEndian.PutUint32(y[0:], math.Float32bits(1/iscale))
}

// quantizeQ2_0 is quantize_row_q2_0_ref: d = amax, c = clamp(roundf(x·(1/d)) + 1, 0, 3).
func quantizeQ2_0(x []float32, y []byte) {
	var amax float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax = a
		}
	}
	var id float32
	if amax > 0 {
		id = 1 / amax
	}
	putF16(y, 0, amax)
	for j, v := range x {
		q := min(3, max(0, int(roundf(v*id))+1))
		y[2+j/4] |= byte(q) << (2 * (j % 4))
	}
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// checkFinite returns an error naming the first NaN or infinite value of x.
func checkFinite(x []float32) error {
	for i, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("element %d is %v; block quantizers need finite input", i, v)
		}
	}
	return nil
}

// satInt8 converts to int8 with saturation; NaN gives 0.
func satInt8(v float64) int8 {
	switch {
	case v != v:
		return 0
	case v >= 127:
		return 127
	case v <= -128:
		return -128
	}
	return int8(v)
}
