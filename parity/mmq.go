package parity

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/strata-hip/strata/kernels"
	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/quant"
	"github.com/strata-hip/strata/runtime/gpu"
)

// mmq: y[t][r] = Σ_k W[r][k]·x[t][k] for many tokens; quantized weights decoded to int8
// tiles, Q8_1 activations (quantize_q8_1's bytes), exact int32 group sums, f32 fold. Two
// checks per case:
//
//   - y: the float64 value of the same operands, each output's error measured against
//     S = Σ |fold term| (prefillDot), since cancellation can make |y| ≪ S;
//   - isum: a second launch with hook_group = g (a random group, the last one every other
//     case): every output must then be the exact int32 sum Σ_i mult(i)·q_w(i)·q_x(i) of group
//     g — the tile sums the matrix unit or dot4 produced, before any float arithmetic.
//
// F16 and BF16 are not mmq types (kernels.axisPrefillType): they have no exact int8 form.
// K is a multiple of the type's block; "K not a multiple of the tile" (the 128-element K
// step) happens for the 32- and 64-element types (K = 1120: 35 groups; Q2_0: 1088, 34
// groups); 256-element types always fill whole steps, so for them the case rounds K down.

// mmqClass1 are the types folded once per 32-element group; Q4_K folds twice (the group and
// its min term).
var mmqClass1 = map[quant.Type]bool{quant.Q8_0: true, quant.Q2_0: true, quant.Q6_K: true, quant.IQ2_XS: true,
	quant.IQ3_XXS: true, quant.IQ3_S: true, quant.IQ1_M: true}

// mmqMaxK is the largest K the y bounds are derived for (the benchmark shape's 14336).
const mmqMaxK = 14336

var mmqY1 = Bound{Name: "y", MaxRowRel: 2.7e-5, Why: `
	Per output, |y − ref| / S with S = Σ|fold terms| (float64). Every group's integer main sum
	m0·S0 + m1·S1 has |main| ≤ 32·32·128·128 = 2²⁴ (Q6_K, the largest: |q| ≤ 32, |m| ≤ 128,
	|a| ≤ 128), and every integer up to 2²⁴ is exact in f32, so (f32)main is exact; base·d_x is an exact f32 product (two 11-bit significands, no underflow: ≥ 2⁻⁵¹), so each
	fold acc = fma(base·d_x, main, acc) is one rounding of at most 2⁻²⁴ relative to a partial
	bounded by S. One fold per 32-element group (Q8_0, Q2_0, Q6_K, IQ2_XS, IQ3_XXS, IQ3_S,
	IQ1_M), sequential in one f32 accumulator: n = K/32 ≤ 448 at K = 14336;
	γ₄₄₈ = 448·2⁻²⁴/(1 − 448·2⁻²⁴) = 2.670e-5: bound 2.7e-5. The float64 reference is exact
	per term (≤ 46 bits) and sums ≤ 896 terms: its error ≤ 1e-13·S.`}

var mmqY2 = Bound{Name: "y", MaxRowRel: 5.4e-5, Why: `
	As the one-fold types, but Q4_K folds twice per group: the group's main sum and its min
	term fma(offb·d_x, offm·Σq_x, acc) (offb·d_x exact, |offm·Σq_x| < 2¹⁸ exact).
	n = 2·K/32 ≤ 896 at K = 14336; γ₈₉₆ = 5.341e-5: bound 5.4e-5. S counts the min terms
	separately, as they are folded.`}

var mmqISum = Bound{Name: "isum", Exact: true, Why: `
	Integers only: the hooked group's Σ mult(i)·q_w(i)·q_x(i) is at most 2²⁴ in magnitude (Q6_K,
	the largest: 32·32·128·128) and int32 addition is exact in any order, so the matrix-unit
	and dot4 sums must equal the reference exactly. On NVIDIA the sums leave the mma seeded
	with 1.5·2²³ and are read back through f32: exact for |s| < 2²² (group sums ≤ 2¹⁹), and
	m·s or m0·s0 + m1·s1 < 2²⁴ is exact in f32, so the hook still sees the exact integer.`}

