package parity

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/quant"
	"github.com/strata-hip/strata/runtime/gpu"
)

// moe_decode: router top-k → gate/up + SwiGLU + Q8_1 requant → down + weighted sum, three
// launches of one kernel (or two: phase 3 = router + gate/up, checked byte for byte against
// phases 0 and 1). Each phase is checked against the float64 reference given the
// inputs it actually consumed (the previous phase's kernel outputs, once those passed), so a
// failure names the phase:
//
//   - ids, err (phase 0): exact. Top-k of the logits (ties: lower id), err = the expert lacks
//     a gate, up or down slot.
//   - wts (phase 0): softmax probabilities of the chosen experts, renormalised when asked.
//   - h (phase 1): the kernel's Q8_1 bytes decoded, against silu(g)·u of the exact float64
//     g = gate·x and u = up·x, per element relative to its derived allowance (metric ≤ 1).
//   - y (phase 2): against Σ_j w_j·(down_j·h_j) with the kernel's h bytes and float64 w_j.

var moeTypes = map[string]quant.Type{
	"q80": quant.Q8_0, "q20": quant.Q2_0, "q4k": quant.Q4_K, "q6k": quant.Q6_K,
	"iq2xs": quant.IQ2_XS, "iq3xxs": quant.IQ3_XXS, "iq3s": quant.IQ3_S, "iq1m": quant.IQ1_M,
}

var moeBounds = []Bound{
	{Name: "ids", Exact: true, Why: `
		Top-k is a comparison of the f32 logits themselves (ties to the lower id), which the
		kernel and the reference do identically; no arithmetic is involved.`},
	{Name: "err", Exact: true, Why: `
		Flags: 1 exactly when a selected expert's gate, up or down slot is 0.`},
	{Name: "wts", MaxRowRel: 1e-5, Why: `
		Per weight, relative to the float64 value. e^x = exp2(x·log₂e): ≤ 2 ulp + |x|·2⁻²⁴ with
		|x| = |l − max| ≤ 40 by construction of the inputs: ≤ 2.6e-6 per exponential. The f32
		sum over E experts (E/32 per lane + 5 butterfly levels ≤ 37 roundings at E = 1024:
		2.2e-6, plus the exponentials' 2.6e-6), one division (6e-8): p_j ≤ 5.5e-6. Renormalising
		divides by a k-term sum of p's carrying the same sum error (which cancels) plus their
		own exp errors and k roundings: ≤ 2.6e-6 + 2.6e-6 + 9·6e-8 + 6e-8 = 5.8e-6: bound 1e-5.`},
	{Name: "h", MaxRowRel: 1, Why: `
		Measured as |d·q − h_ref| / allowance, bound 1. h_ref = silu(g)·u from the exact g, u
		(float64). The kernel's g, u carry the mmvq fold error ≤ 2.1e-6·S (S = Σ|group terms|,
		K ≤ 14336), silu(g)·u adds ≤ (8 + |g|)·2⁻²⁴ relative (e^−g as above, 1 + e, the
		division, ·u); so the f32 value the kernel quantizes is within E_i = |silu'(g)·u|·2.1e-6·S_g
		+ |silu(g)|·2.1e-6·S_u + (8 + |g|)·2⁻²⁴·|h| of h_ref. Quantizing that value errs by
		≤ 5e-3·max(amax, 127·2⁻¹⁴) (quantize_q8_1's derivation: d/2 rounding, fp16 d, the f32
		division), with the kernel's amax ≤ amax_ref + E_b (E_b = the block's largest E_i):
		allowance_i = 5e-3·max(amax_ref + E_b, 127·2⁻¹⁴) + E_i. A missing expert's block must be
		exactly zero (allowance 1e-30).`},
	{Name: "fused", Exact: true, Why: `
		Phase 3 (router and gate/up in one launch, phase 1's grid) runs phase 0's and phase 1's
		arithmetic: its ids, wts, err and h bytes must equal those of phases 0 and 1.`},
	{Name: "y", MaxRowRel: 1.2e-5, Why: `
		Per output, |y − ref| / T with T = Σ_j |w_j|·S_j, S_j = Σ|group terms| of down_j[r]·h_j
		(the kernel's own h bytes, float64). Each down dot: one fma per group (two for Q4_K,
		plus the rounded min product) over ≤ ceil(n_ff/1024) = 2 groups per lane, 5 butterfly
		levels: ≤ 10 roundings: 6e-7·S_j. The weights carry ≤ 1e-5 relative (wts). The fma
		chain over k ≤ 8 experts: ≤ 8·2⁻²⁴·T. Total ≤ (6e-7 + 1e-5·(1 + 6e-7) + 4.8e-7)·T =
		1.11e-5·T: bound 1.2e-5.`},
}

