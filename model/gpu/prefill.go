package gpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

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
// tiny models' router) go through mmvq, 8 columns a group (its most), every whole group
// in one launch (grid z; Options.MmvqCols8 keeps a launch per group).
//
// moe_prefill reads expert e either from dense stacks (wg + e·gu_mat_bytes, e < 1024) or
// through the layer's slot tables (tabs: expert id → the device address of its gate, up
// and down, the tables moe_decode reads). When every expert was placed at load with a
// layer's experts in consecutive slots of one slab ("direct" layers) the stack form runs
// with the slot of expert 0 as its base, the ids phase 0 writes are the indices, and
// nothing comes back to the host. Otherwise (SetPrefillTables, the default TablesAuto),
// per layer:
//
//   - the chunk's ids come back once (one sync), the cache looks them up (per use, as
//     token by token would), the misses are copied through the copier and the tables
//     uploaded, and moe_prefill runs through the tables wherever the slots lie. When the
//     chunk needs more of the layer's experts than the cache holds, the layer runs in
//     token ranges that fit, a sync between them. With mapped misses (mapped.go) too:
//     copying the misses first was measured faster than reading them over the bus;
//   - TablesHost, mapped misses only: the tables already point every expert at its VRAM
//     slot or its mapped host copy, so moe_prefill runs through them at once; the chunk's
//     ids then come back (one sync per layer) for the cache's lookup, which counts hits
//     and misses and tells the policy, placing nothing (no copies);
//   - resident engines' layers that are not direct take TablesHost's form (nothing
//     misses).
//
// TablesOff is the path before the tables: when the slots in use lie in one window (one
// slab, < maxStack slots) the pairs are remapped to slot indices in it and the stack form
// runs; else the layer's experts run through moe_decode over the range's tokens (slot
// tables; each token's experts on their own — slower), and the next norm adds its output.
// Models with more than 1024 experts per layer (moe_prefill's limit) take that fallback.
//
// qwen3next: the full-attention layers take the same path with the gated query (attn_q
// interleaves per head hd query rows and hd gate rows: one mmq per head and half makes the
// query and the gate each contiguous; attention_prefill applies sigmoid(gate)); a delta-net
// layer runs mmq for q|k|v, z and b|a, then gated_delta_net's conv over the chunk (carried
// conv state, the two states alternating by call) and its recurrent stage over the chunk's
// tokens in order (the recurrence is sequential: one launch walks the T tokens with S in
// registers), quantize_q8_1 and mmq for ssm_out. The routed experts' output goes to p_proj
// (zeroed first when moe_prefill combines into it), the gated shared expert runs as one
// moe_prefill pass over the chunk whose combine adds it to the residual (sharedChunk; with
// Options.SharedDecode as moe_decode over the T tokens, added by rmsnorm_row add), and the
// next norm adds p_proj: the decode path's order of additions.
//
// Not batched (token by token through the decode path): the staging-ring mode (pinning
// failed), Options.HostKV.

// DefaultChunk is the prompt chunk strata-run uses.
const DefaultChunk = 512

// maxStack is moe_prefill's most experts per launch in the stack form (a variable: the
// emulator tests lower it to reach the split launches).
var maxStack = 1024

// maxTableExperts is moe_prefill's most experts (n_expert) through the slot tables: its
// route phase's limit.
const maxTableExperts = 1024

// PrefillTables is how the batched prompt path runs a layer's routed experts whose slots
// are not one direct stack (Engine.SetPrefillTables; the comment at the top of this file).
type PrefillTables int

// The modes; the zero value is the default.
const (
	// TablesAuto: direct layers as dense stacks, every other layer through the slot
	// tables after the chunk's misses are copied into slots (with mapped misses too: a
	// 512-token chunk reads each missing expert about once per tile, and moe_prefill
	// reading it over the bus was slower than copying it first, 410.6 against 778.5 tok/s
	// on the 80B-A3B at 16 GiB, bench/results/2026-11-30-prefill-tables).
	TablesAuto PrefillTables = iota
	// TablesOff: the path before the tables (one-window stacks, else moe_decode).
	TablesOff
	// TablesAll: every layer through the tables, direct ones too (a measurement switch).
	TablesAll
	// TablesHost: as TablesAuto, but with mapped misses nothing is copied: moe_prefill
	// reads the misses from mapped host memory through the tables (a measurement switch;
	// faster only when the cache already holds almost every expert the chunk uses).
	TablesHost
)

// String is the mode's name.
func (m PrefillTables) String() string {
	switch m {
	case TablesAuto:
		return "auto"
	case TablesOff:
		return "off"
	case TablesAll:
		return "all"
	case TablesHost:
		return "host"
	}
	return fmt.Sprintf("PrefillTables(%d)", int(m))
}

