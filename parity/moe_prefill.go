package parity

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/strata-hip/strata/kernels"
	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/quant"
	"github.com/strata-hip/strata/runtime/gpu"
)

// moe_prefill: one MoE FFN layer for many tokens in four launches of one kernel (phase 0
// route, 1 gate/up + SwiGLU + Q8_1 requant, 2 down, 3 weighted combine). Every case runs the
// four phases in order, each in its own harness (poisoned outputs, guard bytes), each fed
// with the previous phase's kernel output once that output has passed its own check, so
// every stage is proven against a reference computed from exactly the bytes it consumed:
//
//   - sched, list (phase 0): the schedule and the pair lists, exact;
//   - h (phase 1, hf hook): silu(g)·u against float64, scale below;
//   - hq (phase 1): the Q8_1 bytes, exactly quant.QuantizeQ8_1GPU of the kernel's own h;
//   - y (phase 2): each pair's down projection of the kernel's hq, against float64 with the
//     mmq scale S;
//   - out (phase 3): out₀ + Σ_s w_s·y_s, against float64.
//
// Shapes: tokens 1, 17, 512, 4099; an expert with every token and experts with none; hidden
// and n_ff rounded down to the type's block (so Q8_0's hidden = 800 leaves a ragged 64-row
// down tile and a 25-group K).
//
// Weights: dense stacks (wg, wu, wd at e·stride), or, in the "tables" cases, slot tables
// (tabs): every expert's gate|up|down in one slot of a slab, the slots in a random order
// with empty slots between them, and every third expert (e mod 3 = 1) in a second slab (the
// engine's mapped host copies stand in a different buffer); wg, wu, wd are then null. The
// integer sums are the same, so the bounds are the same.

// mpMaxHidden is the largest hidden size (gate/up K) and n_ff (down K) the bounds cover.
const mpMaxHidden = 2048

var mpSched = Bound{Name: "sched", Exact: true, Why: `
	Integers: per-expert counts, offsets in expert order, the tile count and the tiles
	(expert, first entry) in expert order; a unique answer for given ids.`}

var mpList = Bound{Name: "list", Exact: true, Why: `
	Integers: pair ids t·k + s grouped by expert in expert order, within an expert in
	increasing pair id (the kernel's chunked stable placement); a unique answer for given ids.`}

var mpH = Bound{Name: "h", MaxRowRel: 8.1e-6, Why: `
	Per element, |h − silu(g)·u| / E with E = 1.1·S_g·|u| + |silu(g)|·S_u + (8 + |g|)·|h|
	(float64 g, u, h = silu(g)·u; S_g, S_u the mmq fold scales of the two dots). g and u are
	mmq dots with K = hidden ≤ 2048: ≤ 2 folds per group (Q4_K), n ≤ 128, |δg| ≤ γ₁₂₈·S_g,
	|δu| ≤ γ₁₂₈·S_u (γ₁₂₈ = 7.63e-6). |silu'| ≤ 1.1 carries δg into 1.1·γ·S_g·|u|.
	silu(g) = g/(1 + e^(−g)) with e^x from exp2 (≤ 2 ulp + |x|·2⁻²⁴ relative, prelude), one
	addition, one division, then one product with u: ≤ (7 + |g|)·2⁻²⁴ relative of |h|,
	covered by γ₁₂₈·(8 + |g|)|h|. Second-order terms (γ²·S_g·S_u) are below 1e-10 of E:
	1.05·γ₁₂₈ = 8.011e-6: bound 8.1e-6. The NVIDIA kernels that fold once per K step
	(kernels/prefill.go moeStepFold; y's derivation) put ≤ K/128 + 4 = 20 roundings on a
	term at K ≤ 2048, fewer than 128: the same bound holds.`}

var mpHQ = Bound{Name: "hq", Exact: true, Why: `
	The requantisation repeats quantize_q8_1's arithmetic step for step on the kernel's own h
	(one wave per 32-feature block: butterfly max and sum in the same order, d = amax/127,
	q = roundf(h/d), fp16 by round-to-nearest-even), which quant.QuantizeQ8_1GPU emulates
	exactly; any differing byte is a bug.`}

