package gpu

import (
	"encoding/binary"
	"fmt"
)

// Landing (default where the look-ahead runs; Options.MapLand, NoMapLand, LandPromote,
// Engine.SetMapLand, SetLandPromote): the look-ahead's copy of a predicted miss is its
// promotion. Without it a missed expert crosses the bus twice: the
// look-ahead (ahead.go) copies it into a stage buffer for its layer, and after the token
// promote (mapped.go) copies it again into a VRAM slot. With landing the host reserves, per
// layer after the first, up to M slots before a token (the cache's Reserve: free slots,
// then the policy's victims), and expert_fetch copies the i-th predicted miss of the layer
// (in the order of the predicted ids; i < M) into landing slot i instead of a stage buffer;
// the working table points at it as it would at the stage buffer. After the token the host
// knows which predicted id landed where (the predictions come back with the ids; which of
// them were misses is the table snapshot the token ran with, vramAt: exactly what
// expert_fetch tests) and commits each to the cache (Land) and the tables; promote's
// lookups then find it resident. Misses that did not land (not predicted, or past the
// layer's slots) are not promoted by default (measured faster: bench/results/
// 2026-11-30-land-s11, −4.0 to −4.2 % against landing with promotions); SetLandPromote(true)
// promotes them as before.
//
// The order rules of mapped.go's comment, for landing slots:
//   - Reserve runs in promote, after the token in flight (t+1) was submitted; a victim's
//     entries go back to its host address in the host mirror (1), and the tables and the
//     landing list are uploaded on the compute stream after token t+1's kernels (2). Only
//     token t+2's expert_fetch writes the slots, after those uploads: every kernel that could
//     read a victim's slot through its old entry has finished, and no table the kernels of
//     t+2 read names a reserved slot (its owner left; nothing else may take it).
//   - No promotion copy is pending into a reserved slot (Reserve protects the slots of
//     e.promoting), and none is issued into one (a reserved slot is neither free nor any
//     key's, so LookupAdmit cannot place into it).
//   - A slot is committed (its expert's entries point at it) only by promote(t+2), after the
//     sync of token t+2: its bytes are there (3).
//   - The reservations of consecutive tokens are disjoint: a token's set stays reserved
//     until its own promote commits or releases it, and a new set is taken only then.
//   - The device's landing list holds the set of the token submitted next or zeros: step
//     hands a fresh set (uploaded by the promote before) to the token it submits, and zeros
//     the list before a token when no fresh set was made (the first token, after the batched
//     path or ResetCache).

// bufAheadLand is the landing slots of each layer, u64 [layers][K] (0: none), read by
// expert_fetch (planned with the look-ahead).
const bufAheadLand = "ahead_land"

// SetMapLand makes the look-ahead land up to n predicted misses a layer in VRAM slots
// (0..K; 0: off; K is the default where the look-ahead runs). It needs the look-ahead's buffers (a mapped engine loaded
// without NoMapAhead) and changes no launch: the slots are data the host uploads.
func (e *Engine) SetMapLand(n int) error {
	if n < 0 || n > e.cfg.ExpertsUsed {
		return fmt.Errorf("model/gpu: %d landing slots a layer: want 0..%d", n, e.cfg.ExpertsUsed)
	}
	if n > 0 && !e.aheadPlanned {
		return fmt.Errorf("model/gpu: landing needs the mapped look-ahead's buffers: the engine was loaded with NoMapAhead, copies misses, or holds every expert")
	}
	e.landM = n
	return nil
}

// landOn: promote reserves landing slots for the next token (a cache too small for any,
// landCap 0, promotes as without landing).
func (e *Engine) landOn() bool { return e.landM > 0 && e.aheadOn() && e.landCap() > 0 }

// MapLand is the engine's landing setting: slots a layer (0: off) and SetLandPromote's.
func (e *Engine) MapLand() (int, bool) { return e.landM, e.landPromote }

// SetLandPromote: with landing on, also promote (H2D copies after the token) the misses that
// did not land (Options.LandPromote; off by default). Without landing promotions run as
// always.
func (e *Engine) SetLandPromote(on bool) { e.landPromote = on }

// landSubmit runs in step before a token is submitted with its ids at idsOff: the token
// takes the fresh reservation (the device's landing list holds it), or the list is zeroed.
func (e *Engine) landSubmit(idsOff int) error {
	if !e.aheadPlanned {
		return nil
	}
	if e.landAt[idsOff] != nil {
		return fmt.Errorf("model/gpu: the landing slots of an earlier token at ids row %d were never committed", idsOff)
	}
	if e.landNext != nil && e.aheadOn() {
		e.landAt[idsOff], e.landNext = e.landNext, nil
		return nil
	}
	if e.landNext != nil { // a fresh set no fetch of this token reads
		return nil
	}
	return e.landZero() // the set of a token before
}

