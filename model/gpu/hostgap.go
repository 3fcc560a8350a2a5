package gpu

import (
	"fmt"
	"time"

	"github.com/strata-hip/strata/kernels/abi"
	rt "github.com/strata-hip/strata/runtime/gpu"
)

// Where a decode token's time goes, and the launch-first order.
//
// A resident or mapped token (oneSync) is, on the host: the embedding row and position
// into staging, the tables the token reads (vramAt, mapped), the submission (graph.go: the
// replay's walk, then one graph launch), the lookup of the token before (resident count or
// mapped promote), the ahead walk of the next token's graph, and the sync. Everything
// before the launch is time the GPU idles: it finished the token before at that token's
// sync. The walk is the largest of it: ~700 launches' arguments rebuilt and compared, 125–240
// µs a step on the 80B on the H200 (bench/results/2026-11-30-hostgap-s9), although the ahead
// walk of the token before has already made every update that does not depend on the caller.
// (The lookup and the ahead walk run while the token runs: they cost the GPU nothing.)
//
// Launch first (the default; Options.WalkFirst keeps the order before): when the graph a
// step replays is the one the ahead walk brought current, for the same position and argmax
// n, and under the same settings (the ahead walk records launchSettings, engine.go, where
// every Engine.Set* that changes a launch keeps its setting; SetMapPromote, SetStartProbe
// and SetTokenTimes change none: TestSettersChangeLaunchSettings),
// the step launches it at once and walks it after the launch, while it runs, in check
// mode: each launch and copy must be what the graph's node already holds (Graph.Same, no
// driver call). A difference is an error that stops the engine — it would mean the graph
// ran stale — never a silent divergence. The lookup and promotion order is unchanged:
// vramAt is still taken before the launch, and promote still runs after it, so its table
// uploads and the copies that wait for them follow the token's kernels exactly as before
// (mapped.go), and the logits are bitwise those of the walk-first order. Measured on the
// 80B-A3B IQ2_XS (hostgap-s9): −1.0 to −1.5 % a token at 12–24 GiB, −2.1 % resident, where
// the step's wall is now 1.4 % above the device's busy time.

// StepPhases is the host time of the decode steps by phase (Stats.Phases), and with
// Engine.SetTokenTimes the device's view of the same tokens. A step's wall time (Stats.Wall)
// is Embed + Tables + Submit + StartLag + Check + Lookup + Ahead + Sync + After.
type StepPhases struct {
	Steps int
	// Between: from the end of a step to the start of the next (the caller, Forward's own
	// checks); not part of Stats.Wall, but GPU idle time all the same.
	Between time.Duration
	Embed   time.Duration // embedding row and position into staging
	Tables  time.Duration // the token's view of the tables (vramAt; mapped misses)
	Submit  time.Duration // the replay's walk (walk first) or capture, and the launch; or the launches
	Lookup  time.Duration // the token before's lookup (resident count, mapped promote)
	Check   time.Duration // launch first: the walk after the launch, in check mode
	Ahead   time.Duration // the next token's walk
	Sync    time.Duration // waiting for the token
	After   time.Duration // after the sync (the copy path's per-token work, SyncLookup)
	// Launched: steps whose graph was launched before its walk.
	Launched int
	// device (events, SetTokenTimes): Busy from the launch to the end of the token's own
	// work, Tail from there to the sync point (table uploads queued after it), Idle from
	// the token before's sync point to this launch; Tokens measured.
	Busy, Tail, Idle time.Duration
	Tokens           int
	// StartLag (SetStartProbe): from the launch's return until the token's first event has
	// happened, polled by the host — how long after the host queued the token the GPU
	// reached it.
	StartLag time.Duration
	// IdleLong: tokens whose idle was above 0.5 ms; IdleMax the longest idle.
	IdleLong int
	IdleMax  time.Duration
	// SetSyncProbe: steps whose sync returned with a promotion batch issued and not yet
	// recycled (BatchSteps), and of them those whose batch's last group was still pending.
	BatchSteps, BatchAtSync int
}

// SetLaunchFirst switches the launch-first order on (the default) or off
// (Options.WalkFirst), between tokens, for a comparison on one engine.
func (e *Engine) SetLaunchFirst(on bool) {
	e.walkFirst = !on
}

// launchAhead launches tg at once when the ahead walk left it current for this step (see
// above), and reports whether it did; the step then checks it (checkLaunched).
func (e *Engine) launchAhead(tg *tokenGraph) (bool, error) {
	ok := !e.walkFirst && tg != nil && tg == e.aheadTg && e.aheadPos == e.pos && e.aheadN == e.argmaxN && e.aheadSet == e.launchSettings
	e.aheadTg = nil // the ahead walk is good for one step: the step walks (or checks) the graph
	if !ok {
		return false, nil
	}
	if err := e.tokenStart(); err != nil {
		return true, err
	}
	e.stats.Graphs++
	e.stats.Phases.Launched++
	e.gLast, e.verifyTg = tg, tg
	return true, tg.g.Launch()
}

