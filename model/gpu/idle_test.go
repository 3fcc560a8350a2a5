package gpu

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/model/gpu/synth"
	"github.com/strata-hip/strata/quant"
)

// TestIdleSettings: the idle settings of hostgap.go (SetSyncPoll, SetTablesNop,
// SetLateBatch with and without its wait, SetSyncProbe, and all of them at once), and the
// default (the late batch) against Options.EarlyBatch, leave the logits bitwise those of
// the path before (EarlyBatch) and the cache's work (hits, misses, promotions, groups, batches,
// held-back lookups, syncs) unchanged, on qwen3moe and qwen3next, at a small and a large
// cache, token by token and through the batched prompt path; the empty kernel runs once
// after every lookup and only with SetTablesNop; a resident engine refuses SetTablesNop
// and SetLateBatch. (TestMappedPromotionOrder checks the late batch's order against the
// tables.)
func TestIdleSettings(t *testing.T) {
	type mode struct {
		name                           string
		poll, nop, late, wait, probeOn bool
	}
	modes := []mode{{"syncpoll", true, false, false, false, false}, {"nop", false, true, false, false, false}, {"late", false, false, true, false, false},
		{"late, waiting", false, false, true, true, false}, {"pend", false, false, false, false, true}, {"late and pend", false, false, true, false, true},
		{"all", true, true, true, true, true}}
	cfg := 0
	for _, preset := range []string{"tiny", "tiny-next"} {
		t.Run(preset, func(t *testing.T) {
			p := synth.Presets[preset]
			K := p.ExpertsUsed
			for _, chunk := range []int{0, 4} {
				for _, slots := range []int{3 * K, p.Layers * p.Experts / 2} {
					o := Options{MaxExpert: slots, Chunk: chunk, Misses: MissMap, EarlyBatch: true, NoMapLand: true} // promotions run without landing (land.go)
					base := runMapped(t, preset, quant.Q8_0, o, func(e *Engine, _ *fakeDriver) {
						if on, _ := e.LateBatch(); on {
							t.Error("EarlyBatch: the late batch is on")
						}
					})
					bs := base.stats
					if bs.MapBatches == 0 {
						t.Fatalf("chunk %d, %d slots: no promotion batch", chunk, slots)
					}
					o.EarlyBatch = false // the default: the late batch
					def := runMapped(t, preset, quant.Q8_0, o, func(e *Engine, _ *fakeDriver) {
						if on, wait := e.LateBatch(); !on || wait {
							t.Errorf("default: late batch %v, wait %v; want on, no wait", on, wait)
						}
					})
					sameLogits(t, "the default (late batch) against EarlyBatch", def.logs, base.logs)
					if ds := def.stats; ds.Hits != bs.Hits || ds.Misses != bs.Misses || ds.CopiedBytes != bs.CopiedBytes || ds.Groups != bs.Groups || ds.MapBatches != bs.MapBatches {
						t.Errorf("default against EarlyBatch: hits %d/%d misses %d/%d copied %d/%d groups %d/%d batches %d/%d",
							ds.Hits, bs.Hits, ds.Misses, bs.Misses, ds.CopiedBytes, bs.CopiedBytes, ds.Groups, bs.Groups, ds.MapBatches, bs.MapBatches)
					}
					cfg++
					for i, m := range modes {
						// "all" (every setting at once) runs at every chunk and cache size, each
						// single setting at one of the four of each preset, in turn (CI time,
						// session 11)
						if m.name != "all" && i%4 != cfg%4 {
							continue
						}
						var fake *fakeDriver
						r := runMapped(t, preset, quant.Q8_0, o, func(e *Engine, f *fakeDriver) {
							fake = f
							if m.nop { // the fill family's placeholder code object, loaded by the setter
								co, _ := abi.Find(fakeTarget, probeFamily)
								if err := os.WriteFile(filepath.Join(e.coDir, co.Path), []byte("placeholder"), 0o644); err != nil {
									t.Fatal(err)
								}
							}
							if err := e.SetSyncPoll(m.poll); err != nil {
								t.Fatal(err)
							}
							if err := e.SetTablesNop(m.nop); err != nil {
								t.Fatal(err)
							}
							if err := e.SetLateBatch(m.late, m.wait); err != nil {
								t.Fatal(err)
							}
							e.SetSyncProbe(m.probeOn)
						})
						sameLogits(t, m.name+" against the default", r.logs, base.logs)
						s := r.stats
						if s.Hits != bs.Hits || s.Misses != bs.Misses || s.CopiedBytes != bs.CopiedBytes || s.Groups != bs.Groups || s.Syncs != bs.Syncs ||
							s.MapBatches != bs.MapBatches || s.MapHeld != bs.MapHeld {
							t.Errorf("%s, chunk %d, %d slots: cache work hits %d misses %d copied %d groups %d syncs %d batches %d held %d; default %d %d %d %d %d %d %d",
								m.name, chunk, slots, s.Hits, s.Misses, s.CopiedBytes, s.Groups, s.Syncs, s.MapBatches, s.MapHeld,
								bs.Hits, bs.Misses, bs.CopiedBytes, bs.Groups, bs.Syncs, bs.MapBatches, bs.MapHeld)
						}
						nops := fake.launches[abi.SymFillU32]
						if m.nop != (nops > 0) || (m.nop && nops < int(s.MapBatches)) {
							t.Errorf("%s: %d empty kernels, %d batches", m.name, nops, s.MapBatches)
						}
						// late: the batch is issued after the launch and, complete at once on the
						// fake, recycled by the lookup before the sync
						if want := m.probeOn && !m.late; want != (s.Phases.BatchSteps > 0) {
							t.Errorf("%s: sync probe counted %d steps with a batch", m.name, s.Phases.BatchSteps)
						}
					}
				}
			}
		})
	}
	runMapped(t, "tiny", quant.Q8_0, Options{}, func(e *Engine, _ *fakeDriver) {
		if !e.resident {
			t.Fatal("not resident")
		}
		if on, _ := e.LateBatch(); on {
			t.Error("a resident engine holds batches back")
		}
		if e.SetTablesNop(true) == nil || e.SetLateBatch(true, false) == nil {
			t.Error("a resident engine took SetTablesNop or SetLateBatch")
		}
		if err := e.SetSyncPoll(true); err != nil { // the sync poll works on any oneSync engine
			t.Fatal(err)
		}
	})
}
