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
	"r64t64":  {64, 64},
	"r128t32": {128, 32},
	"r128t64": {128, 64},
	"r64t128": {64, 128},
}

// Tile is a prefill variant's (BM, BN), from its "tile" value; the mmq and moe_prefill
// templates read it as {{index .Tile 0}} and {{index .Tile 1}}.
func (v Variant) Tile() [2]int { return mmqTiles[v.Values["tile"]] }

// mmqNVIDIAOnly are the tiles built only for NVIDIA targets. The AMD cores were sized at
// r64t64 under the 128-VGPR budget; these shapes were added for the mma.sync core's warp
// tiles and chosen by measurement on the H200 (bench/results/2026-11-29-prefill-*); the
// dp4a variants of them exist on NVIDIA as the same-shape comparison.
var mmqNVIDIAOnly = map[string]bool{"r128t32": true, "r64t128": true}

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

// mmqAccRegs is the f32 accumulators one lane holds for the whole K loop.
func mmqAccRegs(bm, bn int) int { return bm * bn / mmqThreads }

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
	if lds := mmqLDS(v.Values["type"], tile[0], tile[1]); lds > t.LDSBytes {
		return false, fmt.Sprintf("LDS %d bytes > %d", lds, t.LDSBytes)
	}
	if acc, b := mmqAccRegs(tile[0], tile[1]), mmqAccBudget(t); acc > b {
		return false, fmt.Sprintf("%d accumulator registers per lane > %d", acc, b)
	}
	return true, ""
}

// axisPrefillType is every weight type the int8 prefill families take: the quantized ones.
// F16 and BF16 have no exact int8 form (an 11- or 8-bit significand per element, no shared
// block scale), so turning them into int8 tiles would change the weights; their prefill is a
// float GEMM, not mmq.
var axisPrefillType = Axis{Name: "type", Values: axisWeightType(ISANone).Values[2:]}

// Asynchronous staging (NVIDIA mma variants whose tile mmqAsyncTileBufs names: none now,
// see there): each K step's raw weight bytes and Q8_1 activation
// blocks are copied by cp.async into one of NB raw buffers in dynamic shared memory while the
// previous step's matrix work runs, then decoded from shared memory into the int8 tiles.
// The numbers mirror struct strata_mmq_nv_asmem in kernels/templates/mmq_core.tmpl, whose
// static_assert checks MmqDynShared exactly.
const (
	mmqRawX     = 160               // bytes per token: 4 Q8_1 blocks (144) from a 4-byte aligned start, in 16-byte chunks
	mmqDynLimit = 110 * 1024        // two blocks per SM (H100/H200: 228 KiB, 1 KiB reserved per block)
	mmqRouteLDS = 128*8*4*2 + 128*4 // strata_moe_route_smem
)

// mmqTypeBytes is (elements, bytes) of one block of each prefill type (quant_blocks QK, BYTES).
var mmqTypeBytes = map[string][2]int{
	"q80": {32, 34}, "q20": {64, 18}, "q4k": {256, 144}, "q6k": {256, 210},
	"iq2xs": {256, 74}, "iq3xxs": {256, 98}, "iq3s": {256, 110}, "iq1m": {256, 56},
}

// mmqRawRow is the raw bytes per weight row of one K step: the whole blocks the step's
// 32·KT elements touch (a superblock of 256 for the K and IQ types, read in both of its
// steps), plus up to 15 bytes of misalignment, rounded to 16-byte chunks.
func mmqRawRow(typ string) int {
	qb := mmqTypeBytes[typ]
	span := qb[1]
	if qb[0] <= 32*mmqKT {
		span = 32 * mmqKT / qb[0] * qb[1]
	}
	return (span + 15 + 15) / 16 * 16
}

func round16(n int) int { return (n + 15) / 16 * 16 }

// mmqAsyncBytes is sizeof(strata_mmq_nv_asmem<QT, NW, BM/NW, BN, nb>) of a tile of bm weight
// rows (all matrices) and bn tokens; moe_prefill's union adds its h tile and route scratch.
func mmqAsyncBytes(family, typ string, bm, bn, nb int) int {
	tiles := round16(bm*mmqKS + bn*mmqKS + mmqKT*bm*16 + mmqKT*bn*8 + mmqTableBytes[typ])
	n := tiles + nb*bm*mmqRawRow(typ) + nb*bn*mmqRawX
	if family == "moe_prefill" {
		n = max(n, bn*bm/2*4, mmqRouteLDS)
	}
	return round16(n)
}

// mmqAsyncTileBufs is the raw buffers each asynchronously staged tile asks for: none, by
// measurement. bench/results/2026-11-29-prefill-async compared the asynchronous tiles with
// the synchronous ones while launching the synchronous kernels with the asynchronous
// variants' dynamic shared memory as well (one binary for both), which cost them occupancy
// or L1 and made them look 20–30 % slower. Measured fairly (bench/results/2026-11-29-prefill-jit:
// each kernel with its own launch setup, same run, JIT and ptxas cubins alike), the
// synchronous core is faster at every tile and type: mmq at 512 tokens Q8_0 r128t64 115.7 vs
// 111.9 TOPS (one buffer), Q4_K 128.5 vs 100.7, IQ3_XXS 155.3 vs 108.8, Q6_K r64t128 118.5
// vs 80.7 (two); moe_prefill r128t64 / r128t32 likewise; at r64t64 one buffer won only for
// mmq Q8_0 / Q4_K and lost in every moe_prefill type, two buffers lost more. The
// asynchronous path stays in the template, generated into no kernel; a tile named here
// with 1 or 2 turns it on (then run the host simulation and GPU parity on it again).
var mmqAsyncTileBufs = map[string]int{}

// MmqAsyncBufs is the number of raw K-step buffers of variant v of a prefill family on t:
// 0 = synchronous staging in static LDS (every AMD variant, dp4a, and every tile
// mmqAsyncTileBufs does not name: all, now); else the tile's mmqAsyncTileBufs, cut to 1 when
// two do not fit under mmqDynLimit.
func (t Target) MmqAsyncBufs(family string, v Variant) int {
	nb := mmqAsyncTileBufs[v.Values["tile"]]
	if !t.IsNVIDIA() || v.Values["op"] != "mma" || nb == 0 {
		return 0
	}
	tile := v.Tile()
	if nb == 2 && mmqAsyncBytes(family, v.Values["type"], tile[0], tile[1], 2) > mmqDynLimit {
		return 1
	}
	return nb
}

// MmqDynShared is the dynamic shared memory in bytes a launch of variant v must pass on t
// (0: v uses the static LDS).
func (t Target) MmqDynShared(family string, v Variant) int {
	nb := t.MmqAsyncBufs(family, v)
	if nb == 0 {
		return 0
	}
	tile := v.Tile()
	return mmqAsyncBytes(family, v.Values["type"], tile[0], tile[1], nb)
}
