package gpu

import (
	"testing"

	"github.com/strata-hip/strata/model/gpu/synth"
	"github.com/strata-hip/strata/quant"
)

// TestMapAhead: the mapped look-ahead (ahead.go) leaves the logits bitwise those of the
// mapped path without it, and the cache's work (hits, misses, promotions, groups, syncs)
// unchanged, on qwen3moe and qwen3next, at a small and a large cache, token by token and
// through the batched prompt path; it predicts, copies predicted misses into its stage
// buffers (the emulator's count) and reads fewer expert bytes through the mapping. With
// every prediction wrong (the emulated expert_fetch stages the next expert instead) the
// logits stay the same. The fake device replays a graph's ready work captured last first,
// so a missing dependency of the branch (a fetch after the phase 3 that reads it, a
// norm before the look-ahead's mmvq read xn) changes the bits or reads a stale table.
func TestMapAhead(t *testing.T) {
	for _, preset := range []string{"tiny", "tiny-next"} {
		t.Run(preset, func(t *testing.T) {
			p := synth.Presets[preset]
			K := p.ExpertsUsed
			for _, chunk := range []int{0, 4} {
				for _, slots := range []int{3 * K, p.Layers * p.Experts / 2} {
					o := Options{MaxExpert: slots, Chunk: chunk, Misses: MissMap, NoMapAhead: true, NoMapLand: true} // the look-ahead alone (landing: land_test.go)
					old := runMapped(t, preset, quant.Q8_0, o, nil)
					o.NoMapAhead = false // the default
					var fake *fakeDriver
					nw := runMapped(t, preset, quant.Q8_0, o, func(_ *Engine, f *fakeDriver) { fake = f })
					fetched := fake.emu.fetched
					wrong := runMappedOn(t, preset, quant.Q8_0, true, func(f *fakeDriver) { f.emu.fetchWrong = true }, o, nil)
					sameLogits(t, "look-ahead against none", nw.logs, old.logs)
					sameLogits(t, "every prediction wrong against none", wrong.logs, old.logs)
					os, ns := old.stats, nw.stats
					if ns.Hits != os.Hits || ns.Misses != os.Misses || ns.CopiedBytes != os.CopiedBytes || ns.Groups != os.Groups || ns.Syncs != os.Syncs {
						t.Errorf("chunk %d, %d slots: cache work with look-ahead hits %d misses %d copied %d groups %d syncs %d; without %d %d %d %d %d", chunk, slots,
							ns.Hits, ns.Misses, ns.CopiedBytes, ns.Groups, ns.Syncs, os.Hits, os.Misses, os.CopiedBytes, os.Groups, os.Syncs)
					}
					if !nw.mapped || nw.resident || ns.Graphs == 0 {
						t.Fatalf("mapped %v, resident %v, %d graph launches", nw.mapped, nw.resident, ns.Graphs)
					}
					t.Logf("chunk %d, %d slots: predicted %d, right %d, fetched %d (emulator %d), useful %d, misses %d; host bytes %d → %d (all wrong %d)",
						chunk, slots, ns.AheadPredicted, ns.AheadRight, ns.AheadFetched, fetched, ns.AheadUseful, ns.AheadMisses, old.hostBytes, nw.hostBytes, wrong.hostBytes)
					if ns.AheadPredicted == 0 || ns.AheadFetched == 0 || ns.AheadUseful == 0 || os.AheadPredicted != 0 || fetched == 0 {
						t.Errorf("chunk %d, %d slots: predicted %d, fetched %d, useful %d (without: predicted %d)", chunk, slots, ns.AheadPredicted, ns.AheadFetched, ns.AheadUseful, os.AheadPredicted)
					}
				}
			}
		})
	}
}

// TestMapAheadSetter: SetMapAhead needs the buffers the plan holds unless NoMapAhead; on
// one engine off and on give the same logits; a resident engine, a copy-path engine and
// MissAuto on a device that cannot map plan none; without expert_fetch's code object the
// engine loads and maps without the look-ahead.
func TestMapAheadSetter(t *testing.T) {
	p := synth.Presets["tiny-next"]
	o := Options{MaxExpert: 3 * p.ExpertsUsed, Misses: MissMap, NoMapAhead: true}
	runMapped(t, "tiny-next", quant.Q8_0, o, func(e *Engine, _ *fakeDriver) {
		if err := e.SetMapAhead(true); err == nil {
			t.Error("SetMapAhead(true) with NoMapAhead: no error")
		}
	})
	o.NoMapAhead = false
	var on, off mappedRun
	on = runMapped(t, "tiny-next", quant.Q8_0, o, nil)
	off = runMapped(t, "tiny-next", quant.Q8_0, o, func(e *Engine, _ *fakeDriver) {
		if err := e.SetMapAhead(false); err != nil {
			t.Fatal(err)
		}
	})
	two := runMapped(t, "tiny-next", quant.Q8_0, o, func(e *Engine, _ *fakeDriver) {
		if err := e.SetMapAheadK(p.ExpertsUsed + 1); err == nil {
			t.Errorf("SetMapAheadK(%d) with K = %d: no error", p.ExpertsUsed+1, p.ExpertsUsed)
		}
		if err := e.SetMapAheadK(1); err != nil {
			t.Fatal(err)
		}
	})
	sameLogits(t, "look-ahead on against off (one option, the setter)", on.logs, off.logs)
	sameLogits(t, "look-ahead copying one of K against off", two.logs, off.logs)
	if off.stats.AheadPredicted != 0 || on.stats.AheadPredicted == 0 || two.stats.AheadPredicted != on.stats.AheadPredicted ||
		two.stats.AheadFetched == 0 || two.stats.AheadFetched >= on.stats.AheadFetched {
		t.Errorf("predicted: off %d, on %d, one of K %d; copied: on %d, one of K %d", off.stats.AheadPredicted, on.stats.AheadPredicted,
			two.stats.AheadPredicted, on.stats.AheadFetched, two.stats.AheadFetched)
	}
	src := presetSource(t, "tiny-next", quant.Q8_0)
	for _, c := range []struct {
		what    string
		o       Options
		mapHost bool
		skip    string
		planned bool
	}{
		{"map", Options{MaxExpert: 6, Misses: MissMap}, true, "", true},
		{"copy", Options{MaxExpert: 6, Misses: MissCopy}, true, "", false},
		{"auto, cannot map", Options{MaxExpert: 6}, false, "", false},
		{"auto, resident", Options{}, true, "", false},
		{"map, no expert_fetch", Options{MaxExpert: 6, Misses: MissMap}, true, "expert_fetch", false},
	} {
		dev, _ := newFakeDeviceMap(1<<30, fakeTarget, c.mapHost)
		o := c.o
		o.CODir, o.Ctx, o.Budget, o.Reserve = fakeCODir(t, fakeTarget, c.skip), 64, 256<<20, 1<<20
		e, err := Load(dev, src, o)
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		_, ahead := e.Plan().byName[bufAheadStage]
		if e.aheadPlanned != c.planned || ahead != c.planned || e.mapAhead != c.planned {
			t.Errorf("%s: look-ahead planned %v (buffer %v, on %v), want %v", c.what, e.aheadPlanned, ahead, e.mapAhead, c.planned)
		}
		e.Close()
	}
}
