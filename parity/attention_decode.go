package parity

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/quant"
	"github.com/strata-hip/strata/runtime/gpu"
)

// attention_decode: softmax(q·Kᵀ·scale)·V for one query token per head against n cached
// positions of its kv group (model/forward.go's attention for the last position: its
// scores, softmax and weighted sum are float64 there too), then ·sigmoid(gate). Every
// variant runs the split kernel and then the reduce kernel of its cache format, so the
// split_* and reduce_* variants of a format are proven by the same launches.
//
// Scale of head h's row: max|v| over its kv group's cached values times (1 + Λ_h/64),
// Λ_h = max_j Σ_i |q_i·k_ji|·scale·log₂e, the largest score magnitude the f32 dot can
// err on (in exp2 units).
var attentionDecodeOut = Bound{Name: "out", MaxRowRel: 2e-4, Why: `
	The cache values are exact in both (fp16, or fp16 scale × int8, widened to f32), so the
	error is the f32 arithmetic. Scores: q·scale·log₂e rounds once, the lane's E ≤ 8 fused
	products and 5 butterfly levels ≤ 14 more: |Δs| ≤ 16·2⁻²⁴·Λ; s − m one more (in Λ).
	Weights p = 2^(s−m): relative ≤ ln2·16·2⁻²⁴·Λ + 2⁻²¹ (exp2: ≤ 2 ulp). Rescales by
	c = 2^(m−m') multiply l and acc alike, so c's own error cancels in acc/l; their
	roundings add 2⁻²⁴ each on both, ≤ 14 per wave for exchangeable logits (H_n ≤ 14 new
	maxima expected at n ≤ 2¹⁸): 14·2⁻²³. acc and l are sequential f32 sums of positive
	weights: per wave ≤ split_len ≤ 1024 terms (a wave may own every position of its
	split), + 4 phases, + nsplit ≤ 256 splits, + 3: ≤ 1287·2⁻²⁴ of max|v|·Σp each, both
	(L is summed per thread, butterfly and waves since 2026-11-30: a shorter chain, inside
	the same 256 + 3 terms; the derivation holds for any split_len ≥ 1):
	1.53e-4·max|v|. The output error is ≤ max|v|·(2·ε_p + 1.53e-4) plus the gate (sigmoid
	via expf, ≤ 2⁻²¹ + |g|·2⁻²⁴, |g| ≤ 8) and a/L (2⁻²⁴): ≤ max|v|·(1.6e-4 + 1.3e-6·Λ) ≤
	2e-4·max|v|·(1 + Λ/64) (1.3e-6·64 = 8.3e-5).`}

// attentionCase is one case's shape; Dims: n, nh, nkv, hd, gate (0/1), q magnitude, and
// optionally the split length (absent or 0: attentionSplitLen's).
type attentionCase struct{ n, nh, nkv, hd, gate, qmag, split int }

func attentionShape(c Case) attentionCase {
	s := attentionCase{c.Dims[0], c.Dims[1], c.Dims[2], c.Dims[3], c.Dims[4], c.Dims[5], 0}
	if len(c.Dims) > 6 {
		s.split = c.Dims[6]
	}
	return s
}

// splitLen is the case's split length: its own, or attentionSplitLen's.
func (s attentionCase) splitLen() int {
	if s.split > 0 {
		return s.split
	}
	return attentionSplitLen(s.n)
}

// attentionHeadChunks is how many split blocks share a kv group's G q heads (≤ 8 each):
// the split grid's x is nkv·attentionHeadChunks(G).
func attentionHeadChunks(G int) int { return (G + 7) / 8 }

// attentionSplitLen is the split policy of the cases that name none: at most 256 splits,
// at most 1024 positions each, a multiple of 64. The cases with ",split=" give the GPU
// engine's lengths instead (model/gpu's splitLen: ⌈√(n/6)⌉ rounded up to 8, at least 8 and
// n/256), inside the same limits the bound assumes.
func attentionSplitLen(n int) int {
	s := (n + 255) / 256
	s = (s + 63) / 64 * 64
	return min(max(s, 64), 1024)
}

