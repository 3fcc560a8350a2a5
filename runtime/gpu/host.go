package gpu

import (
	"errors"
	"fmt"
	"unsafe"
)

// HostBuffer is page-locked host memory the device can copy to and from
// asynchronously: from HostAlloc (the runtime's memory) or Register (the caller's).
type HostBuffer struct {
	mem        []byte // outside the Go heap
	dev        *Device
	registered bool   // Register: the caller owns mem
	alias      DevPtr // proven device alias, 0 when none
	aliasErr   error  // why there is no alias
}

// Bytes is the buffer's memory. It stays valid until Free; do not keep it past that.
func (h *HostBuffer) Bytes() []byte { return h.mem }

// Ptr is the buffer's host address, for asynchronous copies.
func (h *HostBuffer) Ptr() uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(h.mem))) }

// Mapped returns the device address through which kernels can read and write this
// buffer directly (zero-copy). ok is false unless the buffer was allocated or
// registered mapped and the device proved it can write through the alias; err then
// says why, and callers copy instead.
func (h *HostBuffer) Mapped() (p DevPtr, ok bool, err error) {
	return h.alias, h.alias != 0, h.aliasErr
}

// HostAlloc returns n bytes of pinned host memory. With mapped, it also asks for a
// device alias and proves it (see Mapped); a failed proof leaves a usable pinned
// buffer without an alias.
func (d *Device) HostAlloc(n int, mapped bool) (*HostBuffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("gpu: host alloc of %d bytes on %s", n, d.info.ID())
	}
	var p unsafe.Pointer
	if err := d.do(func() error {
		var e error
		p, e = d.drv.HostAlloc(uintptr(n), mapped)
		return e
	}); err != nil {
		return nil, err
	}
	h := &HostBuffer{mem: unsafe.Slice((*byte)(p), n), dev: d, aliasErr: errors.New("gpu: not allocated mapped")}
	if mapped {
		h.alias, h.aliasErr = d.proveMapping(p, n)
	}
	return h, nil
}

// Register pins mem, which the caller owns and which must not be Go-heap memory (use
// AllocAnon or a file mapping), so asynchronous copies can use it. With mapped it also
// asks for a device alias and proves it. Call Unregister before releasing mem.
func (d *Device) Register(mem []byte, mapped bool) (*HostBuffer, error) {
	if len(mem) == 0 {
		return nil, fmt.Errorf("gpu: register of 0 bytes on %s", d.info.ID())
	}
	p := unsafe.Pointer(unsafe.SliceData(mem))
	if err := d.do(func() error { return d.drv.HostRegister(p, uintptr(len(mem)), mapped) }); err != nil {
		return nil, err
	}
	h := &HostBuffer{mem: mem, dev: d, registered: true, aliasErr: errors.New("gpu: not registered mapped")}
	if mapped {
		h.alias, h.aliasErr = d.proveMapping(p, len(mem))
	}
	return h, nil
}

// Free releases memory from HostAlloc, or unregisters memory from Register (the
// caller then releases it).
func (h *HostBuffer) Free() error {
	if h == nil || h.dev == nil {
		return errors.New("gpu: free of a nil or already freed host buffer")
	}
	d := h.dev
	h.dev = nil
	p := unsafe.Pointer(unsafe.SliceData(h.mem))
	h.mem, h.alias = nil, 0
	if h.registered {
		return d.do(func() error { return d.drv.HostUnregister(p) })
	}
	return d.do(func() error { return d.drv.HostFree(p) })
}

// proveWords is how many 32-bit words the mapping self-test writes (at most).
const proveWords = 64

