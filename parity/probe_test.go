package parity

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/runtime/gpu"
)

// The fill family (strata_fill_u32) is runtime/gpu's mapping probe: its whole contract is
// "p[i] = v for i < n, nothing else written", which these tests check exactly (no float
// bound, so it has no parity Family): on the CPU through the host simulation, and on a GPU
// through a mapping proven with it.

// fillCheck launches fn over n words at p (the probe's launch shape) and returns nil
// when the words [0, n) read v and the guard words after them still hold their poison;
// read gives the n+guard words after the launch.
func fillCheck(fn *gpu.Func, p gpu.DevPtr, n, guard int, v uint32, read func() ([]uint32, error)) error {
	a := abi.FillArgs{P: uint64(p), N: uint32(n), V: v}
	grid := gpu.Dim3{X: uint32((n + abi.FillThreads - 1) / abi.FillThreads), Y: 1, Z: 1}
	if err := fn.Launch(nil, grid, gpu.Dim3{X: abi.FillThreads, Y: 1, Z: 1}, 0, a.Bytes()); err != nil {
		return err
	}
	w, err := read()
	if err != nil {
		return err
	}
	for i, x := range w {
		if i < n && x != v {
			return fmt.Errorf("word %d of %d reads %#x, want %#x", i, n, x, v)
		}
		if i >= n && x != fillPoison {
			return fmt.Errorf("guard word %d (after %d filled) reads %#x, want the poison %#x", i, n, x, fillPoison)
		}
	}
	return nil
}

const fillPoison = 0xDEADBEEF

// TestFillHostSim runs the generated NVIDIA source of the fill family on the CPU (the
// host simulation of TestPrefillHostSim): word counts below, at and across the block size,
// each followed by poisoned guard words that must stay untouched.
func TestFillHostSim(t *testing.T) {
	cxx, target, root := hostSimTools(t)
	prelude := hostSimPrelude(t, root)
	bin := buildHostSim(t, cxx, root, target, "fill", prelude, "-O1")
	h := simHarness(t, bin, "fill", abi.SymFillU32)
	defer h.Close()
	fn, err := h.Mod.Func(abi.SymFillU32)
	if err != nil {
		t.Fatal(err)
	}
	const guard = 70
	for _, n := range []int{1, 63, 64, 65, 200} {
		buf, err := h.Dev.Alloc(uintptr(4 * (n + guard)))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Dev.Upload(buf.Ptr, poisonWords(n+guard)); err != nil {
			t.Fatal(err)
		}
		v := 0x5EC0DE42 + uint32(n)
		err = fillCheck(fn, buf.Ptr, n, guard, v, func() ([]uint32, error) {
			b := make([]byte, 4*(n+guard))
			err := h.Dev.Download(b, buf.Ptr)
			return words(b), err
		})
		if err != nil {
			t.Errorf("n=%d: %v", n, err)
		}
		if err := buf.Free(); err != nil {
			t.Fatal(err)
		}
	}
}

func poisonWords(n int) []byte {
	b := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], fillPoison)
	}
	return b
}

func words(b []byte) []uint32 {
	w := make([]uint32, len(b)/4)
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return w
}

// noBuiltinProbe is a real device's driver with its built-in mapping probe taken away, as
// HIP's driver is: FillWords fails and BuiltinProbe says there is none. A mapping on it
// is proven only by a registered probe, the path every AMD device takes.
type noBuiltinProbe struct{ gpu.Driver }

func (noBuiltinProbe) FillWords(gpu.DevPtr, int, uint32) error {
	return errors.New("parity: the built-in probe is withheld (as on HIP)")
}
func (noBuiltinProbe) BuiltinProbe() bool { return false }

