package hip

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/strata-hip/strata/runtime/gpu"
)

// Flags and enums (hip_runtime_api.h; gpu-abi.md §5).
const (
	hostMallocPortable = 0x1
	hostMallocMapped   = 0x2
	hostRegPortable    = 0x1
	hostRegMapped      = 0x2
	streamNonBlocking  = 0x1
	eventDefault       = 0x0
	memcpyHostToDevice = 1
	memcpyDeviceToHost = 2
	memcpyDeviceToDev  = 3
	launchParamBufPtr  = 1
	launchParamBufSize = 2
	launchParamEnd     = 3 // HIP's terminator; CUDA's is 0. clr checks all five slots.
)

// device is one opened HIP device. The current device and the last error are per OS
// thread, so every call locks the thread, selects the device, calls, checks, drains.
type device struct {
	l    *lib
	info gpu.DeviceInfo
	ord  int

	arena *gpu.LaunchArena // the launch's extra array and argument block
}

func (d *device) bind() (func(), error) {
	runtime.LockOSThread()
	r, _, _ := purego.SyscallN(d.l.hipSetDevice, uintptr(d.ord))
	if err := d.l.check(r, "hipSetDevice", d.info.ID()); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	return runtime.UnlockOSThread, nil
}

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
func (d *device) Close() error         { return d.arena.Free() }

func (d *device) MemInfo() (free, total uint64, err error) {
	unlock, err := d.bind()
	if err != nil {
		return 0, 0, err
	}
	defer unlock()
	var f, t uintptr
	r, _, _ := purego.SyscallN(d.l.hipMemGetInfo, uintptr(unsafe.Pointer(&f)), uintptr(unsafe.Pointer(&t)))
	return uint64(f), uint64(t), d.l.check(r, "hipMemGetInfo", "")
}

func (d *device) Synchronize() error {
	return d.call("hipDeviceSynchronize", "", d.l.hipDeviceSynchronize)
}

func (d *device) Alloc(n uintptr) (gpu.DevPtr, error) {
	unlock, err := d.bind()
	if err != nil {
		return 0, err
	}
	defer unlock()
	var p uintptr
	r, _, _ := purego.SyscallN(d.l.hipMalloc, uintptr(unsafe.Pointer(&p)), n)
	return gpu.DevPtr(p), d.l.check(r, "hipMalloc", fmt.Sprintf("%d bytes", n))
}

func (d *device) Free(p gpu.DevPtr) error { return d.call("hipFree", "", d.l.hipFree, uintptr(p)) }

func (d *device) Upload(dst gpu.DevPtr, src []byte) error {
	unlock, err := d.bind()
	if err != nil {
		return err
	}
	defer unlock()
	r, _, _ := purego.SyscallN(d.l.hipMemcpyHtoD, uintptr(dst), uintptr(unsafe.Pointer(unsafe.SliceData(src))), uintptr(len(src)))
	return d.l.check(r, "hipMemcpyHtoD", fmt.Sprintf("%d bytes", len(src)))
}

func (d *device) Download(dst []byte, src gpu.DevPtr) error {
	unlock, err := d.bind()
	if err != nil {
		return err
	}
	defer unlock()
	r, _, _ := purego.SyscallN(d.l.hipMemcpyDtoH, uintptr(unsafe.Pointer(unsafe.SliceData(dst))), uintptr(src), uintptr(len(dst)))
	return d.l.check(r, "hipMemcpyDtoH", fmt.Sprintf("%d bytes", len(dst)))
}

func (d *device) CopyAsync(kind gpu.CopyKind, dst, src, n, stream uintptr) error {
	k := map[gpu.CopyKind]uintptr{gpu.HostToDevice: memcpyHostToDevice, gpu.DeviceToHost: memcpyDeviceToHost, gpu.DeviceToDevice: memcpyDeviceToDev}[kind]
	if k == 0 {
		panic(fmt.Sprintf("hip: unknown copy kind %d", kind))
	}
	return d.call("hipMemcpyAsync", fmt.Sprintf("%d bytes", n), d.l.hipMemcpyAsync, dst, src, n, k, stream)
}

func (d *device) MemsetAsync(dst gpu.DevPtr, v byte, n, stream uintptr) error {
	return d.call("hipMemsetAsync", fmt.Sprintf("%d bytes", n), d.l.hipMemsetAsync, uintptr(dst), uintptr(v), n, stream)
}

func (d *device) HostAlloc(n uintptr, mapped bool) (unsafe.Pointer, error) {
	flags := uintptr(hostMallocPortable)
	if mapped {
		flags |= hostMallocMapped
	}
	unlock, err := d.bind()
	if err != nil {
		return nil, err
	}
	defer unlock()
	var p unsafe.Pointer
	r, _, _ := purego.SyscallN(d.l.hipHostMalloc, uintptr(unsafe.Pointer(&p)), n, flags)
	return p, d.l.check(r, "hipHostMalloc", fmt.Sprintf("%d bytes", n))
}

func (d *device) HostFree(p unsafe.Pointer) error {
	return d.call("hipHostFree", "", d.l.hipHostFree, uintptr(p))
}

func (d *device) HostRegister(p unsafe.Pointer, n uintptr, mapped bool) error {
	flags := uintptr(hostRegPortable)
	if mapped {
		flags |= hostRegMapped
	}
	return d.call("hipHostRegister", fmt.Sprintf("%d bytes", n), d.l.hipHostRegister, uintptr(p), n, flags)
}

func (d *device) HostUnregister(p unsafe.Pointer) error {
	return d.call("hipHostUnregister", "", d.l.hipHostUnregister, uintptr(p))
}

