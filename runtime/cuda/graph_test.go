package cuda

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/strata-hip/strata/runtime/gpu"
)

// TestGraphReplay: a captured fill and device-to-host copy replay as one graph; a node
// update changes the fill's value and grid (the fill is not grid-strided, so a smaller
// grid leaves the words past it as the previous replay wrote them).
func TestGraphReplay(t *testing.T) {
	_, d := openDriver(t)
	fn, s := loadOnStream(t, d, "test/fill", selftestPTX, "strata_selftest_fill_u32")
	const words = 1000
	buf, err := d.Alloc(4 * words)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	hb, err := d.HostAlloc(4*words, false)
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Free()
	ln := d.NewLauncher(s)
	if err := ln.CanCapture(); err != nil {
		t.Fatal(err)
	}
	if err := ln.Begin(); err != nil {
		t.Fatal(err)
	}
	defer ln.End()
	full, block := gpu.Dim3{X: (words + 63) / 64, Y: 1, Z: 1}, gpu.Dim3{X: 64, Y: 1, Z: 1}
	args := func(v uint32) []byte {
		a := fillArgs{P: uint64(buf.Ptr), N: words, V: v}
		return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&a)), unsafe.Sizeof(a))...)
	}
	if err := ln.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := ln.Launch(fn, full, block, args(1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Download(hb, 0, buf.Ptr, 4*words); err != nil {
		t.Fatal(err)
	}
	g, err := ln.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	check := func(want func(i int) uint32) {
		t.Helper()
		for i := range hb.Bytes() {
			hb.Bytes()[i] = 0xee
		}
		if err := g.Launch(); err != nil {
			t.Fatal(err)
		}
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < words; i++ {
			if v := binary.LittleEndian.Uint32(hb.Bytes()[4*i:]); v != want(i) {
				t.Fatalf("word %d = %#x, want %#x", i, v, want(i))
			}
		}
	}
	check(func(int) uint32 { return 1 })
	if _, err := g.Set(0, fn, gpu.Dim3{X: 1, Y: 1, Z: 1}, block, args(7)); err != nil {
		t.Fatal(err)
	}
	check(func(i int) uint32 {
		if i < 64 {
			return 7
		}
		return 1
	})
	if _, err := g.Set(0, fn, full, block, args(9)); err != nil {
		t.Fatal(err)
	}
	check(func(int) uint32 { return 9 })
}

// graphOfEmpty captures n launches of the empty kernel (a resident token's launch count).
func graphOfEmpty(b *testing.B, n int) (*gpu.Launcher, *gpu.Graph, *gpu.Func, *gpu.Stream, func()) {
	_, d := openDriver(b)
	fn, s := loadOnStream(b, d, "bench/empty", emptyArgs40PTX, "strata_empty_args40")
	ln := d.NewLauncher(s)
	if err := ln.Begin(); err != nil {
		b.Fatal(err)
	}
	if err := ln.BeginCapture(); err != nil {
		b.Fatal(err)
	}
	one, warp := gpu.Dim3{X: 1, Y: 1, Z: 1}, gpu.Dim3{X: 32, Y: 1, Z: 1}
	for i := 0; i < n; i++ {
		if err := ln.Launch(fn, one, warp, make([]byte, 40)); err != nil {
			b.Fatal(err)
		}
	}
	g, err := ln.EndCapture()
	if err != nil {
		b.Fatal(err)
	}
	return ln, g, fn, s, func() { g.Destroy(); ln.End() } // then loadOnStream's cleanups
}

// BenchmarkGraphLaunch675: one op is a graph of 675 empty launches, launched and waited
// for: the floor a resident token's graph replay adds (submission and the GPU's walk of
// the nodes), against BenchmarkBound675's 675 bound launches and a sync.
func BenchmarkGraphLaunch675(b *testing.B) {
	_, g, _, s, done := graphOfEmpty(b, 675)
	defer done()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := g.Launch(); err != nil {
			b.Fatal(err)
		}
		if err := s.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBound675: 675 bound launches of the empty kernel and a sync per op.
func BenchmarkBound675(b *testing.B) {
	ln, _, fn, s, done := graphOfEmpty(b, 1)
	defer done()
	one, warp := gpu.Dim3{X: 1, Y: 1, Z: 1}, gpu.Dim3{X: 32, Y: 1, Z: 1}
	args := make([]byte, 40)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < 675; j++ {
			if err := ln.Launch(fn, one, warp, args); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGraphSet: one op is one kernel node update with changed arguments (the
// per-token cost of each attention launch the engine updates).
func BenchmarkGraphSet(b *testing.B) {
	_, g, fn, _, done := graphOfEmpty(b, 675)
	defer done()
	one, warp := gpu.Dim3{X: 1, Y: 1, Z: 1}, gpu.Dim3{X: 32, Y: 1, Z: 1}
	args := make([]byte, 40)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		binary.LittleEndian.PutUint32(args, uint32(i+1))
		if changed, err := g.Set(i%675, fn, one, warp, args); err != nil || !changed {
			b.Fatal(err, changed)
		}
	}
}
