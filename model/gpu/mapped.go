package gpu

import (
	"fmt"
	"math"

	rt "github.com/strata-hip/strata/runtime/gpu"
)

// Mapped misses (Options.Misses: MissMap, or MissAuto where it works). Every expert sits in
// pinned host memory that the device can read through an alias (hostDev), and the slot
// tables always hold a readable address for every expert: its VRAM slot when it has one
// whose copy is known complete, else its place in host memory. So no layer waits for the
// host: a token runs as a resident one does (phase 3 + 2, its ids downloaded once after the
// last layer, one sync, the replayed graph), and the kernels read the experts that miss
// over the bus. The bytes a kernel reads for an expert are the same wherever they sit, so
// the logits are those of the resident run, bit for bit.
//
// The cache still promotes. A token's ids come back with its one download, and its lookup
// (promote) runs as the resident lookup does: while the next token's kernels run (after
// that token's graph is launched; at once after the sync with SyncLookup). It tells the
// policy of every use, counts hits (experts the token read from VRAM: the tables as they
// stood when it was submitted, vramAt) and misses, and places (at most MapPromote per
// token, and none while the copies of an earlier token are pending) missed experts into
// free or evicted slots. So when promote(t) runs, token t+1 may
// be on the GPU reading the tables as they were. The order that keeps every kernel reading
// the bytes of the expert its table entry names:
//
//  1. An evicted expert's entries go back to its host address in the host mirror of the
//     tables at once; a newly placed expert's entries stay at its host address.
//  2. The changed tables are uploaded on the compute stream, after the kernels already
//     queued there (token t+1's), and an event (tablesEv) is recorded after the upload; the
//     copy stream waits for that event before the batch's copies. So a slot is overwritten
//     only after every kernel that could read it through an evicted expert's old entry has
//     finished, and the kernels queued after the upload read the expert from host memory.
//     By default (SetLateBatch, hostgap.go; Options.EarlyBatch: at once) the batch is
//     issued only after the next token's launch: its copies still wait for tablesEv, and the
//     token launched before them reads the tables uploaded before it, in which no entry
//     points into a slot being copied (evicted experts point at host memory, placed ones
//     not yet at their slot).
//  3. A promotion's entries are pointed at its slot only by a later promote that has seen
//     the event of the copy's group complete (Event.Done); that upload, like every upload,
//     runs before the kernels queued after it, so no kernel reads a slot before its bytes.
//
// In-flight promotions are kept by slot (promoting): placing another expert into a slot
// replaces its record, so a record commits only when the last copy into its slot is done
// (copies into one slot run in order on the copy stream). The copier's events go back to
// its pool (Finish) only when none of its groups is pending, so no record holds a reused
// event. The host mirror is written only by promote (and the batched path, after settle),
// which runs after the sync of the token before, which waited for the previous upload from
// the mirror: an upload never reads a mirror being rewritten.

// MissMode is how the engine reads an expert that has no VRAM slot (Options.Misses).
type MissMode int

// Miss modes. The zero value is the default.
const (
	// MissAuto maps (MissMap) when something can miss, the device reports that it can map
	// pinned host memory (rt.DeviceInfo.CanMapHost: CUDA's CAN_MAP_HOST_MEMORY attribute,
	// HIP's hipDeviceAttributeCanMapHostMemory), look-ahead prefetch is off, and the mapped
	// pinning of every expert succeeds and its alias is proven (rt.HostBuffer.Mapped); else
	// it copies (MissCopy), and Engine.MissPath says why.
	MissAuto MissMode = iota
	// MissCopy copies each miss into a slot before its layer runs (a sync per layer).
	MissCopy
	// MissMap reads misses from mapped pinned host memory (this file's comment); Load
	// fails, saying why, where it cannot.
	MissMap
)

// String is the mode's name as strata-run's --expert-misses takes it.
func (m MissMode) String() string {
	switch m {
	case MissAuto:
		return "auto"
	case MissCopy:
		return "copy"
	case MissMap:
		return "map"
	}
	return fmt.Sprintf("MissMode(%d)", int(m))
}

// ParseMissMode reads "auto", "copy" or "map".
func ParseMissMode(s string) (MissMode, error) {
	for _, m := range []MissMode{MissAuto, MissCopy, MissMap} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("model/gpu: expert miss mode %q: want auto, copy or map", s)
}