func init() {
	b := map[string][]Bound{}
	for v := range moeTypes {
		b[v] = moeBounds
	}
	register(&Family{
		Name:   "moe_decode",
		Bounds: b,
		// Dims: tokens, n_expert, k_used, n_embd, n_ff, renorm, missing experts.
		Cases: []Case{
			{"tokens=1,experts=128,k=8,embd=2048,ff=768,renorm", []int{1, 128, 8, 2048, 768, 1, 0}},
			{"tokens=3,experts=64,k=4,embd=512,ff=256,softmax", []int{3, 64, 4, 512, 256, 0, 0}},
			{"tokens=4,experts=128,k=8,embd=1024,ff=2048,renorm", []int{4, 128, 8, 1024, 2048, 1, 0}},
			{"tokens=2,experts=32,k=8,embd=256,ff=512,renorm,missing", []int{2, 32, 8, 256, 512, 1, 1}},
			// The router holds a lane's ≤ 32 logits in registers, in arrays of 4, 8, 16 or 32 by
			// n_expert: one case per size, ragged counts included (200, 1000), 512 = Qwen3-Next.
			{"tokens=1,experts=200,k=6,embd=256,ff=256,softmax", []int{1, 200, 6, 256, 256, 0, 0}},
			{"tokens=2,experts=512,k=10,embd=512,ff=256,renorm", []int{2, 512, 10, 512, 256, 1, 0}},
			{"tokens=2,experts=1000,k=8,embd=256,ff=256,renorm", []int{2, 1000, 8, 256, 256, 1, 0}},
		},
		Run:       runMoeDecode,
		SelfCheck: selfCheckMoe,
	})
}

// moePhys is how many distinct experts' weights exist; expert e uses physical expert
// e mod moePhys (the slot tables point there), so large expert counts stay cheap to draw.
const moePhys = 9

type moeInputs struct {
	t                       quant.Type
	tokens, ne, k, embd, ff int
	renorm                  bool
	logits                  []float32
	x                       []byte   // Q8_1 [tokens][embd/32]
	gate, up, down          [][]byte // per physical expert, rows contiguous
	gateOK, upOK, downOK    []bool   // per expert: slot present
	rbE, rbF                int      // row bytes at K = embd, K = ff
}