// ParsePrefillTables reads "auto", "off", "all" or "host".
func ParsePrefillTables(s string) (PrefillTables, error) {
	for _, m := range []PrefillTables{TablesAuto, TablesOff, TablesAll, TablesHost} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("model/gpu: prefill tables mode %q: want auto, off, all or host", s)
}

// SetPrefillTables sets how the batched prompt path runs the routed experts (TablesAuto
// unless set).
func (e *Engine) SetPrefillTables(m PrefillTables) {
	e.ptab = m
}

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
	// qwen3next
	bufPGate   = "p_gate"   // attention output gate, f32 [N][nh·hd]
	bufPQKV    = "p_qkv"    // delta-net q|k|v projection, f32 [N][C]
	bufPXC     = "p_xc"     // after the conv, f32 [N][C]
	bufPZ      = "p_z"      // output gate projection, f32 [N][vd]
	bufPBA     = "p_ba"     // f32 [N][2·nv]
	bufPR2     = "p_r2"     // shared-expert logits [g, 0], f32 [N][2]
	bufPIDs2   = "p_ids2"   // i32 [N][2]
	bufPWts2   = "p_wts2"   // f32 [N][2]
	bufPErr2   = "p_err2"   // u32 [N][2]
	bufPHSh    = "p_hsh"    // shared SwiGLU output, Q8_1 [N][2][SF/32] (Options.SharedDecode)
	bufPShOut  = "p_shout"  // shared expert output, f32 [N][H] (Options.SharedDecode)
	bufPShTab  = "p_shtab"  // per layer the shared expert's moe_prefill tables [gate|up|down][2]: the shared expert, the zero expert
	bufPShZero = "p_shzero" // the zero expert: zero bytes, as many as the largest shared matrix
)

// maxTiles is moe_prefill's max_tiles: the most tiles of bn pairs that pairs pairs over
// experts experts can make (each expert's list rounds up once).
func maxTiles(pairs, experts, bn int) int { return (pairs+bn-1)/bn + experts }

// prefillNeeds is the scratch of a chunk of n tokens; schedTile is the smallest token tile
// (BN) of the moe_prefill variants the engine may launch: the schedule holds max_tiles at it.
func prefillNeeds(c *model.Config, n, schedTile int) []Need {
	H, E, K, F := c.Embd, c.Experts, c.ExpertsUsed, c.ExpertFF
	qd, kvd := c.Heads*c.HeadDim, c.HeadsKV*c.HeadDim
	f32 := func(x int) uint64 { return 4 * uint64(n) * uint64(x) }
	st := maxStack // a launch's window spans up to maxStack slot indices, whatever E is
	if E <= maxTableExperts {
		st = max(st, E) // through the tables a launch has E experts
	}
	next := c.Arch == model.ArchQwen3Next
	od := qd // attention output, or the delta-net's
	if next {
		od = max(od, c.LinVHeads*c.LinVDim)
	}
	// moe_prefill's workspaces: the routed experts' launch, and qwen3next's shared expert's
	// (sharedChunk: 2 experts, 2 pairs a token; the schedule at any BN ≥ 1)
	sched, pairs, hq := 2*st+1+2*maxTiles(n*K, st, schedTile), n*K, uint64(n*K)*q81Bytes(F)
	if next {
		sched, pairs, hq = max(sched, 2*2+1+2*maxTiles(2*n, 2, 1)), max(pairs, 2*n), max(hq, uint64(2*n)*q81Bytes(c.SharedFF))
	}
	needs := []Need{
		{bufPX, KindScratch, f32(H)}, {bufPXN, KindScratch, f32(H)}, {bufPXQ, KindScratch, uint64(n) * q81Bytes(H)},
		{bufPQ, KindScratch, f32(qd)}, {bufPK, KindScratch, f32(kvd)}, {bufPV, KindScratch, f32(kvd)},
		{bufPO, KindScratch, f32(od)}, {bufPOQ, KindScratch, uint64(n) * q81Bytes(od)}, {bufPProj, KindScratch, f32(H)},
		{bufPRouter, KindScratch, f32(E)}, {bufPIDs, KindScratch, f32(K)}, {bufPWts, KindScratch, f32(K)},
		{bufPErr, KindScratch, f32(K)}, {bufPIdx, KindScratch, f32(K)},
		{bufPSched, KindScratch, 4 * uint64(sched)}, {bufPList, KindScratch, 4 * uint64(pairs)},
		{bufPHq, KindScratch, hq}, {bufPYp, KindScratch, 4 * uint64(pairs) * uint64(H)}, {bufPPos, KindStaging, f32(1)},
	}
	if next {
		C, vd := 2*c.LinKHeads*c.LinKDim+c.LinVHeads*c.LinVDim, c.LinVHeads*c.LinVDim
		needs = append(needs, Need{bufPGate, KindScratch, f32(qd)}, Need{bufPQKV, KindScratch, f32(C)}, Need{bufPXC, KindScratch, f32(C)},
			Need{bufPZ, KindScratch, f32(vd)}, Need{bufPBA, KindScratch, f32(2 * c.LinVHeads)},
			Need{bufPR2, KindScratch, f32(2)}, Need{bufPIDs2, KindScratch, f32(2)}, Need{bufPWts2, KindScratch, f32(2)}, Need{bufPErr2, KindScratch, f32(2)},
			Need{bufPHSh, KindScratch, 2 * uint64(n) * q81Bytes(c.SharedFF)}, Need{bufPShOut, KindScratch, f32(H)})
	}
	return needs
}

