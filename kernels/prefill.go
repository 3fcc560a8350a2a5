package kernels

import "fmt"

// Resource model of the prefill families (mmq, moe_prefill): which tile shapes a target
// can hold. The numbers mirror kernels/templates/mmq_core.tmpl; ctest checks the compiled
// truth (LDS and VGPRs from the AMD metadata), this model only keeps variants that cannot
// fit out of the build.

// mmqKT is the number of 32-element groups staged per K step; mmqKS the LDS row stride.
const (
	mmqKT      = 4
	mmqKS      = 32*mmqKT + 16
	mmqThreads = 128
)

// mmqTableBytes is the LDS the quant_blocks lookup tables of each type take
// (struct strata_qt_<type>::lds).
var mmqTableBytes = map[string]int{
	"q80": 4, "q20": 4, "q4k": 4, "q6k": 4,
	"iq2xs":  512 * 8,  // grid u64[512] (the signs are computed, strata_ksigns)
	"iq3xxs": 256 * 4,  // grid u32[256]
	"iq3s":   512 * 4,  // grid u32[512]
	"iq1m":   2048 * 4, // grid u32[2048]
}

// mmqTiles maps each tile value to (weight rows BM, tokens BN).
var mmqTiles = map[string][2]int{
	"r64t64": {64, 64},
	"r64t32": {64, 32},
	"r64t48": {64, 48}, // moe_prefill's n8-slice tile (mmqN8)
	// moe_prefill's Q6_K pair-staging tiles (moePairForm) in their edge-keeping, row-table
	// form (moeNoZero, moeXRows): r64t32's and r64t48's shapes.
	"r64t32x": {64, 32},
	"r64t48x": {64, 48},
	"r128t32": {128, 32},
	"r128t64": {128, 64},
	"r64t128": {64, 128},
	// mmq8's 8-warp tile (mmq8Warp).
	"r64t128w8": {64, 128},
}

// mmqShape is the block shape of an NVIDIA mma kernel (strata_mmq_nv_shape in
// kernels/templates/mmq_core.tmpl): wgm × wgn warps (rows × tokens) and xd: the token scale
// tile holds d_x alone (types without mins).
type mmqShape struct {
	wgm, wgn int
	xd       bool
}

// mmq8Warp are the tiles of family mmq8: mmq's kernels with 8 warps (256 threads), NVIDIA
// mma only. r64t128w8 is mmq's r64t128 cut into 2 × 4 warps of 32 × 32 (32 accumulators a
// lane instead of 64) and held to 128 registers by launch_bounds(256, 2) (mmqMinBlocks), so
// that two blocks, 16 warps, share an SM where r64t128 has 8: r64t128's staging per product
// at twice the warps, and two blocks to overlap each other's synchronous staging.
//
// Chosen by bench/results/2026-11-30-mmq-tiles (H200, 512 / 2048 tokens, TOPS against
// main's r64t128 in the same run): Q8_0 173.8 → 180.9 / 175.0 → 188.2, Q2_0 162.9 → 191.7,
// Q4_K 127.2 → 153.7, IQ3_XXS 142.0 → 169.8, IQ3_S 137.2 → 167.2; IQ2_XS level (120.5 →
// 120.0 / 117.0 → 123.2); Q6_K (118.6 → 113.7) and IQ1_M (134.0 → 123.0) lose, their
// kernels spilling 96–120 bytes under the bound. The same calls measured and dropped (git
// history: the mmq8 commits of branch s6-mmq): r128t128 and r64t256 (2 × 4 warps of 64 × 32
// and 32 × 64, one ~250-register block an SM; K steps of 2 groups where 4 did not fit the
// 48 KiB) and r128t64w8 (4 × 2 warps of 32 × 32): slower than main's best tile, or than
// r64t128w8, for every type.
var mmq8Warp = map[string]bool{"r64t128w8": true}

// mmqShapeOf is the block shape of a kernel of type typ and tile on an NVIDIA target;
// ok = false for the core's default (2 × 2 warps, no xd).
func mmqShapeOf(typ, tile string) (sh mmqShape, ok bool) {
	if !mmq8Warp[tile] {
		return mmqShape{}, false
	}
	return mmqShape{wgm: 2, wgn: 4, xd: typ != "q4k"}, true
}

// Shape is the block shape the mmq template specialises strata_mmq_nv_shape with for v on
// t ("WGM, WGN, XD"), or "" for the core's default.
func (v Variant) Shape(t Target) string {
	if !t.IsNVIDIA() || v.Values["op"] != "mma" {
		return ""
	}
	sh, ok := mmqShapeOf(v.Values["type"], v.Values["tile"])
	if !ok {
		return ""
	}
	return fmt.Sprintf("%d, %d, %t", sh.wgm, sh.wgn, sh.xd)
}

// mmqTileThreads is the block size (x) of a prefill kernel of tile: 256 for the 8-warp tiles
// (family mmq8), else 128.
func mmqTileThreads(tile string) int {
	if mmq8Warp[tile] {
		return 256
	}
	return mmqThreads
}

// mmqNVLDS is the shared memory of an mmq8 kernel: struct strata_mmq_nv_smem (int8 rows of
// KS bytes, per-(row, group) scales of 16 bytes, per-(token, group) scales of 4 (xd) or 8
// bytes, the wide form's spare entries) plus the type's tables.
func mmqNVLDS(typ string, bm, bn int, sh mmqShape, wide bool) int {
	padW, padX, xw := 0, 0, 8
	if sh.xd {
		xw = 4
	}
	if wide {
		padW, padX = 2, 4*(3-xw/4)
	}
	return (bm+bn)*mmqKS + mmqKT*(bm+padW)*16 + mmqKT*(bn+padX)*xw + mmqTableBytes[typ]
}

// Tile is a prefill variant's (BM, BN), from its "tile" value; the mmq and moe_prefill
// templates read it as {{index .Tile 0}} and {{index .Tile 1}}.
func (v Variant) Tile() [2]int { return mmqTiles[v.Values["tile"]] }

// mmqNVIDIAOnly are the tiles built only for NVIDIA targets. The AMD cores were sized at
// r64t64 under the 128-VGPR budget; these shapes were added for the mma.sync core's warp
// tiles and chosen by measurement on the H200 (bench/results/2026-11-29-prefill-*); the
// dp4a variants of them exist on NVIDIA as the same-shape comparison.
var mmqNVIDIAOnly = map[string]bool{"r128t32": true, "r64t128": true, "r64t128w8": true, "r64t32": true, "r64t48": true, "r64t32x": true, "r64t48x": true}

