package parity

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/quant"
	"github.com/strata-hip/strata/runtime/gpu"
)

// gated_delta_net: model/forward.go's deltaNet after its projections, restated in float64:
//
//	conv:      xc[t][ch] = silu(Σ_{j<4} w[ch][j]·in(t−3+j, ch)), the inputs before the call
//	           coming from the conv state; the new state is the last 3 inputs.
//	recurrent: per value head, token by token: q, k L2-normalised (eps 1e-6 inside the
//	           root), q/√dk; decay = exp(ssm_a·softplus(a + dt_bias)), β = sigmoid(b);
//	           S ← decay·S; u = v − Sᵀk; S ← S + β·k⊗u; o = Sᵀq; y = rmsnorm(o)·w·silu(z)
//	           (recurrentsig: ·sigmoid(z), qwen4exp's gate).
//
// deltaChunked is the chunked (prefill) form of the same recurrence, solved per chunk as a
// triangular system; gated_delta_net_test.go holds it equal to the recurrent form, and the
// split-call property (prefill 100 + decode 10 = prefill 110) for both stages.
var (
	gdnConvXC = Bound{Name: "xc", MaxRowRel: 4e-6, Why: `
		Per token row, |xc − xc₆₄| against max over channels of A = Σ_j |w_j·in_j| (inputs are
		clipped so A ≤ 16). The 4-term f32 sum (fused or not): ≤ 4·2⁻²⁴·A. silu(x) =
		x/(1 + e^(−x)): expf ≤ 2⁻²² + |x|·2⁻²⁴ relative (exp2 ≤ 2 ulp, x·log₂e one rounding),
		1 + e and the division 2 more, x·σ one: ≤ |x|·(2⁻²² + (|x| + 3)·2⁻²⁴), |x| ≤ A; at
		A = 16 that is (4 + 19)·2⁻²⁴ = 1.4e-6 of A; the sum's error passes through silu'
		≤ 1.1: 4.4·2⁻²⁴. Total ≤ (4.4 + 4 + 19)·2⁻²⁴ = 1.7e-6 of A: bound 4e-6.`}
	gdnConvState = Bound{Name: "conv_state", Exact: true, Why: `
		The new conv state is a copy of the last 3 inputs (from x or from the old state):
		no arithmetic.`}
	gdnState = Bound{Name: "state", MaxRowRel: 3e-5, Why: `
		Per value head, |S − S₆₄| of the final state against M·√T, M = the head's max |S| over
		the call. One token: decay·S one rounding; mem = Σ S_i·k_i over dk/4 ≤ 32 fused terms
		per thread and a 4-term LDS sum: ≤ 35·2⁻²⁴·Σ|S_i k_i| ≤ 35·2⁻²⁴·√dk·M (‖k‖₂ = 1); S +=
		k_i·β·(v − mem) passes that on times |k_i| ≤ 1, plus 2 roundings: per token ≤
		(35·√128 + 3)·2⁻²⁴·M = 2.4e-5·M worst case. The step is a contraction (decay ≤ 1,
		‖I − βkkᵀ‖ ≤ 1), so errors never grow; the roundings of different tokens are
		independent, so they add as a random walk: ≤ 2.4e-5·√T·M. Gate errors (decay
		relative ≤ 2⁻²² + |g|·2⁻²⁴) on a contribution that survives decays Πd = e^(−x) sum
		to ≤ x·e^(−x)·2⁻²⁴·few ≤ 2⁻²⁴ of it. Bound 3e-5.`}
	gdnOut = Bound{Name: "out", MaxRowRel: 4e-5, Why: `
		Per (token, head), y = o·inv·w·act(z) with inv = 1/sqrt(mean o² + eps), act = silu
		(recurrent) or sigmoid (recurrentsig). |Δo_j| ≤
		max|ΔS|·‖q‖₁ + 35·2⁻²⁴·Σ|S_ij q_i| ≤ (2.4e-5·√T + 2.1e-6)·M (‖q‖₁ ≤ √dk·‖q‖₂ = 1);
		through the norm, |Δy_j| ≤ |w_j act z_j|·inv·(|Δo_j| + |o_j|·Δrms/rms) ≤
		|w act z|·(1 + √dv)·inv·max|Δo|; the norm's and the gate's own roundings (≤ 5·2⁻²⁴
		+ 2⁻²² + |z|·2⁻²⁴, |z| ≤ 8) are ≤ 1e-6 of |y|. So with the row scale
		max|w·act z|·(1 + √dv)·inv₆₄·M·√T + max|y₆₄|: ≤ 2.4e-5 + 2.1e-6 + 1e-6 ≤ 4e-5.`}
)

