package gpu

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/quant"
)

// The batched prompt path's token tiles: which mmq (dense projections) and moe_prefill
// (routed experts) variant a launch takes, chosen per launch from the weight type and the
// chunk's token count (Options.PrefillTiles, Engine.SetPrefillTiles).
//
// Every tile here keeps BM = 64 weight rows per block; they differ in tokens per block (BN)
// and in block size: mmq r64t64 and r64t128 and moe_prefill r64t32, r64t48 and r64t64 run 128
// threads, mmq8 r64t128w8 256 (abi.MmqThreads, abi.Mmq8Threads, abi.MoePrefillThreads: the
// block size is a family's). moe_prefill's route (phase 0) writes each expert's tiles of BN
// pairs into the schedule on the GPU, and phases 1 and 2 run one block row per tile, so
// the schedule (p_sched, prefillNeeds) is sized for the smallest BN the engine can launch
// (schedTile) and phases 1 and 2 take max_tiles at the launched variant's BN.

// PrefillTiles is how the batched prompt path picks its mmq and moe_prefill tiles.
type PrefillTiles int

// The modes; the zero value is the default.
const (
	// TilesBest: per launch the tile that measured fastest for the weight type at the
	// chunk's length (mmqChoice, moeT32Below), where the device's code objects have it;
	// r64t64 elsewhere (the AMD targets build none of the others).
	TilesBest PrefillTiles = iota
	// TilesT64: every mmq and moe_prefill launch at r64t64, the engine's only tile before
	// 2026-11-30 (a measurement baseline).
	TilesT64
	// TilesT32: TilesBest as session 7 left it: moe_prefill takes r64t32 where TilesBest
	// takes r64t48 (moeT48From), the mmq tiles as TilesBest (a measurement baseline).
	TilesT32
	// TilesS8: TilesBest as session 8 left it: moe_prefill takes the window form's r64t32
	// and r64t48 where TilesBest takes their pair form (moePair), and the dense Q8_0 and Q2_0
	// projections go through mmq8 (mmqChoiceS8) where TilesBest takes mmq8cz and mmq8c (a
	// measurement baseline).
	TilesS8
)

// String is the mode's name.
func (m PrefillTiles) String() string {
	switch m {
	case TilesBest:
		return "best"
	case TilesT64:
		return "t64"
	case TilesT32:
		return "t32"
	case TilesS8:
		return "s8"
	}
	return fmt.Sprintf("PrefillTiles(%d)", int(m))
}

// ParsePrefillTiles reads "best", "t64", "t32" or "s8".
func ParsePrefillTiles(s string) (PrefillTiles, error) {
	for _, m := range []PrefillTiles{TilesBest, TilesT64, TilesT32, TilesS8} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("model/gpu: prefill tiles mode %q: want best, t64, t32 or s8", s)
}

// SetPrefillTiles sets Options.PrefillTiles on a loaded engine, between prompts (every
// candidate tile is prepared at load, and the schedule is sized for the smallest).
func (e *Engine) SetPrefillTiles(m PrefillTiles) {
	e.ptiles = m
}