// attention_decode/store_*: new f32 K/V rows written into the cache in its format.
var attentionStoreCache = Bound{Name: "cache", Exact: true, Why: `
	f16: one round-to-nearest-even conversion per value. q8: per 32-value block the max of
	|x| (exact in any order), d = amax/127 and x/d as correctly rounded f32 divisions,
	roundf, fp16 RNE of d — the Go emulation (attentionStoreRef) does the same float32
	operations, so every byte of K, V and the scales, and every untouched byte, must match.`}

func init() {
	b := []Bound{attentionDecodeOut}
	st := []Bound{attentionStoreCache}
	rq := []Bound{attentionDecodeOut, reduceqOQ}
	register(&Family{
		Name: "attention_decode",
		Bounds: map[string][]Bound{"split_f16": b, "split_q8": b, "reduce_f16": b, "reduce_q8": b,
			"store_f16": st, "store_q8": st, "reduceq_f16": rq, "reduceq_q8": rq,
			"prep_f16": {prepQ, prepKF16, prepCache}, "prep_q8": {prepQ, prepKQ8, prepCache}},
		Cases: []Case{
			{"n=1,nh=16,nkv=2,hd=256,gate", []int{1, 16, 2, 256, 1, 1}},
			{"n=7,nh=4,nkv=4,hd=128", []int{7, 4, 4, 128, 0, 1}},
			{"n=1000,nh=32,nkv=4,hd=128", []int{1000, 32, 4, 128, 0, 1}},
			{"n=300,nh=8,nkv=1,hd=64,gate", []int{300, 8, 1, 64, 1, 1}},
			{"n=513,nh=16,nkv=2,hd=256,gate,large_qk", []int{513, 16, 2, 256, 1, 12}},
			{"n=4096,nh=16,nkv=2,hd=256,gate", []int{4096, 16, 2, 256, 1, 1}},
			{"n=32768,nh=16,nkv=2,hd=256,gate", []int{32768, 16, 2, 256, 1, 1}},
			{"n=131072,nh=16,nkv=2,hd=256,gate", []int{131072, 16, 2, 256, 1, 1}},
			{"n=262144,nh=16,nkv=2,hd=256,gate", []int{262144, 16, 2, 256, 1, 1}},
			{"n=32768,nh=32,nkv=4,hd=128", []int{32768, 32, 4, 128, 0, 1}},
			{"n=2049,nh=24,nkv=2,hd=256,gate,12_per_group", []int{2049, 24, 2, 256, 1, 1}},
			// The engine's split lengths before 2026-11-30 (AttnSplitOld): 8 from 1 to 384 positions, then ⌈√(n/6)⌉ to 8.
			{"n=9,nh=4,nkv=4,hd=128,split=8", []int{9, 4, 4, 128, 0, 1, 8}},
			{"n=263,nh=32,nkv=4,hd=128,split=8", []int{263, 32, 4, 128, 0, 1, 8}},
			{"n=1000,nh=16,nkv=2,hd=256,gate,split=16", []int{1000, 16, 2, 256, 1, 1, 16}},
			{"n=2049,nh=32,nkv=4,hd=128,split=24", []int{2049, 32, 4, 128, 0, 1, 24}},
			{"n=4096,nh=16,nkv=2,hd=256,gate,split=32", []int{4096, 16, 2, 256, 1, 1, 32}},
			// The lengths of 2026-11-30-attn-decode's policy (⌈√(n/64)⌉, ⌈√(n/32)⌉ at hd 256,
			// down to 1 position a split; model/gpu splitLen keeps it for n ≤ 256 at hd ≤ 128
			// only, final-s6): 14 splits of 1, 256 splits (the most) of 1, 4 and 16, 171 of 6,
			// 100 of 2 with large scores.
			{"n=14,nh=32,nkv=4,hd=128,split=1", []int{14, 32, 4, 128, 0, 1, 1}},
			{"n=256,nh=16,nkv=2,hd=256,gate,split=1", []int{256, 16, 2, 256, 1, 1, 1}},
			{"n=1024,nh=16,nkv=2,hd=256,gate,split=6", []int{1024, 16, 2, 256, 1, 1, 6}},
			{"n=1024,nh=32,nkv=4,hd=128,split=4", []int{1024, 32, 4, 128, 0, 1, 4}},
			{"n=4096,nh=32,nkv=4,hd=128,split=16", []int{4096, 32, 4, 128, 0, 1, 16}},
			{"n=200,nh=32,nkv=4,hd=128,large_qk,split=2", []int{200, 32, 4, 128, 0, 12, 2}},
		},
		Run: runAttentionDecode,
		SelfCheck: func(c Case, rng *rand.Rand) error {
			if err := selfCheckAttentionPrep(c, rng); err != nil {
				return fmt.Errorf("prep: %w", err)
			}
			return selfCheckAttentionDecode(c, rng)
		},
	})
}

