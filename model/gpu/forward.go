package gpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime/debug"
	"time"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/model"
	"github.com/strata-hip/strata/quant"
	rt "github.com/strata-hip/strata/runtime/gpu"
)

// Forward feeds tokens after those already processed, one at a time through the decode
// path, and returns the logits after the last one (a fresh slice).
func (e *Engine) Forward(tokens []int32) (logits []float32, err error) {
	if err := e.forward(tokens, outLogits); err != nil {
		return nil, err
	}
	out := make([]float32, e.vocab)
	e.readLogits(out)
	return out, nil
}

// ForwardArgmax is Forward for greedy decoding: it feeds tokens and returns the index of
// the largest of the first n logits after the last one — the lowest index among equal
// maxima; NaN never wins; 0 when all are −Inf or NaN: model.Sampler's greedy choice. The
// choice is made on the GPU (sample/argmax), so 4 bytes come back instead of the whole
// vocabulary; LastLogits still gives the logits when the caller needs them after all.
// n < vocab leaves out a tail of ids (a padded vocabulary's unused rows).
func (e *Engine) ForwardArgmax(tokens []int32, n int) (int32, error) {
	if n <= 0 || n > e.vocab {
		return 0, fmt.Errorf("model/gpu: argmax over %d logits of a vocabulary of %d", n, e.vocab)
	}
	e.argmaxN = n
	if err := e.forward(tokens, outArgmax); err != nil {
		return 0, err
	}
	b := e.staging.Bytes()[e.stage().tok:]
	id := int32(binary.LittleEndian.Uint32(b))
	if id < 0 || int(id) >= n {
		e.fault = fmt.Errorf("model/gpu: sample/argmax returned token %d of %d (a kernel fault?)", id, n)
		return 0, e.fault
	}
	return id, nil
}

// LastLogits returns the logits after the last token processed (by Forward or
// ForwardArgmax), copied from the device now, in a buffer the engine reuses (valid until
// the next call).
func (e *Engine) LastLogits() ([]float32, error) {
	if e.fault != nil {
		return nil, e.fault
	}
	if e.pos == 0 {
		return nil, fmt.Errorf("model/gpu: no token processed yet")
	}
	st := e.stage()
	if err := e.compute.Download(e.staging, st.logits, e.mem.Ptr(bufLogits), 4*e.vocab); err != nil {
		e.fault = err
		return nil, err
	}
	if err := e.sync(); err != nil {
		e.fault = err
		return nil, err
	}
	if len(e.logitBuf) != e.vocab {
		e.logitBuf = make([]float32, e.vocab)
	}
	e.readLogits(e.logitBuf)
	return e.logitBuf, nil
}

// readLogits converts the logits in the staging window into out.
func (e *Engine) readLogits(out []float32) {
	b := e.staging.Bytes()[e.stage().logits:]
	if v := f32View(b, len(out)); v != nil {
		copy(out, v)
		return
	}
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

// forward runs tokens; the last one's output goes where mode says (Engine.outMode).
func (e *Engine) forward(tokens []int32, mode int) (err error) {
	if e.fault != nil {
		return e.fault
	}
	e.outMode = mode
	if len(tokens) == 0 {
		return fmt.Errorf("model/gpu: no tokens to process")
	}
	if !e.plain {
		// One binding of the device for every launch of these tokens.
		if err := e.ln.Begin(); err != nil {
			return err
		}
		defer e.ln.End()
	}
	if e.pos+len(tokens) > e.ctx {
		return fmt.Errorf("model/gpu: %d tokens after %d would exceed the context of %d (raise -c/--ctx-size)", len(tokens), e.pos, e.ctx)
	}
	// Embedding rows are read from the model's mapping: a fault there is an error.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(interface{ Addr() uintptr })
			if !ok {
				panic(r)
			}
			e.fault = fmt.Errorf("%s: memory fault reading the model at %#x (file truncated or replaced?): %v", e.src.Path(), f.Addr(), r)
			err = e.fault
		}
	}()
	for _, id := range tokens {
		if id < 0 || int(id) >= e.vocab {
			return fmt.Errorf("model/gpu: token id %d is outside the vocabulary of %d", id, e.vocab)
		}
	}
	if e.pendingIDs >= 0 && e.batched(len(tokens)) { // the batched path looks experts up itself: keep the order of uses
		if err := e.lookupPending(); err != nil {
			e.fault = err
			return err
		}
	}
	if e.batched(len(tokens)) { // it also copies into slots itself: no promotion in flight
		if err := e.settle(); err != nil {
			e.fault = err
			return err
		}
	}
	for done := 0; e.batched(len(tokens)) && done < len(tokens); {
		n := min(e.chunk, len(tokens)-done)
		t0 := time.Now()
		if err := e.chunkForward(tokens[done:done+n], done+n == len(tokens)); err != nil {
			e.fault = err
			return err
		}
		e.stats.Wall += time.Since(t0)
		e.stats.Tokens += n
		done += n
		if done == len(tokens) {
			tokens = nil
		}
	}
	for i, id := range tokens {
		t0 := time.Now()
		if err := e.step(id, i == len(tokens)-1); err != nil {
			// A failure mid-token leaves the KV cache and state partial: refuse further use.
			e.fault = err
			return err
		}
		e.stats.Wall += time.Since(t0)
		e.stats.Tokens++
	}
	return nil
}