// mmqChoice is the dense projections' tile per weight type as "family/tile": [0] for
// chunks of fewer than mmqLong tokens, [1] from mmqLong on. Source:
// bench/results/2026-11-30-final-s6 (call 1, TestBenchPrefill: mmq at 14336 rows × 4096,
// events, median of ≥ 50; every variant passed parity in the same call), TOPS at 512 / 2048
// tokens:
//
//	type      r64t64          r64t128         mmq8 r64t128w8
//	Q8_0      145.3 / 149.0   172.5 / 173.9   183.0 / 187.1
//	Q2_0      160.9 / 165.6   161.3 / 152.9   189.2 / 190.8
//	Q4_K      136.8 / 141.6   126.4 / 120.9   152.7 / 156.1
//	Q6_K      106.7 / 110.9   117.7 / 117.9   113.9 / 115.6
//	IQ2_XS    109.4 / 113.4   122.2 / 118.6   120.2 / 123.1
//	IQ3_XXS   143.8 / 148.8   142.3 / 143.7   170.0 / 172.2
//	IQ3_S     138.7 / 143.0   137.4 / 130.5   167.6 / 171.3
//	IQ1_M     117.5 / 118.8   134.0 / 131.4   122.9 / 126.1
//
// Lengths other than 512 and 2048 are unmeasured: below mmqLong (their geometric mean) the
// 512 column decides, from it the 2048 one. mmq8 gives each warp r64t64's 32 × 32 tile, so
// small grids (few rows, short chunks) cost it no more per block than r64t64; r64t128's
// warps hold twice that, which only a grid of several waves (as measured) amortises.
//
// Q8_0 and Q2_0 since session 9: mmq8's tile with compact scale tiles (kernels/prefill.go
// mmqCompact), Q8_0 also without the edge zeroing (mmq8cz), Q2_0 with it (mmq8c). Source:
// bench/results/2026-11-30-mmq8-s9 (one H200 call, the families alternated in each of 3
// processes, parity in the same call), TOPS at 512 / 2048 tokens, means of 7 runs (the
// lowest 512-token run in brackets):
//
//	type   mmq8                   mmq8c                  mmq8cz
//	Q8_0   183.0 (182.1) / 187.2  186.9 (185.7) / 190.7  190.9 (190.8) / 194.1
//	Q2_0   188.5 (185.8) / 190.8  204.3 (204.1) / 206.0  203.1 (202.7) / 205.7
//
// TilesS8 keeps mmq8 for them (mmqChoiceS8).
var mmqChoice = map[quant.Type][2]string{
	quant.Q8_0:    {"mmq8cz/r64t128w8", "mmq8cz/r64t128w8"},
	quant.Q2_0:    {"mmq8c/r64t128w8", "mmq8c/r64t128w8"},
	quant.Q4_K:    {"mmq8/r64t128w8", "mmq8/r64t128w8"},
	quant.Q6_K:    {"mmq/r64t128", "mmq/r64t128"},
	quant.IQ2_XS:  {"mmq/r64t128", "mmq8/r64t128w8"},
	quant.IQ3_XXS: {"mmq8/r64t128w8", "mmq8/r64t128w8"},
	quant.IQ3_S:   {"mmq8/r64t128w8", "mmq8/r64t128w8"},
	quant.IQ1_M:   {"mmq/r64t128", "mmq/r64t128"},
}

// mmqChoiceS8 is mmqChoice as session 8 left it, for the types whose choice changed since
// (TilesS8); the other types take mmqChoice's in TilesS8 too.
var mmqChoiceS8 = map[quant.Type][2]string{
	quant.Q8_0: {"mmq8/r64t128w8", "mmq8/r64t128w8"},
	quant.Q2_0: {"mmq8/r64t128w8", "mmq8/r64t128w8"},
}

// mmqLong is the chunk length from which mmqChoice's second column decides.
const mmqLong = 1024

// moeT32Below: moe_prefill takes r64t32 while a launch's pairs per expert (tokens · k_used
// / n_expert, the mean an expert's tile list holds) are below it, r64t64 from it on. Source:
// bench/results/2026-11-30-final-s6 (call 1, TestBenchPrefill: moe_prefill at the
// Qwen3-30B-A3B shape, 128 experts, top-8, uniform routing; parity in the same call), layer
// TOPS r64t32 / r64t64 at 512 tokens (32 pairs per expert) and at 2048 (128):
//
//	type      512: t32 / t64   2048: t32 / t64
//	Q8_0      72.3 / 67.3      97.4 / 107.2
//	Q2_0      73.5 / 67.6      99.2 / 107.4
//	Q4_K      66.6 / 58.1      89.8 / 93.6
//	Q6_K      49.2 / 44.4      66.5 / 70.0
//	IQ2_XS    56.2 / 51.1      74.3 / 76.2
//	IQ3_XXS   63.6 / 59.7      84.3 / 95.5
//	IQ3_S     61.9 / 59.1      81.9 / 94.1
//	IQ1_M     57.9 / 49.2      76.6 / 79.0
//
// Every type agrees, so the rule is one number: r64t32 wins at 32 pairs per expert (an
// expert's ~32 pairs fill one t32 tile, half a t64 one) and loses at 128 (twice the weight
// decodes per pair). Between the two it is unmeasured; the bound is their geometric mean.
// The key is pairs per expert rather than tokens because the experts' count sets it: the
// 80B-A3B (512 experts, top-10) has 10 at 512 tokens.
const moeT32Below = 64