var mpY1 = Bound{Name: "y", MaxRowRel: 3.9e-6, Why: `
	mmq's derivation with K = n_ff ≤ 2048: one fold per 32-element group (every type but
	Q4_K), n ≤ 64 roundings relative to S: γ₆₄ = 3.815e-6: bound 3.9e-6.
	The NVIDIA kernels of kernels/prefill.go moeStepFold (256-element types without mins:
	base is one fp16-derived scale for the 4 groups of a 128-element K step) fold once per
	K step instead: per output t = d_x0·main0, then t = fma(d_x, main, t) for the step's
	other ≤ 3 groups (main exact as before), then acc = fma(base, t, acc). The product d_x·main
	is no longer exact, so t carries ≤ 4 roundings of each of its terms (the first: one FMUL
	and three FFMAs); base·t is exact inside the fma, whose one rounding, and those of the
	≤ K/128 − 1 later steps, apply to the term as well: ≤ 4 + K/128 ≤ 20 roundings at
	K ≤ 2048 relative to the same S = Σ|base·d_x·main| (no underflow: |base·d_x·main| ≥
	2⁻²⁷·2⁻²⁴ when not 0), γ₂₀ = 1.192e-6. The define STRATA_MOE_GROUP_FOLD builds the
	per-group fold back; the bound covers both: 3.9e-6.`}

var mpY2 = Bound{Name: "y", MaxRowRel: 7.7e-6, Why: `
	mmq's derivation with K = n_ff ≤ 2048: Q4_K folds twice per group (main sum and min term),
	n ≤ 128: γ₁₂₈ = 7.630e-6: bound 7.7e-6.`}

var mpOut = Bound{Name: "out", MaxRowRel: 4.8e-7, Why: `
	Per element, |out − ref| / (|out₀| + Σ_s |w_s·y_s|) (float64 of the exact inputs): a chain
	of k_used ≤ 8 fmas from out₀, one rounding each: γ₈ = 4.77e-7: bound 4.8e-7.`}

func init() {
	spec, ok := kernels.LookupSpec("moe_prefill")
	if !ok {
		panic("parity: no moe_prefill spec")
	}
	b := map[string][]Bound{}
	for _, v := range spec.AllVariants() {
		y := mpY2
		if mmqClass1[mmqTypes[v.Values["type"]]] {
			y = mpY1
		}
		b[v.Name] = []Bound{mpSched, mpList, mpH, mpHQ, y, mpOut}
	}
	register(&Family{
		Name:   "moe_prefill",
		Bounds: b,
		// Dims: tokens, k_used, n_expert, hidden, n_ff, mode (0 random routing, 1 expert 0 in
		// every token's list), optionally tables (1: weights through slot tables).
		Cases: []Case{
			{"tokens=1,k=2,experts=8,hidden=256,ff=256", []int{1, 2, 8, 256, 256, 0}},
			{"tokens=17,k=4,experts=16,hidden=800,ff=288", []int{17, 4, 16, 800, 288, 0}},
			{"tokens=512,k=2,experts=16,hidden=256,ff=256", []int{512, 2, 16, 256, 256, 0}},
			{"tokens=70,k=8,experts=12,hidden=512,ff=256,all-to-0", []int{70, 8, 12, 512, 256, 1}},
			{"tokens=4099,k=1,experts=2,hidden=256,ff=256,all-to-0", []int{4099, 1, 2, 256, 256, 1}},
			{"tokens=17,k=4,experts=16,hidden=800,ff=288,tables", []int{17, 4, 16, 800, 288, 0, 1}},
			{"tokens=512,k=2,experts=16,hidden=256,ff=256,tables", []int{512, 2, 16, 256, 256, 0, 1}},
			{"tokens=70,k=8,experts=12,hidden=512,ff=256,all-to-0,tables", []int{70, 8, 12, 512, 256, 1, 1}},
		},
		Run:       runMoePrefill,
		SelfCheck: selfCheckMoePrefill,
	})
}