func newMoeInputs(t quant.Type, d []int, rng *rand.Rand) (*moeInputs, error) {
	in := &moeInputs{t: t, tokens: d[0], ne: d[1], k: d[2], embd: d[3], ff: d[4], renorm: d[5] != 0}
	var err error
	if in.rbE, err = t.RowBytes(in.embd); err != nil {
		return nil, err
	}
	if in.rbF, err = t.RowBytes(in.ff); err != nil {
		return nil, err
	}
	in.logits = make([]float32, in.tokens*in.ne)
	for i := range in.logits {
		in.logits[i] = float32(2 * rng.NormFloat64())
	}
	// Ties: per token, three pairs of experts share a logit high enough to be chosen (the
	// lower id must come first), the pairs at random distances (same lane or not).
	for tk := 0; tk < in.tokens; tk++ {
		for j := 0; j < 3 && in.ne >= 2; j++ {
			a, b := rng.IntN(in.ne), rng.IntN(in.ne)
			if a == b {
				b = (a + 1) % in.ne
			}
			v := float32(6 + 0.25*float64(j))
			in.logits[tk*in.ne+a], in.logits[tk*in.ne+b] = v, v
		}
	}
	mat := func(rows, k int) ([]byte, error) {
		var m []byte
		for r := 0; r < rows; r++ {
			row, err := quant.RandomRow(t, k, rng)
			if err != nil {
				return nil, err
			}
			m = append(m, row...)
		}
		return m, nil
	}
	for p := 0; p < moePhys; p++ {
		g, err := mat(in.ff, in.embd)
		if err != nil {
			return nil, err
		}
		u, err := mat(in.ff, in.embd)
		if err != nil {
			return nil, err
		}
		dn, err := mat(in.embd, in.ff)
		if err != nil {
			return nil, err
		}
		in.gate, in.up, in.down = append(in.gate, g), append(in.up, u), append(in.down, dn)
	}
	// Activations scaled so that |g|, |u| ≤ max|x|·max_row Σ|w| ≤ 100 for every gate and up
	// row: h = silu(g)·u then stays far inside what a Q8_1 block can hold (its fp16 d =
	// amax/127 overflows above amax ≈ 8.3e6, as in ggml). Random blocks with independent
	// log-uniform scales otherwise give |g| up to 1e5 and h beyond fp16's range.
	var wsum float64
	row := make([]float64, in.embd)
	for p := 0; p < moePhys; p++ {
		for _, m := range [][]byte{in.gate[p], in.up[p]} {
			for r := 0; r < in.ff; r++ {
				if err := quant.DecodeRow64(t, m[r*in.rbE:(r+1)*in.rbE], row); err != nil {
					return nil, err
				}
				var s float64
				for _, v := range row {
					s += math.Abs(v)
				}
				wsum = math.Max(wsum, s)
			}
		}
	}
	xf := activations(rng, in.tokens, in.embd)
	var xmax float64
	for _, v := range xf {
		xmax = math.Max(xmax, math.Abs(float64(v)))
	}
	if wsum > 0 && xmax > 0 {
		c := float32(100 / (wsum * xmax))
		for i := range xf {
			xf[i] *= c
		}
	}
	in.x = make([]byte, in.tokens*in.embd/32*36)
	for tk := 0; tk < in.tokens; tk++ {
		if err := quant.QuantizeQ8_1GPU(xf[tk*in.embd:(tk+1)*in.embd], in.x[tk*in.embd/32*36:(tk+1)*in.embd/32*36]); err != nil {
			return nil, err
		}
	}
	in.gateOK, in.upOK, in.downOK = make([]bool, in.ne), make([]bool, in.ne), make([]bool, in.ne)
	for e := 0; e < in.ne; e++ {
		in.gateOK[e], in.upOK[e], in.downOK[e] = true, true, true
	}
	if d[6] != 0 {
		// Three experts lack one slot each; token 0 is made to select them.
		for i, miss := range [][]bool{in.gateOK, in.upOK, in.downOK} {
			e := (5 + 7*i) % in.ne
			miss[e] = false
			in.logits[e] = 20 + float32(i)
		}
	}
	return in, nil
}

func (in *moeInputs) ok(e int) bool { return in.gateOK[e] && in.upOK[e] && in.downOK[e] }