// The chunked form (stages chunk then scan, 16-token chunks: deltaChunked's algorithm):
// data-dependent scale with U = max|u| over the call (u = v − mem, the deltas before β).
var (
	gdnChunkState = Bound{Name: "state", MaxRowRel: 6e-4, Why: `
		Per value head, |S − S₆₄| of the final state against (M + U)·√T (M the head's max |S|,
		U its max |u_t| = |v_t − mem_t| over the call). Per token, mem_t = (Kg S₀)_t + Σ_{s<t}
		A_ts·u_s: the first a 128-term sum (32 fused per thread, 4-way LDS): ≤ 35·2⁻²⁴·√dk·M;
		the second ≤ 16 terms with |A_ts| ≤ 1 (e^(G_t−G_s) ≤ 1, β ≤ 1, |k̂_t·k̂_s| ≤ 1) and A's
		own error ≤ (128 + 4)·2⁻²⁴ + x·e^(−x)·2⁻²⁴ ≤ 133·2⁻²⁴ absolute (its 128-term dot, exp,
		products; x = G_s − G_t): ≤ (16 + 133)·2⁻²⁴·16·U. So ≤ 2⁻²⁴·(396·M + 2384·U) per
		token; the chunk's state update S_L = e^(G_L)·S₀ + Σ_t Kd_t ⊗ u_t adds ≤ 17·2⁻²⁴·(M +
		16·U). Per 16-token chunk ≤ 2⁻²⁴·(6350·M + 38700·U) ≤ 2.3e-3·(M + U); the update is
		the recurrence's (a contraction), chunks' roundings independent: ×√(T/16) = √T/4:
		≤ 5.8e-4·(M + U)·√T. Bound 6e-4.`}
	gdnChunkOut = Bound{Name: "out", MaxRowRel: 8e-4, Why: `
		As recurrent/out with (M + U) for M: o_t = (Qg S₀)_t + Σ_{s≤t} B_ts·u_s errs ≤
		2⁻²⁴·(396·M + 2384·U) ≤ 1.5e-4·(M + U) by the chunk/state derivation's terms (B as A),
		plus the carried state error ≤ 5.8e-4·(M + U)·√T; through the gated norm with the row
		scale max|w·silu z|·(1 + √dv)·inv₆₄·(M + U)·√T + max|y₆₄|: ≤ 5.8e-4 + 1.5e-4 + 1e-6
		≤ 8e-4.`}
)

// The split prefill form (stage recsplit, then gnorm or gnormsig): the same f32 operations
// as recurrent in the same order, so besides recurrent's bounds its outputs must equal the
// recurrent kernel's bits, run on the same inputs in the same sequence.
var gdnBits = Bound{Name: "bits", Exact: true, Why: `
		recsplit's thread (g, lane) of block (h, cs) holds the rows and the column that
		recurrent's thread (g, 32·cs + lane) holds and runs the same statements on them: S·decay,
		mem += S·k over its dk/4 rows in order, the 4-group sum in order, δ = (v − mem)·β, S +=
		k·δ, o += S·q, the 4-group sum of o in order; q, k and the gates come from the same
		expressions of the same inputs (recurrent's code, moved to other warps). gnorm(sig) is
		recurrent's gated norm on o read back from memory (an f32 store and load are exact):
		a butterfly per 32 columns, the 4 wave sums in order, the same products. The one
		freedom the compiler has, contracting a sum of two products either way, occurs
		once: x0² + x1² of a lane's q or k (the other sums add one product to a sum; S·decay
		+ k·δ has S·decay from the previous step in recsplit and was fused as fma(k, δ,
		S·decay) in recurrent's sm_90 code); gdn_sumsq4 writes recurrent's choice out
		(fma(x0, x0, x1·x1)) for both, after H200 call 1 of gdn-s8 measured 1–8 ulp
		differences from the other choice. So the final state and every output (state
		first, then out, one report) must be bitwise recurrent's (recurrentsig's for
		gnormsig).`}

// recurrentq: recurrent that also writes each out row as Q8_1 blocks.
var (
	gdnQBits = Bound{Name: "bits", Exact: true, Why: `
		recurrentq is recurrent's template instance with one addition after each out store:
		the wave's 32 stored values go through quantize_q8_1's statements into oq. Nothing
		computed before the store changes (the same statements in the same order; the out
		value is a product of products, with no sum the compiler could contract another
		way), so the final state and every output (state first, then out, one report) must
		be bitwise recurrent's, run on copies of the same inputs.`}
	gdnOq = Bound{Name: "oq", Exact: true, Why: `
		The Q8_1 blocks must equal quant.QuantizeQ8_1GPU applied to the kernel's own f32
		out (the values it also stores; dv a multiple of 32, so a head's row is whole
		blocks and the t·nv rows one flat array): the same butterfly order, f32 division,
		roundf and fp16 RNE as quantize_q8_1, whose bytes are exact
		(quantize_q8_1/f32/bytes). How far out is from float64 is the out check's
		business.`}
)

// gdnShape is one case: Dims T, T1 (tokens of a first call; 0 = one call), nk, nv, dk,
// dv, gates (0 drawn, 1 saturating at 0 and 1), state0 (0 zeros, 1 drawn).
type gdnShape struct{ T, T1, nk, nv, dk, dv, sat, state0 int }

func gdnCase(c Case) gdnShape {
	d := c.Dims
	return gdnShape{d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]}
}

func (s gdnShape) channels() int { return 2*s.nk*s.dk + s.nv*s.dv }

