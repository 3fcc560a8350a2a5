package parity

import (
	"math"
	"reflect"
	"testing"

	"github.com/strata-hip/strata/kernels/abi"
)

// Host-side properties of the model-op references (no GPU): the state-carrying stages give
// the same result across call boundaries, and the prefill (chunked) form hands the decode
// (recurrent) form the same state.

// TestDeltaNetPrefillThenDecode: chunked prefill of 100 tokens, then 10 recurrent decode
// steps from the state it leaves, equals one recurrent pass over 110 tokens (outputs of
// every token and the final state); and the conv over 100 then 10 tokens, carrying the
// 3-input state, equals the conv over 110.
func TestDeltaNetPrefillThenDecode(t *testing.T) {
	seed := runSeed(t)
	rng := caseRNG(seed, t.Name())
	s := gdnShape{T: 110, nk: 2, nv: 4, dk: 128, dv: 128, state0: 1}
	in := gdnDraw(rng, s)
	C := s.channels()

	whole, wholeState, _ := gdnConvRef(in.x, in.convW, in.conv0, 110, C)
	a, mid, _ := gdnConvRef(in.x[:100*C], in.convW, in.conv0, 100, C)
	b, end, _ := gdnConvRef(in.x[100*C:], in.convW, mid, 10, C)
	got := append(a, b...)
	for i := range whole {
		if got[i] != whole[i] {
			t.Fatalf("seed %d: conv output %d: split calls %v, one call %v", seed, i, got[i], whole[i])
		}
	}
	for i := range wholeState {
		if end[i] != wholeState[i] {
			t.Fatalf("seed %d: conv state %d: split calls %v, one call %v", seed, i, end[i], wholeState[i])
		}
	}

	for h := 0; h < s.nv; h++ {
		p := gdnPrepare(in, s, h)
		S1 := moF64s(in.state0[h*s.dk*s.dv : (h+1)*s.dk*s.dv])
		S2 := append([]float64(nil), S1...)
		o1, M := deltaRecurrent(p, S1, s.dk, s.dv, 0, 110)
		o2 := deltaChunked(p, S2, s.dk, s.dv, 0, 100, 64) // two chunks, the second ragged
		o3, _ := deltaRecurrent(p, S2, s.dk, s.dv, 100, 110)
		o2 = append(o2, o3...)
		for tok := range o1 {
			if err := moCloseRel(o2[tok], o1[tok], M, 1e-9); err != nil {
				t.Fatalf("seed %d: head %d token %d: %v", seed, h, tok, err)
			}
		}
		if err := moCloseRel(S2, S1, M, 1e-9); err != nil {
			t.Fatalf("seed %d: head %d final state: %v", seed, h, err)
		}
	}
}

// TestDeltaNetChunkedCatchesAWrongGate: the chunked/recurrent comparison is sensitive: the
// last token's decay (set to 0.5) off by 1e-6 relative moves the final state by ~5e-7 of
// its size, far past the 1e-9 tolerance the equality tests use.
func TestDeltaNetChunkedCatchesAWrongGate(t *testing.T) {
	rng := caseRNG(runSeed(t), t.Name())
	s := gdnShape{T: 40, nk: 1, nv: 1, dk: 64, dv: 64, state0: 1}
	in := gdnDraw(rng, s)
	p := gdnPrepare(in, s, 0)
	p.decay[s.T-1] = 0.5
	S1 := moF64s(in.state0)
	S2 := append([]float64(nil), S1...)
	deltaRecurrent(p, S1, s.dk, s.dv, 0, s.T)
	p.decay = append([]float64(nil), p.decay...)
	p.decay[s.T-1] *= 1 + 1e-6
	deltaChunked(p, S2, s.dk, s.dv, 0, s.T, 16)
	if moCloseRel(S2, S1, maxAbs(S1), 1e-9) == nil {
		t.Fatal("a perturbed decay went unnoticed")
	}
}