// mapMisses says whether to pin the experts mapped (before they are pinned, after the
// plan): always for MissMap (Load has refused a device that cannot), never for MissCopy;
// for MissAuto when the plan leaves experts without a slot, prefetch is off and the device
// says it can map host memory; why is the reason MissAuto does not.
func (e *Engine) mapMisses(o Options) (bool, string) {
	switch o.Misses {
	case MissMap:
		return true, ""
	case MissCopy:
		return false, ""
	}
	info := e.dev.Info()
	switch {
	case e.plan.Slots >= e.cfg.Layers*e.cfg.Experts && !o.NoResident:
		return false, "every expert has a VRAM slot, so nothing misses"
	case o.Prefetch:
		return false, "look-ahead prefetch runs on the copy path only"
	case !info.CanMapHost:
		return false, fmt.Sprintf("%s (%s) reports that it cannot map pinned host memory", info.ID(), info.Name)
	}
	return true, ""
}

// pinMapped pins n bytes of host memory for the experts with a device alias and proves
// the alias. On success the engine maps (e.mapped, e.hostDev); when the buffer was pinned
// but its alias is not usable, the buffer stays as hostExp for the copy path (it is pinned
// memory all the same) and the error says why; when pinning failed nothing is kept.
func (e *Engine) pinMapped(n int) error {
	h, err := e.dev.HostAlloc(n, true)
	if err != nil {
		return fmt.Errorf("pinning every expert (%s) mapped failed: %w", mib(uint64(n)), err)
	}
	e.hostExp = h
	p, ok, aerr := h.Mapped()
	if !ok {
		return fmt.Errorf("the device cannot read the pinned experts through their mapping: %w", aerr)
	}
	e.mapped, e.hostDev = true, p
	return nil
}

// MissPath says how the loaded engine reads an expert that has no VRAM slot: "map" or
// "copy"; why is set when Options.Misses was MissAuto and the engine copies, and says why
// it does not map.
func (e *Engine) MissPath() (path, why string) {
	if e.mapped {
		return MissMap.String(), ""
	}
	return MissCopy.String(), e.missWhy
}

// missLine is the load's report of the miss path.
func (e *Engine) missLine() string {
	path, why := e.MissPath()
	switch {
	case e.mapped:
		return "expert misses: map (the kernels read experts without a VRAM slot from mapped pinned host memory)"
	case why != "":
		return "expert misses: copy (auto: " + why + ")"
	}
	return "expert misses: " + path
}

// promotion is an expert being copied into a slot; ev is its copy group's event (nil until
// the batch is issued).
type promotion struct {
	key Key
	ev  *rt.Event
}

// hostAddr is the device address of layer's expert in mapped host memory.
func (e *Engine) hostAddr(layer, expert int) uint64 {
	return uint64(e.hostDev) + (uint64(layer)*uint64(e.cfg.Experts)+uint64(expert))*e.slot.total
}

