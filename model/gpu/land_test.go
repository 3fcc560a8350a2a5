package gpu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/strata-hip/strata/model/gpu/synth"
	"github.com/strata-hip/strata/quant"
)

// landWatch checks, on the fake device, the order rules of landing (land.go) and of
// promotions (mapped.go) as the engine's work runs: at every moe_decode launch each slot
// table entry that names a slot points at a slot holding that expert's bytes (a landed
// expert is committed only once its bytes are there); at every expert_fetch launch no table
// entry names a slot of the device's landing list (no kernel reads a slot whose bytes are
// being replaced); no host-to-device copy goes into a slot of that list (promotions never
// target a reserved slot).
type landWatch struct {
	bad                     []string
	tableChecks, fetchCheck int
	landedSlots             map[int]bool // slots the landing list named at some expert_fetch
}

func (w *landWatch) install(eng *Engine, fake *fakeDriver) {
	c := &eng.cfg
	L, E, K := c.Layers, c.Experts, c.ExpertsUsed
	nTab := L * 3 * E
	tabAt := uint64(eng.mem.Ptr(bufTables))
	landAt := uint64(eng.mem.Ptr(bufAheadLand))
	size := eng.slot.total
	w.landedSlots = map[int]bool{}
	slotOf := func(a uint64) int { // −1: not in a slot
		for s := 0; s < eng.plan.Slots; s++ {
			if b := uint64(eng.mem.Slot(s)); a >= b && a < b+size {
				return s
			}
		}
		return -1
	}
	entry := func(i int) uint64 { return binary.LittleEndian.Uint64(fake.emu.at(tabAt+uint64(8*i), 8)) }
	landing := func() map[int]bool {
		out := map[int]bool{}
		for i := 0; i < L*K; i++ {
			if a := binary.LittleEndian.Uint64(fake.emu.at(landAt+uint64(8*i), 8)); a != 0 {
				s := slotOf(a)
				if s < 0 || a != uint64(eng.mem.Slot(s)) {
					w.bad = append(w.bad, fmt.Sprintf("landing list entry %d: %#x is not a slot", i, a))
					continue
				}
				if out[s] {
					w.bad = append(w.bad, fmt.Sprintf("landing list names slot %d twice", s))
				}
				out[s] = true
			}
		}
		return out
	}
	parts := []uint64{eng.slot.gate, eng.slot.up, eng.slot.down}
	fake.beforeH2D = func(dst, n, _ uintptr) {
		if s := slotOf(uint64(dst)); s >= 0 && landing()[s] {
			w.bad = append(w.bad, fmt.Sprintf("a copy into slot %d while the landing list names it", s))
		}
	}
	fake.beforeLaunch = func(sym string) {
		switch {
		case strings.Contains(sym, "expert_fetch"):
			w.fetchCheck++
			land := landing()
			for s := range land {
				w.landedSlots[s] = true
			}
			for i := 0; i < nTab; i++ {
				if s := slotOf(entry(i)); s >= 0 && land[s] {
					w.bad = append(w.bad, fmt.Sprintf("expert_fetch may land in slot %d, which table entry %d names", s, i))
				}
			}
		case strings.Contains(sym, "moe_decode"):
			w.tableChecks++
			for l := 0; l < L; l++ {
				for j := 0; j < 3; j++ {
					for x := 0; x < E; x++ {
						a := entry((l*3+j)*E + x)
						host := eng.hostAddr(l, x) + parts[j]
						if a == host {
							continue
						}
						s := slotOf(a)
						if s < 0 || a != uint64(eng.mem.Slot(s))+parts[j] {
							w.bad = append(w.bad, fmt.Sprintf("layer %d expert %d: entry neither its host copy nor a slot", l, x))
							continue
						}
						n := []uint64{eng.slot.up - eng.slot.gate, eng.slot.down - eng.slot.up, size - eng.slot.down}[j]
						want := eng.hostExp.Bytes()[host-uint64(eng.hostDev):][:n]
						if !bytes.Equal(fake.emu.at(a, int(n)), want) {
							w.bad = append(w.bad, fmt.Sprintf("layer %d expert %d: its slot %d holds other bytes", l, x, s))
						}
					}
				}
			}
		}
	}
}