// TestAttentionSplitsAreIrrelevant: the float64 split-and-merge computation gives the naive
// softmax for any split length, including one position per split and one split in all.
func TestAttentionSplitsAreIrrelevant(t *testing.T) {
	rng := caseRNG(runSeed(t), t.Name())
	s := attentionCase{n: 301, nh: 4, nkv: 2, hd: 64, gate: 1, qmag: 3}
	a := attentionInputs(rng, s, false)
	want, scale := attentionRef(a, s)
	for _, sl := range []int{1, 7, 64, 301, 1000} {
		got := attentionOnline(a, s, sl, false)
		r := CompareRows(got, want, s.hd, func(row int) float64 { return scale[row] })
		if r.MaxRowRel > 1e-12 || r.NonFinite > 0 {
			t.Fatalf("split_len %d: %s", sl, r.Worst)
		}
	}
}

// TestModelOpCasesKeepContracts: every case stays inside its kernel's documented
// preconditions (a case outside them would prove nothing about the contract).
func TestModelOpCasesKeepContracts(t *testing.T) {
	for _, f := range Families() {
		for _, c := range f.Cases {
			var bad bool
			switch f.Name {
			case "attention_decode":
				s := attentionShape(c)
				sl := s.splitLen()
				bad = s.n < 1 || s.nh%s.nkv != 0 || (s.hd != 64 && s.hd != 128 && s.hd != 256) ||
					sl < 1 || sl > 1024 || (s.n+sl-1)/sl > 256
			case "attention_prefill":
				s := prefillCase(c)
				bad = s.t < 1 || s.t > s.n || s.n > 4096 || s.nh%s.nkv != 0 || (s.hd != 64 && s.hd != 128 && s.hd != 256)
			case "gated_delta_net":
				s := gdnCase(c)
				bad = s.dk > 128 || s.dk%4 != 0 || s.dv > 128 || s.nv%s.nk != 0 || s.T1 >= s.T
			case "rmsnorm", "rmsnorm_row":
				bad = c.Dims[2]%32 != 0 || c.Dims[4] < c.Dims[2] && c.Dims[1] > 1
			case "rope":
				bad = c.Dims[3]%2 != 0 || c.Dims[3] > c.Dims[2] || c.Dims[6] > 1<<24
			case "embed":
				bad = c.Dims[1]%32 != 0 || c.Dims[3] < c.Dims[1]
			}
			if bad {
				t.Errorf("%s/%s breaks the kernel's preconditions: %v", f.Name, c.Name, c.Dims)
			}
		}
	}
}

// TestRoPEFrequencies: the host table is the CPU engine's formula (a spot check of its
// float32 roundings) and decreases from 1.
func TestRoPEFrequencies(t *testing.T) {
	f := ropeFreqs(64, 1e7)
	if f[0] != 1 {
		t.Fatalf("freq[0] = %v, want 1", f[0])
	}
	want := float32(1 / math.Pow(1e7, float64(float32(2*5)/float32(64))))
	if f[5] != want {
		t.Fatalf("freq[5] = %v, want %v", f[5], want)
	}
	for i := 1; i < len(f); i++ {
		if !(f[i] < f[i-1]) {
			t.Fatalf("freq[%d] = %v not below freq[%d] = %v", i, f[i], i-1, f[i-1])
		}
	}
}

// TestSampleExp: the float64 exp the topk kernel uses (sample.tmpl's sample_exp, restated
// operation for operation) is within 2 ulp of math.Exp over the softmax range, so the
// kernel's probabilities match the CPU sampler's to ~1e-15.
func TestSampleExp(t *testing.T) {
	exp := func(x float64) float64 {
		if x < -745 {
			return 0
		}
		k := math.RoundToEven(x * 1.44269504088896338700)
		r := (x - k*6.93147180369123816490e-01) - k*1.90821492927058770002e-10
		tt := 1.0
		for i := 13; i >= 1; i-- {
			tt = 1 + tt*r/float64(i)
		}
		k1 := int64(k) / 2
		k2 := int64(k) - k1
		return tt * math.Float64frombits(uint64(k1+1023)<<52) * math.Float64frombits(uint64(k2+1023)<<52)
	}
	rng := caseRNG(runSeed(t), t.Name())
	for i := 0; i < 200000; i++ {
		x := -math.Pow(10, -6+9*rng.Float64())
		if x < -700 {
			continue
		}
		got, want := exp(x), math.Exp(x)
		if d := math.Abs(got-want) / want; d > 4.5e-16 {
			t.Fatalf("exp(%.17g) = %.17g, math.Exp %.17g: %.3g relative", x, got, want, d)
		}
	}
	if exp(0) != 1 {
		t.Fatalf("exp(0) = %v", exp(0))
	}
}