// checkLaunched walks the graph launched before its walk, in check mode (gCheck: launchK
// and graphCopy compare, nothing is queued or updated).
func (e *Engine) checkLaunched(wantLogits bool, idsOff int) error {
	tg := e.verifyTg
	e.verifyTg = nil
	e.gmode, e.gcur, e.gi, e.gc = gCheck, tg, 0, 0
	err := e.tokenOps(wantLogits, idsOff)
	e.gmode, e.gcur = gPlain, nil
	if err != nil {
		return err
	}
	if e.gi != tg.g.Kernels() || e.gc != len(tg.copies) {
		return fmt.Errorf("model/gpu: graph launched before its walk: the walk made %d launches and %d copies, the capture %d and %d", e.gi, e.gc, tg.g.Kernels(), len(tg.copies))
	}
	return nil
}

// checkLaunch is launchK in check mode: the launch must be what node gi holds.
func (e *Engine) checkLaunch(k *kernel, grid rt.Dim3, threads int, args []byte) error {
	same, err := e.gcur.g.Same(e.gi, k.fn, grid, rt.Dim3{X: uint32(threads), Y: 1, Z: 1}, args)
	e.gi++
	if err != nil {
		return fmt.Errorf("model/gpu: %s: %w", k.key, err)
	}
	if !same {
		return fmt.Errorf("model/gpu: graph launched before its walk ran %s (launch %d) with other arguments than the walk makes now (a setting that changes launches outside launchSettings?)", k.key, e.gi-1)
	}
	return nil
}

// SetTokenTimes records three events on the compute stream around each oneSync token
// (before its launch, after it, before its sync) and adds their intervals to
// Stats.Phases (Busy, Tail, Idle): a measurement setting (an event record costs the host a
// few µs, one of them before the launch).
func (e *Engine) SetTokenTimes(on bool) error {
	if on {
		for i := range e.tokEv {
			for j := range e.tokEv[i] {
				if e.tokEv[i][j] != nil {
					continue
				}
				ev, err := e.dev.NewEvent()
				if err != nil {
					return err
				}
				e.tokEv[i][j] = ev
			}
		}
	}
	e.tokTimes, e.tokPrev, e.tokRec = on, nil, false
	return nil
}

// SetStartProbe makes each step with token events (SetTokenTimes) poll its first event
// after the launch until it has happened (StepPhases.StartLag): a diagnostic of when the
// GPU reaches a token the host has queued; the poll delays the step's lookup.
func (e *Engine) SetStartProbe(on bool) { e.startProbe = on }

// probeStart is SetStartProbe's poll (step adds its time to StepPhases.StartLag).
func (e *Engine) probeStart() error {
	if !e.startProbe || !e.tokRec {
		return nil
	}
	ev := e.tokEv[e.tokPar][0]
	for {
		done, err := ev.Done()
		if err != nil {
			return err
		}
		if done {
			break
		}
	}
	return nil
}

// tokenStart records the token's first event, just before its launch.
func (e *Engine) tokenStart() error {
	if !e.tokTimes || !e.oneSync() || e.gmode != gPlain {
		return nil
	}
	e.tokRec = true
	return e.tokEv[e.tokPar][0].Record(e.compute)
}

// tokenMark records the token's event j (1: after its launch, 2: before its sync).
func (e *Engine) tokenMark(j int) error {
	if !e.tokRec {
		return nil
	}
	return e.tokEv[e.tokPar][j].Record(e.compute)
}

// tokenRead adds the token's intervals (after its sync: every event has happened).
func (e *Engine) tokenRead() error {
	if !e.tokRec {
		return nil
	}
	e.tokRec = false
	ev := e.tokEv[e.tokPar]
	ph := &e.stats.Phases
	busy, err := rt.Elapsed(ev[0], ev[1])
	if err != nil {
		return err
	}
	tail, err := rt.Elapsed(ev[1], ev[2])
	if err != nil {
		return err
	}
	if e.tokPrev != nil {
		idle, err := rt.Elapsed(e.tokPrev, ev[0])
		if err != nil {
			return err
		}
		ph.Idle += idle
		if idle > 500*time.Microsecond {
			ph.IdleLong++
		}
		ph.IdleMax = max(ph.IdleMax, idle)
	}
	ph.Busy += busy
	ph.Tail += tail
	ph.Tokens++
	e.tokPrev = ev[2]
	e.tokPar ^= 1
	return nil
}

