// Package gpu is Strata's GPU engine for qwen3moe and qwen3next decode: dense weights (attention,
// routers, norms, the output head) live in VRAM; every expert lives in pinned host memory
// and the hottest ones in a VRAM slot cache (cache.go), sized last by the memory plan
// (plan.go) from what the budget leaves; misses are copied in groups tracked by one event
// each (copier.go). It launches the generated kernels through runtime/gpu.
//
// One token runs as: per layer, rmsnorm_row (+ residual, fused Q8_1) → one mmvq for q|k|v
// (stored fused when they share a type) → q/k head norms → RoPE of q and k → the new key
// and value into the f16 KV cache (attention_decode's store stage) → attention_decode
// split (about √(n/64) positions per split up to 256 positions at hd ≤ 128, else √(n/6)
// rounded up to 8: splitLen) + reduce → Q8_1 → output mmvq → rmsnorm_row + residual →
// router mmvq → the routed experts through moe_decode. When the
// cache cannot hold every expert: phase 0 (top-k), then the selected ids come back to the
// host (one stream synchronisation per layer: the cache lives on the host), which looks
// them up, copies the misses and updates the layer's slot tables, then phases 1 (gate/up)
// and 2 (down). When it can (resident), every expert is copied in at load, phase 3 (top-k
// and gate/up in one launch) then phase 2 run without the host, and a token has one
// synchronisation: each layer's ids land in their own row and come back together after
// the last layer, for the hit counts and the policy, counted while the next token's kernels
// are submitted (Options.SyncLookup: at once); its launches and copies are submitted as one
// replayed graph where the backend has graphs (graph.go; Options.NoGraph). The embedding
// row is gathered on the host (it is one row per token and keeps the table out of VRAM).
// With mapped misses (Options.Misses, mapped.go; the default where the device can map host
// memory) every expert is also readable by the kernels from mapped pinned host memory, the
// slot tables point each expert at its slot or its host copy, and a token that misses takes
// the resident structure too, reading its misses over the bus while the cache promotes hot
// experts into slots in the background.
// Prompt tokens go through the same decode path one at a time unless Options.Chunk is set:
// then a qwen3moe or qwen3next prompt runs in chunks through the batched path (prefill.go: mmq,
// attention_prefill, moe_prefill, every layer over the whole chunk).
//
// qwen3next adds, per delta-net layer, the q|k|v, gate and b|a projections (one mmvq
// when fused), the conv and the recurrence (gated_delta_net, conv states double-buffered
// by call: gatedDeltaNet) and ssm_out; its attention splits the interleaved query/gate rows with a strided
// multi-matrix mmvq and applies the gate in attention_decode's reduce; its shared expert
// runs as moe_decode (phase 3 + 2 on every path: its table never changes) over two
// experts, itself and one without a slot, with router logits [g, 0], whose softmax gives it
// exactly sigmoid(g).
package gpu

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/quant"
	rt "github.com/strata-hip/strata/runtime/gpu"
)

// Options configure the engine.
type Options struct {
	CODir     string   // code objects (`just co` output, build/co)
	Ctx       int      // tokens of context the KV cache holds
	Budget    uint64   // VRAM bytes the engine may use; 0: the device's free memory
	Reserve   uint64   // overrides DefaultReserve when nonzero
	Policy    string   // "decayed" (default) or "lru"
	Profile   *Profile // seeds the decayed policy
	Group     int      // expert copies per completion event (0: DefaultGroup)
	Decay     float64  // decayed policy: per-step decay (0: 0.98)
	Rerank    int      // decayed policy: steps between re-rankings (0: 8)
	Prefetch  bool     // look-ahead: copy the experts the next layer's router predicts from this layer's state (off by default: measured slower, 149.9 against 166.6 tok/s, bench/results/2026-11-29-final-s4)
	Progress  io.Writer
	MaxExpert int // testing: cap the cache at this many slots (0: what the plan gives)
	// HostKV: append keys and values through the host (the first engine's path, kept to
	// measure against): a stream synchronisation per attention layer.
	HostKV bool
	// NoResident: keep reading the expert ids back after every layer even when the cache
	// holds every expert (measurement baseline; see Engine.resident).
	NoResident bool
	// NoFuse: store every dense matrix on its own, one launch each (measurement baseline).
	NoFuse bool
	// NoAttnPrep: decode attention through the separate q/k norm, rope, store and
	// quantize_q8_1 launches instead of attention_decode's prep and reduceq (forward.go;
	// measurement baseline, also Engine.SetAttnPrep).
	NoAttnPrep bool
	// NoGdnQ81: the decode delta-net's output through gated_delta_net/recurrent and a
	// quantize_q8_1 launch instead of recurrentq, which writes the Q8_1 blocks the output
	// projection reads itself (forward.go; measurement baseline, also Engine.SetGdnQ81).
	NoGdnQ81 bool
	// NoPDL: every decode launch waits for the previous kernel to finish, as a plain
	// stream launch does. Without it, a kernel of pdlFamilies that follows a kernel on the
	// compute stream is launched with a programmatic dependency (runtime/gpu
	// Launcher.LaunchDep: on NVIDIA sm_90 and later; elsewhere it is a plain launch), so
	// its launch overlaps the previous kernel's run (measurement baseline, also
	// Engine.SetPDL).
	NoPDL bool
	// NoRowNorm: single-row norms through rmsnorm (one wave) instead of rmsnorm_row
	// (measurement baseline).
	NoRowNorm bool
	// OldRowQ81: rmsnorm_row's previous Q8_1 step (variants q81wave, addq81wave: each
	// block's reductions over a whole wave, one block after the other) instead of q81,
	// addq81 (measurement baseline, also Engine.SetOldNorm).
	OldRowQ81 bool
	// OneBlockArgmax: ForwardArgmax's token by the one-block sample/argmax instead of
	// argmaxp + argmaxf (measurement baseline, also Engine.SetOldNorm).
	OneBlockArgmax bool
	// KernelTimes: time every launch on the device between two events and sum the times per
	// kernel (Stats.Kernels). Costs host time per launch: a profile, not a benchmark.
	KernelTimes bool
	// MmvqRows8: launch mmvq with ceil(rows/8) blocks whatever the variant covers (the
	// engine's grid before it read rows per block from kernels/abi; measurement baseline,
	// also Engine.SetMmvqRows8).
	MmvqRows8 bool
	// MmvqOld: every one-column mmvq with the kernel's default path (geom 0) and its
	// ceil(rows/RowsPerBlock) grid, instead of a decode geometry chosen per shape
	// (Engine.mmvqGeom; measurement baseline, also Engine.SetMmvqOld).
	MmvqOld bool
	// AttnSplit > 0: attention_decode splits of this many positions (raised where the
	// limits of splitLen need more) instead of the policy (measurement setting; also
	// Engine.SetAttnSplit); AttnSplitOld (−1): the policy before 2026-11-30 (√(n/6) to 8).
	AttnSplit int
	// SyncLookup: in resident mode, count a token's expert uses (Engine.lookupResident)
	// right after its sync, while the GPU idles, instead of while the next token's kernels
	// are submitted (measurement baseline; also Engine.SetSyncLookup).
	SyncLookup bool
	// PlainLaunch: every launch binds the device itself (gpu.Func.Launch: thread lock and
	// context per call) instead of once per Forward through a gpu.Launcher (measurement
	// baseline; also Engine.SetPlainLaunch).
	PlainLaunch bool
	// NoGraph: submit a resident token launch by launch instead of as one replayed graph
	// (graph.go; measurement baseline, also Engine.SetGraph).
	NoGraph bool
	// WalkFirst: walk a replayed token's graph (its node checks and updates) before
	// launching it, as session 8 did, instead of launching a graph that the token before's
	// ahead walk brought current at once and checking it after the launch (hostgap.go;
	// measurement baseline, also Engine.SetLaunchFirst).
	WalkFirst bool
	// Chunk > 0: Forward runs a prompt of more than one token through the batched path
	// (prefill.go) in chunks of up to Chunk tokens; 0: token by token through the decode
	// path (which also stays the path of single tokens, and of models the batched path
	// does not cover).
	Chunk int
	// PrefillTiles: how the batched prompt path picks its mmq and moe_prefill tiles per
	// launch. The zero value, TilesBest, takes the tile that measured fastest for the weight
	// type and the chunk's length (tiles.go); TilesT64 every launch at r64t64, the tile
	// before; TilesT32 moe_prefill's r64t32 where TilesBest takes r64t48; TilesS8 session 8's
	// choices: the window form where TilesBest takes the pair form (moePair), mmq8 for dense
	// Q8_0 and Q2_0 where TilesBest takes mmq8cz and mmq8c (measurement baselines, also
	// Engine.SetPrefillTiles).
	PrefillTiles PrefillTiles
	// MmvqCols8: the batched path's mmvq fallback (F16/BF16 matrices such as the router)
	// launches once per group of 8 columns, as before, instead of every whole group in one
	// launch (measurement baseline, also Engine.SetMmvqCols8).
	MmvqCols8 bool
	// OldAttnPrefill: the batched path's attention through attention_prefill's first kernel
	// (variant f16old: a wave per two queries of one head, a butterfly per position)
	// instead of f16 (measurement baseline, also Engine.SetAttnPrefillOld).
	OldAttnPrefill bool
	// F32AttnPrefill: on a target that has attention_prefill's tensor-core kernel (f16mma,
	// NVIDIA), the batched path's attention through the f32 kernel (f16) instead
	// (measurement baseline, also Engine.SetAttnPrefillF32). OldAttnPrefill wins over it.
	F32AttnPrefill bool
	// GenericAttnMMA: on a target that has attention_prefill's head-size kernel (f16mma256,
	// NVIDIA), the batched path's tensor-core attention through f16mma (one
	// kernel for every head size) instead of the one for the model's head dim (measurement
	// baseline, also Engine.SetAttnPrefillGeneric). F32AttnPrefill and OldAttnPrefill win.
	GenericAttnMMA bool
	// SharedDecode: the batched path runs qwen3next's gated shared expert as moe_decode over
	// the chunk's tokens (phases 0, 1 and 2; every token reads the shared weights on its
	// own), added to the residual by rmsnorm_row, instead of as one moe_prefill pass over
	// the chunk (prefill.go sharedChunk; measurement baseline, also Engine.SetSharedDecode).
	SharedDecode bool
	// OldDeltaNet: the batched path runs qwen3next's delta-net recurrence as the decode
	// step's kernel (gated_delta_net/recurrent, a block per value head walking the chunk's
	// tokens with the gated norm inside the step) instead of recsplit (a block per head and
	// 32 columns, one barrier a token) then gnorm over the chunk; the results are bitwise
	// the same (measurement baseline, also Engine.SetDeltaNetOld). Decode always runs
	// recurrent.
	OldDeltaNet bool
	// SharedBranch: how a decode graph (resident, CUDA) runs qwen3next's gated shared
	// expert. The zero value, BranchDep, captures it as a branch beside the routed
	// experts (runtime/gpu Launcher.CaptureFork after the router, CaptureJoin before the
	// next layer's norm), its launches programmatic where PDL is on; BranchPlain the
	// same with full dependencies at the fork and the join; BranchOff after the routed
	// experts on the one chain (the path before; measurement baseline, also
	// Engine.SetSharedBranch). The bits are the same in all three (sharedBranch's comment).
	SharedBranch BranchMode
	// AttnBranch: how a decode graph (resident, CUDA) runs a qwen3next attention layer's
	// input projections (q, gate, k|v: three mmvq launches that read only the normed input).
	// The zero value, BranchDep, captures them as three branches from the norm's launch,
	// joined before prep (runtime/gpu Launcher.CaptureFork, CaptureJoin); BranchPlain the
	// same with full dependencies; BranchOff one after the other (the path before;
	// measurement baseline, also Engine.SetAttnBranch). The bits are the same.
	AttnBranch BranchMode
	// Misses: how the kernels reach an expert that has no VRAM slot. The zero value,
	// MissAuto, maps where it works and copies elsewhere (the reason: Engine.MissPath);
	// MissMap: every expert lives in mapped pinned host memory that the kernels can read
	// directly, and the slot tables point each expert at its VRAM slot or, when it has
	// none, at its host copy (mapped.go). A token then runs as a resident one does (phase
	// 3 + 2, one sync, the graph) and the kernels read missing experts over the bus; the
	// cache still promotes experts into VRAM slots in the background. MissMap needs a
	// device that maps host memory (rt.DeviceInfo.CanMapHost) and every expert pinned (no
	// staging ring); Load refuses it elsewhere. MissCopy: misses are copied into a slot
	// before their layer runs (the path before mapped misses).
	Misses MissMode
	// MapPromote > 0: with mapped misses, copy at most this many missed experts into VRAM
	// slots per token (the rest keep being read from host memory); 0: every miss. Refused
	// with MissCopy; with MissAuto it applies when the engine maps.
	MapPromote int
	// NoMapAhead: mapped misses without the look-ahead (measurement baseline). By default,
	// where experts can miss and the engine may map (Misses MissMap, or MissAuto on a device
	// that can map host memory; no Prefetch), the plan holds the look-ahead's buffers (2·K
	// expert blocks) and a mapped engine runs it (ahead.go: the next layer's router on this
	// layer's state predicts its experts, and a graph branch copies the predicted misses into
	// VRAM while this layer runs; Engine.SetMapAhead turns it off and on). Measured −11.4 to
	// −12.1 % ms a token on 80B-A3B IQ2_XS at 12, 16 and 24 GiB
	// (bench/results/2026-11-30-bud-s10).
	NoMapAhead bool
	// EarlyBatch: with mapped misses, a lookup's promotion batch is issued at once, before
	// the next token's launch (the path before; measurement baseline). By default it is held
	// back and issued right after the next launch (Engine.SetLateBatch, hostgap.go): the
	// GPU reached a token queued after a batch only when the batch ended (~2.9 ms of idle
	// every other token). Measured −12.3 to −12.8 % ms a token on 80B-A3B IQ2_XS at 12, 16
	// and 24 GiB, the cache's work unchanged (bench/results/2026-11-30-idle-s11).
	EarlyBatch bool
	// Landing (land.go; default wherever the look-ahead runs): the look-ahead copies up to
	// MapLand predicted misses of a layer (0: K) straight into reserved VRAM slots, committed
	// to the cache after the token, and the engine copies nothing else into slots (no H2D
	// promotions): each missed expert crosses the bus once. Measured −25.7 to −26.0 % ms a
	// token against the look-ahead with promotions on 80B-A3B IQ2_XS at 12, 16 and 24 GiB
	// (bench/results/2026-11-30-land-s11). NoMapLand: the look-ahead without landing, with
	// promotions (measurement baseline; also Engine.SetMapLand(0)). LandPromote: landing and
	// also promotions of the misses that did not land (measured slower; also
	// Engine.SetLandPromote).
	MapLand     int
	NoMapLand   bool
	LandPromote bool
}