// mmqN8 are the tiles whose warps hold token counts that are not a multiple of 16 (r64t48:
// 2 × 2 warps of 24 tokens): the NVIDIA mma core runs them as n8 slices, one mma.sync per
// slice, interleaved over the warp columns (mmq_core.tmpl strata_mmq_nv_run, N8), and a
// partial tile runs only the slices that hold tokens. The dp4a core takes BN = 48 as it is
// (threads own tokens 8 apart); NVIDIA only, as r64t32.
//
// Why 48 (bench/results/2026-11-30-moet-s8, count.py): at 512 tokens of Qwen3-30B-A3B an
// expert gets Binomial(512, 1/16) pairs, 32 ± 5.5. r64t32 gives 45 % of the experts a second,
// nearly empty tile, which decodes the expert's whole weights again: 186 tiles a layer for
// 128 experts, and 1.45 mma columns per pair. At 48, 99.8 % of the experts take one tile
// (128.3 tiles: 0.69× the weight decodes) and the n8 skip runs 1.11 columns per pair (0.76×),
// for 1.035× the activation staging.
//
// Measured (H200, same call, medians of 3, layer TOPS at 512 tokens, r64t32 → r64t48): far
// less than those counts promised (−25 % instructions predicted). r64t48 wins by 2–7 % where
// it keeps r64t32's blocks an SM (Q6_K 50.6 → 52.2, IQ2_XS 57.0 → 60.8, IQ1_M 59.3 → 60.7 with
// the per-group fold: 122–128 registers, 4 blocks, as their step-fold r64t32) and for IQ3_XXS
// 63.3 → 65.6, IQ3_S 61.5 → 65.7 (93–95 → 128 registers); it loses where it costs a block
// (Q8_0 71.8 → 69.3, Q4_K 66.6 → 61.8: 96 → 128 registers); Q2_0 73.0 → 73.1. At 2048 tokens
// r64t48 loses to r64t32 for every type but IQ2_XS (76.0 → 76.8) and IQ3_S. The engine takes
// it per type (model/gpu/tiles.go moeT48).
var mmqN8 = map[string]bool{"r64t48": true, "r64t48x": true}

// mmqLDS is the static LDS of one block: struct strata_mmq_smem<QT, 1, BM, BN>. Both
// prefill families hold one BM-row weight tile (moe_prefill's gate/up is two matrices of
// BM/2 rows, the same LDS and accumulators; its route scratch and h tile share the LDS
// union and are smaller).
func mmqLDS(typ string, bm, bn int) int {
	return bm*mmqKS + bn*mmqKS + // int8 weight and activation tiles
		bm*mmqKT*(4+8+4+4) + // base, m0/m1, offb, offm per (row, group)
		bn*mmqKT*(4+4) + // d and Σq per (token, group)
		mmqTableBytes[typ]
}

// mmqAccRegs is the f32 accumulators one lane of a tile holds for the whole K loop.
func mmqAccRegs(tile string) int {
	bmn := mmqTiles[tile]
	return bmn[0] * bmn[1] / mmqTileThreads(tile)
}

// mmqAccBudget is the most accumulator registers a lane may hold on t: a quarter of the
// register budget (AMD: the VGPR budget of the Target row, 128 → 32), leaving the rest to
// fragments (gfx11 replicated A/B take 8 VGPRs per K=32 operand), the transient int32
// products, addresses and the decode. NVIDIA: ptxas allocates up to 255 registers per thread;
// with 128 threads per block that is not the occupancy limiter, so 64 accumulators fit.
// Measured (clang 19, kernels held to 128 VGPRs by amdgpu_num_vgpr): mmq r64t64 (32
// accumulators) uses 87–117 VGPRs on gfx1030/gfx11/gfx12 for every type, no spills; without the
// cap clang took 169–233. r128t64 (64 accumulators) is left to NVIDIA.
func mmqAccBudget(t Target) int {
	if t.IsNVIDIA() {
		return 64
	}
	return t.VGPRs / 4
}

// mmqFits is the Fits of both prefill families (mmq, moe_prefill).
func mmqFits(t Target, v Variant) (bool, string) {
	tile, ok := mmqTiles[v.Values["tile"]]
	if !ok {
		return false, "unknown tile " + v.Values["tile"]
	}
	if mmqNVIDIAOnly[v.Values["tile"]] && !t.IsNVIDIA() {
		return false, "tile " + v.Values["tile"] + " is an NVIDIA mma.sync warp-tile shape; the AMD cores " +
			"keep r64t64, sized under the 128-VGPR budget"
	}
	if mmq8Warp[v.Values["tile"]] {
		if !t.IsNVIDIA() || v.Values["op"] != "mma" {
			return false, "tile " + v.Values["tile"] + " is an 8-warp NVIDIA mma.sync shape (kernels/prefill.go, mmq8Warp)"
		}
		sh, _ := mmqShapeOf(v.Values["type"], v.Values["tile"])
		if lds := mmqNVLDS(v.Values["type"], tile[0], tile[1], sh, v.WideStaging("mmq8", t)); lds > t.LDSBytes {
			return false, fmt.Sprintf("LDS %d bytes > %d", lds, t.LDSBytes)
		}
	} else if lds := mmqLDS(v.Values["type"], tile[0], tile[1]); lds > t.LDSBytes {
		return false, fmt.Sprintf("LDS %d bytes > %d", lds, t.LDSBytes)
	}
	if acc, b := mmqAccRegs(v.Values["tile"]), mmqAccBudget(t); acc > b {
		return false, fmt.Sprintf("%d accumulator registers per lane > %d", acc, b)
	}
	return true, ""
}

// axisPrefillType is every weight type the int8 prefill families take: the quantized ones.
// F16 and BF16 have no exact int8 form (an 11- or 8-bit significand per element, no shared
// block scale), so turning them into int8 tiles would change the weights; their prefill is a
// float GEMM, not mmq.
var axisPrefillType = Axis{Name: "type", Values: axisWeightType(ISANone).Values[2:]}

