package cuda

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/strata-hip/strata/runtime/gpu"
)

// Flags (cuda.h).
const (
	memHostAllocPortable  = 0x1
	memHostAllocDeviceMap = 0x2
	memHostRegPortable    = 0x1
	memHostRegDeviceMap   = 0x2
	streamNonBlocking     = 0x1
	eventDefault          = 0x0
)

// cuLaunchKernel extra keys (cuda.h): END is 0 here, unlike HIP's 3.
const (
	launchParamBufferPointer = 1
	launchParamBufferSize    = 2
	launchParamEnd           = 0
)

// device is one opened CUDA device: its primary context, bound on a locked OS thread
// around every call (the current context is per OS thread).
type device struct {
	b    *backend
	l    *lib
	info gpu.DeviceInfo
	dev  int32
	ctx  uintptr

	arena *gpu.LaunchArena // the launch's extra array and argument block
	// depPage holds a programmatic launch's CUlaunchConfig and attribute (pdl.go), used
	// under the arena's lock; nil where depCapable is false (no cuLaunchKernelEx, or before sm_90).
	depPage []byte

	selftestOnce sync.Once
	selftestMod  uintptr
	selftestFn   uintptr
	selftestErr  error
}

// bind locks the goroutine to its OS thread and makes the device's context current
// there; the returned function unlocks.
func (d *device) bind() (func(), error) {
	runtime.LockOSThread()
	r, _, _ := purego.SyscallN(d.l.cuCtxSetCurrent, d.ctx)
	if err := d.l.check(r, "cuCtxSetCurrent", d.info.ID()); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	return runtime.UnlockOSThread, nil
}

// call binds, runs one driver function and checks its status.
func (d *device) call(name, object string, fn uintptr, args ...uintptr) error {
	unlock, err := d.bind()
	if err != nil {
		return err
	}
	defer unlock()
	r, _, _ := purego.SyscallN(fn, args...)
	return d.l.check(r, name, object)
}

func (d *device) Info() gpu.DeviceInfo { return d.info }

func (d *device) Close() error {
	if d.selftestMod != 0 {
		_ = d.call("cuModuleUnload", "selftest", d.l.cuModuleUnload, d.selftestMod)
	}
	_ = d.arena.Free()
	if d.depPage != nil {
		_ = gpu.FreeAnon(d.depPage)
	}
	return d.b.release(d.info.Ordinal, d.dev)
}

func (d *device) MemInfo() (free, total uint64, err error) {
	unlock, err := d.bind()
	if err != nil {
		return 0, 0, err
	}
	defer unlock()
	var f, t uintptr
	r, _, _ := purego.SyscallN(d.l.cuMemGetInfo, uintptr(unsafe.Pointer(&f)), uintptr(unsafe.Pointer(&t)))
	return uint64(f), uint64(t), d.l.check(r, "cuMemGetInfo_v2", "")
}

func (d *device) Synchronize() error {
	return d.call("cuCtxSynchronize", "", d.l.cuCtxSynchronize)
}

func (d *device) Alloc(n uintptr) (gpu.DevPtr, error) {
	unlock, err := d.bind()
	if err != nil {
		return 0, err
	}
	defer unlock()
	var p uint64
	r, _, _ := purego.SyscallN(d.l.cuMemAlloc, uintptr(unsafe.Pointer(&p)), n)
	return gpu.DevPtr(p), d.l.check(r, "cuMemAlloc_v2", fmt.Sprintf("%d bytes", n))
}

func (d *device) Free(p gpu.DevPtr) error {
	return d.call("cuMemFree_v2", "", d.l.cuMemFree, uintptr(p))
}

func (d *device) Upload(dst gpu.DevPtr, src []byte) error {
	unlock, err := d.bind()
	if err != nil {
		return err
	}
	defer unlock()
	r, _, _ := purego.SyscallN(d.l.cuMemcpyHtoD, uintptr(dst), uintptr(unsafe.Pointer(unsafe.SliceData(src))), uintptr(len(src)))
	return d.l.check(r, "cuMemcpyHtoD_v2", fmt.Sprintf("%d bytes", len(src)))
}

func (d *device) Download(dst []byte, src gpu.DevPtr) error {
	unlock, err := d.bind()
	if err != nil {
		return err
	}
	defer unlock()
	r, _, _ := purego.SyscallN(d.l.cuMemcpyDtoH, uintptr(unsafe.Pointer(unsafe.SliceData(dst))), uintptr(src), uintptr(len(dst)))
	return d.l.check(r, "cuMemcpyDtoH_v2", fmt.Sprintf("%d bytes", len(dst)))
}

func (d *device) CopyAsync(kind gpu.CopyKind, dst, src, n, stream uintptr) error {
	obj := fmt.Sprintf("%d bytes", n)
	switch kind {
	case gpu.HostToDevice:
		return d.call("cuMemcpyHtoDAsync_v2", obj, d.l.cuMemcpyHtoDAsync, dst, src, n, stream)
	case gpu.DeviceToHost:
		return d.call("cuMemcpyDtoHAsync_v2", obj, d.l.cuMemcpyDtoHAsync, dst, src, n, stream)
	case gpu.DeviceToDevice:
		return d.call("cuMemcpyDtoDAsync_v2", obj, d.l.cuMemcpyDtoDAsync, dst, src, n, stream)
	}
	panic(fmt.Sprintf("cuda: unknown copy kind %d", kind))
}

func (d *device) MemsetAsync(dst gpu.DevPtr, v byte, n, stream uintptr) error {
	return d.call("cuMemsetD8Async", fmt.Sprintf("%d bytes", n), d.l.cuMemsetD8Async, uintptr(dst), uintptr(v), n, stream)
}

