package gpu

import (
	"fmt"
	"math"

	"github.com/strata-hip/strata/model"
)

// Shape is what the memory plan needs to know about a model: its configuration, the
// dense tensors as they will sit in VRAM, and the bytes of one expert.
type Shape struct {
	Cfg   model.Config
	Vocab int
	// Dense lists every dense weight in VRAM (Kind KindWeights), with its device bytes.
	Dense []Need
	// Expert is the stored bytes of one expert's gate, up and down matrices.
	Expert [3]uint64
}

// Scratch names: the activations and workspaces of one decode step. They are planned,
// never allocated on their own.
const (
	bufX       = "x"      // residual stream, f32 [H]
	bufXN      = "xn"     // normed hidden state, f32 [H]
	bufXQ      = "xq"     // its Q8_1 blocks [H/32]
	bufQ       = "q"      // query (+gate for qwen3next), f32
	bufK       = "k"      // this token's key, f32 [nkv·hd]
	bufV       = "v"      // this token's value, f32 [nkv·hd]
	bufO       = "o"      // attention output, f32 [nh·hd]
	bufOQ      = "oq"     // its Q8_1 blocks
	bufPart    = "part"   // attention split workspace
	bufProj    = "proj"   // attention or MoE output, f32 [H]
	bufRouter  = "router" // router logits, f32 [E] (+ qwen3next's shared-expert gate logit and a constant 0)
	bufIDs     = "ids"    // selected experts, i32 [layers][K] (each layer its own row: read back once per token when every expert is resident)
	bufWts     = "wts"    // their weights, f32 [K]
	bufErr     = "err"    // missing-slot flags, u32 [K]
	bufH       = "h"      // SwiGLU output, Q8_1 [K][F/32]
	bufLogits  = "logits" // f32 [V]
	bufToken   = "token"  // ForwardArgmax's token id, i32 [1]; from argmaxPartOff sample/argmaxp's (index, value) [argmaxParts(V)]
	bufPos     = "pos"    // i32 [1]
	bufFreq    = "freq"   // rope frequencies, f32 [rd/2]
	bufTables  = "slot_tables"
	bufRouterP = "router_next" // look-ahead: the next layer's router on this hidden state, f32 [E]
	bufIDsP    = "ids_next"    // its top-k, i32 [K]
	bufWtsP    = "wts_next"    // f32 [K]
	bufErrP    = "err_next"    // u32 [K]
	// qwen3next
	bufGate    = "gate"      // attention output gate, f32 [nh·hd]
	bufQKV     = "qkv"       // delta-net q|k|v projection, f32 [C] (fused: then z and b|a)
	bufXC      = "xc"        // after the conv, f32 [C]
	bufZ       = "z"         // delta-net output gate projection, f32 [vd]
	bufBA      = "ba"        // f32 [2·nv]
	bufRouter2 = "router2"   // shared-expert gate logit and a constant 0, f32 [2]
	bufIDs2    = "ids2"      // i32 [2]
	bufWts2    = "wts2"      // f32 [2]
	bufErr2    = "err2"      // u32 [2]
	bufHSh     = "hsh"       // shared expert SwiGLU output, Q8_1 [2][SF/32]
	bufShOut   = "shout"     // shared expert output, f32 [H]
	bufShTab   = "sh_tables" // per layer 3 tables of 2 entries: the shared expert, and a null expert
	q81Block   = 36          // bytes of one Q8_1 block (32 values)
	maxLayerID = 1 << 20
)

// kvBytes is the f16 K and V cache of one attention layer for ctx tokens.
func kvBytes(c *model.Config, ctx int) uint64 {
	return 2 * uint64(ctx) * uint64(c.HeadsKV*c.HeadDim) * 2
}

// stateBytes is one delta-net layer's state: two conv states (the kernel reads one and
// writes the other) and the recurrent state, f32.
func stateBytes(c *model.Config) uint64 {
	ch := 2*c.LinKHeads*c.LinKDim + c.LinVHeads*c.LinVDim
	return 4 * uint64(2*(c.ConvKernel-1)*ch+c.LinVHeads*c.LinKDim*c.LinVDim)
}

func q81Bytes(n int) uint64 { return uint64((n+31)/32) * q81Block }

// argmaxParts is the blocks of sample/argmaxp over n logits: one per 4096 (256 threads × 16
// loads in flight; 38 for a vocabulary of 151936), so its final step (argmaxf) reads few.
func argmaxParts(n int) int { return max(1, (n+4095)/4096) }

// argmaxPartOff is where argmaxp's pairs start in bufToken (8-byte aligned after the token).
const argmaxPartOff = 8

