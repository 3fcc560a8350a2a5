package parity

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/runtime/gpu"
)

// attention_prefill: causal attention of t new tokens (query i at position n − t + i sees
// positions 0..n − t + i), as model/forward.go's attention for a prompt: float64 scores,
// softmax and weighted sums there too; then ·sigmoid(gate). The reference is naive (the
// whole score row per query); selfCheckAttentionPrefill holds it to the decode reference
// query by query. Row scale as attention_decode's: max|v| of the kv group times
// (1 + Λ/64), Λ the query's largest score magnitude in exp2 units.
var attentionPrefillOut = Bound{Name: "out", MaxRowRel: 5e-4, Why: `
	As attention_decode/out; the kernel's summation orders (since 2026-11-30): lane ℓ of a
	wave owns positions j0 + ℓ of each 32-position tile and computes a row's score itself,
	each 8 values' products (one 16-byte chunk of k; q8: half of one) summed in a chain of
	8 and added to the score: ≤ hd/8 + 8 + 1 ≤ 41 roundings (hd ≤ 256), |Δs| ≤ 41·2⁻²⁴·Λ,
	output term 2·ln2·41·2⁻²⁴·Λ ≤ 3.4e-6·Λ. The max is the running max over whole tiles,
	p = 2^(s − m) as there; l: per lane ⌈n/32⌉ rescale-and-adds, then 5 butterfly levels;
	acc: rescaled by c once per tile (c = 1 exactly unless the max grew: the rescale count
	as there) and the tile's p_j·v_j added in j order, n multiply-adds in all. Both sums'
	chains are no longer than one sequential f32 sum over every position: acc and l each
	err ≤ (n + 3)·2⁻²⁴ of max|v|·Σp; at n ≤ 4096 (the largest case) both: 2·4099·2⁻²⁴ =
	4.89e-4·max|v|. Weights (2·(2⁻²¹ + 14·2⁻²³) = 4.3e-6), gate and division (≤ 1e-6):
	≤ max|v|·(4.95e-4 + 3.4e-6·Λ) ≤ 5e-4·max|v|·(1 + Λ/64) (3.4e-6·64 = 2.2e-4 ≤ 5e-4).`}

// attentionPrefillOldOut is the first kernel's (variants f16old, q8old, kept to time
// against).
var attentionPrefillOldOut = Bound{Name: "out", MaxRowRel: 5e-4, Why: `
	As attention_decode/out, except that one wave accumulates a query over every position it
	sees in one sequential f32 sum (no split): acc and l each err ≤ (n + 3)·2⁻²⁴ of
	max|v|·Σp; at n ≤ 4096 (the largest case) both: 2·4099·2⁻²⁴ = 4.89e-4·max|v|. Weights
	(2·(2⁻²¹ + 14·2⁻²³) = 4.3e-6), gate and division (≤ 1e-6) and the score term 1.3e-6·Λ
	as there: ≤ max|v|·(4.95e-4 + 1.3e-6·Λ) ≤ 5e-4·max|v|·(1 + Λ/64).`}