// Engine is a model loaded on one device.
type Engine struct {
	dev   *rt.Device
	cfg   model.Config
	vocab int
	src   model.Source
	ks    *kernelSet
	plan  *Plan
	mem   *Memory
	emb   *model.Tensor

	layers []gLayer
	head   dmat
	outNrm rt.DevPtr

	expType  quant.Type
	slot     slotOffsets
	hostExp  *rt.HostBuffer // every expert, [layer][expert] slots of slot.total bytes; or the ring
	ring     int            // > 0: hostExp is a staging ring of this many slots (pinning all failed)
	ringNext int            // next free ring slot of the current copy batch
	expT     [][3]*model.Tensor
	staging  *rt.HostBuffer // small host windows (see stage*)
	compute  *rt.Stream
	copier   *Copier
	cache    *Cache
	decayed  *Decayed
	dirty    []bool // layer's device slot table differs from the host mirror
	fns      map[string]*rt.Func
	kern     map[string]*kernel // every prepared kernel by "family/variant" (fns' launch records)
	ln       *rt.Launcher       // the compute stream's launches, bound once per Forward
	// argBuf holds the packed arguments of the launch being made: launches copy their
	// argument struct here, so it stays on the caller's stack (no allocation per launch).
	argBuf [512]byte
	// hot launch records (kern's entries), so a token makes no map lookup per launch
	kRow, kRms                     map[string]*kernel // rmsnorm_row / rmsnorm by variant
	kRope, kStore, kSplit, kReduce *kernel
	kQuant, kMoe, kArgmax          *kernel
	kArgmaxP, kArgmaxF             *kernel // argmax in two launches (logits)
	kConv, kRec                    *kernel // qwen3next
	kRecQ                          *kernel // qwen3next decode: recurrent + the Q8_1 output (forward.go deltaNet)
	kRecSplit, kGNorm              *kernel // qwen3next's batched recurrence (gatedDeltaNet)
	kPrep, kReduceQ                *kernel // attention_decode prep and reduceq (forward.go)
	// per-token host buffers reused across tokens
	idsBuf, slotBuf []int
	missBuf         []Miss // mapped misses: promote's per-layer misses, its copies and their slots
	mapCps          []Copy
	mapPlaced       []int
	// outMode: what the last step leaves for the caller: the logits in the staging window
	// (Forward) or the greedy token (ForwardArgmax, over the first argmaxN logits)
	outMode  int
	argmaxN  int
	logitBuf []float32 // LastLogits' conversion buffer
	pos      int
	convPar  int // which delta-net conv state the next conv call reads (gatedDeltaNet)
	stats    Stats
	fault    error
	kvd, qd  int
	ctx      int

	prefetch  bool
	predicted map[Key]bool // prefetched experts not looked up since
	fused     map[string]fusedPart

	hostKV, noFuse, noRowNorm bool
	canDep                    bool // the launcher can make programmatic launches (runtime/gpu CanLaunchDep)
	// resident: the cache holds every expert of every layer (all copied in at load), so no
	// layer needs its ids on the host before its experts run: each layer's phase 0 writes
	// its own row of bufIDs, one download after the last layer brings them all back, and the
	// lookups (hit counts, the policy's use counts) happen after the token's one sync.
	resident bool
	// resident mode: a token's ids come back to one of two staging rows (the one a pending
	// lookup does not read), and its lookup waits (pendingIDs ≥ 0: the row's offset) until
	// the next token's kernels are submitted, or until the counts are read (flushLookup);
	// launchSettings.syncLookup: at once.
	pendingIDs int

	chunk     int                      // batched prompt chunk (0: off)
	mmqT      map[quant.Type]*mmqTiles // mmq tiles per dense weight type (tiles.go)
	moeT      moeTiles                 // moe_prefill's tiles for the experts' type
	attnMMA   bool                     // attention_prefill/f16mma is loaded (the target has it)
	attnMMAhd string                   // attention_prefill's variant for the model's head dim (f16mma256), loaded; "": none
	routerAt  int                      // capture index of the last router launch (moe; capture only)
	shT       map[quant.Type]*moeTiles // moe_prefill's tiles per shared-expert type (qwen3next; sharedChunk)
	direct    []int                    // per layer: slot of expert 0 when its experts sit in consecutive slots of one slab (resident), else −1

	// mapped look-ahead (ahead.go): planned (Options.MapAhead; on: launchSettings.mapAhead);
	// capture indices of the layer's look-ahead mmvq and of the last expert_fetch (-1: none),
	// the shared expert's norm's join (-1: none); the prediction's read-back buffer; per
	// staging row, whether the token there ran the look-ahead
	aheadPlanned             bool
	aheadAt, fetchAt, shJoin int
	aheadBuf                 []int
	aheadRan                 map[int]int // experts the token may copy (0: no look-ahead)
	kFetch                   *kernel
	// landing (land.go): slots a layer (SetMapLand; 0: off); the reservation for the next
	// token ([layers][K] slots, −1: none; nil: none made), and per staging row the one its
	// token ran with; the device's list may be nonzero, a new list awaits its upload
	landM           int
	landPromote     bool // SetLandPromote: with landing, promotions too
	landNext        []int
	landAt          map[int][]int
	landDev, landUp bool
	landBuf         []Miss
	landSpare       []int // reserved slots of a committed token nothing landed in (landCommit)
	landWant        []int // per layer: its predicted misses (copies) in the token last committed

	units int // the device's multiprocessors where mmvq has decode geometries (NVIDIA), else 0 (mmvqGeom)

	kevPool []*rt.Event
	kevs    []kernelEvents // launches of this token not yet read back

	// graph replay of resident tokens (graph.go; on: launchSettings.graphOn): graphErr stops
	// it for good; the captured variants; the mode of the token being submitted, its graph
	// and the launch and copy it is at.
	graphErr error
	graphs   map[graphKey]*tokenGraph
	gmode    int
	gcur     *tokenGraph
	gi, gc   int
	gLast    *tokenGraph // the graph launched last (running until the step's sync)

	// launch-first order (hostgap.go; off: launchSettings.walkFirst): the graph the last
	// ahead walk brought current (nil after a new sequence or with the graphs dropped), the
	// position, argmax n and settings it was walked for; the graph launched before its walk,
	// to check after the launch.
	aheadTg          *tokenGraph
	aheadPos, aheadN int
	aheadSet         launchSettings
	verifyTg         *tokenGraph
	// per-token timing (hostgap.go): the end of the last step (host clock, since
	// clockBase); with SetTokenTimes, each token's three events (before its launch, after
	// it, before its sync) in two sets by parity, the set in use, and the last token's
	// last event (nil: none to measure the idle time from).
	stepEnd  time.Duration
	tokTimes bool
	tokEv    [2][3]*rt.Event
	tokPar   int
	tokPrev  *rt.Event
	tokRec   bool
	// SetStartProbe
	startProbe bool
	// the idle settings (hostgap.go): SetSyncPoll and its event, SetTablesNop, SetSyncProbe,
	// SetLateBatch and the batch it holds back until the next launch
	syncPoll  bool
	syncEv    *rt.Event
	tablesNop bool
	syncProbe bool
	lateBatch bool
	lateWait  bool
	coDir     string // Options.CODir (SetTablesNop loads its kernel)
	late      []Copy
	latePl    []int

	// mapped misses (Options.Misses, mapped.go): the device address of hostExp, the
	// promotions whose copies are in flight by slot, the event that orders a promotion
	// batch's copies after its table upload, and the per-token promotion cap.
	mapped     bool
	missWhy    string // Options.Misses was MissAuto and the engine copies: why (MissPath)
	hostDev    rt.DevPtr
	promoting  map[int]promotion
	tablesEv   *rt.Event
	mapPromote int
	// vram mirrors which experts' table entries point at a slot ([layer·E + expert], kept
	// by setSlot); vramAt holds it as each token was submitted, by the token's ids row, for
	// the hit counts of its lookup.
	vram   []bool
	vramAt map[int][]bool

	// the settings a decode token's launches depend on; every Set* method changes launches
	// through them alone (TestSettersChangeLaunchSettings)
	launchSettings
}