// mmqWideStaging names the NVIDIA mma kernels ("family/type/tile") that stage their K steps
// with the wide form of the mma.sync core (kernels/templates/mmq_core.tmpl, "Staging
// forms"): three aligned 16-byte loads per Q8_1 activation block (and per Q8_0 weight block)
// picked apart by register selects, and scale tiles padded against bank conflicts. Every
// other NVIDIA mma kernel keeps the 4-byte form, whose PTX is that of main before the wide
// form existed; the AMD and dp4a cores have one form.
//
// The choice is per kernel because neither form wins everywhere: H200 call 3 of
// bench/results/2026-11-29-mmq-ncu (call3/mmq-call3-OvsD.txt, TOPS at 512 and 2048 tokens:
// O = 4-byte form, D = wide form; C, the wide form with Q8_0 steps software-pipelined, was
// slower than or equal to D almost everywhere and is gone). Wide loads win at r64t64 for
// nearly every type and for Q8_0 at every tile (mmq Q8_0 r64t128 115.6 → 175.6 TOPS at 512
// tokens) but lose at r128t64/r64t128 for Q4_K, Q6_K, IQ3_XXS and IQ3_S (mmq IQ3_XXS r128t64
// 155.2 → 137.1) and for moe_prefill Q6_K r64t64 (41.5 → 34.0); why was not profiled (the
// r128t64/r64t128 kernels are at 246–255 registers in both forms). Rule: wide where D512 + D2048 >
// O512 + O2048 in that file. Measured on sm_90 only; sm_80/86/89 take the same choice.
var mmqWideStaging = map[string]bool{
	"mmq/iq1m/r64t128": true, "mmq/iq1m/r64t64": true,
	"mmq/iq2xs/r64t128": true, "mmq/iq2xs/r64t64": true,
	"mmq/iq3s/r64t64":   true,
	"mmq/iq3xxs/r64t64": true,
	"mmq/q20/r128t64":   true, "mmq/q20/r64t128": true, "mmq/q20/r64t64": true,
	"mmq/q4k/r64t64":  true,
	"mmq/q6k/r64t64":  true,
	"mmq/q80/r128t64": true, "mmq/q80/r64t128": true, "mmq/q80/r64t64": true,
	// mmq8 (mmq8Warp): wide for every type, as r64t64, the other 32 × 32-warp tile under a
	// register bound; the 4-byte form was not measured at r64t128w8.
	"mmq8/q80/r64t128w8": true, "mmq8/q20/r64t128w8": true, "mmq8/q4k/r64t128w8": true, "mmq8/q6k/r64t128w8": true,
	"mmq8/iq2xs/r64t128w8": true, "mmq8/iq3xxs/r64t128w8": true, "mmq8/iq3s/r64t128w8": true, "mmq8/iq1m/r64t128w8": true,
	// mmq8x4 (mmqXSeg): mmq8's staging.
	"mmq8x4/q6k/r64t128w8": true, "mmq8x4/iq3xxs/r64t128w8": true, "mmq8x4/iq3s/r64t128w8": true,
	// mmq8c, mmq8cz (mmqCompact): mmq8's staging.
	"mmq8c/q20/r64t128w8": true, "mmq8cz/q80/r64t128w8": true,
	// mmq8x4n (mmqPlanes): its activations as mmq8x4's (its weights have their own form).
	"mmq8x4n/iq2xs/r64t128w8": true, "mmq8x4n/iq1m/r64t128w8": true,
	"mmq8x4g/iq2xs/r64t128w8": true, "mmq8x4g/iq1m/r64t128w8": true,

	"moe_prefill/iq1m/r128t32": true, "moe_prefill/iq1m/r64t64": true,
	"moe_prefill/iq2xs/r64t64":  true,
	"moe_prefill/iq3s/r64t64":   true,
	"moe_prefill/iq3xxs/r64t64": true,
	"moe_prefill/q20/r64t64":    true,
	"moe_prefill/q4k/r128t32":   true, "moe_prefill/q4k/r64t64": true,
	"moe_prefill/q6k/r128t32": true,
	"moe_prefill/q80/r128t32": true, "moe_prefill/q80/r128t64": true, "moe_prefill/q80/r64t64": true,
	// moe_prefill r64t32 (session 6): wide for every type, by bench/results/2026-11-30-moe-prefill
	// (call 1, trees W against S at 512 tokens: Q8_0 45.9 → 72.5, Q4_K 58.4 → 66.8, IQ2_XS
	// 52.8 → 56.2; every type gained 5–58 %).
	"moe_prefill/iq1m/r64t32": true, "moe_prefill/iq2xs/r64t32": true, "moe_prefill/iq3s/r64t32": true,
	"moe_prefill/iq3xxs/r64t32": true, "moe_prefill/q20/r64t32": true, "moe_prefill/q4k/r64t32": true,
	"moe_prefill/q6k/r64t32": true, "moe_prefill/q80/r64t32": true,
	// moe_prefill r64t48 (mmqN8): as r64t32, its 2 × 2 warps' neighbour, unmeasured in the 4-byte form.
	"moe_prefill/iq1m/r64t48": true, "moe_prefill/iq2xs/r64t48": true, "moe_prefill/iq3s/r64t48": true,
	"moe_prefill/iq3xxs/r64t48": true, "moe_prefill/q20/r64t48": true, "moe_prefill/q4k/r64t48": true,
	"moe_prefill/q6k/r64t48": true, "moe_prefill/q80/r64t48": true,
	// moe_prefill r64t32x, r64t48x (moePairForm, moeNoZero, moeXRows): as r64t32 and r64t48 (the pair form needs it).
	"moe_prefill/q6k/r64t32x": true, "moe_prefill/q6k/r64t48x": true,
}

// WideStaging reports whether variant v of family (mmq or moe_prefill) on t is an NVIDIA
// mma kernel staged in the wide form (mmqWideStaging); the mmq and moe_prefill templates
// render a strata_mmq_nv_wide_stage specialisation for each such kernel.
func (v Variant) WideStaging(family string, t Target) bool {
	return t.IsNVIDIA() && v.Values["op"] == "mma" && mmqWideStaging[family+"/"+v.Values["type"]+"/"+v.Values["tile"]]
}

// mmqMinBlocks names the NVIDIA mma kernels ("family/type/tile") compiled with a minimum of
// resident blocks per SM (launch_bounds(T, n), T the family's threads, 128 or mmq8's 256:
// ptxas then holds the kernel to 65536/(T·n) registers a thread). mmq r64t64 takes 136–192 registers without it (ptxas
// 13.0), 2–3 blocks of 128 threads an SM: at 512 tokens its 512 blocks on the H200's 132 SMs
// are more than one wave and the tail leaves SMs idle. At 4 blocks an SM (128 registers,
// 12–208 bytes of spills) they are one wave of 528. The shared array (48128 bytes a block,
// module-wide) allows 4 blocks on an H200 SM (see MinBlocks).
//
// Chosen by bench/results/2026-11-30-prefill-route (H200, TOPS O → N at 512 / 2048 tokens,
// N = with the bound): kept where N512 + N2048 > O512 + O2048 — Q8_0 124.5 → 144.6 / 159.3 →
// 148.5, Q2_0 129.5 → 161.6 / 164.8 → 166.5, Q4_K 109.7 → 136.8 / 138.3 → 142.4, Q6_K 82.7
// → 107.1 / 105.3 → 111.4, IQ2_XS 105.6 → 109.3 / 109.6 → 113.3, IQ3_XXS 104.2 → 143.8 /
// 133.3 → 149.0, IQ3_S 104.6 → 138.7 / 133.3 → 142.8; IQ1_M lost (117.6 → 110.4 / 119.6 →
// 114.9) and keeps none. The same call measured 3 blocks (168 registers, 244–548 bytes of
// spills) for every r128t64 and r64t128 kernel: slower everywhere (mmq Q8_0 r64t128 176.8 →
// 121.4 at 512 tokens), so none. Measured on sm_90 only. Values are 4 or 2 (mmq.tmpl defines
// STRATA_MMQ4_BOUNDS and STRATA_MMQ2_BOUNDS) or absent.
var mmqMinBlocks = map[string]int{
	"mmq/iq2xs/r64t64": 4, "mmq/iq3s/r64t64": 4, "mmq/iq3xxs/r64t64": 4,
	"mmq/q20/r64t64": 4, "mmq/q4k/r64t64": 4, "mmq/q6k/r64t64": 4, "mmq/q80/r64t64": 4,
	// mmq8 (mmq8Warp): 2 blocks of 256 threads, 128 registers (16–100 bytes of spills).
	"mmq8/q80/r64t128w8": 2, "mmq8/q20/r64t128w8": 2, "mmq8/q4k/r64t128w8": 2, "mmq8/q6k/r64t128w8": 2,
	"mmq8/iq2xs/r64t128w8": 2, "mmq8/iq3xxs/r64t128w8": 2, "mmq8/iq3s/r64t128w8": 2, "mmq8/iq1m/r64t128w8": 2,
	// mmq8x4, mmq8x4n (mmqXSeg): as mmq8.
	"mmq8x4/q6k/r64t128w8": 2, "mmq8x4/iq3xxs/r64t128w8": 2, "mmq8x4/iq3s/r64t128w8": 2,
	// mmq8c, mmq8cz (mmqCompact): as mmq8.
	"mmq8c/q20/r64t128w8": 2, "mmq8cz/q80/r64t128w8": 2,
	"mmq8x4n/iq2xs/r64t128w8": 2, "mmq8x4n/iq1m/r64t128w8": 2,
	"mmq8x4g/iq2xs/r64t128w8": 2, "mmq8x4g/iq1m/r64t128w8": 2,
}