// moeT48From: below moeT32Below, TilesBest takes r64t48 instead of r64t32 from this many
// pairs per expert on, for the expert types of moeT48 (where the target has the tile).
// r64t48 runs its tokens as n8 slices and skips the empty ones (kernels/prefill.go mmqN8), so
// an expert of up to 48 pairs takes one tile: at 32 pairs per expert (the 30B-A3B at 512
// tokens, Binomial(512, 1/16)) r64t32 gives 45 % of the experts a second, nearly empty tile
// that decodes their weights again (bench/results/2026-11-30-moet-s8, count.py: 0.69× the
// decoded weights, 0.76× the mma columns). Below the bound an expert's pairs fit one t32
// tile anyway (P(n > 32) ≈ 4 % at a mean of 24), and r64t48 would only stage 16 more (empty)
// activation rows a tile; the bound itself is not measured.
const moeT48From = 24

// moeT48 are the expert types whose r64t48 beat r64t32 at 512 tokens of the 30B-A3B shape
// (bench/results/2026-11-30-moet-s8: TestBenchPrefill, uniform routing, medians of 3, layer
// TOPS t32 → t48): Q6_K 50.6 → 52.2, IQ2_XS 57.0 → 60.8, IQ1_M 59.3 → 60.7, IQ3_XXS
// 63.3 → 65.6, IQ3_S 61.5 → 65.7. Not the others: Q8_0 71.8 → 69.3, Q4_K 66.6 → 61.8 (r64t48
// costs them a block an SM: 96 → 128 registers), Q2_0 73.0 → 73.1 in the layer bench but
// 9259 / 9417 → 9130 / 9063 tok/s in the engine's 30B prefill at 512 tokens (its synthetic
// routing is Zipf-skewed: moe_prefill 51.7 → 55.9 µs a token).
var moeT48 = map[quant.Type]bool{quant.Q6_K: true, quant.IQ2_XS: true, quant.IQ1_M: true, quant.IQ3_XXS: true, quant.IQ3_S: true}

// moePair are the expert types whose r64t32 and r64t48 TilesBest takes in the pair-staging
// form (kernels/prefill.go moePairForm: tiles r64t32x and r64t48x, the same shapes, rules and
// arithmetic; each weight job decodes two groups from one read of their shared bytes). The
// numbers below are of the plain pair tiles r64t32p and r64t48p (deleted in session 10).
// bench/results/2026-11-30-moe6-s9 (TestBenchPrefill at the 30B-A3B shape, uniform routing,
// window and pair form alternated, three runs each, layer TOPS at 512 / 2048 tokens): Q6_K
// r64t32 50.7 49.1 49.7 → 53.8 54.2 53.5 / 68.3 67.6 68.7 → 72.3 72.3 72.8; r64t48 52.1 52.6
// 52.4 → 58.3 59.2 59.7 / 67.9 67.9 67.8 → 74.0 74.3 74.9 (the Q4_K control 64.6–66.5).
var moePair = map[quant.Type]bool{quant.Q6_K: true}

// moePairTile is the suffix of the pair-form tiles TilesBest takes: "x" (r64t32x, r64t48x:
// the pair form whose edge jobs keep their loaded values and whose gate/up reads its rows of
// x from an LDS row table, kernels/prefill.go moeNoZero and moeXRows). bench/results/
// 2026-11-30-q6p-s9 (the same bench, one process a form, three runs each, layer TOPS at 512 /
// 2048 tokens, p → x): r64t48 58.2 58.4 58.5 → 64.1 64.2 64.4 / 74.4 74.1 74.0 → 81.3 80.8
// 81.3; r64t32 52.9 54.4 53.3 → 58.7 58.5 59.4 / 72.5 71.9 72.5 → 78.5 79.1 78.7 (the Q4_K
// control 64.0–66.5 / 88.5–90.1). The p tiles were deleted in session 10, dominated. A
// "q" form (the pair form with token-step activation jobs, one job staging a token's K step
// by nine aligned 16-byte loads) lost in final-s9 call 1 and was reverted: r64t48q 56.4 /
// 71.6 against r64t48p 58.7 / 74.4 TOPS at 512 / 2048 tokens (bench/results/2026-11-30-final-s9).
//
// From moeT48From pairs per expert on, with no upper end: unlike the window tiles (moeT32Below),
// r64t48x also beats r64t64 at 128 pairs per expert (the 30B-A3B at 2048 tokens): final-s9
// call 3a, two processes, layer TOPS at 512 / 2048 tokens: r64t48x 63.5 / 81.6 and 64.6 / 81.0,
// r64t64 44.1 / 69.0 and 44.3 / 69.4 (bench/results/2026-11-30-final-s9). Above 128 pairs it is
// unmeasured; a full t48 tile decodes each weight for 48 tokens against t64's 64 (1.33× the
// decodes a pair), which at 128 pairs cost less than the x form's staging gains.
const moePairTile = "x"