// launchSettings are the settings that shape what a token launches, each loaded from its
// Options field and changed between tokens by its Engine.Set* method: Options.PlainLaunch,
// OldRowQ81, OneBlockArgmax, NoAttnPrep, NoGdnQ81, NoPDL, SyncLookup, MmvqOld, MmvqRows8,
// AttnSplit, KernelTimes, SharedBranch, AttnBranch, NoGraph, WalkFirst, the mapped
// look-ahead (SetMapAhead, SetMapAheadK, SetGraphAhead) and the batched prompt path's
// (SetTokenByToken, SetPrefillTiles, SetPrefillTables, MmvqCols8, OldAttnPrefill,
// F32AttnPrefill, GenericAttnMMA, SharedDecode, OldDeltaNet). The ahead walk records them
// with the graph it brought current (Engine.aheadSet), and a step launches that graph
// before its walk only under the same settings (launchAhead): a setter needs no
// invalidation of its own. A new setting that changes launches belongs here.
type launchSettings struct {
	plain              bool // Options.PlainLaunch
	oldRowQ81, argmax1 bool // Options.OldRowQ81, Options.OneBlockArgmax
	noAttnPrep         bool // Options.NoAttnPrep
	noGdnQ81           bool // Options.NoGdnQ81
	noPDL              bool // Options.NoPDL
	syncLookup         bool // Options.SyncLookup
	mmvqRows8          bool // Options.MmvqRows8
	mmvqOld            bool // Options.MmvqOld
	attnSplit          int  // Options.AttnSplit
	ktimes             bool // Options.KernelTimes
	shBranch           BranchMode
	attnBr             BranchMode // Options.SharedBranch, Options.AttnBranch
	graphOn            bool       // graph replay of resident tokens (unless Options.NoGraph)
	walkFirst          bool       // Options.WalkFirst
	mapAhead           bool       // the mapped look-ahead runs (SetMapAhead)
	aheadK             int        // SetMapAheadK
	graphNoAhead       bool       // SetGraphAhead(false)
	tokenByToken       bool       // SetTokenByToken: prompts through the decode path
	ptiles             PrefillTiles
	ptab               PrefillTables // SetPrefillTiles, SetPrefillTables
	mmvqCols8          bool          // Options.MmvqCols8
	attnOld, attnF32   bool          // Options.OldAttnPrefill, Options.F32AttnPrefill
	attnGen            bool          // Options.GenericAttnMMA
	shDec, gdnOld      bool          // Options.SharedDecode, Options.OldDeltaNet
}

// clockBase is the origin of the launch timings' monotonic clock reads.
var clockBase = time.Now()

// kernel is a prepared launch record: the function and its "family/variant" name (for
// errors and Stats.Kernels).
type kernel struct {
	key  string
	fn   *rt.Func
	rows int  // mmvq: the weight rows one block covers (kernels/abi; the grid is ceil(rows/it))
	pdl  bool // its family begins every kernel with STRATA_GRID_DEP (pdlFamilies)
	// geoms: a default mmvq kernel's decode-geometry kernels (variant <type>_g<N> at N;
	// nil where the target has none, and at 0).
	geoms [len(mmvqGeoms)]*kernel
}

// pdlFamilies are the kernel families whose every kernel begins with STRATA_GRID_DEP
// (kernels/templates/prelude_nvidia.tmpl): only their launches may carry a programmatic
// dependency (Options.NoPDL). TestPDLFamiliesWait checks the generated sources.
var pdlFamilies = map[string]bool{
	"rmsnorm_row": true, "mmvq": true, "moe_decode": true, "attention_decode": true,
	"quantize_q8_1": true, "rope": true, "sample": true, "gated_delta_net": true,
}

// Output modes of a step with logits (Engine.outMode).
const (
	outLogits = iota // the logits come back to the staging window
	outArgmax        // sample/argmax runs on the GPU; 4 bytes come back
)

type kernelEvents struct {
	key        string
	start, end *rt.Event
}

// dmat is a dense matrix in VRAM.
type dmat struct {
	ptr     rt.DevPtr
	typ     quant.Type
	variant string
	rows, k int
	kern    *kernel // mmvq/variant, set by prepare
}

type gLayer struct {
	recurrent                       bool // qwen3next gated delta-net layer
	attnNorm, ffnNorm, qNorm, kNorm rt.DevPtr
	wq, wk, wv, wo, router          dmat
	kv                              rt.DevPtr // K cache then V cache, ctx·kvd f16 each

	// qwen3next delta-net: projections, conv weights [C][4], dt bias, A, norm, and the state
	// (conv state 0, conv state 1, then S).
	wqkv, wz, wba, wout         dmat
	conv, dtBias, ssmA, ssmNorm rt.DevPtr
	state                       rt.DevPtr
	shInp, shGate, shUp, shDown dmat      // qwen3next shared expert (shInp: its gate, one f16 row)
	shTab                       rt.DevPtr // its slot tables: [gate|up|down][2]
	shTabP                      rt.DevPtr // the batched path's: [gate|up|down][2], entry 1 the zero expert (sharedChunk)
	shKern                      *kernel   // moe_decode of the shared expert's type

	// in: the layer's input projections stored back to back, one launch for all — q|k|v
	// (qwen3moe attention), k|v (qwen3next attention), q|k|v / z / b|a (delta-net) — when
	// fusedIn; routerSh: the router with the shared expert's gate row after it.
	in, routerSh         dmat
	fusedIn, fusedRouter bool
}

// Stats are cumulative counters since load (or the last ResetStats).
type Stats struct {
	Tokens      int
	Hits        int64
	Misses      int64
	CopiedBytes int64
	CopyMs      float64 // device time of the copy batches (first copy to last group event)
	Wall        time.Duration
	Groups      int64
	// mapped misses: promotion batches issued, and lookups that placed nothing because the
	// batch before was still pending (promote's back-pressure)
	MapBatches, MapHeld int64
	// look-ahead prefetch: experts copied on a prediction, and those a lookup then hit
	Prefetched, PrefetchUsed int64
	// mapped look-ahead (ahead.go), layers after the first: ids predicted, of them used by
	// the layer, of them copied (not in VRAM), of those used; the layers' misses
	AheadPredicted, AheadRight, AheadFetched, AheadUseful, AheadMisses int64
	// landing (land.go): predicted misses committed to the cache from the slot the
	// look-ahead copied them into; slots reserved for landing
	Landed, LandReserved int64
	// host side: kernel launches made outside graphs and the time spent submitting them;
	// stream synchronisations of the compute stream and the time the host waited in them
	Launches   int64
	LaunchTime time.Duration
	Syncs      int64
	SyncTime   time.Duration
	// batched prompt path: layer-chunks whose routed experts ran through moe_prefill, and
	// through the moe_decode fallback (slots outside one stack window, or more experts than
	// the cache holds)
	StackLayers, FallbackLayers int64
	// resident tokens through graphs (graph.go): graph launches, captures, kernel nodes
	// updated, and the host time of submitting those tokens (capture or the replay's walk,
	// its node updates and the graph launch; their launches are in neither Launches nor
	// LaunchTime)
	Graphs, Captures, GraphUpdates int64
	GraphTime                      time.Duration
	// launches made (or captured) with a programmatic dependency on the previous kernel
	// (Options.NoPDL)
	DepLaunches int64
	// of those, the updates made and the host time spent walking the next token's graph
	// while the GPU runs this one (graph.go, "Ahead")
	AheadUpdates int64
	AheadTime    time.Duration
	// where each decode token's time goes (hostgap.go): host phases of every step, and
	// with SetTokenTimes the device's busy, tail and idle time
	Phases StepPhases
	// with Options.KernelTimes: device milliseconds and launches per kernel ("family/variant")
	Kernels map[string]KernelTime
}

// KernelTime is one kernel's summed device time.
type KernelTime struct {
	Ms       float64
	Launches int64
}

func tensorType(t *model.Tensor) (quant.Type, error) {
	for _, in := range quant.Types() {
		if strings.EqualFold(in.Name, t.Type) {
			return in.Type, nil
		}
	}
	return 0, fmt.Errorf("model/gpu: tensor %s has type %s, unknown to the GPU engine", t.Name, t.Type)
}

