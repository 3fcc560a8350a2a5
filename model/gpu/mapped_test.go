package gpu

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-hip/strata/model/gpu/synth"
	"github.com/strata-hip/strata/quant"
)

// mappedRun is one emulated run for the mapped-miss tests: the logits after the prompt and
// after each of steps fixed tokens, the engine's stats and the fake's host bytes read.
type mappedRun struct {
	logs      [][]float32
	stats     Stats
	hostBytes int64
	mapped    bool
	resident  bool
	syncs     float64 // per token
}

// runMapped runs prompt (through the batched path when chunk > 0, and once more as a
// second batched prompt halfway) and steps decode tokens on an emulated fake device that
// maps host memory; check, when set, is called on the loaded engine before the first token.
func runMapped(t *testing.T, preset string, typ quant.Type, o Options, check func(*Engine, *fakeDriver)) mappedRun {
	t.Helper()
	return runMappedOn(t, preset, typ, true, nil, o, check)
}

// runMappedOn is runMapped on a fake device whose info says mapHost, after setup (when
// set) has configured the fake. It also checks the memory plan's accounting (issue 11,
// item 2): after Load the runtime's allocator holds exactly the plan's resident bytes and
// slots, and nothing is allocated on the device after that.
func runMappedOn(t *testing.T, preset string, typ quant.Type, mapHost bool, setup func(*fakeDriver), o Options, check func(*Engine, *fakeDriver)) mappedRun {
	t.Helper()
	src := presetSource(t, preset, typ)
	dev, fake := newFakeDeviceMap(1<<30, fakeTarget, mapHost)
	fake.emu = newEmu()
	if setup != nil {
		setup(fake)
	}
	o.CODir, o.Ctx, o.Budget, o.Reserve = fakeCODir(t, fakeTarget), 64, 256<<20, 1<<20
	if o.Group == 0 {
		o.Group = 2
	}
	eng, err := Load(dev, src, o)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if p := eng.Plan(); dev.Used() != p.ResidentBytes+uint64(p.Slots)*p.SlotBytes {
		t.Errorf("after Load %d bytes allocated, the plan accounts %d resident + %d slots of %d", dev.Used(), p.ResidentBytes, p.Slots, p.SlotBytes)
	}
	if check != nil {
		check(eng, fake)
	}
	allocs := len(fake.allocs)
	prompt := []int32{104, 101, 108, 108, 111, 32, 119}
	const steps = 8
	var r mappedRun
	l, err := eng.Forward(prompt)
	tok := int32(7)
	for i := 0; i < steps && err == nil; i++ {
		r.logs = append(r.logs, l)
		if i == steps/2 {
			l, err = eng.Forward([]int32{tok, (tok + 3) % 512, (tok + 9) % 512})
		} else {
			l, err = eng.Forward([]int32{tok})
		}
		tok = (tok*31 + 5) % 512
	}
	if err != nil {
		t.Fatal(err)
	}
	r.logs = append(r.logs, l)
	if n := len(fake.allocs); n != allocs { // the memory plan holds everything (issue 11, item 2)
		t.Errorf("%d device allocations after loading", n-allocs)
	}
	if fake.emu.err != nil {
		t.Fatal(fake.emu.err)
	}
	r.stats, r.hostBytes, r.mapped, r.resident = eng.Stats(), fake.emu.hostBytes, eng.mapped, eng.resident
	r.syncs = float64(r.stats.Syncs) / float64(r.stats.Tokens)
	return r
}