// nvSMShared is the shared memory an SM of each NVIDIA target gives its resident blocks, in
// bytes (each block also costs 1 KiB the runtime reserves). A minimum of blocks per SM is
// only asked where that many blocks of the target's LDS budget fit: on the others the
// register cap would buy no occupancy.
var nvSMShared = map[string]int{"sm_80": 164 << 10, "sm_86": 100 << 10, "sm_89": 100 << 10, "sm_90": 228 << 10}

// MinBlocks is the minimum of resident blocks per SM that variant v of family asks of the
// NVIDIA compiler (mmqMinBlocks), or 0: none (the kernel carries STRATA_LAUNCH_BOUNDS).
func (v Variant) MinBlocks(family string, t Target) int {
	if !t.IsNVIDIA() || v.Values["op"] != "mma" {
		return 0
	}
	n := mmqMinBlocks[family+"/"+v.Values["type"]+"/"+v.Values["tile"]]
	if n*(t.LDSBytes+1024) > nvSMShared[t.Name] {
		return 0
	}
	return n
}

// moePartialSkip names the NVIDIA mma moe_prefill kernels ("type/tile") whose tiles skip
// the token fragments past the tile's last token (the mmq core's Src::PARTIAL; an expert
// gets 32 pairs on average at 512 tokens of Qwen3-30B-A3B, so most BN = 64 tiles are half
// empty). The skip saves matrix and fold instructions but can cost registers (moe_prefill
// Q8_0 r64t64: 128 → 146, 4 → 3 blocks an SM), so it is chosen per kernel by
// bench/results/2026-11-30-prefill-route: kept where the gate/up + down + combine time at
// 512 plus 2048 tokens was lower with it (Q6_K r128t32 gate/up 699 → 580 µs at 512 tokens;
// Q8_0 r64t64 380 → 444 without this choice). Measured on sm_90 only.
var moePartialSkip = map[string]bool{
	"iq1m/r128t32": true, "iq1m/r128t64": true,
	"iq2xs/r128t32": true, "iq2xs/r128t64": true, "iq2xs/r64t64": true,
	"iq3s/r128t32": true, "iq3xxs/r128t32": true,
	"q20/r128t64": true,
	"q6k/r128t32": true, "q6k/r128t64": true,
	// r64t48 (mmqN8): every type; the skip by n8 slice is the tile's point.
	"iq1m/r64t48": true, "iq2xs/r64t48": true, "iq3s/r64t48": true, "iq3xxs/r64t48": true,
	"q20/r64t48": true, "q4k/r64t48": true, "q6k/r64t48": true, "q80/r64t48": true,
	"q6k/r64t48x": true, // moePairForm: as r64t48
}

// PartialSkip reports whether moe_prefill variant v on t skips empty token fragments
// (moePartialSkip); the template passes it as strata_moe_src's PARTIAL.
func (v Variant) PartialSkip(t Target) bool {
	return t.IsNVIDIA() && v.Values["op"] == "mma" && moePartialSkip[v.Values["type"]+"/"+v.Values["tile"]]
}

// moeMinBlocks names the NVIDIA mma moe_prefill kernels ("type/tile") compiled with a minimum
// of resident blocks per SM (launch_bounds(128, n), n = 4, 5 or 6: moe_prefill.tmpl defines
// STRATA_MOE4_BOUNDS, STRATA_MOE5_BOUNDS and STRATA_MOE6_BOUNDS). Asked only where n blocks of the kernel's own
// shared memory fit an SM (MoeMinBlocks). None: measured on the H200 for every r64t32 kernel
// (bench/results/2026-11-30-moe-prefill), 5 blocks was within −2.2 to 0 % at 512 tokens (ptxas
// already takes 80–96 registers there, 128 for Q6_K, where 96 without spills ran no faster), 6
// and 8 blocks spilled 56–316 bytes and lost 7–12 %; r64t64 at 5 blocks spilled 320–852 bytes.
// r64t48 at 4 blocks (bench/results/2026-11-30-moet-s8, tree B4, with the step fold): Q6_K,
// IQ2_XS, IQ1_M spilled 132–184 bytes and lost to their per-group fold without bounds (Q6_K
// 44.9 against 52.2 at 512 tokens); the others were at ≤ 128 already (level).
var moeMinBlocks = map[string]int{}

// MoeMinBlocks is the minimum of resident blocks per SM that moe_prefill variant v asks of the
// NVIDIA compiler (moeMinBlocks), or 0 (the kernel carries STRATA_LAUNCH_BOUNDS).
func (v Variant) MoeMinBlocks(t Target) int {
	if !t.IsNVIDIA() || v.Values["op"] != "mma" || !v.MoeOwnLDS(t) {
		return 0
	}
	n := moeMinBlocks[v.Values["type"]+"/"+v.Values["tile"]]
	tile := mmqTiles[v.Values["tile"]]
	if n*(mmqLDS(v.Values["type"], tile[0], tile[1])+1024) > nvSMShared[t.Name] {
		return 0
	}
	return n
}

// MoeOwnLDS reports whether moe_prefill variant v on t has its own shared array sized to the
// variant (moe_prefill.tmpl): every NVIDIA kernel. r64t32 needs it for its 5–6 blocks an SM
// (19–27 KB against the 48128 bytes of the largest variant), and ctest's PTX check counts a
// module-scope array against every kernel of the module, so no NVIDIA kernel keeps the
// module-wide array. The other tiles' code is unchanged by it and ran 0.2–2.8 % faster at 512
// tokens on the H200 (r64t64; bench/results/2026-11-30-moe-prefill, call 2). AMD kernels share
// one module-wide array as before (each kernel's LDS is that array's size there).
func (v Variant) MoeOwnLDS(t Target) bool { return t.IsNVIDIA() }