// landCommit commits the landings of the token whose ids are at off (promote, before its
// lookups): the i-th predicted miss of layer li (among the first n predicted; at: the
// token's table snapshot) landed in the token's i-th landing slot of li. A slot nothing
// landed in, or whose expert holds another slot by now (landed or placed since), stays
// reserved as a spare: the token has completed and the next set (landReserve, disjoint
// from the set of the token in flight) takes it first, so a reservation evicts only as
// many experts as landed.
func (e *Engine) landCommit(tables []byte, off int, at []bool, n int) error {
	slots := e.landAt[off]
	if slots == nil {
		return nil
	}
	delete(e.landAt, off)
	c := &e.cfg
	K, E := c.ExpertsUsed, c.Experts
	po := e.aheadStage(off)
	for li := 1; li < c.Layers; li++ {
		row := slots[li*K : (li+1)*K]
		pred, err := e.readIDs(li, po+4*K*li, e.aheadBuf)
		if err != nil {
			return fmt.Errorf("model/gpu: look-ahead prediction: %w", err)
		}
		e.aheadBuf = pred
		r := 0
		for _, p := range pred[:n] {
			if at[li*E+p] {
				continue // read from its slot: not copied
			}
			if r < K && row[r] >= 0 && e.cache.Land(row[r], Key{int32(li), int32(p)}) {
				e.setSlot(tables, li, p, e.mem.Slot(row[r]))
				e.dirty[li] = true
				e.stats.Landed++
			}
			r++
		}
		e.landWant[li] = r
		for _, s := range row { // nothing landed: kept reserved for the next set (landReserve)
			if s >= 0 && e.cache.IsReserved(s) {
				e.landSpare = append(e.landSpare, s)
			}
		}
	}
	return nil
}

// landCap is how many slots a layer landReserve reserves: landM, but the sets of two
// tokens (reserved at once) hold at most half of the slots past 2K. So at least
// slots/2 + K slots hold experts, and a lookup always finds a victim outside its layer's K
// experts (Cache.LookupAdmit) when no slot is free; a cache near the plan's minimum of 2K
// lands nothing.
func (e *Engine) landCap() int {
	c := &e.cfg
	return min(e.landM, max(0, e.cache.Slots()-2*c.ExpertsUsed)/4/max(1, c.Layers-1))
}

// landReserve takes the next token's landing slots (promote, after its lookups placed this
// token's promotions, before the uploads): per layer after the first, one more slot than the
// layer's predicted misses in the token last committed (landWant; before any, landCap), at
// most landCap; the committed token's spares first, then the cache's
// (Reserve: free slots, then victims, none with a promotion pending); a victim's entries go
// back to its host address. The list goes to the
// device after the tables (landUpload). Off, it gives back a set not yet handed to a token.
func (e *Engine) landReserve(tables []byte) error {
	if !e.landOn() {
		return e.landRelease()
	}
	if e.landNext != nil { // not yet handed to a token
		return e.landReleaseSpare()
	}
	c := &e.cfg
	K := c.ExpertsUsed
	m := e.landCap()
	if m == 0 {
		return e.landReleaseSpare()
	}
	next := make([]int, c.Layers*K)
	for i := range next {
		next[i] = -1
	}
	list := e.staging.Bytes()[e.stage().land:][:8*c.Layers*K]
	clear(list)
	protect := func(s int) bool { _, p := e.promoting[s]; return p }
	for li := 1; li < c.Layers; li++ {
		m := min(m, e.landWant[li]+1)
		i := 0
		for ; i < m && len(e.landSpare) > 0; i++ { // spares of the token committed: still reserved
			n := len(e.landSpare) - 1
			next[li*K+i], e.landSpare = e.landSpare[n], e.landSpare[:n]
		}
		e.landBuf = e.cache.Reserve(m-i, protect, e.landBuf[:0])
		for _, r := range e.landBuf {
			if r.Evicted.Layer >= 0 { // (1): back to host memory before the slot is written
				e.setSlot(tables, int(r.Evicted.Layer), int(r.Evicted.Expert), 0)
				e.dirty[r.Evicted.Layer] = true
			}
			next[li*K+i] = r.Slot
			i++
		}
		e.stats.LandReserved += int64(len(e.landBuf))
		for j := 0; j < i; j++ {
			binary.LittleEndian.PutUint64(list[8*(li*K+j):], uint64(e.mem.Slot(next[li*K+j])))
		}
	}
	e.landReleaseSpare()
	e.landNext, e.landUp = next, true
	return nil
}

// landUpload uploads the landing list landReserve made (after the tables: promote's (2)).
func (e *Engine) landUpload() error {
	if !e.landUp {
		return nil
	}
	c := &e.cfg
	if err := e.compute.Upload(e.mem.Ptr(bufAheadLand), e.staging, e.stage().land, 8*c.Layers*c.ExpertsUsed); err != nil {
		return err
	}
	e.landUp, e.landDev = false, true
	return nil
}

// landRelease gives back the reservation not yet handed to a token (off, settle, ResetCache:
// no token in flight reads it) and any a token left uncommitted (settle: those tokens have
// completed, and nothing was committed from them). The device's list is zeroed before the
// next token (landSubmit).
func (e *Engine) landRelease() error {
	e.landReleaseSpare()
	if e.landNext != nil {
		for _, s := range e.landNext {
			if s >= 0 {
				e.cache.Release(s)
			}
		}
		e.landNext = nil
	}
	return e.landZero()
}

// landReleaseSpare gives back the spares a new set did not take.
func (e *Engine) landReleaseSpare() error {
	for _, s := range e.landSpare {
		e.cache.Release(s)
	}
	e.landSpare = e.landSpare[:0]
	return nil
}

// landZero zeroes the device's landing list (on the compute stream, after every token
// queued: those that took a set ran with it) unless it is zero.
func (e *Engine) landZero() error {
	if !e.landDev {
		return nil
	}
	c := &e.cfg
	if err := e.compute.Memset(e.mem.Ptr(bufAheadLand), 0, 8*c.Layers*c.ExpertsUsed); err != nil {
		return err
	}
	e.landDev, e.landUp = false, false
	return nil
}