// TestEngineMappedMisses: with mapped misses (Options.Misses MissMap) the logits are
// bitwise those of the resident run and of the copy path, on qwen3moe and qwen3next, at
// cache sizes from the smallest the plan allows (MaxExpert 1: the plan's minimum, 2K) to
// half of all experts, token by token and through the batched prompt path; the mapped run
// takes the resident structure (one sync per token, graphs), reads missing experts through
// the host mapping, and still promotes experts into VRAM (hits once promotions commit),
// also with a promotion cap.
func TestEngineMappedMisses(t *testing.T) {
	for _, c := range []struct {
		preset string
		typ    quant.Type
	}{{"tiny", quant.Q8_0}, {"tiny-next", quant.Q4_K}} {
		t.Run(c.preset+"/"+c.typ.String(), func(t *testing.T) {
			p := synth.Presets[c.preset]
			K, all := p.ExpertsUsed, p.Layers*p.Experts
			resident := runMapped(t, c.preset, c.typ, Options{}, nil)
			if !resident.resident || resident.mapped {
				t.Fatalf("baseline: resident %v, mapped %v", resident.resident, resident.mapped)
			}
			for _, chunk := range []int{0, 4} {
				for _, r := range []struct {
					slots, promote int
					sync           bool
				}{{1, 0, false}, {3 * K, 0, false}, {all / 2, 0, false}, {3 * K, 1, false}, {3 * K, 0, true}} {
					copyRun := runMapped(t, c.preset, c.typ, Options{MaxExpert: r.slots, Chunk: chunk, Misses: MissCopy}, nil)
					mapRun := runMapped(t, c.preset, c.typ, Options{MaxExpert: r.slots, Chunk: chunk, Misses: MissMap, MapPromote: r.promote, SyncLookup: r.sync}, nil)
					what := func(s string) string {
						return fmt.Sprintf("%s: chunk %d, slots %d, promote %d, sync lookup %v", s, chunk, r.slots, r.promote, r.sync)
					}
					if chunk == 0 {
						sameLogits(t, what("copy vs resident"), copyRun.logs, resident.logs)
						sameLogits(t, what("map vs resident"), mapRun.logs, resident.logs)
					} else { // the batched path's own fallbacks depend on the slots: compare the two paths
						sameLogits(t, what("map vs copy, batched"), mapRun.logs, copyRun.logs)
					}
					s := mapRun.stats
					t.Logf("chunk %d, %d slots, promote %d, sync %v: map hits %d misses %d copied %d B, host reads %d B, %.2f syncs/token, %d graphs; copy hits %d misses %d, %.2f syncs/token",
						chunk, r.slots, r.promote, r.sync, s.Hits, s.Misses, s.CopiedBytes, mapRun.hostBytes, mapRun.syncs, s.Graphs,
						copyRun.stats.Hits, copyRun.stats.Misses, copyRun.syncs)
					if !mapRun.mapped || mapRun.resident {
						t.Fatalf("%s: mapped %v, resident %v", what("map"), mapRun.mapped, mapRun.resident)
					}
					if mapRun.hostBytes == 0 || s.Misses == 0 || (s.CopiedBytes == 0 && s.Landed == 0) { // landing (land.go, where the cache has room for it) replaces promotions
						t.Errorf("%s: %d bytes read through the mapping, %d misses, %d bytes promoted, %d experts landed", what("map"), mapRun.hostBytes, s.Misses, s.CopiedBytes, s.Landed)
					}
					// At 2K slots and below a token's lookups evict every promotion of the
					// token before (more experts per token than slots) before it commits.
					if r.slots >= 3*K && s.Hits == 0 {
						t.Errorf("%s: no hit: promotions never committed", what("map"))
					}
					if chunk == 0 {
						if mapRun.syncs != 1 || s.Graphs == 0 {
							t.Errorf("%s: %.2f syncs per token, %d graph launches: want the resident structure", what("map"), mapRun.syncs, s.Graphs)
						}
						if copyRun.syncs <= float64(p.Layers) {
							t.Errorf("%s: copy path %.2f syncs per token, want one per layer", what("copy"), copyRun.syncs)
						}
					}
					if chunk == 0 && r.promote > 0 && s.CopiedBytes > int64(r.promote)*int64(s.Tokens)*int64(mapRunSlotBytes(t, c.preset, c.typ)) {
						t.Errorf("%s: %d bytes promoted over %d tokens, cap %d experts per token", what("map"), s.CopiedBytes, s.Tokens, r.promote)
					}
				}
			}
		})
	}
}

// mapRunSlotBytes is an expert slot's size for preset at typ.
func mapRunSlotBytes(t *testing.T, preset string, typ quant.Type) uint64 {
	p := synth.Presets[preset]
	rbH, err := typ.RowBytes(p.Embd)
	if err != nil {
		t.Fatal(err)
	}
	rbF, err := typ.RowBytes(p.ExpertFF)
	if err != nil {
		t.Fatal(err)
	}
	return slotLayout([3]uint64{uint64(p.ExpertFF * rbH), uint64(p.ExpertFF * rbH), uint64(p.Embd * rbF)}).total
}