func (d *device) HostAlloc(n uintptr, mapped bool) (unsafe.Pointer, error) {
	flags := uintptr(memHostAllocPortable)
	if mapped {
		flags |= memHostAllocDeviceMap
	}
	unlock, err := d.bind()
	if err != nil {
		return nil, err
	}
	defer unlock()
	var p unsafe.Pointer
	r, _, _ := purego.SyscallN(d.l.cuMemHostAlloc, uintptr(unsafe.Pointer(&p)), n, flags)
	return p, d.l.check(r, "cuMemHostAlloc", fmt.Sprintf("%d bytes", n))
}

func (d *device) HostFree(p unsafe.Pointer) error {
	return d.call("cuMemFreeHost", "", d.l.cuMemFreeHost, uintptr(p))
}

func (d *device) HostRegister(p unsafe.Pointer, n uintptr, mapped bool) error {
	flags := uintptr(memHostRegPortable)
	if mapped {
		flags |= memHostRegDeviceMap
	}
	return d.call("cuMemHostRegister_v2", fmt.Sprintf("%d bytes", n), d.l.cuMemHostRegister, uintptr(p), n, flags)
}

func (d *device) HostUnregister(p unsafe.Pointer) error {
	return d.call("cuMemHostUnregister", "", d.l.cuMemHostUnregister, uintptr(p))
}

func (d *device) HostDevicePtr(p unsafe.Pointer) (gpu.DevPtr, error) {
	unlock, err := d.bind()
	if err != nil {
		return 0, err
	}
	defer unlock()
	var dp uint64
	r, _, _ := purego.SyscallN(d.l.cuMemHostGetDevPtr, uintptr(unsafe.Pointer(&dp)), uintptr(p), 0)
	return gpu.DevPtr(dp), d.l.check(r, "cuMemHostGetDevicePointer_v2", "")
}

func (d *device) LoadModule(image []byte, name string) (uintptr, error) {
	unlock, err := d.bind()
	if err != nil {
		return 0, err
	}
	defer unlock()
	var m uintptr
	r, _, _ := purego.SyscallN(d.l.cuModuleLoadDataEx, uintptr(unsafe.Pointer(&m)), uintptr(unsafe.Pointer(unsafe.SliceData(image))), 0, 0, 0)
	return m, d.l.check(r, "cuModuleLoadDataEx", name)
}

func (d *device) UnloadModule(m uintptr) error {
	return d.call("cuModuleUnload", "", d.l.cuModuleUnload, m)
}

func (d *device) Function(m uintptr, symbol string) (uintptr, error) {
	unlock, err := d.bind()
	if err != nil {
		return 0, err
	}
	defer unlock()
	var f uintptr
	name := append([]byte(symbol), 0)
	r, _, _ := purego.SyscallN(d.l.cuModuleGetFunction, uintptr(unsafe.Pointer(&f)), m, uintptr(unsafe.Pointer(&name[0])))
	return f, d.l.check(r, "cuModuleGetFunction", symbol)
}

// Launch is LaunchBound with the context bound for this one call.
func (d *device) Launch(fn uintptr, grid, block gpu.Dim3, shmem uint32, stream uintptr, args []byte, symbol string) error {
	unlock, err := d.bind()
	if err != nil {
		return err
	}
	defer unlock()
	return d.LaunchBound(fn, grid, block, shmem, stream, args, symbol)
}

func (d *device) StreamCreate() (uintptr, error) {
	unlock, err := d.bind()
	if err != nil {
		return 0, err
	}
	defer unlock()
	var s uintptr
	r, _, _ := purego.SyscallN(d.l.cuStreamCreate, uintptr(unsafe.Pointer(&s)), streamNonBlocking)
	return s, d.l.check(r, "cuStreamCreate", "")
}

func (d *device) StreamSync(s uintptr) error {
	return d.call("cuStreamSynchronize", "", d.l.cuStreamSynchronize, s)
}

func (d *device) StreamDestroy(s uintptr) error {
	return d.call("cuStreamDestroy_v2", "", d.l.cuStreamDestroy, s)
}

func (d *device) StreamWaitEvent(s, e uintptr) error {
	return d.call("cuStreamWaitEvent", "", d.l.cuStreamWaitEvent, s, e, 0)
}

func (d *device) EventCreate() (uintptr, error) {
	unlock, err := d.bind()
	if err != nil {
		return 0, err
	}
	defer unlock()
	var e uintptr
	r, _, _ := purego.SyscallN(d.l.cuEventCreate, uintptr(unsafe.Pointer(&e)), eventDefault)
	return e, d.l.check(r, "cuEventCreate", "")
}

func (d *device) EventRecord(e, s uintptr) error {
	return d.call("cuEventRecord", "", d.l.cuEventRecord, e, s)
}

func (d *device) EventSync(e uintptr) error {
	return d.call("cuEventSynchronize", "", d.l.cuEventSynchronize, e)
}

func (d *device) EventQuery(e uintptr) error {
	return d.call("cuEventQuery", "", d.l.cuEventQuery, e)
}

func (d *device) EventElapsed(start, end uintptr) (float32, error) {
	unlock, err := d.bind()
	if err != nil {
		return 0, err
	}
	defer unlock()
	var ms float32
	r, _, _ := purego.SyscallN(d.l.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), start, end)
	return ms, d.l.check(r, "cuEventElapsedTime", "")
}

func (d *device) EventDestroy(e uintptr) error {
	return d.call("cuEventDestroy_v2", "", d.l.cuEventDestroy, e)
}
