package gpu

import (
	"fmt"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/model"
	rt "github.com/strata-hip/strata/runtime/gpu"
)

// Look-ahead on the mapped path (default; Options.NoMapAhead, Engine.SetMapAhead). With mapped misses
// a layer's moe_decode reads every expert without a VRAM slot over the bus, inside the
// layer, one after the other with the rest of the token's chain. The look-ahead moves part
// of those reads off the chain: in layer l, right after its router, a graph branch applies
// layer l+1's router to layer l's normed hidden state (mmvq into router_next), takes its
// top-k (moe_decode phase 0 into ids_ahead's row l+1), and expert_fetch copies each
// predicted expert whose entries point at its host copy into one of K stage buffers in
// VRAM and writes a working copy of layer l+1's slot tables in which those experts point at
// their stage buffer. Layer l+1's moe_decode reads the working copy. The branch runs beside
// layer l's experts and shared expert and layer l+1's mixer; it joins before layer l+1's
// phase 3.
//
// The logits do not change: an expert's bytes are the same in its host copy, its slot and
// its stage buffer, and moe_decode reads the same expert ids and weights whichever address
// its table holds. A wrong prediction costs only its copy's bus time.
//
// Ordering (the capture's dependencies; kernel by kernel everything is one chain in the
// order below):
//   - The branch forks from layer l's router launch. Its mmvq reads xn, which the shared
//     expert's last norm (qwen3next) and layer l+1's first norm rewrite: the shared norm
//     joins the branch's mmvq (sharedBranch), and without a shared-expert branch the work
//     after phase 2 does (moe).
//   - Stage buffers and working tables alternate by layer parity: layer l+1's are written
//     while layer l's moe_decode reads the other pair; layer l-1's moe_decode, the last
//     reader of the pair the branch writes, precedes layer l's router on the chain.
//   - Layer l+1's phase 3 depends on the branch's expert_fetch (moe).
//   - router_next, wts_next and err_next are shared by every layer's branch, and no
//     dependency orders layer l-1's phase 0 before layer l's mmvq (in practice it ends about
//     a layer earlier: it follows layer l-1's mmvq at once); if it ever overlapped, a prediction would
//     be made from mixed logits: still K valid distinct ids, staged and tabled consistently
//     by its own fetch, so only the prediction's quality could suffer, never the bits
//     (wts_next and err_next are written and never read).
//   - The source tables are the device tables of layer l+1, which promote (mapped.go)
//     uploads only between tokens, on the compute stream: within a token they do not
//     change, and a VRAM slot a table entry names is not overwritten before the token ends
//     (mapped.go's order (2)). The working tables are rebuilt by every token.
//
// Layer 0 has no prediction and reads the device tables.

// Look-ahead buffers (planned only where the look-ahead can run: wantAhead).
const (
	bufAheadIDs   = "ids_ahead"    // predicted ids, i32 [layers][K] (row 0 unused); read back with the ids
	bufAheadStage = "ahead_stage"  // [2][K] expert blocks (slot layout)
	bufAheadTab   = "ahead_tables" // [2] working copies of a layer's slot tables, u64 [3][E]
)

// aheadBlocks is expert_fetch's gridDim.x: blocks per predicted expert (each copies a
// sixteenth of the expert with four 16-byte loads in flight a thread; 16 × 256 threads ×
// 64 bytes = 256 KiB in flight an expert), and enough for the tables' 3·E entries up to
// E = 1365.
const aheadBlocks = 16

// aheadNeeds is what the look-ahead adds to the memory plan.
func aheadNeeds(c *model.Config, slotBytes uint64) []Need {
	K, E := uint64(c.ExpertsUsed), uint64(c.Experts)
	return []Need{
		{bufAheadIDs, KindScratch, 4 * K * uint64(c.Layers)},
		{bufAheadStage, KindScratch, 2 * K * slotBytes},
		{bufAheadTab, KindSlotTables, 2 * 3 * E * 8},
		{bufAheadLand, KindSlotTables, 8 * K * uint64(c.Layers)},
	}
}

// wantAhead says whether to plan the look-ahead (before the plan is made; see
// Options.NoMapAhead): not where nothing can miss (the plan without it gives every expert a
// slot) and not where the engine will not map; and only with expert_fetch's code object,
// which it loads (without it the engine runs without the look-ahead, saying so).
func (e *Engine) wantAhead(o Options, in PlanInput, budget uint64) bool {
	if o.NoMapAhead || o.Misses == MissCopy || o.Prefetch || (o.Misses == MissAuto && !e.dev.Info().CanMapHost) {
		return false
	}
	if p, err := NewPlan(in, budget); err == nil && p.Slots >= e.cfg.Layers*e.cfg.Experts && !o.NoResident {
		return false
	}
	if err := e.ks.load(e.dev, o.CODir, "expert_fetch"); err != nil {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "mapped look-ahead off: %v\n", err)
		}
		return false
	}
	return true
}

// aheadOn: this engine's tokens run the look-ahead (set, mapped, something can miss).
func (e *Engine) aheadOn() bool { return e.mapAhead && e.mapped && !e.resident }

// SetMapAhead turns the look-ahead on or off on an engine whose plan holds its buffers
// (Options.NoMapAhead unset, and something can miss), for a comparison on one engine.
func (e *Engine) SetMapAhead(on bool) error {
	if on && !e.aheadPlanned {
		return fmt.Errorf("model/gpu: the mapped look-ahead needs its buffers: the engine was loaded with NoMapAhead, copies misses, or holds every expert")
	}
	e.mapAhead = on
	return nil
}

