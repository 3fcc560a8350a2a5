package gpu

import (
	"errors"
	"fmt"
	"time"

	"github.com/strata-hip/strata/model"
	rt "github.com/strata-hip/strata/runtime/gpu"
)

// A resident token as one graph launch. With every expert resident a token's device work
// is a fixed sequence on the compute stream: two uploads from fixed staging rows (the
// embedding row and the position), ~675 launches (30B-A3B), the ids download and the
// output's download. Submitting it launch by launch costs the host ~4 µs a launch on the
// H200, more than the GPU needs for most of them; one captured graph replaces that with
// one launch and an update of the kernel nodes whose grid or arguments changed since
// (attention_decode's split and reduce or reduceq, whose length and split count follow the
// token, and store on the path without prep, whose position does; sample/argmax's n).
// attention_decode's prep reads the position from the device (bufPos, uploaded from the
// staging row inside the graph), so its node never changes.
//
// The token's code runs unchanged in three modes. Plain: launches and copies go to the
// stream. Capture: the first token of each variant (graphKey) runs inside a stream capture:
// the same calls build the graph, which is instantiated and launched once the token is
// captured. Replay: launchK hands each launch to Graph.Set (by capture index: a launch
// whose grid and arguments are unchanged costs a comparison), copies are checked against
// the capture (they must be the captured ones: same addresses and sizes; the host rows are
// pinned and read or written when the graph runs), and one Graph.Launch submits it all.
// A replay that does not walk the captured sequence exactly is an error, not a silent
// divergence.
//
// Ahead (on unless SetGraphAhead(false)): a token's node updates do not depend on its
// token id (the embedding row is a copy from staging), only on its position and the
// engine's settings, so right after launching token t's graph the engine walks token t+1's
// graph (the other variant: the ids row and conv state alternate) as a replay for position
// t+1 while the GPU runs token t. Token t+1's own walk then finds its nodes current and
// makes no driver call unless something changed in between (the caller's argmax n, a
// setting): the walk's comparison keeps it exact either way.
//
// Branches (CUDA; Engine.SetSharedBranch, SetAttnBranch): a capture need not be one chain.
// Where a launch needs nothing of the launches just before it, the capture's dependency set
// is moved (runtime/gpu Launcher.CaptureFork to an earlier launch, CaptureJoin to add the
// chain's end back), so the graph runs it beside them: qwen3next's shared expert beside the
// routed experts, its attention layers' q, gate and k|v projections side by side. Replays
// keep the capture's launch numbering; only the graph's edges differ (forward.go
// sharedBranch, attention).
//
// What changes the sequence's shape is the key: whether the step makes logits, what it
// leaves for the caller (logits or the argmax token), the staging row its ids go to (two
// alternate by token), the delta-net conv state it reads (two alternate by token) and the
// attention path (prep and reduceq, or the launches before them: Engine.SetAttnPrep), and
// whether launches carry programmatic dependencies (Engine.SetPDL: each launch of
// pdlFamilies that follows a kernel is a kernel node with a programmatic edge), and the
// branch modes (qwen3next only).
// Graphs are off with KernelTimes (events between launches), PlainLaunch (captures need
// the bound Launcher), HostKV (a sync per attention layer), on the non-resident path (the
// host looks experts up between phases) and the batched prompt path; and after a capture
// fails for a reason other than a device fault (a backend without graphs: HIP), with the
// reason in Engine.GraphErr.

// graphKey says which captured token a step can replay.
type graphKey struct {
	logits  bool // the step makes logits
	outMode int
	idsOff  int // the staging row of the ids download
	convPar int
	prep    bool       // attention through attention_decode's prep and reduceq (Engine.attnPrep)
	gdnQ81  bool       // the delta-net's output quantized by recurrentq (Engine.gdnQ81)
	pdl     bool       // launches with programmatic dependencies (Engine.SetPDL)
	oldQ81  bool       // rmsnorm_row's wave Q8_1 step (Engine.SetOldNorm)
	argmax1 bool       // the one-block argmax (Engine.SetOldNorm)
	mmvqOld bool       // mmvq's default path for every shape (Engine.SetMmvqOld)
	shared  BranchMode // qwen3next's shared expert as a branch (Engine.SetSharedBranch)
	attnBr  BranchMode // qwen3next's attention inputs as branches (Engine.SetAttnBranch)
	ahead   bool       // the mapped look-ahead (Engine.SetMapAhead, ahead.go)
	aheadK  int        // its copies (Engine.SetMapAheadK)
}