// step runs one token; with wantLogits the logits land in the staging window. The host
// time of its phases goes to Stats.Phases (hostgap.go).
func (e *Engine) step(id int32, wantLogits bool) error {
	ph := &e.stats.Phases
	t0 := time.Since(clockBase)
	if e.stepEnd != 0 {
		ph.Between += t0 - e.stepEnd
	}
	ph.Steps++
	mark := func(d *time.Duration) {
		t := time.Since(clockBase)
		*d += t - t0
		t0 = t
	}
	defer func() { e.stepEnd = time.Since(clockBase) }()
	st := e.stage()
	hb := e.staging.Bytes()
	// Embedding row (host gather) and position.
	if row := f32View(hb[st.x:], e.emb.Cols()); row != nil {
		e.emb.Row(row, int(id))
	} else {
		row := make([]float32, e.emb.Cols())
		e.emb.Row(row, int(id))
		copy(hb[st.x:], f32Bytes(row))
	}
	binary.LittleEndian.PutUint32(hb[st.pos:], uint32(e.pos))
	mark(&ph.Embed)
	// Resident: every layer's ids in one download after the token, into the staging row
	// the previous token's pending lookup does not read.
	idsOff := st.ids
	if e.deferLookup() && e.pendingIDs == st.ids {
		idsOff = st.ids2
	}
	if e.mapped && !e.resident { // the tables this token reads: every upload so far precedes it
		copy(e.vramAt[idsOff], e.vram)
		e.aheadRan[idsOff] = 0
		if e.aheadOn() {
			e.aheadRan[idsOff] = e.aheadCopies()
		}
		if err := e.landSubmit(idsOff); err != nil {
			return err
		}
	}
	mark(&ph.Tables)
	var err error
	graph := e.useGraph()
	if graph {
		err = e.graphToken(wantLogits, idsOff)
	} else {
		if err = e.tokenStart(); err == nil {
			err = e.tokenOps(wantLogits, idsOff)
		}
	}
	if err == nil {
		err = e.tokenMark(1)
	}
	if err == nil && e.lateBatch { // SetLateBatch: the batch promote held back, after this launch
		err = e.issueLate()
	}
	if err != nil {
		return err
	}
	mark(&ph.Submit)
	if err := e.probeStart(); err != nil {
		return err
	}
	mark(&ph.StartLag)
	if e.verifyTg != nil { // launched before its walk: walk it now, at its own position, in check mode
		if err := e.checkLaunched(wantLogits, idsOff); err != nil {
			return err
		}
	}
	mark(&ph.Check)
	e.pos++
	e.convPar ^= 1
	if !e.oneSync() {
		if wantLogits {
			if err := e.sync(); err != nil {
				return err
			}
		}
		mark(&ph.Sync)
		e.cache.Step()
		// Without logits, keep the stream short: the next token's host work needs nothing
		// from this one.
		err := e.finishCopies()
		mark(&ph.After)
		return err
	}
	// The previous token's lookup while this token's kernels run (the GPU is busy; after
	// the sync it would wait for the host).
	if e.pendingIDs >= 0 {
		if err := e.lookupPending(); err != nil {
			return err
		}
	}
	mark(&ph.Lookup)
	if graph && !e.graphNoAhead && e.graphErr == nil {
		if err := e.graphAhead(wantLogits, idsOff); err != nil {
			return err
		}
	}
	mark(&ph.Ahead)
	if err := e.tokenMark(2); err != nil {
		return err
	}
	if err := e.tokenSync(); err != nil {
		return err
	}
	if err := e.probeBatch(); err != nil {
		return err
	}
	if err := e.tokenRead(); err != nil {
		return err
	}
	mark(&ph.Sync)
	e.pendingIDs = idsOff
	if e.syncLookup {
		if err := e.lookupPending(); err != nil {
			return err
		}
	}
	if !e.resident { // mapped misses: promotions stay in flight across tokens (mapped.go)
		mark(&ph.After)
		return nil
	}
	err = e.finishCopies()
	mark(&ph.After)
	return err
}

// tokenOps queues one token's device work on the compute stream, from the embedding row
// and position in the staging window (step wrote them) to the ids download (resident,
// to idsOff) and, with wantLogits, the output. Resident, it is the same sequence for every
// token but for launch arguments and grids (graph.go replays it).
func (e *Engine) tokenOps(wantLogits bool, idsOff int) error {
	c := &e.cfg
	H := c.Embd
	st := e.stage()
	m := e.mem
	x, xn, xq, proj := m.Ptr(bufX), m.Ptr(bufXN), m.Ptr(bufXQ), m.Ptr(bufProj)
	if err := e.stageUp(x, st.x, 4*H); err != nil {
		return err
	}
	if err := e.stageUp(m.Ptr(bufPos), st.pos, 4); err != nil {
		return err
	}
	for li := range e.layers {
		l := &e.layers[li]
		// Mixer input: the residual (after the previous layer's MoE output) normed.
		var err error
		if li == 0 {
			err = e.rmsnorm("q81", abi.RmsnormArgs{X: uint64(x), W: uint64(l.attnNorm), Y: uint64(xn), Q: uint64(xq),
				N: int32(H), Rows: 1, Heads: 1, TokStride: int32(H), HeadStride: int32(H)})
		} else {
			err = e.rmsnorm("addq81", abi.RmsnormArgs{X: uint64(x), R: uint64(proj), Xo: uint64(x), W: uint64(l.attnNorm), Y: uint64(xn), Q: uint64(xq),
				N: int32(H), Rows: 1, Heads: 1, TokStride: int32(H), HeadStride: int32(H)})
		}
		if err != nil {
			return err
		}
		if l.recurrent {
			err = e.deltaNet(l)
		} else {
			err = e.attention(l)
		}
		if err != nil {
			return err
		}
		if err := e.rmsnorm("addq81", abi.RmsnormArgs{X: uint64(x), R: uint64(proj), Xo: uint64(x), W: uint64(l.ffnNorm), Y: uint64(xn), Q: uint64(xq),
			N: int32(H), Rows: 1, Heads: 1, TokStride: int32(H), HeadStride: int32(H)}); err != nil {
			return err
		}
		if err := e.moe(li, l); err != nil {
			return err
		}
		if l.shGate.variant != "" {
			// qwen3next's gated shared expert, added to the residual now (the routed
			// experts' output in proj is added by the next norm): sigmoid(g)·shared(x) is
			// moe_decode over two experts with logits [g, 0] — softmax gives the shared
			// expert sigmoid(g) — where the second has no slot and contributes nothing.
			if err := e.sharedBranch(l); err != nil {
				return err
			}
		}
	}
	if e.oneSync() {
		if err := e.stageDown(idsOff, m.Ptr(bufIDs), 4*c.ExpertsUsed*c.Layers); err != nil {
			return err
		}
		if e.aheadOn() { // the predictions, for the stats (ahead.go aheadCount)
			if err := e.stageDown(e.aheadStage(idsOff), m.Ptr(bufAheadIDs), 4*c.ExpertsUsed*c.Layers); err != nil {
				return err
			}
		}
	}
	if wantLogits {
		return e.logits("addq81", abi.RmsnormArgs{X: uint64(x), R: uint64(proj), Xo: uint64(x), W: uint64(e.outNrm), Y: uint64(xn), Q: uint64(xq),
			N: int32(H), Rows: 1, Heads: 1, TokStride: int32(H), HeadStride: int32(H)})
	}
	return nil
}

