package gpu

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/quant"
	rt "github.com/strata-hip/strata/runtime/gpu"
)

// The batched prompt path (Options.Chunk > 0, qwen3moe): a prompt runs in chunks of up to
// Chunk tokens, each layer over the whole chunk at once —
//
//	rmsnorm_row over T rows (Q8_1 fused) → mmq for q, k and v (their rows of the fused
//	q|k|v matrix, three launches: attention_prefill and the store stage want q, k and v
//	each contiguous) → per-head norms and RoPE over T·heads rows (per-token positions) →
//	store stage with kv_rows = T → attention_prefill (causal, after the cached positions)
//	→ quantize_q8_1 over T rows → mmq output projection → rmsnorm_row add over T rows →
//	router → moe_decode phase 0 over T tokens (top-k) → moe_prefill phases 0–3, whose
//	combine accumulates straight into the residual stream.
//
// Dense matrices whose type mmq has no variant for (F16/BF16, f32 stored as F16: the
// tiny models' router) go through mmvq, 8 columns per launch (its most).
//
// moe_prefill reads expert e at wg + e·gu_mat_bytes (dense stacks, e < 1024), not through
// slot tables: the engine passes the address of a slot as the stack's base and, as ids,
// slot indices relative to it (slots are SlotBytes apart inside a slab). When every
// expert was placed at load with a layer's experts in consecutive slots of one slab
// ("direct" layers) the ids phase 0 writes are already those indices and nothing comes
// back to the host. Otherwise, per layer, the chunk's ids come back once (one sync), the
// cache looks them up (per use, as token by token would), the misses are copied through
// the copier, and when the slots in use lie in one window (one slab, < 1024 slots) the
// pairs are remapped to indices in it and moe_prefill runs. When they do not (the cache's
// slots are scattered over slabs), or the chunk needs more of the layer's experts than the
// cache holds (then the layer runs in token ranges that fit, a sync between them), the
// layer's experts run through moe_decode over the range's tokens (slot tables; it reads
// each token's experts on its own — slower, but one launch set per range), and the next
// norm adds its output.
//
// Not batched (token by token through the decode path): qwen3next (its delta-net chunked
// form and gated attention are not wired here), the staging-ring mode (pinning failed),
// Options.HostKV.

// DefaultChunk is the prompt chunk strata-run uses.
const DefaultChunk = 512

// bnTile is the token tile of the mmq and moe_prefill variants the engine launches (t64).
const bnTile = 64

// maxStack is moe_prefill's most experts per launch (a variable: the emulator tests lower it
// to reach the split launches).
var maxStack = 1024

const (
	bufPX      = "p_x"      // residual stream, f32 [N][H]
	bufPXN     = "p_xn"     // normed, f32 [N][H]
	bufPXQ     = "p_xq"     // Q8_1 [N][H/32]
	bufPQ      = "p_q"      // queries, f32 [N][nh·hd]
	bufPK      = "p_k"      // keys, f32 [N][nkv·hd]
	bufPV      = "p_v"      // values, f32 [N][nkv·hd]
	bufPO      = "p_o"      // attention output, f32 [N][nh·hd]
	bufPOQ     = "p_oq"     // its Q8_1 blocks
	bufPProj   = "p_proj"   // output projection, f32 [N][H]
	bufPRouter = "p_router" // router logits, f32 [N][E]
	bufPIDs    = "p_ids"    // top-k, i32 [N][K]
	bufPWts    = "p_wts"    // f32 [N][K]
	bufPErr    = "p_err"    // u32 [N][K] (slot flags of moe_decode phase 0; unused)
	bufPIdx    = "p_idx"    // slot indices relative to a launch's base, i32 [N][K]
	bufPSched  = "p_sched"  // moe_prefill schedule
	bufPList   = "p_list"   // its pair lists, i32 [N·K]
	bufPHq     = "p_hq"     // SwiGLU output, Q8_1 [N·K][F/32]
	bufPYp     = "p_yp"     // down output per pair, f32 [N·K][H]
	bufPPos    = "p_pos"    // positions, i32 [N]
)