func init() {
	register(&Family{
		Name: "gated_delta_net",
		Bounds: map[string][]Bound{
			"conv":      {gdnConvXC, gdnConvState},
			"recurrent": {gdnState, gdnOut}, "recurrentsig": {gdnState, gdnOut},
			"chunk": {gdnChunkState, gdnChunkOut}, "scan": {gdnChunkState, gdnChunkOut},
			"recsplit": {gdnState, gdnOut, gdnBits}, "gnorm": {gdnState, gdnOut, gdnBits}, "gnormsig": {gdnState, gdnOut, gdnBits},
			"recurrentq": {gdnState, gdnOut, gdnQBits, gdnOq},
		},
		Applies: gdnApplies,
		Cases: []Case{
			{"decode,t=1,nk=16,nv=32,d=128", []int{1, 0, 16, 32, 128, 128, 0, 1}},
			{"t=7,nk=2,nv=4,d=128", []int{7, 0, 2, 4, 128, 128, 0, 0}},
			{"t=110,nk=2,nv=4,d=128", []int{110, 0, 2, 4, 128, 128, 0, 1}},
			{"t=100+10,nk=2,nv=4,d=128", []int{110, 100, 2, 4, 128, 128, 0, 1}},
			{"t=1+1,nk=2,nv=4,d=128", []int{2, 1, 2, 4, 128, 128, 0, 1}},
			{"t=33,saturating,nk=2,nv=4,d=128", []int{33, 0, 2, 4, 128, 128, 1, 1}},
			{"t=5,nk=1,nv=2,dk=64,dv=96", []int{5, 0, 1, 2, 64, 96, 0, 1}},
			{"prefill,t=4096,nk=16,nv=32,d=128", []int{4096, 0, 16, 32, 128, 128, 0, 0}},
			// The engine's chunk of the 80B (recurrent and the split form only: gdnApplies).
			{"prefill,t=512,nk=16,nv=32,d=128", []int{512, 0, 16, 32, 128, 128, 0, 1}},
			{"t=17,nk=1,nv=2,dk=64,dv=96", []int{17, 0, 1, 2, 64, 96, 0, 1}},
			// One block per value head: the time per token is the same for any nv up to
			// the number of compute units, so the long prefill uses few heads.
			{"prefill,t=32768,nk=2,nv=4,d=128", []int{32768, 0, 2, 4, 128, 128, 0, 0}},
		},
		Run:       runGatedDeltaNet,
		SelfCheck: selfCheckGatedDeltaNet,
	})
}

// gdnApplies: the 512-token case runs on recurrent, recsplit and gnormsig only (the others'
// prefill is covered at 4096); gnorm, whose launches are recsplit's with the same silu
// gate, runs the cases of at most 4096 (token, head) rows, and the 32768-token case stays
// with the older variants (it times the long walk).
func gdnApplies(variant string, c Case) bool {
	s := gdnCase(c)
	switch variant {
	case "gnorm":
		return s.T*s.nv <= 4096
	case "recsplit", "gnormsig":
		return s.T <= 4096
	case "recurrent":
		return true
	case "recurrentq": // a decode kernel: the cases up to 512 tokens
		return s.T <= 512 && s.dv%32 == 0
	}
	return s.T != 512
}

// gdnInputs is one draw of everything both stages read.
type gdnInputs struct {
	x, convW, conv0 []float32 // conv: raw inputs t × c, weights c × 4, state 3 × c
	xc, z, ba       []float32 // recurrent: conv outputs t × c, gate t × nv·dv, t × 2nv
	ssmA, dtBias    []float32
	state0, normW   []float32
}

func moClip(v, lim float64) float32 { return float32(max(-lim, min(lim, v))) }

func gdnDraw(rng *rand.Rand, s gdnShape) gdnInputs {
	C := s.channels()
	var in gdnInputs
	normal := func(n int, sd, lim float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = moClip(rng.NormFloat64()*sd, lim)
		}
		return v
	}
	in.x = normal(s.T*C, 1, 4)
	in.convW = normal(C*4, 0.5, 1)
	in.conv0 = normal(3*C, 1, 4)
	in.xc = normal(s.T*C, 1, 6)
	in.z = normal(s.T*s.nv*s.dv, 1.5, 8)
	in.ba = normal(s.T*2*s.nv, 2, 20)
	if s.sat == 1 {
		// Alternate per token and head: decay → 0 (a = 30) or → 1 (a = −30), β → 1 or 0.
		for t := 0; t < s.T; t++ {
			for i := 0; i < 2*s.nv; i++ {
				sign := float32(1)
				if (t+i)%2 == 1 {
					sign = -1
				}
				in.ba[t*2*s.nv+i] = 30 * sign
			}
		}
	}
	in.ssmA = make([]float32, s.nv)
	in.dtBias = make([]float32, s.nv)
	for h := range in.ssmA {
		in.ssmA[h] = -float32(math.Exp(-2 + 3*rng.Float64()))
		in.dtBias[h] = float32(2*rng.Float64() - 1)
	}
	in.state0 = make([]float32, s.nv*s.dk*s.dv)
	if s.state0 == 1 {
		for i := range in.state0 {
			in.state0[i] = float32(rng.NormFloat64() * 0.3)
		}
	}
	in.normW = normal(s.dv, 0.3, 1)
	for i := range in.normW {
		in.normW[i] += 1
	}
	return in
}