// oneSync: a token needs no host look-up between its layers (resident, or mapped misses)
// and synchronises once, after its last layer.
func (e *Engine) oneSync() bool { return e.resident || e.mapped }

// deferLookup: a token's lookup waits until the next token's kernels are submitted (unless
// SyncLookup).
func (e *Engine) deferLookup() bool { return e.oneSync() && !e.syncLookup }

// lookupPending makes the pending resident lookup and advances the cache's step, as the
// per-layer path does after a token; with mapped misses it is promote (mapped.go).
func (e *Engine) lookupPending() error {
	off := e.pendingIDs
	e.pendingIDs = -1
	if !e.resident {
		return e.promote(off)
	}
	if err := e.lookupResident(off); err != nil {
		return err
	}
	e.cache.Step()
	return nil
}

// lookupResident counts a token's expert uses (every one a hit) from its ids in the
// staging window at off, once they are on the host: the policy's use counts stay what
// the per-layer path would make them.
func (e *Engine) lookupResident(off int) error {
	for li := range e.layers {
		ids, err := e.readIDs(li, off+4*e.cfg.ExpertsUsed*li, e.idsBuf)
		if err != nil {
			return err
		}
		var misses []Miss
		e.slotBuf, misses, err = e.cache.Lookup(li, ids, e.slotBuf, nil)
		if err != nil {
			return err
		}
		if len(misses) > 0 { // every expert was placed at load and nothing evicts
			return fmt.Errorf("model/gpu: layer %d: %d experts missing from a cache that holds them all", li, len(misses))
		}
		e.stats.Hits += int64(len(ids))
	}
	return nil
}

// readIDs reads K expert ids of layer li from the staging window at off, checked, into
// dst (len K) or, when dst is nil, a new slice.
func (e *Engine) readIDs(li, off int, dst []int) ([]int, error) {
	K, E := e.cfg.ExpertsUsed, e.cfg.Experts
	hb := e.staging.Bytes()
	ids := dst
	if ids == nil {
		ids = make([]int, K)
	}
	for j := range ids {
		ids[j] = int(int32(binary.LittleEndian.Uint32(hb[off+4*j:])))
		if ids[j] < 0 || ids[j] >= E {
			return nil, fmt.Errorf("model/gpu: layer %d: router picked expert %d of %d (a kernel fault?)", li, ids[j], E)
		}
	}
	return ids, nil
}

func (e *Engine) finishCopies() error {
	ms, err := e.copier.Finish()
	e.ringNext = 0
	e.stats.CopyMs += ms
	return err
}

// logits runs the output norm (variant, a: its Y and Q are the bufXN and bufXQ rows the head
// reads), the output head, and the logits' download into the staging window.
func (e *Engine) logits(variant string, a abi.RmsnormArgs) error {
	if err := e.rmsnorm(variant, a); err != nil {
		return err
	}
	m := e.mem
	if err := e.mmvq(e.head, m.Ptr(bufXQ), m.Ptr(bufXN), m.Ptr(bufLogits)); err != nil {
		return err
	}
	if e.outMode == outArgmax {
		a := abi.SampleArgs{Logits: uint64(m.Ptr(bufLogits)), Out: uint64(m.Ptr(bufToken)), N: int32(e.argmaxN), Stride: int32(e.vocab)}
		if e.argmax1 {
			if err := e.launchK(e.kArgmax, dim(1), abi.SampleThreads, rt.Args(&a)); err != nil {
				return err
			}
		} else {
			// argmaxp's per-block bests sit in bufToken after the token (layout.go).
			parts := argmaxParts(e.argmaxN)
			a.Part, a.Parts = uint64(m.Ptr(bufToken))+argmaxPartOff, int32(parts)
			if err := e.launchK(e.kArgmaxP, rt.Dim3{X: uint32(parts), Y: 1, Z: 1}, abi.SampleThreads, rt.Args(&a)); err != nil {
				return err
			}
			if err := e.launchK(e.kArgmaxF, dim(1), abi.SampleThreads, rt.Args(&a)); err != nil {
				return err
			}
		}
		return e.stageDown(e.stage().tok, m.Ptr(bufToken), 4)
	}
	return e.stageDown(e.stage().logits, m.Ptr(bufLogits), 4*e.vocab)
}

// appendKV writes this token's key and value into the layer's f16 cache at e.pos: the
// f32 values come to the host, are rounded to f16 (round to nearest even, as the GPU's
// conversion) and go back, a stream synchronisation per attention layer: the first
// engine's path, kept as Options.HostKV to measure against attention_decode's store stage.
func (e *Engine) appendKV(l *gLayer, k, v rt.DevPtr, ctx int) error {
	st := e.stage()
	kvd := e.kvd
	if err := e.compute.Download(e.staging, st.kvf, k, 4*kvd); err != nil {
		return err
	}
	if err := e.compute.Download(e.staging, st.kvf+4*kvd, v, 4*kvd); err != nil {
		return err
	}
	if err := e.sync(); err != nil {
		return err
	}
	hb := e.staging.Bytes()
	for i := 0; i < 2*kvd; i++ {
		f := math.Float32frombits(binary.LittleEndian.Uint32(hb[st.kvf+4*i:]))
		binary.LittleEndian.PutUint16(hb[st.kvh+2*i:], quant.F32ToF16(f))
	}
	off := uintptr(e.pos * kvd * 2)
	if err := e.compute.Upload(l.kv.Add(off), e.staging, st.kvh, 2*kvd); err != nil {
		return err
	}
	return e.compute.Upload(l.kv.Add(uintptr(ctx*kvd*2)+off), e.staging, st.kvh+2*kvd, 2*kvd)
}