// Load validates the model with the CPU loader, plans VRAM, allocates, uploads the dense
// weights, pins every expert in host memory and prepares the kernels.
func Load(dev *rt.Device, src model.Source, o Options) (e *Engine, err error) {
	if !littleEndian {
		// kernels/abi's structs go to the kernels as the host stores them (rt.Args), and the
		// staging rows are read in place (f32View): both need the GPU's byte order.
		return nil, fmt.Errorf("model/gpu: the GPU engine needs a little-endian host")
	}
	m, err := model.Load(src) // the same validation the CPU engine applies
	if err != nil {
		return nil, err
	}
	c := m.Cfg
	if c.Arch == model.ArchQwen3Next {
		if c.ConvKernel != 4 || c.LinKDim%4 != 0 || c.LinKDim > 128 || c.LinVDim > 128 {
			return nil, fmt.Errorf("%w: gated_delta_net takes a kernel-4 conv and head sizes ≤ 128 (key a multiple of 4); the model has %d, %d, %d",
				ErrMissingKernel, c.ConvKernel, c.LinKDim, c.LinVDim)
		}
		if c.SharedFF%32 != 0 || (c.LinVHeads*c.LinVDim)%32 != 0 {
			return nil, fmt.Errorf("%w: the Q8_1 kernels need shared-expert and delta-net widths that are multiples of 32", ErrMissingKernel)
		}
	}
	if o.Ctx <= 0 || o.Ctx > c.CtxLen || o.Ctx > 256*1024 {
		return nil, fmt.Errorf("model/gpu: context %d must be in 1..%d (and attention_decode's 256 splits of 1024)", o.Ctx, min(c.CtxLen, 256*1024))
	}
	switch c.HeadDim {
	case 64, 128, 256:
	default:
		return nil, fmt.Errorf("%w: attention_decode handles head dimensions 64, 128 and 256, the model has %d", ErrMissingKernel, c.HeadDim)
	}
	if c.Heads > 8*c.HeadsKV {
		return nil, fmt.Errorf("%w: attention_decode handles at most 8 query heads per KV head, the model has %d/%d", ErrMissingKernel, c.Heads, c.HeadsKV)
	}
	if c.Experts > 1024 || c.ExpertsUsed > 32 {
		// moe_decode's top-k holds a wave's ≤ 32 logits per lane and hands choice j to lane j
		return nil, fmt.Errorf("%w: moe_decode routes at most 1024 experts with at most 32 chosen per token, the model has %d with %d",
			ErrMissingKernel, c.Experts, c.ExpertsUsed)
	}
	if c.Embd%32 != 0 || (c.Heads*c.HeadDim)%32 != 0 || c.ExpertFF%32 != 0 {
		return nil, fmt.Errorf("%w: the Q8_1 kernels need hidden, attention and expert widths that are multiples of 32", ErrMissingKernel)
	}
	switch o.Misses {
	case MissAuto, MissCopy:
	case MissMap:
		if info := dev.Info(); !info.CanMapHost {
			return nil, fmt.Errorf("model/gpu: mapped expert misses (--expert-misses map) need a device that can map pinned host memory into its address space; %s cannot (use --expert-misses copy or auto)", info.ID())
		}
	default:
		return nil, fmt.Errorf("model/gpu: expert miss mode %d (want MissAuto, MissCopy or MissMap)", int(o.Misses))
	}
	if o.MapPromote < 0 {
		return nil, fmt.Errorf("model/gpu: mapped promotion cap %d (0: every miss)", o.MapPromote)
	}
	if o.MapPromote > 0 && o.Misses == MissCopy {
		return nil, fmt.Errorf("model/gpu: a mapped promotion cap (%d) without mapped misses has no effect (set Misses to MissMap or MissAuto, or leave MapPromote 0)", o.MapPromote)
	}
	e = &Engine{dev: dev, cfg: c, vocab: m.Vocab, src: src, fns: map[string]*rt.Func{}, noFuse: o.NoFuse, noRowNorm: o.NoRowNorm, aheadAt: -1, fetchAt: -1, shJoin: -1,
		launchSettings: launchSettings{oldRowQ81: o.OldRowQ81, argmax1: o.OneBlockArgmax, ktimes: o.KernelTimes, noAttnPrep: o.NoAttnPrep, noPDL: o.NoPDL, noGdnQ81: o.NoGdnQ81}}
	partial := e
	defer func() {
		if err != nil {
			err = errors.Join(err, partial.Close())
			e = nil
		}
	}()
	prog := func(format string, args ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, format, args...)
		}
	}
	fams := families
	if c.Arch == model.ArchQwen3Next {
		fams = append(fams[:len(fams):len(fams)], "gated_delta_net")
	}
	if o.Chunk < 0 || o.Chunk > o.Ctx {
		return nil, fmt.Errorf("model/gpu: prompt chunk %d must be in 0..%d (the context)", o.Chunk, o.Ctx)
	}
	if o.PrefillTiles != TilesBest && o.PrefillTiles != TilesT64 && o.PrefillTiles != TilesT32 && o.PrefillTiles != TilesS8 {
		return nil, fmt.Errorf("model/gpu: prefill tiles mode %d (want TilesBest, TilesT64, TilesT32 or TilesS8)", int(o.PrefillTiles))
	}
	e.ptiles = o.PrefillTiles
	e.mmvqCols8 = o.MmvqCols8
	e.attnOld = o.OldAttnPrefill
	e.attnF32 = o.F32AttnPrefill
	e.attnGen = o.GenericAttnMMA
	e.shDec = o.SharedDecode
	e.gdnOld = o.OldDeltaNet
	if o.SharedBranch < BranchDep || o.SharedBranch > BranchPlain {
		return nil, fmt.Errorf("model/gpu: shared-expert branch mode %d (want BranchDep, BranchOff or BranchPlain)", int(o.SharedBranch))
	}
	e.shBranch = o.SharedBranch
	if o.AttnBranch < BranchDep || o.AttnBranch > BranchPlain {
		return nil, fmt.Errorf("model/gpu: attention-input branch mode %d (want BranchDep, BranchOff or BranchPlain)", int(o.AttnBranch))
	}
	e.attnBr = o.AttnBranch
	if o.Chunk > 0 && (c.Arch == model.ArchQwen3MoE || c.Arch == model.ArchQwen3Next) && !o.HostKV {
		e.chunk = o.Chunk
		fams = append(fams[:len(fams):len(fams)], "mmq", "moe_prefill", "attention_prefill")
		// mmq8, mmq8c, mmq8cz hold the 256-thread mmq tiles (NVIDIA only): each loaded where
		// the target has any of its variants
		if target, ok := abi.TargetFor(dev.Info().Arch); ok {
			for _, f := range mmqFamilies[1:] {
				if co, ok := abi.Find(target, f); ok && len(co.Variants) > 0 {
					fams = append(fams, f)
				}
			}
		}
	}
	e.coDir = o.CODir
	if e.ks, err = loadKernels(dev, o.CODir, fams); err != nil {
		return nil, err
	}
	if o.Misses != MissCopy { // a mapping is proven by a kernel; where the runtime has none, ours (kernels.go)
		if err := e.ks.registerProbe(dev, o.CODir); err != nil && o.Misses == MissMap {
			return nil, fmt.Errorf("model/gpu: mapped expert misses (--expert-misses map) need a kernel that proves the mapping: %w (build the code objects with `just co`, or use --expert-misses copy or auto)", err)
		}
	}
	shape, dense, err := e.shape()
	if err != nil {
		return nil, err
	}
	in, err := shape.PlanInput(o.Ctx)
	if err != nil {
		return nil, err
	}
	in.Reserve = o.Reserve
	if e.chunk > 0 {
		// the schedule is sized for the smallest token tile either mode can launch (without
		// moe_prefill's tiles for the experts' type, preparePrefill fails)
		st := 64
		if m, ok := moeTilesFor(e.ks.target, e.expType); ok {
			e.moeT, st = m, m.schedTile()
		}
		pre := prefillNeeds(&c, e.chunk, st)
		if c.Arch == model.ArchQwen3Next {
			// the shared expert's pass (sharedChunk): its tables, and the zero expert every
			// matrix of expert 1 points at, as large as the largest shared matrix (gate and
			// down hold the same n_ff·n_embd values)
			var zb uint64
			for _, d := range dense {
				if strings.HasSuffix(d.name, "_shexp.weight") && !d.vec {
					zb = max(zb, d.bytes)
				}
			}
			pre = append(pre, Need{bufPShTab, KindSlotTables, uint64(c.Layers) * 3 * 2 * 8}, Need{bufPShZero, KindWeights, zb})
		}
		var b uint64
		for _, n := range pre {
			b += alignUp(n.Bytes)
		}
		in.Resident = append(in.Resident, pre...)
		in.SlabGroup = c.Experts
		in.Extra = fmt.Sprintf("the batched prompt path's scratch for chunks of %d tokens takes %s: a smaller --prefill-chunk needs less (0 runs prompts token by token, without it)", e.chunk, mib(b))
	}
	budget := o.Budget
	if budget == 0 {
		dev.SetBudget(0) // no cap from an earlier engine on this device
		free, _, err := dev.MemInfo()
		if err != nil {
			return nil, err
		}
		budget = free
	} else {
		dev.SetBudget(budget + dev.Used())
	}
	if o.MaxExpert > 0 {
		in.MaxSlots = max(in.MinSlots, min(in.MaxSlots, o.MaxExpert))
	}
	if e.aheadPlanned = e.wantAhead(o, in, budget); e.aheadPlanned {
		in.Resident = append(in.Resident, aheadNeeds(&c, in.SlotBytes)...)
	}
	if e.plan, err = NewPlan(in, budget); err != nil {
		return nil, err
	}
	prog("%s\n", e.plan)
	if e.mem, err = e.plan.Allocate(dev); err != nil {
		return nil, err
	}
	if err := e.upload(dense, prog); err != nil {
		return nil, err
	}
	if err := e.pinExperts(prog, o); err != nil {
		return nil, err
	}
	if err := e.prepare(o); err != nil {
		return nil, err
	}
	return e, nil
}

// shape lists the dense weights as they will sit in VRAM, with their sources.
func (e *Engine) shape() (*Shape, []denseSrc, error) {
	c := &e.cfg
	s := &Shape{Cfg: *c, Vocab: e.vocab}
	var dense []denseSrc
	get := func(name string) (*model.Tensor, error) {
		t, ok := e.src.Tensor(name)
		if !ok {
			return nil, fmt.Errorf("model/gpu: %s: tensor %s is missing", e.src.Path(), name)
		}
		return t, nil
	}
	addMat := func(name, alias string) error {
		t, err := get(name)
		if err != nil {
			return err
		}
		qt, err := tensorType(t)
		if err != nil {
			return err
		}
		d := denseSrc{name: alias, t: t, typ: qt}
		if qt == quant.F32 { // mmvq has no f32 variant: stored as f16 (documented deviation)
			d.typ = quant.F16
		}
		if _, ok := typeVariant[d.typ]; !ok {
			return fmt.Errorf("%w: mmvq has no variant for %s (tensor %s)", ErrMissingKernel, qt, name)
		}
		rb, err := d.typ.RowBytes(t.Cols())
		if err != nil {
			return err
		}
		d.bytes = uint64(rb) * uint64(t.Rows())
		dense = append(dense, d)
		s.Dense = append(s.Dense, Need{alias, KindWeights, d.bytes})
		return nil
	}
	addVec := func(name string) error {
		t, err := get(name)
		if err != nil {
			return err
		}
		d := denseSrc{name: name, t: t, typ: quant.F32, vec: true, bytes: 4 * uint64(t.Rows()*t.Cols())}
		dense = append(dense, d)
		s.Dense = append(s.Dense, Need{name, KindWeights, d.bytes})
		return nil
	}
	head := "output.weight"
	if _, ok := e.src.Tensor(head); !ok {
		head = "token_embd.weight"
	}
	if err := addMat(head, "head"); err != nil {
		return nil, nil, err
	}
	if err := addVec("output_norm.weight"); err != nil {
		return nil, nil, err
	}
	next := c.Arch == model.ArchQwen3Next
	post := "ffn_norm.weight"
	if next {
		post = "post_attention_norm.weight"
	}
	// addFused stores matrices that read the same input, share a type and a width, back
	// to back under one name, so that one mmvq launch computes all of them into one
	// output (their rows concatenated); otherwise each is added on its own.
	addFused := func(alias string, names ...string) error {
		start := len(dense)
		for _, n := range names {
			if err := addMat(n, n); err != nil {
				return err
			}
		}
		parts := dense[start:]
		if e.noFuse {
			return nil
		}
		for _, d := range parts {
			if d.typ != parts[0].typ || d.t.Cols() != parts[0].t.Cols() {
				return nil
			}
		}
		f := denseSrc{name: alias, typ: parts[0].typ}
		for _, d := range parts {
			e.fused[d.name] = fusedPart{alias: alias, off: f.bytes}
			f.parts = append(f.parts, d.t)
			f.bytes += d.bytes
		}
		dense = append(dense[:start], f)
		s.Dense = append(s.Dense[:len(s.Dense)-len(names)], Need{alias, KindWeights, f.bytes})
		return nil
	}
	e.fused = map[string]fusedPart{}
	for i := 0; i < c.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		mats := []string{"attn_output.weight"}
		vecs := []string{"attn_norm.weight", post, "attn_q_norm.weight", "attn_k_norm.weight"}
		fuse := [][]string{{"attn_q.weight", "attn_k.weight", "attn_v.weight"}, {"ffn_gate_inp.weight"}}
		if next { // attn_q interleaves the query and its gate: fused apart from k and v
			mats = append(mats, "attn_q.weight")
			fuse[0] = fuse[0][1:]
		}
		if c.IsRecurrent(i) {
			mats = []string{"ssm_out.weight"}
			vecs = []string{"attn_norm.weight", post, "ssm_conv1d.weight", "ssm_dt.bias", "ssm_a", "ssm_norm.weight"}
			fuse[0] = []string{"attn_qkv.weight", "attn_gate.weight", "ssm_ba.weight"}
		}
		if next {
			fuse[1] = append(fuse[1], "ffn_gate_inp_shexp.weight")
			mats = append(mats, "ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight")
		}
		for _, n := range mats {
			if err := addMat(p+n, p+n); err != nil {
				return nil, nil, err
			}
		}
		for j, g := range fuse {
			names := make([]string, len(g))
			for k, n := range g {
				names[k] = p + n
			}
			if err := addFused(fmt.Sprintf("%sfused%d", p, j), names...); err != nil {
				return nil, nil, err
			}
		}
		for _, n := range vecs {
			if err := addVec(p + n); err != nil {
				return nil, nil, err
			}
		}
	}
	g, err := get("blk.0.ffn_gate_exps.weight")
	if err != nil {
		return nil, nil, err
	}
	if e.expType, err = tensorType(g); err != nil {
		return nil, nil, err
	}
	if _, ok := typeVariant[e.expType]; !ok || e.expType == quant.F16 || e.expType == quant.BF16 {
		return nil, nil, fmt.Errorf("%w: moe_decode has no variant for %s experts (it takes Q8_0, Q2_0, Q4_K, Q6_K and the IQ types)", ErrMissingKernel, e.expType)
	}
	F, H := c.ExpertFF, c.Embd
	rbH, err := e.expType.RowBytes(H)
	if err != nil {
		return nil, nil, err
	}
	rbF, err := e.expType.RowBytes(F)
	if err != nil {
		return nil, nil, err
	}
	s.Expert = [3]uint64{uint64(F * rbH), uint64(F * rbH), uint64(H * rbF)}
	e.slot = slotLayout(s.Expert)
	emb, err := get("token_embd.weight")
	if err != nil {
		return nil, nil, err
	}
	e.emb = emb
	return s, dense, nil
}

type denseSrc struct {
	name  string
	t     *model.Tensor
	parts []*model.Tensor // a fused matrix: these, rows concatenated (t is nil)
	typ   quant.Type
	vec   bool
	bytes uint64
}