// gdnConvRef is the float64 conv over T tokens: xc (t × c), the new state (f32 copies)
// and each token row's scale max_ch Σ_j |w·in|.
func gdnConvRef(x, w, st []float32, T, C int) (xc []float64, next []float32, scale []float64) {
	in := func(t, ch int) float32 {
		if t >= 0 {
			return x[t*C+ch]
		}
		return st[(3+t)*C+ch]
	}
	xc = make([]float64, T*C)
	scale = make([]float64, T)
	for t := 0; t < T; t++ {
		for ch := 0; ch < C; ch++ {
			var sum, abs float64
			for j := 0; j < 4; j++ {
				p := float64(w[ch*4+j]) * float64(in(t-3+j, ch))
				sum += p
				abs += math.Abs(p)
			}
			xc[t*C+ch] = silu64(sum)
			scale[t] = max(scale[t], abs)
		}
	}
	next = make([]float32, 3*C)
	for r := 0; r < 3; r++ {
		for ch := 0; ch < C; ch++ {
			next[r*C+ch] = in(T-3+r, ch)
		}
	}
	return xc, next, scale
}

// gdnHead is one value head's per-token inputs, prepared (normalised q, k; gates) in
// float64 from the f32 inputs.
type gdnHead struct {
	q, k, v     [][]float64
	decay, beta []float64
}

func gdnPrepare(in gdnInputs, s gdnShape, h int) gdnHead {
	C := s.channels()
	r := s.nv / s.nk
	kh, idx := h/r, h%r
	var p gdnHead
	l2 := func(x []float32, extra float64) []float64 {
		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		inv := 1 / math.Sqrt(ss+1e-6) * extra
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = float64(v) * inv
		}
		return out
	}
	for t := 0; t < s.T; t++ {
		row := in.xc[t*C:]
		p.q = append(p.q, l2(row[kh*s.dk:(kh+1)*s.dk], 1/math.Sqrt(float64(s.dk))))
		p.k = append(p.k, l2(row[s.nk*s.dk+kh*s.dk:s.nk*s.dk+(kh+1)*s.dk], 1))
		p.v = append(p.v, moF64s(row[2*s.nk*s.dk+h*s.dv:2*s.nk*s.dk+(h+1)*s.dv]))
		ba := in.ba[t*2*s.nv+kh*2*r:]
		b, a := float64(ba[idx]), float64(ba[r+idx])
		p.decay = append(p.decay, math.Exp(float64(in.ssmA[h])*softplus64(a+float64(in.dtBias[h]))))
		p.beta = append(p.beta, sigmoid64(b))
	}
	return p
}

// deltaRecurrent runs tokens [t0, t1) of one head from state S (dk × dv, updated in
// place) and returns o (pre-norm, per token dv values) and the max |S| seen.
func deltaRecurrent(p gdnHead, S []float64, dk, dv, t0, t1 int) (o [][]float64, maxS float64) {
	o, maxS, _ = deltaRecurrentU(p, S, dk, dv, t0, t1)
	return o, maxS
}

// deltaRecurrentU is deltaRecurrent that also returns max |u| = |v − mem| over the tokens.
func deltaRecurrentU(p gdnHead, S []float64, dk, dv, t0, t1 int) (o [][]float64, maxS, maxU float64) {
	for _, v := range S {
		maxS = max(maxS, math.Abs(v))
	}
	mem := make([]float64, dv)
	for t := t0; t < t1; t++ {
		clear(mem)
		for i := 0; i < dk; i++ {
			for j := 0; j < dv; j++ {
				S[i*dv+j] *= p.decay[t]
				mem[j] += S[i*dv+j] * p.k[t][i]
			}
		}
		for j := 0; j < dv; j++ {
			maxU = max(maxU, math.Abs(p.v[t][j]-mem[j]))
		}
		out := make([]float64, dv)
		for i := 0; i < dk; i++ {
			for j := 0; j < dv; j++ {
				S[i*dv+j] += p.k[t][i] * p.beta[t] * (p.v[t][j] - mem[j])
				out[j] += S[i*dv+j] * p.q[t][i]
				maxS = max(maxS, math.Abs(S[i*dv+j]))
			}
		}
		o = append(o, out)
	}
	return o, maxS, maxU
}