// experts brings the experts layer li selected into slots: it reads the ids phase 0
// wrote, looks them up, copies the misses (grouped, one event per group), makes the
// compute stream wait for the groups and uploads the layer's slot tables when they
// changed. With prefetch it then copies the experts phase 0 predicted for layer li+1
// (from this layer's hidden state) that are not resident, without making the compute
// stream wait: they arrive while this layer's experts and the next layer's mixer run.
// rerun reports that the tables changed, so phase 0 must run again for its err flags.
func (e *Engine) experts(li int) (rerun bool, err error) {
	c := &e.cfg
	K := c.ExpertsUsed
	st := e.stage()
	predict := e.prefetch && li+1 < c.Layers
	if err := e.compute.Download(e.staging, st.idsOf(li, K), e.mem.Ptr(bufIDs).Add(uintptr(4*K*li)), 4*K); err != nil {
		return false, err
	}
	if predict {
		if err := e.compute.Download(e.staging, st.idsP, e.mem.Ptr(bufIDsP), 4*K); err != nil {
			return false, err
		}
	}
	if err := e.sync(); err != nil {
		return false, err
	}
	// The previous batch is complete (the compute stream waited for it and is idle now).
	if err := e.finishCopies(); err != nil {
		return false, err
	}
	read := func(off int) ([]int, error) { return e.readIDs(li, off, nil) }
	ids, err := read(st.idsOf(li, K))
	if err != nil {
		return false, err
	}
	_, misses, err := e.cache.Lookup(li, ids, nil, nil)
	if err != nil {
		return false, err
	}
	e.stats.Hits += int64(len(ids) - len(misses))
	e.stats.Misses += int64(len(misses))
	for _, id := range ids {
		k := Key{int32(li), int32(id)}
		if e.predicted[k] {
			e.stats.PrefetchUsed++
			delete(e.predicted, k)
		}
	}
	if len(misses) > 0 {
		groups, err := e.copier.Issue(e.place(li, misses))
		if err != nil {
			return false, err
		}
		e.stats.Groups += int64(len(groups))
		if err := e.copier.Wait(e.compute, groups); err != nil {
			return false, err
		}
	}
	rerun = e.dirty[li]
	if err := e.uploadTables(li); err != nil {
		return false, err
	}
	if predict {
		pred, err := read(st.idsP)
		if err != nil {
			return false, err
		}
		cur := map[Key]bool{}
		for _, id := range ids {
			cur[Key{int32(li), int32(id)}] = true
		}
		if e.ring > 0 { // the ring holds this batch's misses and at most the rest
			pred = pred[:min(len(pred), e.ring-e.ringNext)]
		}
		fetched := e.cache.Fetch(li+1, pred, func(k Key) bool { return cur[k] })
		for _, m := range fetched {
			e.predicted[m.Key] = true
		}
		e.stats.Prefetched += int64(len(fetched))
		groups, err := e.copier.Issue(e.place(li+1, fetched)) // not waited for: layer li+1 uploads its tables after Finish
		if err != nil {
			return false, err
		}
		e.stats.Groups += int64(len(groups))
	}
	return rerun, nil
}

// attention is the attention mixer of one layer: xn/xq in, the output projection in proj.
func (e *Engine) attention(l *gLayer) error {
	c := &e.cfg
	m := e.mem
	hd, nh, nkv, H := c.HeadDim, c.Heads, c.HeadsKV, c.Embd
	xn, xq, proj := m.Ptr(bufXN), m.Ptr(bufXQ), m.Ptr(bufProj)
	q, k, v := m.Ptr(bufQ), m.Ptr(bufK), m.Ptr(bufV)
	var gate rt.DevPtr
	// qwen3next in a capture (attnBranches): q, gate and k|v are three branches from the
	// norm's launch, joined before prep.
	br := c.Arch == model.ArchQwen3Next && e.attnBranches()
	norm, ends := e.ln.CaptureLen()-1, []int(nil)
	fork := func() error {
		if !br {
			return nil
		}
		if len(ends) == 0 { // the first group follows the norm on the stream
			return nil
		}
		return e.ln.CaptureFork(norm, e.attnBr == BranchPlain)
	}
	end := func() {
		if br {
			ends = append(ends, e.ln.CaptureLen()-1)
		}
	}
	if c.Arch == model.ArchQwen3Next {
		// attn_q interleaves per head hd query rows and hd gate rows: two launches of nh
		// matrices each, every other block of rows, make q and gate contiguous.
		gate = m.Ptr(bufGate)
		rb, err := l.wq.typ.RowBytes(H)
		if err != nil {
			return err
		}
		for i, dst := range []rt.DevPtr{q, gate} {
			w := dmat{ptr: l.wq.ptr.Add(uintptr(i * hd * rb)), typ: l.wq.typ, variant: l.wq.variant, rows: hd, k: H}
			if err := fork(); err != nil {
				return err
			}
			if err := e.mmvqMats(w, nh, int64(2*hd*rb), hd, xq, xn, dst); err != nil {
				return err
			}
			end()
		}
		if err := fork(); err != nil {
			return err
		}
	}
	// q, k and v: one launch when stored fused (q|k|v, or qwen3next's k|v), into
	// consecutive buffers.
	switch {
	case l.fusedIn && c.Arch == model.ArchQwen3Next:
		v = k.Add(uintptr(4 * e.kvd))
		if err := e.mmvq(l.in, xq, xn, k); err != nil {
			return err
		}
	case l.fusedIn:
		k, v = q.Add(uintptr(4*e.qd)), q.Add(uintptr(4*(e.qd+e.kvd)))
		if err := e.mmvq(l.in, xq, xn, q); err != nil {
			return err
		}
	default:
		ps := []struct {
			w   dmat
			dst rt.DevPtr
		}{{l.wq, q}, {l.wk, k}, {l.wv, v}}
		if c.Arch == model.ArchQwen3Next {
			ps = ps[1:]
		}
		for _, p := range ps {
			if err := e.mmvq(p.w, xq, xn, p.dst); err != nil {
				return err
			}
		}
	}
	if br { // prep waits for k|v (the stream's last launch), q and gate
		for _, i := range ends {
			if err := e.ln.CaptureJoin(i, e.attnBr == BranchPlain); err != nil {
				return err
			}
		}
	}
	vcache := l.kv.Add(uintptr(e.ctx * e.kvd * 2))
	prep := e.attnPrep()
	if prep {
		// q and k normed per head and rotated, k and v stored at the position bufPos holds:
		// one launch for attnInputs' four (five where q and k are not adjacent: two ropes);
		// its arguments stay the same from token to token.
		pa := abi.AttentionDecodeArgs{Q: uint64(q), K: uint64(l.kv), V: uint64(vcache), Kn: uint64(k), Vn: uint64(v),
			Qw: uint64(l.qNorm), Kw: uint64(l.kNorm), Pos: uint64(m.Ptr(bufPos)), Freq: uint64(m.Ptr(bufFreq)),
			Nh: int32(nh), Nkv: int32(nkv), Hd: int32(hd), RotDims: int32(c.RopeDim), Eps: c.Eps}
		if err := e.launchK(e.kPrep, dim(blocks(nh+2*nkv, abi.AttentionDecodeThreads/32)), abi.AttentionDecodeThreads, rt.Args(&pa)); err != nil {
			return err
		}
	} else if err := e.attnInputs(l, q, k, v, vcache); err != nil {
		return err
	}
	n := e.pos + 1
	sl := splitLen(n, e.attnSplit, hd)
	nsplit := (n + sl - 1) / sl
	o := m.Ptr(bufO)
	a := abi.AttentionDecodeArgs{Q: uint64(q), K: uint64(l.kv), V: uint64(vcache), Gate: uint64(gate),
		Part: uint64(m.Ptr(bufPart)), Out: uint64(o), N: int32(n), Nh: int32(nh), Nkv: int32(nkv), Hd: int32(hd),
		SplitLen: int32(sl), Nsplit: int32(nsplit), Scale: float32(1 / math.Sqrt(float64(hd)))}
	// split: one block per (kv group, split) serving every q head of the group.
	if err := e.launchK(e.kSplit, rt.Dim3{X: uint32(nkv), Y: uint32(nsplit), Z: 1}, abi.AttentionDecodeThreads, rt.Args(&a)); err != nil {
		return err
	}
	if prep { // reduceq: o and its Q8_1 blocks, so wo needs no quantize_q8_1 launch
		oq := m.Ptr(bufOQ)
		a.Oq = uint64(oq)
		if err := e.launchK(e.kReduceQ, dim(uint32(nh)), abi.AttentionDecodeThreads, rt.Args(&a)); err != nil {
			return err
		}
		return e.mmvq(l.wo, oq, o, proj)
	}
	if err := e.launchK(e.kReduce, dim(uint32(nh)), abi.AttentionDecodeThreads, rt.Args(&a)); err != nil {
		return err
	}
	return e.project(l.wo, o, e.qd, proj)
}