// TestRoPESinCosScheme: the rope kernel's sine and cosine (rope.tmpl's rope_sincos: f64
// reduction by π/2, f32 Cephes polynomials), restated in float32 without fused
// multiply-adds (the GPU may fuse, which only removes roundings), stay within the 1.7e-7
// the rope/neox/x derivation assumes, for every angle a position < 2¹⁸ can produce.
func TestRoPESinCosScheme(t *testing.T) {
	sincos := func(a float32) (float32, float32) {
		ad := float64(a)
		k := math.RoundToEven(ad * 0.636619772367581343076)
		r := float32(ad - k*1.57079632679489661923)
		r2 := r * r
		sn := r + r*r2*(-1.6666654611e-1+r2*(8.3321608736e-3+r2*-1.9515295891e-4))
		cs := 1 - 0.5*r2 + r2*r2*(4.166664568298827e-2+r2*(-1.388731625493765e-3+r2*2.443315711809948e-5))
		switch int64(k) & 3 {
		case 0:
			return sn, cs
		case 1:
			return cs, -sn
		case 2:
			return -sn, -cs
		}
		return -cs, sn
	}
	rng := caseRNG(runSeed(t), t.Name())
	var worst float64
	for i := 0; i < 300000; i++ {
		a := float32(rng.Int32N(1<<18)) * float32(math.Pow(1e7, -rng.Float64())) // pos · freq
		s, c := sincos(a)
		ws, wc := math.Sin(float64(a)), math.Cos(float64(a))
		worst = max(worst, math.Abs(float64(s)-ws), math.Abs(float64(c)-wc))
	}
	if worst > 1.7e-7 {
		t.Fatalf("sin/cos error %.3g > 1.7e-7", worst)
	}
	t.Logf("worst |Δsin|, |Δcos|: %.3g", worst)
}

// TestDeltaNetChunkKernelsAlgorithm: the chunk and scan kernels' data flow (gated_delta_net
// .tmpl: the workspace Kg, Qg, Kd, A, B, e^(G_L) per 16-token chunk with zero rows past the
// tokens, then per chunk u by forward substitution, o, and the state update), restated in
// float64, equals the recurrence for ragged lengths, across two calls, with saturating gates.
func TestDeltaNetChunkKernelsAlgorithm(t *testing.T) {
	rng := caseRNG(runSeed(t), t.Name())
	for _, s := range []gdnShape{
		{T: 37, nk: 1, nv: 2, dk: 128, dv: 128, state0: 1},
		{T: 40, T1: 23, nk: 2, nv: 4, dk: 64, dv: 96, state0: 1},
		{T: 33, nk: 1, nv: 2, dk: 128, dv: 128, sat: 1, state0: 1},
	} {
		in := gdnDraw(rng, s)
		for h := 0; h < s.nv; h++ {
			p := gdnPrepare(in, s, h)
			S1 := moF64s(in.state0[h*s.dk*s.dv : (h+1)*s.dk*s.dv])
			S2 := append([]float64(nil), S1...)
			o1, M := deltaRecurrent(p, S1, s.dk, s.dv, 0, s.T)
			calls := [][2]int{{0, s.T}}
			if s.T1 > 0 {
				calls = [][2]int{{0, s.T1}, {s.T1, s.T}}
			}
			var o2 [][]float64
			for _, cl := range calls {
				o2 = append(o2, chunkKernelsEmu(p, S2, s.dk, s.dv, cl[0], cl[1])...)
			}
			for tok := range o1 {
				if err := moCloseRel(o2[tok], o1[tok], M, 1e-9); err != nil {
					t.Fatalf("%+v head %d token %d: %v", s, h, tok, err)
				}
			}
			if err := moCloseRel(S2, S1, M, 1e-9); err != nil {
				t.Fatalf("%+v head %d state: %v", s, h, err)
			}
		}
	}
}