func maxTiles(pairs, experts int) int { return (pairs+bnTile-1)/bnTile + experts }

// prefillNeeds is the scratch of a chunk of n tokens.
func prefillNeeds(c *model.Config, n int) []Need {
	H, E, K, F := c.Embd, c.Experts, c.ExpertsUsed, c.ExpertFF
	qd, kvd := c.Heads*c.HeadDim, c.HeadsKV*c.HeadDim
	f32 := func(x int) uint64 { return 4 * uint64(n) * uint64(x) }
	st := maxStack // a launch's window spans up to maxStack slot indices, whatever E is
	return []Need{
		{bufPX, KindScratch, f32(H)}, {bufPXN, KindScratch, f32(H)}, {bufPXQ, KindScratch, uint64(n) * q81Bytes(H)},
		{bufPQ, KindScratch, f32(qd)}, {bufPK, KindScratch, f32(kvd)}, {bufPV, KindScratch, f32(kvd)},
		{bufPO, KindScratch, f32(qd)}, {bufPOQ, KindScratch, uint64(n) * q81Bytes(qd)}, {bufPProj, KindScratch, f32(H)},
		{bufPRouter, KindScratch, f32(E)}, {bufPIDs, KindScratch, f32(K)}, {bufPWts, KindScratch, f32(K)},
		{bufPErr, KindScratch, f32(K)}, {bufPIdx, KindScratch, f32(K)},
		{bufPSched, KindScratch, 4 * uint64(2*st+1+2*maxTiles(n*K, st))}, {bufPList, KindScratch, f32(K)},
		{bufPHq, KindScratch, uint64(n*K) * q81Bytes(F)}, {bufPYp, KindScratch, f32(K * H)}, {bufPPos, KindStaging, f32(1)},
	}
}

// prefillVariant picks the mma variant of family for type t at the t64 tile, or dp4a.
func (e *Engine) prefillVariant(family string, t quant.Type) (string, bool) {
	tv, ok := typeVariant[t]
	if !ok || t == quant.F16 || t == quant.BF16 {
		return "", false
	}
	co, _ := abi.Find(e.ks.target, family)
	for _, core := range []string{"mma", "dp4a"} {
		v := tv + "_" + core + "_r64t64"
		if _, ok := co.Symbol(v); ok {
			return v, true
		}
	}
	return "", false
}

// preparePrefill loads the batched path's kernels and finds the direct layers.
func (e *Engine) preparePrefill() error {
	c := &e.cfg
	keys := []struct{ fam, variant string }{{"attention_prefill", "f16"}}
	add := func(fam string, t quant.Type) {
		if v, ok := e.prefillVariant(fam, t); ok {
			keys = append(keys, struct{ fam, variant string }{fam, v})
		}
	}
	for _, l := range append([]gLayer{{wq: e.head}}, e.layers...) {
		for _, d := range []dmat{l.wq, l.wk, l.wv, l.wo, l.router} {
			if d.variant != "" {
				add("mmq", d.typ)
			}
		}
	}
	v, ok := e.prefillVariant("moe_prefill", e.expType)
	if !ok {
		return fmt.Errorf("%w: moe_prefill has no t64 variant for %s experts", ErrMissingKernel, e.expType)
	}
	e.moeVar = v
	keys = append(keys, struct{ fam, variant string }{"moe_prefill", v})
	for _, k := range keys {
		f, err := e.ks.fn(k.fam, k.variant)
		if err != nil {
			return err
		}
		e.fns[k.fam+"/"+k.variant] = f
	}
	e.direct = make([]int, c.Layers)
	for l := range e.direct {
		e.direct[l] = -1
		if !e.resident || c.Experts > maxStack {
			continue
		}
		s0, ok := e.cache.Resident(Key{int32(l), 0})
		if !ok || s0/e.plan.SlabSlots != (s0+c.Experts-1)/e.plan.SlabSlots {
			continue
		}
		good := true
		for x := 1; x < c.Experts && good; x++ {
			s, ok := e.cache.Resident(Key{int32(l), int32(x)})
			good = ok && s == s0+x
		}
		if good {
			e.direct[l] = s0
		}
	}
	return nil
}