// deltaChunked is the chunked form over tokens [t0, t1), chunks of cs tokens: within a
// chunk with S₀ its start state, G_t the cumulative log decay, the deltas u solve the
// unit lower-triangular system u_t + Σ_{s<t} e^(G_t−G_s)·β_s·(k_t·k_s)·u_s =
// v_t − e^(G_t)·S₀ᵀk_t; then o_t = e^(G_t)·S₀ᵀq_t + Σ_{s≤t} e^(G_t−G_s)·β_s·(q_t·k_s)·u_s and
// S_end = e^(G_C)·S₀ + Σ_s e^(G_C−G_s)·β_s·k_s⊗u_s. Same arithmetic reordered, so it must
// agree with deltaRecurrent to float64 rounding.
func deltaChunked(p gdnHead, S []float64, dk, dv, t0, t1, cs int) [][]float64 {
	dot := func(a, b []float64) float64 {
		var s float64
		for i := range a {
			s += a[i] * b[i]
		}
		return s
	}
	var o [][]float64
	for c0 := t0; c0 < t1; c0 += cs {
		c1 := min(c0+cs, t1)
		n := c1 - c0
		G := make([]float64, n)
		var g float64
		for t := 0; t < n; t++ {
			g += math.Log(p.decay[c0+t])
			G[t] = g
		}
		// S₀ᵀk_t and S₀ᵀq_t.
		s0 := func(x []float64) []float64 {
			out := make([]float64, dv)
			for i := 0; i < dk; i++ {
				for j := 0; j < dv; j++ {
					out[j] += S[i*dv+j] * x[i]
				}
			}
			return out
		}
		u := make([][]float64, n)
		for t := 0; t < n; t++ {
			sk := s0(p.k[c0+t])
			u[t] = make([]float64, dv)
			for j := range u[t] {
				u[t][j] = p.v[c0+t][j] - math.Exp(G[t])*sk[j]
			}
			for s := 0; s < t; s++ {
				a := math.Exp(G[t]-G[s]) * p.beta[c0+s] * dot(p.k[c0+t], p.k[c0+s])
				for j := range u[t] {
					u[t][j] -= a * u[s][j]
				}
			}
		}
		for t := 0; t < n; t++ {
			sq := s0(p.q[c0+t])
			out := make([]float64, dv)
			for j := range out {
				out[j] = math.Exp(G[t]) * sq[j]
			}
			for s := 0; s <= t; s++ {
				a := math.Exp(G[t]-G[s]) * p.beta[c0+s] * dot(p.q[c0+t], p.k[c0+s])
				for j := range out {
					out[j] += a * u[s][j]
				}
			}
			o = append(o, out)
		}
		eC := math.Exp(G[n-1])
		for i := 0; i < dk; i++ {
			for j := 0; j < dv; j++ {
				v := eC * S[i*dv+j]
				for s := 0; s < n; s++ {
					v += math.Exp(G[n-1]-G[s]) * p.beta[c0+s] * p.k[c0+s][i] * u[s][j]
				}
				S[i*dv+j] = v
			}
		}
	}
	return o
}

// gdnGatedNorm is y = o/sqrt(mean o² + eps)·w·act(z) for one head's token, with inv; act
// is silu (Qwen3-Next) or, with sig, sigmoid (qwen4exp).
func gdnGatedNorm(o []float64, w, z []float32, eps float64, sig bool) (y []float64, inv float64) {
	var ss float64
	for _, v := range o {
		ss += v * v
	}
	inv = 1 / math.Sqrt(ss/float64(len(o))+eps)
	y = make([]float64, len(o))
	for j, v := range o {
		y[j] = v * inv * float64(w[j]) * gdnAct(float64(z[j]), sig)
	}
	return y, inv
}

const gdnEps = 1e-6

// gdnChunkFloats is the chunked form's workspace per (value head, 16-token chunk): Kg, Qg,
// Kd (16 × 128 each), A, B (16 × 16 each), e^(G_L) and padding.
const gdnChunkFloats = 48*128 + 516

func gdnAct(z float64, sig bool) float64 {
	if sig {
		return sigmoid64(z)
	}
	return silu64(z)
}

// gdnRecurrentRef runs the recurrent reference over all T tokens (heads in parallel):
// y (t × nv·dv), the final state, and the rows' scales for the two checks.
func gdnRecurrentRef(in gdnInputs, s gdnShape, sig bool) (y, state, yScale, sScale []float64) {
	return gdnRef(in, s, sig, false)
}

// gdnRef is gdnRecurrentRef; with chunked, the scales take M + U for M (the chunked form's
// bounds: U = max |v − mem|).
func gdnRef(in gdnInputs, s gdnShape, sig, chunked bool) (y, state, yScale, sScale []float64) {
	vd := s.nv * s.dv
	y = make([]float64, s.T*vd)
	state = moF64s(in.state0)
	yScale = make([]float64, s.T*s.nv)
	sScale = make([]float64, s.nv)
	sqrtT := math.Sqrt(float64(s.T))
	var wg sync.WaitGroup
	for h := 0; h < s.nv; h++ {
		wg.Add(1)
		go func(h int) {
			defer wg.Done()
			p := gdnPrepare(in, s, h)
			S := state[h*s.dk*s.dv : (h+1)*s.dk*s.dv]
			o, M, U := deltaRecurrentU(p, S, s.dk, s.dv, 0, s.T)
			if chunked {
				M += U
			}
			sScale[h] = M * sqrtT
			for t := 0; t < s.T; t++ {
				z := in.z[t*vd+h*s.dv : t*vd+(h+1)*s.dv]
				yy, inv := gdnGatedNorm(o[t], in.normW, z, gdnEps, sig)
				var gw, my float64
				for j := range yy {
					gw = max(gw, math.Abs(float64(in.normW[j])*gdnAct(float64(z[j]), sig)))
					my = max(my, math.Abs(yy[j]))
				}
				copy(y[t*vd+h*s.dv:], yy)
				yScale[t*s.nv+h] = gw*(1+math.Sqrt(float64(s.dv)))*inv*M*sqrtT + my
			}
		}(h)
	}
	wg.Wait()
	return y, state, yScale, sScale
}