// preparePrefill loads the batched path's kernels — every tile either mode can launch
// (tiles.go) — and finds the direct layers.
func (e *Engine) preparePrefill() error {
	c := &e.cfg
	keys := []string{"attention_prefill/f16", "attention_prefill/f16old"}
	if co, ok := abi.Find(e.ks.target, "attention_prefill"); ok {
		if _, ok := co.Symbol("f16mma"); ok {
			keys = append(keys, "attention_prefill/f16mma")
			e.attnMMA = true
		}
		if _, ok := co.Symbol("f16mma256"); ok && e.attnMMA && c.HeadDim == 256 {
			keys = append(keys, "attention_prefill/f16mma256")
			e.attnMMAhd = "f16mma256"
		}
	}
	e.mmqT = map[quant.Type]*mmqTiles{}
	for _, l := range append([]gLayer{{wq: e.head}}, e.layers...) {
		for _, d := range []dmat{l.wq, l.wk, l.wv, l.wo, l.router, l.wqkv, l.wz, l.wba, l.wout, l.shInp} {
			if d.variant == "" || e.mmqT[d.typ] != nil {
				continue
			}
			if m, ok := mmqTilesFor(e.ks.target, d.typ); ok {
				e.mmqT[d.typ] = &m
				keys = append(keys, m.keys()...)
			}
		}
	}
	m := e.moeT // Load found it, and sized the schedule for its smallest tile
	if m.t64.key == "" {
		return fmt.Errorf("%w: moe_prefill has no t64 variant for %s experts", ErrMissingKernel, e.expType)
	}
	keys = append(keys, m.keys()...)
	// qwen3next's shared expert through moe_prefill (sharedChunk): its type's tiles, and per
	// layer tables whose expert 1 is the zero expert
	e.shT = map[quant.Type]*moeTiles{}
	if c.Arch == model.ArchQwen3Next {
		zero := e.mem.Ptr(bufPShZero)
		if err := e.dev.Upload(zero, make([]byte, e.plan.Resident[e.plan.byName[bufPShZero]].Bytes)); err != nil {
			return err
		}
		for i := range e.layers {
			l := &e.layers[i]
			if l.shGate.variant == "" {
				continue
			}
			if e.shT[l.shGate.typ] == nil {
				if st, ok := moeTilesFor(e.ks.target, l.shGate.typ); ok {
					e.shT[l.shGate.typ] = &st
					keys = append(keys, st.keys()...)
				}
			}
			l.shTabP = e.mem.Ptr(bufPShTab).Add(uintptr(i * 3 * 2 * 8))
			tab := make([]byte, 3*2*8)
			for j, w := range []rt.DevPtr{l.shGate.ptr, zero, l.shUp.ptr, zero, l.shDown.ptr, zero} {
				binary.LittleEndian.PutUint64(tab[8*j:], uint64(w))
			}
			if err := e.dev.Upload(l.shTabP, tab); err != nil {
				return err
			}
		}
	}
	for _, k := range keys {
		if e.fns[k] != nil {
			continue
		}
		fam, variant, _ := strings.Cut(k, "/")
		f, err := e.ks.fn(fam, variant)
		if err != nil {
			return err
		}
		e.fns[k] = f
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
func (e *Engine) SetTokenByToken(on bool) {
	e.tokenByToken = on
}

// Batched reports whether a prompt of n tokens would take the batched path.
func (e *Engine) Batched(n int) bool { return e.batched(n) }

// batched reports whether Forward runs a prompt of n tokens through the batched path.
// (Load sets chunk only for the architectures and the KV placement the path covers.)
func (e *Engine) batched(n int) bool {
	return n > 1 && e.chunk > 0 && !e.tokenByToken && e.ring == 0
}

// gemm is y[t][r] = W[r]·x[t] for T tokens: mmq when the type has a variant, else mmvq in
// groups of 8 columns. xq is Q8_1 [T][k/32], xf f32 [T][k]; y rows ldy apart.
func (e *Engine) gemm(w dmat, xq, xf rt.DevPtr, T int, y rt.DevPtr, ldy int) error {
	if m := e.mmqT[w.typ]; m != nil {
		p := m.pick(e.ptiles, T)
		a := abi.MmqArgs{W: uint64(w.ptr), X: uint64(xq), Y: uint64(y), Rows: int32(w.rows), K: int32(w.k), Tokens: int32(T),
			XRowBlocks: int32(w.k / 32), Ldy: int32(ldy), HookGroup: -1}
		b := a.Bytes()
		switch p.fam { // the same C struct (kernels/specs.go mmqArgs): the same fields and bytes
		case "mmq8":
			a8 := abi.Mmq8Args(a)
			b = a8.Bytes()
		case "mmq8c":
			a8 := abi.Mmq8cArgs(a)
			b = a8.Bytes()
		case "mmq8cz":
			a8 := abi.Mmq8czArgs(a)
			b = a8.Bytes()
		}
		return e.launch(p.key, rt.Dim3{X: blocks(w.rows, p.bm), Y: blocks(T, p.bn), Z: 1}, p.threads, b)
	}
	// Whole groups of 8 columns in one launch, a group per grid z (every z reads the same
	// matrix: w_mat_bytes 0; x and y step by the group), then the rest of the columns, so
	// a 512-token chunk's router is one launch instead of 64.
	k := e.mmvqKern(w)
	if e.mmvqCols8 {
		for c0 := 0; c0 < T; c0 += 8 {
			if err := e.mmvqCols(w, k, xq, xf, y, ldy, c0, min(8, T-c0), 1); err != nil {
				return err
			}
		}
		return nil
	}
	if g := T / 8; g > 0 {
		if err := e.mmvqCols(w, k, xq, xf, y, ldy, 0, 8, g); err != nil {
			return err
		}
	}
	if r := T % 8; r > 0 {
		return e.mmvqCols(w, k, xq, xf, y, ldy, T-r, r, 1)
	}
	return nil
}

// SetMmvqCols8 sets Options.MmvqCols8 on a loaded engine, between prompts.
func (e *Engine) SetMmvqCols8(on bool) {
	e.mmvqCols8 = on
}

// SetAttnPrefillOld sets Options.OldAttnPrefill on a loaded engine, between prompts.
func (e *Engine) SetAttnPrefillOld(on bool) {
	e.attnOld = on
}

// SetAttnPrefillF32 sets Options.F32AttnPrefill on a loaded engine, between prompts.
func (e *Engine) SetAttnPrefillF32(on bool) {
	e.attnF32 = on
}

// SetAttnPrefillGeneric sets Options.GenericAttnMMA on a loaded engine, between prompts.
func (e *Engine) SetAttnPrefillGeneric(on bool) {
	e.attnGen = on
}

// attnVariant is the attention_prefill variant the batched path launches: the first kernel
// (f16old) when asked for, else, where the target has the tensor-core kernels and
// F32AttnPrefill is off, the one for the model's head dim (f16mma256; hd 128 has none: the
// two tried lost, bench/results/2026-11-30-attn2-s8) unless
// GenericAttnMMA asks for the one for every head size (f16mma), else the f32 kernel (f16).
func (e *Engine) attnVariant() string {
	switch {
	case e.attnOld:
		return "f16old"
	case e.attnMMA && !e.attnF32 && e.attnMMAhd != "" && !e.attnGen:
		return e.attnMMAhd
	case e.attnMMA && !e.attnF32:
		return "f16mma"
	}
	return "f16"
}

// mmvqCols launches mmvq over groups of n columns (n ≤ 8) from column c0, a group per
// grid z.
func (e *Engine) mmvqCols(w dmat, k *kernel, xq, xf, y rt.DevPtr, ldy, c0, n, groups int) error {
	a := abi.MmvqArgs{W: uint64(w.ptr), Xq: uint64(xq.Add(uintptr(c0 * w.k / 32 * q81Block))), Xf: uint64(xf.Add(uintptr(4 * c0 * w.k))),
		Y: uint64(y.Add(uintptr(4 * c0 * ldy))), Rows: int32(w.rows), K: int32(w.k), Ncols: int32(n),
		XColStride: int32(w.k), YColStride: int32(ldy), XMatStride: int32(n * w.k), YMatStride: int32(n * ldy)}
	return e.launchK(k, rt.Dim3{X: e.mmvqBlocks(w.rows, k), Y: 1, Z: uint32(groups)}, abi.MmvqThreads, a.Bytes())
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
		mixer := e.attentionChunk
		if l.recurrent {
			mixer = e.deltaNetChunk
		}
		if err := mixer(l, T); err != nil {
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
		if pending, err = e.moeChunk(li, T, l.shGate.variant != ""); err != nil {
			return err
		}
		if l.shGate.variant != "" {
			if err := e.sharedChunk(l, T); err != nil {
				return err
			}
		}
	}
	e.pos += T
	e.convPar ^= 1
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
	ps := []struct {
		w   dmat
		dst rt.DevPtr
		ld  int
	}{{l.wq, q, e.qd}, {l.wk, k, e.kvd}, {l.wv, v, e.kvd}}
	var gate rt.DevPtr
	if c.Arch == model.ArchQwen3Next {
		// attn_q interleaves per head hd query rows and hd gate rows: a launch per head and
		// half puts the queries and the gates each in [T][nh·hd].
		gate, ps = m.Ptr(bufPGate), ps[1:]
		rb, err := l.wq.typ.RowBytes(H)
		if err != nil {
			return err
		}
		for h := 0; h < nh; h++ {
			for i, dst := range []rt.DevPtr{q, gate} {
				w := dmat{ptr: l.wq.ptr.Add(uintptr((2*h + i) * hd * rb)), typ: l.wq.typ, variant: l.wq.variant, rows: hd, k: H}
				if err := e.gemm(w, pxq, pxn, T, dst.Add(uintptr(4*h*hd)), e.qd); err != nil {
					return err
				}
			}
		}
	}
	for _, p := range ps {
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
	aa := abi.AttentionPrefillArgs{Q: uint64(q), K: uint64(l.kv), V: uint64(vcache), Gate: uint64(gate), Out: uint64(o), T: int32(T), N: int32(e.pos + T),
		Nh: int32(nh), Nkv: int32(nkv), Hd: int32(hd), Scale: float32(1 / math.Sqrt(float64(hd)))}
	av := e.attnVariant()
	gx, gy := abi.AttentionPrefillGrid(av, T, nh, nkv)
	if err := e.launch("attention_prefill/"+av, rt.Dim3{X: gx, Y: gy, Z: 1}, abi.AttentionPrefillThreads, aa.Bytes()); err != nil {
		return err
	}
	return e.projectChunk(l.wo, o, e.qd, T)
}

// projectChunk quantizes T rows of n f32 values at o to Q8_1 and multiplies them by w into
// p_proj.
func (e *Engine) projectChunk(w dmat, o rt.DevPtr, n, T int) error {
	m := e.mem
	oq := m.Ptr(bufPOQ)
	qa := abi.QuantizeQ81Args{X: uint64(o), Y: uint64(oq), Ncols: int32(n), NcolsPadded: int32(n), Nrows: int32(T), XStride: int32(n)}
	if err := e.launch("quantize_q8_1/f32", rt.Dim3{X: blocks(n, 256), Y: uint32(min(T, 65535)), Z: 1}, abi.QuantizeQ81Threads, qa.Bytes()); err != nil {
		return err
	}
	return e.gemm(w, oq, o, T, m.Ptr(bufPProj), e.cfg.Embd)
}

// deltaNetChunk is the gated delta-net mixer of one qwen3next layer for T tokens: p_xn/p_xq
// in, ssm_out's projection in p_proj. The conv runs over the chunk in one launch (each
// token's window reaches back into the carried state); the recurrent stage walks the
// chunk's tokens in order (recsplit then gnorm; Options.OldDeltaNet: recurrent, one launch).
func (e *Engine) deltaNetChunk(l *gLayer, T int) error {
	c := &e.cfg
	m := e.mem
	pxn, pxq := m.Ptr(bufPXN), m.Ptr(bufPXQ)
	kd, vd, nv := c.LinKHeads*c.LinKDim, c.LinVHeads*c.LinVDim, c.LinVHeads
	C := 2*kd + vd
	qkv, xc, z, ba, o := m.Ptr(bufPQKV), m.Ptr(bufPXC), m.Ptr(bufPZ), m.Ptr(bufPBA), m.Ptr(bufPO)
	for _, p := range []struct {
		w   dmat
		dst rt.DevPtr
		ld  int
	}{{l.wqkv, qkv, C}, {l.wz, z, vd}, {l.wba, ba, 2 * nv}} {
		if err := e.gemm(p.w, pxq, pxn, T, p.dst, p.ld); err != nil {
			return err
		}
	}
	if err := e.gatedDeltaNet(l, qkv, xc, z, ba, o, T); err != nil {
		return err
	}
	return e.projectChunk(l.wout, o, vd, T)
}

// sharedChunk runs qwen3next's gated shared expert for T tokens on p_xq and adds it to the
// residual. The gate logit g of every token (shInp) goes into logits [g, 0], and moe_decode
// phase 0 turns them into two (id, weight) pairs, the decode path's softmax: the shared
// expert with σ(g), expert 1 with 1 − σ(g), in the order of the logits. Then by default
// one moe_prefill pass over the chunk (tables p_shtab: expert 0 the shared expert, expert 1
// the zero expert, whose all-zero blocks give h = 0 and y = 0 exactly, so its pairs add
// (1 − σ)·0 to nothing): the shared weights are read once per tile of tokens, and the
// combine accumulates x + σ(g)·y straight into p_x, the decode path's order of additions
// (x, then the shared expert, then the routed experts from p_proj at the next norm) with
// one rounding instead of two. With Options.SharedDecode, moe_decode phases 1 and 2 over
// the T tokens (every token reads the shared weights on its own; expert 1 has no slot and
// adds nothing), added to p_x by rmsnorm_row add.
func (e *Engine) sharedChunk(l *gLayer, T int) error {
	c := &e.cfg
	m := e.mem
	H := c.Embd
	px, pxn, pxq, r2 := m.Ptr(bufPX), m.Ptr(bufPXN), m.Ptr(bufPXQ), m.Ptr(bufPR2)
	if err := e.compute.Memset(r2, 0, 8*T); err != nil { // the constant 0 logits
		return err
	}
	if err := e.gemm(l.shInp, pxq, pxn, T, r2, 2); err != nil {
		return err
	}
	ids, wts := m.Ptr(bufPIDs2), m.Ptr(bufPWts2)
	ma := abi.MoeDecodeArgs{Logits: uint64(r2), Ids: uint64(ids), Wts: uint64(wts), Err: uint64(m.Ptr(bufPErr2)),
		SlotsGate: uint64(l.shTab), SlotsUp: uint64(l.shTab.Add(16)), SlotsDown: uint64(l.shTab.Add(32)),
		X: uint64(pxq), H: uint64(m.Ptr(bufPHSh)), Y: uint64(m.Ptr(bufPShOut)), Tokens: int32(T), NExpert: 2, KUsed: 2, NEmbd: int32(H), NFf: int32(c.SharedFF)}
	key := "moe_decode/" + l.shGate.variant
	grids := []rt.Dim3{dim(uint32(T)), {X: uint32(c.SharedFF / 32), Y: 2, Z: uint32(T)}, {X: blocks(H, 8), Y: 1, Z: uint32(T)}}
	st := e.shT[l.shGate.typ]
	if !e.shDec && st != nil {
		grids = grids[:1] // phase 0: the ids and weights
	}
	for phase, g := range grids {
		ma.Phase = int32(phase)
		if err := e.launch(key, g, abi.MoeDecodeThreads, ma.Bytes()); err != nil {
			return err
		}
	}
	if len(grids) == 1 {
		a := abi.MoePrefillArgs{X: uint64(pxq), Ids: uint64(ids), Wts: uint64(wts), Sched: uint64(m.Ptr(bufPSched)), List: uint64(m.Ptr(bufPList)),
			Hq: uint64(m.Ptr(bufPHq)), Yp: uint64(m.Ptr(bufPYp)), Out: uint64(px), Tokens: int32(T), KUsed: 2, NExpert: 2, Hidden: int32(H),
			NFf: int32(c.SharedFF), XRowBlocks: int32(H / 32), Ldo: int32(H), Tabs: uint64(l.shTabP)}
		return e.moePhases(st.pick(e.ptiles, 2*T, 2), a)
	}
	// px += shared; the normed rows go to p_xn, which the next norm rewrites before a read.
	return e.rowNorm("add", abi.RmsnormArgs{X: uint64(px), R: uint64(m.Ptr(bufPShOut)), Xo: uint64(px), W: uint64(l.ffnNorm), Y: uint64(pxn),
		N: int32(H), Rows: int32(T), Heads: 1, TokStride: int32(H), HeadStride: int32(H)})
}

// SetSharedDecode sets Options.SharedDecode on a loaded engine, between prompts.
func (e *Engine) SetSharedDecode(on bool) {
	e.shDec = on
}

// SetDeltaNetOld sets Options.OldDeltaNet on a loaded engine, between prompts.
func (e *Engine) SetDeltaNetOld(on bool) {
	e.gdnOld = on
}

// moePhases launches moe_prefill's four phases of one launch set at tile p: phase 0 one
// block per expert, phases 1 and 2 a block row per schedule tile (max_tiles at p's BN),
// phase 3 the combine.
func (e *Engine) moePhases(p ptile, a abi.MoePrefillArgs) error {
	tok, E, F, H := int(a.Tokens), int(a.NExpert), int(a.NFf), int(a.Hidden)
	mt := maxTiles(tok*int(a.KUsed), E, p.bn)
	for phase, g := range []rt.Dim3{dim(uint32(E)), {X: blocks(F, p.bm/2), Y: uint32(mt), Z: 1}, {X: blocks(H, p.bm), Y: uint32(mt), Z: 1},
		{X: blocks(H, 128), Y: uint32(min(tok, 65535)), Z: 1}} {
		a.Phase = int32(phase)
		if err := e.launch(p.key, g, p.threads, a.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// stackRun is one moe_prefill launch set: tokens [t0, t1) with kUsed experts each, slot
// indices relative to the slot base, span slots; or, with tab set, expert ids through the
// slot tables at tab ([3][span]).
type stackRun struct {
	t0, t1, kUsed int
	base, span    int
	tab           rt.DevPtr
}

// moeChunk runs the routed experts of layer li for the T tokens of the chunk. Through
// moe_prefill the combine accumulates into p_x (pending false) — or, with toProj, into
// p_proj zeroed first (pending true); through moe_decode (the fallback) the output lands in
// p_proj (pending true). The next norm adds p_proj.
func (e *Engine) moeChunk(li, T int, toProj bool) (pending bool, err error) {
	c := &e.cfg
	K, E, H := c.ExpertsUsed, c.Experts, c.Embd
	out := e.mem.Ptr(bufPX)
	if toProj {
		out = e.mem.Ptr(bufPProj)
	}
	stack := func(runs []stackRun, idsBuf string) (bool, error) {
		if toProj {
			if err := e.compute.Memset(out, 0, 4*T*H); err != nil {
				return false, err
			}
		}
		e.stats.StackLayers++
		return toProj, e.moeRuns(runs, idsBuf, out)
	}
	if s0 := e.direct[li]; s0 >= 0 && e.ptab != TablesAll {
		e.stats.Hits += int64(T * K)
		return stack([]stackRun{{t0: 0, t1: T, kUsed: K, base: s0, span: E}}, bufPIDs)
	}
	tables := e.ptab != TablesOff && E <= maxTableExperts
	m := e.mem
	tab := m.Ptr(bufTables).Add(uintptr(li * 3 * E * 8))
	if tables && (e.resident || e.mapped && e.ptab == TablesHost) {
		// Every expert readable where its table entry points: run first, then count.
		pend, err := stack([]stackRun{{t0: 0, t1: T, kUsed: K, span: E, tab: tab}}, bufPIDs)
		if err != nil {
			return false, err
		}
		return pend, e.countChunk(li, T)
	}
	ids, err := e.chunkIDs(li, T)
	if err != nil {
		return false, err
	}
	if err := e.finishCopies(); err != nil {
		return false, err
	}
	st, hb := e.stage(), e.staging.Bytes()
	ranges, err := e.fitRanges(li, ids, T)
	if err != nil {
		return false, err
	}
	if tables && toProj {
		if err := e.compute.Memset(out, 0, 4*T*H); err != nil {
			return false, err
		}
	}
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
		if tables { // the range's experts are in slots now, the tables say where
			if err := e.moeRuns([]stackRun{{t0: a, t1: b, kUsed: K, span: E, tab: tab}}, bufPIDs, out); err != nil {
				return false, err
			}
			continue
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
				return stack([]stackRun{{t0: 0, t1: T, kUsed: K, base: lo, span: hi - lo + 1}}, bufPIdx)
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
	if tables {
		e.stats.StackLayers++
		return toProj, nil
	}
	e.stats.FallbackLayers++
	return true, nil
}

// fitRanges splits the chunk's T tokens (ids [T][K] of layer li) into token ranges whose
// distinct experts fit the cache (one range unless the chunk needs more experts of this
// layer than there are slots).
func (e *Engine) fitRanges(li int, ids []int, T int) ([][2]int, error) {
	K := e.cfg.ExpertsUsed
	var ranges [][2]int
	slots := e.cache.Slots()
	for a := 0; a < T; {
		seen := map[int]bool{}
		b := a
		for ; b < T; b++ {
			for _, x := range ids[b*K : (b+1)*K] {
				seen[x] = true
			}
			if len(seen) > slots {
				break
			}
		}
		if b == a {
			return nil, fmt.Errorf("model/gpu: layer %d: a token needs %d experts, the cache has %d slots", li, K, slots)
		}
		ranges = append(ranges, [2]int{a, b})
		a = b
	}
	return ranges, nil
}

// chunkIDs brings the chunk's expert ids of layer li ([T][K], phase 0's output) back to the
// host (one sync) and checks each against the layer's expert count.
func (e *Engine) chunkIDs(li, T int) ([]int, error) {
	K, E := e.cfg.ExpertsUsed, e.cfg.Experts
	st := e.stage()
	if err := e.compute.Download(e.staging, st.pids, e.mem.Ptr(bufPIDs), 4*T*K); err != nil {
		return nil, err
	}
	if err := e.sync(); err != nil {
		return nil, err
	}
	hb := e.staging.Bytes()
	ids := make([]int, T*K)
	for i := range ids {
		ids[i] = int(int32(binary.LittleEndian.Uint32(hb[st.pids+4*i:])))
		if ids[i] < 0 || ids[i] >= E {
			return nil, fmt.Errorf("model/gpu: layer %d: router picked expert %d of %d (a kernel fault?)", li, ids[i], E)
		}
	}
	return ids, nil
}

// countChunk brings the chunk's ids of layer li back (one sync, after the layer's kernels)
// and looks them up without placing any: the policy sees every use, and the hits (experts
// read from a VRAM slot) and misses (read from mapped host memory) are counted.
func (e *Engine) countChunk(li, T int) error {
	K := e.cfg.ExpertsUsed
	if e.resident { // every expert has its slot: the lookup only counts uses
		e.stats.Hits += int64(T * K)
	}
	ids, err := e.chunkIDs(li, T)
	if err != nil {
		return err
	}
	ranges, err := e.fitRanges(li, ids, T) // a lookup takes at most the cache's slots in experts
	if err != nil {
		return err
	}
	for _, r := range ranges {
		sl, misses, err := e.cache.LookupAdmit(li, ids[r[0]*K:r[1]*K], e.slotBuf, e.missBuf[:0], 0)
		if err != nil {
			return err
		}
		e.slotBuf = sl
		if len(misses) > 0 {
			return fmt.Errorf("model/gpu: layer %d: a lookup that admits nothing placed %d experts", li, len(misses))
		}
		if !e.resident {
			for _, s := range sl {
				if s >= 0 {
					e.stats.Hits++
				} else {
					e.stats.Misses++
				}
			}
		}
	}
	return nil
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
	if err := e.uploadDirty(); err != nil {
		return nil, err
	}
	return sl, nil
}

// moeRuns launches moe_prefill's four phases for each run; ids (relative slot indices) in
// the buffer idsBuf, [T][K]; the combine accumulates into out, [T][H].
func (e *Engine) moeRuns(runs []stackRun, idsBuf string, out rt.DevPtr) error {
	c := &e.cfg
	m := e.mem
	H, K, F := c.Embd, c.ExpertsUsed, c.ExpertFF
	stride := int64(e.plan.SlotBytes)
	for _, r := range runs {
		tok := r.t1 - r.t0
		// one tile for the run's four phases: the route lays out the tiles that phases 1 and
		// 2 walk at its BN
		p := e.moeT.pick(e.ptiles, tok*r.kUsed, c.Experts)
		if st := e.moeT.schedTile(); p.bn < st {
			panic(fmt.Sprintf("model/gpu: moe_prefill tile t%d launched with a schedule sized for t%d", p.bn, st))
		}
		first := r.t0 * K // first pair of the run in [T][K]
		base := e.mem.Slot(r.base)
		if r.tab != 0 {
			base = 0
		}
		a := abi.MoePrefillArgs{X: uint64(m.Ptr(bufPXQ).Add(uintptr(r.t0 * H / 32 * q81Block))), Ids: uint64(m.Ptr(idsBuf).Add(uintptr(4 * first))),
			Wts: uint64(m.Ptr(bufPWts).Add(uintptr(4 * first))), Wg: uint64(base.Add(uintptr(e.slot.gate))), Wu: uint64(base.Add(uintptr(e.slot.up))),
			Wd: uint64(base.Add(uintptr(e.slot.down))), Sched: uint64(m.Ptr(bufPSched)), List: uint64(m.Ptr(bufPList)), Hq: uint64(m.Ptr(bufPHq)),
			Yp: uint64(m.Ptr(bufPYp)), Out: uint64(out.Add(uintptr(4 * r.t0 * H))), GuMatBytes: stride, DMatBytes: stride,
			Tokens: int32(tok), KUsed: int32(r.kUsed), NExpert: int32(r.span), Hidden: int32(H), NFf: int32(F), XRowBlocks: int32(H / 32), Ldo: int32(H),
			Tabs: uint64(r.tab)}
		if r.tab != 0 { // expert ids through the tables: no stack
			a.Wg, a.Wu, a.Wd, a.GuMatBytes, a.DMatBytes = 0, 0, 0, 0, 0
		}
		if err := e.moePhases(p, a); err != nil {
			return err
		}
	}
	return nil
}
