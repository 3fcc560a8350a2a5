package cuda

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/strata-hip/strata/runtime/gpu"
)

// TestLauncherBound: launches through a bound gpu.Launcher reach the device in stream
// order (each fills the buffer with its own value; the last one's value is what comes
// back), a launch outside Begin/End still works, and a zero grid is refused.
func TestLauncherBound(t *testing.T) {
	_, d := openDriver(t)
	fn, s := loadOnStream(t, d, "test/fill", selftestPTX, "strata_selftest_fill_u32")
	const words = 1000
	buf, err := d.Alloc(4 * words)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	ln := d.NewLauncher(s)
	grid, block := gpu.Dim3{X: (words + 63) / 64, Y: 1, Z: 1}, gpu.Dim3{X: 64, Y: 1, Z: 1}
	fill := func(v uint32) error {
		a := fillArgs{P: uint64(buf.Ptr), N: words, V: v}
		return ln.Launch(fn, grid, block, unsafe.Slice((*byte)(unsafe.Pointer(&a)), unsafe.Sizeof(a)))
	}
	check := func(want uint32) {
		t.Helper()
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 4*words)
		if err := d.Download(got, buf.Ptr); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < words; i++ {
			if v := binary.LittleEndian.Uint32(got[4*i:]); v != want {
				t.Fatalf("word %d = %#x, want %#x", i, v, want)
			}
		}
	}
	if err := ln.Begin(); err != nil {
		t.Fatal(err)
	}
	for v := uint32(1); v <= 300; v++ {
		if err := fill(v); err != nil {
			t.Fatal(err)
		}
	}
	if err := ln.Launch(fn, gpu.Dim3{X: 0, Y: 1, Z: 1}, block, nil); err == nil {
		t.Fatal("a zero grid was launched")
	}
	ln.End()
	check(300)
	if err := fill(0xabc); err != nil { // unbound: the per-call path
		t.Fatal(err)
	}
	check(0xabc)
}

// BenchmarkLaunchBound is BenchmarkLaunch's gpu.Func.Launch row through a bound
// gpu.Launcher: the launch call without the per-call thread lock and cuCtxSetCurrent.
func BenchmarkLaunchBound(b *testing.B) {
	_, d := openDriver(b)
	fn, s := loadOnStream(b, d, "bench/empty", emptyArgs40PTX, "strata_empty_args40")
	args := make([]byte, 40)
	one, warp := gpu.Dim3{X: 1, Y: 1, Z: 1}, gpu.Dim3{X: 32, Y: 1, Z: 1}
	ln := d.NewLauncher(s)
	if err := ln.Begin(); err != nil {
		b.Fatal(err)
	}
	defer ln.End()
	b.ReportAllocs()
	b.ResetTimer() // the setup above (driver, module, stream) is not the launch
	for i := 0; i < b.N; i++ {
		if err := ln.Launch(fn, one, warp, args); err != nil {
			b.Fatal(err)
		}
		if i%256 == 255 {
			_ = s.Sync()
		}
	}
	_ = s.Sync()
}