// attentionPrefillMMAOut is the tensor-core kernel's (variant f16mma, NVIDIA only): q and p
// are rounded to f16 for mma.sync (f32 accumulate), which costs far more than the f32
// kernels' summation orders; a worst-case derivation, valid for n ≤ 4096 and Λ ≤ 512 (the
// cases: n ≤ 4096, Λ of large_qk (hd 256, q magnitude 12) about 2.3e2).
var attentionPrefillMMAOut = Bound{Name: "out", MaxRowRel: 0.064, Why: `
	Λ, max|v| as attention_decode/out; s in exp2 units. (a) q·scale·log2(e)·2⁶ is rounded to
	f16 once: relative 2⁻¹¹ (plus 3·2⁻²⁴ for the f32 factor and product), or, below 2⁻¹⁴
	(subnormal), absolute 2⁻²⁵, i.e. 2⁻³¹ after the exact 2⁻⁶: |Δs| ≤ (2⁻¹¹ + 3·2⁻²⁴)·Λ +
	hd·2⁻³¹·max|k| (max|k| ≤ 64 in these draws: ≤ 7.6e-6). (b) q·k: hd/16 ≤ 16 chained
	m16n8k16 mma (f16 products exact), each taken as ≤ 17 truncations of 2⁻²³ of the row's
	Σ|q k| (the tensor cores align and truncate): ≤ 16·17·2⁻²³·Λ = 3.25e-5·Λ. So |Δs| ≤ D =
	5.211e-4·Λ + 7.6e-6 (the f32 argument s − m + 15 adds ≤ 2⁻²⁴ of it). (c) p̃ = f16(ex2(s −
	m + 15)): ex2 2⁻²², f16 2⁻¹¹ (the 2¹⁵ keeps p̃ ≥ 2⁻¹⁴ for s − m ≥ −29; smaller ones err ≤
	2⁻²⁵ absolute against l ≥ 2¹⁴: n·2⁻³⁹ ≤ 1e-8); acc and l are rescaled by the same c, but
	ex2's 2⁻²² in c is a relative error of the earlier weights, ≤ ⌈n/32⌉ times: 3.1e-5 at n
	= 4096. Each weight: p̃_j = 2^(s_j − m + 15)·(1 + η_j), |η_j| ≤ η = 2^D·(1 + 2⁻¹¹)(1 +
	2⁻²²) − 1 + 3.1e-5, and l sums the same p̃ the products use, so the output is a convex
	combination of v with weights off by Σ|w̃ − w| ≤ 2η/(1 − η) (convex in Λ: 1.04e-3 at Λ = 0,
	0.5118 at Λ = 512, so ≤ 1.04e-3 + 9.976e-4·Λ on [0, 512]). (d) acc: per 16 keys one mma
	into acc (≤ 17 truncations of 2⁻²³ of max|v|·Σp̃; p̃·v exact) and one rescale per tile:
	(⌈n/16⌉·17·2⁻²³ + ⌈n/32⌉·2⁻²⁴) = 5.26e-4 at n = 4096; l: per lane n/4 adds and ⌈n/32⌉
	rescales, then 2 quad adds: (n/4 + n/32 + 2)·2⁻²⁴ = 6.9e-5; gate and division ≤ 1e-6.
	In all ≤ max|v|·(1.636e-3 + 9.976e-4·Λ) ≤ 0.064·max|v|·(1 + Λ/64) (0.064/64 = 1e-3).
	A worst case: the roundings are independent, the measured rows sit far below it.`}

// attentionPrefillMMA2Out is variant f16mma256's (NVIDIA only, hd 256): f16mma's arithmetic
// except that a row's score is summed by two warps, each over half of hd, and the two f32
// partial sums added once (the same sum in both warps, so both take the same m and p̃).
var attentionPrefillMMA2Out = Bound{Name: "out", MaxRowRel: 0.064, Why: `
	As attention_prefill/f16mma/out, with (b) split: two chains of hd/32 ≤ 8 m16n8k16 mma
	(each ≤ 17 truncations of 2⁻²³ of the row's Σ|q k|, 16 in all as there) and one f32
	add of the two partial scores (≤ 2⁻²⁴·Λ): |Δs| ≤ D = 5.2116e-4·Λ + 7.6e-6. (c) as
	there: 2η/(1 − η) is 1.05e-3 at Λ = 0 and 0.51161 at Λ = 512 (0.51153 without the add),
	under the line 1.04e-3 + 9.976e-4·Λ's 0.5118 at Λ = 512 and, being convex in Λ, under
	1.06e-3 + 9.976e-4·Λ on [0, 512]. (d) unchanged (key tiles of 32, one mma per 16 keys
	into each output value, the same l). In all ≤ max|v|·(1.66e-3 + 9.976e-4·Λ) ≤
	0.064·max|v|·(1 + Λ/64).`}

// prefillShape is one case; Dims: t, n, nh, nkv, hd, gate (0/1), q magnitude.
type prefillShape struct{ t, n, nh, nkv, hd, gate, qmag int }

func prefillCase(c Case) prefillShape {
	d := c.Dims
	return prefillShape{d[0], d[1], d[2], d[3], d[4], d[5], d[6]}
}