// moeNVForm names the NVIDIA mma moe_prefill kernels ("type/tile") that run their weight
// type's moe-specific NVIDIA form (moe_prefill.tmpl, strata_moe_qt): Q6_K reads its weight
// groups by 16-byte loads (strata_moe_q6k_w), IQ1_M copies its grid into LDS in one round
// trip (strata_moe_iq1m_w). Same values as the quant_blocks forms. H200, 512 tokens
// (bench/results/2026-11-30-moe-prefill, call 1 → call 2, so across two runs): Q6_K r64t32
// 48.4 → 49.4 TOPS (L1 data-pipe wavefronts 85 → 61 %, but 96 → 128 registers), IQ1_M r64t32
// 57.4 → 58.2.
var moeNVForm = map[string]bool{"q6k/r64t32": true, "iq1m/r64t32": true, "q6k/r64t48": true, "iq1m/r64t48": true}

// MoeNVForm reports whether moe_prefill variant v runs its type's moe-specific NVIDIA form
// (moeNVForm). Only NVIDIA targets build the tiles named there (r64t32 is NVIDIA-only); on
// others the template maps every type to itself.
func (v Variant) MoeNVForm() bool {
	return v.Values["op"] == "mma" && moeNVForm[v.Values["type"]+"/"+v.Values["tile"]]
}

// moePairTiles are the moe_prefill tiles of the Q6_K pair-staging form: r64t32x and r64t48x
// are r64t32 and r64t48 (same shape, fold, staging form, skip) whose weight staging decodes
// two groups per job (moePairForm), with moeNoZero and moeXRows. Built only for the kernels
// moePairForm names. The plain pair tiles r64t32p and r64t48p (the pair form alone) were
// deleted in session 10, dominated by the x tiles in every run (moeXRows's numbers).
var moePairTiles = map[string]bool{"r64t32x": true, "r64t48x": true}

// moePairForm names the NVIDIA mma moe_prefill kernels ("type/tile") whose weight staging
// decodes two groups of one row per job (mmq_core.tmpl strata_mmq_nv_pair; moe_prefill.tmpl
// strata_moe_q6k_p): Q6_K groups j and j + 2 of a 256-element block read the same 32 bytes
// of ql (low and high nibbles) and the same 32 bytes of qh, so a job of the pair form loads
// each once, where two jobs of strata_moe_q6k_w load both twice. The values are strata_qt_q6k's.
var moePairForm = map[string]bool{"q6k/r64t32x": true, "q6k/r64t48x": true}

// moeNoZero names the NVIDIA mma moe_prefill kernels ("type/tile") of the pair form whose
// staging keeps the values that edge jobs load from their safe in-tile address instead of
// storing zeros (mmq_core.tmpl strata_mmq_nv_nz, as family mmq8cz's: kernels/prefill.go
// mmqNoZero, +2.1 % on Q8_0 mmq): the x tiles (moeXRows), whose block type strata_moe_q6k_x
// keeps the core's per-kernel specialisations of the x and (deleted) p tiles apart. Why no written
// output sees an edge job's values, per edge:
//   - groups past K: none exist for Q6_K (K = hidden or n_ff, multiples of 256, the K step 128
//     elements), and the core's K loop multiplies no group at or past K (nk) anyway;
//   - tokens past the tile's n list entries (an expert's last tile): column c ≥ n of the
//     gate/up tile reaches only the LDS h tile hs[c][·], which the requantisation skips
//     (c ≥ n: no hq, no hf); the down epilogue writes yp only for c < n;
//   - rows past n_ff (gate/up) or hidden (down): the down epilogue writes only rows < hidden;
//     gate/up rows ≥ n_ff reach hs[·][r] only, and the requantisation reads a 32-feature
//     block only when its first feature is < n_ff, so with n_ff a multiple of 32 (the ABI's
//     n_ff: a multiple of 32 and of the type's block) every feature it reads is < n_ff.
//
// Each output is one row times one token, so a written output sees only its own row's and
// token's staged values. The edge values are finite (row 0's, token 0's data).
//
// H200, bench/results/2026-11-30-q6p-s9 (one process a form, P Z X three times; layer TOPS at
// 512 / 2048 tokens): tiles r64t32z and r64t48z, the pair tiles with this alone, ran r64t48
// 58.2 58.4 58.5 → 61.4 62.2 62.5 / 74.4 74.1 74.0 → 77.4 77.1 77.4 and r64t32 52.9 54.4 53.3 →
// 54.3 55.6 55.3 / 72.5 71.9 72.5 → 74.0 74.4 73.0 (8 bytes of spills); the x tiles (this plus
// the row table) ran faster still, so the z tiles were deleted and moeNoZero holds the x tiles.
var moeNoZero = map[string]bool{"q6k/r64t32x": true, "q6k/r64t48x": true}

// moeXRows names the moeNoZero kernels ("type/tile") whose gate/up reads each activation
// job's x row from an LDS table of the tile's rows (list entry / k_used, written once a block
// before the K loop) instead of a global load of the list entry and an integer division by
// the runtime k_used per job and K step (moe_prefill.tmpl strata_moe_src, XR): a div.s32 is
// ≈ 20 SASS instructions, and every thread runs 1.5–2 activation jobs a K step. The down
// projection divides by the constant 1 and keeps the list read. The same rows, so the same
// values. r64t32x and r64t48x are the pair form (the deleted r64t32p and r64t48p) with
// moeNoZero and the row table.
//
// H200, bench/results/2026-11-30-q6p-s9 (as above; layer TOPS at 512 / 2048 tokens, p → x):
// r64t48 58.2 58.4 58.5 → 64.1 64.2 64.4 / 74.4 74.1 74.0 → 81.3 80.8 81.3 (gate/up 428.6 →
// 376.5 µs, down 202.3 → 193.9 at 512), r64t32 52.9 54.4 53.3 → 58.7 58.5 59.4 / 72.5 71.9
// 72.5 → 78.5 79.1 78.7; 128 registers, no spills; the Q4_K control 64.0–66.5 / 88.5–90.1.
var moeXRows = map[string]bool{"q6k/r64t32x": true, "q6k/r64t48x": true}

// MoeXRows reports whether moe_prefill variant v on t reads its gate/up activation rows from
// the LDS row table (moeXRows).
func (v Variant) MoeXRows(t Target) bool { return t.IsNVIDIA() && v.MoeXRowsForm() }

// MoeXRowsForm reports whether moe_prefill variant v is one of moeXRows's (NVIDIA-only tiles),
// whose block type is strata_moe_q6k_x.
func (v Variant) MoeXRowsForm() bool {
	return v.Values["op"] == "mma" && moeXRows[v.Values["type"]+"/"+v.Values["tile"]]
}

// MoeNoZero reports whether moe_prefill variant v on t keeps edge jobs' loaded values
// (moeNoZero); the template renders a strata_mmq_nv_nz specialisation for it.
func (v Variant) MoeNoZero(t Target) bool {
	return t.IsNVIDIA() && v.Values["op"] == "mma" && moeNoZero[v.Values["type"]+"/"+v.Values["tile"]]
}