// fusedPart is where a matrix sits inside a fused one.
type fusedPart struct {
	alias string
	off   uint64
}

// matBytes is t's data as typ (f32 matrices are stored as f16).
func matBytes(t *model.Tensor, typ quant.Type) []byte {
	if typ == quant.F16 && t.Type == "F32" {
		v := t.Float32s()
		b := make([]byte, 2*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint16(b[2*i:], quant.F32ToF16(x))
		}
		return b
	}
	return t.Data
}

// upload copies the dense weights into their planned places.
func (e *Engine) upload(dense []denseSrc, prog func(string, ...any)) error {
	t0 := time.Now()
	var total uint64
	for _, d := range dense {
		var b []byte
		switch {
		case d.vec:
			b = f32Bytes(d.t.Float32s())
		case d.parts != nil:
			for _, t := range d.parts {
				b = append(b, matBytes(t, d.typ)...)
			}
		default:
			b = matBytes(d.t, d.typ)
		}
		if uint64(len(b)) != d.bytes {
			return fmt.Errorf("model/gpu: %s: %d bytes, planned %d", d.name, len(b), d.bytes)
		}
		if err := e.dev.Upload(e.mem.Ptr(d.name), b); err != nil {
			return fmt.Errorf("model/gpu: uploading %s: %w", d.name, err)
		}
		total += d.bytes
	}
	prog("dense weights: %s uploaded in %.1fs\n", mib(total), time.Since(t0).Seconds())
	c := &e.cfg
	byName := map[string]denseSrc{}
	for _, x := range dense {
		byName[x.name] = x
	}
	mat := func(name string, rows, k int) dmat {
		if f, ok := e.fused[name]; ok {
			d := byName[f.alias]
			return dmat{ptr: e.mem.Ptr(f.alias).Add(uintptr(f.off)), typ: d.typ, variant: typeVariant[d.typ], rows: rows, k: k}
		}
		d := byName[name]
		return dmat{ptr: e.mem.Ptr(name), typ: d.typ, variant: typeVariant[d.typ], rows: rows, k: k}
	}
	// fusedMat is the fused matrix that starts with first, rows of its parts summed; ok
	// false when first was stored on its own.
	fusedMat := func(first string, k int, rows ...int) (dmat, bool) {
		f, ok := e.fused[first]
		if !ok || f.off != 0 {
			return dmat{}, false
		}
		d := mat(first, 0, k)
		for _, r := range rows {
			d.rows += r
		}
		return d, true
	}
	e.qd, e.kvd = c.Heads*c.HeadDim, c.HeadsKV*c.HeadDim
	e.head = mat("head", e.vocab, c.Embd)
	e.outNrm = e.mem.Ptr("output_norm.weight")
	e.layers = make([]gLayer, c.Layers)
	next := c.Arch == model.ArchQwen3Next
	post := "ffn_norm.weight"
	if next {
		post = "post_attention_norm.weight"
	}
	H := c.Embd
	for i := range e.layers {
		p := fmt.Sprintf("blk.%d.", i)
		l := gLayer{attnNorm: e.mem.Ptr(p + "attn_norm.weight"), ffnNorm: e.mem.Ptr(p + post),
			router: mat(p+"ffn_gate_inp.weight", c.Experts, H)}
		if c.IsRecurrent(i) {
			kd, vd := c.LinKHeads*c.LinKDim, c.LinVHeads*c.LinVDim
			l.recurrent = true
			l.wqkv, l.wz = mat(p+"attn_qkv.weight", 2*kd+vd, H), mat(p+"attn_gate.weight", vd, H)
			l.wba, l.wout = mat(p+"ssm_ba.weight", 2*c.LinVHeads, H), mat(p+"ssm_out.weight", H, vd)
			l.conv, l.dtBias = e.mem.Ptr(p+"ssm_conv1d.weight"), e.mem.Ptr(p+"ssm_dt.bias")
			l.ssmA, l.ssmNorm = e.mem.Ptr(p+"ssm_a"), e.mem.Ptr(p+"ssm_norm.weight")
			l.state = e.mem.Ptr(fmt.Sprintf("blk.%d.state", i))
			l.in, l.fusedIn = fusedMat(p+"attn_qkv.weight", H, 2*kd+vd, vd, 2*c.LinVHeads)
		} else {
			qrows := e.qd
			if next {
				qrows = 2 * e.qd
			}
			l.qNorm, l.kNorm = e.mem.Ptr(p+"attn_q_norm.weight"), e.mem.Ptr(p+"attn_k_norm.weight")
			l.wq, l.wk = mat(p+"attn_q.weight", qrows, H), mat(p+"attn_k.weight", e.kvd, H)
			l.wv, l.wo = mat(p+"attn_v.weight", e.kvd, H), mat(p+"attn_output.weight", H, e.qd)
			l.kv = e.mem.Ptr(fmt.Sprintf("blk.%d.kv", i))
			if next {
				l.in, l.fusedIn = fusedMat(p+"attn_k.weight", H, e.kvd, e.kvd)
			} else {
				l.in, l.fusedIn = fusedMat(p+"attn_q.weight", H, e.qd, e.kvd, e.kvd)
			}
		}
		if next {
			l.routerSh, l.fusedRouter = fusedMat(p+"ffn_gate_inp.weight", H, c.Experts, 1)
		}
		if next {
			l.shInp = mat(p+"ffn_gate_inp_shexp.weight", 1, H)
			l.shGate, l.shUp = mat(p+"ffn_gate_shexp.weight", c.SharedFF, H), mat(p+"ffn_up_shexp.weight", c.SharedFF, H)
			l.shDown = mat(p+"ffn_down_shexp.weight", H, c.SharedFF)
			if l.shGate.typ != l.shUp.typ || l.shGate.typ != l.shDown.typ || l.shGate.typ == quant.F16 || l.shGate.typ == quant.BF16 {
				return fmt.Errorf("%w: %s: the shared expert runs through moe_decode, which needs one quantized type for its gate, up and down (have %s, %s, %s)",
					ErrMissingKernel, p, l.shGate.typ, l.shUp.typ, l.shDown.typ)
			}
			l.shTab = e.mem.Ptr(bufShTab).Add(uintptr(i * 3 * 2 * 8))
			tab := make([]byte, 3*2*8) // entry 1 of each table stays 0: the null expert
			binary.LittleEndian.PutUint64(tab[0:], uint64(l.shGate.ptr))
			binary.LittleEndian.PutUint64(tab[16:], uint64(l.shUp.ptr))
			binary.LittleEndian.PutUint64(tab[32:], uint64(l.shDown.ptr))
			if err := e.dev.Upload(l.shTab, tab); err != nil {
				return err
			}
		}
		e.layers[i] = l
	}
	return e.zeroState()
}

// zeroState clears the delta-net states and the constant zero logit of the shared expert's
// router (a new sequence starts from zeros).
func (e *Engine) zeroState() error {
	c := &e.cfg
	if c.Arch != model.ArchQwen3Next {
		return nil
	}
	zero := make([]byte, stateBytes(c))
	for _, l := range e.layers {
		if !l.recurrent {
			continue
		}
		if err := e.dev.Upload(l.state, zero); err != nil {
			return err
		}
	}
	if err := e.dev.Upload(e.mem.Ptr(bufRouter).Add(uintptr(4*c.Experts)), make([]byte, 8)); err != nil {
		return err
	}
	return e.dev.Upload(e.mem.Ptr(bufRouter2), make([]byte, 8))
}

// littleEndian: the host stores a float32 as its little-endian bytes, so the staging
// window's f32 rows can be read and written in place (f32View).
var littleEndian = binary.NativeEndian.Uint32([]byte{1, 0, 0, 0}) == 1

