package hip

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/strata-hip/strata/runtime/gpu"
)

func init() { gpu.Register(&backend{candidates: libraryNames(os.Getenv)}) }

// hipDeviceAttribute_t values, unchanged from ROCm 5.0 to 7.0 (gpu-abi.md §4).
const (
	attrCanMapHostMemory  = 3
	attrIntegrated        = 16
	attrMultiprocessors   = 63
	attrUnifiedAddressing = 85
	attrWarpSize          = 87
)

// backend is the HIP runtime as a gpu.Backend.
type backend struct {
	candidates []string
	lib        *lib
	version    int
	initErr    error
}

func (b *backend) Name() string { return "hip" }
func (b *backend) Library() string {
	return fmt.Sprintf("%s (HIP %d.%d.%d)", b.lib.path, b.version/10000000, b.version/100000%100, b.version%100000)
}

// Load resolves the symbol table and initialises the runtime. A failed hipInit is kept
// for Devices to report: with no usable GPU, ROCm 5 returns hipErrorInvalidDevice (101)
// from hipInit and hipErrorNoDevice (100) from hipGetDeviceCount.
func (b *backend) Load() error {
	l, err := openLib(b.candidates)
	if err != nil {
		return err
	}
	b.lib = l
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var v int32
	if r, _, _ := purego.SyscallN(l.hipRuntimeGetVersion, uintptr(unsafe.Pointer(&v))); int32(r) == hipSuccess {
		b.version = int(v)
	}
	r, _, _ := purego.SyscallN(l.hipInit, 0)
	b.initErr = l.check(r, "hipInit", "")
	return nil
}

// Devices lists every device the runtime shows (after ROCR_/HIP_/CUDA_VISIBLE_DEVICES).
func (b *backend) Devices() ([]gpu.DeviceInfo, error) {
	l := b.lib
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var n int32
	r, _, _ := purego.SyscallN(l.hipGetDeviceCount, uintptr(unsafe.Pointer(&n)))
	err := l.check(r, "hipGetDeviceCount", "")
	switch {
	case err == nil && n > 0:
	case errors.Is(err, gpu.ErrNoDevice) || (err == nil && n == 0):
		why := "hipGetDeviceCount found none"
		if b.initErr != nil {
			why = b.initErr.Error()
		}
		return nil, fmt.Errorf("hip: no AMD device visible (%s): %w", why, gpu.ErrNoDevice)
	default:
		if b.initErr != nil {
			return nil, fmt.Errorf("%w (after %v)", err, b.initErr)
		}
		return nil, err
	}
	devs := make([]gpu.DeviceInfo, 0, n)
	for i := 0; i < int(n); i++ {
		devs = append(devs, b.describe(i))
	}
	return devs, nil
}

// describe reads one device; a failed read is recorded in Err and the rest still read.
// The caller holds the OS thread locked.
func (b *backend) describe(ord int) (d gpu.DeviceInfo) {
	l := b.lib
	d = gpu.DeviceInfo{Backend: "hip", Ordinal: ord}
	var errs []string
	note := func(err error) bool {
		if err != nil {
			errs = append(errs, err.Error())
		}
		return err == nil
	}
	defer func() { d.Err = strings.Join(errs, "; ") }()
	name := make([]byte, 256)
	r, _, _ := purego.SyscallN(l.hipDeviceGetName, uintptr(unsafe.Pointer(&name[0])), uintptr(len(name)), uintptr(ord))
	if note(l.check(r, "hipDeviceGetName", fmt.Sprint(ord))) {
		d.Name = gpu.CBuf(name)
	}
	if arch, err := l.archName(ord, d.Name); note(err) {
		d.Arch = arch
	}
	attr := func(a int) int {
		var v int32
		r, _, _ := purego.SyscallN(l.hipDeviceGetAttr, uintptr(unsafe.Pointer(&v)), uintptr(a), uintptr(ord))
		note(l.check(r, "hipDeviceGetAttribute", fmt.Sprint(a)))
		return int(v)
	}
	d.Integrated = attr(attrIntegrated) != 0
	d.CanMapHost = attr(attrCanMapHostMemory) != 0
	d.UnifiedAddressing = attr(attrUnifiedAddressing) != 0
	d.Units = attr(attrMultiprocessors)
	d.WarpSize = attr(attrWarpSize)
	var total uintptr
	r, _, _ = purego.SyscallN(l.hipDeviceTotalMem, uintptr(unsafe.Pointer(&total)), uintptr(ord))
	if note(l.check(r, "hipDeviceTotalMem", "")) {
		d.TotalMem = uint64(total)
	}
	bus := make([]byte, 32)
	r, _, _ = purego.SyscallN(l.hipDeviceGetPCIBusId, uintptr(unsafe.Pointer(&bus[0])), uintptr(len(bus)), uintptr(ord))
	if note(l.check(r, "hipDeviceGetPCIBusId", "")) {
		d.PCIBusID = strings.ToLower(gpu.CBuf(bus))
	}
	r, _, _ = purego.SyscallN(l.hipSetDevice, uintptr(ord))
	if note(l.check(r, "hipSetDevice", fmt.Sprint(ord))) {
		var free, tot uintptr
		r, _, _ = purego.SyscallN(l.hipMemGetInfo, uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&tot)))
		if note(l.check(r, "hipMemGetInfo", "")) {
			d.FreeMem = uint64(free)
		}
	}
	return d
}

// Open makes a Driver for the device with this ordinal.
func (b *backend) Open(ord int) (gpu.Driver, error) {
	runtime.LockOSThread()
	info := b.describe(ord)
	runtime.UnlockOSThread()
	if info.Err != "" {
		return nil, fmt.Errorf("hip: device %d: %s", ord, info.Err)
	}
	arena, err := gpu.NewLaunchArena(launchParamBufPtr, launchParamBufSize, launchParamEnd)
	if err != nil {
		return nil, err
	}
	return &device{l: b.lib, info: info, ord: ord, arena: arena}, nil
}
