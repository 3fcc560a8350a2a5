package quant

import (
	"encoding/binary"
	"fmt"
	"sync"
)

// float is the element type of a decoded row.
type float interface{ ~float32 | ~float64 }

// DecodeRow decodes one row of weights of type t into dst; len(dst) is the row length
// k and src must hold exactly the row's blocks. The result equals ggml's to_float bit for
// bit (up to the sign of zero, see docs/quant-formats.md §1): every weight format's
// exact value is computed with float32 operations that are all exact, except Q4_K's
// final subtraction, which rounds once, as ggml's does. (The activation format Q8_K,
// float32 d times int8, also rounds once.)
func DecodeRow(t Type, src []byte, dst []float32) error { return decodeRow(t, src, dst) }

// DecodeRow64 decodes one row like DecodeRow into float64. Every value is the exact
// value of the block arithmetic (all of them are representable in float64), so
// float32(DecodeRow64) == DecodeRow element for element.
func DecodeRow64(t Type, src []byte, dst []float64) error { return decodeRow(t, src, dst) }

func decodeRow[F float](t Type, src []byte, dst []F) error {
	in, err := checkRow(t, src, len(dst))
	if err != nil {
		return err
	}
	var block func([]byte, []F)
	switch t {
	case F32:
		block = decodeF32[F]
	case F16:
		block = decodeF16[F]
	case BF16:
		block = decodeBF16[F]
	case Q8_0:
		block = decodeQ8_0[F]
	case Q8_1:
		block = decodeQ8_1[F]
	case Q8_K:
		block = decodeQ8_K[F]
	case Q2_0:
		block = decodeQ2_0[F]
	case Q4_K:
		block = decodeQ4_K[F]
	case Q6_K:
		block = decodeQ6_K[F]
	case IQ2_XS:
		block = decodeIQ2_XS[F]
	case IQ3_XXS:
		block = decodeIQ3_XXS[F]
	case IQ3_S:
		block = decodeIQ3_S[F]
	case IQ1_M:
		block = decodeIQ1_M[F]
	default:
		return fmt.Errorf("quant: no decoder for %s", in.Name)
	}
	bb, be := in.BlockBytes, in.BlockElems
	if be == 1 { // plain rows: decode in one go
		block(src, dst)
		return nil
	}
	for i := 0; i < len(dst)/be; i++ {
		// Three-index slices: a decoder that reached past its block would panic here,
		// not read the next block.
		block(src[i*bb:(i+1)*bb:(i+1)*bb], dst[i*be:(i+1)*be:(i+1)*be])
	}
	return nil
}

func le16(b []byte, o int) uint16 { return binary.LittleEndian.Uint16(b[o:]) }
func le32(b []byte, o int) uint32 { return binary.LittleEndian.Uint32(b[o:]) }
func f16[F float](b []byte, o int) F {
	return F(F16ToF32(le16(b, o)))
}

func decodeF32[F float](b []byte, y []F) {
	for i := range y {
		y[i] = F(f32frombits(le32(b, 4*i)))
	}
}

func decodeF16[F float](b []byte, y []F) {
	tab := f16Table()
	b = b[:2*len(y)]
	for i := range y {
		y[i] = F(tab[uint16(b[2*i])|uint16(b[2*i+1])<<8])
	}
}

// f16Table maps every binary16 pattern to its float32 value (256 KiB, built on first
// use); row decoding uses it instead of converting value by value.
var f16Table = sync.OnceValue(func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for h := range t {
		t[h] = F16ToF32(uint16(h))
	}
	return &t
})

func decodeBF16[F float](b []byte, y []F) {
	for i := range y {
		y[i] = F(BF16ToF32(le16(b, 2*i)))
	}
}

// Q8_0: y = d·q.
func decodeQ8_0[F float](b []byte, y []F) {
	_ = b[33]
	d := f16[F](b, 0)
	for i := 0; i < 32; i++ {
		y[i] = d * F(int8(b[2+i]))
	}
}

// Q8_1: y = d·q (s is not part of the values).
func decodeQ8_1[F float](b []byte, y []F) {
	_ = b[35]
	d := f16[F](b, 0)
	for i := 0; i < 32; i++ {
		y[i] = d * F(int8(b[4+i]))
	}
}