// chunkKernelsEmu runs tokens [t0, t1) of one head through the chunk and scan kernels'
// arithmetic in float64 (rows 128 wide, zeros past dk and past the chunk's tokens).
func chunkKernelsEmu(p gdnHead, S []float64, dk, dv, t0, t1 int) [][]float64 {
	var out [][]float64
	T := t1 - t0
	for c := 0; c < (T+15)/16; c++ {
		nct := min(16, T-16*c)
		var q, k [16][128]float64
		var gl, beta, G [16]float64
		for w := 0; w < nct; w++ {
			tok := t0 + 16*c + w
			copy(q[w][:], p.q[tok])
			copy(k[w][:], p.k[tok])
			gl[w] = math.Log(p.decay[tok])
			beta[w] = p.beta[tok]
		}
		var acc float64
		for w := 0; w < 16; w++ {
			acc += gl[w]
			G[w] = acc
		}
		dot := func(a, b [128]float64) float64 {
			var d float64
			for i := range a {
				d += a[i] * b[i]
			}
			return d
		}
		var A, B [16][16]float64
		var Kg, Qg, Kd [16][128]float64
		for tt := 0; tt < 16; tt++ {
			for s := 0; s < 16; s++ {
				if s < tt && tt < nct {
					A[tt][s] = math.Exp(G[tt]-G[s]) * beta[s] * dot(k[tt], k[s])
				}
				if s <= tt && tt < nct {
					B[tt][s] = math.Exp(G[tt]-G[s]) * beta[s] * dot(q[tt], k[s])
				}
			}
		}
		GL := G[nct-1]
		for tt := 0; tt < 16; tt++ {
			for i := 0; i < 128; i++ {
				Kg[tt][i] = math.Exp(G[tt]) * k[tt][i]
				Qg[tt][i] = math.Exp(G[tt]) * q[tt][i]
				Kd[tt][i] = math.Exp(GL-G[tt]) * beta[tt] * k[tt][i]
			}
		}
		// scan
		u := make([][]float64, 16)
		for tt := 0; tt < 16; tt++ {
			u[tt] = make([]float64, dv)
			for j := 0; j < dv; j++ {
				var ks float64
				for i := 0; i < dk; i++ {
					ks += Kg[tt][i] * S[i*dv+j]
				}
				var v float64
				if tt < nct {
					v = p.v[t0+16*c+tt][j]
				}
				x := v - ks
				for s := 0; s < tt; s++ {
					x -= A[tt][s] * u[s][j]
				}
				u[tt][j] = x
			}
		}
		for tt := 0; tt < nct; tt++ {
			o := make([]float64, dv)
			for j := 0; j < dv; j++ {
				var x float64
				for i := 0; i < dk; i++ {
					x += Qg[tt][i] * S[i*dv+j]
				}
				for s := 0; s <= tt; s++ {
					x += B[tt][s] * u[s][j]
				}
				o[j] = x
			}
			out = append(out, o)
		}
		eGL := math.Exp(GL)
		for i := 0; i < dk; i++ {
			for j := 0; j < dv; j++ {
				x := S[i*dv+j] * eGL
				for tt := 0; tt < 16; tt++ {
					x += Kd[tt][i] * u[tt][j]
				}
				S[i*dv+j] = x
			}
		}
	}
	return out
}

// TestRMSNormRowArgs: rmsnorm_row's runs pack rmsnorm's argument struct, which holds only
// while the two declare the same fields in the same order.
func TestRMSNormRowArgs(t *testing.T) {
	a, b := reflect.TypeOf(abi.RmsnormArgs{}), reflect.TypeOf(abi.RmsnormRowArgs{})
	if a.Size() != b.Size() || a.NumField() != b.NumField() {
		t.Fatalf("rmsnorm args %d bytes/%d fields, rmsnorm_row %d/%d", a.Size(), a.NumField(), b.Size(), b.NumField())
	}
	for i := 0; i < a.NumField(); i++ {
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name != fb.Name || fa.Offset != fb.Offset || fa.Type != fb.Type {
			t.Errorf("field %d: rmsnorm %s@%d %s, rmsnorm_row %s@%d %s", i, fa.Name, fa.Offset, fa.Type, fb.Name, fb.Offset, fb.Type)
		}
	}
}