// attnPrep: a decode token's attention inputs go through attention_decode's prep and its
// output through reduceq, unless Options.NoAttnPrep or HostKV (whose host append reads
// the f32 k that prep does not write back).
func (e *Engine) attnPrep() bool { return !e.noAttnPrep && !e.hostKV }

// SetAttnPrep sets Options.NoAttnPrep to !on on a loaded engine, between tokens, for a
// comparison on one engine (each path captures its own graphs: graphKey).
func (e *Engine) SetAttnPrep(on bool) {
	e.noAttnPrep = !on
}

// SetPDL sets Options.NoPDL to !on on a loaded engine, between tokens, for a comparison on
// one engine (each setting captures its own graphs: graphKey).
func (e *Engine) SetPDL(on bool) {
	e.noPDL = !on
}

// attnInputs is the path before prep: per-head q and k norms (rmsnorm f32), rope (one
// launch when q and k are adjacent, else two) and the store of k and v into the cache
// at e.pos (attention_decode's store, or the host append with HostKV).
func (e *Engine) attnInputs(l *gLayer, q, k, v, vcache rt.DevPtr) error {
	c := &e.cfg
	m := e.mem
	hd, nh, nkv := c.HeadDim, c.Heads, c.HeadsKV
	for _, p := range []struct {
		buf   rt.DevPtr
		w     rt.DevPtr
		heads int
	}{{q, l.qNorm, nh}, {k, l.kNorm, nkv}} {
		if err := e.rmsnorm("f32", abi.RmsnormArgs{X: uint64(p.buf), W: uint64(p.w), Y: uint64(p.buf),
			N: int32(hd), Rows: int32(p.heads), Heads: int32(p.heads), TokStride: int32(p.heads * hd), HeadStride: int32(hd)}); err != nil {
			return err
		}
	}
	rope := func(buf rt.DevPtr, heads int) error {
		a := abi.RopeArgs{X: uint64(buf), Pos: uint64(m.Ptr(bufPos)), Freq: uint64(m.Ptr(bufFreq)), Rows: int32(heads), Heads: int32(heads),
			TokStride: int32(heads * hd), HeadStride: int32(hd), RotDims: int32(c.RopeDim)}
		return e.launchK(e.kRope, dim(blocks(heads*c.RopeDim/2, abi.RopeThreads)), abi.RopeThreads, rt.Args(&a))
	}
	if k == q.Add(uintptr(4*e.qd)) { // q and k adjacent: one rotation over both
		if err := rope(q, nh+nkv); err != nil {
			return err
		}
	} else {
		for _, p := range []struct {
			buf   rt.DevPtr
			heads int
		}{{q, nh}, {k, nkv}} {
			if err := rope(p.buf, p.heads); err != nil {
				return err
			}
		}
	}
	if e.hostKV {
		if err := e.appendKV(l, k, v, e.ctx); err != nil {
			return err
		}
	} else {
		sa := abi.AttentionDecodeArgs{K: uint64(l.kv), V: uint64(vcache), Kn: uint64(k), Vn: uint64(v), Nkv: int32(nkv), Hd: int32(hd),
			KvPos: int32(e.pos), KvRows: 1}
		if err := e.launchK(e.kStore, dim(blocks(nkv*hd, 64)), abi.AttentionDecodeThreads, rt.Args(&sa)); err != nil {
			return err
		}
	}
	return nil
}

// project quantizes the f32 vector o of n values to Q8_1 and multiplies it by w into dst.
func (e *Engine) project(w dmat, o rt.DevPtr, n int, dst rt.DevPtr) error {
	oq := e.mem.Ptr(bufOQ)
	qa := abi.QuantizeQ81Args{X: uint64(o), Y: uint64(oq), Ncols: int32(n), NcolsPadded: int32(n), Nrows: 1, XStride: int32(n)}
	if err := e.launchK(e.kQuant, dim(blocks(n, 256)), abi.QuantizeQ81Threads, rt.Args(&qa)); err != nil {
		return err
	}
	return e.mmvq(w, oq, o, dst)
}

