package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/model/gpu/synth"
	"github.com/strata-hip/strata/quant"
	rt "github.com/strata-hip/strata/runtime/gpu"
)

// hipLikeDriver is the fake device as a backend without a built-in mapping probe (HIP):
// its FillWords fails as runtime/hip's does and BuiltinProbe says so, and it runs the fill
// family's strata_fill_u32 by the template's contract (kernels/templates/fill.tmpl: p[i] =
// v for i < n, one thread per word, blocks of FillThreads), through the device alias
// (the fake's alias is the host address). wrong makes the kernel store v^1, a probe that
// does not do what the proof checks.
type hipLikeDriver struct {
	*fakeDriver
	wrong        bool
	fills        int // launches of strata_fill_u32
	builtinFills int // calls of FillWords (the runtime's own probe; must not happen)
	badLaunch    error
}

func (h *hipLikeDriver) BuiltinProbe() bool { return false }

func (h *hipLikeDriver) FillWords(rt.DevPtr, int, uint32) error {
	h.builtinFills++
	return errors.New("fake hip: no built-in mapping-probe kernel")
}

func (h *hipLikeDriver) Launch(fn uintptr, grid, block rt.Dim3, shmem uint32, s uintptr, b []byte, sym string) error {
	if sym != abi.SymFillU32 {
		return h.fakeDriver.Launch(fn, grid, block, shmem, s, b, sym)
	}
	h.fills++
	if len(b) != abi.FillArgsSize {
		h.badLaunch = fmt.Errorf("%s launched with %d argument bytes, want %d", sym, len(b), abi.FillArgsSize)
		return h.badLaunch
	}
	a := args[abi.FillArgs](b) // the emulator's decoder; the layout is runtime/gpu TestProbeArgsMatchABI's
	if block != (rt.Dim3{X: abi.FillThreads, Y: 1, Z: 1}) || grid.Y != 1 || grid.Z != 1 || uint64(grid.X)*abi.FillThreads < uint64(a.N) {
		h.badLaunch = fmt.Errorf("%s launched with grid %v, block %v for %d words", sym, grid, block, a.N)
		return h.badLaunch
	}
	mem := h.hostAt(uintptr(a.P), 4*uintptr(a.N))
	if mem == nil {
		return &rt.Error{Backend: "fake", Call: "launch", Object: sym, Code: 700, Name: "IllegalAddress"}
	}
	v := a.V
	if h.wrong {
		v ^= 1
	}
	for i := 0; i < int(a.N); i++ {
		binary.LittleEndian.PutUint32(mem[4*i:], v)
	}
	return nil
}

// newHIPLikeDevice is a fake device that maps host memory, has no built-in probe, and
// emulates the engine's kernels.
func newHIPLikeDevice() (*rt.Device, *hipLikeDriver) {
	_, f := newFakeDeviceMap(1<<30, fakeTarget, true)
	f.emu = newEmu()
	h := &hipLikeDriver{fakeDriver: f}
	return rt.NewDevice(h), h
}

