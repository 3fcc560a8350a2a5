package gpu

import (
	"testing"

	"github.com/strata-hip/strata/model/gpu/synth"
	"github.com/strata-hip/strata/quant"
)

// TestStageIn: with stage-in a mapped engine loads each decode token's inputs with stage_in
// (two launches a token, through the staging window's alias) and its logits are bitwise
// those without it, with and without the look-ahead, token by token and after batched
// prompts; the setter switches it on one engine; a copy-path engine has no mapped staging
// window and refuses it; without stage_in's code object the engine maps without it.
func TestStageIn(t *testing.T) {
	for _, preset := range []string{"tiny", "tiny-next"} {
		t.Run(preset, func(t *testing.T) {
			p := synth.Presets[preset]
			for _, chunk := range []int{0, 4} {
				for _, ahead := range []bool{false, true} {
					o := Options{MaxExpert: 3 * p.ExpertsUsed, Chunk: chunk, Misses: MissMap, NoMapAhead: !ahead}
					old := runMapped(t, preset, quant.Q8_0, o, nil)
					o.StageIn = true
					var fake *fakeDriver
					nw := runMapped(t, preset, quant.Q8_0, o, func(_ *Engine, f *fakeDriver) { fake = f })
					sameLogits(t, "stage-in against copies", nw.logs, old.logs)
					t.Logf("chunk %d, ahead %v: %d stage_in launches, %d tokens, %d graph launches", chunk, ahead, fake.emu.stagedIn, nw.stats.Tokens, nw.stats.Graphs)
					if fake.emu.stagedIn == 0 || nw.stats.Graphs == 0 || (chunk == 0 && fake.emu.stagedIn != 2*nw.stats.Tokens) {
						t.Errorf("chunk %d, ahead %v: %d stage_in launches over %d tokens (%d graph launches), want 2 a decode token", chunk, ahead, fake.emu.stagedIn, nw.stats.Tokens, nw.stats.Graphs)
					}
				}
			}
		})
	}
	p := synth.Presets["tiny"]
	o := Options{MaxExpert: 3 * p.ExpertsUsed, Misses: MissMap}
	var on, off mappedRun
	on = runMapped(t, "tiny", quant.Q8_0, o, func(e *Engine, _ *fakeDriver) {
		if err := e.SetStageIn(true); err != nil {
			t.Fatal(err)
		}
	})
	off = runMapped(t, "tiny", quant.Q8_0, o, nil)
	sameLogits(t, "SetStageIn(true) against off", on.logs, off.logs)
	src := presetSource(t, "tiny", quant.Q8_0)
	for _, c := range []struct {
		what string
		o    Options
		skip string
	}{{"copy", Options{MaxExpert: 6, Misses: MissCopy}, ""}, {"map, no stage_in", Options{MaxExpert: 6, Misses: MissMap}, "stage_in"}} {
		dev, _ := newFakeDeviceMap(1<<30, fakeTarget, true)
		o := c.o
		o.CODir, o.Ctx, o.Budget, o.Reserve = fakeCODir(t, fakeTarget, c.skip), 64, 256<<20, 1<<20
		e, err := Load(dev, src, o)
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		if err := e.SetStageIn(true); err == nil {
			t.Errorf("%s: SetStageIn(true): no error", c.what)
		}
		o.StageIn = true
		if c.skip != "" { // asked for at load without the kernel: the load says why
			if _, err := Load(dev, src, o); err == nil {
				t.Errorf("%s: Options.StageIn: no error", c.what)
			}
		}
		e.Close()
	}
}
