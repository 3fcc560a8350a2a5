package quant

import "math"

// The K-quant reference quantizers (no importance matrix), following ggml's
// quantize_row_q4_K_ref and quantize_row_q6_K_ref step for step in float32. Every
// product that ggml rounds before an addition is written float32(a*b) so that the Go
// compiler cannot fuse it into an FMA (the Go spec lets an explicit conversion block
// fusion); ggml's reference build has no FMA contraction in these loops.

const groupMaxEps = 1e-15 // ggml's GROUP_MAX_EPS

// makeQXQuants is make_qx_quants(n, nmax, x, L, rmse_type = 1, qw = NULL): a signed
// scale for one group with L[i] ∈ [0, 2·nmax), trying 19 candidate scales and keeping
// the one with the best x²-weighted fit.
func makeQXQuants(nmax int, x []float32, L []int8) float32 {
	var mx, amax float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, mx = a, v
		}
	}
	if amax < groupMaxEps {
		for i := range L {
			L[i] = 0
		}
		return 0
	}
	clampL := func(l int) int { return max(-nmax, min(nmax-1, l)) }
	iscale := float32(-nmax) / mx
	var sumlx, suml2 float32
	for i, v := range x {
		l := clampL(nearestInt(float32(iscale * v)))
		L[i] = int8(l + nmax)
		w := float32(v * v)
		sumlx += float32(float32(w*v) * float32(l))
		suml2 += float32(float32(w*float32(l)) * float32(l))
	}
	var scale float32
	if suml2 != 0 {
		scale = sumlx / suml2
	}
	best := float32(scale * sumlx)
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(float32(nmax) + float32(0.1*float32(is))) / mx
		sumlx, suml2 = 0, 0
		for _, v := range x {
			l := clampL(nearestInt(float32(iscale * v)))
			w := float32(v * v)
			sumlx += float32(float32(w*v) * float32(l))
			suml2 += float32(float32(w*float32(l)) * float32(l))
		}
		if suml2 > 0 && float32(sumlx*sumlx) > float32(best*suml2) {
			for i, v := range x {
				L[i] = int8(nmax + clampL(nearestInt(float32(iscale*v))))
			}
			scale = sumlx / suml2
			best = float32(scale * sumlx)
		}
	}
	return scale
}

