package cuda

import (
	"runtime"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/strata-hip/strata/runtime/gpu"
)

// emptyArgs40PTX is a kernel that does nothing with a 40-byte by-value argument
// (clang-19 PTX, as in bench/ceilings).
const emptyArgs40PTX = `.version 4.2
.target sm_50
.address_size 64

.visible .entry strata_empty_args40(
	.param .align 8 .b8 strata_empty_args40_param_0[40]
)
{
	ret;
}
`

// BenchmarkLaunch splits the host cost of one launch into its layers: the raw driver
// call through purego.SyscallN (thread already locked, context already current), the
// backend's Launch (lock, bind the context, copy the arguments into the arena), and
// gpu.Func.Launch (adds the poison check). The stream is synchronised every 256
// launches so the driver's queue never fills and the numbers stay host costs.
func BenchmarkLaunch(b *testing.B) {
	drv, d := openDriver(b)
	fn, s := loadOnStream(b, d, "bench/empty", emptyArgs40PTX, "strata_empty_args40")
	// The same kernel and a stream again, as the backend's own handles.
	img := append([]byte(emptyArgs40PTX), 0)
	rawMod, err := drv.LoadModule(img, "bench/empty")
	if err != nil {
		b.Fatal(err)
	}
	defer drv.UnloadModule(rawMod)
	h, err := drv.Function(rawMod, "strata_empty_args40")
	if err != nil {
		b.Fatal(err)
	}
	sh, err := drv.StreamCreate()
	if err != nil {
		b.Fatal(err)
	}
	defer drv.StreamDestroy(sh)
	args := make([]byte, 40)
	one, warp := gpu.Dim3{X: 1, Y: 1, Z: 1}, gpu.Dim3{X: 32, Y: 1, Z: 1}

	b.Run("gpu.Func.Launch", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := fn.Launch(s, one, warp, 0, args); err != nil {
				b.Fatal(err)
			}
			if i%256 == 255 {
				_ = s.Sync()
			}
		}
		_ = s.Sync()
	})
	b.Run("device.Launch", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := drv.Launch(h, one, warp, 0, sh, args, "strata_empty_args40"); err != nil {
				b.Fatal(err)
			}
			if i%256 == 255 {
				_ = drv.StreamSync(sh)
			}
		}
		_ = drv.StreamSync(sh)
	})
	b.Run("raw SyscallN", func(b *testing.B) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		purego.SyscallN(drv.l.cuCtxSetCurrent, drv.ctx)
		extra := rawExtra(b, drv, 40)
		for i := 0; i < b.N; i++ {
			r, _, _ := purego.SyscallN(drv.l.cuLaunchKernel, h, 1, 1, 1, 32, 1, 1, 0, sh, 0, extra)
			if r != 0 {
				b.Fatalf("cuLaunchKernel: %d", r)
			}
			if i%256 == 255 {
				purego.SyscallN(drv.l.cuStreamSynchronize, sh)
			}
		}
		purego.SyscallN(drv.l.cuStreamSynchronize, sh)
	})
}

// BenchmarkRoundTrip: one launch followed by a stream synchronisation, the latency a
// decode step pays when it waits for its result, split into the same layers as
// BenchmarkLaunch. Comparing "raw SyscallN" with the C baseline (bench/device) shows
// what Go and purego cost around a blocking driver call.
func BenchmarkRoundTrip(b *testing.B) {
	drv, d := openDriver(b)
	fn, s := loadOnStream(b, d, "bench/empty", emptyArgs40PTX, "strata_empty_args40")
	img := append([]byte(emptyArgs40PTX), 0)
	rawMod, err := drv.LoadModule(img, "bench/empty")
	if err != nil {
		b.Fatal(err)
	}
	defer drv.UnloadModule(rawMod)
	h, err := drv.Function(rawMod, "strata_empty_args40")
	if err != nil {
		b.Fatal(err)
	}
	sh, err := drv.StreamCreate()
	if err != nil {
		b.Fatal(err)
	}
	defer drv.StreamDestroy(sh)
	args := make([]byte, 40)
	one, warp := gpu.Dim3{X: 1, Y: 1, Z: 1}, gpu.Dim3{X: 32, Y: 1, Z: 1}

	b.Run("gpu", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := fn.Launch(s, one, warp, 0, args); err != nil {
				b.Fatal(err)
			}
			if err := s.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("device", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := drv.Launch(h, one, warp, 0, sh, args, "strata_empty_args40"); err != nil {
				b.Fatal(err)
			}
			if err := drv.StreamSync(sh); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw SyscallN", func(b *testing.B) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		purego.SyscallN(drv.l.cuCtxSetCurrent, drv.ctx)
		extra := rawExtra(b, drv, 40)
		for i := 0; i < b.N; i++ {
			if r, _, _ := purego.SyscallN(drv.l.cuLaunchKernel, h, 1, 1, 1, 32, 1, 1, 0, sh, 0, extra); r != 0 {
				b.Fatalf("cuLaunchKernel: %d", r)
			}
			if r, _, _ := purego.SyscallN(drv.l.cuStreamSynchronize, sh); r != 0 {
				b.Fatalf("cuStreamSynchronize: %d", r)
			}
		}
	})
	b.Run("raw SyscallN, sync by event polling", func(b *testing.B) {
		// cuEventQuery in a loop instead of the blocking synchronize: no blocking call.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		purego.SyscallN(drv.l.cuCtxSetCurrent, drv.ctx)
		e, err := drv.EventCreate()
		if err != nil {
			b.Fatal(err)
		}
		defer drv.EventDestroy(e)
		extra := rawExtra(b, drv, 40)
		for i := 0; i < b.N; i++ {
			purego.SyscallN(drv.l.cuLaunchKernel, h, 1, 1, 1, 32, 1, 1, 0, sh, 0, extra)
			purego.SyscallN(drv.l.cuEventRecord, e, sh)
			for {
				r, _, _ := purego.SyscallN(drv.l.cuEventQuery, e)
				if r == 0 {
					break
				}
				if r != cudaErrorNotReady {
					b.Fatalf("cuEventQuery: %d", r)
				}
			}
		}
	})
}

// rawExtra fills the device's launch arena with an extra array for n zero bytes of
// arguments and returns its address, for the raw-call benchmarks (which run alone, so
// the arena is not held while they use it).
func rawExtra(b *testing.B, drv *device, n int) uintptr {
	extra, err := drv.arena.Pack(make([]byte, n))
	if err != nil {
		b.Fatal(err)
	}
	drv.arena.Unlock()
	return extra
}