// tileThreads is the block size of each prefill family (kernels/specs.go Threads).
var tileThreads = map[string]int{"mmq": abi.MmqThreads, "mmq8": abi.Mmq8Threads, "mmq8c": abi.Mmq8cThreads, "mmq8cz": abi.Mmq8czThreads,
	"moe_prefill": abi.MoePrefillThreads}

// mmqFamilies are the families that take mmq's launch (kernels/specs.go mmqArgs: one C
// struct layout, grid (ceil(rows/BM), ceil(tokens/BN), 1)): mmq and the 8-warp ones the
// engine can choose (mmqChoice, mmqChoiceS8). Load loads those the target has.
var mmqFamilies = []string{"mmq", "mmq8", "mmq8c", "mmq8cz"}

// ptile is one prefill kernel the engine can launch: "family/variant" (e.kern's key), its
// family, BM weight rows and BN tokens per block, and the family's block size.
type ptile struct {
	key, fam string
	bm, bn   int
	threads  int
}

// tileShape reads BM and BN from a prefill variant's name (…_r<BM>t<BN>, optionally a
// suffix such as w8).
func tileShape(variant string) (bm, bn int, ok bool) {
	i := strings.LastIndex(variant, "_r")
	if i < 0 {
		return 0, 0, false
	}
	rs, ts, ok := strings.Cut(variant[i+2:], "t")
	if !ok {
		return 0, 0, false
	}
	j := 0
	for j < len(ts) && ts[j] >= '0' && ts[j] <= '9' {
		j++
	}
	bm, err1 := strconv.Atoi(rs)
	bn, err2 := strconv.Atoi(ts[:j])
	return bm, bn, err1 == nil && err2 == nil && bm > 0 && bn > 0
}

// newTile is family's variant on target as a ptile, and false when the target has no such
// variant.
func newTile(target, family, variant string) (ptile, bool) {
	co, _ := abi.Find(target, family)
	if _, ok := co.Symbol(variant); !ok {
		return ptile{}, false
	}
	bm, bn, ok := tileShape(variant)
	th := tileThreads[family]
	if !ok || th == 0 {
		panic("model/gpu: prefill variant " + family + "/" + variant + " has no tile shape or block size")
	}
	return ptile{key: family + "/" + variant, fam: family, bm: bm, bn: bn, threads: th}, true
}

// t64Tile is family's r64t64 variant for type t on target (mma where the target has it,
// else dp4a): the tile every mode can fall back to.
func t64Tile(target, family string, t quant.Type) (ptile, bool) {
	tv, ok := typeVariant[t]
	if !ok || t == quant.F16 || t == quant.BF16 {
		return ptile{}, false
	}
	for _, core := range []string{"mma", "dp4a"} {
		if p, ok := newTile(target, family, tv+"_"+core+"_r64t64"); ok {
			return p, true
		}
	}
	return ptile{}, false
}

// mmqTiles are the tiles of one dense weight type: r64t64, and the choice for short and
// long chunks (r64t64 where the target lacks the chosen one), in TilesBest (short, long) and
// in TilesS8 (s8short, s8long).
type mmqTiles struct{ t64, short, long, s8short, s8long ptile }

// mmqTilesFor is type t's mmq tiles on target, and false when mmq has no variant for t.
func mmqTilesFor(target string, t quant.Type) (mmqTiles, bool) {
	t64, ok := t64Tile(target, "mmq", t)
	if !ok {
		return mmqTiles{}, false
	}
	m := mmqTiles{t64, t64, t64, t64, t64}
	// set takes choice c's short and long tiles where the target has them.
	set := func(c [2]string, short, long *ptile) {
		for i, dst := range []*ptile{short, long} {
			fam, tile, _ := strings.Cut(c[i], "/")
			if p, ok := newTile(target, fam, typeVariant[t]+"_mma_"+tile); ok {
				*dst = p
			}
		}
	}
	if c, ok := mmqChoice[t]; ok {
		set(c, &m.short, &m.long)
	}
	m.s8short, m.s8long = m.short, m.long
	if c, ok := mmqChoiceS8[t]; ok {
		set(c, &m.s8short, &m.s8long)
	}
	return m, true
}

// keys are the kernels of m's tiles: every tile pick can return.
func (m *mmqTiles) keys() []string {
	return []string{m.t64.key, m.short.key, m.long.key, m.s8short.key, m.s8long.key}
}

