package cuda

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/strata-hip/strata/runtime/gpu"
)

func TestMissingLibrary(t *testing.T) {
	_, err := openLib([]string{"libcuda-strata-absent.so.1"})
	if err == nil || !errors.Is(err, gpu.ErrNoLibrary) {
		t.Fatalf("want an error matching gpu.ErrNoLibrary, got %v", err)
	}
	if !strings.Contains(err.Error(), "libcuda-strata-absent.so.1") {
		t.Fatalf("the error must name what was tried: %v", err)
	}
}

func TestMissingSymbol(t *testing.T) {
	// libc loads everywhere and has none of the driver's symbols.
	_, err := openLib([]string{"libc.so.6"})
	if err == nil || !strings.Contains(err.Error(), "libc.so.6 has no symbol cuInit") {
		t.Fatalf("want the missing symbol and library named, got %v", err)
	}
}

// open returns the first CUDA device, or skips (fails under STRATA_REQUIRE_GPU=1).
func open(t testing.TB) *gpu.Device {
	_, d := openDriver(t)
	return d
}

// openDriver returns the first CUDA device both as the backend's own driver and
// wrapped in a gpu.Device.
func openDriver(t testing.TB) (*device, *gpu.Device) {
	t.Helper()
	b := &backend{candidates: libraryNames()}
	skip := func(why string) {
		if os.Getenv("STRATA_REQUIRE_GPU") == "1" {
			t.Fatalf("STRATA_REQUIRE_GPU=1 but %s", why)
		}
		t.Skip(why)
	}
	if err := b.Load(); err != nil {
		skip(err.Error())
	}
	devs, err := b.Devices()
	if err != nil {
		skip(err.Error())
	}
	t.Logf("cuda devices: %+v", devs)
	drv, err := b.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	d := gpu.NewDevice(drv)
	t.Cleanup(func() { _ = d.Close() })
	return drv.(*device), d
}

// loadOnStream loads ptx on d as module name and returns its function sym and a new
// stream; both are released when the test or benchmark ends (before the device).
func loadOnStream(t testing.TB, d *gpu.Device, name, ptx, sym string) (*gpu.Func, *gpu.Stream) {
	t.Helper()
	mod, err := d.LoadModule(gpu.CodeObject{Name: name, Target: d.Info().Arch, Image: []byte(ptx)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mod.Unload() })
	fn, err := mod.Func(sym)
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Destroy() })
	return fn, s
}

// TestDevice runs the runtime end to end on a real device: copies both ways, a
// launch through extra, streams, events, and the mapped-memory proof.
func TestDevice(t *testing.T) {
	d := open(t)
	info := d.Info()
	if !strings.HasPrefix(info.Arch, "sm_") || info.TotalMem == 0 || info.PCIBusID == "" {
		t.Fatalf("incomplete device info: %+v", info)
	}
	const n = 1 << 20
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	buf, err := d.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	if err := d.Upload(buf.Ptr, src); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	if err := d.Download(got, buf.Ptr); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, src) {
		t.Fatal("round trip through device memory changed the bytes")
	}

	// Pinned async copies on a stream, timed with events.
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	h, err := d.HostAlloc(n, false)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Free()
	buf2, err := d.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer buf2.Free()
	e0, _ := d.NewEvent()
	e1, _ := d.NewEvent()
	defer e0.Destroy()
	defer e1.Destroy()
	if err := e0.Record(s); err != nil {
		t.Fatal(err)
	}
	if err := s.Copy(buf2.Ptr, buf.Ptr, n); err != nil {
		t.Fatal(err)
	}
	if err := s.Download(h, 0, buf2.Ptr, n); err != nil {
		t.Fatal(err)
	}
	if err := e1.Record(s); err != nil {
		t.Fatal(err)
	}
	if err := e1.WaitFor(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(h.Bytes(), src) {
		t.Fatal("device-to-device then async download changed the bytes")
	}
	if el, err := gpu.Elapsed(e0, e1); err != nil || el <= 0 {
		t.Fatalf("elapsed %v, %v", el, err)
	}

	// Mapped memory, proved by the self-test kernel. The engine's default miss path
	// (model/gpu MissAuto) maps only where CAN_MAP_HOST_MEMORY says the device can: a
	// device that proves a mapping must also report it (gpu-abi.md §9: 1 on the H200).
	if !info.CanMapHost {
		t.Errorf("%s reports CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY 0 (info error: %q)", info.Name, info.Err)
	}
	m, err := d.HostAlloc(4096, true)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	p, ok, err := m.Mapped()
	if !ok {
		t.Fatalf("mapped host memory not usable on %s: %v", info.Name, err)
	}
	t.Logf("mapped alias %#x, host %#x (equal: %v, unified addressing: %v)", uintptr(p), m.Ptr(), uintptr(p) == m.Ptr(), info.UnifiedAddressing)
}

// TestLoadModuleWrongTarget: a code object for another vendor's target, or for a compute
// capability above the device's, is refused before the driver sees it. (It used sm_1, which
// TargetMatches accepts on any newer device — PTX for a lower capability runs on a higher
// one — so the driver got the bytes and failed on the H200 in the session-5 final call.)
func TestLoadModuleWrongTarget(t *testing.T) {
	d := open(t)
	for _, target := range []string{"gfx1100", "sm_1000"} {
		_, err := d.LoadModule(gpu.CodeObject{Name: "bogus", Target: target, Image: []byte("x")})
		if err == nil || !strings.Contains(err.Error(), "is for "+target) {
			t.Fatalf("target %s: want a target mismatch error, got %v", target, err)
		}
	}
}

// TestRegister pins caller-owned memory (an anonymous mapping) and copies through it
// asynchronously, both ways. (Added after the 2026-11-29 H200 runs; not yet run on a GPU.)
func TestRegister(t *testing.T) {
	d := open(t)
	const n = 4 << 20
	mem, err := gpu.AllocAnon(n)
	if err != nil {
		t.Fatal(err)
	}
	defer gpu.FreeAnon(mem)
	for i := range mem {
		mem[i] = byte(i*7 + 3)
	}
	want := append([]byte(nil), mem...)
	h, err := d.Register(mem, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Register(mem, false); err == nil {
		t.Error("registering the same range twice must fail (CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)")
	}
	buf, err := d.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	if err := s.Upload(buf.Ptr, h, 0, n); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	clear(mem)
	if err := s.Download(h, 0, buf.Ptr, n); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mem, want) {
		t.Fatal("async copies through registered memory changed the bytes")
	}
	if err := h.Free(); err != nil {
		t.Fatal(err)
	}
}