// attentionKV is a drawn cache: the device bytes and the exact values they encode.
type attentionKV struct {
	k, v    []byte    // f16: 2 bytes a value; q8: int8
	ks, vs  []byte    // q8: fp16 scales per 32 values; nil for f16
	kf, vf  []float32 // decoded values, n × nkv × hd
	q, gate []float32
	maxV    []float64 // per kv head: max |v|
}

// attentionChunk is how many cache values one generator draws (a multiple of 32).
const attentionChunk = 1 << 16

// attentionInputs draws q (N(0,1)·qmag), a cache of N(0,1) keys and values (1% ×8
// outliers; for q8, 3% of blocks zero) and gate logits N(0, 2²) clipped to ±8.
func attentionInputs(rng *rand.Rand, s attentionCase, q8 bool) attentionKV {
	var a attentionKV
	rowVals := s.n * s.nkv * s.hd
	// The cache is drawn in chunks of attentionChunk values (whole q8 blocks), each from
	// its own generator seeded in order from rng, on every core: a 262,144-position case
	// holds 134M values a matrix, which one generator took seconds to draw.
	draw := func() ([]byte, []byte, []float32) {
		vals := make([]float32, rowVals)
		raw, sc := make([]byte, 2*rowVals), []byte(nil)
		if q8 {
			raw, sc = make([]byte, rowVals), make([]byte, 2*(rowVals/32))
		}
		chunk := func(r *rand.Rand, c0, c1 int) {
			for i := c0; i < c1; i++ {
				v := r.NormFloat64()
				if r.IntN(100) == 0 {
					v *= 8
				}
				vals[i] = float32(v)
			}
			if !q8 {
				for i := c0; i < c1; i++ {
					h := quant.F32ToF16(vals[i])
					binary.LittleEndian.PutUint16(raw[2*i:], h)
					vals[i] = quant.F16ToF32(h)
				}
				return
			}
			for b := c0 / 32; b < c1/32; b++ {
				blk := vals[32*b : 32*b+32]
				var amax float32
				for _, v := range blk {
					amax = max(amax, float32(math.Abs(float64(v))))
				}
				if r.IntN(33) == 0 {
					amax = 0
				}
				dh := quant.F32ToF16(amax / 127)
				d := quant.F16ToF32(dh)
				binary.LittleEndian.PutUint16(sc[2*b:], dh)
				for i, v := range blk {
					var q int8
					if d != 0 {
						q = int8(max(-127, min(127, math.Round(float64(v/d)))))
					}
					raw[32*b+i] = byte(q)
					blk[i] = d * float32(q)
				}
			}
		}
		var wg sync.WaitGroup
		sem := make(chan struct{}, runtime.GOMAXPROCS(0))
		for c0 := 0; c0 < rowVals; c0 += attentionChunk {
			r := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
			wg.Add(1)
			sem <- struct{}{}
			go func(c0 int) {
				defer wg.Done()
				chunk(r, c0, min(rowVals, c0+attentionChunk))
				<-sem
			}(c0)
		}
		wg.Wait()
		return raw, sc, vals
	}
	a.k, a.ks, a.kf = draw()
	a.v, a.vs, a.vf = draw()
	a.q = make([]float32, s.nh*s.hd)
	for i := range a.q {
		a.q[i] = float32(rng.NormFloat64() * float64(s.qmag))
	}
	if s.gate == 1 {
		a.gate = make([]float32, s.nh*s.hd)
		for i := range a.gate {
			a.gate[i] = float32(max(-8, min(8, 2*rng.NormFloat64())))
		}
	}
	a.maxV = make([]float64, s.nkv)
	for i, v := range a.vf {
		g := (i / s.hd) % s.nkv
		a.maxV[g] = max(a.maxV[g], math.Abs(float64(v)))
	}
	return a
}