// f32View is b (4-byte aligned, in host memory outside the Go heap or Go memory that
// outlives the view) as n float32 values, on a little-endian host; nil elsewhere.
func f32View(b []byte, n int) []float32 {
	if !littleEndian || len(b) < 4*n || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%4 != 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// pinExperts copies every expert into one pinned host buffer, slot-shaped; mapped (one
// the device can read through an alias; no staging ring then) when the miss path is map
// (mapMisses), with MissAuto falling back to the copy path when the mapped buffer cannot be
// pinned or proven.
func (e *Engine) pinExperts(prog func(string, ...any), o Options) error {
	c := &e.cfg
	n := uint64(c.Layers) * uint64(c.Experts) * e.slot.total
	if n > math.MaxInt {
		return fmt.Errorf("model/gpu: %d bytes of experts", n)
	}
	t0 := time.Now()
	F, H := c.ExpertFF, c.Embd
	tensors := make([][3]*model.Tensor, c.Layers)
	for l := range tensors {
		p := fmt.Sprintf("blk.%d.", l)
		for j, name := range []string{"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"} {
			t, ok := e.src.Tensor(p + name)
			if !ok {
				return fmt.Errorf("model/gpu: tensor %s%s is missing", p, name)
			}
			if tt, err := tensorType(t); err != nil || tt != e.expType {
				return fmt.Errorf("%w: tensor %s%s is %s, the other experts %s; the GPU engine needs one expert type", ErrMissingKernel, p, name, t.Type, e.expType)
			}
			tensors[l][j] = t
		}
	}
	e.expT = tensors
	want, why := e.mapMisses(o)
	if want && e.ks.probeErr != nil { // nothing can prove the mapping (registerProbe)
		want, why = false, e.ks.probeErr.Error()
	}
	if want {
		if err := e.pinMapped(int(n)); err != nil {
			if o.Misses == MissMap {
				return fmt.Errorf("model/gpu: mapped expert misses (--expert-misses map) need every expert in mapped pinned host memory: %w (use --expert-misses copy, which can stage through a ring, or auto)", err)
			}
			why = err.Error()
		}
	}
	if !e.mapped && o.Misses == MissAuto {
		e.missWhy = why
	}
	if e.hostExp == nil {
		var err error
		if e.hostExp, err = e.dev.HostAlloc(int(n), false); err != nil {
			// reliability.md §2.6: without enough pinnable memory, stage through a small pinned
			// ring instead; each miss is then a CPU copy from the mapping first.
			ring := 2 * c.ExpertsUsed
			var rerr error
			if e.hostExp, rerr = e.dev.HostAlloc(ring*int(e.slot.total), false); rerr != nil {
				return fmt.Errorf("model/gpu: pinning %s of host memory for the experts: %w; and a staging ring of %d slots: %w", mib(n), err, ring, rerr)
			}
			e.ring = ring
			prog("pinning all experts (%s) failed (%v): staging misses through a pinned ring of %d slots instead\n", mib(n), err, ring)
			prog("%s\n", e.missLine())
			return nil
		}
	}
	dst := e.hostExp.Bytes()
	// Layers are copied by parallel workers; a fault reading the mapping (file truncated
	// under us) becomes an error.
	var mu sync.Mutex
	var firstErr error
	done := 0
	var wg sync.WaitGroup
	next := make(chan int, c.Layers)
	for l := 0; l < c.Layers; l++ {
		next <- l
	}
	close(next)
	for w := 0; w < min(runtime.GOMAXPROCS(0), 8, c.Layers); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			debug.SetPanicOnFault(true)
			defer func() {
				if r := recover(); r != nil {
					mu.Lock()
					firstErr = errors.Join(firstErr, fmt.Errorf("model/gpu: %s: fault reading the experts (file truncated or replaced?): %v", e.src.Path(), r))
					mu.Unlock()
				}
			}()
			for l := range next {
				ts := tensors[l]
				sz := [3]int{F * ts[0].RowBytes, F * ts[1].RowBytes, H * ts[2].RowBytes}
				offs := [3]uint64{e.slot.gate, e.slot.up, e.slot.down}
				for x := 0; x < c.Experts; x++ {
					base := (uint64(l)*uint64(c.Experts) + uint64(x)) * e.slot.total
					for j := 0; j < 3; j++ {
						copy(dst[base+offs[j]:], ts[j].Data[x*sz[j]:(x+1)*sz[j]])
					}
				}
				mu.Lock()
				done++
				const width = 30
				prog("\rpinning experts [%-*s] %3d%% %s / %s, %.1fs", width, strings.Repeat("#", done*width/c.Layers), 100*done/c.Layers,
					mib(uint64(done)*uint64(c.Experts)*e.slot.total), mib(n), time.Since(t0).Seconds())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	prog("\n%s\n", e.missLine())
	return nil
}

// staging layout: small windows in one pinned host buffer.
type stageLayout struct {
	x, pos, kvf, kvh, ids, ids2, idsP, tables, logits int // ids2: resident mode's second ids row (Engine.pendingIDs)
	ahead, ahead2                                     int // the look-ahead's predicted ids beside ids and ids2 (ahead.go)
	land                                              int // the landing list's host mirror, u64 [layers][K] (land.go)
	tok                                               int // ForwardArgmax's token id (i32)
	pemb, ppos, pids, pidx                            int // batched path: embeddings [N][H], positions, ids, slot indices [N][K]
	size                                              int
}

// ids is where layer li's expert ids land in the staging window.
func (s stageLayout) idsOf(li, k int) int { return s.ids + 4*k*li }

func (e *Engine) stage() stageLayout {
	c := &e.cfg
	var s stageLayout
	off := 0
	take := func(n int) int { o := off; off += (n + 255) &^ 255; return o }
	s.x = take(4 * c.Embd)
	s.pos = take(4)
	s.kvf = take(4 * 2 * e.kvd)
	s.kvh = take(2 * 2 * e.kvd)
	s.ids = take(4 * c.ExpertsUsed * c.Layers)
	s.ids2 = take(4 * c.ExpertsUsed * c.Layers)
	s.idsP = take(4 * c.ExpertsUsed)
	s.ahead = take(4 * c.ExpertsUsed * c.Layers)
	s.ahead2 = take(4 * c.ExpertsUsed * c.Layers)
	s.tables = take(8 * 3 * c.Experts * c.Layers)
	s.land = take(8 * c.ExpertsUsed * c.Layers)
	s.logits = take(4 * e.vocab)
	s.tok = take(4)
	if n := e.chunk; n > 0 {
		s.pemb = take(4 * n * c.Embd)
		s.ppos = take(4 * n)
		s.pids = take(4 * n * c.ExpertsUsed)
		s.pidx = take(4 * n * c.ExpertsUsed)
	}
	s.size = off
	return s
}

// prepare makes the streams, the cache, the staging windows and the kernel handles.
func (e *Engine) prepare(o Options) error {
	c := &e.cfg
	var err error
	if e.staging, err = e.dev.HostAlloc(e.stage().size, false); err != nil {
		return err
	}
	if e.compute, err = e.dev.NewStream(); err != nil {
		return err
	}
	if e.copier, err = NewCopier(e.dev, e.hostExp, o.Group); err != nil {
		return err
	}
	switch o.Policy {
	case "", "decayed":
		decay, rerank := o.Decay, o.Rerank
		if decay == 0 {
			decay = 0.98
		}
		if rerank == 0 {
			rerank = 8
		}
		var seed map[Key]float64
		if o.Profile != nil {
			seed = o.Profile.Count
		}
		e.decayed = NewDecayed(decay, rerank, seed)
		e.cache = NewCache(e.plan.Slots, e.decayed)
	case "lru":
		e.cache = NewCache(e.plan.Slots, NewLRU())
	default:
		return fmt.Errorf("model/gpu: unknown cache policy %q (decayed or lru)", o.Policy)
	}
	e.dirty = make([]bool, c.Layers)
	if e.mapped {
		if o.Prefetch {
			return fmt.Errorf("model/gpu: look-ahead prefetch and mapped expert misses exclude each other (a mapped token never waits for a copy)")
		}
		if e.tablesEv, err = e.dev.NewEvent(); err != nil {
			return err
		}
		e.promoting, e.mapPromote = map[int]promotion{}, o.MapPromote
		n := c.Layers * c.Experts
		e.vram = make([]bool, n)
		st := e.stage()
		e.vramAt = map[int][]bool{st.ids: make([]bool, n), st.ids2: make([]bool, n)}
	}
	e.prefetch, e.predicted = o.Prefetch, map[Key]bool{}
	e.mapAhead, e.aheadRan = e.aheadPlanned, map[int]int{}
	e.landAt, e.landWant = map[int][]int{}, make([]int, c.Layers)
	for i := range e.landWant {
		e.landWant[i] = c.ExpertsUsed
	}
	if o.MapLand < 0 || o.MapLand > c.ExpertsUsed {
		return fmt.Errorf("model/gpu: %d landing slots a layer: want 0..%d (0: %d)", o.MapLand, c.ExpertsUsed, c.ExpertsUsed)
	}
	if e.aheadPlanned && !o.NoMapLand { // as the look-ahead: where it is planned
		e.landM = cmp.Or(o.MapLand, c.ExpertsUsed)
	}
	e.landPromote = o.LandPromote
	e.hostKV = o.HostKV
	e.pendingIDs, e.syncLookup = -1, o.SyncLookup
	// Slot tables start all zero (nothing resident) — unless a profile warms the cache:
	// its most used experts are copied in now, as many as there are slots.
	st := e.staging.Bytes()[e.stage().tables:]
	clear(st[:8*3*c.Experts*c.Layers])
	if e.mapped { // mapped misses: every expert's entries at its host copy
		for l := 0; l < c.Layers; l++ {
			for x := 0; x < c.Experts; x++ {
				e.setSlot(st, l, x, 0)
			}
		}
	}
	if o.Profile != nil {
		keys := make([]Key, 0, len(o.Profile.Count))
		for k := range o.Profile.Count {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			a, b := o.Profile.Count[keys[i]], o.Profile.Count[keys[j]]
			return a > b || (a == b && less(keys[i], keys[j]))
		})
		placed := e.cache.Preload(keys)
		if _, err := e.loadExperts(st, placed); err != nil {
			return err
		}
		e.stats = Stats{}
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "expert cache warmed from the profile: %d experts\n", len(placed))
		}
	}
	if all := c.Layers * c.Experts; e.plan.Slots >= all && e.ring == 0 && !o.NoResident {
		// Every expert fits: copy the rest in now, and no layer waits for the host again.
		keys := make([]Key, 0, all)
		for l := 0; l < c.Layers; l++ {
			for x := 0; x < c.Experts; x++ {
				keys = append(keys, Key{int32(l), int32(x)})
			}
		}
		t0 := time.Now()
		placed := e.cache.Preload(keys)
		ms, err := e.loadExperts(st, placed)
		if err != nil {
			return err
		}
		e.resident = true
		e.stats = Stats{}
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "every expert fits the cache: %d copied in at load (%s, %.0f ms device, %.1fs)\n",
				len(placed), mib(uint64(len(placed))*e.slot.total), ms, time.Since(t0).Seconds())
		}
	}
	e.lateBatch = e.mapped && !e.resident && !o.EarlyBatch // SetLateBatch (hostgap.go)
	if err := e.dev.Upload(e.mem.Ptr(bufTables), st[:8*3*c.Experts*c.Layers]); err != nil {
		return err
	}
	if e.aheadPlanned { // no landing slots (land.go)
		if err := e.dev.Upload(e.mem.Ptr(bufAheadLand), make([]byte, 8*c.Layers*c.ExpertsUsed)); err != nil {
			return err
		}
	}
	// RoPE frequencies exactly as the CPU engine computes them.
	half := c.RopeDim / 2
	freq := make([]float32, half)
	for i := range freq {
		freq[i] = float32(1 / math.Pow(c.RopeBase, float64(float32(2*i)/float32(c.RopeDim))))
	}
	if err := e.dev.Upload(e.mem.Ptr(bufFreq), f32Bytes(freq)); err != nil {
		return err
	}
	for _, k := range []struct{ fam, variant string }{
		{"rmsnorm", "f32"}, {"rmsnorm", "q81"}, {"rmsnorm", "addq81"}, {"rope", "neox"},
		{"attention_decode", "split_f16"}, {"attention_decode", "reduce_f16"}, {"attention_decode", "store_f16"}, {"quantize_q8_1", "f32"},
		{"attention_decode", "prep_f16"}, {"attention_decode", "reduceq_f16"},
		{"moe_decode", typeVariant[e.expType]}, {"rmsnorm", "add"},
		{"rmsnorm_row", "q81"}, {"rmsnorm_row", "addq81"}, {"rmsnorm_row", "add"}, {"rmsnorm_row", "f32"},
		{"sample", "argmax"}, {"sample", "argmaxp"}, {"sample", "argmaxf"},
		{"rmsnorm_row", "q81wave"}, {"rmsnorm_row", "addq81wave"},
	} {
		f, err := e.ks.fn(k.fam, k.variant)
		if err != nil {
			return err
		}
		e.fns[k.fam+"/"+k.variant] = f
	}
	if e.aheadPlanned {
		f, err := e.ks.fn("expert_fetch", "u128")
		if err != nil {
			return err
		}
		e.fns["expert_fetch/u128"] = f
	}
	if c.Arch == model.ArchQwen3Next {
		for _, k := range []struct{ fam, variant string }{
			{"gated_delta_net", "conv"}, {"gated_delta_net", "recurrent"}, {"gated_delta_net", "recurrentq"},
			{"gated_delta_net", "recsplit"}, {"gated_delta_net", "gnorm"},
		} {
			f, err := e.ks.fn(k.fam, k.variant)
			if err != nil {
				return err
			}
			e.fns[k.fam+"/"+k.variant] = f
		}
	}
	for _, l := range e.layers {
		if l.shGate.variant != "" {
			f, err := e.ks.fn("moe_decode", l.shGate.variant)
			if err != nil {
				return err
			}
			e.fns["moe_decode/"+l.shGate.variant] = f
		}
	}
	e.mmvqRows8 = o.MmvqRows8
	e.mmvqOld = o.MmvqOld
	// Decode geometries exist as their own kernels (mmvq variants <type>_g<N>) on NVIDIA
	// targets only; AMD keeps the default kernel.
	mco, _ := abi.Find(e.ks.target, "mmvq")
	if mco.Vendor == "nvidia" {
		e.units = e.dev.Info().Units
	}
	mmvqRows := map[string]int{} // "mmvq/variant" → rows per block
	for _, l := range append([]gLayer{{wq: e.head}}, e.layers...) {
		for _, d := range []dmat{l.wq, l.wk, l.wv, l.wo, l.router, l.wqkv, l.wz, l.wba, l.wout, l.shInp} {
			if d.variant == "" {
				continue
			}
			vs := []string{d.variant}
			for g := 1; e.units > 0 && g < len(mmvqGeoms); g++ {
				if _, ok := mco.Symbol(mmvqGeomVariant(d.variant, g)); ok {
					vs = append(vs, mmvqGeomVariant(d.variant, g))
				}
			}
			for _, v := range vs {
				f, err := e.ks.fn("mmvq", v)
				if err != nil {
					return err
				}
				e.fns["mmvq/"+v] = f
				if mmvqRows["mmvq/"+v], err = e.ks.rowsPerBlock("mmvq", v); err != nil {
					return err
				}
			}
		}
	}
	e.ctx = o.Ctx
	if o.AttnSplit < AttnSplitOld {
		return fmt.Errorf("model/gpu: attention split of %d positions", o.AttnSplit)
	}
	e.attnSplit = o.AttnSplit
	e.plain = o.PlainLaunch
	e.graphOn, e.graphs = !o.NoGraph, map[graphKey]*tokenGraph{}
	e.walkFirst = o.WalkFirst
	if e.chunk > 0 {
		if err := e.preparePrefill(); err != nil {
			return err
		}
	}
	e.records(mmvqRows)
	return nil
}