// mmqX4Y is the y bound of family mmq8x4 (kernels/prefill.go, mmqXSeg; it was also that of
// mmq8x4p, deleted in session 10, whence its derivation's last sentence):
// activations whose 4 Q8_1 blocks of each 128-element segment share one d
// (quant.QuantizeQ8_1GPUSeg with 4), the group sums added in int32 over the segment, one f32
// fold per segment. (The same derivation with 8 groups gave family mmq8x's γ₅₇ = 3.4e-6;
// mmq8x was dropped: bench/results/2026-11-30-mmqs2-s8.)
var mmqX4Y = Bound{Name: "y", MaxRowRel: 6.8e-6, Why: `
	Per output, |y − ref| / S with S = Σ|fold terms| per 32-element group (float64, as mmq).
	The 4 groups of a 128-element segment share the weight base (one per 256-element block of
	Q6_K, IQ2_XS, IQ3_XXS, IQ3_S, IQ1_M) and d_x (the quantizer's shared d per 4 blocks), so
	they share b = base·d_x, an exact f32 product (two 11-bit significands). The segment's
	integer sum I = Σ_g (m0·S0 + m1·S1) has |I| ≤ 4·2²⁴ = 2²⁶ (Q6_K, the largest group) < 2³¹:
	exact in int32 in any order. (f32)I is one rounding (≤ 2⁻²⁴ relative; none for
	|I| ≤ 2²⁴) and acc = fma(b, (f32)I, acc) one more, sequential over n = K/128 ≤ 112
	segments at K = 14336: |error| ≤ γₙ₊₁·Σ_s|b·I_s| ≤ γ₁₁₃·S, since
	|I_s| ≤ Σ_{g∈s}|m0·S0 + m1·S1|. γ₁₁₃ = 113·2⁻²⁴/(1 − 113·2⁻²⁴) = 6.7353e-6: bound 6.8e-6.
	The float64 reference is exact per term and sums ≤ 448 terms: ≤ 1e-13·S. (What the shared
	d costs the activations is quant.QuantizeQ8_1GPUSeg's rounding, not this kernel's: the
	reference takes the same bytes.) mmq8x4p's L1 prefetch is a hint: the same arithmetic.`}

var mmqXISum = Bound{Name: "isum", Exact: true, Why: `
	Integers only: the hooked group's Σ mult(i)·q_w(i)·q_x(i), |·| ≤ 2²⁴ (Q6_K). mmq8x4's mma
	sums start from 0 (no 1.5·2²³ seed) and m0·S0 + m1·S1 is formed in int32, exact in any
	order, and written as its bit pattern: it must equal the reference exactly.`}

// mmqX4LY is the y bound of family mmq8x4n (kernels/prefill.go, mmqPlanes): mmq8x4 with its
// weights staged as two int8 planes (and the L1 prefetch). The segment's integer sum is the
// same integer formed another way, so mmqX4Y's derivation and value hold unchanged. It was
// derived for family mmq8x4l (mmq8x4p with two planes; both deleted in session 10 as
// dominated by mmq8x4n) and keeps its name and text: mmq8x4n's written outputs are
// mmq8x4l's bit for bit (mmqSegY), so the bound and mmqXLISum are mmq8x4n's now (and
// mmq8x4g's, whose outputs are mmq8x4n's).
var mmqX4LY = Bound{Name: "y", MaxRowRel: 6.8e-6, Why: `
	As mmq8x4 (mmqX4Y, γ₁₁₃ = 6.7353e-6 at K = 14336: bound 6.8e-6), with the segment's
	integer sum I formed from two int8 weight planes: every element's integer value
	v = mult·q (IQ2_XS |v| ≤ 43·31 = 1333, IQ1_M ≤ 9·15 = 135) is staged as h = ⌊v/16⌋
	(|h| ≤ 84) and l = v − 16h ∈ [0, 15], both exact int8. The mma sums H = Σ h·q_x and
	L = Σ l·q_x over the segment's 128 elements (|H| ≤ 128·84·127 < 2²¹, |L| < 2¹⁸) are exact
	int32 in any order, and I = 16·H + L = Σ v·q_x = Σ_g (m0·S0 + m1·S1) exactly: the same
	integer as mmq8x4's, folded by the same acc = fma(b, (f32)I, acc) in the same order, so
	the outputs are mmq8x4p's bit for bit and the bound is mmq8x4's. The L1 prefetch is a
	hint.`}

var mmqXLISum = Bound{Name: "isum", Exact: true, Why: `
	Integers only: the hooked group's Σ mult(i)·q_w(i)·q_x(i) = 16·Σ h·q_x + Σ l·q_x (the two
	planes' mma sums, each from 0, |·| < 2²¹), formed in int32 (exact in any order, |·| ≤
	2¹⁹·43·31/128 < 2²⁴) and written as its bit pattern: it must equal the reference exactly.`}