// PlanInput lists every allocation of the decode engine for a context of ctx tokens.
func (s *Shape) PlanInput(ctx int) (PlanInput, error) {
	c := &s.Cfg
	if ctx <= 0 {
		return PlanInput{}, fmt.Errorf("model/gpu: context of %d tokens", ctx)
	}
	if c.Layers > maxLayerID {
		return PlanInput{}, fmt.Errorf("model/gpu: %d layers", c.Layers)
	}
	in := PlanInput{Resident: append([]Need(nil), s.Dense...), Ctx: ctx}
	for i := 0; i < c.Layers; i++ {
		if !c.IsRecurrent(i) {
			in.Resident = append(in.Resident, Need{Name: fmt.Sprintf("blk.%d.kv", i), Kind: KindKVCache, Bytes: kvBytes(c, ctx)})
		} else {
			in.Resident = append(in.Resident, Need{Name: fmt.Sprintf("blk.%d.state", i), Kind: KindState, Bytes: stateBytes(c)})
		}
	}
	H, E, K, F := c.Embd, c.Experts, c.ExpertsUsed, c.ExpertFF
	qrows := c.Heads * c.HeadDim // the query (qwen3next's gate goes to its own buffer)
	od := c.Heads * c.HeadDim    // attention output, or the delta-net's
	if c.Arch == model.ArchQwen3Next {
		od = max(od, c.LinVHeads*c.LinVDim)
	}
	nsplit := splitCap(ctx) // the most splits any split length gives at any length ≤ ctx
	f32 := func(n int) uint64 { return 4 * uint64(n) }
	for _, n := range []Need{
		{bufX, KindScratch, f32(H)}, {bufXN, KindScratch, f32(H)}, {bufXQ, KindScratch, q81Bytes(H)},
		// q|k|v of a fused projection land in q back to back (qwen3next: k|v in k)
		{bufQ, KindScratch, f32(qrows + 2*c.HeadsKV*c.HeadDim)}, {bufK, KindScratch, f32(2 * c.HeadsKV * c.HeadDim)}, {bufV, KindScratch, f32(c.HeadsKV * c.HeadDim)},
		{bufO, KindScratch, f32(od)}, {bufOQ, KindScratch, q81Bytes(od)},
		{bufPart, KindScratch, f32(c.Heads * nsplit * (c.HeadDim + 2))}, {bufProj, KindScratch, f32(H)},
		{bufRouter, KindScratch, f32(E + 2)}, {bufIDs, KindScratch, 4 * uint64(K) * uint64(c.Layers)}, {bufWts, KindScratch, f32(K)},
		{bufErr, KindScratch, 4 * uint64(K)}, {bufH, KindScratch, uint64(K) * q81Bytes(F)},
		{bufRouterP, KindScratch, f32(E)}, {bufIDsP, KindScratch, 4 * uint64(K)}, {bufWtsP, KindScratch, f32(K)}, {bufErrP, KindScratch, 4 * uint64(K)},
		{bufLogits, KindScratch, f32(s.Vocab)}, {bufToken, KindScratch, argmaxPartOff + 8*uint64(argmaxParts(s.Vocab))},
		{bufPos, KindStaging, 4}, {bufFreq, KindStaging, f32(c.RopeDim / 2)},
		{bufTables, KindSlotTables, uint64(c.Layers) * 3 * uint64(E) * 8},
	} {
		in.Resident = append(in.Resident, n)
	}
	if c.Arch == model.ArchQwen3Next {
		C := 2*c.LinKHeads*c.LinKDim + c.LinVHeads*c.LinVDim
		vd := c.LinVHeads * c.LinVDim
		for _, n := range []Need{
			{bufGate, KindScratch, f32(c.Heads * c.HeadDim)}, {bufQKV, KindScratch, f32(C + vd + 2*c.LinVHeads)}, {bufXC, KindScratch, f32(C)},
			{bufZ, KindScratch, f32(vd)}, {bufBA, KindScratch, f32(2 * c.LinVHeads)},
			{bufRouter2, KindScratch, 8}, {bufIDs2, KindScratch, 8}, {bufWts2, KindScratch, 8}, {bufErr2, KindScratch, 8},
			{bufHSh, KindScratch, 2 * q81Bytes(c.SharedFF)}, {bufShOut, KindScratch, f32(H)},
			{bufShTab, KindSlotTables, uint64(c.Layers) * 3 * 2 * 8},
		} {
			in.Resident = append(in.Resident, n)
		}
	}
	in.SlotBytes = slotLayout(s.Expert).total
	in.MinSlots = 2 * K
	in.MaxSlots = c.Layers * E
	return in, nil
}

// slotOffsets places an expert's gate, up and down matrices in one slot (and in its
// pinned host copy), each 256-byte aligned, so one miss is one copy.
type slotOffsets struct{ gate, up, down, total uint64 }

func slotLayout(e [3]uint64) slotOffsets {
	var o slotOffsets
	o.gate = 0
	o.up = alignUp(e[0])
	o.down = o.up + alignUp(e[1])
	o.total = o.down + alignUp(e[2])
	return o
}