// TestMappedPromotionOrder checks the ordering of promotions and evictions (mapped.go) as
// the fake device runs the work (in issue order, which is the streams' order here): no
// expert copy writes a slot that a slot-table entry on the device points into; at every
// moe_decode launch every entry that points into a slot finds the bytes of its own expert
// there, and every other entry points at the expert's own host copy; and while the copy
// events report not ready, no promotion is committed (no hit, every read from the host) and
// no second batch is issued (back-pressure), while with completed copies promotions commit.
// The fake runs work as it is issued, so the copy stream's wait for the table upload (2) is
// checked as the record and wait calls between the upload and the copies.
func TestMappedPromotionOrder(t *testing.T) {
	for _, preset := range []string{"tiny", "tiny-next"} {
		t.Run(preset, func(t *testing.T) {
			p := synth.Presets[preset]
			E := p.Experts
			for _, c := range []struct {
				late, wait bool
				notReady   int
			}{{false, false, 0}, {false, false, 1 << 30}, {true, false, 0}, {true, false, 1 << 30}, {true, true, 0}, {true, true, 7}} {
				notReady := c.notReady
				var bad []string
				var copies, checks int
				r := runMapped(t, preset, quant.Q8_0, Options{MaxExpert: p.Layers * E / 2, Misses: MissMap, NoMapLand: true}, func(eng *Engine, fake *fakeDriver) { // promotions (landing: TestMapLand)
					fake.notReady = notReady
					if err := eng.SetLateBatch(c.late, c.wait); err != nil { // hostgap.go: the batch issued after the next launch
						t.Fatal(err)
					}
					nTab := p.Layers * 3 * E
					tabAt := uint64(eng.mem.Ptr(bufTables))
					first, size := uint64(eng.mem.Slot(0)), eng.slot.total
					slotOf := func(a uint64) int { // −1: not in a slot
						for s := 0; s < eng.plan.Slots; s++ {
							if b := uint64(eng.mem.Slot(s)); a >= b && a < b+size {
								return s
							}
						}
						return -1
					}
					entry := func(i int) uint64 { return binary.LittleEndian.Uint64(fake.emu.at(tabAt+uint64(8*i), 8)) }
					parts := []uint64{eng.slot.gate, eng.slot.up, eng.slot.down}
					// The fake runs each stream's work as it is issued, so the cross-stream
					// order (2) is checked as the calls that make it: after a table upload, an
					// event recorded on the upload's stream and a wait for it on another
					// stream come before the next copy into a slot.
					var due, recorded bool // a table upload not yet waited for, on tabStream
					var tabStream uintptr
					fake.onRecord = func(s uintptr) { recorded = recorded || (due && s == tabStream) }
					fake.onWait = func(s uintptr) {
						if recorded && s != tabStream {
							due, recorded = false, false
						}
					}
					fake.beforeH2D = func(dst, n, stream uintptr) {
						if uint64(dst) >= tabAt && uint64(dst) < tabAt+uint64(8*nTab) {
							due, recorded, tabStream = true, false, stream
							return
						}
						s := slotOf(uint64(dst))
						if s < 0 || n != uintptr(size) || uint64(dst) < first {
							return
						}
						copies++
						if due {
							bad = append(bad, "a copy into slot "+strconv.Itoa(s)+" not ordered after the table upload before it")
						}
						for i := 0; i < nTab; i++ {
							if slotOf(entry(i)) == s {
								bad = append(bad, "a copy into slot "+strconv.Itoa(s)+" while a table entry points into it")
								return
							}
						}
					}
					fake.beforeLaunch = func(sym string) {
						if !strings.Contains(sym, "moe_decode") {
							return
						}
						checks++
						for l := 0; l < p.Layers; l++ {
							for j := 0; j < 3; j++ {
								for x := 0; x < E; x++ {
									a := entry((l*3+j)*E + x)
									host := eng.hostAddr(l, x) + parts[j]
									if a == host {
										continue
									}
									s := slotOf(a)
									if s < 0 || a != uint64(eng.mem.Slot(s))+parts[j] {
										bad = append(bad, "layer "+strconv.Itoa(l)+" expert "+strconv.Itoa(x)+": entry neither its host copy nor a slot")
										continue
									}
									want := eng.hostExp.Bytes()[host-uint64(eng.hostDev):][:size-parts[j]]
									got := fake.emu.at(a, int(size-parts[j]))
									n := []uint64{eng.slot.up - eng.slot.gate, eng.slot.down - eng.slot.up, size - eng.slot.down}[j]
									if !bytes.Equal(got[:n], want[:n]) {
										bad = append(bad, "layer "+strconv.Itoa(l)+" expert "+strconv.Itoa(x)+": its slot holds other bytes")
									}
								}
							}
						}
					}
				})
				if len(bad) > 0 {
					t.Fatalf("late %v (wait %v), not ready %d: %d violations, first: %s", c.late, c.wait, notReady, len(bad), bad[0])
				}
				s := r.stats
				t.Logf("late %v (wait %v), not ready %d: %d slot copies, %d launches checked; hits %d, misses %d; batches %d, held %d", c.late, c.wait, notReady, copies, checks, s.Hits, s.Misses, s.MapBatches, s.MapHeld)
				if copies == 0 || checks == 0 {
					t.Fatalf("nothing checked: %d copies, %d launches", copies, checks)
				}
				if c.wait { // the lookup waits for the batch issued after the launch: it never holds back
					if s.MapHeld != 0 || s.Hits == 0 {
						t.Errorf("late batch: %d lookups held back, %d hits", s.MapHeld, s.Hits)
					}
					continue
				}
				if notReady > 0 && s.MapHeld == 0 {
					t.Errorf("copies never reported done, yet no lookup held back")
				}
				if notReady > 0 && s.Hits != 0 {
					t.Errorf("copies never reported done, yet %d hits: a promotion was committed early", s.Hits)
				}
				if notReady > 0 && copies > p.Layers*p.ExpertsUsed { // back-pressure: one token's batch in flight at most
					t.Errorf("copies never reported done, yet %d copies issued (one token uses %d experts)", copies, p.Layers*p.ExpertsUsed)
				}
				if notReady == 0 && s.Hits == 0 {
					t.Errorf("copies done, yet no hit")
				}
			}
		})
	}
}