// deltaNet is the gated delta-net mixer of one qwen3next layer: xn/xq in, proj out.
func (e *Engine) deltaNet(l *gLayer) error {
	c := &e.cfg
	m := e.mem
	xn, xq := m.Ptr(bufXN), m.Ptr(bufXQ)
	qkv, xc, z, ba, o := m.Ptr(bufQKV), m.Ptr(bufXC), m.Ptr(bufZ), m.Ptr(bufBA), m.Ptr(bufO)
	kd, vd := c.LinKHeads*c.LinKDim, c.LinVHeads*c.LinVDim
	C := 2*kd + vd
	if l.fusedIn { // q|k|v, z, b|a back to back in qkv
		z, ba = qkv.Add(uintptr(4*C)), qkv.Add(uintptr(4*(C+vd)))
		if err := e.mmvq(l.in, xq, xn, qkv); err != nil {
			return err
		}
	} else {
		for _, p := range []struct {
			w   dmat
			dst rt.DevPtr
		}{{l.wqkv, qkv}, {l.wz, z}, {l.wba, ba}} {
			if err := e.mmvq(p.w, xq, xn, p.dst); err != nil {
				return err
			}
		}
	}
	if e.gdnQ81() {
		// recurrentq: the recurrence (recurrent's bits) also writes o as the Q8_1 blocks
		// wout's mmvq reads, so no quantize_q8_1 launch sits between them.
		oq := m.Ptr(bufOQ)
		if err := e.gatedDeltaNetQ(l, qkv, xc, z, ba, o, oq); err != nil {
			return err
		}
		return e.mmvq(l.wout, oq, o, m.Ptr(bufProj))
	}
	if err := e.gatedDeltaNet(l, qkv, xc, z, ba, o, 1); err != nil {
		return err
	}
	return e.project(l.wout, o, vd, m.Ptr(bufProj))
}

// gdnQ81: the decode delta-net's output goes through recurrentq (its Q8_1 blocks written
// by the recurrence), unless Options.NoGdnQ81 or a value head whose width is not whole
// Q8_1 blocks.
func (e *Engine) gdnQ81() bool { return !e.noGdnQ81 && e.kRecQ != nil && e.cfg.LinVDim%32 == 0 }

// SetGdnQ81 sets Options.NoGdnQ81 to !on on a loaded engine, between tokens, for a
// comparison on one engine (each path captures its own graphs: graphKey).
func (e *Engine) SetGdnQ81(on bool) {
	e.noGdnQ81 = !on
}

// gatedDeltaNet runs layer l's conv and recurrent stage over T tokens (the decode step's
// one, or a prompt chunk's in order): q|k|v rows at qkv, z and b|a in, the conv output to
// xc, the gated output to o. The conv reads one of the layer's two conv states and writes
// the other: they alternate by call (convPar; every delta-net layer makes one call per
// step or chunk), so the next call reads what this one wrote. A chunk (T > 1) runs the
// recurrence as recsplit (a block per value head and 32 columns, o before the norm) then
// gnorm (the gated norm over the T·nv rows, in place), bitwise the same as recurrent,
// unless Options.OldDeltaNet.
func (e *Engine) gatedDeltaNet(l *gLayer, qkv, xc, z, ba, o rt.DevPtr, T int) error {
	return e.gdnLaunch(l, qkv, xc, z, ba, o, 0, T)
}

// gatedDeltaNetQ is gatedDeltaNet's decode step (T = 1) through recurrentq: o also as Q8_1
// blocks at oq.
func (e *Engine) gatedDeltaNetQ(l *gLayer, qkv, xc, z, ba, o, oq rt.DevPtr) error {
	return e.gdnLaunch(l, qkv, xc, z, ba, o, oq, 1)
}

// gdnLaunch is gatedDeltaNet, the recurrence through recurrentq when oq is set (T = 1).
func (e *Engine) gdnLaunch(l *gLayer, qkv, xc, z, ba, o, oq rt.DevPtr, T int) error {
	c := &e.cfg
	C := 2*c.LinKHeads*c.LinKDim + c.LinVHeads*c.LinVDim
	cs := uintptr(4 * (c.ConvKernel - 1) * C)
	in, out := l.state, l.state.Add(cs)
	if e.convPar == 1 {
		in, out = out, in
	}
	a := abi.GatedDeltaNetArgs{X: uint64(qkv), ConvW: uint64(l.conv), ConvIn: uint64(in), ConvOut: uint64(out), Xc: uint64(xc),
		Z: uint64(z), Ba: uint64(ba), SsmA: uint64(l.ssmA), DtBias: uint64(l.dtBias), State: uint64(l.state.Add(2 * cs)),
		NormW: uint64(l.ssmNorm), O: uint64(o), T: int32(T), C: int32(C), Nk: int32(c.LinKHeads), Nv: int32(c.LinVHeads),
		Dk: int32(c.LinKDim), Dv: int32(c.LinVDim), Eps: c.Eps, Oq: uint64(oq)}
	if err := e.launchK(e.kConv, rt.Dim3{X: blocks(C, abi.GatedDeltaNetThreads), Y: uint32(min(T, 65535)), Z: 1}, abi.GatedDeltaNetThreads, rt.Args(&a)); err != nil {
		return err
	}
	if T > 1 && !e.gdnOld {
		if err := e.launchK(e.kRecSplit, rt.Dim3{X: uint32(c.LinVHeads), Y: uint32((c.LinVDim + 31) / 32), Z: 1}, abi.GatedDeltaNetThreads, rt.Args(&a)); err != nil {
			return err
		}
		return e.launchK(e.kGNorm, dim(uint32((T*c.LinVHeads+3)/4)), abi.GatedDeltaNetThreads, rt.Args(&a))
	}
	k := e.kRec
	if oq != 0 {
		k = e.kRecQ
	}
	return e.launchK(k, dim(uint32(c.LinVHeads)), abi.GatedDeltaNetThreads, rt.Args(&a))
}

// BranchMode is how a decode graph runs work that does not depend on the launch before
// it (Options.SharedBranch, Options.AttnBranch).
type BranchMode int

// Branch modes (Options.SharedBranch, Options.AttnBranch).
const (
	BranchDep   BranchMode = iota // a branch of the graph, its launches programmatic where PDL is on
	BranchOff                     // on the one chain (the path before)
	BranchPlain                   // a branch, with full dependencies at its fork and join
)

// SetSharedBranch sets Options.SharedBranch on a loaded engine, between tokens, for a
// comparison on one engine (each mode captures its own graphs: graphKey).
func (e *Engine) SetSharedBranch(m BranchMode) {
	e.shBranch = m
}

// SetAttnBranch sets Options.AttnBranch likewise.
func (e *Engine) SetAttnBranch(m BranchMode) {
	e.attnBr = m
}

// attnBranches: this token is being captured, Options.AttnBranch is not BranchOff and the
// backend can branch.
func (e *Engine) attnBranches() bool {
	return e.gmode == gCapture && e.attnBr != BranchOff && e.ln.CanBranch() == nil
}