func init() {
	register(&Family{
		Name: "attention_prefill",
		Bounds: map[string][]Bound{"f16": {attentionPrefillOut}, "q8": {attentionPrefillOut},
			"f16old": {attentionPrefillOldOut}, "q8old": {attentionPrefillOldOut}, "f16mma": {attentionPrefillMMAOut},
			"f16mma256": {attentionPrefillMMA2Out}},
		Applies: attentionPrefillApplies,
		Cases: []Case{
			{"t=1,n=1,nh=4,nkv=2,hd=128", []int{1, 1, 4, 2, 128, 0, 1}},
			{"t=7,n=7,nh=4,nkv=4,hd=64", []int{7, 7, 4, 4, 64, 0, 1}},
			{"t=100,n=100,nh=16,nkv=2,hd=256,gate", []int{100, 100, 16, 2, 256, 1, 1}},
			{"t=37,n=1037,nh=32,nkv=4,hd=128", []int{37, 1037, 32, 4, 128, 0, 1}},
			{"t=65,n=65,nh=16,nkv=2,hd=256,gate,large_qk", []int{65, 65, 16, 2, 256, 1, 12}},
			{"t=2048,n=2048,nh=16,nkv=2,hd=256,gate", []int{2048, 2048, 16, 2, 256, 1, 1}},
			{"t=512,n=4096,nh=32,nkv=4,hd=128", []int{512, 4096, 32, 4, 128, 0, 1}},
		},
		Run:       runAttentionPrefill,
		SelfCheck: selfCheckAttentionPrefill,
	})
}

// attentionPrefillApplies: the head-size variant (f16mma256) runs the cases of its head
// size only.
func attentionPrefillApplies(variant string, c Case) bool {
	return variant != "f16mma256" || prefillCase(c).hd == 256
}

// prefillInputs draws the cache (attention_decode's draw, f16 or int8), t queries and t
// gates.
func prefillInputs(rng *rand.Rand, s prefillShape, q8 bool) (attentionKV, []float32, []float32) {
	a := attentionInputs(rng, attentionCase{n: s.n, nh: s.nh, nkv: s.nkv, hd: s.hd, gate: 0, qmag: s.qmag}, q8)
	q := make([]float32, s.t*s.nh*s.hd)
	for i := range q {
		q[i] = float32(rng.NormFloat64() * float64(s.qmag))
	}
	var gate []float32
	if s.gate == 1 {
		gate = make([]float32, len(q))
		for i := range gate {
			gate[i] = moClip(2*rng.NormFloat64(), 8)
		}
	}
	return a, q, gate
}

// prefillRef is the naive float64 causal reference: out (t·nh rows of hd) and row scales.
// Rows run in parallel.
func prefillRef(a attentionKV, q, gate []float32, s prefillShape) (out, scale []float64) {
	out = make([]float64, s.t*s.nh*s.hd)
	scale = make([]float64, s.t*s.nh)
	sc := 1 / math.Sqrt(float64(s.hd))
	p0 := s.n - s.t
	var wg sync.WaitGroup
	work := make(chan int, s.t*s.nh)
	for r := 0; r < s.t*s.nh; r++ {
		work <- r
	}
	close(work)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			scores := make([]float64, s.n)
			acc := make([]float64, s.hd)
			for row := range work {
				i, h := row/s.nh, row%s.nh
				g := h / (s.nh / s.nkv)
				qv := q[row*s.hd : (row+1)*s.hd]
				vis := p0 + i + 1
				mx, lam := math.Inf(-1), 0.0
				for j := 0; j < vis; j++ {
					k := a.kf[(j*s.nkv+g)*s.hd:]
					var d, ab float64
					for e, qe := range qv {
						p := float64(qe) * float64(k[e])
						d += p
						ab += math.Abs(p)
					}
					scores[j] = d * sc
					mx = max(mx, scores[j])
					lam = max(lam, ab*sc*math.Log2E)
				}
				clear(acc)
				var sum float64
				for j := 0; j < vis; j++ {
					p := math.Exp(scores[j] - mx)
					sum += p
					v := a.vf[(j*s.nkv+g)*s.hd:]
					for e := range acc {
						acc[e] += p * float64(v[e])
					}
				}
				for e := range acc {
					o := acc[e] / sum
					if gate != nil {
						o *= sigmoid64(float64(gate[row*s.hd+e]))
					}
					out[row*s.hd+e] = o
				}
				scale[row] = a.maxV[g] * (1 + lam/64)
			}
		}()
	}
	wg.Wait()
	return out, scale
}

