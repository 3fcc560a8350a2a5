package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestF16RoundTrip: every binary16 pattern converts to float32 and back unchanged
// (NaNs become the quiet 0x7e00 with their sign), and the float32 value is the one the
// bit fields define.
func TestF16RoundTrip(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := F16ToF32(uint16(h))
		exp, man := h>>10&31, h&1023
		sign := 1.0
		if h&0x8000 != 0 {
			sign = -1
		}
		var want float64
		switch {
		case exp == 31 && man != 0:
			if !math.IsNaN(float64(f)) {
				t.Fatalf("%#04x: got %g, want NaN", h, f)
			}
			if got := F32ToF16(f); got != uint16(h&0x8000|0x7e00) {
				t.Fatalf("%#04x: NaN back to %#04x", h, got)
			}
			continue
		case exp == 31:
			want = math.Inf(int(sign))
		case exp == 0:
			want = sign * float64(man) * math.Ldexp(1, -24)
		default:
			want = sign * (1 + float64(man)/1024) * math.Ldexp(1, exp-15)
		}
		if float64(f) != want || math.Signbit(float64(f)) != (sign < 0) {
			t.Fatalf("F16ToF32(%#04x) = %g, want %g", h, f, want)
		}
		if got := F32ToF16(f); got != uint16(h) {
			t.Fatalf("F32ToF16(F16ToF32(%#04x)) = %#04x", h, got)
		}
	}
}

// TestF32ToF16Rounding checks round-to-nearest-even against the two neighbouring
// binary16 values, on random float32s across the whole binary16 range and on exact
// midpoints.
func TestF32ToF16Rounding(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(f float32) {
		h := F32ToF16(f)
		got := float64(F16ToF32(h))
		x := float64(f)
		if math.Abs(x) >= 65520 { // beyond the rounding boundary of the largest finite
			if !math.IsInf(got, 0) {
				t.Fatalf("F32ToF16(%g) = %#04x (%g), want Inf", f, h, got)
			}
			return
		}
		// Neighbours of h in magnitude (same sign).
		mag := h & 0x7fff
		for _, n := range []uint16{mag - 1, mag + 1} {
			if n > 0x7bff || (mag == 0 && n == 0xffff) {
				continue
			}
			other := math.Abs(float64(F16ToF32(n)))
			dg, do := math.Abs(math.Abs(x)-math.Abs(got)), math.Abs(math.Abs(x)-other)
			if do < dg || (do == dg && mag&1 == 1) {
				t.Fatalf("F32ToF16(%g) = %#04x (%g); %#04x (%g) is nearer or the even tie", f, h, got, n, other)
			}
		}
	}
	for i := 0; i < 200000; i++ {
		e := rng.IntN(46) - 30 // 2^-30 .. 2^15
		f := float32(math.Ldexp(1+rng.Float64(), e))
		if rng.IntN(2) == 0 {
			f = -f
		}
		check(f)
	}
	// Exact midpoints between consecutive binary16 values, normal and subnormal.
	for h := uint16(0); h < 0x7bff; h += 7 {
		a, b := float64(F16ToF32(h)), float64(F16ToF32(h+1))
		mid := float32((a + b) / 2)
		got := F32ToF16(mid)
		want := h
		if h&1 == 1 {
			want = h + 1
		}
		if got != want {
			t.Fatalf("midpoint %g of %#04x and %#04x rounded to %#04x, want %#04x (even)", mid, h, h+1, got, want)
		}
	}
	if F32ToF16(65519) != 0x7bff || F32ToF16(65520) != 0x7c00 || F32ToF16(-1e9) != 0xfc00 {
		t.Fatal("overflow boundary wrong")
	}
	if F32ToF16(float32(math.Ldexp(1, -25))) != 0 || F32ToF16(float32(math.Ldexp(1.5, -25))) != 1 {
		t.Fatal("smallest subnormal boundary wrong")
	}
}

func TestBF16(t *testing.T) {
	cases := []struct {
		f    uint32
		want uint16
	}{
		{0x3f800000, 0x3f80}, // 1
		{0x3f808000, 0x3f80}, // tie, even stays
		{0x3f818000, 0x3f82}, // tie, odd rounds up
		{0x3f808001, 0x3f81}, // above the tie
		{0x7f7fffff, 0x7f80}, // max float rounds to Inf
		{0x00000001, 0x0000}, // subnormal kept (rounds to zero here)
		{0x00018000, 0x0002}, // subnormal tie to even
		{0x7fc00001, 0x7fc0}, // NaN stays NaN
		{0xff800001, 0xffc0}, // signalling NaN made quiet, sign kept
	}
	for _, c := range cases {
		if got := F32ToBF16(math.Float32frombits(c.f)); got != c.want {
			t.Errorf("F32ToBF16(%#08x) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
	if BF16ToF32(0xc0a0) != -5 {
		t.Error("BF16ToF32(0xc0a0) != -5")
	}
}