// sharedBranch runs shared (qwen3next's shared expert) after moe. In a capture, unless
// BranchOff or the backend cannot branch (HIP), it is captured as a branch: its
// launches depend on the router's launch (e.routerAt: its logits hold g, and xq was
// written before it) instead of the routed experts' phase 2, and the next work depends on
// both phase 2 and the branch's last launch, so the shared expert runs beside phases 3 and
// 2. The two touch disjoint memory: the branch reads xq, router[E] and the shared slot
// table and writes ids2, wts2, err2, hsh, shout, x and xn; phases 3 and 2 read router,
// the slot tables, xq, h, ids and wts and write ids, wts, err, h and proj, and neither
// reads what the other writes. Every kernel computes what it computed on the one chain,
// and the residual gets x + shared before the next norm adds proj, as before: the bits
// are the same. Replays keep the captured launch order (graph.go), so nothing else changes.
func (e *Engine) sharedBranch(l *gLayer) error {
	// Not with Options.Prefetch: its look-ahead router (moe) reads xn, which the branch's
	// norm writes, between the router's launch and phase 2.
	fork := e.gmode == gCapture && e.shBranch != BranchOff && !e.prefetch && e.ln.CanBranch() == nil
	if !fork {
		return e.shared(l)
	}
	plain := e.shBranch == BranchPlain
	p2 := e.ln.CaptureLen() - 1
	if e.routerAt < 0 || e.routerAt >= p2 {
		return fmt.Errorf("model/gpu: shared-expert branch: router launch %d, routed experts' last %d", e.routerAt, p2)
	}
	if err := e.ln.CaptureFork(e.routerAt, plain); err != nil {
		return err
	}
	e.shJoin = e.aheadAt // the look-ahead's mmvq reads xn, which the branch's norm writes (ahead.go)
	err := e.shared(l)
	e.shJoin = -1
	if err != nil {
		return err
	}
	return e.ln.CaptureJoin(p2, plain)
}

// shared runs qwen3next's gated shared expert on xn/xq and adds it to the residual.
func (e *Engine) shared(l *gLayer) error {
	c := &e.cfg
	m := e.mem
	H := c.Embd
	x, xn, xq := m.Ptr(bufX), m.Ptr(bufXN), m.Ptr(bufXQ)
	r2, out := m.Ptr(bufRouter2), m.Ptr(bufShOut)
	if l.fusedRouter { // the router's launch computed g after its logits
		r2 = m.Ptr(bufRouter).Add(uintptr(4 * c.Experts))
	} else if err := e.mmvq(l.shInp, xq, xn, r2); err != nil { // logit 0 = g; logit 1 stays 0
		return err
	}
	ma := abi.MoeDecodeArgs{Logits: uint64(r2), Ids: uint64(m.Ptr(bufIDs2)), Wts: uint64(m.Ptr(bufWts2)), Err: uint64(m.Ptr(bufErr2)),
		SlotsGate: uint64(l.shTab), SlotsUp: uint64(l.shTab.Add(16)), SlotsDown: uint64(l.shTab.Add(32)),
		X: uint64(xq), H: uint64(m.Ptr(bufHSh)), Y: uint64(out), Tokens: 1, NExpert: 2, KUsed: 2, NEmbd: int32(H), NFf: int32(c.SharedFF)}
	key := l.shKern
	// Phase 3 (router + gate/up in one launch), then 2: the shared expert's table never changes.
	for _, ph := range []struct {
		phase int32
		grid  rt.Dim3
	}{{3, rt.Dim3{X: uint32(c.SharedFF / 32), Y: 2, Z: 1}}, {2, dim(blocks(H, 8))}} {
		ma.Phase = ph.phase
		if err := e.launchK(key, ph.grid, abi.MoeDecodeThreads, rt.Args(&ma)); err != nil {
			return err
		}
	}
	if e.shJoin >= 0 {
		if err := e.ln.CaptureJoin(e.shJoin, false); err != nil {
			return err
		}
	}
	// x += shared; the norm the kernel also computes goes to xn, which nothing reads
	// again before the next layer's norm rewrites it.
	return e.rmsnorm("add", abi.RmsnormArgs{X: uint64(x), R: uint64(out), Xo: uint64(x), W: uint64(l.ffnNorm), Y: uint64(xn),
		N: int32(H), Rows: 1, Heads: 1, TokStride: int32(H), HeadStride: int32(H)})
}