// promote makes a token's lookups from its ids in the staging window at off (the token
// has completed): hit and miss counts, the policy's uses, the commits of completed
// promotions and the next batch of promotions, in the order the comment above gives.
func (e *Engine) promote(off int) error {
	c := &e.cfg
	K := c.ExpertsUsed
	tables := e.staging.Bytes()[e.stage().tables:]
	admit := math.MaxInt
	if e.mapPromote > 0 {
		admit = e.mapPromote
	} else if e.mapPromote < 0 { // SetMapPromote(−1): none
		admit = 0
	}
	if e.landOn() && !e.landPromote { // land.go: landings are the promotions
		admit = 0
	}
	// Back-pressure: while copies of an earlier token are still pending, place nothing new
	// (uses are still counted), so the copy stream never holds more than one token's batch
	// and the copier's events return to its pool (recycleCopies) between batches.
	if err := e.issueLate(); err != nil { // SetLateBatch: one held back with no step since (a lookup before a prompt, ResetCache)
		return err
	}
	if e.lateWait { // SetLateBatch with wait: the batch issued after this step's launch (hostgap.go)
		if err := e.copier.WaitLast(); err != nil {
			return err
		}
	}
	if busy, err := e.copier.Pending(); err != nil {
		return err
	} else if busy > 0 {
		admit = 0
		e.stats.MapHeld++
	}
	cps, placed := e.mapCps[:0], e.mapPlaced[:0] // the copies, and the slot of each
	defer func() { e.mapCps, e.mapPlaced = cps, placed }()
	at := e.vramAt[off] // the token's tables: which experts it read from VRAM
	if n := e.aheadRan[off]; n > 0 {
		if err := e.aheadCount(off, at, n); err != nil {
			return err
		}
		if err := e.landCommit(tables, off, at, n); err != nil { // land.go: before the lookups, which then find them
			return err
		}
	}
	for li := range e.layers {
		ids, err := e.readIDs(li, off+4*K*li, e.idsBuf)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if at[li*c.Experts+id] {
				e.stats.Hits++
			} else {
				e.stats.Misses++
			}
		}
		var misses []Miss
		e.slotBuf, misses, err = e.cache.LookupAdmit(li, ids, e.slotBuf, e.missBuf[:0], admit)
		if err != nil {
			return err
		}
		e.missBuf = misses
		admit -= len(misses)
		for _, m := range misses {
			if m.Evicted.Layer >= 0 { // (1): back to host memory before the slot is reused
				e.setSlot(tables, int(m.Evicted.Layer), int(m.Evicted.Expert), 0)
				e.dirty[m.Evicted.Layer] = true
			}
			e.promoting[m.Slot] = promotion{key: m.Key} // replaces a record of the slot's evicted expert
			cps = append(cps, e.expertCopy(li, int(m.Key.Expert), e.mem.Slot(m.Slot)))
			placed = append(placed, m.Slot)
			e.stats.CopiedBytes += int64(e.slot.total)
		}
	}
	e.cache.Step()
	// (3): commit the promotions whose copies completed (issued at an earlier boundary).
	for s, r := range e.promoting {
		if r.ev == nil {
			continue
		}
		done, err := r.ev.Done()
		if err != nil {
			return err
		}
		if done {
			e.commit(tables, s, r)
		}
	}
	if err := e.landReserve(tables); err != nil { // land.go: the next token's landing slots, none with a promotion pending
		return err
	}
	if err := e.recycleCopies(); err != nil {
		return err
	}
	// (2): the tables first, then the copies after them.
	if err := e.uploadDirty(); err != nil {
		return err
	}
	if err := e.landUpload(); err != nil {
		return err
	}
	if len(cps) == 0 {
		return e.tablesKernel()
	}
	if err := e.tablesEv.Record(e.compute); err != nil {
		return err
	}
	if err := e.tablesKernel(); err != nil {
		return err
	}
	e.stats.MapBatches++
	e.stats.Groups += int64((len(cps) + e.copier.Size - 1) / e.copier.Size) // Copier.Issue's groups
	// SetLateBatch: issued after the next launch (step, issueLate)
	if e.lateBatch {
		e.late, e.latePl = append(e.late[:0], cps...), append(e.latePl[:0], placed...)
		return nil
	}
	return e.issueBatch(cps, placed)
}

// recycleCopies returns the copier's events to its pool (adding the batch's device time)
// once none of its groups is pending; before that a record may still hold one.
func (e *Engine) recycleCopies() error {
	n, err := e.copier.Pending()
	if err != nil || n > 0 {
		return err
	}
	for _, r := range e.promoting {
		if r.ev != nil { // completed after its Done check: committed at the next boundary
			return nil
		}
	}
	return e.finishCopies()
}

// settle waits for every promotion in flight and commits it (before the batched prompt
// path, which looks experts up and copies them itself, synchronously).
func (e *Engine) settle() error {
	if !e.mapped {
		return nil
	}
	if err := e.landRelease(); err != nil {
		return err
	}
	for off, slots := range e.landAt { // completed tokens whose promote never ran: nothing committed
		for _, s := range slots {
			if s >= 0 {
				e.cache.Release(s)
			}
		}
		delete(e.landAt, off)
	}
	if len(e.promoting) == 0 {
		return nil
	}
	if err := e.issueLate(); err != nil {
		return err
	}
	if err := e.finishCopies(); err != nil {
		return err
	}
	tables := e.staging.Bytes()[e.stage().tables:]
	for s, r := range e.promoting {
		e.commit(tables, s, r)
	}
	return e.uploadDirty()
}

// commit ends the promotion r into slot s, whose copy has completed: its expert's entries
// in the host mirror of the tables point at the slot if the expert still owns it.
func (e *Engine) commit(tables []byte, s int, r promotion) {
	if at, ok := e.cache.Resident(r.key); ok && at == s {
		e.setSlot(tables, int(r.key.Layer), int(r.key.Expert), e.mem.Slot(s))
		e.dirty[r.key.Layer] = true
	}
	delete(e.promoting, s)
}