// withFill adds the fill family's (placeholder) code object to a fakeCODir directory.
func withFill(t *testing.T, dir string) string {
	t.Helper()
	co, ok := abi.Find(fakeTarget, probeFamily)
	if !ok {
		t.Fatalf("no %s code object for %s in kernels/abi", probeFamily, fakeTarget)
	}
	if err := os.WriteFile(filepath.Join(dir, co.Path), []byte("placeholder"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestMappingProbeRegistered: on a device whose runtime has no built-in mapping probe
// (as HIP), the engine registers the generated strata_fill_u32 right after loading its
// code objects, and that kernel's store is what proves the mapping:
//   - registered and correct: MissAuto maps (the runtime's own FillWords is never called),
//     the emulated kernels read missed experts through the mapping, and the logits are the
//     copy path's bit for bit; closing the engine unregisters the probe (its module is
//     unloaded), so a later proof on the device fails as before;
//   - a probe that stores the wrong value: the proof fails, auto copies and says why
//     (the word the host read back against the pattern), and MissMap refuses;
//   - no fill code object: auto copies, saying that no probe could be registered, and
//     MissMap refuses, naming it;
//   - the copy path loads no probe, and a device with a built-in probe gets none.
func TestMappingProbeRegistered(t *testing.T) {
	const preset = "tiny"
	slots := 3 * synth.Presets[preset].ExpertsUsed
	src := presetSource(t, preset, quant.Q8_0)
	opts := func(dir string, m MissMode) Options {
		return Options{CODir: dir, Ctx: 64, Budget: 256 << 20, Reserve: 1 << 20, Group: 2, MaxExpert: slots, Misses: m}
	}
	run := func(t *testing.T, e *Engine) [][]float32 {
		t.Helper()
		var logs [][]float32
		l, err := e.Forward([]int32{104, 101, 108, 108, 111})
		for tok := int32(7); err == nil && len(logs) < 4; tok = (tok*31 + 5) % 512 {
			logs = append(logs, l)
			l, err = e.Forward([]int32{tok})
		}
		if err != nil {
			t.Fatal(err)
		}
		return append(logs, l)
	}

	// The copy path, the reference: no probe is loaded or launched.
	dev, h := newHIPLikeDevice()
	e, err := Load(dev, src, opts(withFill(t, fakeCODir(t, fakeTarget)), MissCopy))
	if err != nil {
		t.Fatal(err)
	}
	want := run(t, e)
	if e.ks.mods[probeFamily] != nil || h.fills != 0 || h.builtinFills != 0 {
		t.Errorf("copy path: probe module loaded %v, %d probe launches, %d FillWords calls; want none", e.ks.mods[probeFamily] != nil, h.fills, h.builtinFills)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	t.Run("registered", func(t *testing.T) {
		dev, h := newHIPLikeDevice()
		e, err := Load(dev, src, opts(withFill(t, fakeCODir(t, fakeTarget)), MissAuto))
		if err != nil {
			t.Fatal(err)
		}
		if path, why := e.MissPath(); path != "map" {
			t.Fatalf("MissPath %q (%s), want map", path, why)
		}
		if h.fills == 0 || h.builtinFills != 0 || h.badLaunch != nil {
			t.Errorf("%d probe launches, %d FillWords calls (want ≥ 1 and 0); %v", h.fills, h.builtinFills, h.badLaunch)
		}
		got := run(t, e)
		sameLogits(t, "mapped through the registered probe vs copy", got, want)
		if h.emu.hostBytes == 0 {
			t.Error("no expert was read through the mapping")
		}
		if h.emu.err != nil {
			t.Fatal(h.emu.err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		hb, err := dev.HostAlloc(4096, true)
		if err != nil {
			t.Fatal(err)
		}
		defer hb.Free()
		if _, ok, err := hb.Mapped(); ok || err == nil || !strings.Contains(err.Error(), "no built-in mapping-probe kernel") {
			t.Errorf("after Close the probe is still registered: mapped %v, %v", ok, err)
		}
	})

	t.Run("wrong value", func(t *testing.T) {
		dev, h := newHIPLikeDevice()
		h.wrong = true
		var log strings.Builder
		o := opts(withFill(t, fakeCODir(t, fakeTarget)), MissAuto)
		o.Progress = &log
		e, err := Load(dev, src, o)
		if err != nil {
			t.Fatal(err)
		}
		path, why := e.MissPath()
		const reason = "reads 0x5ec0de43, want 0x5ec0de42: the mapping is not usable"
		if path != "copy" || !strings.Contains(why, reason) || !strings.Contains(log.String(), "expert misses: copy (auto: "+why+")") {
			t.Errorf("MissPath %q, reason %q (want copy, %q); load report:\n%s", path, why, reason, log.String())
		}
		if h.fills == 0 || h.builtinFills != 0 {
			t.Errorf("%d probe launches, %d FillWords calls", h.fills, h.builtinFills)
		}
		sameLogits(t, "auto after a failed proof vs copy", run(t, e), want)
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		dev, h = newHIPLikeDevice()
		h.wrong = true
		if _, err := Load(dev, src, opts(withFill(t, fakeCODir(t, fakeTarget)), MissMap)); err == nil || !strings.Contains(err.Error(), reason) {
			t.Errorf("MissMap with a wrong probe: %v, want %q", err, reason)
		} else if dev.Used() != 0 {
			t.Errorf("MissMap refused with %d bytes left allocated", dev.Used())
		}
	})

	t.Run("no fill code object", func(t *testing.T) {
		dev, h := newHIPLikeDevice()
		e, err := Load(dev, src, opts(fakeCODir(t, fakeTarget), MissAuto))
		if err != nil {
			t.Fatal(err)
		}
		path, why := e.MissPath()
		if path != "copy" || !strings.Contains(why, "could not register its own") || !strings.Contains(why, "kernel family fill") {
			t.Errorf("MissPath %q, reason %q: want copy, saying the fill code object is missing", path, why)
		}
		if h.fills != 0 || h.builtinFills != 0 {
			t.Errorf("%d probe launches, %d FillWords calls: nothing can prove a mapping, so nothing should try", h.fills, h.builtinFills)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		dev, _ = newHIPLikeDevice()
		_, err = Load(dev, src, opts(fakeCODir(t, fakeTarget), MissMap))
		if err == nil || !strings.Contains(err.Error(), "need a kernel that proves the mapping") || !strings.Contains(err.Error(), "kernel family fill") {
			t.Errorf("MissMap without a fill code object: %v", err)
		} else if dev.Used() != 0 {
			t.Errorf("MissMap refused with %d bytes left allocated", dev.Used())
		}
	})

	t.Run("built-in probe", func(t *testing.T) {
		dev, f := newFakeDeviceMap(1<<30, fakeTarget, true)
		e, err := Load(dev, src, opts(withFill(t, fakeCODir(t, fakeTarget)), MissAuto))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		if path, why := e.MissPath(); path != "map" {
			t.Fatalf("MissPath %q (%s), want map", path, why)
		}
		if e.ks.mods[probeFamily] != nil || f.launches[abi.SymFillU32] != 0 {
			t.Errorf("a device with a built-in probe got the engine's: module %v, %d launches", e.ks.mods[probeFamily] != nil, f.launches[abi.SymFillU32])
		}
	})
}
