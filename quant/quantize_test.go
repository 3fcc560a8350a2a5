package quant

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

func TestNearestInt(t *testing.T) {
	for _, c := range []struct {
		x    float32
		want int
	}{{0.5, 0}, {1.5, 2}, {2.5, 2}, {-0.5, 0}, {-1.5, -2}, {-2.5, -2}, {3.49, 3}, {-7.51, -8}, {4194303, 4194303}} {
		if got := nearestInt(c.x); got != c.want {
			t.Errorf("nearestInt(%g) = %d, want %d", c.x, got, c.want)
		}
	}
}

// TestQuantizeQ2_0Ties: roundf rounds halves away from zero, so ±amax/2 become ±1.
func TestQuantizeQ2_0Ties(t *testing.T) {
	x := make([]float32, 64)
	x[0], x[1], x[2], x[3] = 2, 1, -1, 0.99
	x[4] = -2
	y := make([]byte, 18)
	if err := Quantize(Q2_0, x, y); err != nil {
		t.Fatal(err)
	}
	if F16ToF32(binary.LittleEndian.Uint16(y)) != 2 {
		t.Fatalf("d = %g, want amax = 2", F16ToF32(binary.LittleEndian.Uint16(y)))
	}
	// codes: 2→2, 1→round(0.5)+1=2, −1→round(−0.5)+1=0, 0.99→round(0.495)+1=1;
	// then −2→0 and zeros→1.
	if y[2] != 2|2<<2|0<<4|1<<6 || y[3] != 0|1<<2|1<<4|1<<6 {
		t.Fatalf("codes %08b %08b", y[2], y[3])
	}
}

// TestQuantizeQ8_K: the scale has the opposite sign of the largest-magnitude value,
// that value maps to −127, bsums are the sums of 16, and zero blocks are all zero.
func TestQuantizeQ8_K(t *testing.T) {
	x := make([]float32, 512)
	for i := 0; i < 256; i++ {
		x[i] = float32(i%7) - 3
	}
	x[10] = 12.7
	y := make([]byte, 2*292)
	if err := Quantize(Q8_K, x, y); err != nil {
		t.Fatal(err)
	}
	d := math.Float32frombits(binary.LittleEndian.Uint32(y))
	if !(d < 0) || int8(y[4+10]) != -127 {
		t.Fatalf("d = %g, q[10] = %d; want d < 0 and q = -127", d, int8(y[4+10]))
	}
	for g := 0; g < 16; g++ {
		s := 0
		for j := 0; j < 16; j++ {
			s += int(int8(y[4+16*g+j]))
		}
		if got := int(int16(binary.LittleEndian.Uint16(y[260+2*g:]))); got != s {
			t.Fatalf("bsum %d = %d, want %d", g, got, s)
		}
	}
	for _, b := range y[292:] {
		if b != 0 {
			t.Fatal("all-zero source block is not all zero bytes")
		}
	}
}

func TestQuantizeErrors(t *testing.T) {
	if err := Quantize(IQ3_S, make([]float32, 256), make([]byte, 110)); err == nil {
		t.Error("Quantize(IQ3_S) did not refuse")
	}
	if err := Quantize(Q4_K, make([]float32, 255), make([]byte, 144)); err == nil {
		t.Error("Quantize accepted 255 elements for Q4_K")
	}
	if err := Quantize(Q8_0, make([]float32, 32), make([]byte, 35)); err == nil {
		t.Error("Quantize accepted a 35-byte Q8_0 row")
	}
	nan := make([]float32, 256)
	nan[7] = float32(math.NaN())
	if err := Quantize(Q6_K, nan, make([]byte, 210)); err == nil {
		t.Error("Quantize accepted NaN")
	}
	if err := QuantizeQ8_1GPU(nan, make([]byte, 8*36)); err == nil {
		t.Error("QuantizeQ8_1GPU accepted NaN")
	}
	if err := Quantize(F16, nan, make([]byte, 512)); err != nil {
		t.Errorf("Quantize(F16) refused NaN: %v", err)
	}
	if err := QuantizeQ8_1GPU(make([]float32, 33), make([]byte, 36)); err == nil {
		t.Error("QuantizeQ8_1GPU accepted 33 values in one block")
	}
}

// TestWarpSum: the butterfly order is not the sequential one. With x0 = 2²⁴ and
// x1 = x3 = 1, sequential float32 addition loses both ones (2²⁴+1 rounds to 2²⁴),
// while the butterfly adds x1+x3 = 2 first (offset 2) and then 2²⁴+2, exact.
func TestWarpSum(t *testing.T) {
	var v [32]float32
	v[0], v[1], v[3] = 1<<24, 1, 1
	if got := warpSum(v); got != 1<<24+2 {
		t.Fatalf("warpSum = %g, want %g", got, float32(1<<24+2))
	}
}