// records makes the launch records of every prepared kernel (mmvq's with its rows per
// block, by "mmvq/variant"), the hot ones' fields, each dense matrix's mmvq record, the
// Launcher and the per-token host buffers.
func (e *Engine) records(mmvqRows map[string]int) {
	c := &e.cfg
	e.kern = make(map[string]*kernel, len(e.fns))
	for key, f := range e.fns {
		fam, _, _ := strings.Cut(key, "/")
		e.kern[key] = &kernel{key: key, fn: f, rows: mmvqRows[key], pdl: pdlFamilies[fam]}
	}
	for key, k := range e.kern {
		if v, ok := strings.CutPrefix(key, "mmvq/"); ok {
			for g := 1; g < len(mmvqGeoms); g++ {
				k.geoms[g] = e.kern["mmvq/"+mmvqGeomVariant(v, g)]
			}
		}
	}
	e.kRow, e.kRms = map[string]*kernel{}, map[string]*kernel{}
	for _, v := range []string{"f32", "add", "q81", "addq81"} {
		e.kRow[v], e.kRms[v] = e.kern["rmsnorm_row/"+v], e.kern["rmsnorm/"+v]
	}
	e.SetOldNorm(e.oldRowQ81, e.argmax1)
	e.kArgmaxP, e.kArgmaxF = e.kern["sample/argmaxp"], e.kern["sample/argmaxf"]
	e.kRope, e.kStore = e.kern["rope/neox"], e.kern["attention_decode/store_f16"]
	e.kSplit, e.kReduce = e.kern["attention_decode/split_f16"], e.kern["attention_decode/reduce_f16"]
	e.kQuant, e.kMoe, e.kArgmax = e.kern["quantize_q8_1/f32"], e.kern["moe_decode/"+typeVariant[e.expType]], e.kern["sample/argmax"]
	e.kFetch = e.kern["expert_fetch/u128"]
	e.kConv, e.kRec, e.kRecQ = e.kern["gated_delta_net/conv"], e.kern["gated_delta_net/recurrent"], e.kern["gated_delta_net/recurrentq"]
	e.kRecSplit, e.kGNorm = e.kern["gated_delta_net/recsplit"], e.kern["gated_delta_net/gnorm"]
	e.kPrep, e.kReduceQ = e.kern["attention_decode/prep_f16"], e.kern["attention_decode/reduceq_f16"]
	mats := func(l *gLayer) []*dmat {
		return []*dmat{&l.wq, &l.wk, &l.wv, &l.wo, &l.router, &l.wqkv, &l.wz, &l.wba, &l.wout, &l.shInp, &l.in, &l.routerSh}
	}
	e.head.kern = e.kern["mmvq/"+e.head.variant]
	for i := range e.layers {
		l := &e.layers[i]
		for _, d := range mats(l) {
			if d.variant != "" {
				d.kern = e.kern["mmvq/"+d.variant]
			}
		}
		if l.shGate.variant != "" {
			l.shKern = e.kern["moe_decode/"+l.shGate.variant]
		}
	}
	e.ln = e.dev.NewLauncher(e.compute)
	e.canDep = e.ln.CanLaunchDep() == nil
	e.idsBuf = make([]int, c.ExpertsUsed)
	e.slotBuf = make([]int, 0, c.ExpertsUsed)
}

// loadExperts copies the experts Preload placed into their slots, in batches the staging
// ring can hold (one batch without a ring), and points the host mirror of the slot tables
// (st) at them; it returns the copies' device time.
func (e *Engine) loadExperts(st []byte, placed []Miss) (ms float64, err error) {
	batch := len(placed)
	if e.ring > 0 {
		batch = e.ring
	}
	for lo := 0; lo < len(placed); lo += batch {
		var cps []Copy
		for _, p := range placed[lo:min(lo+batch, len(placed))] {
			slot := e.mem.Slot(p.Slot)
			e.setSlot(st, int(p.Key.Layer), int(p.Key.Expert), slot)
			cps = append(cps, e.expertCopy(int(p.Key.Layer), int(p.Key.Expert), slot))
		}
		if _, err := e.copier.Issue(cps); err != nil {
			return 0, err
		}
		d, err := e.copier.Finish()
		e.ringNext = 0
		if err != nil {
			return 0, err
		}
		ms += d
	}
	return ms, nil
}

// Plan is the engine's memory plan.
func (e *Engine) Plan() *Plan { return e.plan }

// Config is the model's configuration.
func (e *Engine) Config() model.Config { return e.cfg }

// Vocab is the number of logits per token.
func (e *Engine) Vocab() int { return e.vocab }

// Stats returns the counters, the last token's expert uses included (a lookup still
// pending is made now; a failure there is kept as the engine's fault, which the next
// Forward returns).
func (e *Engine) Stats() Stats {
	e.flushLookup()
	return e.stats
}

// ResetStats zeroes the counters (the cache contents stay); the uses of tokens before
// are counted first, so they stay out of the new counts.
func (e *Engine) ResetStats() {
	e.flushLookup()
	e.stats = Stats{}
	e.stepEnd, e.tokPrev = 0, nil
}

// SetSyncLookup sets Options.SyncLookup on a loaded engine, for a comparison on one engine.
func (e *Engine) SetSyncLookup(on bool) {
	e.flushLookup()
	e.syncLookup = on
}

// flushLookup makes a pending resident lookup (see Engine.pendingIDs); a failure becomes
// the engine's fault.
func (e *Engine) flushLookup() {
	if e.pendingIDs < 0 {
		return
	}
	if err := e.lookupPending(); err != nil && e.fault == nil {
		e.fault = err
	}
}

// Pos is the number of tokens processed.
func (e *Engine) Pos() int { return e.pos }

// Reset starts a new sequence (the KV cache is overwritten from position 0, the delta-net
// states are cleared; the expert cache keeps its contents).
func (e *Engine) Reset() error {
	e.pos, e.convPar = 0, 0
	e.aheadTg = nil // a new sequence walks its first graph before launching it
	return e.zeroState()
}

// ExpertProfile returns the decayed use counts as a profile (nil for LRU).
func (e *Engine) ExpertProfile() *Profile {
	e.flushLookup()
	if e.decayed == nil {
		return nil
	}
	return &Profile{Layers: e.cfg.Layers, Experts: e.cfg.Experts, Count: e.decayed.Scores()}
}

// Close releases everything on the device.
func (e *Engine) Close() error {
	var errs []error
	for _, ke := range e.kevs {
		e.kevPool = append(e.kevPool, ke.start, ke.end)
	}
	for _, ev := range e.kevPool {
		errs = append(errs, ev.Destroy())
	}
	e.kevs, e.kevPool = nil, nil
	errs = append(errs, e.dropGraphs())
	errs = append(errs, e.closeTokenTimes()...)
	if e.mapped && e.copier != nil { // promotions may still be copying into the slots freed below
		_, err := e.copier.Finish()
		errs = append(errs, err)
	}
	if e.tablesEv != nil {
		errs = append(errs, e.tablesEv.Destroy())
		e.tablesEv = nil
	}
	if e.syncEv != nil {
		errs = append(errs, e.syncEv.Destroy())
		e.syncEv = nil
	}
	if e.copier != nil {
		errs = append(errs, e.copier.Close())
	}
	if e.compute != nil {
		errs = append(errs, e.compute.Destroy())
	}
	if e.staging != nil {
		errs = append(errs, e.staging.Free())
	}
	if e.hostExp != nil {
		errs = append(errs, e.hostExp.Free())
	}
	if e.mem != nil {
		errs = append(errs, e.mem.Free())
	}
	if e.ks != nil {
		errs = append(errs, e.ks.close())
	}
	e.copier, e.compute, e.staging, e.hostExp, e.mem, e.ks = nil, nil, nil, nil, nil, nil
	return errors.Join(errs...)
}

func blocks(n, per int) uint32 { return uint32((n + per - 1) / per) }

func dim(x uint32) rt.Dim3 { return rt.Dim3{X: x, Y: 1, Z: 1} }

func (e *Engine) launch(key string, grid rt.Dim3, threads int, args []byte) error {
	k := e.kern[key]
	if k == nil {
		panic("model/gpu: kernel " + key + " not prepared")
	}
	return e.launchK(k, grid, threads, args)
}

// launchK launches k on the compute stream (through the Launcher: bound during Forward
// unless Options.PlainLaunch). args is copied into argBuf first and only argBuf goes on,
// so the caller's argument struct does not escape to the heap.
func (e *Engine) launchK(k *kernel, grid rt.Dim3, threads int, args []byte) error {
	if len(args) > len(e.argBuf) {
		panic("model/gpu: launch arguments larger than argBuf")
	}
	a := e.argBuf[:copy(e.argBuf[:], args)]
	if e.gmode == gCheck {
		return e.checkLaunch(k, grid, threads, a)
	}
	if e.gmode == gReplay {
		changed, err := e.gcur.g.Set(e.gi, k.fn, grid, rt.Dim3{X: uint32(threads), Y: 1, Z: 1}, a)
		e.gi++
		if err != nil {
			return fmt.Errorf("model/gpu: %s: %w", k.key, err)
		}
		if changed {
			e.stats.GraphUpdates++
		}
		return nil
	}
	var ke kernelEvents
	if e.ktimes {
		var err error
		ke.key = k.key
		if ke.start, err = e.kevent(); err != nil {
			return err
		}
		if ke.end, err = e.kevent(); err != nil {
			return err
		}
		if err := ke.start.Record(e.compute); err != nil {
			return err
		}
	}
	// Two monotonic clock reads against a base (time.Now would read the wall clock too).
	t0 := time.Since(clockBase)
	var err error
	if k.pdl && !e.noPDL {
		var dep bool
		dep, err = e.ln.LaunchDep(k.fn, grid, rt.Dim3{X: uint32(threads), Y: 1, Z: 1}, a)
		if dep {
			e.stats.DepLaunches++
		}
	} else {
		err = e.ln.Launch(k.fn, grid, rt.Dim3{X: uint32(threads), Y: 1, Z: 1}, a)
	}
	// A launch made while a token is captured runs only as part of its graph: its host
	// time is the token's GraphTime, and its run is counted in Graphs. Counted here too, a
	// capture that fails would count its token's launches twice (graphToken submits the
	// token again launch by launch).
	if e.gmode != gCapture {
		e.stats.LaunchTime += time.Since(clockBase) - t0
		e.stats.Launches++
	}
	if err != nil {
		return fmt.Errorf("model/gpu: %s: %w", k.key, err)
	}
	if e.ktimes {
		if err := ke.end.Record(e.compute); err != nil {
			return err
		}
		e.kevs = append(e.kevs, ke)
	}
	return nil
}

func (e *Engine) kevent() (*rt.Event, error) {
	if n := len(e.kevPool); n > 0 {
		ev := e.kevPool[n-1]
		e.kevPool = e.kevPool[:n-1]
		return ev, nil
	}
	return e.dev.NewEvent()
}

// readKernelTimes adds the device times of the launches since the last call to
// Stats.Kernels (after a sync of the compute stream).
func (e *Engine) readKernelTimes() error {
	if e.stats.Kernels == nil {
		e.stats.Kernels = map[string]KernelTime{}
	}
	for _, ke := range e.kevs {
		d, err := rt.Elapsed(ke.start, ke.end)
		if err != nil {
			return err
		}
		k := e.stats.Kernels[ke.key]
		k.Ms += d.Seconds() * 1e3
		k.Launches++
		e.stats.Kernels[ke.key] = k
		e.kevPool = append(e.kevPool, ke.start, ke.end)
	}
	e.kevs = e.kevs[:0]
	return nil
}