func runGatedDeltaNet(h *Harness, symbol string, c Case, bounds []Bound, rng *rand.Rand) (Outcome, error) {
	s := gdnCase(c)
	in := gdnDraw(rng, s)
	fn, err := h.Mod.Func(symbol)
	if err != nil {
		return Outcome{}, err
	}
	C := s.channels()
	// The calls: [0, T1) and [T1, T), or one call.
	calls := [][2]int{{0, s.T}}
	if s.T1 > 0 {
		calls = [][2]int{{0, s.T1}, {s.T1, s.T}}
	}
	block := moBlock(abi.GatedDeltaNetThreads)
	if symbol == abi.SymGatedDeltaNetConv {
		xcWant, stWant, scale := gdnConvRef(in.x, in.convW, in.conv0, s.T, C)
		if m := maxAbs(scale); m > 16 {
			return Outcome{}, fmt.Errorf("inputs break the bound's precondition: Σ|w·in| = %g > 16", m)
		}
		b, err := h.moInputs(f32Bytes(in.x), f32Bytes(in.convW), f32Bytes(in.conv0))
		if err != nil {
			return Outcome{}, err
		}
		xc, err := h.Output(4 * s.T * C)
		if err != nil {
			return Outcome{}, err
		}
		// State buffers: conv0 → mid → final for two calls, conv0 → final for one.
		var ls []seqLaunch
		prev := b[2]
		var final Buf
		for _, cl := range calls {
			next, err := h.Output(4 * 3 * C)
			if err != nil {
				return Outcome{}, err
			}
			n := cl[1] - cl[0]
			a := abi.GatedDeltaNetArgs{X: b[0].Ptr() + uint64(4*cl[0]*C), ConvW: b[1].Ptr(), ConvIn: prev.Ptr(), ConvOut: next.Ptr(),
				Xc: xc.Ptr() + uint64(4*cl[0]*C), T: int32(n), C: int32(C)}
			grid := gpu.Dim3{X: uint32((C + abi.GatedDeltaNetThreads - 1) / abi.GatedDeltaNetThreads), Y: uint32(min(n, 65535)), Z: 1}
			ls = append(ls, seqLaunch{fn, grid, block, a.Bytes()})
			prev, final = next, next
		}
		outs := []Buf{xc, final}
		got, el, err := h.runSeq(ls, outs...)
		if err != nil {
			return Outcome{}, err
		}
		reports := map[string]Report{
			"xc":         CompareRows(moF64s(bytesF32(h.payload(outs, got, xc))), xcWant, C, func(r int) float64 { return scale[r] }),
			"conv_state": CompareExact(bytesF32(h.payload(outs, got, final)), stWant),
		}
		o := Outcome{Reports: reports, Kernel: el.Seconds() * 1e6, Bytes: int64(4 * C * (2*s.T + 4 + 6))}
		return o, checkAll(bounds, reports)
	}
	chunked := symbol == abi.SymGatedDeltaNetChunk || symbol == abi.SymGatedDeltaNetScan
	split := symbol == abi.SymGatedDeltaNetRecsplit || symbol == abi.SymGatedDeltaNetGnorm || symbol == abi.SymGatedDeltaNetGnormsig
	sig := symbol == abi.SymGatedDeltaNetRecurrentsig || symbol == abi.SymGatedDeltaNetGnormsig
	withQ := symbol == abi.SymGatedDeltaNetRecurrentq
	yWant, stWant, yScale, sScale := gdnRef(in, s, sig, chunked)
	b, err := h.moInputs(f32Bytes(in.xc), f32Bytes(in.z), f32Bytes(in.ba), f32Bytes(in.ssmA), f32Bytes(in.dtBias), f32Bytes(in.normW))
	if err != nil {
		return Outcome{}, err
	}
	st, err := h.InOut(f32Bytes(in.state0))
	if err != nil {
		return Outcome{}, err
	}
	vd := s.nv * s.dv
	ob, err := h.Output(4 * s.T * vd)
	if err != nil {
		return Outcome{}, err
	}
	// The chunked form: its workspace (sized for the longest call) and both stages per call.
	var ws Buf
	var chunk, scan *gpu.Func
	if chunked {
		maxT := 0
		for _, cl := range calls {
			maxT = max(maxT, cl[1]-cl[0])
		}
		if ws, err = h.Output(4 * s.nv * ((maxT + 15) / 16) * gdnChunkFloats); err != nil {
			return Outcome{}, err
		}
		if chunk, err = h.Mod.Func(abi.SymGatedDeltaNetChunk); err != nil {
			return Outcome{}, err
		}
		if scan, err = h.Mod.Func(abi.SymGatedDeltaNetScan); err != nil {
			return Outcome{}, err
		}
	}
	// The split form: recsplit then the gated norm per call, and the recurrent kernel of the
	// same gate on copies of the state and output after them (the bits check).
	var rsplit, rnorm, rrec *gpu.Func
	var st2, ob2, oq Buf
	if withQ { // recurrent on copies (the bits check) and the Q8_1 output
		if rrec, err = h.Mod.Func(abi.SymGatedDeltaNetRecurrent); err != nil {
			return Outcome{}, err
		}
		if st2, err = h.InOut(f32Bytes(in.state0)); err != nil {
			return Outcome{}, err
		}
		if ob2, err = h.Output(4 * s.T * vd); err != nil {
			return Outcome{}, err
		}
		if oq, err = h.Output(s.T * vd / 32 * 36); err != nil {
			return Outcome{}, err
		}
	}
	if split {
		if rsplit, err = h.Mod.Func(abi.SymGatedDeltaNetRecsplit); err != nil {
			return Outcome{}, err
		}
		ns, rs := abi.SymGatedDeltaNetGnorm, abi.SymGatedDeltaNetRecurrent
		if sig {
			ns, rs = abi.SymGatedDeltaNetGnormsig, abi.SymGatedDeltaNetRecurrentsig
		}
		if rnorm, err = h.Mod.Func(ns); err != nil {
			return Outcome{}, err
		}
		if rrec, err = h.Mod.Func(rs); err != nil {
			return Outcome{}, err
		}
		if st2, err = h.InOut(f32Bytes(in.state0)); err != nil {
			return Outcome{}, err
		}
		if ob2, err = h.Output(4 * s.T * vd); err != nil {
			return Outcome{}, err
		}
	}
	var ls, lr []seqLaunch
	for _, cl := range calls {
		t0 := uint64(cl[0])
		n := cl[1] - cl[0]
		a := abi.GatedDeltaNetArgs{Xc: b[0].Ptr() + 4*t0*uint64(C), Z: b[1].Ptr() + 4*t0*uint64(vd), Ba: b[2].Ptr() + 4*t0*uint64(2*s.nv),
			SsmA: b[3].Ptr(), DtBias: b[4].Ptr(), State: st.Ptr(), NormW: b[5].Ptr(), O: ob.Ptr() + 4*t0*uint64(vd),
			T: int32(n), C: int32(C), Nk: int32(s.nk), Nv: int32(s.nv), Dk: int32(s.dk), Dv: int32(s.dv), Eps: gdnEps}
		if split {
			ls = append(ls, seqLaunch{rsplit, gpu.Dim3{X: uint32(s.nv), Y: uint32((s.dv + 31) / 32), Z: 1}, block, a.Bytes()},
				seqLaunch{rnorm, gpu.Dim3{X: uint32((n*s.nv + 3) / 4), Y: 1, Z: 1}, block, a.Bytes()})
			a.State, a.O = st2.Ptr(), ob2.Ptr()+4*t0*uint64(vd)
			lr = append(lr, seqLaunch{rrec, gpu.Dim3{X: uint32(s.nv), Y: 1, Z: 1}, block, a.Bytes()})
			continue
		}
		if withQ {
			a.Oq = oq.Ptr() + t0*uint64(vd/32*36)
			ls = append(ls, seqLaunch{fn, gpu.Dim3{X: uint32(s.nv), Y: 1, Z: 1}, block, a.Bytes()})
			a.State, a.O, a.Oq = st2.Ptr(), ob2.Ptr()+4*t0*uint64(vd), 0
			lr = append(lr, seqLaunch{rrec, gpu.Dim3{X: uint32(s.nv), Y: 1, Z: 1}, block, a.Bytes()})
			continue
		}
		if !chunked {
			ls = append(ls, seqLaunch{fn, gpu.Dim3{X: uint32(s.nv), Y: 1, Z: 1}, block, a.Bytes()})
			continue
		}
		a.Ws = ws.Ptr()
		ls = append(ls, seqLaunch{chunk, gpu.Dim3{X: uint32((n + 15) / 16), Y: uint32(s.nv), Z: 1}, block, a.Bytes()},
			seqLaunch{scan, gpu.Dim3{X: uint32(s.nv), Y: 1, Z: 1}, block, a.Bytes()})
	}
	outs := []Buf{st, ob}
	if split || withQ {
		outs = append(outs, st2, ob2)
	}
	if withQ {
		outs = append(outs, oq)
	}
	// The time is the tested sequence's alone: the recurrent kernel's launches (the bits
	// check) run in the sequence after it but are timed apart.
	got, el, err := h.runSeq(append(ls, lr...), outs...)
	if err != nil {
		return Outcome{}, err
	}
	reports := map[string]Report{
		"state": CompareRows(moF64s(bytesF32(h.payload(outs, got, st))), stWant, s.dk*s.dv, func(r int) float64 { return sScale[r] }),
		"out":   CompareRows(moF64s(bytesF32(h.payload(outs, got, ob))), yWant, s.dv, func(r int) float64 { return yScale[r] }),
	}
	if split || withQ {
		bits := func(b Buf) []uint32 {
			v := bytesF32(h.payload(outs, got, b))
			u := make([]uint32, len(v))
			for i, x := range v {
				u[i] = math.Float32bits(x)
			}
			return u
		}
		reports["bits"] = CompareExact(append(bits(st), bits(ob)...), append(bits(st2), bits(ob2)...))
	}
	if withQ {
		gq := h.payload(outs, got, oq)
		wq := make([]byte, len(gq))
		if err := quant.QuantizeQ8_1GPU(bytesF32(h.payload(outs, got, ob)), wq); err != nil {
			return Outcome{}, err
		}
		reports["oq"] = CompareExact(gq, wq)
	}
	if split || withQ {
		// Time the tested sequence alone (the runSeq time above includes recurrent's).
		if _, el, err = h.runSeq(ls, st, ob); err != nil {
			return Outcome{}, err
		}
	}
	// Bytes: the activations a call must read (q, k of its key heads, v, z, b, a), the
	// output, and the state read and written once per call.
	act := int64(s.T) * int64(4*(C+2*vd+2*s.nv))
	o := Outcome{Reports: reports, Kernel: el.Seconds() * 1e6, Bytes: act + int64(len(calls))*int64(8*s.nv*s.dk*s.dv)}
	return o, checkAll(bounds, reports)
}