// moePairAbsent is moe_prefill's Spec.Absent: the pair tiles exist only for the kernels
// moePairForm names.
func moePairAbsent(v Variant) bool {
	return moePairTiles[v.Values["tile"]] && !v.MoePairForm()
}

// MoePairForm reports whether moe_prefill variant v runs the Q6_K pair-staging form
// (moePairForm; NVIDIA-only tiles).
func (v Variant) MoePairForm() bool {
	return v.Values["op"] == "mma" && moePairForm[v.Values["type"]+"/"+v.Values["tile"]]
}

// moeStepFold names the NVIDIA mma moe_prefill kernels ("type/tile") whose core folds once
// per K step (mmq_core.tmpl strata_mmq_nv_step_fold): per output the step's Σ d_x·main in
// one f32 (an FFMA a group), then one fma with the step's base, instead of base·d_x and an
// FFMA every group. Only 256-element types without mins qualify (one base for a step's 4
// groups). The rounding: parity/moe_prefill.go (y); -DSTRATA_MOE_GROUP_FOLD builds the
// per-group fold back.
//
// H200, bench/results/2026-11-30-moepf-s7 (one call, trees alternated, medians of 3, layer
// TOPS at 512 / 2048 tokens, per-group → step fold): Q6_K 49.1 → 50.0 / 66.2 → 67.6, IQ2_XS
// 56.2 → 56.5 / 73.9 → 74.9, IQ1_M 57.7 → 58.8 / 76.4 → 77.9; IQ3_XXS 63.5 → 61.9 and IQ3_S
// 61.8 → 60.6 lost and are not named (types whose PTX did not change read 1.2 % lower in the
// step-fold tree, so the gains are, if anything, understated). The 16 partial sums raised
// ptxas's registers: IQ2_XS and IQ1_M went from 96 and 80 to 128 and 126 (5 → 4 blocks an
// SM; Q6_K was at 128 already), which took most of the gain (ncu, IQ2_XS gate/up: 8.5 %
// fewer instructions, 3.2 % less time); held to 96 by launch_bounds(128, 5) they spilled
// 120–212 bytes and lost 6–14 %.
//
// Not at r64t48: there the step sums took Q6_K, IQ2_XS and IQ1_M to 168, 151 and 162 registers
// (3 blocks an SM; the per-group fold 128, 125, 122), and the per-group fold won at 512 / 2048
// tokens (bench/results/2026-11-30-moet-s8, medians of 3, step → group): Q6_K 49.2 → 52.2 /
// 64.7 → 67.3, IQ2_XS 55.2 → 60.8 / 69.8 → 76.8, IQ1_M 59.4 → 60.7 / 74.7 → 76.4.
var moeStepFold = map[string]bool{"q6k/r64t32": true, "iq2xs/r64t32": true, "iq1m/r64t32": true, "q6k/r64t32x": true}

// MoeStepFold reports whether moe_prefill variant v on t folds once per K step
// (moeStepFold); the template renders a strata_mmq_nv_step_fold specialisation for it.
func (v Variant) MoeStepFold(t Target) bool {
	return t.IsNVIDIA() && v.Values["op"] == "mma" && moeStepFold[v.Values["type"]+"/"+v.Values["tile"]]
}

// mmqXSeg is the activation segment of the families whose NVIDIA mma core sums a segment's
// groups in int32 and folds them in f32 once (strata_mmq_nv_xseg in
// kernels/templates/mmq_core.tmpl): groups of 32 elements that share one Q8_1 d. Families
// mmq8x4 and mmq8x4n: 4 groups (128 elements, one K step) inside a 256-element block of
// their weight types, so one weight base and one d_x hold for the segment, and the int32
// sums are folded before the next step's staging.
//
// Why: the split types (sub-scale per 16 elements) fold each 32-element group in f32 with 20
// FP32 instructions per m16n8k32 against Q8_0's 12, and the mmq8 kernels are issue-bound
// (bench/results/2026-11-30-mmq-s7: IQ2_XS 31.2 instructions per m16n8k32, Q8_0 21.8). In
// int32 a group costs one IMAD per output and 16-element half (the mma seeded with 0), the
// f32 fold (I2F, FMUL, FFMA) once per segment. The price: the activations' d is the
// segment's amax/127, so blocks quieter than their segment lose resolution
// (bench/results/2026-11-30-mmqs-s8).
//
// Family mmq8x4p (deleted in session 10, dominated by mmq8x4n: mmqPlanes) was mmq8x4 whose
// core also prefetches the next K step's weight and activation lines into L1 before the
// current step's mma (mmqPrefetch); mmq8x4n keeps the prefetch.
//
// 8-group segments (family mmq8x, session 8: 256 elements, two K steps, so the sums lived
// through the second step's staging, 128–152 bytes of spills) were measured and dropped: in
// bench/results/2026-11-30-mmqs2-s8 call 1 (TOPS at 512 / 2048 tokens, means of two runs) mmq8x →
// mmq8x4 Q6_K 128.8 → 133.1 / 130.5 → 134.7, IQ2_XS 140.0 → 140.9 / 142.8 → 143.9, IQ1_M
// 142.7 → 142.7 / 146.3 → 145.9, and mmq8x4p beat both for IQ2_XS (144.3 / 148.0) and IQ1_M
// (143.6 / 147.7); 4-block segments also cost the activations less
// (bench/results/2026-11-30-mmqs-s8, "What the shared d costs").
var mmqXSeg = map[string]int{"mmq8x4": 4, "mmq8x4n": 4, "mmq8x4g": 4}

// mmqPrefetch names the families whose NVIDIA mma core issues, after staging K step g0, one
// prefetch.global.L1 a staging job for step g0 + KT's lines (strata_mmq_nv_pf in
// kernels/templates/mmq_core.tmpl): the loads of the next staging then hit L1 instead of
// waiting on L2. Why: call 1 of bench/results/2026-11-30-mmqs-s8 found mmq8x (256-element
// segments, dropped since) issue-light
// (0.44 a scheduler and cycle) with its long-scoreboard stalls up 1.0 → 2.8 a warp
// instruction: the synchronous staging's global latency exposed. A prefetch holds no
// register (a load one step ahead would hold the step's 26 activation words through the
// mma, under a 128-register cap that already spills).
//
// H200, bench/results/2026-11-30-mmqs2-s8 call 1 (TOPS at 512 / 2048 tokens, means of two
// runs): on mmq8x4 (mmq8x4p, deleted since) IQ2_XS 140.9 → 144.3 / 143.9 → 148.0, IQ1_M
// 142.7 → 143.6 / 145.9 → 147.7, Q6_K 133.1 → 128.2 / 134.7 → 130.6; ncu IQ2_XS: long-scoreboard stalls 1.94 → 1.91
// a warp instruction, issue 0.49 → 0.51 a scheduler cycle. On mmq8x (family mmq8xp, dropped)
// the prefetch addresses raised the spill stores 136–152 → 188–244 bytes and every type lost 6.7–8.3 %
// (IQ2_XS 140.0 → 129.1 at 512 tokens; long-scoreboard stalls 3.45).
//
// On mmq8cz (family mmq8cp, session 9, deleted: bench/results/2026-11-30-mmq8-s9, the step's
// 136 contiguous Q8_0 bytes of a row touched at 0, 45, 90, 135) it lost for both types, TOPS
// at 512 / 2048 tokens, means of 7 runs in 3 processes: Q8_0 190.9 → 185.6 / 194.1 → 188.9,
// Q2_0 203.1 → 178.0 / 205.7 → 182.9 (spills 28 → 72 and 40 → 92 bytes).
var mmqPrefetch = map[string]bool{"mmq8x4n": true, "mmq8x4g": true}