// pick is the tile of a chunk of T tokens in mode m.
func (m *mmqTiles) pick(mode PrefillTiles, T int) ptile {
	switch {
	case mode == TilesT64:
		return m.t64
	case mode == TilesS8 && T < mmqLong:
		return m.s8short
	case mode == TilesS8:
		return m.s8long
	case T < mmqLong:
		return m.short
	}
	return m.long
}

// moeTiles are moe_prefill's tiles for one expert type: r64t64, r64t32 and r64t48 (t32.key,
// t48.key empty where the target has none; t48.key also for the types outside moeT48), and
// the pair forms of r64t32 and r64t48 (p32, p48: the types of moePair where the target has
// them, else empty).
type moeTiles struct{ t64, t32, t48, p32, p48 ptile }

// moeTilesFor is the expert type t's moe_prefill tiles on target, and false when
// moe_prefill has no r64t64 variant for t.
func moeTilesFor(target string, t quant.Type) (moeTiles, bool) {
	t64, ok := t64Tile(target, "moe_prefill", t)
	if !ok {
		return moeTiles{}, false
	}
	m := moeTiles{t64: t64}
	if p, ok := newTile(target, "moe_prefill", typeVariant[t]+"_mma_r64t32"); ok {
		m.t32 = p
	}
	if p, ok := newTile(target, "moe_prefill", typeVariant[t]+"_mma_r64t48"); ok && moeT48[t] {
		m.t48 = p
	}
	if p, ok := newTile(target, "moe_prefill", typeVariant[t]+"_mma_r64t32"+moePairTile); ok && moePair[t] && m.t32.key != "" {
		m.p32 = p
	}
	if p, ok := newTile(target, "moe_prefill", typeVariant[t]+"_mma_r64t48"+moePairTile); ok && moePair[t] && m.t48.key != "" {
		m.p48 = p
	}
	return m, true
}

// pick is the tile of a launch of pairs (token, expert) pairs over a model with experts
// experts per layer, in mode m. TilesBest's pair form r64t48x holds from moeT48From pairs per
// expert on, past moeT32Below too (moePairTile says why).
func (m *moeTiles) pick(mode PrefillTiles, pairs, experts int) ptile {
	switch {
	case mode == TilesBest && m.p48.key != "" && pairs >= moeT48From*experts:
		return m.p48
	case mode == TilesT64 || m.t32.key == "" || pairs >= moeT32Below*experts:
		return m.t64
	case (mode == TilesBest || mode == TilesS8) && m.t48.key != "" && pairs >= moeT48From*experts:
		return m.t48
	case mode == TilesBest && m.p32.key != "":
		return m.p32
	}
	return m.t32
}

// keys are the kernels of m's tiles that the target has: every tile pick can return.
func (m *moeTiles) keys() []string {
	var k []string
	for _, p := range []ptile{m.t64, m.t32, m.t48, m.p32, m.p48} {
		if p.key != "" {
			k = append(k, p.key)
		}
	}
	return k
}

// schedTile is the smallest token tile among m's: the schedule (p_sched) is sized for it.
func (m *moeTiles) schedTile() int {
	st := m.t64.bn
	for _, p := range []ptile{m.t32, m.t48, m.p32, m.p48} {
		if p.key != "" {
			st = min(st, p.bn)
		}
	}
	return st
}

// PrefillKernels lists the mmq and moe_prefill kernels a chunk of T tokens launches in the
// engine's current mode: per dense type in quant.Type order "<type>: family/variant", then
// "experts <type>: family/variant", the routed experts' tile of a launch over the whole
// chunk, then qwen3next's "shared <type>: family/variant" (sharedChunk's kernel per shared
// expert type). Empty without the batched path.
func (e *Engine) PrefillKernels(T int) []string {
	if e.chunk == 0 {
		return nil
	}
	var out []string
	for _, t := range slices.Sorted(maps.Keys(e.mmqT)) {
		out = append(out, t.String()+": "+e.mmqT[t].pick(e.ptiles, T).key)
	}
	p := e.moeT.pick(e.ptiles, T*e.cfg.ExpertsUsed, e.cfg.Experts)
	out = append(out, "experts "+e.expType.String()+": "+p.key)
	for _, t := range slices.Sorted(maps.Keys(e.shT)) {
		k := "moe_decode/" + typeVariant[t]
		if !e.shDec {
			k = e.shT[t].pick(e.ptiles, 2*T, 2).key
		}
		out = append(out, "shared "+t.String()+": "+k)
	}
	return out
}