// mmqSegY is the y bound of the families whose activations share one d per segment
// (kernels/prefill.go, mmqXSeg). mmq8x4n forms the same integer segment sums from two weight
// planes (mmqX4LY), prefetches the next K step into L1 (a hint: no value changes), keeps edge
// jobs' loaded values (rows and tokens past the tile: their outputs are never written) and
// stores the segment's d from another of its 4 blocks (the same d: mmqXSeg), so every written
// output is that of the deleted mmq8x4l (the two planes with the zeroing, session 9) bit for
// bit and its bounds are the ones derived for it. mmq8x4g is mmq8x4n whose
// warps load each group's token fragments once for both row fragments (the same staged int8
// values in the same mma registers) and add the group's 16·H into the L chain after each
// group; it reaches the same exact int32 segment sum I = 16·H + L and folds it by the same
// fma in the same order, so mmq8x4n's outputs bit for bit and the same bounds.
var mmqSegY = map[string]Bound{"mmq8x4": mmqX4Y, "mmq8x4n": mmqX4LY, "mmq8x4g": mmqX4LY}

// mmqSegISum is the isum bound of the shared-d families (mmqXISum unless listed).
var mmqSegISum = map[string]Bound{"mmq8x4n": mmqXLISum, "mmq8x4g": mmqXLISum}

// mmqTypes maps the "type" axis values of the int8 prefill families to quant types.
var mmqTypes = map[string]quant.Type{
	"q80": quant.Q8_0, "q20": quant.Q2_0, "q4k": quant.Q4_K, "q6k": quant.Q6_K,
	"iq2xs": quant.IQ2_XS, "iq3xxs": quant.IQ3_XXS, "iq3s": quant.IQ3_S, "iq1m": quant.IQ1_M,
}

// mmqYBound is the y bound of type t.
func mmqYBound(t quant.Type) Bound {
	if mmqClass1[t] {
		return mmqY1
	}
	return mmqY2
}

// mmqBounds is the bounds of every variant of family (mmq, mmq8, mmq8c, mmq8cz, mmq8x4 or mmq8x4n): its
// weight type's y bound and the exact group sums, or for a shared-d family (mmqSegY) that
// family's y bound and the exact int32 group sums.
func mmqBounds(family string) map[string][]Bound {
	spec, ok := kernels.LookupSpec(family)
	if !ok {
		panic("parity: no " + family + " spec")
	}
	y, seg := mmqSegY[family]
	if seg != (kernels.MmqXSeg(family) > 1) {
		// A shared-d family needs its own derived bound here, and only such a family may have one.
		panic("parity: " + family + ": mmqSegY and kernels' mmqXSeg disagree on whether its activations share one d per segment")
	}
	b := map[string][]Bound{}
	for _, v := range spec.AllVariants() {
		if seg {
			is, ok := mmqSegISum[family]
			if !ok {
				is = mmqXISum
			}
			b[v.Name] = []Bound{is, y}
			continue
		}
		b[v.Name] = []Bound{mmqYBound(mmqTypes[v.Values["type"]]), mmqISum}
	}
	return b
}