// TestMappedMissesRefused: a device that cannot map host memory, or a host that cannot
// pin every expert, refuses MissMap with a message that names the cause and the way
// out, and leaves nothing allocated; prefetch with it is refused too.
func TestMappedMissesRefused(t *testing.T) {
	src := tinySource(t, quant.Q8_0)
	for _, c := range []struct {
		mapHost   bool
		hostLimit uintptr
		prefetch  bool
		want      string
	}{
		{false, 0, false, "cannot (use --expert-misses copy or auto)"},
		{true, 1 << 20, false, "need every expert in mapped pinned host memory: pinning every expert"},
		{true, 0, true, "prefetch and mapped expert misses exclude each other"},
	} {
		dev, fake := newFakeDeviceMap(1<<30, fakeTarget, c.mapHost)
		fake.hostLimit = c.hostLimit
		_, err := Load(dev, src, Options{CODir: fakeCODir(t, fakeTarget), Ctx: 64, Budget: 256 << 20, Reserve: 1 << 20, MaxExpert: 8, Misses: MissMap, Prefetch: c.prefetch})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%+v: got %v, want %q", c, err, c.want)
		}
		if errors.Is(err, ErrMissingKernel) {
			t.Errorf("%+v: %v is not a missing kernel", c, err)
		}
		if dev.Used() != 0 {
			t.Errorf("%+v: %d bytes left allocated", c, dev.Used())
		}
		t.Logf("%v", err)
	}
	dev, _ := newFakeDeviceMap(1<<30, fakeTarget, true)
	_, err := Load(dev, src, Options{CODir: fakeCODir(t, fakeTarget), Ctx: 64, Budget: 256 << 20, Reserve: 1 << 20, MaxExpert: 8, Misses: MissCopy, MapPromote: 4})
	if err == nil || !strings.Contains(err.Error(), "without mapped misses has no effect") {
		t.Fatalf("a promotion cap on the copy path: got %v", err)
	}
}