// Q8_K: y = d·q with a float32 d; one rounding in float32, exact in float64.
func decodeQ8_K[F float](b []byte, y []F) {
	_ = b[291]
	d := F(f32frombits(le32(b, 0)))
	for i := 0; i < 256; i++ {
		y[i] = d * F(int8(b[4+i]))
	}
}

// Q2_0: code c at bits 2(i%4) of byte i/4, y = (c−1)·d.
func decodeQ2_0[F float](b []byte, y []F) {
	_ = b[17]
	d := f16[F](b, 0)
	// The four levels, each d·(c−1) as ggml computes it (so 0·d keeps d's sign).
	lv := [4]F{d * -1, d * 0, d * 1, d * 2}
	y = y[:64]
	for j, q := range b[2:18] {
		y[4*j] = lv[q&3]
		y[4*j+1] = lv[q>>2&3]
		y[4*j+2] = lv[q>>4&3]
		y[4*j+3] = lv[q>>6]
	}
}

// q4KScaleMin unpacks the 6-bit scale and min of sub-block j from the 12 scale bytes.
func q4KScaleMin(s []byte, j int) (sc, m uint8) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return s[j+4]&0x0f | (s[j-4]>>6)<<4, s[j+4]>>4 | (s[j]>>6)<<4
}

// Q4_K: y = (d·sc)·q − dmin·m; only the subtraction rounds.
func decodeQ4_K[F float](b []byte, y []F) {
	_ = b[143]
	d, dmin := f16[F](b, 0), f16[F](b, 2)
	s := b[4:16]
	for c := 0; c < 4; c++ {
		sc0, m0 := q4KScaleMin(s, 2*c)
		sc1, m1 := q4KScaleMin(s, 2*c+1)
		d0, n0 := d*F(sc0), dmin*F(m0)
		d1, n1 := d*F(sc1), dmin*F(m1)
		qs := b[16+32*c : 16+32*c+32]
		for l := 0; l < 32; l++ {
			y[64*c+l] = d0*F(qs[l]&15) - n0
			y[64*c+32+l] = d1*F(qs[l]>>4) - n1
		}
	}
}

// Q6_K: y = (d·sc)·(u−32).
func decodeQ6_K[F float](b []byte, y []F) {
	_ = b[209]
	y = y[:256]
	d := f16[F](b, 208)
	for n := 0; n < 2; n++ {
		ql := b[64*n : 64*n+64]
		qh := b[128+32*n : 128+32*n+32]
		sc := b[192+8*n : 192+8*n+8]
		yn := y[128*n : 128*n+128]
		for h := 0; h < 2; h++ { // l in [16h, 16h+16): sub-scales sc[h], sc[h+2], sc[h+4], sc[h+6]
			d1, d2 := d*F(int8(sc[h])), d*F(int8(sc[h+2]))
			d3, d4 := d*F(int8(sc[h+4])), d*F(int8(sc[h+6]))
			for l := 16 * h; l < 16*h+16; l++ {
				L, L2, H := ql[l], ql[32+l], qh[l]
				yn[l] = d1 * F(int(L&15|(H&3)<<4)-32)
				yn[l+32] = d2 * F(int(L2&15|(H>>2&3)<<4)-32)
				yn[l+64] = d3 * F(int(L>>4|(H>>4&3)<<4)-32)
				yn[l+96] = d4 * F(int(L2>>4|(H>>6&3)<<4)-32)
			}
		}
	}
}

// IQ2_XS: y = d·(2s+1)/8 · G[j] · ±1, one 4-bit scale per 16 elements.
func decodeIQ2_XS[F float](b []byte, y []F) {
	_ = b[73]
	d := f16[F](b, 0)
	for ib := 0; ib < 8; ib++ {
		sc := b[66+ib]
		for l := 0; l < 4; l++ {
			s := sc & 15
			if l >= 2 {
				s = sc >> 4
			}
			db := d * F(2*int(s)+1) / 8
			code := le16(b, 2+2*(4*ib+l))
			grid := iq2xsGrid[code&511]
			signs := ksignsIQ2XS[code>>9]
			sgn := [2]F{db, -db} // multiplying by ±db is exact, and branch-free
			out := y[32*ib+8*l : 32*ib+8*l+8]
			for j := range out {
				out[j] = sgn[signs>>j&1] * F(uint8(grid>>(8*j)))
			}
		}
	}
}

