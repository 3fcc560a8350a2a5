package quant

// ggml's float32 arithmetic for the dot products, transcribed from the structure of
// ggml's generic CPU vec_dot kernels and ggml-cuda's MMVQ vec_dot functions
// (docs/quant-formats.md §5). Integer sums are exact in any order; what is reproduced
// here is where float32 rounding happens. Products that C rounds before adding are
// written float32(a*b) to keep the Go compiler from fusing them into an FMA.

// ggmlCPUDot is ggml's generic CPU vec_dot of weight row w with activation row act (in
// the type's vec_dot type).
func ggmlCPUDot(t Type, w, act []byte, k int) float32 {
	in, _ := Lookup(t)
	nb := k / in.BlockElems
	blk := func(i int) []byte { return w[i*in.BlockBytes : (i+1)*in.BlockBytes] }
	switch t {
	case F16, BF16:
		// ggml_vec_dot_f16/bf16: float products (exact), float64 accumulator.
		var sum float64
		for i := 0; i < k; i++ {
			x, y := halfPair(t, w, act, i)
			sum += float64(x * y)
		}
		return float32(sum)
	case Q8_0:
		var sumf float32
		for i := 0; i < nb; i++ {
			b, a := blk(i), act[34*i:34*i+34]
			var sumi int32
			for j := 0; j < 32; j++ {
				sumi += int32(int8(b[2+j])) * int32(int8(a[2+j]))
			}
			dd := float32(F16ToF32(le16(b, 0)) * F16ToF32(le16(a, 0)))
			sumf += float32(float32(sumi) * dd)
		}
		return sumf
	case Q2_0:
		// Per Q2_0 block: two Q8_0 halves, each integer sum scaled by its d in float,
		// then the weight scale.
		var sumf float32
		for i := 0; i < nb; i++ {
			b := blk(i)
			var sumi float32
			for h := 0; h < 2; h++ {
				a := act[34*(2*i+h) : 34*(2*i+h)+34]
				var s int32
				for j := 0; j < 32; j++ {
					e := 32*h + j
					c := int32(b[2+e/4]>>(2*(e%4))&3) - 1
					s += c * int32(int8(a[2+j]))
				}
				sumi += float32(F16ToF32(le16(a, 0)) * float32(s))
			}
			sumf += float32(F16ToF32(le16(b, 0)) * sumi)
		}
		return sumf
	case Q4_K:
		var sums [8]float32
		var sumf float32
		for i := 0; i < nb; i++ {
			b, a := blk(i), act[292*i:292*i+292]
			var aux32 [8]int32
			for j := 0; j < 8; j++ { // sub-block j: nibbles of qs[32·(j/2)…], low or high
				sc, _ := q4KScaleMin(b[4:16], j)
				qs := b[16+32*(j/2) : 16+32*(j/2)+32]
				shift := 4 * uint(j%2)
				qa := a[4+32*j : 4+32*j+32]
				for l := 0; l < 32; l++ {
					aux32[l%8] += int32(sc) * (int32(qs[l]>>shift&15) * int32(int8(qa[l])))
				}
			}
			var sumi int32
			for j := 0; j < 16; j++ {
				_, m := q4KScaleMin(b[4:16], j/2)
				sumi += int32(int16(le16(a, 260+2*j))) * int32(m)
			}
			da := f32frombits(le32(a, 0))
			d := float32(F16ToF32(le16(b, 0)) * da)
			for l := 0; l < 8; l++ {
				sums[l] += float32(d * float32(aux32[l]))
			}
			dmin := float32(F16ToF32(le16(b, 2)) * da)
			sumf -= float32(dmin * float32(sumi))
		}
		for l := 0; l < 8; l++ {
			sumf += sums[l]
		}
		return sumf
	case Q6_K:
		var sums [8]float32
		var v IntBlock
		for i := 0; i < nb; i++ {
			b, a := blk(i), act[292*i:292*i+292]
			intView(Q6_K, b, &v)
			var aux32 [8]int32
			for e := 0; e < 256; e++ {
				aux32[e%8] += int32(int8(b[192+e/16])) * (v.Q[e] * int32(int8(a[4+e])))
			}
			d := float32(F16ToF32(le16(b, 208)) * f32frombits(le32(a, 0)))
			for l := 0; l < 8; l++ {
				sums[l] += float32(d * float32(aux32[l]))
			}
		}
		var sumf float32
		for l := 0; l < 8; l++ {
			sumf += sums[l]
		}
		return sumf
	case IQ2_XS, IQ3_XXS, IQ3_S:
		// bsum = Σ_groups (odd multiplier)·Σ G·q_a·±1 in int32; sumf += d·bsum;
		// IQ2_XS returns 0.125·sumf, IQ3_XXS 0.25·sumf.
		var v IntBlock
		var sumf float32
		for i := 0; i < nb; i++ {
			b, a := blk(i), act[292*i:292*i+292]
			intView(t, b, &v)
			var bsum int32
			for g := 0; g < 256/v.Group; g++ {
				var sumi int32
				for e := g * v.Group; e < (g+1)*v.Group; e++ {
					sumi += v.Q[e] * int32(int8(a[4+e]))
				}
				bsum += sumi * v.Mult[g]
			}
			d := float32(F16ToF32(le16(b, 0)) * f32frombits(le32(a, 0)))
			sumf += float32(d * float32(bsum))
		}
		switch t {
		case IQ2_XS:
			return 0.125 * sumf
		case IQ3_XXS:
			return 0.25 * sumf
		}
		return sumf
	case IQ1_M:
		var sumf float32
		for i := 0; i < nb; i++ {
			b, a := blk(i), act[292*i:292*i+292]
			var sumi1, sumi2 int32
			for ib := 0; ib < 8; ib++ {
				w := le16(b, 48+2*(ib/2)) >> (6 * (ib % 2))
				for p := 0; p < 4; p++ {
					mult := int32(2*(w&7) + 1)
					if p >= 2 {
						mult = int32(2*(w>>3&7) + 1)
					}
					n := b[32+2*ib+p/2] >> (4 * (p % 2)) & 15
					g := iq1sGrid[int(b[4*ib+p])|int(n&7)<<8]
					var l1, l2 int32
					for j := 0; j < 8; j++ {
						qa := int32(int8(a[4+32*ib+8*p+j]))
						l1 += qa * int32(int8(g>>(8*j)))
						l2 += qa
					}
					if n&8 != 0 {
						l2 = -l2
					}
					sumi1 += l1 * mult
					sumi2 += l2 * mult
				}
			}
			D := F16ToF32(iq1MScale(b))
			dd := float32(D * f32frombits(le32(a, 0)))
			sumf += float32(dd * (float32(sumi1) + float32(iq1mDelta[0]*float32(sumi2))))
		}
		return sumf
	}
	return 0
}