// mpInputs is one case's operands and references.
type mpInputs struct {
	t                              quant.Type
	tokens, k, experts, hidden, ff int
	bn, maxTiles                   int
	ids                            []int32
	wts                            []float32
	x                              []byte // Q8_1 tokens × hidden/32
	wg, wu, wd                     []byte // expert stacks
	guBytes, dBytes                int    // bytes between experts
	gi, ui, di                     []*intRows
	xi                             *q81Rows
	out0                           []float32
	schedRef, listRef              []int32
	ldo                            int
	// tables cases: two slabs of slots (gate|up|down each, slotBytes), expert e in slab
	// slab[e] at slot slot[e]
	tables     bool
	slabs      [2][]byte
	slab, slot []int
	slotBytes  int
}

// tabs is the slot tables [3][experts] for slabs at the device addresses a0, a1.
func (in *mpInputs) tabs(a0, a1 uint64) []byte {
	t := make([]byte, 3*8*in.experts)
	for e := 0; e < in.experts; e++ {
		base := []uint64{a0, a1}[in.slab[e]] + uint64(in.slot[e]*in.slotBytes)
		for m, off := range []int{0, in.guBytes, 2 * in.guBytes} {
			binary.LittleEndian.PutUint64(t[8*(m*in.experts+e):], base+uint64(off))
		}
	}
	return t
}