// IQ3_XXS: y = d·(2s+1)/4 · G[j] · ±1, one scale per 32 in the top nibble of a word
// that also carries four 7-bit sign indices.
func decodeIQ3_XXS[F float](b []byte, y []F) {
	_ = b[97]
	d := f16[F](b, 0)
	for ib := 0; ib < 8; ib++ {
		a := le32(b, 66+4*ib)
		db := d * F(2*int(a>>28)+1) / 4
		for l := 0; l < 4; l++ {
			signs := ksignsIQ2XS[a>>(7*l)&127]
			g1 := iq3xxsGrid[b[2+8*ib+2*l]]
			g2 := iq3xxsGrid[b[2+8*ib+2*l+1]]
			sgn := [2]F{db, -db}
			out := y[32*ib+8*l : 32*ib+8*l+8]
			for j := 0; j < 4; j++ {
				out[j] = sgn[signs>>j&1] * F(uint8(g1>>(8*j)))
				out[j+4] = sgn[signs>>(j+4)&1] * F(uint8(g2>>(8*j)))
			}
		}
	}
}

// IQ3_S: y = d·(1+2s) · G[j] · ±1 with 9-bit grid indices and explicit sign bytes.
func decodeIQ3_S[F float](b []byte, y []F) {
	_ = b[109]
	d := f16[F](b, 0)
	for ib := 0; ib < 8; ib++ {
		s := b[106+ib/2] >> (4 * (ib % 2)) & 15
		db := d * F(1+2*int(s))
		qh := int(b[66+ib])
		for l := 0; l < 4; l++ {
			i1 := int(b[2+8*ib+2*l]) | (qh>>(2*l)&1)<<8
			i2 := int(b[2+8*ib+2*l+1]) | (qh>>(2*l+1)&1)<<8
			g1, g2 := iq3sGrid[i1], iq3sGrid[i2]
			signs := b[74+4*ib+l]
			sgn := [2]F{db, -db}
			out := y[32*ib+8*l : 32*ib+8*l+8]
			for j := 0; j < 4; j++ {
				out[j] = sgn[signs>>j&1] * F(uint8(g1>>(8*j)))
				out[j+4] = sgn[signs>>(j+4)&1] * F(uint8(g2>>(8*j)))
			}
		}
	}
}

// iq1MScale returns the fp16 super-scale bits scattered over the top nibbles of the
// four scale words.
func iq1MScale(b []byte) uint16 {
	w0, w1, w2, w3 := le16(b, 48), le16(b, 50), le16(b, 52), le16(b, 54)
	return w0>>12 | (w1>>8)&0x00f0 | (w2>>4)&0x0f00 | w3&0xf000
}

// IQ1_M: y = D·(2f+1)·(G[j] ± 1/8), 11-bit grid indices, 3-bit sub-scales per 16.
func decodeIQ1_M[F float](b []byte, y []F) {
	_ = b[55]
	D := F(F16ToF32(iq1MScale(b)))
	delta := F(iq1mDelta[0])
	for ib := 0; ib < 8; ib++ {
		w := le16(b, 48+2*(ib/2)) >> (6 * (ib % 2))
		for p := 0; p < 4; p++ {
			field := w & 7
			if p >= 2 {
				field = w >> 3 & 7
			}
			dl := D * F(2*int(field)+1)
			n := b[32+2*ib+p/2] >> (4 * (p % 2)) & 15
			idx := int(b[4*ib+p]) | int(n&7)<<8
			dd := delta
			if n&8 != 0 {
				dd = -delta
			}
			g := iq1sGrid[idx]
			for j := 0; j < 8; j++ {
				y[32*ib+8*p+j] = dl * (F(int8(g>>(8*j))) + dd)
			}
		}
	}
}