func runAttentionPrefill(h *Harness, symbol string, c Case, bounds []Bound, rng *rand.Rand) (Outcome, error) {
	s := prefillCase(c)
	q8 := symbol == abi.SymAttentionPrefillQ8 || symbol == abi.SymAttentionPrefillQ8old
	a, q, gate := prefillInputs(rng, s, q8)
	want, scale := prefillRef(a, q, gate, s)
	fn, err := h.Mod.Func(symbol)
	if err != nil {
		return Outcome{}, err
	}
	data := [][]byte{f32Bytes(q), a.k, a.v}
	if q8 {
		data = append(data, a.ks, a.vs)
	}
	if gate != nil {
		data = append(data, f32Bytes(gate))
	}
	in, err := h.moInputs(data...)
	if err != nil {
		return Outcome{}, err
	}
	out, err := h.Output(4 * len(q))
	if err != nil {
		return Outcome{}, err
	}
	args := abi.AttentionPrefillArgs{Q: in[0].Ptr(), K: in[1].Ptr(), V: in[2].Ptr(), Out: out.Ptr(), T: int32(s.t), N: int32(s.n),
		Nh: int32(s.nh), Nkv: int32(s.nkv), Hd: int32(s.hd), Scale: float32(1 / math.Sqrt(float64(s.hd)))}
	next := 3
	if q8 {
		args.Ks, args.Vs = in[3].Ptr(), in[4].Ptr()
		next = 5
	}
	if gate != nil {
		args.Gate = in[next].Ptr()
	}
	grid := attentionPrefillGrid(symbol, s.t, s.nh, s.nkv)
	got, el, err := h.Run(fn, grid, moBlock(abi.AttentionPrefillThreads), args.Bytes(), out)
	if err != nil {
		return Outcome{}, err
	}
	reports := map[string]Report{"out": CompareRows(moF64s(bytesF32(got[0])), want, s.hd, func(r int) float64 { return scale[r] })}
	o := Outcome{Reports: reports, Kernel: el.Seconds() * 1e6, Bytes: int64(len(a.k)+len(a.v)+len(a.ks)+len(a.vs)) + int64(4*len(q)*(2+s.gate))}
	return o, checkAll(bounds, reports)
}

// attentionPrefillGrid is abi.AttentionPrefillGrid of kernel symbol as a launch grid.
func attentionPrefillGrid(symbol string, t, nh, nkv int) gpu.Dim3 {
	x, y := abi.AttentionPrefillGrid(strings.TrimPrefix(symbol, "strata_attention_prefill_"), t, nh, nkv)
	return gpu.Dim3{X: x, Y: y, Z: 1}
}

// selfCheckAttentionPrefill: for the cases up to n = 1100, each query's row equals the
// decode reference run on the cache cut at that query's position (1e-12).
func selfCheckAttentionPrefill(c Case, rng *rand.Rand) error {
	s := prefillCase(c)
	if s.n > 1100 {
		return nil
	}
	a, q, gate := prefillInputs(rng, s, true)
	want, _ := prefillRef(a, q, gate, s)
	for i := 0; i < s.t; i++ {
		n := s.n - s.t + i + 1
		d := a
		d.q = q[i*s.nh*s.hd : (i+1)*s.nh*s.hd]
		if gate != nil {
			d.gate = gate[i*s.nh*s.hd : (i+1)*s.nh*s.hd]
		}
		d.kf, d.vf = a.kf[:n*s.nkv*s.hd], a.vf[:n*s.nkv*s.hd]
		dec, _ := attentionRef(d, attentionCase{n: n, nh: s.nh, nkv: s.nkv, hd: s.hd, gate: s.gate, qmag: s.qmag})
		if err := moCloseRel(dec, want[i*s.nh*s.hd:(i+1)*s.nh*s.hd], maxAbs(dec), 1e-12); err != nil {
			return fmt.Errorf("query %d: prefill and decode references differ: %w", i, err)
		}
	}
	return nil
}

func maxAbs(v []float64) float64 {
	var m float64
	for _, x := range v {
		m = max(m, math.Abs(x))
	}
	return m
}