// TestQuantizeQ8_1GPU: d = fp16(amax/127), the largest value maps to ±127, s is the
// fp16 sum, a zero block is zero, and a ragged row is zero-padded.
func TestQuantizeQ8_1GPU(t *testing.T) {
	x := make([]float32, 40)
	for i := 0; i < 32; i++ {
		x[i] = float32(i) / 8
	}
	x[5] = -6.35
	for i := 32; i < 40; i++ {
		x[i] = 0
	}
	y := make([]byte, 72)
	if err := QuantizeQ8_1GPU(x, y); err != nil {
		t.Fatal(err)
	}
	d := F16ToF32(binary.LittleEndian.Uint16(y[0:]))
	if d != F16ToF32(F32ToF16(6.35/127)) || int8(y[4+5]) != -127 || int8(y[4+16]) != 40 {
		t.Fatalf("d %g q5 %d q16 %d", d, int8(y[4+5]), int8(y[4+16]))
	}
	var sum float64
	for i := 0; i < 32; i++ {
		sum += float64(x[i])
	}
	if s := F16ToF32(binary.LittleEndian.Uint16(y[2:])); s != F16ToF32(F32ToF16(float32(sum))) {
		t.Fatalf("s = %g, want fp16(%g)", s, sum)
	}
	for _, b := range y[36:] {
		if b != 0 {
			t.Fatal("zero block not zero")
		}
	}
}

// TestQuantizeQ8_1GPUTiny: amax a float32 subnormal so small that d = amax/127 is 0;
// the division is infinite and the conversion saturates.
func TestQuantizeQ8_1GPUTiny(t *testing.T) {
	x := make([]float32, 32)
	x[0] = math.Float32frombits(5) // 5·2⁻¹⁴⁹
	x[1] = -math.Float32frombits(5)
	y := make([]byte, 36)
	if err := QuantizeQ8_1GPU(x, y); err != nil {
		t.Fatal(err)
	}
	if int8(y[4]) != 127 || int8(y[5]) != -128 || y[6] != 0 || y[0] != 0 || y[1] != 0 {
		t.Fatalf("got d %#02x%02x q %d %d %d", y[1], y[0], int8(y[4]), int8(y[5]), int8(y[6]))
	}
}

// TestQuantizeQ8_1GPUSeg: seg = 1 is QuantizeQ8_1GPU byte for byte; seg = 8 stores one d per
// 256 values (amax/127 of the segment, the last segment shorter), each block its own sum,
// and every value within half of that d of x (the rounding) or clipped at ±127·d.
func TestQuantizeQ8_1GPUSeg(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	x := make([]float32, 32*19+5) // 20 blocks: two full segments of 8 and one of 4, the last padded
	for i := range x {
		x[i] = float32(rng.NormFloat64())
		if rng.IntN(50) == 0 {
			x[i] *= 40 // outliers set their segment's d
		}
	}
	nb := (len(x) + 31) / 32
	one, q1, q8 := make([]byte, 36*nb), make([]byte, 36*nb), make([]byte, 36*nb)
	if err := QuantizeQ8_1GPU(x, one); err != nil {
		t.Fatal(err)
	}
	if err := QuantizeQ8_1GPUSeg(x, q1, 1); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(one, q1) {
		t.Error("QuantizeQ8_1GPUSeg(seg 1) differs from QuantizeQ8_1GPU")
	}
	// seg 4 is what the shared-d families (mmq8x4, mmq8x4n) read; 8 checks a longer segment.
	for _, seg := range []int{4, 8} {
		if err := QuantizeQ8_1GPUSeg(x, q8, seg); err != nil {
			t.Fatal(err)
		}
		for s0 := 0; s0 < nb; s0 += seg {
			var amax float32
			for _, v := range x[32*s0 : min(len(x), 32*(s0+seg))] {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
			d := amax / 127
			for b := s0; b < min(nb, s0+seg); b++ {
				blk := q8[36*b : 36*b+36]
				if got := binary.LittleEndian.Uint16(blk); got != F32ToF16(d) {
					t.Fatalf("seg %d block %d: d %#x, want the segment's %#x", seg, b, got, F32ToF16(d))
				}
				if !bytes.Equal(blk[2:4], one[36*b+2:36*b+4]) {
					t.Errorf("seg %d block %d: sum differs from the per-block quantizer's", seg, b)
				}
				for i := 0; i < 32; i++ {
					var xi float32
					if 32*b+i < len(x) {
						xi = x[32*b+i]
					}
					if e := math.Abs(float64(xi) - float64(int8(blk[4+i]))*float64(d)); e > 0.5001*float64(d) {
						t.Errorf("seg %d block %d value %d: |x − q·d| = %g > d/2 = %g", seg, b, i, e, d/2)
					}
				}
			}
		}
	}
	if err := QuantizeQ8_1GPUSeg(x, q8, 0); err == nil {
		t.Error("QuantizeQ8_1GPUSeg accepted a segment of 0 blocks")
	}
}