func init() {
	// Dims: rows, tokens, k (rounded down to the type's block).
	cases := []Case{
		{"rows=64,tokens=1,k=256", []int{64, 1, 256}},
		{"rows=100,tokens=17,k=1120", []int{100, 17, 1120}},
		{"rows=130,tokens=70,k=4096", []int{130, 70, 4096}},
		{"rows=128,tokens=512,k=2048", []int{128, 512, 2048}},
		{"rows=48,tokens=4099,k=512", []int{48, 4099, 512}},
		{"rows=33,tokens=65,k=14336", []int{33, 65, 14336}},
	}
	register(&Family{
		Name:      "mmq",
		Bounds:    mmqBounds("mmq"),
		Cases:     cases,
		Run:       runMmq,
		SelfCheck: selfCheckMmq,
	})
	// mmq8: the same kernels with 8 warps (kernels/prefill.go, mmq8Warp), the same
	// arithmetic per output (one fold per group in the same order), so the same bounds and
	// derivations; one more case: 33 groups (a partial K step) and 300 tokens (three tiles,
	// the last partial) on 190 rows (three row tiles, the last partial).
	cases8 := append(cases[:len(cases):len(cases)], Case{"rows=190,tokens=300,k=1056", []int{190, 300, 1056}})
	register(&Family{
		Name:   "mmq8",
		Bounds: mmqBounds("mmq8"),
		Cases:  cases8,
		Run:    runMmqFamily("mmq8"),
	})
	// mmq8x4: mmq8 for activations with one d per 128-element segment (kernels/prefill.go,
	// mmqXSeg), quantized so by quant.QuantizeQ8_1GPUSeg; mmq8x4n: mmq8x4 with two weight
	// planes (kernels/prefill.go, mmqPlanes), the next K step prefetched into L1 (mmqPrefetch)
	// and no edge zeroing (mmqNoZero). mmq8's cases (K rounds down
	// to whole 256-element blocks, so every segment is whole).
	// mmq8c (Q2_0), mmq8cz (Q8_0) (kernels/prefill.go, mmqCompact): mmq8 with compact scale
	// tiles for the unit types; mmq8cz without zeroing the staged values of rows and tokens
	// past the tile's edge (mmqNoZero: they reach no written output). main = D − 1.5·2²³ is
	// the value of mmq8's fma(D, m, −1.5·2²³·m) at m = 1 (both exact), and the fold is the
	// same in the same order: mmq8's bounds and cases.
	for _, fam := range []string{"mmq8c", "mmq8cz"} {
		register(&Family{
			Name:   fam,
			Bounds: mmqBounds(fam),
			Cases:  cases8,
			Run:    runMmqFamily(fam),
		})
	}
	for _, fam := range []string{"mmq8x4", "mmq8x4n", "mmq8x4g"} {
		register(&Family{
			Name:   fam,
			Bounds: mmqBounds(fam),
			Cases:  cases8,
			Run:    runMmqFamily(fam),
		})
	}
}

// mmqInputs is one case's operands in host form.
type mmqInputs struct {
	t                 quant.Type
	rows, tokens, k   int
	rowBlocks         int // Q8_1 blocks between tokens (k/32 + padding)
	w, xq             []byte
	wi                *intRows
	xi                *q81Rows
	hook              int
	bytes, intOps     int64
	ldy               int
	blockRows, blockT int
}

// mmqK rounds k down to a multiple of t's block.
func mmqK(t quant.Type, k int) int {
	info, _ := quant.Lookup(t)
	return k / info.BlockElems * info.BlockElems
}

func newMmqInputs(t quant.Type, dims []int, rng *rand.Rand) (*mmqInputs, error) {
	return newMmqInputsSeg(t, dims, 1, rng)
}

// newMmqInputsSeg is newMmqInputs with activations whose seg consecutive Q8_1 blocks of a
// token share one d (quant.QuantizeQ8_1GPUSeg).
func newMmqInputsSeg(t quant.Type, dims []int, seg int, rng *rand.Rand) (*mmqInputs, error) {
	in := &mmqInputs{t: t, rows: dims[0], tokens: dims[1], k: mmqK(t, dims[2])}
	in.rowBlocks = in.k/32 + rng.IntN(2) // sometimes a padded activation stride
	in.ldy = in.rows + rng.IntN(3)
	rb, err := t.RowBytes(in.k)
	if err != nil {
		return nil, err
	}
	in.w = make([]byte, in.rows*rb)
	for r := 0; r < in.rows; r++ {
		row, err := quant.RandomRow(t, in.k, rng)
		if err != nil {
			return nil, err
		}
		copy(in.w[r*rb:], row)
	}
	x := activations(rng, in.tokens, in.k)
	in.xq = make([]byte, in.tokens*in.rowBlocks*36)
	for tk := 0; tk < in.tokens; tk++ {
		o := tk * in.rowBlocks * 36
		if err := quant.QuantizeQ8_1GPUSeg(x[tk*in.k:(tk+1)*in.k], in.xq[o:o+in.k/32*36], seg); err != nil {
			return nil, err
		}
	}
	if in.wi, err = newIntRows(t, in.w, in.rows, in.k); err != nil {
		return nil, err
	}
	in.xi = newQ81Rows(in.xq, in.tokens, in.k, in.rowBlocks)
	in.hook = rng.IntN(in.k / 32)
	if rng.IntN(2) == 0 {
		in.hook = in.k/32 - 1 // the last group: the ragged K step
	}
	return in, nil
}