// selfCheckGatedDeltaNet: for the small cases, the chunked form equals the recurrent one
// (every token's o and the final state, to 1e-9 relative), and the conv inputs keep the
// bound's precondition.
func selfCheckGatedDeltaNet(c Case, rng *rand.Rand) error {
	s := gdnCase(c)
	if s.T*s.nv > 4096 {
		return nil // the GPU run computes the same references
	}
	in := gdnDraw(rng, s)
	_, _, scale := gdnConvRef(in.x, in.convW, in.conv0, s.T, s.channels())
	if m := maxAbs(scale); m > 16 {
		return fmt.Errorf("conv inputs: Σ|w·in| = %g > 16", m)
	}
	for h := 0; h < s.nv; h++ {
		p := gdnPrepare(in, s, h)
		S1 := moF64s(in.state0[h*s.dk*s.dv : (h+1)*s.dk*s.dv])
		S2 := append([]float64(nil), S1...)
		o1, M := deltaRecurrent(p, S1, s.dk, s.dv, 0, s.T)
		o2 := deltaChunked(p, S2, s.dk, s.dv, 0, s.T, 16)
		for t := range o1 {
			if err := moCloseRel(o1[t], o2[t], M, 1e-9); err != nil {
				return fmt.Errorf("head %d token %d: chunked o: %w", h, t, err)
			}
		}
		if err := moCloseRel(S1, S2, M, 1e-9); err != nil {
			return fmt.Errorf("head %d: chunked final state: %w", h, err)
		}
	}
	// The recurrent kernel's arithmetic emulated in float32 stays within the declared bounds.
	y, st := gdnRecurrentF32(in, s)
	yWant, stWant, yScale, sScale := gdnRecurrentRef(in, s, false)
	if err := gdnState.Verify(CompareRows(moF64s(st), stWant, s.dk*s.dv, func(r int) float64 { return sScale[r] })); err != nil {
		return fmt.Errorf("f32 emulation: %w", err)
	}
	return gdnOut.Verify(CompareRows(moF64s(y), yWant, s.dv, func(r int) float64 { return yScale[r] }))
}