// sync waits for the compute stream, counting the wait.
func (e *Engine) sync() error {
	t0 := time.Now()
	err := e.compute.Sync()
	e.stats.SyncTime += time.Since(t0)
	e.stats.Syncs++
	if err == nil && e.ktimes {
		err = e.readKernelTimes()
	}
	return err
}

// mmvq runs y = W·x for one column; x is given as Q8_1 (xq) and f32 (xf).
func (e *Engine) mmvq(w dmat, xq, xf, y rt.DevPtr) error {
	return e.mmvqMats(w, 1, 0, 0, xq, xf, y)
}

// mmvqGeoms mirrors kernels.MmvqGeoms (model/gpu may not import kernels; TestMmvqGeomsMirror
// compares the two through kernels/abi's rows per block of the geometry variants): per
// geometry, rows a block for the quantized types and for F16/BF16 (0: F16/BF16 have no
// kernel of that geometry).
var mmvqGeoms = [...]struct{ qRows, fRows int }{{16, 0}, {16, 0}, {8, 0}, {24, 0}, {8, 8}, {8, 0}, {8, 0}, {16, 0}, {8, 0}, {16, 0}, {16, 0}, {16, 0}, {16, 0}, {8, 0}, {8, 0}}

// mmvqGeomVariant is the mmvq variant of variant's decode geometry g ≥ 1: "<type>_g<g>".
func mmvqGeomVariant(variant string, g int) string { return variant + "_g" + strconv.Itoa(g) }

// mmvqGeom is the decode geometry of one-column mmvq launches of z matrices of w's shape on
// an NVIDIA device through k (the type's default kernel): 0 = k itself, g ≥ 1 = its geometry
// kernel k.geoms[g]; and the rows one block then covers. The kernels keep 2 blocks of 256
// threads an SM (launch_bounds(256, 2): 128 registers), so a grid of more than 2·units
// blocks runs in waves, each paying the launch's dependent round trips again. Counting per
// shape (bench/results/2026-11-30-mmvqs-s7):
//   - K ≤ 2048 (≤ 64 groups: one pass at 2 groups a lane): the rows a wave R ∈ {1, 2, 3}
//     giving the fewest waves, then the most blocks (more SMs, fewer bytes each) — 30B q|k|v
//     5120 rows: R = 3 (geometry 3), 214 blocks, one wave instead of 320 blocks in two;
//     k|v 1024: R = 1 (geometry 4), 128 blocks instead of 64. Where that is R = 2, or still
//     more than one wave, the default kernel.
//   - K > 2048, Q6_K, a default grid of at least one block an SM: geometry 10 (wide loads;
//     session 9, below in mmvqGeomShape).
//   - otherwise, and F16/BF16 beyond the case below, the default kernel.
//   - F16/BF16 (routers: 128 or 513 rows): 1 row a wave (geometry 4) where the default's
//     ceil(rows/16) active blocks would leave SMs idle.
//
// The default kernel is a2cd2ed's code (its PTX identical), and it beat every geometry at
// wo / delta-net out 4096 → 2048 (graph µs 5.35 against geometry 2's 5.63), 80B's delta-net
// input 2048 → 12352 (10.55 against geometry 3's 11.64), attention q or gate 16 × 256
// (4.91 against geometry 1's 5.35) and the LM head (94.2 against geometry 1's 97.9), while
// the geometries won at k|v (geometry 4: 3.25 against 3.35) and the routers (geometry 4:
// 2.83 against 3.00, 3.16 against 3.62) and tied at q|k|v (geometry 3: 6.36 against 6.32):
// H200, standalone plain launches, bench/results/2026-11-30-final-s7/call1/bench.txt
// ("ref" rows). With each geometry its own kernel (call 2, call2/bench.txt, "old" = the
// default kernel) q|k|v is 5.90 against 6.32, k|v 2.79 against 3.34, the routers 2.51 against
// 3.02 and 2.88 against 3.65. Geometries 1 and 2 are not chosen (they stay for measurement).
//
// Options.MmvqOld, AMD targets, a device whose unit count is unknown and a kernel without
// the geometry keep geometry 0.
func (e *Engine) mmvqGeom(w dmat, z int, k *kernel) (geom int32, rowsPerBlock int) {
	if e.mmvqOld || e.units <= 0 {
		return 0, k.rows
	}
	g := e.mmvqGeomShape(w, z)
	if g == 0 || k.geoms[g] == nil {
		return 0, k.rows
	}
	return g, k.geoms[g].rows
}

// mmvqGeomShape is mmvqGeom's choice by shape alone (e.units > 0).
func (e *Engine) mmvqGeomShape(w dmat, z int) int32 {
	slots := 2 * e.units
	if w.typ == quant.F16 || w.typ == quant.BF16 {
		if blocks(w.rows, 16)*uint32(z) < uint32(e.units) {
			return 4
		}
		return 0
	}
	if w.k/32 > 64 {
		// Q6_K with every SM holding a block of the default grid (issue 5's 4096×14336: 256
		// blocks on 132 SMs): the wide-load geometry 10, events 22.40 (geometry 9) and 24.07
		// (default) → 21.09 µs, graph 19.36 / 21.54 → 17.96 (bench/results/2026-11-30-mmvq-s9,
		// call1, bitwise equal). Measured at that shape only; rows or matrices not 16-byte
		// aligned run the default path inside the kernel.
		if w.typ == quant.Q6_K && int(blocks(w.rows, mmvqGeoms[0].qRows))*z >= e.units {
			return 10
		}
		return 0
	}
	best, bw, bb := int32(0), 0, 0
	for _, g := range []int32{4, 0, 3} { // R = 1, 2, 3
		nb := int(blocks(w.rows, mmvqGeoms[g].qRows)) * z
		waves := (nb + slots - 1) / slots
		if bw == 0 || waves < bw || (waves == bw && nb > bb) {
			best, bw, bb = g, waves, nb
		}
	}
	if bw > 1 {
		return 0
	}
	return best
}

// mmvqPrefetch is mmvq's prefetch argument: with programmatic launches (Options.NoPDL off
// and a launcher that can make them; a launch right after a copy or event is still plain)
// each block pulls its share of the dense weights into L2 before it waits for its
// predecessor, so the pull overlaps the previous kernel (30B-A3B Q2_0 device ms/token 3.001
// → 2.953, 80B 4.081 → 4.010: bench/results/2026-11-30-decode-profile, call 2); a plain
// launch would only pay for it (an mmvq benchmark's empty launch: 3.8 → 8.7 µs,
// bench/results/2026-11-30-final-s6).
func (e *Engine) mmvqPrefetch() int32 {
	if e.noPDL || !e.canDep {
		return 0
	}
	return 1
}

// mmvqKern is w's mmvq launch record (prepared with w, or by its variant).
func (e *Engine) mmvqKern(w dmat) *kernel {
	if w.kern != nil {
		return w.kern
	}
	return e.kern["mmvq/"+w.variant]
}

// mmvqBlocks is mmvq's grid x for rows weight rows through k: ceil(rows / the rows one
// block of k's variant covers) — mmvq is grid-strided, so any count covers every row, but
// blocks past the rows still stage their activations before they exit (quantized variants
// cover 16 rows per block).
func (e *Engine) mmvqBlocks(rows int, k *kernel) uint32 {
	if e.mmvqRows8 {
		return blocks(rows, 8)
	}
	return blocks(rows, k.rows)
}

// SetMmvqOld sets Options.MmvqOld on a loaded engine, for a comparison on one engine (each
// setting captures its own graphs: graphKey).
func (e *Engine) SetMmvqOld(on bool) {
	e.mmvqOld = on
}

// SetMmvqRows8 switches mmvq's grid to ceil(rows/8) blocks (on) or to the kernel's rows per
// block (off): Options.MmvqRows8 on a loaded engine, for a comparison on one engine.
func (e *Engine) SetMmvqRows8(on bool) {
	e.mmvqRows8 = on
}

// SetKernelTimes switches Options.KernelTimes on a loaded engine, between tokens (to
// profile chosen positions of one sequence). Switching it off first reads back the launches
// still pending (a sync of the compute stream).
func (e *Engine) SetKernelTimes(on bool) error {
	if !on && len(e.kevs) > 0 {
		if err := e.sync(); err != nil {
			return err
		}
	}
	e.ktimes = on
	return nil
}

// SetOldNorm sets Options.OldRowQ81 and Options.OneBlockArgmax on a loaded engine, between
// tokens, for a comparison on one engine (each setting captures its own graphs: graphKey).
func (e *Engine) SetOldNorm(rowQ81, argmax1 bool) {
	e.oldRowQ81, e.argmax1 = rowQ81, argmax1
	for _, v := range []string{"q81", "addq81"} {
		if rowQ81 {
			e.kRow[v] = e.kern["rmsnorm_row/"+v+"wave"]
		} else {
			e.kRow[v] = e.kern["rmsnorm_row/"+v]
		}
	}
}

// SetPlainLaunch sets Options.PlainLaunch on a loaded engine, for a comparison on one engine.
func (e *Engine) SetPlainLaunch(on bool) {
	e.plain = on
}

// SetAttnSplit sets Options.AttnSplit on a loaded engine (0: the policy; n > 0: splits of
// n positions; AttnSplitOld: the policy before), for a comparison on one engine.
func (e *Engine) SetAttnSplit(n int) {
	e.attnSplit = max(n, AttnSplitOld)
}

// mmvqMats runs z dense matrices of w.rows rows, matrix i at w.ptr + i·wMatBytes, all on
// the same x, into y + i·yMatStride.
// A decode geometry (mmvqGeom) with programmatic launches takes prefetch 2: the block's
// wait follows its first pass's L1 prefetch.
func (e *Engine) mmvqMats(w dmat, z int, wMatBytes int64, yMatStride int, xq, xf, y rt.DevPtr) error {
	a := abi.MmvqArgs{W: uint64(w.ptr), Xq: uint64(xq), Xf: uint64(xf), Y: uint64(y), WMatBytes: wMatBytes, Rows: int32(w.rows), K: int32(w.k),
		Ncols: 1, XColStride: int32(w.k), YColStride: int32(w.rows), YMatStride: int32(yMatStride), Prefetch: e.mmvqPrefetch()}
	k := e.mmvqKern(w)
	bx := e.mmvqBlocks(w.rows, k)
	if !e.mmvqRows8 {
		if g, rpb := e.mmvqGeom(w, z, k); g != 0 {
			k, bx = k.geoms[g], blocks(w.rows, rpb)
			if a.Prefetch == 1 {
				a.Prefetch = 2
			}
		}
	}
	return e.launchK(k, rt.Dim3{X: bx, Y: 1, Z: uint32(z)}, abi.MmvqThreads, rt.Args(&a))
}

// rmsnorm launches one RMSNorm variant over rows·heads rows of n: a single row (the
// residual stream's norms) through rmsnorm_row, a block per row — rmsnorm's one wave per
// row walks 2048 values in 64 dependent steps; swapping it for rmsnorm_row cut the host's
// sync wait from 6.85 to 2.36 ms per token (30B Q2_0, bench/results/2026-11-29-gpu-engine-2)
// — and the per-head q/k norms (many short rows) through rmsnorm.
func (e *Engine) rmsnorm(variant string, a abi.RmsnormArgs) error {
	a.Eps = e.cfg.Eps
	if a.Rows == 1 && !e.noRowNorm {
		r := abi.RmsnormRowArgs{X: a.X, R: a.R, W: a.W, Xo: a.Xo, Y: a.Y, Q: a.Q, N: a.N, Rows: a.Rows, Heads: a.Heads,
			TokStride: a.TokStride, HeadStride: a.HeadStride, Eps: a.Eps}
		return e.launchK(e.kRow[variant], dim(uint32(a.Rows)), abi.RmsnormRowThreads, rt.Args(&r))
	}
	return e.launchK(e.kRms[variant], dim(blocks(int(a.Rows), 8)), abi.RmsnormThreads, rt.Args(&a))
}