// proveMapping asks the runtime for the device alias of host memory p and proves it:
// the host poisons the first words, the device writes a pattern through the alias,
// the host must read the pattern back. The alias may equal p (CUDA with unified
// addressing guarantees it); equality is not the test, the write is.
func (d *Device) proveMapping(p unsafe.Pointer, n int) (DevPtr, error) {
	var alias DevPtr
	if err := d.do(func() error {
		var e error
		alias, e = d.drv.HostDevicePtr(p)
		return e
	}); err != nil {
		return 0, fmt.Errorf("gpu: no device alias for mapped host memory: %w", err)
	}
	if alias == 0 {
		return 0, errors.New("gpu: runtime returned a null device alias for mapped host memory")
	}
	words := min(n/4, proveWords)
	if words == 0 {
		return 0, fmt.Errorf("gpu: mapped buffer of %d bytes is too small to prove", n)
	}
	mem := unsafe.Slice((*uint32)(p), words)
	const poison, pattern = 0xDEADBEEF, 0x5EC0DE42
	for i := range mem {
		mem[i] = poison
	}
	if err := d.fillWords(alias, words, pattern); err != nil {
		return 0, fmt.Errorf("gpu: device could not write through the alias %#x of host %p: %w", uintptr(alias), p, err)
	}
	for i, v := range mem {
		if v != pattern {
			return 0, fmt.Errorf("gpu: device wrote through the alias %#x of host %p but word %d reads %#x, want %#x: the mapping is not usable", uintptr(alias), p, i, v, pattern)
		}
	}
	clear(mem)
	return alias, nil
}

// probeArgs is the argument struct of a mapping-probe kernel (see SetProbe). It is
// kernels/abi.FillArgs, the generated fill family's, field for field
// (TestProbeArgsMatchABI), so the engine registers strata_fill_u32 as the probe.
type probeArgs struct {
	P uint64 // device address of uint32[N]
	N uint32 // words to write
	V uint32 // value to write
}

// probeThreads is the block size of a probe launch (kernels/abi.FillThreads).
const probeThreads = 64

// ProbeDriver is implemented by a Driver that says whether FillWords has a kernel of its
// own. A Driver without it is taken to have one, as FillWords's contract asks.
type ProbeDriver interface {
	// BuiltinProbe reports whether FillWords runs a kernel of the backend's own (CUDA: a
	// built-in PTX kernel) rather than failing for want of one (HIP).
	BuiltinProbe() bool
}

// BuiltinProbe reports whether the runtime proves mapped host memory with a kernel of
// its own. Where it does not (HIP), a mapping is proven only with a probe registered by
// SetProbe; until then HostBuffer.Mapped reports no alias and callers copy.
func (d *Device) BuiltinProbe() bool {
	if p, ok := d.drv.(ProbeDriver); ok {
		return p.BuiltinProbe()
	}
	return true
}

// SetProbe registers fn as the device's mapping-probe kernel, used to prove mapped
// host memory instead of the backend's built-in one (nil: the built-in one again). fn
// must take one argument, struct { uint64 p; uint32 n; uint32 v; } (16 bytes: the
// generated fill family's, kernels/abi.FillArgs), and store v into p[0..n) with one
// thread per word in blocks of 64 threads. The HIP backend has no built-in probe (it
// would need a code object per AMD target; see BuiltinProbe), so on HIP mapped memory
// is proven only once a probe is registered, and until then HostBuffer.Mapped reports no
// alias. Unloading fn's module unregisters it.
func (d *Device) SetProbe(fn *Func) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.probe = fn
}

// dropProbe unregisters the probe if it is a kernel of m (which is being unloaded).
func (d *Device) dropProbe(m *Module) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.probe != nil && d.probe.mod == m {
		d.probe = nil
	}
}

// fillWords makes device code write value into words at dst and waits for it.
func (d *Device) fillWords(dst DevPtr, words int, value uint32) error {
	d.mu.Lock()
	probe := d.probe
	d.mu.Unlock()
	if probe == nil {
		return d.do(func() error { return d.drv.FillWords(dst, words, value) })
	}
	a := probeArgs{P: uint64(dst), N: uint32(words), V: value}
	grid := Dim3{X: uint32((words + probeThreads - 1) / probeThreads), Y: 1, Z: 1}
	if err := probe.Launch(nil, grid, Dim3{X: probeThreads, Y: 1, Z: 1}, 0, Args(&a)); err != nil {
		return err
	}
	return d.Synchronize()
}