// moeRouter is the float64 router: ids (top-k by f32 logit, ties to the lower id) and
// weights, per token.
func moeRouter(in *moeInputs) ([]int32, []float64) {
	ids := make([]int32, in.tokens*in.k)
	wts := make([]float64, in.tokens*in.k)
	for tk := 0; tk < in.tokens; tk++ {
		l := in.logits[tk*in.ne : (tk+1)*in.ne]
		m := math.Inf(-1)
		for _, v := range l {
			m = math.Max(m, float64(v))
		}
		var sum float64
		for _, v := range l {
			sum += math.Exp(float64(v) - m)
		}
		order := make([]int, in.ne)
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return l[order[a]] > l[order[b]] })
		var sel float64
		for j := 0; j < in.k; j++ {
			e := order[j]
			ids[tk*in.k+j] = int32(e)
			wts[tk*in.k+j] = math.Exp(float64(l[e])-m) / sum
			sel += wts[tk*in.k+j]
		}
		if in.renorm {
			for j := 0; j < in.k; j++ {
				wts[tk*in.k+j] /= sel
			}
		}
	}
	return ids, wts
}

// moeH returns, for token tk and expert e, h_ref and each element's allowance (see the h
// bound).
func moeH(in *moeInputs, tk, e int) (h, allow []float64) {
	var ib quant.IntBlock
	p := e % moePhys
	x := in.x[tk*in.embd/32*36:]
	h, allow = make([]float64, in.ff), make([]float64, in.ff)
	ee := make([]float64, in.ff)
	for r := 0; r < in.ff; r++ {
		g, sg := q81RowDot(in.t, in.gate[p][r*in.rbE:(r+1)*in.rbE], x, in.embd, &ib)
		u, su := q81RowDot(in.t, in.up[p][r*in.rbE:(r+1)*in.rbE], x, in.embd, &ib)
		sig := 1 / (1 + math.Exp(-g))
		silu := g * sig
		dsilu := sig * (1 + g*(1-sig))
		h[r] = silu * u
		ee[r] = math.Abs(dsilu*u)*mmvqQuantY.MaxRowRel*sg + math.Abs(silu)*mmvqQuantY.MaxRowRel*su + (8+math.Abs(g))*0x1p-24*math.Abs(h[r])
	}
	for b := 0; b < in.ff/32; b++ {
		var amax, eb float64
		for i := 32 * b; i < 32*b+32; i++ {
			amax, eb = math.Max(amax, math.Abs(h[i])), math.Max(eb, ee[i])
		}
		for i := 32 * b; i < 32*b+32; i++ {
			allow[i] = 5e-3*math.Max(amax+eb, 127*0x1p-14) + ee[i]
		}
	}
	return h, allow
}