// iqMult is the odd integer sub-scale multiplier of group g of an IQ2_XS (per 16),
// IQ3_XXS or IQ3_S (per 32) block.
func iqMult(t Type, b []byte, g int) int32 {
	switch t {
	case IQ2_XS:
		return 2*int32(b[66+g/2]>>(4*(g%2))&15) + 1
	case IQ3_XXS:
		return 2*int32(le32(b, 66+4*g)>>28) + 1
	default: // IQ3_S
		return 2*int32(b[106+g/2]>>(4*(g%2))&15) + 1
	}
}

// ggmlGPUDot is ggml-cuda's MMVQ arithmetic for weight row w against Q8_1 blocks act,
// one float32 value per 32-element activation block (per vec_dot call group), summed
// in block order.
func ggmlGPUDot(t Type, w, act []byte, k int) float32 {
	in, _ := Lookup(t)
	var v IntBlock
	var sumf float32
	for blk := 0; blk < k/in.BlockElems; blk++ {
		b := w[blk*in.BlockBytes : (blk+1)*in.BlockBytes]
		intView(t, b, &v)
		for s := 0; s < in.BlockElems; s += 32 {
			ab := (blk*in.BlockElems + s) / 32
			a := act[36*ab : 36*ab+36]
			da := F16ToF32(le16(a, 0))
			qa := func(j int) int32 { return int32(int8(a[4+j])) }
			var sumi0, sumi1, suma int32 // first/second 16 of the 32, Σ q_a
			for j := 0; j < 32; j++ {
				p := v.Q[s+j] * qa(j)
				if j < 16 {
					sumi0 += p
				} else {
					sumi1 += p
				}
				suma += qa(j)
			}
			switch t {
			case Q8_0, Q2_0:
				dw := F16ToF32(le16(b, 0))
				sumf += float32(float32(dw*da) * float32(sumi0+sumi1))
			case Q4_K:
				// d·(d8·(Σq·q_a·sc)) − dmin·(d8·(Σq_a·m)), with float d and dmin.
				sc, m := q4KScaleMin(b[4:16], s/32)
				d, dmin := F16ToF32(le16(b, 0)), F16ToF32(le16(b, 2))
				sd := float32(da * float32((sumi0+sumi1)*int32(sc)))
				sm := float32(da * float32(suma*int32(m)))
				sumf += float32(d*sd) - float32(dmin*sm)
			case Q6_K:
				// Σ over the two 16s of sc·Σ, times d8, times d.
				s0 := int32(int8(b[192+s/16])) * sumi0
				s1 := int32(int8(b[192+s/16+1])) * sumi1
				d := F16ToF32(le16(b, 208))
				sumf += float32(d * float32(da*float32(s0+s1)))
			case IQ2_XS:
				// ggml-cuda: (sumi0·ls0 + sumi1·ls1 + (sumi0+sumi1)/2) / 4, truncating;
				// sumi0/sumi1 are Σ G·q_a·±1 over each 16, ls the 4-bit scales.
				ls0 := int32(b[66+s/32] & 15)
				ls1 := int32(b[66+s/32] >> 4)
				sumi := (sumi0*ls0 + sumi1*ls1 + (sumi0+sumi1)/2) / 4
				dw := F16ToF32(le16(b, 0))
				sumf += float32(float32(dw*da) * float32(sumi))
			case IQ3_XXS:
				ls := int32(le32(b, 66+4*(s/32)) >> 28)
				sumi := sumi0 + sumi1
				sumi = (ls*sumi + sumi/2) / 2
				dw := F16ToF32(le16(b, 0))
				sumf += float32(float32(dw*da) * float32(sumi))
			case IQ3_S:
				sumi := (sumi0 + sumi1) * iqMult(IQ3_S, b, s/32)
				dw := F16ToF32(le16(b, 0))
				sumf += float32(float32(dw*da) * float32(sumi))
			case IQ1_M:
				// (sumi[h] + sumf[h])·mult_h with G+1 grid sums and δ' = −1 ± 1/8 folds.
				g := s / 32
				wd := le16(b, 48+2*(g/2)) >> (6 * (g % 2))
				var part [2]float32
				for h := 0; h < 2; h++ {
					var si int32
					var sf float32
					for p := 2 * h; p < 2*h+2; p++ {
						n := b[32+2*g+p/2] >> (4 * (p % 2)) & 15
						grid := iq1sGrid[int(b[4*g+p])|int(n&7)<<8]
						var sumy int32
						for j := 0; j < 8; j++ {
							si += (int32(int8(grid>>(8*j))) + 1) * qa(8*p+j)
							sumy += qa(8*p + j)
						}
						dp := float32(-1 + 0.125)
						if n&8 != 0 {
							dp = -1 - 0.125
						}
						sf += float32(dp * float32(sumy))
					}
					part[h] = float32(si) + sf
				}
				m0, m1 := float32(2*(wd&7)+1), float32(2*(wd>>3&7)+1)
				D := F16ToF32(iq1MScale(b))
				sumf += float32(float32(D*da) * (float32(part[0]*m0) + float32(part[1]*m1)))
			}
		}
	}
	return sumf
}