// attentionRef is the float64 reference: out (nh × hd) and each head's row scale. Heads
// run in parallel.
func attentionRef(a attentionKV, s attentionCase) (out, scale []float64) {
	out = make([]float64, s.nh*s.hd)
	scale = make([]float64, s.nh)
	sc := 1 / math.Sqrt(float64(s.hd))
	var wg sync.WaitGroup
	for h := 0; h < s.nh; h++ {
		wg.Add(1)
		go func(h int) {
			defer wg.Done()
			g := h / (s.nh / s.nkv)
			q := a.q[h*s.hd : (h+1)*s.hd]
			scores := make([]float64, s.n)
			mx, lam := math.Inf(-1), 0.0
			for j := 0; j < s.n; j++ {
				k := a.kf[(j*s.nkv+g)*s.hd:]
				var d, ab float64
				for i, qi := range q {
					p := float64(qi) * float64(k[i])
					d += p
					ab += math.Abs(p)
				}
				scores[j] = d * sc
				mx = max(mx, scores[j])
				lam = max(lam, ab*sc*math.Log2E)
			}
			acc := make([]float64, s.hd)
			var sum float64
			for j := 0; j < s.n; j++ {
				p := math.Exp(scores[j] - mx)
				sum += p
				v := a.vf[(j*s.nkv+g)*s.hd:]
				for i := range acc {
					acc[i] += p * float64(v[i])
				}
			}
			for i := range acc {
				o := acc[i] / sum
				if a.gate != nil {
					o *= sigmoid64(float64(a.gate[h*s.hd+i]))
				}
				out[h*s.hd+i] = o
			}
			scale[h] = a.maxV[g] * (1 + lam/64)
		}(h)
	}
	wg.Wait()
	return out, scale
}

// attentionStoreRef writes rows (f32, rows × nkv × hd) at position pos of the cache
// (k: bytes, scales: fp16 per 32 values for q8), as the store kernel.
func attentionStoreRef(cache, scales []byte, rows []float32, pos, rowVals int, q8 bool) {
	base := pos * rowVals
	if !q8 {
		for i, x := range rows {
			binary.LittleEndian.PutUint16(cache[2*(base+i):], quant.F32ToF16(x))
		}
		return
	}
	for b := 0; b < len(rows)/32; b++ {
		blk := rows[32*b : 32*b+32]
		var amax float32
		for _, x := range blk {
			amax = max(amax, float32(math.Abs(float64(x))))
		}
		d := amax / 127
		for i, x := range blk {
			var q int8
			if amax != 0 {
				q = int8(math.Round(float64(x / d)))
			}
			cache[base+32*b+i] = byte(q)
		}
		binary.LittleEndian.PutUint16(scales[2*((base+32*b)/32):], quant.F32ToF16(d))
	}
}