func runMoeDecode(h *Harness, symbol string, c Case, bounds []Bound, rng *rand.Rand) (Outcome, error) {
	t, ok := moeTypes[variantOf(symbol, "moe_decode")]
	if !ok {
		return Outcome{}, fmt.Errorf("no weight type for %s", symbol)
	}
	fn, err := h.Mod.Func(symbol)
	if err != nil {
		return Outcome{}, err
	}
	in, err := newMoeInputs(t, c.Dims, rng)
	if err != nil {
		return Outcome{}, err
	}
	nk := in.tokens * in.k
	reports := map[string]Report{}
	var total float64

	// Weights on the device, one buffer per matrix kind; slot tables per expert.
	upload := func(ms [][]byte) (Buf, []uint64, error) {
		stride := (len(ms[0]) + 255) / 256 * 256
		all := make([]byte, stride*len(ms))
		for i, m := range ms {
			copy(all[i*stride:], m)
		}
		b, err := h.Input(all)
		addr := make([]uint64, len(ms))
		for i := range ms {
			addr[i] = b.Ptr() + uint64(i*stride)
		}
		return b, addr, err
	}
	slots := func(addr []uint64, ok []bool) []byte {
		s := make([]byte, 8*in.ne)
		for e := 0; e < in.ne; e++ {
			if ok[e] {
				binary.LittleEndian.PutUint64(s[8*e:], addr[e%moePhys])
			}
		}
		return s
	}
	_, ga, err := upload(in.gate)
	if err != nil {
		return Outcome{}, err
	}
	_, ua, err := upload(in.up)
	if err != nil {
		return Outcome{}, err
	}
	_, da, err := upload(in.down)
	if err != nil {
		return Outcome{}, err
	}
	sg, err := h.Input(slots(ga, in.gateOK))
	if err != nil {
		return Outcome{}, err
	}
	su, err := h.Input(slots(ua, in.upOK))
	if err != nil {
		return Outcome{}, err
	}
	sd, err := h.Input(slots(da, in.downOK))
	if err != nil {
		return Outcome{}, err
	}
	base := abi.MoeDecodeArgs{SlotsGate: sg.Ptr(), SlotsUp: su.Ptr(), SlotsDown: sd.Ptr(), Tokens: int32(in.tokens),
		NExpert: int32(in.ne), KUsed: int32(in.k), NEmbd: int32(in.embd), NFf: int32(in.ff)}
	if in.renorm {
		base.Renorm = 1
	}
	block := gpu.Dim3{X: abi.MoeDecodeThreads, Y: 1, Z: 1}

	// Phase 0: router. Its own harness, so later phases' buffers are not refilled by it.
	h0 := &Harness{Dev: h.Dev, Mod: h.Mod}
	defer h0.Close()
	dl, err := h0.Input(f32Bytes(in.logits))
	if err != nil {
		return Outcome{}, err
	}
	dids, err := h0.Output(4 * nk)
	if err != nil {
		return Outcome{}, err
	}
	dw, err := h0.Output(4 * nk)
	if err != nil {
		return Outcome{}, err
	}
	de, err := h0.Output(4 * nk)
	if err != nil {
		return Outcome{}, err
	}
	// Phase 0 only tests slot entries for zero; h's tables are uploaded by h.Run (phase 1),
	// so it gets copies of its own.
	a0 := base
	for i, tb := range [][]byte{slots(ga, in.gateOK), slots(ua, in.upOK), slots(da, in.downOK)} {
		b, err := h0.Input(tb)
		if err != nil {
			return Outcome{}, err
		}
		*[]*uint64{&a0.SlotsGate, &a0.SlotsUp, &a0.SlotsDown}[i] = b.Ptr()
	}
	a0.Phase, a0.Logits, a0.Ids, a0.Wts, a0.Err = 0, dl.Ptr(), dids.Ptr(), dw.Ptr(), de.Ptr()
	got, el, err := h0.Run(fn, gpu.Dim3{X: uint32(in.tokens), Y: 1, Z: 1}, block, a0.Bytes(), dids, dw, de)
	if err != nil {
		return Outcome{}, fmt.Errorf("phase 0: %w", err)
	}
	total += el.Seconds() * 1e6
	wantIds, wantW := moeRouter(in)
	kIds := bytesInt32(got[0])
	reports["ids"] = CompareExact(kIds, wantIds)
	kw := bytesF32(got[1])
	kw64 := make([]float64, nk)
	for i, v := range kw {
		kw64[i] = float64(v)
	}
	reports["wts"] = CompareRows(kw64, wantW, 1, func(i int) float64 { return wantW[i] })
	wantErr := make([]uint32, nk)
	for i, e := range wantIds {
		if !in.ok(int(e)) {
			wantErr[i] = 1
		}
	}
	kErrI := bytesInt32(got[2])
	kErr := make([]uint32, nk)
	for i, v := range kErrI {
		kErr[i] = uint32(v)
	}
	reports["err"] = CompareExact(kErr, wantErr)
	for _, name := range []string{"ids", "err", "wts"} {
		for _, b := range bounds {
			if b.Name == name {
				if err := b.Verify(reports[name]); err != nil {
					return Outcome{Reports: reports}, fmt.Errorf("phase 0: %w", err)
				}
			}
		}
	}

	// Phase 1: gate/up → h, from the kernel's ids and err.
	dx, err := h.Input(in.x)
	if err != nil {
		return Outcome{}, err
	}
	kidsB, err := h.Input(got[0])
	if err != nil {
		return Outcome{}, err
	}
	kerrB, err := h.Input(got[2])
	if err != nil {
		return Outcome{}, err
	}
	dh, err := h.Output(nk * in.ff / 32 * 36)
	if err != nil {
		return Outcome{}, err
	}
	a1 := base
	a1.Phase, a1.Ids, a1.Err, a1.X, a1.H = 1, kidsB.Ptr(), kerrB.Ptr(), dx.Ptr(), dh.Ptr()
	got1, el1, err := h.Run(fn, gpu.Dim3{X: uint32(in.ff / 32), Y: uint32(in.k), Z: uint32(in.tokens)}, block, a1.Bytes(), dh)
	if err != nil {
		return Outcome{}, fmt.Errorf("phase 1: %w", err)
	}
	total += el1.Seconds() * 1e6
	hq := got1[0]
	hGot := make([]float64, nk*in.ff)
	if err := quant.DecodeRow64(quant.Q8_1, hq, hGot); err != nil {
		return Outcome{}, fmt.Errorf("phase 1: %w", err)
	}
	hWant, allow := make([]float64, nk*in.ff), make([]float64, nk*in.ff)
	for o := 0; o < nk; o++ {
		tk, e := o/in.k, int(kIds[o])
		if kErr[o] != 0 {
			for i := 0; i < in.ff; i++ {
				allow[o*in.ff+i] = 1e-30
			}
			continue
		}
		hr, al := moeH(in, tk, e)
		copy(hWant[o*in.ff:], hr)
		copy(allow[o*in.ff:], al)
	}
	reports["h"] = CompareRows(hGot, hWant, 1, func(i int) float64 { return allow[i] })

	// Phase 3: router + gate/up in one launch; its own harness (fresh, poisoned outputs).
	h3 := &Harness{Dev: h.Dev, Mod: h.Mod}
	defer h3.Close()
	a3 := base
	a3.Phase = 3
	for i, tb := range [][]byte{slots(ga, in.gateOK), slots(ua, in.upOK), slots(da, in.downOK)} {
		b, err := h3.Input(tb)
		if err != nil {
			return Outcome{}, err
		}
		*[]*uint64{&a3.SlotsGate, &a3.SlotsUp, &a3.SlotsDown}[i] = b.Ptr()
	}
	var outs3 []Buf
	for i, n := range []int{4 * nk, 4 * nk, 4 * nk, nk * in.ff / 32 * 36} {
		b, err := h3.Output(n)
		if err != nil {
			return Outcome{}, err
		}
		outs3 = append(outs3, b)
		*[]*uint64{&a3.Ids, &a3.Wts, &a3.Err, &a3.H}[i] = b.Ptr()
	}
	dl3, err := h3.Input(f32Bytes(in.logits))
	if err != nil {
		return Outcome{}, err
	}
	dx3, err := h3.Input(in.x)
	if err != nil {
		return Outcome{}, err
	}
	a3.Logits, a3.X = dl3.Ptr(), dx3.Ptr()
	got3, _, err := h3.Run(fn, gpu.Dim3{X: uint32(in.ff / 32), Y: uint32(in.k), Z: uint32(in.tokens)}, block, a3.Bytes(), outs3...)
	if err != nil {
		return Outcome{}, fmt.Errorf("phase 3: %w", err)
	}
	var want3, have3 []byte
	for i, w := range [][]byte{got[0], got[1], got[2], hq} {
		want3, have3 = append(want3, w...), append(have3, got3[i]...)
	}
	reports["fused"] = CompareExact(have3, want3)

	// Phase 2: down + weighted sum, from the kernel's ids, err, weights and h.
	h2 := &Harness{Dev: h.Dev, Mod: h.Mod}
	defer h2.Close()
	hB, err := h2.Input(hq)
	if err != nil {
		return Outcome{}, err
	}
	wB, err := h2.Input(got[1])
	if err != nil {
		return Outcome{}, err
	}
	idsB2, err := h2.Input(got[0])
	if err != nil {
		return Outcome{}, err
	}
	errB2, err := h2.Input(got[2])
	if err != nil {
		return Outcome{}, err
	}
	dy, err := h2.Output(4 * in.tokens * in.embd)
	if err != nil {
		return Outcome{}, err
	}
	a2 := base
	a2.Phase, a2.Ids, a2.Err, a2.Wts, a2.H, a2.Y = 2, idsB2.Ptr(), errB2.Ptr(), wB.Ptr(), hB.Ptr(), dy.Ptr()
	got2, el2, err := h2.Run(fn, gpu.Dim3{X: uint32((in.embd + 7) / 8), Y: 1, Z: uint32(in.tokens)}, block, a2.Bytes(), dy)
	if err != nil {
		return Outcome{}, fmt.Errorf("phase 2: %w", err)
	}
	total += el2.Seconds() * 1e6
	var ib quant.IntBlock
	yWant, tScale := make([]float64, in.tokens*in.embd), make([]float64, in.tokens*in.embd)
	for tk := 0; tk < in.tokens; tk++ {
		for j := 0; j < in.k; j++ {
			o := tk*in.k + j
			if kErr[o] != 0 {
				continue
			}
			p := int(kIds[o]) % moePhys
			for r := 0; r < in.embd; r++ {
				d, s := q81RowDot(in.t, in.down[p][r*in.rbF:(r+1)*in.rbF], hq[o*in.ff/32*36:], in.ff, &ib)
				yWant[tk*in.embd+r] += wantW[o] * d
				tScale[tk*in.embd+r] += math.Abs(wantW[o]) * s
			}
		}
	}
	ys := bytesF32(got2[0])
	yGot := make([]float64, len(ys))
	for i, v := range ys {
		yGot[i] = float64(v)
	}
	reports["y"] = CompareRows(yGot, yWant, 1, func(i int) float64 { return tScale[i] })
	used := 0
	for o := 0; o < nk; o++ {
		if kErr[o] == 0 {
			used++
		}
	}
	bytes := int64(used*(2*in.ff*in.rbE+in.embd*in.rbF) + len(in.x) + 2*len(hq) + 4*len(ys))
	return Outcome{Reports: reports, Kernel: total, Bytes: bytes}, checkAll(bounds, reports)
}