// TestMissesAuto: Options.Misses MissAuto (the zero value, strata-run's default) maps where
// the device reports that it can map host memory and the mapped pinning of every expert and
// its proof succeed, and copies otherwise, saying why once in the load's report and in
// Engine.MissPath. Either way the logits are the resident run's bits token by token and the
// device holds exactly the plan's allocations, none made after Load (runMappedOn); where
// auto copies because mapping cannot work, an explicit MissMap fails saying why and leaves
// nothing allocated.
func TestMissesAuto(t *testing.T) {
	const preset = "tiny"
	p := synth.Presets[preset]
	slots := 3 * p.ExpertsUsed
	resident := runMapped(t, preset, quant.Q8_0, Options{Misses: MissCopy}, nil)
	for _, c := range []struct {
		name                 string
		mapHost              bool
		pinFails, proofFails bool
		prefetch             bool
		slots                int // 0: the plan's (every expert fits)
		wantMap              bool
		why, mapErr          string // in the reason auto reports; in MissMap's load error ("": it loads)
	}{
		{"supported", true, false, false, false, slots, true, "", ""},
		{"attribute says no", false, false, false, false, slots, false, "reports that it cannot map pinned host memory", "cannot (use --expert-misses copy or auto)"},
		{"mapped pinning fails", true, true, false, false, slots, false, "pinning every expert", "mapped failed: fake: hostalloc mapped"},
		{"proof fails", true, false, true, false, slots, false, "cannot read the pinned experts through their mapping", "cannot read the pinned experts through their mapping"},
		{"prefetch", true, false, false, true, slots, false, "look-ahead prefetch", "exclude each other"},
		{"every expert fits", true, false, false, false, 0, false, "every expert has a VRAM slot", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			setup := func(f *fakeDriver) { f.mapPinFails, f.proofFails = c.pinFails, c.proofFails }
			var log strings.Builder
			var path, why string
			r := runMappedOn(t, preset, quant.Q8_0, c.mapHost, setup, Options{MaxExpert: c.slots, Prefetch: c.prefetch, Progress: &log}, func(e *Engine, _ *fakeDriver) {
				path, why = e.MissPath()
			})
			sameLogits(t, c.name+": auto vs resident", r.logs, resident.logs)
			if r.mapped != c.wantMap || (path == "map") != c.wantMap {
				t.Fatalf("mapped %v, MissPath %q, want mapped %v", r.mapped, path, c.wantMap)
			}
			if c.wantMap && (r.hostBytes == 0 || r.syncs != 1) {
				t.Errorf("mapped: %d bytes read through the mapping, %.2f syncs per token", r.hostBytes, r.syncs)
			}
			if !c.wantMap && (why == "" || !strings.Contains(why, c.why)) {
				t.Errorf("MissPath's reason %q, want it to contain %q", why, c.why)
			}
			if c.wantMap && why != "" {
				t.Errorf("mapped, yet a reason %q", why)
			}
			line := "expert misses: map"
			if !c.wantMap {
				line = "expert misses: copy (auto: " + why + ")"
			}
			if n := strings.Count(log.String(), "expert misses:"); n != 1 || !strings.Contains(log.String(), line) {
				t.Errorf("the load's report has %d miss lines, want one with %q:\n%s", n, line, log.String())
			}
			t.Logf("%s: %s", c.name, line)
			if c.mapErr == "" {
				return
			}
			dev, fake := newFakeDeviceMap(1<<30, fakeTarget, c.mapHost)
			setup(fake)
			_, err := Load(dev, presetSource(t, preset, quant.Q8_0), Options{CODir: fakeCODir(t, fakeTarget), Ctx: 64, Budget: 256 << 20, Reserve: 1 << 20,
				MaxExpert: c.slots, Prefetch: c.prefetch, Misses: MissMap})
			if err == nil || !strings.Contains(err.Error(), c.mapErr) {
				t.Fatalf("MissMap: got %v, want %q", err, c.mapErr)
			}
			if dev.Used() != 0 {
				t.Errorf("MissMap refused with %d bytes left allocated", dev.Used())
			}
		})
	}
}