// mmqRef is y[t·ldy + r] (padding 0) and S of the same layout.
func mmqRef(in *mmqInputs) (y, s []float64) {
	y, s = make([]float64, in.tokens*in.ldy), make([]float64, in.tokens*in.ldy)
	parallelFor(in.tokens, func(t int) {
		for r := 0; r < in.rows; r++ {
			y[t*in.ldy+r], s[t*in.ldy+r] = prefillDot(in.wi, r, in.xi, t)
		}
	})
	return y, s
}

// mmqISumRef is the hooked group's exact integer sum per output (int32 layout of y).
func mmqISumRef(in *mmqInputs) []int32 {
	out := make([]int32, in.tokens*in.ldy)
	for t := 0; t < in.tokens; t++ {
		for r := 0; r < in.rows; r++ {
			lo, hi := groupInt(in.wi, r, in.xi, t, in.hook)
			out[t*in.ldy+r] = int32(lo + hi)
		}
	}
	return out
}

// mmqVariant returns the weight type and tile of family's (mmq's or moe_prefill's) variant
// whose symbol is symbol.
func mmqVariant(family, symbol string) (t quant.Type, bm, bn int, err error) {
	spec, _ := kernels.LookupSpec(family)
	var vals map[string]string
	for _, v := range spec.AllVariants() {
		if spec.Symbol(v) == symbol {
			vals = v.Values
		}
	}
	t, ok := mmqTypes[vals["type"]]
	if !ok {
		return 0, 0, 0, fmt.Errorf("no weight type for %s", symbol)
	}
	if bm, bn, err = mmqTile(vals["tile"]); err != nil {
		return 0, 0, 0, fmt.Errorf("%s: tile: %w", symbol, err)
	}
	return t, bm, bn, nil
}

// mmqTile parses a tile value "r<BM>t<BN>".
func mmqTile(v string) (bm, bn int, err error) {
	_, err = fmt.Sscanf(v, "r%dt%d", &bm, &bn)
	return bm, bn, err
}

// launch runs one mmq launch; hook < 0 is the normal mode. The padding columns of y
// (ldy > rows) are not written by the kernel, so y is an in-out buffer holding zeros there.
func (in *mmqInputs) launch(h *Harness, fn *gpu.Func, bm, bn, threads, hook int) ([]byte, float64, error) {
	dw, err := h.Input(in.w)
	if err != nil {
		return nil, 0, err
	}
	dx, err := h.Input(in.xq)
	if err != nil {
		return nil, 0, err
	}
	var dy Buf
	if in.ldy == in.rows {
		dy, err = h.Output(4 * in.tokens * in.ldy)
	} else {
		dy, err = h.InOut(make([]byte, 4*in.tokens*in.ldy))
	}
	if err != nil {
		return nil, 0, err
	}
	args := abi.MmqArgs{W: dw.Ptr(), X: dx.Ptr(), Y: dy.Ptr(), Rows: int32(in.rows), K: int32(in.k), Tokens: int32(in.tokens),
		XRowBlocks: int32(in.rowBlocks), Ldy: int32(in.ldy), HookGroup: int32(hook)}
	grid := gpu.Dim3{X: uint32((in.rows + bm - 1) / bm), Y: uint32((in.tokens + bn - 1) / bn), Z: 1}
	got, el, err := h.Run(fn, grid, gpu.Dim3{X: uint32(threads), Y: 1, Z: 1}, args.Bytes(), dy)
	if err != nil {
		return nil, 0, err
	}
	return got[0], el.Seconds() * 1e6, nil
}

func runMmq(h *Harness, symbol string, c Case, bounds []Bound, rng *rand.Rand) (Outcome, error) {
	return runMmqOf("mmq", h, symbol, c, bounds, rng)
}

// runMmqFamily runs the int8 prefill family name (mmq8: mmq's 8-warp tiles, 256-thread
// blocks; mmq8x4, mmq8x4n: activations quantized with the family's shared d,
// kernels.MmqXSeg) exactly as runMmq.
func runMmqFamily(name string) func(*Harness, string, Case, []Bound, *rand.Rand) (Outcome, error) {
	return func(h *Harness, symbol string, c Case, bounds []Bound, rng *rand.Rand) (Outcome, error) {
		return runMmqOf(name, h, symbol, c, bounds, rng)
	}
}

// mmqFamilyThreads is the block size of family (mmq or mmq8): its Spec's Threads.
func mmqFamilyThreads(family string) int {
	spec, _ := kernels.LookupSpec(family)
	return spec.Threads
}