// randomBytes returns n bytes from rng: cache contents the store must leave untouched.
func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func runAttentionStore(h *Harness, symbol string, c Case, bounds []Bound, rng *rand.Rand) (Outcome, error) {
	s := attentionShape(c)
	q8 := strings.HasSuffix(symbol, "_q8")
	rows := min(s.n, 37) // ragged: not a multiple of anything
	pos := s.n - rows
	rowVals := s.nkv * s.hd
	vb := 2
	if q8 {
		vb = 1
	}
	draw := func(n int) []byte { return randomBytes(rng, n) }
	k0, v0 := draw(vb*s.n*rowVals), draw(vb*s.n*rowVals)
	var ks0, vs0 []byte
	if q8 {
		ks0, vs0 = draw(2*s.n*rowVals/32), draw(2*s.n*rowVals/32)
	}
	kn, vn := make([]float32, rows*rowVals), make([]float32, rows*rowVals)
	for i := range kn {
		kn[i], vn[i] = float32(rng.NormFloat64()*3), float32(rng.NormFloat64()*3)
	}
	for b := 0; b+32 <= len(vn); b += 32 * 17 { // some all-zero blocks (d = 0)
		clear(vn[b : b+32])
	}
	kw, vw := bytes.Clone(k0), bytes.Clone(v0)
	ksw, vsw := bytes.Clone(ks0), bytes.Clone(vs0)
	attentionStoreRef(kw, ksw, kn, pos, rowVals, q8)
	attentionStoreRef(vw, vsw, vn, pos, rowVals, q8)
	fn, err := h.Mod.Func(symbol)
	if err != nil {
		return Outcome{}, err
	}
	in, err := h.moInputs(f32Bytes(kn), f32Bytes(vn))
	if err != nil {
		return Outcome{}, err
	}
	kb, err := h.InOut(k0)
	if err != nil {
		return Outcome{}, err
	}
	vbuf, err := h.InOut(v0)
	if err != nil {
		return Outcome{}, err
	}
	outs := []Buf{kb, vbuf}
	args := abi.AttentionDecodeArgs{K: kb.Ptr(), V: vbuf.Ptr(), Kn: in[0].Ptr(), Vn: in[1].Ptr(), N: int32(s.n), Nh: int32(s.nh),
		Nkv: int32(s.nkv), Hd: int32(s.hd), KvPos: int32(pos), KvRows: int32(rows)}
	var ksb, vsb Buf
	if q8 {
		if ksb, err = h.InOut(ks0); err != nil {
			return Outcome{}, err
		}
		if vsb, err = h.InOut(vs0); err != nil {
			return Outcome{}, err
		}
		args.Ks, args.Vs = ksb.Ptr(), vsb.Ptr()
		outs = append(outs, ksb, vsb)
	}
	blocks := (rows*rowVals + 63) / 64
	got, el, err := h.Run(fn, gpu.Dim3{X: uint32(blocks), Y: 1, Z: 1}, moBlock(abi.AttentionDecodeThreads), args.Bytes(), outs...)
	if err != nil {
		return Outcome{}, err
	}
	gotAll := append(append([]byte(nil), h.payload(outs, got, kb)...), h.payload(outs, got, vbuf)...)
	wantAll := append(append([]byte(nil), kw...), vw...)
	if q8 {
		gotAll = append(append(gotAll, h.payload(outs, got, ksb)...), h.payload(outs, got, vsb)...)
		wantAll = append(append(wantAll, ksw...), vsw...)
	}
	reports := map[string]Report{"cache": CompareExact(gotAll, wantAll)}
	written := int64(2 * rows * rowVals * vb)
	if q8 {
		written += int64(2 * 2 * rows * rowVals / 32)
	}
	o := Outcome{Reports: reports, Kernel: el.Seconds() * 1e6, Bytes: int64(8*rows*rowVals) + written}
	return o, checkAll(bounds, reports)
}