// Prefetch reports whether variant v of family on t is an NVIDIA mma kernel that prefetches
// its next K step into L1 (mmqPrefetch).
func (v Variant) Prefetch(family string, t Target) bool {
	return t.IsNVIDIA() && v.Values["op"] == "mma" && mmqPrefetch[family]
}

// mmqX4Types are family mmq8x4's weight types: the types with one f32 base per 256-element
// block, integer sub-scales and no mins (Q4_K's min term and Q8_0's and Q2_0's per-group
// bases need per-group folds) for which it was the fastest; IQ2_XS and IQ1_M went to
// mmq8x4p then (deleted since) and are mmq8x4n's now (mmqX4NTypes). H200,
// bench/results/2026-11-30-mmqs2-s8 call 1 (TOPS at 512 / 2048 tokens, means of two runs;
// mmq8 = per-block d, per-group f32 fold):
//
//	type     mmq8           mmq8x4         mmq8x4p (deleted)
//	Q6_K     114.1 / 116.0  133.1 / 134.7  128.2 / 130.6
//	IQ2_XS   121.2 / 124.1  140.9 / 143.9  144.3 / 148.0
//	IQ1_M    123.8 / 127.1  142.7 / 145.9  143.6 / 147.7
//	IQ3_XXS  171.3 / 173.6  193.6 / 197.6  -
//	IQ3_S    169.2 / 172.6  186.3 / 189.7  -
//
// IQ3_XXS and IQ3_S (a sub-scale per 32) lost in 256-element segments (mmq8x, 4–6 %:
// bench/results/2026-11-30-mmqs-s8) and win in 128-element ones (+13 %, +10 %). The prefetch
// (mmqPrefetch) was not built for them.
var mmqX4Types = []Value{{Name: "q6k"}, {Name: "iq3xxs"}, {Name: "iq3s"}}

// XSeg is the activation segment (groups sharing one d, mmqXSeg) of variant v of family on
// t, or 0: the core folds every group.
func (v Variant) XSeg(family string, t Target) int {
	if !t.IsNVIDIA() || v.Values["op"] != "mma" {
		return 0
	}
	return mmqXSeg[family]
}

// MmqXSeg is the number of Q8_1 blocks that must share one d in the activations of
// family's kernels (mmqXSeg), or 1.
func MmqXSeg(family string) int {
	if n := mmqXSeg[family]; n > 0 {
		return n
	}
	return 1
}

// mmqCompact names the families whose NVIDIA mma core keeps compact scale tiles
// (strata_mmq_nv_cs in kernels/templates/mmq_core.tmpl): for the types whose group
// multipliers are 1 and that have no mins (Q8_0, Q2_0), the staging stores one f32 a (row,
// group), the base, and one a (token, group), d_x, placed so that a lane reads its group's 4
// row bases in one 16-byte shared load and its 8 d_x in two, and the fold's first step is
// main = D − 1.5·2²³. Family mmq8c is mmq8 so (for Q2_0: mmqCTypes); mmq8cz is mmq8c without
// the edge zeroing (mmqNoZero; for Q8_0: mmqCZTypes). Same values as mmq8 (main is exact
// either way): mmq8's bounds.
//
// Why: mmq8 Q8_0 issued 21.8 instructions per m16n8k32 at 0.54 a scheduler cycle
// (bench/results/2026-11-30-mmq-s7). Per warp and group (8 m16n8k32) its fold loads {base,
// m0} of 4 rows and d_x of 8 tokens (8 shared loads) and forms −1.5·2²³·m0 of 4 rows (4 FMUL);
// compact: 3 shared loads, no FMUL.
//
// H200, bench/results/2026-11-30-mmq8-s9 (one call; TOPS at 512 / 2048 tokens, means of 7
// runs in 3 processes, the families alternated in each; min of the 512 runs in brackets):
//
//	type   mmq8                   mmq8c                  mmq8cz                 mmq8cp (deleted)
//	Q8_0   183.0 (182.1) / 187.2  186.9 (185.7) / 190.7  190.9 (190.8) / 194.1  185.6 (184.7) / 188.9
//	Q2_0   188.5 (185.8) / 190.8  204.3 (204.1) / 206.0  203.1 (202.7) / 205.7  178.0 (177.3) / 182.9
//
// ncu (Q8_0, 512 tokens): mmq8 → mmq8cz 159.8 → 146.5 M instructions (21.8 → 20.0 per
// m16n8k32), 328.8 → 314.7 µs, issue 0.54 → 0.51 a scheduler cycle, local loads 0.46 → 1.15 M
// (ptxas: spill stores 16 → 28 bytes). mmq8cp was mmq8cz plus the L1 prefetch of the next K
// step (mmqPrefetch): its spills rose to 72–92 bytes and it lost for both types.
var mmqCompact = map[string]bool{"mmq8c": true, "mmq8cz": true}

// mmqNoZero names the families whose NVIDIA mma staging (mmq_core.tmpl strata_mmq_nv_nz)
// keeps the values that jobs past the tile's rows or tokens load from their safe in-tile
// address (row 0, token 0) instead of storing zeros: every output is one row's weights times
// one token's activations over the groups below K (groups past K are not multiplied), and
// outputs of rows or tokens past the edge are never written, so the staged values of such
// rows and tokens reach no written output (they are finite data, no NaN from nowhere). It
// saves the selects that zeroed them: per thread and K step of mmq8's r64t128w8, 9 for the
// weight job and 9 for each of its 2 activation jobs. Measured (table above): Q8_0 gains
// (186.9 → 190.9), Q2_0 loses a little (204.3 → 203.1; spill stores 16 → 40 bytes), so the
// family holds Q8_0 only.
//
// Family mmq8x4n is the two-plane form (mmqPlanes) so (strata_mmq_pl_stage_x_nz in
// mmq_core.tmpl; against family mmq8x4l, the two-plane form with the zeroing): per thread
// and K step of r64t128w8 the weight job drops 16 plane selects and the base's, each of the
// 2 activation jobs its 8 zeroing selects, and, as its 4 blocks share one d (mmqXSeg),
// the segment's d is stored by the one job of the token whose block starts its 16-byte
// window, so the quants take 18 selects instead of strata_mmq_pick9's 20 and the d none:
// 39 fewer instructions a thread and K step. Same written values as mmq8x4l: its bounds
// (parity/mmq.go mmqX4LY, mmqXLISum, mmq8x4n's now).
// H200, bench/results/2026-11-30-iq2-s9 (8 runs each, alternated with mmq8x4l in two
// processes; TOPS at 512 / 2048 tokens): IQ2_XS 154.9–155.7 / 157.6–157.9 → 156.4–157.0 /
// 160.0–160.3, IQ1_M 160.0–160.7 / 165.1–165.5 → 160.9–161.8 / 165.8–166.2; every run above
// every mmq8x4l run, so kept; mmq8x4l was deleted in session 10 as dominated.
var mmqNoZero = map[string]bool{"mmq8cz": true, "mmq8x4n": true, "mmq8x4g": true}