// graphKeyOf is the key of a step: the output mode counts only when the step makes
// logits (a step without them launches neither the head nor the argmax), and the conv
// state only when the model has delta-net layers (qwen3next); otherwise a prompt token
// of Forward and one of ForwardArgmax, or two qwen3moe tokens, would capture separate
// graphs of the same launches and fill maxGraphs twice as fast.
func (e *Engine) graphKeyOf(wantLogits bool, idsOff int) graphKey {
	k := graphKey{logits: wantLogits, idsOff: idsOff, prep: e.attnPrep(), pdl: !e.noPDL, oldQ81: e.oldRowQ81, argmax1: e.argmax1, mmvqOld: e.mmvqOld, ahead: e.aheadOn()}
	if k.ahead {
		k.aheadK = e.aheadCopies()
	}
	if e.cfg.Arch == model.ArchQwen3Next {
		k.shared, k.attnBr, k.gdnQ81 = e.shBranch, e.attnBr, e.gdnQ81()
	}
	if wantLogits {
		k.outMode = e.outMode
	}
	if e.cfg.Arch == model.ArchQwen3Next {
		k.convPar = e.convPar
	}
	return k
}

// tokenGraph is one captured resident token.
type tokenGraph struct {
	g      *rt.Graph
	copies []graphCopy
}

// graphCopy is one stream copy of a captured token.
type graphCopy struct {
	kind rt.CopyKind
	dev  rt.DevPtr
	off  int // staging window offset
	n    int
}

// Graph modes of the token being submitted (Engine.gmode).
const (
	gPlain = iota
	gCapture
	gReplay
	gCheck // a graph launched before its walk, walked after (hostgap.go)
)

// maxGraphs bounds the captured variants kept (a decode loop needs two).
const maxGraphs = 8

// SetGraphAhead switches the ahead walk (above) on or off, for a comparison on one engine.
func (e *Engine) SetGraphAhead(on bool) {
	e.graphNoAhead = !on
}

// graphAhead walks the next token's graph (its likely variant: the same output, the other
// ids row unless SyncLookup, the conv state this token's left) as a replay at the next
// position, updating its nodes while this token's graph runs. Nothing if that variant
// was not captured yet.
func (e *Engine) graphAhead(wantLogits bool, idsOff int) error {
	st := e.stage()
	next := st.ids
	if e.deferLookup() && idsOff == st.ids {
		next = st.ids2
	}
	key := e.graphKeyOf(wantLogits, next)
	tg := e.graphs[key]
	if tg == nil || tg == e.gLast {
		return nil
	}
	t0 := time.Since(clockBase)
	before := e.stats.GraphUpdates
	e.gmode, e.gcur, e.gi, e.gc = gReplay, tg, 0, 0
	err := e.tokenOps(wantLogits, next)
	e.gmode, e.gcur = gPlain, nil
	e.stats.AheadUpdates += e.stats.GraphUpdates - before
	e.stats.AheadTime += time.Since(clockBase) - t0
	if err == nil && e.gi == tg.g.Kernels() && e.gc == len(tg.copies) {
		// current for the next position: the next step may launch it before its walk
		e.aheadTg, e.aheadPos, e.aheadN, e.aheadSet = tg, e.pos, e.argmaxN, e.launchSettings
	}
	return err
}

// useGraph reports whether this step's device work goes through a graph.
func (e *Engine) useGraph() bool {
	return e.graphOn && e.graphErr == nil && e.oneSync() && !e.plain && !e.ktimes && !e.hostKV
}

// SetGraph switches graph replay of resident tokens on or off on a loaded engine (the
// inverse of Options.NoGraph), for a comparison on one engine; off releases the graphs.
func (e *Engine) SetGraph(on bool) error {
	e.graphOn = on
	if !on {
		return e.dropGraphs()
	}
	return nil
}

// GraphErr is why graph replay stopped (nil while it runs or was never tried).
func (e *Engine) GraphErr() error { return e.graphErr }