func runAttentionDecode(h *Harness, symbol string, c Case, bounds []Bound, rng *rand.Rand) (Outcome, error) {
	if strings.Contains(symbol, "_store_") {
		return runAttentionStore(h, symbol, c, bounds, rng)
	}
	if strings.Contains(symbol, "_prep_") {
		return runAttentionPrep(h, symbol, c, bounds, rng)
	}
	s := attentionShape(c)
	q8 := strings.HasSuffix(symbol, "_q8")
	a := attentionInputs(rng, s, q8)
	want, scale := attentionRef(a, s)
	split, reduce := abi.SymAttentionDecodeSplitF16, abi.SymAttentionDecodeReduceF16
	if q8 {
		split, reduce = abi.SymAttentionDecodeSplitQ8, abi.SymAttentionDecodeReduceQ8
	}
	withQ := strings.Contains(symbol, "_reduceq_") // reduce writing out as Q8_1 too
	if withQ {
		reduce = symbol
	}
	fs, err := h.Mod.Func(split)
	if err != nil {
		return Outcome{}, err
	}
	fr, err := h.Mod.Func(reduce)
	if err != nil {
		return Outcome{}, err
	}
	data := [][]byte{f32Bytes(a.q), a.k, a.v}
	if q8 {
		data = append(data, a.ks, a.vs)
	}
	if a.gate != nil {
		data = append(data, f32Bytes(a.gate))
	}
	in, err := h.moInputs(data...)
	if err != nil {
		return Outcome{}, err
	}
	sl := s.splitLen()
	ns := (s.n + sl - 1) / sl
	part, err := h.Output(4 * s.nh * ns * (s.hd + 2))
	if err != nil {
		return Outcome{}, err
	}
	out, err := h.Output(4 * s.nh * s.hd)
	if err != nil {
		return Outcome{}, err
	}
	outs := []Buf{out}
	var oqPtr uint64 // reduce: none
	if withQ {
		oq, err := h.Output(s.nh * s.hd / 32 * 36)
		if err != nil {
			return Outcome{}, err
		}
		outs, oqPtr = append(outs, oq), oq.Ptr()
	}
	args := abi.AttentionDecodeArgs{Q: in[0].Ptr(), K: in[1].Ptr(), V: in[2].Ptr(), Part: part.Ptr(), Out: out.Ptr(), Oq: oqPtr,
		N: int32(s.n), Nh: int32(s.nh), Nkv: int32(s.nkv), Hd: int32(s.hd), SplitLen: int32(sl), Nsplit: int32(ns),
		Scale: float32(1 / math.Sqrt(float64(s.hd)))}
	next := 3
	if q8 {
		args.Ks, args.Vs = in[3].Ptr(), in[4].Ptr()
		next = 5
	}
	if a.gate != nil {
		args.Gate = in[next].Ptr()
	}
	block := moBlock(abi.AttentionDecodeThreads)
	ab := args.Bytes()
	got, el, err := h.runSeq([]seqLaunch{
		{fs, gpu.Dim3{X: uint32(s.nkv * attentionHeadChunks(s.nh/s.nkv)), Y: uint32(ns), Z: 1}, block, ab},
		{fr, gpu.Dim3{X: uint32(s.nh), Y: 1, Z: 1}, block, ab},
	}, outs...)
	if err != nil {
		return Outcome{}, err
	}
	reports := map[string]Report{"out": CompareRows(moF64s(bytesF32(got[0])), want, s.hd, func(r int) float64 { return scale[r] })}
	if withQ {
		wq := make([]byte, len(got[1]))
		if err := quant.QuantizeQ8_1GPU(bytesF32(got[0]), wq); err != nil {
			return Outcome{}, err
		}
		reports["oq"] = CompareExact(got[1], wq)
	}
	// Bytes: the cache read once (K and V, scales), q, gate and out.
	kv := int64(len(a.k) + len(a.v) + len(a.ks) + len(a.vs))
	o := Outcome{Reports: reports, Kernel: el.Seconds() * 1e6, Bytes: kv + int64(4*s.nh*s.hd*(2+s.gate))}
	return o, checkAll(bounds, reports)
}

// selfCheckAttentionDecode: the reference equals the split-and-merge computation the
// kernels perform (online softmax per chunk, merged by max and rescale), done in float64,
// for the case's split policy; and an f32 emulation of the kernels' order stays within
// the declared bound. Large cases are skipped here (the CPU cost is the GPU run's).
func selfCheckAttentionDecode(c Case, rng *rand.Rand) error {
	s := attentionShape(c)
	if s.n > 4096 {
		return nil
	}
	for _, q8 := range []bool{false, true} {
		a := attentionInputs(rng, s, q8)
		want, scale := attentionRef(a, s)
		online := attentionOnline(a, s, s.splitLen(), false)
		naive := CompareRows(online, want, s.hd, func(r int) float64 { return scale[r] })
		if naive.MaxRowRel > 1e-12 {
			return fmt.Errorf("q8=%v: float64 online softmax differs from the naive softmax: %s", q8, naive.Worst)
		}
		f32 := attentionOnline(a, s, s.splitLen(), true)
		if err := attentionDecodeOut.Verify(CompareRows(f32, want, s.hd, func(r int) float64 { return scale[r] })); err != nil {
			return fmt.Errorf("q8=%v: f32 emulation of the kernels: %w", q8, err)
		}
	}
	return nil
}