// SetTokenByToken forces prompts through the decode path (on) or lets them take the
// batched path when the engine has one (off): a switch for comparisons and a fallback.
func (e *Engine) SetTokenByToken(on bool) { e.tokenByToken = on }

// Batched reports whether a prompt of n tokens would take the batched path.
func (e *Engine) Batched(n int) bool { return e.batched(n) }

// batched reports whether Forward runs a prompt of n tokens through the batched path.
func (e *Engine) batched(n int) bool {
	return n > 1 && e.chunk > 0 && !e.tokenByToken && e.cfg.Arch == model.ArchQwen3MoE && e.ring == 0 && !e.hostKV
}

// gemm is y[t][r] = W[r]·x[t] for T tokens: mmq when the type has a variant, else mmvq in
// launches of 8 columns. xq is Q8_1 [T][k/32], xf f32 [T][k]; y rows ldy apart.
func (e *Engine) gemm(w dmat, xq, xf rt.DevPtr, T int, y rt.DevPtr, ldy int) error {
	if v, ok := e.prefillVariant("mmq", w.typ); ok {
		a := abi.MmqArgs{W: uint64(w.ptr), X: uint64(xq), Y: uint64(y), Rows: int32(w.rows), K: int32(w.k), Tokens: int32(T),
			XRowBlocks: int32(w.k / 32), Ldy: int32(ldy), HookGroup: -1}
		return e.launch("mmq/"+v, rt.Dim3{X: blocks(w.rows, 64), Y: blocks(T, bnTile), Z: 1}, abi.MmqThreads, a.Bytes())
	}
	for c0 := 0; c0 < T; c0 += 8 {
		a := abi.MmvqArgs{W: uint64(w.ptr), Xq: uint64(xq.Add(uintptr(c0 * w.k / 32 * q81Block))), Xf: uint64(xf.Add(uintptr(4 * c0 * w.k))),
			Y: uint64(y.Add(uintptr(4 * c0 * ldy))), Rows: int32(w.rows), K: int32(w.k), Ncols: int32(min(8, T-c0)),
			XColStride: int32(w.k), YColStride: int32(ldy)}
		if err := e.launch("mmvq/"+w.variant, dim(e.mmvqBlocks(w)), abi.MmvqThreads, a.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// rowNorm is an RMSNorm over T whole rows of H (rmsnorm_row, a block per row).
func (e *Engine) rowNorm(variant string, a abi.RmsnormArgs) error {
	a.Eps = e.cfg.Eps
	if e.noRowNorm {
		return e.launch("rmsnorm/"+variant, dim(blocks(int(a.Rows), 8)), abi.RmsnormThreads, a.Bytes())
	}
	r := abi.RmsnormRowArgs{X: a.X, R: a.R, W: a.W, Xo: a.Xo, Y: a.Y, Q: a.Q, N: a.N, Rows: a.Rows, Heads: a.Heads,
		TokStride: a.TokStride, HeadStride: a.HeadStride, Eps: a.Eps}
	return e.launch("rmsnorm_row/"+variant, dim(uint32(a.Rows)), abi.RmsnormRowThreads, r.Bytes())
}

// chunkForward runs T prompt tokens at positions e.pos.. through every layer at once; with
// wantLogits the last token's logits land in the staging window.
func (e *Engine) chunkForward(tokens []int32, wantLogits bool) error {
	c := &e.cfg
	T := len(tokens)
	H, E, K := c.Embd, c.Experts, c.ExpertsUsed
	st := e.stage()
	hb := e.staging.Bytes()
	m := e.mem
	px, pxn, pxq := m.Ptr(bufPX), m.Ptr(bufPXN), m.Ptr(bufPXQ)
	row := make([]float32, e.emb.Cols())
	for i, id := range tokens {
		e.emb.Row(row, int(id))
		for j, v := range row {
			binary.LittleEndian.PutUint32(hb[st.pemb+4*(i*H+j):], math.Float32bits(v))
		}
		binary.LittleEndian.PutUint32(hb[st.ppos+4*i:], uint32(e.pos+i))
	}
	if err := e.compute.Upload(px, e.staging, st.pemb, 4*T*H); err != nil {
		return err
	}
	if err := e.compute.Upload(m.Ptr(bufPPos), e.staging, st.ppos, 4*T); err != nil {
		return err
	}
	whole := func(x, r, xo, w, y, q rt.DevPtr) abi.RmsnormArgs {
		return abi.RmsnormArgs{X: uint64(x), R: uint64(r), Xo: uint64(xo), W: uint64(w), Y: uint64(y), Q: uint64(q),
			N: int32(H), Rows: int32(T), Heads: 1, TokStride: int32(H), HeadStride: int32(H)}
	}
	pending := false // the previous layer's MoE output waits in p_proj (moe_decode fallback)
	for li := range e.layers {
		l := &e.layers[li]
		// The MoE combine of the previous layer accumulated into px (a plain norm), or its
		// output waits in p_proj (the norm adds it).
		norm := e.rowNorm("q81", whole(px, 0, 0, l.attnNorm, pxn, pxq))
		if pending {
			norm = e.rowNorm("addq81", whole(px, m.Ptr(bufPProj), px, l.attnNorm, pxn, pxq))
		}
		if err := norm; err != nil {
			return err
		}
		if err := e.attentionChunk(l, T); err != nil {
			return err
		}
		if err := e.rowNorm("addq81", whole(px, m.Ptr(bufPProj), px, l.ffnNorm, pxn, pxq)); err != nil {
			return err
		}
		if err := e.gemm(l.router, pxq, pxn, T, m.Ptr(bufPRouter), E); err != nil {
			return err
		}
		tab := m.Ptr(bufTables).Add(uintptr(li * 3 * E * 8))
		ma := abi.MoeDecodeArgs{Logits: uint64(m.Ptr(bufPRouter)), Ids: uint64(m.Ptr(bufPIDs)), Wts: uint64(m.Ptr(bufPWts)), Err: uint64(m.Ptr(bufPErr)),
			SlotsGate: uint64(tab), SlotsUp: uint64(tab.Add(uintptr(E * 8))), SlotsDown: uint64(tab.Add(uintptr(2 * E * 8))),
			Tokens: int32(T), NExpert: int32(E), KUsed: int32(K), NEmbd: int32(H), NFf: int32(c.ExpertFF)}
		if c.NormTopK {
			ma.Renorm = 1
		}
		if err := e.launch("moe_decode/"+typeVariant[e.expType], dim(uint32(T)), abi.MoeDecodeThreads, ma.Bytes()); err != nil {
			return err
		}
		var err error
		if pending, err = e.moeChunk(li, T); err != nil {
			return err
		}
	}
	e.pos += T
	if wantLogits {
		last := px.Add(uintptr(4 * (T - 1) * H))
		xn, xq := m.Ptr(bufXN), m.Ptr(bufXQ)
		a := abi.RmsnormArgs{X: uint64(last), W: uint64(e.outNrm), Y: uint64(xn), Q: uint64(xq),
			N: int32(H), Rows: 1, Heads: 1, TokStride: int32(H), HeadStride: int32(H)}
		variant := "q81"
		if pending {
			variant, a.R, a.Xo = "addq81", uint64(m.Ptr(bufPProj).Add(uintptr(4*(T-1)*H))), uint64(last)
		}
		if err := e.logits(variant, a); err != nil {
			return err
		}
	}
	if err := e.sync(); err != nil {
		return err
	}
	for i := 0; i < T; i++ {
		e.cache.Step()
	}
	return e.finishCopies()
}

// attentionChunk is the attention of T tokens: pxn/pxq in, the output projection in p_proj.
func (e *Engine) attentionChunk(l *gLayer, T int) error {
	c := &e.cfg
	m := e.mem
	hd, nh, nkv, H := c.HeadDim, c.Heads, c.HeadsKV, c.Embd
	pxn, pxq := m.Ptr(bufPXN), m.Ptr(bufPXQ)
	q, k, v, o := m.Ptr(bufPQ), m.Ptr(bufPK), m.Ptr(bufPV), m.Ptr(bufPO)
	for _, p := range []struct {
		w   dmat
		dst rt.DevPtr
		ld  int
	}{{l.wq, q, e.qd}, {l.wk, k, e.kvd}, {l.wv, v, e.kvd}} {
		if err := e.gemm(p.w, pxq, pxn, T, p.dst, p.ld); err != nil {
			return err
		}
	}
	for _, p := range []struct {
		buf   rt.DevPtr
		w     rt.DevPtr
		heads int
	}{{q, l.qNorm, nh}, {k, l.kNorm, nkv}} {
		a := abi.RmsnormArgs{X: uint64(p.buf), W: uint64(p.w), Y: uint64(p.buf), N: int32(hd), Rows: int32(T * p.heads), Heads: int32(p.heads),
			TokStride: int32(p.heads * hd), HeadStride: int32(hd), Eps: c.Eps}
		if err := e.launch("rmsnorm/f32", dim(blocks(T*p.heads, 8)), abi.RmsnormThreads, a.Bytes()); err != nil {
			return err
		}
		ra := abi.RopeArgs{X: uint64(p.buf), Pos: uint64(m.Ptr(bufPPos)), Freq: uint64(m.Ptr(bufFreq)), Rows: int32(T * p.heads), Heads: int32(p.heads),
			TokStride: int32(p.heads * hd), HeadStride: int32(hd), RotDims: int32(c.RopeDim)}
		if err := e.launch("rope/neox", dim(blocks(T*p.heads*c.RopeDim/2, abi.RopeThreads)), abi.RopeThreads, ra.Bytes()); err != nil {
			return err
		}
	}
	vcache := l.kv.Add(uintptr(e.ctx * e.kvd * 2))
	sa := abi.AttentionDecodeArgs{K: uint64(l.kv), V: uint64(vcache), Kn: uint64(k), Vn: uint64(v), Nkv: int32(nkv), Hd: int32(hd),
		KvPos: int32(e.pos), KvRows: int32(T)}
	if err := e.launch("attention_decode/store_f16", dim(blocks(T*nkv*hd, 64)), abi.AttentionDecodeThreads, sa.Bytes()); err != nil {
		return err
	}
	aa := abi.AttentionPrefillArgs{Q: uint64(q), K: uint64(l.kv), V: uint64(vcache), Out: uint64(o), T: int32(T), N: int32(e.pos + T),
		Nh: int32(nh), Nkv: int32(nkv), Hd: int32(hd), Scale: float32(1 / math.Sqrt(float64(hd)))}
	if err := e.launch("attention_prefill/f16", rt.Dim3{X: blocks(T, 8), Y: uint32(nh), Z: 1}, abi.AttentionPrefillThreads, aa.Bytes()); err != nil {
		return err
	}
	oq := m.Ptr(bufPOQ)
	qa := abi.QuantizeQ81Args{X: uint64(o), Y: uint64(oq), Ncols: int32(e.qd), NcolsPadded: int32(e.qd), Nrows: int32(T), XStride: int32(e.qd)}
	if err := e.launch("quantize_q8_1/f32", rt.Dim3{X: blocks(e.qd, 256), Y: uint32(min(T, 65535)), Z: 1}, abi.QuantizeQ81Threads, qa.Bytes()); err != nil {
		return err
	}
	return e.gemm(l.wo, oq, o, T, m.Ptr(bufPProj), H)
}

// stackRun is one moe_prefill launch set: tokens [t0, t1) with kUsed experts each, slot
// indices relative to the slot base, span slots.
type stackRun struct {
	t0, t1, kUsed int
	base, span    int
}

// moeChunk runs the routed experts of layer li for the T tokens of the chunk. Through
// moe_prefill the combine accumulates into p_x (pending false); through moe_decode (the
// fallback) the output lands in p_proj and the next norm adds it (pending true).
func (e *Engine) moeChunk(li, T int) (pending bool, err error) {
	c := &e.cfg
	K, E, H := c.ExpertsUsed, c.Experts, c.Embd
	if s0 := e.direct[li]; s0 >= 0 {
		e.stats.Hits += int64(T * K)
		e.stats.StackLayers++
		return false, e.moeRuns([]stackRun{{t0: 0, t1: T, kUsed: K, base: s0, span: E}}, bufPIDs)
	}
	st := e.stage()
	if err := e.compute.Download(e.staging, st.pids, e.mem.Ptr(bufPIDs), 4*T*K); err != nil {
		return false, err
	}
	if err := e.sync(); err != nil {
		return false, err
	}
	if err := e.finishCopies(); err != nil {
		return false, err
	}
	hb := e.staging.Bytes()
	ids := make([]int, T*K)
	for i := range ids {
		ids[i] = int(int32(binary.LittleEndian.Uint32(hb[st.pids+4*i:])))
		if ids[i] < 0 || ids[i] >= E {
			return false, fmt.Errorf("model/gpu: layer %d: router picked expert %d of %d (a kernel fault?)", li, ids[i], E)
		}
	}
	// Token ranges whose distinct experts fit the cache (one range unless the chunk needs
	// more experts of this layer than there are slots).
	var ranges [][2]int
	slots := e.cache.Slots()
	for a := 0; a < T; {
		seen := map[int]bool{}
		b := a
		for ; b < T; b++ {
			add := 0
			for _, x := range ids[b*K : (b+1)*K] {
				if !seen[x] {
					add++
					seen[x] = true
				}
			}
			if len(seen) > slots {
				break
			}
		}
		if b == a {
			return false, fmt.Errorf("model/gpu: layer %d: a token needs %d experts, the cache has %d slots", li, K, slots)
		}
		ranges = append(ranges, [2]int{a, b})
		a = b
	}
	m := e.mem
	tab := m.Ptr(bufTables).Add(uintptr(li * 3 * E * 8))
	for ri, r := range ranges {
		a, b := r[0], r[1]
		if ri > 0 { // the previous range's kernels must be done with the slots about to be reused
			if err := e.sync(); err != nil {
				return false, err
			}
			if err := e.finishCopies(); err != nil {
				return false, err
			}
		}
		sl, err := e.bringIn(li, ids[a*K:b*K])
		if err != nil {
			return false, err
		}
		if len(ranges) == 1 {
			lo, hi := math.MaxInt, -1
			for _, s := range sl {
				lo, hi = min(lo, s), max(hi, s)
			}
			if hi-lo < maxStack && lo/e.plan.SlabSlots == hi/e.plan.SlabSlots {
				for i, s := range sl {
					binary.LittleEndian.PutUint32(hb[st.pidx+4*i:], uint32(s-lo))
				}
				if err := e.compute.Upload(m.Ptr(bufPIdx), e.staging, st.pidx, 4*T*K); err != nil {
					return false, err
				}
				e.stats.StackLayers++
				return false, e.moeRuns([]stackRun{{t0: 0, t1: T, kUsed: K, base: lo, span: hi - lo + 1}}, bufPIdx)
			}
		}
		// The experts span more than one stack window: moe_decode over the range's tokens,
		// through the slot tables (phase 0 again first: its err flags against the tables
		// just updated; the same ids).
		ma := abi.MoeDecodeArgs{Logits: uint64(m.Ptr(bufPRouter).Add(uintptr(4 * a * E))), Ids: uint64(m.Ptr(bufPIDs).Add(uintptr(4 * a * K))),
			Wts: uint64(m.Ptr(bufPWts).Add(uintptr(4 * a * K))), Err: uint64(m.Ptr(bufPErr).Add(uintptr(4 * a * K))),
			SlotsGate: uint64(tab), SlotsUp: uint64(tab.Add(uintptr(E * 8))), SlotsDown: uint64(tab.Add(uintptr(2 * E * 8))),
			X: uint64(m.Ptr(bufPXQ).Add(uintptr(a * H / 32 * q81Block))), H: uint64(m.Ptr(bufPHq)), Y: uint64(m.Ptr(bufPProj).Add(uintptr(4 * a * H))),
			Tokens: int32(b - a), NExpert: int32(E), KUsed: int32(K), NEmbd: int32(H), NFf: int32(c.ExpertFF)}
		if c.NormTopK {
			ma.Renorm = 1
		}
		key := "moe_decode/" + typeVariant[e.expType]
		for phase, g := range []rt.Dim3{dim(uint32(b - a)), {X: uint32(c.ExpertFF / 32), Y: uint32(K), Z: uint32(b - a)}, {X: blocks(H, 8), Y: 1, Z: uint32(b - a)}} {
			ma.Phase = int32(phase)
			if err := e.launch(key, g, abi.MoeDecodeThreads, ma.Bytes()); err != nil {
				return false, err
			}
		}
	}
	e.stats.FallbackLayers++
	return true, nil
}

// bringIn looks up experts (per use) of layer li, copies the misses in (the compute stream
// waits for them), updates the slot tables, and returns each use's slot.
func (e *Engine) bringIn(li int, experts []int) ([]int, error) {
	sl, misses, err := e.cache.Lookup(li, experts, nil, nil)
	if err != nil {
		return nil, err
	}
	e.stats.Hits += int64(len(sl) - len(misses))
	e.stats.Misses += int64(len(misses))
	if len(misses) > 0 {
		groups, err := e.copier.Issue(e.place(li, misses))
		if err != nil {
			return nil, err
		}
		e.stats.Groups += int64(len(groups))
		if err := e.copier.Wait(e.compute, groups); err != nil {
			return nil, err
		}
	}
	// moe_decode and the decode path read the slot tables: keep the device copy current.
	for l := range e.dirty {
		if err := e.uploadTables(l); err != nil {
			return nil, err
		}
	}
	return sl, nil
}

// moeRuns launches moe_prefill's four phases for each run; ids (relative slot indices) in
// the buffer idsBuf, [T][K].
func (e *Engine) moeRuns(runs []stackRun, idsBuf string) error {
	c := &e.cfg
	m := e.mem
	H, K, F := c.Embd, c.ExpertsUsed, c.ExpertFF
	key := "moe_prefill/" + e.moeVar
	stride := int64(e.plan.SlotBytes)
	for _, r := range runs {
		tok := r.t1 - r.t0
		first := r.t0 * K // first pair of the run in [T][K]
		base := e.mem.Slot(r.base)
		a := abi.MoePrefillArgs{X: uint64(m.Ptr(bufPXQ).Add(uintptr(r.t0 * H / 32 * q81Block))), Ids: uint64(m.Ptr(idsBuf).Add(uintptr(4 * first))),
			Wts: uint64(m.Ptr(bufPWts).Add(uintptr(4 * first))), Wg: uint64(base.Add(uintptr(e.slot.gate))), Wu: uint64(base.Add(uintptr(e.slot.up))),
			Wd: uint64(base.Add(uintptr(e.slot.down))), Sched: uint64(m.Ptr(bufPSched)), List: uint64(m.Ptr(bufPList)), Hq: uint64(m.Ptr(bufPHq)),
			Yp: uint64(m.Ptr(bufPYp)), Out: uint64(m.Ptr(bufPX).Add(uintptr(4 * r.t0 * H))), GuMatBytes: stride, DMatBytes: stride,
			Tokens: int32(tok), KUsed: int32(r.kUsed), NExpert: int32(r.span), Hidden: int32(H), NFf: int32(F), XRowBlocks: int32(H / 32), Ldo: int32(H)}
		mt := maxTiles(tok*r.kUsed, r.span)
		for phase, g := range []rt.Dim3{dim(1), {X: blocks(F, 32), Y: uint32(mt), Z: 1}, {X: blocks(H, 64), Y: uint32(mt), Z: 1},
			{X: blocks(H, 128), Y: uint32(min(tok, 65535)), Z: 1}} {
			a.Phase = int32(phase)
			if err := e.launch(key, g, abi.MoePrefillThreads, a.Bytes()); err != nil {
				return err
			}
		}
	}
	return nil
}