// SetMapAheadK makes the look-ahead copy only the first n of the K experts it predicts for
// a layer (moe_decode phase 0 orders them by probability, highest first): fewer wasted
// copies, fewer predicted misses covered; 0 (the default) or K: all K.
func (e *Engine) SetMapAheadK(n int) error {
	if n < 0 || n > e.cfg.ExpertsUsed {
		return fmt.Errorf("model/gpu: look-ahead copies of %d predicted experts: want 0..%d", n, e.cfg.ExpertsUsed)
	}
	e.aheadK = n
	return nil
}

// aheadCopies is how many of a layer's K predicted experts the look-ahead may copy.
func (e *Engine) aheadCopies() int {
	if e.aheadK > 0 {
		return e.aheadK
	}
	return e.cfg.ExpertsUsed
}

// moeTables is the slot tables layer li's moe_decode reads: the working copy the
// look-ahead wrote, or the device tables.
func (e *Engine) moeTables(li int) rt.DevPtr {
	E := e.cfg.Experts
	if e.aheadOn() && li > 0 {
		return e.mem.Ptr(bufAheadTab).Add(uintptr((li % 2) * 3 * E * 8))
	}
	return e.mem.Ptr(bufTables).Add(uintptr(li * 3 * E * 8))
}

// aheadCapture: the look-ahead is captured as a branch (graph capture and a backend that
// can branch); else it runs on the chain.
func (e *Engine) aheadCapture() bool { return e.gmode == gCapture && e.ln.CanBranch() == nil }

// ahead launches layer li's look-ahead for layer li+1 (after li's router, before its
// phase 3); ma is layer li's moe_decode arguments. In a capture it leaves the stream's
// dependencies on the router launch again, so phase 3 follows the router as before.
func (e *Engine) ahead(li int, ma abi.MoeDecodeArgs) error {
	c := &e.cfg
	m := e.mem
	K, E := c.ExpertsUsed, c.Experts
	br := e.aheadCapture()
	if br {
		if err := e.ln.CaptureFork(e.routerAt, false); err != nil {
			return err
		}
	}
	nl := &e.layers[li+1]
	if err := e.mmvq(nl.router, m.Ptr(bufXQ), m.Ptr(bufXN), m.Ptr(bufRouterP)); err != nil {
		return err
	}
	e.aheadAt = e.ln.CaptureLen() - 1
	src := m.Ptr(bufTables).Add(uintptr((li + 1) * 3 * E * 8))
	ids := m.Ptr(bufAheadIDs).Add(uintptr(4 * K * (li + 1)))
	pa := ma
	pa.Phase = 0
	pa.Logits, pa.Ids, pa.Wts, pa.Err = uint64(m.Ptr(bufRouterP)), uint64(ids), uint64(m.Ptr(bufWtsP)), uint64(m.Ptr(bufErrP))
	pa.SlotsGate, pa.SlotsUp, pa.SlotsDown = uint64(src), uint64(src.Add(uintptr(E*8))), uint64(src.Add(uintptr(2*E*8)))
	pa.Renorm = 0 // the weights are not used
	if err := e.launchK(e.kMoe, dim(1), abi.MoeDecodeThreads, rt.Args(&pa)); err != nil {
		return err
	}
	par := uintptr((li + 1) % 2)
	fa := abi.ExpertFetchArgs{Ids: uint64(ids), Src: uint64(src), Dst: uint64(m.Ptr(bufAheadTab).Add(par * uintptr(3*E*8))),
		Stage: uint64(m.Ptr(bufAheadStage).Add(par * uintptr(uint64(K)*e.slot.total))),
		Land:  uint64(m.Ptr(bufAheadLand).Add(uintptr(8 * K * (li + 1)))), NLand: int32(K), // land.go: zeros unless landing
		Host: e.hostAddr(li+1, 0), Total: e.slot.total, NExpert: int32(E), KUsed: int32(e.aheadCopies()), Nb: aheadBlocks}
	if err := e.launchK(e.kFetch, rt.Dim3{X: aheadBlocks, Y: uint32(fa.KUsed + 1), Z: 1}, abi.ExpertFetchThreads, rt.Args(&fa)); err != nil {
		return err
	}
	e.fetchAt = e.ln.CaptureLen() - 1
	if br {
		return e.ln.CaptureFork(e.routerAt, false)
	}
	return nil
}

// aheadStage is where a token's predicted ids land in the staging window, beside its ids
// at idsOff.
func (e *Engine) aheadStage(idsOff int) int {
	st := e.stage()
	if idsOff == st.ids2 {
		return st.ahead2
	}
	return st.ahead
}

// aheadCount adds a token's prediction to the stats (promote, when the token ran the
// look-ahead copying the first n predicted): for every layer after the first, its K
// predicted ids against the K it used, and which of the first n were read from host memory
// (not in VRAM when the token was submitted: at) and so copied.
func (e *Engine) aheadCount(off int, at []bool, n int) error {
	c := &e.cfg
	K := c.ExpertsUsed
	po := e.aheadStage(off)
	for li := 1; li < c.Layers; li++ {
		ids, err := e.readIDs(li, off+4*K*li, e.idsBuf)
		if err != nil {
			return err
		}
		pred, err := e.readIDs(li, po+4*K*li, e.aheadBuf)
		if err != nil {
			return fmt.Errorf("model/gpu: look-ahead prediction: %w", err)
		}
		e.aheadBuf = pred
		for _, id := range ids {
			if !at[li*c.Experts+id] {
				e.stats.AheadMisses++
			}
		}
		for j, p := range pred {
			used := false
			for _, id := range ids {
				used = used || id == p
			}
			e.stats.AheadPredicted++
			if used {
				e.stats.AheadRight++
			}
			if j < n && !at[li*c.Experts+p] {
				e.stats.AheadFetched++
				if used {
					e.stats.AheadUseful++
				}
			}
		}
	}
	return nil
}