func (d *device) HostDevicePtr(p unsafe.Pointer) (gpu.DevPtr, error) {
	unlock, err := d.bind()
	if err != nil {
		return 0, err
	}
	defer unlock()
	var dp uintptr
	r, _, _ := purego.SyscallN(d.l.hipHostGetDevicePointer, uintptr(unsafe.Pointer(&dp)), uintptr(p), 0)
	return gpu.DevPtr(dp), d.l.check(r, "hipHostGetDevicePointer", "")
}

// FillWords has no built-in kernel on HIP: one would need a code object for every AMD
// target, and a runtime fill (hipMemsetD32) is no proof, since ROCclr may serve a fill
// of host memory from the host. The proof runs a probe registered with
// gpu.Device.SetProbe instead (model/gpu registers the generated strata_fill_u32 of the
// device's target); without one, mapped memory stays unproven and callers copy.
func (d *device) FillWords(gpu.DevPtr, int, uint32) error {
	return errors.New("hip: no built-in mapping-probe kernel, and none is registered (gpu.Device.SetProbe; the GPU engine registers the fill code object's strata_fill_u32): mapped host memory is not used")
}

// BuiltinProbe is false: FillWords has no kernel of its own (see FillWords).
func (d *device) BuiltinProbe() bool { return false }

var _ gpu.ProbeDriver = (*device)(nil)

// LoadModule loads a code object for this device (HIP builds only for the current
// device, so bind selects it first).
func (d *device) LoadModule(image []byte, name string) (uintptr, error) {
	unlock, err := d.bind()
	if err != nil {
		return 0, err
	}
	defer unlock()
	var m uintptr
	r, _, _ := purego.SyscallN(d.l.hipModuleLoadData, uintptr(unsafe.Pointer(&m)), uintptr(unsafe.Pointer(unsafe.SliceData(image))))
	return m, d.l.check(r, "hipModuleLoadData", name)
}

func (d *device) UnloadModule(m uintptr) error {
	return d.call("hipModuleUnload", "", d.l.hipModuleUnload, m)
}

func (d *device) Function(m uintptr, symbol string) (uintptr, error) {
	unlock, err := d.bind()
	if err != nil {
		return 0, err
	}
	defer unlock()
	var f uintptr
	name := append([]byte(symbol), 0)
	r, _, _ := purego.SyscallN(d.l.hipModuleGetFunction, uintptr(unsafe.Pointer(&f)), m, uintptr(unsafe.Pointer(&name[0])))
	return f, d.l.check(r, "hipModuleGetFunction", symbol)
}

// Launch packs args into the arena and passes them through extra. HIP requires the
// five slots in exactly this order and rejects extra with a zero size, so a kernel
// without arguments gets neither params nor extra (the arena gives 0).
func (d *device) Launch(fn uintptr, grid, block gpu.Dim3, shmem uint32, stream uintptr, args []byte, symbol string) error {
	extra, err := d.arena.Pack(args)
	if err != nil {
		return fmt.Errorf("hip: launch %s: %w", symbol, err)
	}
	defer d.arena.Unlock()
	return d.call("hipModuleLaunchKernel", symbol, d.l.hipModuleLaunchKernel, fn,
		uintptr(grid.X), uintptr(grid.Y), uintptr(grid.Z), uintptr(block.X), uintptr(block.Y), uintptr(block.Z),
		uintptr(shmem), stream, 0, extra)
}

func (d *device) StreamCreate() (uintptr, error) {
	unlock, err := d.bind()
	if err != nil {
		return 0, err
	}
	defer unlock()
	var s uintptr
	r, _, _ := purego.SyscallN(d.l.hipStreamCreateWithFlags, uintptr(unsafe.Pointer(&s)), streamNonBlocking)
	return s, d.l.check(r, "hipStreamCreateWithFlags", "")
}

func (d *device) StreamSync(s uintptr) error {
	return d.call("hipStreamSynchronize", "", d.l.hipStreamSynchronize, s)
}
func (d *device) StreamDestroy(s uintptr) error {
	return d.call("hipStreamDestroy", "", d.l.hipStreamDestroy, s)
}
func (d *device) StreamWaitEvent(s, e uintptr) error {
	return d.call("hipStreamWaitEvent", "", d.l.hipStreamWaitEvent, s, e, 0)
}

func (d *device) EventCreate() (uintptr, error) {
	unlock, err := d.bind()
	if err != nil {
		return 0, err
	}
	defer unlock()
	var e uintptr
	r, _, _ := purego.SyscallN(d.l.hipEventCreateWithFlags, uintptr(unsafe.Pointer(&e)), eventDefault)
	return e, d.l.check(r, "hipEventCreateWithFlags", "")
}

func (d *device) EventRecord(e, s uintptr) error {
	return d.call("hipEventRecord", "", d.l.hipEventRecord, e, s)
}
func (d *device) EventSync(e uintptr) error {
	return d.call("hipEventSynchronize", "", d.l.hipEventSynchronize, e)
}

// EventQuery: hipErrorNotReady (600) while pending matches gpu.ErrNotReady. It is
// drained like any failure, which is harmless (ROCm 7 does not record 600 anyway).
func (d *device) EventQuery(e uintptr) error {
	return d.call("hipEventQuery", "", d.l.hipEventQuery, e)
}

func (d *device) EventElapsed(start, end uintptr) (float32, error) {
	unlock, err := d.bind()
	if err != nil {
		return 0, err
	}
	defer unlock()
	var ms float32
	r, _, _ := purego.SyscallN(d.l.hipEventElapsedTime, uintptr(unsafe.Pointer(&ms)), start, end)
	return ms, d.l.check(r, "hipEventElapsedTime", "")
}

func (d *device) EventDestroy(e uintptr) error {
	return d.call("hipEventDestroy", "", d.l.hipEventDestroy, e)
}