// closeTokenTimes releases the token events.
func (e *Engine) closeTokenTimes() []error {
	var errs []error
	for i := range e.tokEv {
		for j, ev := range e.tokEv[i] {
			if ev != nil {
				errs = append(errs, ev.Destroy())
				e.tokEv[i][j] = nil
			}
		}
	}
	return errs
}

// ResetCache empties the expert cache of an engine with mapped misses: every promotion in
// flight completes, every table entry goes back to its expert's host copy, and the cache
// and its policy start again as Load leaves them without a profile (a profile's warm start
// is not repeated). It is a measurement setting: runs from a cold cache on one engine, for
// comparisons alternated on one engine. Resident engines and the copy path refuse it.
func (e *Engine) ResetCache() error {
	if e.fault != nil {
		return e.fault
	}
	if !e.mapped || e.resident {
		return fmt.Errorf("model/gpu: ResetCache needs mapped expert misses")
	}
	e.flushLookup()
	if e.fault != nil {
		return e.fault
	}
	if err := e.settle(); err != nil {
		e.fault = err
		return err
	}
	c := &e.cfg
	if e.decayed != nil {
		e.decayed = NewDecayed(e.decayed.Decay, e.decayed.Rerank, nil)
		e.cache = NewCache(e.plan.Slots, e.decayed)
	} else {
		e.cache = NewCache(e.plan.Slots, NewLRU())
	}
	tables := e.staging.Bytes()[e.stage().tables:]
	for l := 0; l < c.Layers; l++ {
		for x := 0; x < c.Experts; x++ {
			e.setSlot(tables, l, x, 0)
		}
		e.dirty[l] = true
	}
	err := e.uploadDirty()
	if err == nil {
		err = e.sync()
	}
	if err != nil {
		e.fault = err
	}
	return err
}

// SetMapPromote sets Options.MapPromote on a loaded engine with mapped misses (0: every
// miss), or with n < 0 promotes nothing at all: every miss is read from host memory for
// good (a measurement setting: the tokens' device time without promotion copies).
func (e *Engine) SetMapPromote(n int) { e.mapPromote = n }

// Where a mapped token's GPU idle went (session 11, bench/results/2026-11-30-idle-s11).
// At the budgets a token's events showed ~1.4 ms a token of idle from the sync point of the
// token before to this token's launch, about the copy time of the promotion batch that
// promote issued while the token before ran (its copies wait for that token's end:
// tablesEv). The settings below told the explanations apart and were the candidate fixes;
// none changes a launch (launchSettings), the order of the tables and the copies against
// the kernels (mapped.go), or a byte the kernels read. Measured on the H200 (80B-A3B
// IQ2_XS, 12/16/24 GiB): every other lookup was held back by the batch before it (so the
// batch outlasted the next launch), the sync returned with the batch still pending (the
// host was not late; SetSyncPoll changed nothing), the host saw the next token's first event
// happen ~2 ms after its launch (SetStartProbe), and the idle came only after the tokens
// that issued a batch (~3 ms each): the GPU started a token queued behind a batch only when
// the batch's copies ended. An empty kernel after the table uploads (SetTablesNop) let the
// token's first event run at once, but the token then waited inside its graph (busy +1.0
// ms: its input copy nodes behind the batch on the copy engine); issuing the batch after
// the launch (SetLateBatch) removed the wait: −12.3 to −12.8 % a token. It is the default.
//
//   - SetSyncProbe: right after the token's sync returns, poll whether the last group of
//     the promotion batch is still pending (StepPhases.BatchAtSync of BatchSteps): if the
//     sync returns only when the batch is done, it is never pending there.
//   - SetSyncPoll: the token's sync polls an event recorded after the token's work
//     (cuEventQuery) instead of cuStreamSynchronize: a fix if the stream's sync returns late.
//   - SetTablesNop: after promote's table uploads (copies on the compute stream), an empty
//     kernel (fill of no words): the compute stream's last work before the next token is
//     then a kernel, not a copy: a fix if the next token's work is ordered behind the copy
//     engine's queue, where the batch's copies sit.
//   - SetLateBatch: promote holds its batch back, and the next step issues it right after
//     its launch (the copies still wait for tablesEv, so for the same kernels as before):
//     a fix if the GPU reaches a token queued after the batch only when the batch ends. The
//     lookup of that step then finds the batch pending, as it does without the setting when
//     the batch outlasts the launch (back-pressure: it places nothing); with wait set it
//     first waits for the batch instead, so every lookup places (more promotions).

// SetSyncProbe counts, after each oneSync token's sync, whether the promotion batch is
// still pending (StepPhases.BatchSteps, BatchAtSync); a diagnostic (one event query).
func (e *Engine) SetSyncProbe(on bool) { e.syncProbe = on }