// makeQKX2Quants is make_qkx2_quants with use_mad = false: an unsigned scale and a min
// for one group (x ≈ scale·L − min, L ∈ [0, nmax]) by weighted least squares over
// nstep+1 candidate scales. It returns the scale and the min (≥ 0).
func makeQKX2Quants(nmax int, x, weights []float32, L, Laux []uint8, rmin, rdelta float32, nstep int) (scale, theMin float32) {
	n := len(x)
	mn, mx := x[0], x[0]
	sumW := weights[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < n; i++ {
		if x[i] < mn {
			mn = x[i]
		}
		if x[i] > mx {
			mx = x[i]
		}
		w := weights[i]
		sumW += w
		sumX += float32(w * x[i])
	}
	if mn > 0 {
		mn = 0
	}
	if mx == mn {
		for i := range L[:n] {
			L[i] = 0
		}
		return 0, -mn
	}
	clampL := func(l int) int { return max(0, min(nmax, l)) }
	iscale := float32(nmax) / (mx - mn)
	scale = 1 / iscale
	var bestError float32
	for i := 0; i < n; i++ {
		l := clampL(nearestInt(float32(iscale * (x[i] - mn))))
		L[i] = uint8(l)
		diff := float32(scale*float32(l)) + mn - x[i]
		diff = float32(diff * diff)
		bestError += float32(weights[i] * diff)
	}
	for is := 0; is <= nstep; is++ {
		iscale = (rmin + float32(rdelta*float32(is)) + float32(nmax)) / (mx - mn)
		var sumL, sumL2, sumXL float32
		for i := 0; i < n; i++ {
			l := clampL(nearestInt(float32(iscale * (x[i] - mn))))
			Laux[i] = uint8(l)
			w := weights[i]
			wl := float32(w * float32(l))
			sumL += wl
			sumL2 += float32(wl * float32(l))
			sumXL += float32(wl * x[i])
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var curError float32
			for i := 0; i < n; i++ {
				diff := float32(thisScale*float32(Laux[i])) + thisMin - x[i]
				diff = float32(diff * diff)
				curError += float32(weights[i] * diff)
			}
			if curError < bestError {
				copy(L[:n], Laux[:n])
				bestError = curError
				scale = thisScale
				mn = thisMin
			}
		}
	}
	return scale, -mn
}

// quantizeQ4_K is quantize_row_q4_K_ref for one 256-element block.
func quantizeQ4_K(x []float32, y []byte) {
	var L, Laux [256]uint8
	var weights [32]float32
	var scales, mins [8]float32
	var maxScale, maxMin float32
	for j := 0; j < 8; j++ {
		xs := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		avX := float32(math.Sqrt(float64(sumX2 / 32)))
		for l, v := range xs {
			weights[l] = avX + abs32(v)
		}
		scales[j], mins[j] = makeQKX2Quants(15, xs, weights[:], L[32*j:32*j+32], Laux[:32], -1, 0.1, 20)
		if scales[j] > maxScale {
			maxScale = scales[j]
		}
		if mins[j] > maxMin {
			maxMin = mins[j]
		}
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	s := y[4:16]
	for j := 0; j < 8; j++ {
		// ggml stores nearest_int's result in a uint8_t before clamping to 63.
		ls := min(63, uint8(nearestInt(float32(invScale*scales[j]))))
		lm := min(63, uint8(nearestInt(float32(invMin*mins[j]))))
		if j < 4 {
			s[j] = ls
			s[j+4] = lm
		} else {
			s[j+4] = ls&0xf | (lm&0xf)<<4
			s[j-4] |= (ls >> 4) << 6
			s[j] |= (lm >> 4) << 6
		}
	}
	putF16(y, 0, maxScale/63)
	putF16(y, 2, maxMin/63)
	d, dmin := F16ToF32(le16(y, 0)), F16ToF32(le16(y, 2))
	for j := 0; j < 8; j++ {
		sc, m := q4KScaleMin(s, j)
		dj := d * float32(sc)
		if dj == 0 {
			continue // ggml keeps the first-pass quants of this sub-block
		}
		dm := dmin * float32(m)
		for i := 0; i < 32; i++ {
			L[32*j+i] = uint8(max(0, min(15, nearestInt((x[32*j+i]+dm)/dj))))
		}
	}
	qs := y[16:144]
	for c := 0; c < 4; c++ {
		for l := 0; l < 32; l++ {
			qs[32*c+l] = L[64*c+l] | L[64*c+32+l]<<4
		}
	}
}

// quantizeQ6_K is quantize_row_q6_K_ref for one 256-element block.
func quantizeQ6_K(x []float32, y []byte) {
	var L [256]int8
	var scales [16]float32
	var maxScale, maxAbsScale float32
	for ib := 0; ib < 16; ib++ {
		scale := makeQXQuants(32, x[16*ib:16*ib+16], L[16*ib:16*ib+16])
		scales[ib] = scale
		if a := abs32(scale); a > maxAbsScale {
			maxAbsScale, maxScale = a, scale
		}
	}
	if maxAbsScale < groupMaxEps {
		return // all-zero block (Quantize cleared it; d = +0)
	}
	iscale := -128 / maxScale
	putF16(y, 208, 1/iscale)
	for ib := 0; ib < 16; ib++ {
		y[192+ib] = byte(int8(min(127, nearestInt(float32(iscale*scales[ib])))))
	}
	d := F16ToF32(le16(y, 208))
	for j := 0; j < 16; j++ {
		dj := d * float32(int8(y[192+j]))
		if dj == 0 {
			continue // ggml keeps the first-pass quants of this sub-block
		}
		for i := 0; i < 16; i++ {
			l := max(-32, min(31, nearestInt(x[16*j+i]/dj)))
			L[16*j+i] = int8(l + 32)
		}
	}
	for n := 0; n < 2; n++ {
		ql := y[64*n : 64*n+64]
		qh := y[128+32*n : 128+32*n+32]
		Ln := L[128*n : 128*n+128]
		for l := 0; l < 32; l++ {
			q1, q2, q3, q4 := uint8(Ln[l]), uint8(Ln[l+32]), uint8(Ln[l+64]), uint8(Ln[l+96])
			ql[l] = q1&0xf | (q3&0xf)<<4
			ql[l+32] = q2&0xf | (q4&0xf)<<4
			qh[l] = q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6
		}
	}
}