// Attention split limits: a split holds at least minSplitLen positions (so at most
// ceil(ctx/minSplitLen) splits), and there are at most maxSplits splits (parity's bound for
// attention_decode counts ≤ 256 splits of ≤ 1024 positions; the reduce keeps one factor a
// split in LDS for ≤ 256).
const (
	minSplitLen = 1
	maxSplits   = 256
)

// AttnSplitOld is the Options.AttnSplit (and SetAttnSplit) value that selects the split
// policy before 2026-11-30-attn-decode: ⌈√(n/6)⌉ rounded up to 8, at least 8.
const AttnSplitOld = -1

// attnNewMax is the longest cache splitLen's policy splits for the GPU's width; longer ones
// take the previous policy (splitLen's measurements).
const attnNewMax = 256

// splitCap is the most attention splits at any length ≤ ctx: what the part workspace holds.
func splitCap(ctx int) int { return min(maxSplits, (ctx+minSplitLen-1)/minSplitLen) }

// splitLen is the attention split policy for n cached positions and head dimension hd:
// positions per split ⌈√(n/64)⌉ for n ≤ attnNewMax and hd ≤ 128 (else the policy before,
// see below), at least 1 and ⌈n/256⌉ (≤ 256 splits), at most 1024 (attention_decode's contract: split_len
// > 0, nsplit = ceil(n/split_len), nsplit ≤ 256; the parity bound's limits). fixed > 0 asks
// for that many positions per split instead (a measurement setting, Options.AttnSplit),
// raised where the limits need more; fixed = AttnSplitOld is the policy before:
// ⌈√(n/6)⌉ rounded up to a multiple of 8, at least 8.
//
// Why: each wave of a split block walks its positions one after another — per position a
// dependent chain of a cache row load (one row ahead), a wave sum and two exp2 — so a split
// costs about len·t_pos, t_pos ≈ 0.82 µs on the H200 (bench/results/2026-11-29-gpu-engine-4:
// 20.2 µs a launch at 16 positions a split, 59.7 µs at 64). The reduce before walked the
// nsplit partials three times in each thread, one dependent load after another (t_part ≈
// 0.13 µs a split), hence √(n/6) and never under 8: 8 blocks (4 kv heads × 2 splits) and
// 11.5 µs a split launch at position 13 in the 30B (2026-11-30-decode-profile). The reduce
// now finds M and L with the whole block and issues its element loads 32 at a time: about
// one L2 round trip (taken as 0.4 µs) per 32 splits and per element a thread holds (hd/128),
// t_part ≈ 0.0125·hd/128 µs, so len·t_pos + (n/len)·t_part is least near √(n/66): K = 64
// (32 at hd 256). That gives n splits (4n blocks for Qwen3-30B-A3B) up to n = 64, 2
// positions a split to 256, 4 at 1024, and 256 splits of n/256 from 4096 on.
// (bench/results/2026-11-30-attn-decode: the counting and the prediction.)
//
// Measured on the H200 (bench/results/2026-11-30-final-s6, call 1, TestBenchModelOps
// attention_small: split + reduce, µs, the previous policy against this one, both through
// the new reduce): hd 128 n = 14 12.51 → 9.06, n = 100 13.37 → 11.52, n = 263 14.17 →
// 14.30, n = 1000 20.80 → 29.60, n = 4096 37.09 → 46.43; hd 256 n = 100 16.64 → 15.79,
// n = 263 18.44 → 20.24. The reduce costs ~0.044 µs a split, not the 0.0125 counted, and the
// split launch does not get shorter with its length there. So this policy holds up to
// n = attnNewMax, and the previous one past it: the engine measured the 30B-A3B's last
// decode token (n = 136) at 2.533 device ms with it (call 2) against 2.668 with the previous
// policy there (call 3), and at n = 263 the kernel benchmark has the two equal (14.17 /
// 14.30 µs); past that the previous policy wins (n = 1000, 4096). At hd 256 the engine disagreed
// with the kernel benchmark: the 80B-A3B decode (12 attention layers of hd 256, positions
// 9–136) took 3.714 ms a token with the previous policy against 3.738–3.740 with this one
// (TestDecodeProfile attnold/base, same call), where the 30B-A3B (hd 128) went 2.699 →
// 2.553: so hd > 128 keeps the previous policy everywhere until that is understood.
func splitLen(n, fixed, hd int) int {
	s := fixed
	switch {
	case fixed == AttnSplitOld || (fixed <= 0 && (n > attnNewMax || hd > 128)):
		s = int(math.Ceil(math.Sqrt(float64(n) / 6)))
		s = max((s+7)/8*8, 8)
	case fixed <= 0:
		s = int(math.Ceil(math.Sqrt(float64(n) / 64)))
	}
	s = max(s, minSplitLen, (n+maxSplits-1)/maxSplits)
	return min(s, 1024)
}