func newMpInputs(t quant.Type, dims []int, bn int, rng *rand.Rand) (*mpInputs, error) {
	in := &mpInputs{t: t, tokens: dims[0], k: dims[1], experts: dims[2], hidden: mmqK(t, dims[3]), ff: mmqK(t, dims[4]), bn: bn}
	in.maxTiles = (in.tokens*in.k+bn-1)/bn + in.experts
	in.ldo = in.hidden + rng.IntN(2)
	// Routing: k distinct experts per token; mode 1 puts expert 0 in every token's list.
	in.ids = make([]int32, in.tokens*in.k)
	in.wts = make([]float32, in.tokens*in.k)
	for tk := 0; tk < in.tokens; tk++ {
		perm := rng.Perm(in.experts)
		if dims[5] == 1 {
			for i, e := range perm {
				if e == 0 {
					perm[0], perm[i] = perm[i], perm[0]
				}
			}
			j := rng.IntN(in.k)
			perm[0], perm[j] = perm[j], perm[0]
		}
		for s := 0; s < in.k; s++ {
			in.ids[tk*in.k+s] = int32(perm[s])
			in.wts[tk*in.k+s] = float32(rng.Float64())
		}
	}
	gRB, err := t.RowBytes(in.hidden)
	if err != nil {
		return nil, err
	}
	dRB, err := t.RowBytes(in.ff)
	if err != nil {
		return nil, err
	}
	in.guBytes = (in.ff*gRB + 255) / 256 * 256
	in.dBytes = (in.hidden*dRB + 255) / 256 * 256
	mat := func(rows, k, rb, stride int) ([]byte, []*intRows, error) {
		w := make([]byte, in.experts*stride)
		var ir []*intRows
		for e := 0; e < in.experts; e++ {
			for r := 0; r < rows; r++ {
				row, err := quant.RandomRow(t, k, rng)
				if err != nil {
					return nil, nil, err
				}
				copy(w[e*stride+r*rb:], row)
			}
			m, err := newIntRows(t, w[e*stride:e*stride+rows*rb], rows, k)
			if err != nil {
				return nil, nil, err
			}
			ir = append(ir, m)
		}
		return w, ir, nil
	}
	if in.wg, in.gi, err = mat(in.ff, in.hidden, gRB, in.guBytes); err != nil {
		return nil, err
	}
	if in.wu, in.ui, err = mat(in.ff, in.hidden, gRB, in.guBytes); err != nil {
		return nil, err
	}
	if in.wd, in.di, err = mat(in.hidden, in.ff, dRB, in.dBytes); err != nil {
		return nil, err
	}
	// Activations, scaled so that gate and up values of the first tokens are at most 8 in
	// magnitude: SwiGLU's curved range, and h well inside what Q8_1's fp16 d can hold
	// (|h| ≤ 127·65504); random weights times random activations would overflow it.
	xf := activations(rng, in.tokens, in.hidden)
	quantizeX := func() error {
		in.x = make([]byte, in.tokens*in.hidden/32*36)
		for tk := 0; tk < in.tokens; tk++ {
			if err := quant.QuantizeQ8_1GPU(xf[tk*in.hidden:(tk+1)*in.hidden], in.x[tk*in.hidden/32*36:(tk+1)*in.hidden/32*36]); err != nil {
				return err
			}
		}
		in.xi = newQ81Rows(in.x, in.tokens, in.hidden, in.hidden/32)
		return nil
	}
	if err := quantizeX(); err != nil {
		return nil, err
	}
	var big float64
	for p := 0; p < min(in.tokens, 8)*in.k; p++ {
		e := in.ids[p]
		for f := 0; f < in.ff; f++ {
			g, _ := prefillDot(in.gi[e], f, in.xi, p/in.k)
			u, _ := prefillDot(in.ui[e], f, in.xi, p/in.k)
			big = max(big, math.Abs(g), math.Abs(u))
		}
	}
	if big > 8 {
		for i := range xf {
			xf[i] *= float32(8 / big)
		}
		if err := quantizeX(); err != nil {
			return nil, err
		}
	}
	in.out0 = make([]float32, in.tokens*in.ldo)
	for i := range in.out0 {
		in.out0[i] = float32(rng.NormFloat64())
	}
	in.schedRef, in.listRef = mpRouteRef(in.ids, in.experts, in.bn, in.maxTiles)
	if len(dims) > 6 && dims[6] == 1 {
		// Slots: experts+3 per slab, in random order, so that slots lie out of expert order
		// with gaps; every third expert in the second slab.
		in.tables = true
		in.slotBytes = 2*in.guBytes + in.dBytes
		n := in.experts + 3
		in.slabs = [2][]byte{make([]byte, n*in.slotBytes), make([]byte, n*in.slotBytes)}
		in.slab, in.slot = make([]int, in.experts), rng.Perm(n)[:in.experts]
		for e := 0; e < in.experts; e++ {
			if e%3 == 1 {
				in.slab[e] = 1
			}
			b := in.slabs[in.slab[e]][in.slot[e]*in.slotBytes:]
			copy(b, in.wg[e*in.guBytes:(e+1)*in.guBytes])
			copy(b[in.guBytes:], in.wu[e*in.guBytes:(e+1)*in.guBytes])
			copy(b[2*in.guBytes:], in.wd[e*in.dBytes:(e+1)*in.dBytes])
		}
	}
	return in, nil
}

// mpRouteRef is the schedule and the lists phase 0 must write (sched padded with zeros to
// its full size).
func mpRouteRef(ids []int32, experts, bn, maxTiles int) (sched, list []int32) {
	sched = make([]int32, 2*experts+1+2*maxTiles)
	for _, e := range ids {
		sched[e]++
	}
	var off int32
	nt := 0
	for e := 0; e < experts; e++ {
		sched[experts+e] = off
		for t0 := int32(0); t0 < sched[e]; t0 += int32(bn) {
			sched[2*experts+1+2*nt], sched[2*experts+2+2*nt] = int32(e), t0
			nt++
		}
		off += sched[e]
	}
	sched[2*experts] = int32(nt)
	list = make([]int32, len(ids))
	pos := append([]int32(nil), sched[experts:2*experts]...)
	for p, e := range ids {
		list[pos[e]] = int32(p)
		pos[e]++
	}
	return sched, list
}

func mpSilu(g float64) float64 { return g / (1 + math.Exp(-g)) }

