package gpu

import (
	"fmt"

	"github.com/strata-hip/strata/kernels/abi"
	rt "github.com/strata-hip/strata/runtime/gpu"
)

// Stage-in (Options.StageIn, Engine.SetStageIn; off by default until measured). A decode
// token's graph begins with two host-to-device copies from the staging window: the
// embedding row into x and the position. With mapped misses, promote issues a batch of
// expert copies at each token boundary on the copy stream, which waits for the end of the
// token running then (mapped.go's order (2)) and then takes ~1.4 ms on the 80B at the
// budgets; the next token's two copies wait behind the batch in the copy engine's queue.
// bench/results/2026-11-30-bud-s10: the GPU idles 1.39–1.42 ms a token, as long as a
// token's copy time (1.44–1.52 ms), and 0.26–0.32 ms with the batches capped at 32 (copy
// 0.32 ms). With stage-in the staging window is mapped and a stage_in kernel loads the two
// through its device alias instead: no copy engine. The bytes are the same, so the logits
// are too.

// stageInOn: this token loads its inputs with stage_in.
func (e *Engine) stageInOn() bool { return e.stageIn && e.stagingDev != 0 }

// SetStageIn turns stage-in on or off (it needs the mapped staging window: a mapped engine).
func (e *Engine) SetStageIn(on bool) error {
	if on && e.stagingDev == 0 {
		return fmt.Errorf("model/gpu: stage-in needs a mapped staging window (mapped expert misses)")
	}
	e.aheadTg = nil // a setting changed: walk before the next launch (hostgap.go)
	e.stageIn = on
	return nil
}

// stageInput queues n bytes of the staging window at off to dst: a stage_in launch with
// stage-in, else a copy (stageUp).
func (e *Engine) stageInput(dst rt.DevPtr, off, n int) error {
	if !e.stageInOn() {
		return e.stageUp(dst, off, n)
	}
	a := abi.StageInArgs{Src: uint64(e.stagingDev) + uint64(off), Dst: uint64(dst), N: uint32(n / 4)}
	return e.launchK(e.kStageIn, dim(blocks(n/4, abi.StageInThreads)), abi.StageInThreads, rt.Args(&a))
}