func runMmqOf(family string, h *Harness, symbol string, c Case, bounds []Bound, rng *rand.Rand) (Outcome, error) {
	t, bm, bn, err := mmqVariant(family, symbol)
	if err != nil {
		return Outcome{}, err
	}
	fn, err := h.Mod.Func(symbol)
	if err != nil {
		return Outcome{}, err
	}
	in, err := newMmqInputsSeg(t, c.Dims, kernels.MmqXSeg(family), rng)
	if err != nil {
		return Outcome{}, err
	}
	threads := mmqFamilyThreads(family)
	yb, us, err := in.launch(h, fn, bm, bn, threads, -1)
	if err != nil {
		return Outcome{}, err
	}
	want, s := mmqRef(in)
	y := make([]float64, len(want))
	for i, v := range bytesF32(yb) {
		y[i] = float64(v)
	}
	reports := map[string]Report{"y": CompareRows(y, want, 1, func(i int) float64 { return s[i] })}
	h2 := &Harness{Dev: h.Dev, Mod: h.Mod}
	ib, _, err := in.launch(h2, fn, bm, bn, threads, in.hook)
	if cerr := h2.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("hook launch (group %d): %w", in.hook, err)
	}
	reports["isum"] = CompareExact(bytesInt32(ib), mmqISumRef(in))
	rb, _ := t.RowBytes(in.k)
	bytes := int64(in.rows*rb + len(in.xq) + 4*in.tokens*in.rows)
	return Outcome{Reports: reports, Kernel: us, Bytes: bytes}, checkAll(bounds, reports)
}

// selfCheckMmq holds the reference to quant's exact dots (DotGPU) for every type on the
// case's shape with fewer rows and tokens, and the integer group sums to the decoded
// float64 operands (Σ_g base·d·isum_g + min terms = the exact dot).
func selfCheckMmq(c Case, rng *rand.Rand) error {
	dims := []int{min(c.Dims[0], 3), min(c.Dims[1], 2), c.Dims[2]}
	for _, t := range []quant.Type{quant.Q8_0, quant.Q2_0, quant.Q4_K, quant.Q6_K, quant.IQ2_XS, quant.IQ3_XXS, quant.IQ3_S, quant.IQ1_M} {
		in, err := newMmqInputs(t, dims, rng)
		if err != nil {
			return err
		}
		y, s := mmqRef(in)
		for tk := 0; tk < in.tokens; tk++ {
			o := tk * in.rowBlocks * 36
			for r := 0; r < in.rows; r++ {
				rb := in.wi.rowBytes
				d, err := quant.DotGPU(t, in.w[r*rb:(r+1)*rb], in.xq[o:o+in.k/32*36])
				if err != nil {
					return err
				}
				got := y[tk*in.ldy+r]
				if math.Abs(got-d.Exact) > 1e-12*s[tk*in.ldy+r] || (s[tk*in.ldy+r] == 0 && got != 0) {
					return fmt.Errorf("%v k=%d token %d row %d: reference %v, quant's exact dot %v (S %v)", t, in.k, tk, r, got, d.Exact, s[tk*in.ldy+r])
				}
				if s[tk*in.ldy+r] < math.Abs(got) {
					return fmt.Errorf("%v: S %v < |y| %v", t, s[tk*in.ldy+r], got)
				}
			}
		}
		// The integer sums: rebuilding each group's value from them gives the exact dot.
		isums := make([][]int32, in.k/32)
		for g := range isums {
			in.hook = g
			isums[g] = mmqISumRef(in)
		}
		for tk := 0; tk < in.tokens; tk++ {
			for r := 0; r < in.rows; r++ {
				var v float64
				for g := 0; g < in.k/32; g++ {
					v += in.wi.base[r*in.wi.ng+g] * in.xi.d[tk*in.k/32+g] * float64(isums[g][tk*in.ldy+r])
					v += in.wi.offBase[r*in.wi.ng+g] * in.xi.d[tk*in.k/32+g] * float64(int64(in.wi.offMult[r*in.wi.ng+g])*in.xi.sum[tk*in.k/32+g])
				}
				if want := y[tk*in.ldy+r]; math.Abs(v-want) > 1e-12*s[tk*in.ldy+r] {
					return fmt.Errorf("%v token %d row %d: Σ group sums gives %v, reference %v", t, tk, r, v, want)
				}
			}
		}
	}
	return nil
}