// mpHRef is h and its error scale for the first np pairs: [pairs][ff].
func mpHRef(in *mpInputs, np int) (h, scale []float64) {
	h, scale = make([]float64, np*in.ff), make([]float64, np*in.ff)
	parallelFor(np, func(p int) {
		e, tk := in.ids[p], p/in.k
		for f := 0; f < in.ff; f++ {
			g, sg := prefillDot(in.gi[e], f, in.xi, tk)
			u, su := prefillDot(in.ui[e], f, in.xi, tk)
			v := mpSilu(g) * u
			h[p*in.ff+f] = v
			scale[p*in.ff+f] = 1.1*sg*math.Abs(u) + math.Abs(mpSilu(g))*su + (8+math.Abs(g))*math.Abs(v)
		}
	})
	return h, scale
}

// mpYRef is the down projection of hq for the first np pairs: [pairs][hidden] and S.
func mpYRef(in *mpInputs, hq []byte, np int) (y, s []float64) {
	hi := newQ81Rows(hq, np, in.ff, in.ff/32)
	y, s = make([]float64, np*in.hidden), make([]float64, np*in.hidden)
	parallelFor(np, func(p int) {
		for r := 0; r < in.hidden; r++ {
			y[p*in.hidden+r], s[p*in.hidden+r] = prefillDot(in.di[in.ids[p]], r, hi, p)
		}
	})
	return y, s
}

// mpOutRef is out₀ + Σ_s w_s·y_s and its scale, [tokens][ldo].
func mpOutRef(in *mpInputs, yp []float32) (out, scale []float64) {
	out, scale = make([]float64, len(in.out0)), make([]float64, len(in.out0))
	for tk := 0; tk < in.tokens; tk++ {
		for c := 0; c < in.ldo; c++ {
			o := float64(in.out0[tk*in.ldo+c])
			v, a := o, math.Abs(o)
			if c < in.hidden {
				for s := 0; s < in.k; s++ {
					t := float64(in.wts[tk*in.k+s]) * float64(yp[(tk*in.k+s)*in.hidden+c])
					v += t
					a += math.Abs(t)
				}
			}
			out[tk*in.ldo+c], scale[tk*in.ldo+c] = v, a
		}
	}
	return out, scale
}

// phase runs one phase in a fresh harness: ins are inputs, inouts restored before each
// launch, outs poisoned outputs; it returns the in-out and output payloads in that order.
func (in *mpInputs) phase(h0 *Harness, fn *gpu.Func, phase int, grid gpu.Dim3, set func(a *abi.MoePrefillArgs, bufs map[string]Buf),
	inputs, inouts map[string][]byte, outs map[string]int, order []string) (map[string][]byte, float64, error) {
	h := &Harness{Dev: h0.Dev, Mod: h0.Mod}
	defer h.Close()
	bufs := map[string]Buf{}
	for name, data := range inputs {
		b, err := h.Input(data)
		if err != nil {
			return nil, 0, err
		}
		bufs[name] = b
	}
	if _, ok := bufs["slab0"]; ok { // the tables point into the slabs just placed
		b, err := h.Input(in.tabs(bufs["slab0"].Ptr(), bufs["slab1"].Ptr()))
		if err != nil {
			return nil, 0, err
		}
		bufs["tabs"] = b
	}
	var ret []Buf
	for _, name := range order {
		var b Buf
		var err error
		if data, ok := inouts[name]; ok {
			b, err = h.InOut(data)
		} else {
			b, err = h.Output(outs[name])
		}
		if err != nil {
			return nil, 0, err
		}
		bufs[name] = b
		ret = append(ret, b)
	}
	a := abi.MoePrefillArgs{Phase: int32(phase), Tokens: int32(in.tokens), KUsed: int32(in.k), NExpert: int32(in.experts),
		Hidden: int32(in.hidden), NFf: int32(in.ff), XRowBlocks: int32(in.hidden / 32), Ldo: int32(in.ldo),
		GuMatBytes: int64(in.guBytes), DMatBytes: int64(in.dBytes)}
	set(&a, bufs)
	got, el, err := h.Run(fn, grid, gpu.Dim3{X: abi.MoePrefillThreads, Y: 1, Z: 1}, a.Bytes(), ret...)
	if err != nil {
		return nil, 0, fmt.Errorf("phase %d: %w", phase, err)
	}
	m := map[string][]byte{}
	for i, name := range order {
		m[name] = got[i]
	}
	return m, el.Seconds() * 1e6, nil
}