// TestMappingProbeGPU proves mapped host memory on the selected GPU the way HIP does: the
// device's driver without its built-in probe, the generated strata_fill_u32 of the
// device's target (from STRATA_CO_DIR) registered with SetProbe. Unproven before the
// registration; proven after it, for runtime-allocated and for registered (caller-owned)
// memory; the kernel's stores through the alias reach exactly the host words [0, n) (n
// not a multiple of the block), and in device memory likewise; unloading its module
// unregisters it. Skips without a GPU or the fill code object; STRATA_REQUIRE_GPU=1
// makes that a failure.
func TestMappingProbeGPU(t *testing.T) {
	dir, have := codeObjects(t)
	dev, target := openBareDevice(t, have)
	if !dev.Info().CanMapHost {
		skipOrFail(t, "%s reports that it cannot map host memory", dev.Info().ID())
	}
	hb, err := dev.HostAlloc(1<<16, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := hb.Mapped(); ok || err == nil {
		t.Fatalf("proven without a probe (mapped %v, %v): the built-in probe was not withheld", ok, err)
	} else {
		t.Logf("before registering: %v", err)
	}
	if err := hb.Free(); err != nil {
		t.Fatal(err)
	}
	co, ok := abi.Find(target, "fill")
	if !ok {
		t.Fatalf("kernels/abi has no fill code object for %s", target)
	}
	img, err := os.ReadFile(filepath.Join(dir, co.Path))
	if err != nil {
		skipOrFail(t, "the fill code object: %v (build it with `just co`)", err)
	}
	mod, err := dev.LoadModule(gpu.CodeObject{Name: co.Path, Target: co.Target, Image: img})
	if err != nil {
		t.Fatal(err)
	}
	fn, err := mod.Func(abi.SymFillU32)
	if err != nil {
		t.Fatal(err)
	}
	dev.SetProbe(fn)

	const n, guard = 1000, 100
	hb, err = dev.HostAlloc(4*(n+guard), true)
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Free()
	alias, ok, err := hb.Mapped()
	if !ok {
		t.Fatalf("runtime-allocated memory not proven with the registered probe: %v", err)
	}
	copy(hb.Bytes(), poisonWords(n+guard))
	err = fillCheck(fn, alias, n, guard, 0xA5C3E10F, func() ([]uint32, error) {
		if err := dev.Synchronize(); err != nil { // the launch is asynchronous
			return nil, err
		}
		return words(hb.Bytes()), nil
	})
	if err != nil {
		t.Errorf("stores through the alias of host memory: %v", err)
	}

	mem, err := gpu.AllocAnon(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	defer gpu.FreeAnon(mem)
	rb, err := dev.Register(mem, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := rb.Mapped(); !ok {
		t.Errorf("registered memory not proven with the registered probe: %v", err)
	}
	if err := rb.Free(); err != nil {
		t.Fatal(err)
	}

	buf, err := dev.Alloc(4 * (n + guard))
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	if err := dev.Upload(buf.Ptr, poisonWords(n+guard)); err != nil {
		t.Fatal(err)
	}
	err = fillCheck(fn, buf.Ptr, n, guard, 0x0BADF00D, func() ([]uint32, error) {
		b := make([]byte, 4*(n+guard))
		err := dev.Download(b, buf.Ptr)
		return words(b), err
	})
	if err != nil {
		t.Errorf("stores into device memory: %v", err)
	}

	if err := mod.Unload(); err != nil {
		t.Fatal(err)
	}
	hb2, err := dev.HostAlloc(1<<16, true)
	if err != nil {
		t.Fatal(err)
	}
	defer hb2.Free()
	if _, ok, _ := hb2.Mapped(); ok {
		t.Error("proven after the probe's module was unloaded")
	}
	t.Logf("%s (%s): mapped host memory proven by the generated %s", dev.Info().ID(), dev.Info().Name, abi.SymFillU32)
}

// openBareDevice opens the device openDevice would select, but through its backend's
// Driver wrapped in noBuiltinProbe; it returns the device and its code-object target.
func openBareDevice(t *testing.T, have []string) (*gpu.Device, string) {
	t.Helper()
	l, err := gpu.Enumerate()
	if err != nil {
		skipOrFail(t, "%v", err)
	}
	ch, err := gpu.Select(l.Devices, gpu.Request{Device: os.Getenv("STRATA_DEVICE"), Have: have})
	if err != nil {
		skipOrFail(t, "%v (%v)", err, errors.Join(l.Problems()...))
	}
	info := l.Devices[ch.Index]
	for _, b := range gpu.Backends() {
		if b.Name() != info.Backend {
			continue
		}
		drv, err := b.Open(info.Ordinal)
		if err != nil {
			t.Fatal(err)
		}
		dev := gpu.NewDevice(noBuiltinProbe{drv})
		t.Cleanup(func() { _ = dev.Close() })
		t.Logf("device %s: %s, %s (built-in probe withheld)", info.ID(), info.Name, info.Arch)
		return dev, ch.Target
	}
	t.Fatalf("backend %s of %s is not registered", info.Backend, info.ID())
	return nil, ""
}