// selfCheckMoe: the router reference selects the k largest logits with their softmax
// weights summing to 1 when renormalised, and h_ref's allowance is positive and at least
// the quantization step for every kept element.
func selfCheckMoe(c Case, rng *rand.Rand) error {
	d := append([]int(nil), c.Dims...)
	d[3], d[4] = 256, 256 // small shapes: the property, not the size, is checked here
	in, err := newMoeInputs(quant.Q4_K, d, rng)
	if err != nil {
		return err
	}
	ids, w := moeRouter(in)
	for tk := 0; tk < in.tokens; tk++ {
		var s float64
		kth := in.logits[tk*in.ne+int(ids[tk*in.k+in.k-1])]
		for j := 0; j < in.k; j++ {
			s += w[tk*in.k+j]
		}
		for e := 0; e < in.ne; e++ {
			chosen := false
			for j := 0; j < in.k; j++ {
				chosen = chosen || int(ids[tk*in.k+j]) == e
			}
			if !chosen && in.logits[tk*in.ne+e] > kth {
				return fmt.Errorf("token %d: expert %d (logit %v) beats the k-th choice (%v) but was not chosen", tk, e, in.logits[tk*in.ne+e], kth)
			}
		}
		if in.renorm && math.Abs(s-1) > 1e-12 {
			return fmt.Errorf("token %d: renormalised weights sum to %v", tk, s)
		}
	}
	h, allow := moeH(in, 0, int(ids[0]))
	for i := range h {
		if !(allow[i] > 0) {
			return fmt.Errorf("h allowance %v at %d", allow[i], i)
		}
	}
	return nil
}