func runMoePrefill(h *Harness, symbol string, c Case, bounds []Bound, rng *rand.Rand) (Outcome, error) {
	t, bm, bn, err := mmqVariant("moe_prefill", symbol)
	if err != nil {
		return Outcome{}, err
	}
	fn, err := h.Mod.Func(symbol)
	if err != nil {
		return Outcome{}, err
	}
	in, err := newMpInputs(t, c.Dims, bn, rng)
	if err != nil {
		return Outcome{}, err
	}
	reports := map[string]Report{}
	var total float64
	np := in.tokens * in.k
	ptr := func(b map[string]Buf, n string) uint64 { return b[n].Ptr() }

	// Phase 0: route.
	r0, us, err := in.phase(h, fn, 0, gpu.Dim3{X: uint32(in.experts), Y: 1, Z: 1}, func(a *abi.MoePrefillArgs, b map[string]Buf) {
		a.Ids, a.Sched, a.List = ptr(b, "ids"), ptr(b, "sched"), ptr(b, "list")
	}, map[string][]byte{"ids": int32Bytes(in.ids)}, map[string][]byte{"sched": make([]byte, 4*len(in.schedRef))},
		map[string]int{"list": 4 * np}, []string{"sched", "list"})
	if err != nil {
		return Outcome{}, err
	}
	total += us
	reports["sched"] = CompareExact(bytesInt32(r0["sched"]), in.schedRef)
	reports["list"] = CompareExact(bytesInt32(r0["list"]), in.listRef)
	if err := checkAll([]Bound{mpSched, mpList}, reports); err != nil {
		return Outcome{Reports: reports}, err
	}

	// Phase 1: gate/up + SwiGLU + requant, from the checked schedule.
	sched, list := r0["sched"], r0["list"]
	// weights: the dense stacks, or the slabs and their tables (wg, wu, wd null)
	weights := func(names ...string) map[string][]byte {
		m := map[string][]byte{}
		if in.tables {
			m["slab0"], m["slab1"] = in.slabs[0], in.slabs[1]
			return m
		}
		for _, n := range names {
			m[n] = map[string][]byte{"wg": in.wg, "wu": in.wu, "wd": in.wd}[n]
		}
		return m
	}
	with := func(m map[string][]byte, more map[string][]byte) map[string][]byte {
		for k, v := range more {
			m[k] = v
		}
		return m
	}
	wptr := func(b map[string]Buf, n string) uint64 {
		if in.tables {
			return 0
		}
		return b[n].Ptr()
	}
	tptr := func(b map[string]Buf) uint64 {
		if in.tables {
			return b["tabs"].Ptr()
		}
		return 0
	}
	r1, us, err := in.phase(h, fn, 1, gpu.Dim3{X: uint32((in.ff + bm/2 - 1) / (bm / 2)), Y: uint32(in.maxTiles), Z: 1}, func(a *abi.MoePrefillArgs, b map[string]Buf) {
		a.X, a.Wg, a.Wu, a.Sched, a.List, a.Hq, a.Hf = ptr(b, "x"), wptr(b, "wg"), wptr(b, "wu"), ptr(b, "sched"), ptr(b, "list"), ptr(b, "hq"), ptr(b, "hf")
		a.Tabs = tptr(b)
	}, with(weights("wg", "wu"), map[string][]byte{"x": in.x, "sched": sched, "list": list}), nil,
		map[string]int{"hq": np * in.ff / 32 * 36, "hf": 4 * np * in.ff}, []string{"hq", "hf"})
	if err != nil {
		return Outcome{}, err
	}
	total += us
	hRef, hScale := mpHRef(in, np)
	hf := bytesF32(r1["hf"])
	h64 := make([]float64, len(hf))
	for i, v := range hf {
		h64[i] = float64(v)
	}
	reports["h"] = CompareRows(h64, hRef, 1, func(i int) float64 { return hScale[i] })
	hqRef := make([]byte, len(r1["hq"]))
	for p := 0; p < np; p++ {
		if err := quant.QuantizeQ8_1GPU(hf[p*in.ff:(p+1)*in.ff], hqRef[p*in.ff/32*36:(p+1)*in.ff/32*36]); err != nil {
			return Outcome{}, err
		}
	}
	reports["hq"] = CompareExact(r1["hq"], hqRef)

	// Phase 2: down, from the kernel's hq.
	r2, us, err := in.phase(h, fn, 2, gpu.Dim3{X: uint32((in.hidden + bm - 1) / bm), Y: uint32(in.maxTiles), Z: 1}, func(a *abi.MoePrefillArgs, b map[string]Buf) {
		a.Wd, a.Sched, a.List, a.Hq, a.Yp = wptr(b, "wd"), ptr(b, "sched"), ptr(b, "list"), ptr(b, "hq"), ptr(b, "yp")
		a.Tabs = tptr(b)
	}, with(weights("wd"), map[string][]byte{"sched": sched, "list": list, "hq": r1["hq"]}), nil,
		map[string]int{"yp": 4 * np * in.hidden}, []string{"yp"})
	if err != nil {
		return Outcome{}, err
	}
	total += us
	yRef, yS := mpYRef(in, r1["hq"], np)
	yp := bytesF32(r2["yp"])
	y64 := make([]float64, len(yp))
	for i, v := range yp {
		y64[i] = float64(v)
	}
	reports["y"] = CompareRows(y64, yRef, 1, func(i int) float64 { return yS[i] })

	// Phase 3: combine, from the kernel's yp.
	r3, us, err := in.phase(h, fn, 3, gpu.Dim3{X: uint32((in.hidden + abi.MoePrefillThreads - 1) / abi.MoePrefillThreads), Y: uint32(min(in.tokens, 65535)), Z: 1},
		func(a *abi.MoePrefillArgs, b map[string]Buf) {
			a.Wts, a.Yp, a.Out = ptr(b, "wts"), ptr(b, "yp"), ptr(b, "out")
		}, map[string][]byte{"wts": f32Bytes(in.wts), "yp": r2["yp"]}, map[string][]byte{"out": f32Bytes(in.out0)}, nil, []string{"out"})
	if err != nil {
		return Outcome{}, err
	}
	total += us
	oRef, oScale := mpOutRef(in, yp)
	o := bytesF32(r3["out"])
	o64 := make([]float64, len(o))
	for i, v := range o {
		o64[i] = float64(v)
	}
	reports["out"] = CompareRows(o64, oRef, 1, func(i int) float64 { return oScale[i] })
	bytes := int64(len(in.x) + 4*len(in.wts) + 8*np*in.hidden + 8*in.tokens*in.ldo + np*in.ff/32*36*2)
	return Outcome{Reports: reports, Kernel: total, Bytes: bytes}, checkAll(bounds, reports)
}