// moe runs the routed experts of layer li on xq: router, top-k, the cache, and the
// expert products into proj.
func (e *Engine) moe(li int, l *gLayer) error {
	c := &e.cfg
	m := e.mem
	H, K, E, F := c.Embd, c.ExpertsUsed, c.Experts, c.ExpertFF
	xn, xq, proj := m.Ptr(bufXN), m.Ptr(bufXQ), m.Ptr(bufProj)
	router := m.Ptr(bufRouter)
	rw := l.router
	if l.fusedRouter { // + the shared expert's gate logit, at router[E] (shared reads it)
		rw = l.routerSh
	}
	if err := e.mmvq(rw, xq, xn, router); err != nil {
		return err
	}
	e.routerAt = e.ln.CaptureLen() - 1
	tab := e.moeTables(li)
	ma := abi.MoeDecodeArgs{Logits: uint64(router), Ids: uint64(m.Ptr(bufIDs).Add(uintptr(4 * K * li))), Wts: uint64(m.Ptr(bufWts)), Err: uint64(m.Ptr(bufErr)),
		SlotsGate: uint64(tab), SlotsUp: uint64(tab.Add(uintptr(E * 8))), SlotsDown: uint64(tab.Add(uintptr(2 * E * 8))),
		X: uint64(xq), H: uint64(m.Ptr(bufH)), Y: uint64(proj), Tokens: 1, NExpert: int32(E), KUsed: int32(K), NEmbd: int32(H), NFf: int32(F)}
	if c.NormTopK {
		ma.Renorm = 1
	}
	key := e.kMoe
	ma.Phase = 0
	// Every expert resident, or every miss readable from mapped host memory: no host
	// look-up between top-k and the experts, so phase 3 (router + gate/up in one launch)
	// replaces phases 0 and 1.
	if !e.oneSync() {
		if err := e.launchK(key, dim(1), abi.MoeDecodeThreads, rt.Args(&ma)); err != nil {
			return err
		}
	}
	if e.prefetch && li+1 < c.Layers {
		// The next layer's router on this layer's hidden state: a guess at its experts.
		nl := &e.layers[li+1]
		if err := e.mmvq(nl.router, xq, xn, m.Ptr(bufRouterP)); err != nil {
			return err
		}
		ntab := m.Ptr(bufTables).Add(uintptr((li + 1) * 3 * E * 8))
		pa := ma
		pa.Logits, pa.Ids, pa.Wts, pa.Err = uint64(m.Ptr(bufRouterP)), uint64(m.Ptr(bufIDsP)), uint64(m.Ptr(bufWtsP)), uint64(m.Ptr(bufErrP))
		pa.SlotsGate, pa.SlotsUp, pa.SlotsDown = uint64(ntab), uint64(ntab.Add(uintptr(E*8))), uint64(ntab.Add(uintptr(2*E*8)))
		if err := e.launchK(key, dim(1), abi.MoeDecodeThreads, rt.Args(&pa)); err != nil {
			return err
		}
	}
	var rerun bool
	if !e.oneSync() {
		var err error
		if rerun, err = e.experts(li); err != nil {
			return err
		}
	}
	if rerun { // phase 0 again: err flags against the updated tables (same ids)
		if err := e.launchK(key, dim(1), abi.MoeDecodeThreads, rt.Args(&ma)); err != nil {
			return err
		}
	}
	ma.Phase = 1
	if e.oneSync() {
		ma.Phase = 3
	}
	// The mapped look-ahead (ahead.go): layer li+1's prediction and fetch as a branch
	// beside this layer's experts; this layer's phase 3 waits for the fetch layer li-1
	// made for it.
	e.aheadAt = -1
	if e.aheadOn() {
		prev := e.fetchAt
		if li+1 < c.Layers {
			if err := e.ahead(li, ma); err != nil {
				return err
			}
		}
		if li > 0 && e.aheadCapture() {
			if err := e.ln.CaptureJoin(prev, false); err != nil {
				return err
			}
		}
	}
	if err := e.launchK(key, rt.Dim3{X: uint32(F / 32), Y: uint32(K), Z: 1}, abi.MoeDecodeThreads, rt.Args(&ma)); err != nil {
		return err
	}
	ma.Phase = 2
	if err := e.launchK(key, dim(blocks(H, 8)), abi.MoeDecodeThreads, rt.Args(&ma)); err != nil {
		return err
	}
	if e.aheadAt >= 0 && e.aheadCapture() {
		// the look-ahead's mmvq read xn, which the next norm rewrites (a shared-expert
		// branch replaces this with its own join, sharedBranch)
		return e.ln.CaptureJoin(e.aheadAt, false)
	}
	return nil
}

// place points layer's slot tables (host mirror) at the slots ms were given, clears the
// entries of the experts they evicted, marks the tables that changed dirty, and returns
// the copies that bring the experts in.
func (e *Engine) place(layer int, ms []Miss) []Copy {
	tables := e.staging.Bytes()[e.stage().tables:]
	cps := make([]Copy, len(ms))
	for i, m := range ms {
		if m.Evicted.Layer >= 0 {
			e.setSlot(tables, int(m.Evicted.Layer), int(m.Evicted.Expert), 0)
			e.dirty[m.Evicted.Layer] = true
			delete(e.predicted, m.Evicted)
		}
		e.setSlot(tables, layer, int(m.Key.Expert), e.mem.Slot(m.Slot))
		cps[i] = e.expertCopy(layer, int(m.Key.Expert), e.mem.Slot(m.Slot))
		e.stats.CopiedBytes += int64(e.slot.total)
	}
	e.dirty[layer] = e.dirty[layer] || len(ms) > 0
	return cps
}

// uploadTables copies layer l's slot tables from the host mirror to the device, on the
// compute stream, when they changed since the last upload.
func (e *Engine) uploadTables(l int) error {
	if !e.dirty[l] {
		return nil
	}
	n := 3 * e.cfg.Experts * 8
	if err := e.compute.Upload(e.mem.Ptr(bufTables).Add(uintptr(l*n)), e.staging, e.stage().tables+l*n, n); err != nil {
		return err
	}
	e.dirty[l] = false
	return nil
}

// uploadDirty uploads the slot tables of every layer whose host mirror changed.
func (e *Engine) uploadDirty() error {
	for l := range e.dirty {
		if err := e.uploadTables(l); err != nil {
			return err
		}
	}
	return nil
}

// setSlot writes expert's gate, up and down addresses in slot (0: not resident: null, or
// with mapped misses its host copy's device address) into the host mirror of layer's slot
// tables.
func (e *Engine) setSlot(tables []byte, layer, expert int, slot rt.DevPtr) {
	E := e.cfg.Experts
	base := layer * 3 * E * 8
	for j, off := range []uint64{e.slot.gate, e.slot.up, e.slot.down} {
		p := uint64(0)
		switch {
		case slot != 0:
			p = uint64(slot) + off
		case e.mapped:
			p = e.hostAddr(layer, expert) + off
		}
		binary.LittleEndian.PutUint64(tables[base+(j*E+expert)*8:], p)
	}
	if e.vram != nil {
		e.vram[layer*E+expert] = slot != 0
	}
}

// expertCopy is the copy that brings layer's expert into the slot at dst: from its place in
// the pinned copy of every expert, or — with a staging ring — from the ring slot it is
// first copied into on the CPU (the ring is free again after finishCopies).
func (e *Engine) expertCopy(layer, expert int, dst rt.DevPtr) Copy {
	if e.ring == 0 {
		off := (uint64(layer)*uint64(e.cfg.Experts) + uint64(expert)) * e.slot.total
		return Copy{Dst: dst, Off: int(off), N: int(e.slot.total)}
	}
	if e.ringNext >= e.ring {
		panic("model/gpu: staging ring overrun") // callers size batches to the ring
	}
	off := e.ringNext * int(e.slot.total)
	e.ringNext++
	ts := e.expT[layer]
	c := &e.cfg
	sz := [3]int{c.ExpertFF * ts[0].RowBytes, c.ExpertFF * ts[1].RowBytes, c.Embd * ts[2].RowBytes}
	ring := e.hostExp.Bytes()
	for j, o := range []uint64{e.slot.gate, e.slot.up, e.slot.down} {
		copy(ring[off+int(o):], ts[j].Data[expert*sz[j]:(expert+1)*sz[j]])
	}
	return Copy{Dst: dst, Off: off, N: int(e.slot.total)}
}