// mmqCTypes are family mmq8c's weight types, mmqCZTypes family mmq8cz's: each unit type
// (strata_mmq_unit: multipliers 1, no mins) in the family that was fastest for it (table
// above).
var (
	mmqCTypes  = []Value{{Name: "q20"}}
	mmqCZTypes = []Value{{Name: "q80"}}
)

// Compact reports whether variant v of family on t is an NVIDIA mma kernel with compact
// scale tiles (mmqCompact); the mmq template renders a strata_mmq_nv_cs specialisation for it.
func (v Variant) Compact(family string, t Target) bool {
	return t.IsNVIDIA() && v.Values["op"] == "mma" && mmqCompact[family]
}

// NoZero reports whether variant v of family on t is an NVIDIA mma kernel whose staging
// keeps the loaded values of edge jobs (mmqNoZero).
func (v Variant) NoZero(family string, t Target) bool {
	return t.IsNVIDIA() && v.Values["op"] == "mma" && mmqNoZero[family]
}

// mmqPlanes names the families whose NVIDIA mma core stages the weights of a 16-split type
// (a sub-scale per 16 elements: IQ2_XS, IQ1_M) as two int8 planes of the sub-scaled values
// (mmq_core.tmpl, "Two-plane form"; family mmq8x4n): element value v = m·q = 16·h + l with
// h = ⌊v/16⌋ and l = v mod 16 in separate planes, each decoded by prmt from an 8-byte table
// per sub-scale (selector nibbles: grid index + 3·sign). Each group is then two K=32
// products, chained in the mma accumulators over the K step, against mmq8x4p's two K=16
// products per group and 8 IMAD per m16n8k32 folding the sub-scales; the segment's int32 sum
// 16·Σh·x + Σl·x is mmq8x4p's exactly, folded the same way (bit-identical outputs).
//
// Why (bench/results/2026-11-30-mmqs2-s8: IQ2_XS mmq8x4p 26.7 instructions per m16n8k32 at
// 0.51 issued a scheduler cycle; 170 TOPS needs ≈ 22.7 at that rate): the IMAD folds are 8
// of the 26.7, the per-group sub-scale loads 1 more. H200, bench/results/2026-11-30-iqmmq-s9
// call 1 (its first build, 8b64486): 21.0 instructions per m16n8k32, but 452 bytes of spills
// (hoisted 64-bit fragment pointers and accumulators), issue 0.30 a scheduler cycle, IQ2_XS
// 144.2 → 108.4 and IQ1_M 143.6 → 106.7 TOPS at 512 tokens. The build here addresses shared
// memory with 32-bit registers formed per K step (84–88 bytes of spills): the lead's
// bench/results/2026-11-30-final-s9 call 1b, alternated with mmq8x4p in one process, IQ2_XS
// 144.7–144.8 → 155.6–155.8 and IQ1_M 143.1–143.4 → 160.1–161.1 TOPS at 512 tokens (157.6–157.9
// and 165.3–165.4 at 2048). mmq8x4n (bench/results/2026-11-30-iq2-s9) is mmq8x4l without the
// edge zeroing and the segment d's selects: +1 % over it in every run. mmq8x4p and mmq8x4l
// (the two-plane form with the edge zeroing) were deleted in session 10, dominated by mmq8x4n
// (bit-identical to mmq8x4l, faster than both in every run: bench/results/2026-11-30-iq2-s9,
// 2026-11-30-iqmmq-s9).
var mmqPlanes = map[string]bool{"mmq8x4n": true, "mmq8x4g": true}

// mmqX4NTypes are family mmq8x4n's weight types: the 16-split types whose sub-scaled values
// m·q have a small magnitude table per sub-scale (IQ2_XS: {8, 25, 43}·m, m ≤ 31; IQ1_M:
// {−9, −7, −1, 1, 7, 9}·m, m ≤ 15). Q6_K's 64 quant values times a signed 8-bit scale do not.
var mmqX4NTypes = []Value{{Name: "iq2xs"}, {Name: "iq1m"}}

// QT is the C++ weight-type struct the mmq template instantiates variant v of family with on
// t: strata_qt_<type>, or for a two-plane family (mmqPlanes) the mma core's plane form of the
// type, strata_mmq_pl_<type>.
func (v Variant) QT(family string, t Target) string {
	if t.IsNVIDIA() && v.Values["op"] == "mma" && mmqPlanes[family] {
		return "strata_mmq_pl_" + v.Values["type"]
	}
	return "strata_qt_" + v.Values["type"]
}

// mmqBOnce names the two-plane families whose K loop (mmq_core.tmpl strata_mmq_pl_run,
// strata_mmq_nv_bonce) loads each group's token (B) fragments once a warp for both of its row
// fragments, where mmq8x4n reloads them per row fragment: 6 ldmatrix.x4 a warp and group
// instead of 8 (bench/results/2026-11-30-iqc-s10: ldmatrix is 40 % of mmq8x4n's L1 data-pipe
// wavefronts, the busiest unit). The chains of both row fragments then live through the group:
// mmq8x4g adds the group's h-plane product ×16 into the l-plane chain after each group (one
// int32 chain a 16 × 16 fragment, 8 more integer adds a fragment and group). It forms the same
// exact int32 segment sum 16·H + L and folds it as mmq8x4n: its outputs bit for bit. A second
// form, mmq8x4h (H and L chains kept over the K step, twice the chain registers), was measured
// beside it and deleted in session 10, dominated. H200, bench/results/2026-11-30-iqd-s10 call 1 (two processes, N G H alternated;
// TOPS medians at 512 / 2048 tokens): IQ2_XS mmq8x4n 157.1 / 160.2, mmq8x4g 177.7 / 181.2,
// mmq8x4h 169.4 / 172.4; IQ1_M 161.5 / 166.1, 182.8 / 186.8, 179.1 / 182.2. Every g and h run
// above every mmq8x4n run, every g run above every h run: mmq8x4g is the kernel of record for
// both types (no spills: ptxas 128 registers, 0 bytes; mmq8x4n spills 84), mmq8x4h was
// dominated, mmq8x4n stays built as the baseline.
var mmqBOnce = map[string]bool{"mmq8x4g": true}

// BOnce reports whether variant v of family on t loads its token fragments once a group (mmqBOnce).
func (v Variant) BOnce(family string, t Target) bool {
	return t.IsNVIDIA() && v.Values["op"] == "mma" && mmqPlanes[family] && mmqBOnce[family]
}