// gdnRecurrentF32 follows the recurrent kernel's float32 operations (per-thread row-group
// partials of dk/4 rows, then the 4-group sum; the gates from float64 rounded once, as
// the kernel's exp/log are within a few ulp): y (t × nv·dv) and the final state.
func gdnRecurrentF32(in gdnInputs, s gdnShape) (y, state []float32) {
	C, vd, R := s.channels(), s.nv*s.dv, s.dk/4
	r := s.nv / s.nk
	y = make([]float32, s.T*vd)
	state = append([]float32(nil), in.state0...)
	qscale := 1 / float32(math.Sqrt(float64(s.dk)))
	norm := func(x []float32, extra float32) []float32 {
		var ss float32
		for _, v := range x {
			ss += v * v
		}
		inv := 1 / float32(math.Sqrt(float64(ss+1e-6))) * extra
		out := make([]float32, len(x))
		for i, v := range x {
			out[i] = v * inv
		}
		return out
	}
	sig := func(x float32) float32 { return float32(sigmoid64(float64(x))) }
	for h := 0; h < s.nv; h++ {
		kh, idx := h/r, h%r
		S := state[h*s.dk*s.dv : (h+1)*s.dk*s.dv]
		part := make([]float32, 4)
		for t := 0; t < s.T; t++ {
			row := in.xc[t*C:]
			q := norm(row[kh*s.dk:(kh+1)*s.dk], qscale)
			k := norm(row[s.nk*s.dk+kh*s.dk:s.nk*s.dk+(kh+1)*s.dk], 1)
			ba := in.ba[t*2*s.nv+kh*2*r:]
			decay := float32(math.Exp(float64(in.ssmA[h]) * softplus64(float64(ba[r+idx]+in.dtBias[h]))))
			beta := sig(ba[idx])
			o := make([]float32, s.dv)
			for j := 0; j < s.dv; j++ {
				for g := 0; g < 4; g++ {
					var m float32
					for i := g * R; i < (g+1)*R; i++ {
						S[i*s.dv+j] *= decay
						m += S[i*s.dv+j] * k[i]
					}
					part[g] = m
				}
				delta := (row[2*s.nk*s.dk+h*s.dv+j] - (part[0] + part[1] + part[2] + part[3])) * beta
				for g := 0; g < 4; g++ {
					var oo float32
					for i := g * R; i < (g+1)*R; i++ {
						S[i*s.dv+j] += k[i] * delta
						oo += S[i*s.dv+j] * q[i]
					}
					part[g] = oo
				}
				o[j] = part[0] + part[1] + part[2] + part[3]
			}
			var ss float32
			for _, v := range o {
				ss += v * v
			}
			inv := 1 / float32(math.Sqrt(float64(ss/float32(s.dv)+gdnEps)))
			for j, v := range o {
				z := in.z[t*vd+h*s.dv+j]
				y[t*vd+h*s.dv+j] = v * inv * in.normW[j] * (z * sig(z))
			}
		}
	}
	return y, state
}

// moCloseRel fails when any |a−b| exceeds tol·scale.
func moCloseRel(a, b []float64, scale, tol float64) error {
	for i := range a {
		if d := math.Abs(a[i] - b[i]); !(d <= tol*max(scale, 1e-300)) {
			return fmt.Errorf("[%d] %.17g vs %.17g (scale %.3g)", i, a[i], b[i], scale)
		}
	}
	return nil
}