// SetSyncPoll makes each oneSync token's sync poll an event recorded after its work
// (cuEventQuery until done) instead of synchronizing the compute stream.
func (e *Engine) SetSyncPoll(on bool) error {
	if on && e.syncEv == nil {
		ev, err := e.dev.NewEvent()
		if err != nil {
			return err
		}
		e.syncEv = ev
	}
	e.syncPoll = on
	return nil
}

// SetTablesNop makes promote launch an empty kernel on the compute stream after its table
// uploads (mapped engines with the fill family's code object).
func (e *Engine) SetTablesNop(on bool) error {
	key := probeFamily + "/u32"
	if on && e.kern[key] == nil {
		if !e.mapped || e.resident {
			return fmt.Errorf("model/gpu: SetTablesNop needs mapped expert misses")
		}
		if e.ks.mods[probeFamily] == nil {
			if err := e.ks.load(e.dev, e.coDir, probeFamily); err != nil {
				return fmt.Errorf("model/gpu: SetTablesNop: %w", err)
			}
		}
		f, err := e.ks.fn(probeFamily, "u32")
		if err != nil {
			return err
		}
		e.kern[key] = &kernel{key: key, fn: f}
	}
	e.tablesNop = on
	return nil
}

// SetLateBatch makes promote hold its promotion batch back until the next step's launch
// (mapped engines; the default unless Options.EarlyBatch); with wait, promote first waits
// for the batch issued after the launch. Turning it off issues a batch held back.
func (e *Engine) SetLateBatch(on, wait bool) error {
	if on && (!e.mapped || e.resident) {
		return fmt.Errorf("model/gpu: SetLateBatch needs mapped expert misses")
	}
	if !on {
		if err := e.issueLate(); err != nil {
			return err
		}
	}
	e.lateBatch, e.lateWait = on, on && wait
	return nil
}

// tokenSync is the oneSync token's sync: the compute stream's, or with SetSyncPoll the
// poll of an event recorded after everything queued there.
func (e *Engine) tokenSync() error {
	if !e.syncPoll {
		return e.sync()
	}
	t0 := time.Now()
	if err := e.syncEv.Record(e.compute); err != nil {
		return err
	}
	for {
		done, err := e.syncEv.Done()
		if err != nil {
			return err
		}
		if done {
			break
		}
	}
	e.stats.SyncTime += time.Since(t0)
	e.stats.Syncs++
	if e.ktimes {
		return e.readKernelTimes()
	}
	return nil
}

// probeBatch is SetSyncProbe's poll, right after a token's sync.
func (e *Engine) probeBatch() error {
	if !e.syncProbe || e.copier == nil {
		return nil
	}
	ph := &e.stats.Phases
	pend, ok, err := e.copier.LastPending()
	if err != nil || !ok {
		return err
	}
	ph.BatchSteps++
	if pend {
		ph.BatchAtSync++
	}
	return nil
}

// tablesKernel is SetTablesNop's empty kernel after promote's table uploads.
func (e *Engine) tablesKernel() error {
	if !e.tablesNop {
		return nil
	}
	a := abi.FillArgs{P: uint64(e.mem.Ptr(bufTables)), N: 0}
	return e.launch(probeFamily+"/u32", dim(1), abi.FillThreads, rt.Args(&a))
}

// issueBatch issues a promotion batch after the tables (tablesEv) and gives its
// promotions their group's event. (Stats.Groups counts a batch's groups when promote makes
// it, issued at once or held back.)
func (e *Engine) issueBatch(cps []Copy, placed []int) error {
	if err := e.copier.After(e.tablesEv); err != nil {
		return err
	}
	groups, err := e.copier.Issue(cps)
	if err != nil {
		return err
	}
	for _, g := range groups {
		for i := g.First; i < g.First+g.Count; i++ {
			r := e.promoting[placed[i]]
			if r.key != e.cache.owner[placed[i]] {
				return fmt.Errorf("model/gpu: promotion record of slot %d is for %v, the slot holds %v", placed[i], r.key, e.cache.owner[placed[i]])
			}
			r.ev = g.ev // a later copy into the same slot (later i) overwrites an earlier one's
			e.promoting[placed[i]] = r
		}
	}
	return nil
}

// LateBatch reports SetLateBatch's setting.
func (e *Engine) LateBatch() (on, wait bool) { return e.lateBatch, e.lateWait }

// issueLate issues the batch SetLateBatch held back (none: nothing).
func (e *Engine) issueLate() error {
	if len(e.late) == 0 {
		return nil
	}
	cps, placed := e.late, e.latePl
	e.late, e.latePl = e.late[:0], e.latePl[:0]
	return e.issueBatch(cps, placed)
}