func (e *Engine) dropGraphs() error {
	e.aheadTg, e.verifyTg = nil, nil // the graphs they point at are destroyed
	var errs []error
	for k, tg := range e.graphs {
		errs = append(errs, tg.g.Destroy())
		delete(e.graphs, k)
	}
	return errors.Join(errs...)
}

// graphToken submits the token's device work (tokenOps) as a graph: replayed when this
// variant was captured, else captured now and launched. A capture that fails without a
// device fault turns graphs off and submits the token plainly (nothing of it ran).
func (e *Engine) graphToken(wantLogits bool, idsOff int) error {
	key := e.graphKeyOf(wantLogits, idsOff)
	t0 := time.Since(clockBase)
	defer func() { e.stats.GraphTime += time.Since(clockBase) - t0 }()
	tg := e.graphs[key]
	if launched, err := e.launchAhead(tg); launched {
		return err
	}
	if tg == nil {
		var err error
		if tg, err = e.captureToken(wantLogits, idsOff); err != nil {
			if errors.Is(err, rt.ErrDeviceFault) {
				return err
			}
			e.graphErr = fmt.Errorf("model/gpu: graph capture: %w", err)
			if err := e.tokenStart(); err != nil {
				return err
			}
			return e.tokenOps(wantLogits, idsOff)
		}
		if len(e.graphs) >= maxGraphs {
			if err := e.dropGraphs(); err != nil {
				return err
			}
		}
		e.graphs[key] = tg
		e.stats.Captures++
	} else {
		e.gmode, e.gcur, e.gi, e.gc = gReplay, tg, 0, 0
		err := e.tokenOps(wantLogits, idsOff)
		e.gmode, e.gcur = gPlain, nil
		if err != nil {
			return err
		}
		if e.gi != tg.g.Kernels() || e.gc != len(tg.copies) {
			return fmt.Errorf("model/gpu: graph replay made %d launches and %d copies, the capture %d and %d", e.gi, e.gc, tg.g.Kernels(), len(tg.copies))
		}
	}
	e.stats.Graphs++
	e.gLast = tg
	if err := e.tokenStart(); err != nil {
		return err
	}
	return tg.g.Launch()
}

// captureToken captures tokenOps into a graph (nothing runs).
func (e *Engine) captureToken(wantLogits bool, idsOff int) (*tokenGraph, error) {
	if err := e.ln.BeginCapture(); err != nil {
		return nil, err
	}
	tg := &tokenGraph{}
	e.gmode, e.gcur = gCapture, tg
	err := e.tokenOps(wantLogits, idsOff)
	e.gmode, e.gcur = gPlain, nil
	g, cerr := e.ln.EndCapture()
	if err = errors.Join(err, cerr); err != nil {
		if g != nil {
			err = errors.Join(err, g.Destroy())
		}
		return nil, err
	}
	tg.g = g
	return tg, nil
}

// graphCopy records (capture) or checks (replay) a copy of the token; replay reports
// true when the copy must not be queued.
func (e *Engine) graphCopy(kind rt.CopyKind, dev rt.DevPtr, off, n int) (skip bool, err error) {
	c := graphCopy{kind: kind, dev: dev, off: off, n: n}
	switch e.gmode {
	case gCapture:
		e.gcur.copies = append(e.gcur.copies, c)
	case gReplay, gCheck:
		if e.gc >= len(e.gcur.copies) || e.gcur.copies[e.gc] != c {
			return true, fmt.Errorf("model/gpu: graph replay: copy %d (%+v) is not the captured one", e.gc, c)
		}
		e.gc++
		return true, nil
	}
	return false, nil
}

// stageUp queues n bytes of the staging window at off to dst on the compute stream
// (through the token's graph when one is being captured or replayed).
func (e *Engine) stageUp(dst rt.DevPtr, off, n int) error {
	if skip, err := e.graphCopy(rt.HostToDevice, dst, off, n); skip || err != nil {
		return err
	}
	return e.compute.Upload(dst, e.staging, off, n)
}

// stageDown queues n bytes from src to the staging window at off on the compute stream
// (through the token's graph when one is being captured or replayed).
func (e *Engine) stageDown(off int, src rt.DevPtr, n int) error {
	if skip, err := e.graphCopy(rt.DeviceToHost, src, off, n); skip || err != nil {
		return err
	}
	return e.compute.Download(e.staging, off, src, n)
}