// TestMapLand: landing (land.go) leaves the logits bitwise those of the look-ahead without
// it, on qwen3moe and qwen3next, at a small and a large cache, token by token and through
// the batched prompt path, also with every prediction wrong and with one landing slot a
// layer; expert_fetch lands predicted misses in reserved slots and promote commits them
// (Stats.Landed, hits even when no promotion copy ever completes); the order rules hold
// at every launch and copy (landWatch); the cache's owners and free slots stay consistent;
// runMapped checks the memory plan still accounts every allocation.
func TestMapLand(t *testing.T) {
	for _, preset := range []string{"tiny", "tiny-next"} {
		t.Run(preset, func(t *testing.T) {
			p := synth.Presets[preset]
			K := p.ExpertsUsed
			for _, chunk := range []int{0, 4} {
				for si, slots := range []int{3 * K, p.Layers * p.Experts / 2, p.Layers*p.Experts - 2} {
					o := Options{MaxExpert: slots, Chunk: chunk, Misses: MissMap, NoMapLand: true}
					base := runMapped(t, preset, quant.Q8_0, o, nil)
					// The default runs at every chunk and cache size; the other cases (each a
					// full run on the fake device) at the two caches where landing does the most
					// work, the slower ones token by token only (CI time, session 11).
					for _, c := range []struct {
						name     string
						land     int
						promote  bool
						wrong    bool
						notReady int
						every    bool // every chunk and cache size
						chunk0   bool // token by token only
					}{
						{"the default: land K, no promotions", 0, false, false, 0, true, false},
						{"land K, promotions", K, true, false, 0, false, false},
						{"land 1, promotions", 1, true, false, 0, false, true},
						{"land K, promotions, every prediction wrong", K, true, true, 0, false, true},
						{"land K, promotion copies never complete", K, true, false, 1 << 30, false, true},
					} {
						if !c.every && (si == 2 || (c.chunk0 && chunk != 0)) {
							continue
						}
						what := fmt.Sprintf("chunk %d, %d slots, %s", chunk, slots, c.name)
						var w landWatch
						var eng *Engine
						var fake *fakeDriver
						ol := o
						ol.MapLand, ol.NoMapLand, ol.LandPromote = c.land, false, c.promote
						r := runMappedOn(t, preset, quant.Q8_0, true, func(f *fakeDriver) { f.emu.fetchWrong = c.wrong; f.notReady = c.notReady }, ol, func(e *Engine, f *fakeDriver) {
							eng, fake = e, f
							w.install(e, f)
						})
						if c.wrong {
							wrongBase := runMappedOn(t, preset, quant.Q8_0, true, func(f *fakeDriver) { f.emu.fetchWrong = true }, o, nil)
							sameLogits(t, what+": against the look-ahead without landing (every prediction wrong)", r.logs, wrongBase.logs)
						}
						sameLogits(t, what+": against the look-ahead without landing", r.logs, base.logs)
						if len(w.bad) > 0 {
							t.Fatalf("%s: %d violations, first: %s", what, len(w.bad), w.bad[0])
						}
						cacheConsistent(t, eng.cache)
						s := r.stats
						t.Logf("%s: landed %d (emulator %d of %d fetched), reserved %d, slots landed in %d; hits %d misses %d copied %d B; without landing hits %d misses %d copied %d B; %d table checks, %d fetches",
							what, s.Landed, fake.emu.landed, fake.emu.fetched, s.LandReserved, len(w.landedSlots), s.Hits, s.Misses, s.CopiedBytes,
							base.stats.Hits, base.stats.Misses, base.stats.CopiedBytes, w.tableChecks, w.fetchCheck)
						if w.tableChecks == 0 || w.fetchCheck == 0 || int64(fake.emu.landed) < s.Landed {
							t.Errorf("%s: nothing checked, or more committed than landed", what)
						}
						if m := eng.landCap(); (m > 0) != (s.Landed > 0 && s.LandReserved > 0 && fake.emu.landed > 0) {
							t.Errorf("%s: %d landing slots a layer, yet landed %d, reserved %d", what, m, s.Landed, s.LandReserved)
						}
						if !c.promote && chunk == 0 && eng.landCap() > 0 && s.CopiedBytes != 0 { // landCap 0: promotions as without landing
							t.Errorf("%s: %d bytes promoted with landing alone", what, s.CopiedBytes)
						}
						if c.notReady > 0 && s.Landed > 0 && chunk == 0 && s.Hits == 0 {
							t.Errorf("%s: promotion copies never complete and landing made no hit", what)
						}
						if base.stats.Landed != 0 || base.stats.LandReserved != 0 {
							t.Errorf("%s: the run without landing landed %d", what, base.stats.Landed)
						}
					}
				}
			}
		})
	}
}

