package gpu

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// CodeObject is a compiled kernel image for one target.
type CodeObject struct {
	Name   string // for errors: "sm_90/quantize_q8_1"
	Target string // the target id it was built for (see TargetMatches)
	Image  []byte // AMD code-object ELF or NVIDIA PTX/cubin
}

// Module is a loaded code object.
type Module struct {
	dev   *Device
	name  string
	h     uintptr
	image []byte // anonymous mapping, kept until Unload

	mu    sync.Mutex
	funcs map[string]*Func
}

// Func is one kernel of a module.
type Func struct {
	mod    *Module
	symbol string
	h      uintptr
}

// LoadModule checks that co was built for this device's arch, then loads it. A target
// mismatch is an error naming both, before the runtime is asked (the runtime's own
// answer would be a bare "no binary for GPU").
func (d *Device) LoadModule(co CodeObject) (*Module, error) {
	if !TargetMatches(co.Target, d.info.Arch) {
		return nil, fmt.Errorf("gpu: code object %s is for %s, device %s (%s) is %s: build code objects for %s",
			co.Name, co.Target, d.info.ID(), d.info.Name, d.info.Arch, d.info.Arch)
	}
	if len(co.Image) == 0 {
		return nil, fmt.Errorf("gpu: code object %s is empty", co.Name)
	}
	// Outside the Go heap, NUL-terminated (PTX needs it; ELF ignores it).
	img, err := AllocAnon(len(co.Image) + 1)
	if err != nil {
		return nil, err
	}
	copy(img, co.Image)
	var h uintptr
	if err := d.do(func() error {
		var e error
		h, e = d.drv.LoadModule(img, co.Name)
		return e
	}); err != nil {
		_ = FreeAnon(img)
		return nil, err
	}
	return &Module{dev: d, name: co.Name, h: h, image: img, funcs: map[string]*Func{}}, nil
}

// Func looks a kernel up by symbol (cached).
func (m *Module) Func(symbol string) (*Func, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h == 0 {
		return nil, fmt.Errorf("gpu: module %s is unloaded", m.name)
	}
	if f := m.funcs[symbol]; f != nil {
		return f, nil
	}
	var h uintptr
	if err := m.dev.do(func() error {
		var e error
		h, e = m.dev.drv.Function(m.h, symbol)
		return e
	}); err != nil {
		return nil, err
	}
	f := &Func{mod: m, symbol: symbol, h: h}
	m.funcs[symbol] = f
	return f, nil
}

// Unload releases the module; its Funcs become unusable (and one registered as the
// device's mapping probe is unregistered).
func (m *Module) Unload() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h == 0 {
		return fmt.Errorf("gpu: module %s unloaded twice", m.name)
	}
	h := m.h
	m.h = 0
	m.dev.dropProbe(m) // a registered probe of this module would launch an unloaded kernel
	err := m.dev.do(func() error { return m.dev.drv.UnloadModule(h) })
	return errors.Join(err, FreeAnon(m.image))
}

// Symbol is the kernel's name.
func (f *Func) Symbol() string { return f.symbol }

// checkDims refuses a grid or block with a zero dimension.
func (f *Func) checkDims(grid, block Dim3) error {
	if grid.X == 0 || grid.Y == 0 || grid.Z == 0 || block.X == 0 || block.Y == 0 || block.Z == 0 {
		return fmt.Errorf("gpu: launch %s: grid %v and block %v must have no zero dimension", f.symbol, grid, block)
	}
	return nil
}

// Launch runs the kernel on stream s (nil: the default stream) with grid blocks of
// block threads and shmem bytes of dynamic shared memory. args is the packed argument
// struct (see Args); the launch copies it, so the caller may reuse it at once.
func (f *Func) Launch(s *Stream, grid, block Dim3, shmem uint32, args []byte) error {
	if err := f.checkDims(grid, block); err != nil {
		return err
	}
	d := f.mod.dev
	err := d.do(func() error { return d.drv.Launch(f.h, grid, block, shmem, s.handle(), args, f.symbol) })
	if err != nil {
		s.queued() // what the stream holds last is unknown
		return err
	}
	s.launched()
	return nil
}

// Args returns the bytes of the packed argument struct *v, without copying. T must
// hold no Go pointers (kernels/abi structs hold DevPtr and integers only).
func Args[T any](v *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))
}