// attentionOnline computes the kernels' algorithm on the host: splits of splitLen
// positions, each head's P = 4/min(Gc, 4) waves per split taking positions round robin
// (the Gc ≤ 8 heads of a block's head chunk share its 4 waves), each with a running max and
// rescaled sums, merged per split and then across splits. In f32 (with exact exp2 of
// the f32 argument) when f32 is set, else in float64.
func attentionOnline(a attentionKV, s attentionCase, splitLen int, f32 bool) []float64 {
	rnd := func(x float64) float64 {
		if f32 {
			return float64(float32(x))
		}
		return x
	}
	const waves = abi.AttentionDecodeThreads / 32
	out := make([]float64, s.nh*s.hd)
	ns := (s.n + splitLen - 1) / splitLen
	scale := 1 / math.Sqrt(float64(s.hd))
	qs := rnd(scale * math.Log2E)
	if !f32 {
		qs = scale * math.Log2E
	}
	for h := 0; h < s.nh; h++ {
		g := h / (s.nh / s.nkv)
		q := make([]float64, s.hd)
		for i := range q {
			q[i] = rnd(float64(a.q[h*s.hd+i]) * qs)
		}
		G := s.nh / s.nkv
		h0 := (h % G) / 8 * 8
		P := waves / min(min(G-h0, 8), waves)
		ms, ls := make([]float64, ns), make([]float64, ns)
		accs := make([][]float64, ns)
		for sp := 0; sp < ns; sp++ {
			wm, wl := make([]float64, P), make([]float64, P)
			wacc := make([][]float64, P)
			for w := 0; w < P; w++ {
				m, l := math.Inf(-1), 0.0
				acc := make([]float64, s.hd)
				for j := sp*splitLen + w; j < min(s.n, (sp+1)*splitLen); j += P {
					k := a.kf[(j*s.nkv+g)*s.hd:]
					v := a.vf[(j*s.nkv+g)*s.hd:]
					var d float64
					for i := range q {
						d = rnd(d + q[i]*float64(k[i]))
					}
					mn := math.Max(m, d)
					cc := rnd(math.Exp2(rnd(m - mn)))
					p := rnd(math.Exp2(rnd(d - mn)))
					l = rnd(rnd(l*cc) + p)
					for i := range acc {
						acc[i] = rnd(rnd(acc[i]*cc) + rnd(p*float64(v[i])))
					}
					m = mn
				}
				wm[w], wl[w], wacc[w] = m, l, acc
			}
			M := wm[0]
			for _, m := range wm[1:] {
				M = math.Max(M, m)
			}
			accs[sp] = make([]float64, s.hd)
			for w := 0; w < P; w++ {
				f := rnd(math.Exp2(rnd(wm[w] - M)))
				if math.IsInf(wm[w], -1) {
					f = 0
				}
				ls[sp] = rnd(ls[sp] + rnd(wl[w]*f))
				for i := range accs[sp] {
					accs[sp][i] = rnd(accs[sp][i] + rnd(wacc[w][i]*f))
				}
			}
			ms[sp] = M
		}
		M := ms[0]
		for _, m := range ms[1:] {
			M = math.Max(M, m)
		}
		// L as the reduce sums it: thread t over the splits sp ≡ t (mod the block), then each
		// 32-thread wave's xor butterfly, then the waves in order.
		const threads = abi.AttentionDecodeThreads
		var lt [threads]float64
		for sp := 0; sp < ns; sp++ {
			lt[sp%threads] = rnd(lt[sp%threads] + rnd(ls[sp]*rnd(math.Exp2(rnd(ms[sp]-M)))))
		}
		var L float64
		for w := 0; w < waves; w++ {
			v := lt[32*w : 32*w+32]
			for m := 16; m > 0; m >>= 1 {
				var nv [32]float64
				for i := range nv {
					nv[i] = rnd(v[i] + v[i^m])
				}
				copy(v, nv[:])
			}
			if w == 0 {
				L = v[0]
			} else {
				L = rnd(L + v[0])
			}
		}
		for i := 0; i < s.hd; i++ {
			var acc float64
			for sp := 0; sp < ns; sp++ {
				acc = rnd(acc + rnd(accs[sp][i]*rnd(math.Exp2(rnd(ms[sp]-M)))))
			}
			o := rnd(acc / L)
			if a.gate != nil {
				o = rnd(o * rnd(sigmoid64(float64(a.gate[h*s.hd+i]))))
			}
			out[h*s.hd+i] = o
		}
	}
	return out
}