// TestMapLandSetter: SetMapLand takes 0..K on an engine with the look-ahead's buffers and
// refuses more, or any without them (NoMapAhead); off and on again on one engine give the
// same logits (the device's landing list is zeroed when a token runs without a fresh set).
func TestMapLandSetter(t *testing.T) {
	p := synth.Presets["tiny-next"]
	K := p.ExpertsUsed
	o := Options{MaxExpert: p.Layers*p.Experts - 2, Misses: MissMap, NoMapAhead: true}
	for _, bad := range []int{-1, K + 1} {
		o := o
		o.NoMapAhead, o.MapLand = false, bad
		dev, _ := newFakeDeviceMap(1<<30, fakeTarget, true)
		o.CODir, o.Ctx, o.Budget, o.Reserve = fakeCODir(t, fakeTarget), 64, 256<<20, 1<<20
		if e, err := Load(dev, presetSource(t, "tiny-next", quant.Q8_0), o); err == nil {
			e.Close()
			t.Errorf("Options.MapLand %d: loaded", bad)
		}
	}
	runMapped(t, "tiny-next", quant.Q8_0, o, func(e *Engine, _ *fakeDriver) {
		if err := e.SetMapLand(1); err == nil {
			t.Error("SetMapLand(1) with NoMapAhead: no error")
		}
		if err := e.SetMapLand(0); err != nil {
			t.Error(err)
		}
	})
	o.NoMapAhead, o.NoMapLand = false, true
	base := runMapped(t, "tiny-next", quant.Q8_0, o, nil)
	o.NoMapLand = false
	def := runMapped(t, "tiny-next", quant.Q8_0, o, func(e *Engine, _ *fakeDriver) {
		if e.landM != K || e.landPromote {
			t.Errorf("default: %d landing slots a layer (K = %d), promotions %v", e.landM, K, e.landPromote)
		}
	})
	sameLogits(t, "landing by default", def.logs, base.logs)
	if def.stats.Landed == 0 {
		t.Error("nothing landed by default")
	}
	var landed int64
	r := runMapped(t, "tiny-next", quant.Q8_0, o, func(e *Engine, _ *fakeDriver) {
		if err := e.SetMapLand(K + 1); err == nil {
			t.Errorf("SetMapLand(%d) with K = %d: no error", K+1, K)
		}
		if err := e.SetMapLand(K); err != nil {
			t.Fatal(err)
		}
		prompt := []int32{3, 1, 4, 1, 5}
		if _, err := e.Forward(prompt); err != nil {
			t.Fatal(err)
		}
		for i, on := range []bool{true, true, false, false, true, true} {
			n := 0
			if on {
				n = K
			}
			if err := e.SetMapLand(n); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Forward([]int32{int32(10 + i)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.ResetCache(); err != nil { // gives the reservation back
			t.Fatal(err)
		}
		if _, err := e.Forward([]int32{9, 8}); err != nil {
			t.Fatal(err)
		}
		if err := e.Reset(); err != nil {
			t.Fatal(err)
		}
		cacheConsistent(t, e.cache)
		landed = e.Stats().Landed
		e.ResetStats()
		if err := e.SetMapLand(K); err != nil {
			t.Fatal(err)
		}
	})
	sameLogits(t, "landing switched on and off before, then on", r.logs, base.logs)
	if landed == 0 || r.stats.Landed == 0 {
		t.Errorf("landed %d while switching, %d after", landed, r.stats.Landed)
	}
}
