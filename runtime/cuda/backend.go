package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/strata-hip/strata/runtime/gpu"
)

func init() { gpu.Register(&backend{candidates: libraryNames()}) }

// Device attributes read at enumeration (cuda.h CUdevice_attribute; gpu-abi.md §9.3).
const (
	attrWarpSize          = 10
	attrMultiprocessors   = 16
	attrIntegrated        = 18
	attrCanMapHostMemory  = 19
	attrUnifiedAddressing = 41
	attrComputeCapMajor   = 75
	attrComputeCapMinor   = 76
)

// backend is the CUDA driver as a gpu.Backend.
type backend struct {
	candidates []string
	lib        *lib
	initErr    error // cuInit's failure; 100 means no device is visible

	mu   sync.Mutex
	ctxs map[int]uintptr // primary contexts retained so far, by ordinal
}

func (b *backend) Name() string    { return "cuda" }
func (b *backend) Library() string { return b.lib.path }

// Load resolves the symbol table and initialises the driver.
func (b *backend) Load() error {
	l, err := openLib(b.candidates)
	if err != nil {
		return err
	}
	b.lib, b.ctxs = l, map[int]uintptr{}
	r, _, _ := purego.SyscallN(l.cuInit, 0)
	b.initErr = l.check(r, "cuInit", "")
	return nil
}

// Devices lists every device the driver shows (after CUDA_VISIBLE_DEVICES).
func (b *backend) Devices() ([]gpu.DeviceInfo, error) {
	l := b.lib
	if b.initErr != nil {
		if errors.Is(b.initErr, gpu.ErrNoDevice) {
			return nil, fmt.Errorf("cuda: no NVIDIA device visible (%v): %w", b.initErr, gpu.ErrNoDevice)
		}
		return nil, b.initErr
	}
	var n int32
	r, _, _ := purego.SyscallN(l.cuDeviceGetCount, uintptr(unsafe.Pointer(&n)))
	if err := l.check(r, "cuDeviceGetCount", ""); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("cuda: the driver lists no device: %w", gpu.ErrNoDevice)
	}
	devs := make([]gpu.DeviceInfo, 0, n)
	for i := 0; i < int(n); i++ {
		devs = append(devs, b.describe(i))
	}
	return devs, nil
}

// describe reads one device's properties; a failed read is recorded in Err and the
// rest are still read, so one odd device never hides the others.
func (b *backend) describe(ord int) (d gpu.DeviceInfo) {
	l := b.lib
	d = gpu.DeviceInfo{Backend: "cuda", Ordinal: ord}
	var errs []string
	note := func(err error) bool {
		if err != nil {
			errs = append(errs, err.Error())
		}
		return err == nil
	}
	defer func() { d.Err = strings.Join(errs, "; ") }()
	var dev int32
	r, _, _ := purego.SyscallN(l.cuDeviceGet, uintptr(unsafe.Pointer(&dev)), uintptr(ord))
	if !note(l.check(r, "cuDeviceGet", fmt.Sprint(ord))) {
		return d
	}
	name := make([]byte, 256)
	r, _, _ = purego.SyscallN(l.cuDeviceGetName, uintptr(unsafe.Pointer(&name[0])), uintptr(len(name)), uintptr(dev))
	if note(l.check(r, "cuDeviceGetName", "")) {
		d.Name = gpu.CBuf(name)
	}
	attr := func(a int) int {
		var v int32
		r, _, _ := purego.SyscallN(l.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), uintptr(dev))
		note(l.check(r, "cuDeviceGetAttribute", fmt.Sprint(a)))
		return int(v)
	}
	if major, minor := attr(attrComputeCapMajor), attr(attrComputeCapMinor); major > 0 {
		d.Arch = fmt.Sprintf("sm_%d%d", major, minor)
	}
	d.Integrated = attr(attrIntegrated) != 0
	d.UnifiedAddressing = attr(attrUnifiedAddressing) != 0
	d.CanMapHost = attr(attrCanMapHostMemory) != 0
	d.Units = attr(attrMultiprocessors)
	d.WarpSize = attr(attrWarpSize)
	var total uintptr
	r, _, _ = purego.SyscallN(l.cuDeviceTotalMem, uintptr(unsafe.Pointer(&total)), uintptr(dev))
	if note(l.check(r, "cuDeviceTotalMem_v2", "")) {
		d.TotalMem = uint64(total)
	}
	bus := make([]byte, 32)
	r, _, _ = purego.SyscallN(l.cuDeviceGetPCIBusId, uintptr(unsafe.Pointer(&bus[0])), uintptr(len(bus)), uintptr(dev))
	if note(l.check(r, "cuDeviceGetPCIBusId", "")) {
		d.PCIBusID = strings.ToLower(gpu.CBuf(bus))
	}
	// Free memory needs a context: retain the primary one (kept for Open).
	if ctx, err := b.retain(ord, dev); note(err) {
		runtime.LockOSThread()
		var free, tot uintptr
		r, _, _ = purego.SyscallN(l.cuCtxSetCurrent, ctx)
		if note(l.check(r, "cuCtxSetCurrent", "")) {
			r, _, _ = purego.SyscallN(l.cuMemGetInfo, uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&tot)))
			if note(l.check(r, "cuMemGetInfo_v2", "")) {
				d.FreeMem = uint64(free)
			}
		}
		runtime.UnlockOSThread()
	}
	return d
}

// retain returns the device's primary context, retaining it on first use.
func (b *backend) retain(ord int, dev int32) (uintptr, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ctx, ok := b.ctxs[ord]; ok {
		return ctx, nil
	}
	var ctx uintptr
	r, _, _ := purego.SyscallN(b.lib.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&ctx)), uintptr(dev))
	if err := b.lib.check(r, "cuDevicePrimaryCtxRetain", ""); err != nil {
		return 0, err
	}
	b.ctxs[ord] = ctx
	return ctx, nil
}

// Open makes a Driver for the device with this ordinal.
func (b *backend) Open(ord int) (gpu.Driver, error) {
	if b.initErr != nil {
		return nil, b.initErr
	}
	info := b.describe(ord)
	if info.Err != "" {
		return nil, fmt.Errorf("cuda: device %d: %s", ord, info.Err)
	}
	var dev int32
	r, _, _ := purego.SyscallN(b.lib.cuDeviceGet, uintptr(unsafe.Pointer(&dev)), uintptr(ord))
	if err := b.lib.check(r, "cuDeviceGet", ""); err != nil {
		return nil, err
	}
	ctx, err := b.retain(ord, dev)
	if err != nil {
		return nil, err
	}
	arena, err := gpu.NewLaunchArena(launchParamBufferPointer, launchParamBufferSize, launchParamEnd)
	if err != nil {
		return nil, err
	}
	d := &device{b: b, l: b.lib, info: info, dev: dev, ctx: ctx, arena: arena}
	if depCapable(b.lib, info.Arch) {
		if d.depPage, err = gpu.AllocAnon(depPageLen); err != nil {
			_ = arena.Free()
			return nil, err
		}
	}
	return d, nil
}

// release drops the primary context of ord (on Close).
func (b *backend) release(ord int, dev int32) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.ctxs[ord]; !ok {
		return nil
	}
	delete(b.ctxs, ord)
	r, _, _ := purego.SyscallN(b.lib.cuDevicePrimaryCtxRelease, uintptr(dev))
	return b.lib.check(r, "cuDevicePrimaryCtxRelease_v2", "")
}