// selfCheckMoePrefill holds the references together on the case's shape (CPU): the route
// reference (every pair once, in its expert's range, in order; all tokens at expert 0 in
// the all-to-0 cases; empty experts without tiles), and on the first pairs h against quant's
// exact dots through silu, the down reference against DotGPU on requantised h, and out's
// scale ≥ |out − out₀|.
func selfCheckMoePrefill(c Case, rng *rand.Rand) error {
	dims := c.Dims
	for _, t := range []quant.Type{quant.Q8_0, quant.Q4_K, quant.Q6_K, quant.IQ3_S, quant.IQ1_M} {
		in, err := newMpInputs(t, dims, 64, rng)
		if err != nil {
			return err
		}
		np := in.tokens * in.k
		// Route: every pair exactly once, in its expert's range, increasing within it.
		seen := make([]bool, np)
		for e := 0; e < in.experts; e++ {
			cnt, off := int(in.schedRef[e]), int(in.schedRef[in.experts+e])
			for i := off; i < off+cnt; i++ {
				p := in.listRef[i]
				if in.ids[p] != int32(e) || seen[p] || (i > off && in.listRef[i-1] >= p) {
					return fmt.Errorf("%v: route reference: list[%d] = %d for expert %d", t, i, p, e)
				}
				seen[p] = true
			}
		}
		if dims[5] == 1 && int(in.schedRef[0]) != in.tokens {
			return fmt.Errorf("%v: expert 0 has %d of %d tokens", t, in.schedRef[0], in.tokens)
		}
		tiles := 0
		for e := 0; e < in.experts; e++ {
			tiles += (int(in.schedRef[e]) + in.bn - 1) / in.bn
		}
		if int(in.schedRef[2*in.experts]) != tiles || tiles > in.maxTiles {
			return fmt.Errorf("%v: %d tiles, want %d (max %d)", t, in.schedRef[2*in.experts], tiles, in.maxTiles)
		}
		np = min(np, 6)
		h, hs := mpHRef(in, np)
		hf := make([]float32, len(h))
		for p := 0; p < np; p++ {
			e, tk := in.ids[p], p/in.k
			gRB, _ := t.RowBytes(in.hidden)
			for f := 0; f < in.ff; f++ {
				xb := in.x[tk*in.hidden/32*36 : (tk+1)*in.hidden/32*36]
				g, err := quant.DotGPU(t, in.wg[int(e)*in.guBytes+f*gRB:int(e)*in.guBytes+(f+1)*gRB], xb)
				if err != nil {
					return err
				}
				u, err := quant.DotGPU(t, in.wu[int(e)*in.guBytes+f*gRB:int(e)*in.guBytes+(f+1)*gRB], xb)
				if err != nil {
					return err
				}
				want := mpSilu(g.Exact) * u.Exact
				if i := p*in.ff + f; math.Abs(h[i]-want) > 1e-12*hs[i] {
					return fmt.Errorf("%v: h reference %v, from quant's exact dots %v", t, h[i], want)
				}
				hf[p*in.ff+f] = float32(h[p*in.ff+f])
			}
		}
		hq := make([]byte, np*in.ff/32*36)
		for p := 0; p < np; p++ {
			if err := quant.QuantizeQ8_1GPU(hf[p*in.ff:(p+1)*in.ff], hq[p*in.ff/32*36:(p+1)*in.ff/32*36]); err != nil {
				return err
			}
		}
		y, ys := mpYRef(in, hq, np)
		dRB, _ := t.RowBytes(in.ff)
		for p := 0; p < np; p++ {
			e := int(in.ids[p])
			for r := 0; r < in.hidden; r += 7 {
				d, err := quant.DotGPU(t, in.wd[e*in.dBytes+r*dRB:e*in.dBytes+(r+1)*dRB], hq[p*in.ff/32*36:(p+1)*in.ff/32*36])
				if err != nil {
					return err
				}
				if i := p*in.hidden + r; math.Abs(y[i]-d.Exact) > 1e-12*ys[i] {
					return fmt.Errorf("%v: down reference %v, quant's exact dot %v", t, y[i], d.Exact)
				}
			}
		}
		yp := make([]float32, in.tokens*in.k*in.hidden)
		for i, v := range y {
			yp[i] = float32(v)
		}
		out, os := mpOutRef(in, yp)
		for i := range out[:np/in.k*in.ldo] {
			if math.Abs(out[i]-float64(in.out0[i])) > os[i] {
				return fmt.Errorf("%v: out scale %v below |out − out₀| %v", t, os[i], math.Abs(out[i]-float64(in.out0[i])))
			}
		}
	}
	return nil
}
