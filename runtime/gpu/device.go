package gpu

import (
	"errors"
	"fmt"
	"sync"
)

// Device is one opened GPU. Its methods are safe for concurrent use.
type Device struct {
	drv  Driver
	info DeviceInfo

	mu     sync.Mutex
	budget uint64 // 0: no budget
	used   uint64 // bytes handed out by Alloc and not yet freed
	sizes  map[DevPtr]uint64
	fault  error // set by the first device fault; returned by every later call
	probe  *Func // mapping-probe kernel registered by SetProbe, if any
}

// NewDevice wraps a backend's Driver. Open is the usual way in; tests and tools that
// hold a Driver call this directly.
func NewDevice(drv Driver) *Device {
	return &Device{drv: drv, info: drv.Info(), sizes: map[DevPtr]uint64{}}
}

// Info describes the device.
func (d *Device) Info() DeviceInfo { return d.info }

// Close releases the device's context. Buffers, modules, streams and events must be
// released first.
func (d *Device) Close() error { return d.drv.Close() }

// check returns the stored fault, if any: a poisoned device touches the GPU no more.
func (d *Device) check() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fault
}

// note records err as the device's fault when it is one, and returns err.
func (d *Device) note(err error) error {
	if err != nil && errors.Is(err, ErrDeviceFault) {
		d.mu.Lock()
		if d.fault == nil {
			d.fault = fmt.Errorf("gpu: device %s is unusable after a device fault; restart the process: %w", d.info.ID(), err)
		}
		d.mu.Unlock()
	}
	return err
}

// do runs one driver call unless the device is poisoned.
func (d *Device) do(f func() error) error {
	if err := d.check(); err != nil {
		return err
	}
	return d.note(f())
}

// SetBudget caps the device memory Alloc hands out at limit bytes (0 removes the cap).
// Memory already allocated counts against it.
func (d *Device) SetBudget(limit uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.budget = limit
}

// Used returns the bytes allocated through Alloc and not yet freed.
func (d *Device) Used() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.used
}

// MemInfo returns free and total device memory as the runtime reports them, both
// reduced to the budget when one is set.
func (d *Device) MemInfo() (free, total uint64, err error) {
	err = d.do(func() error {
		var e error
		free, total, e = d.drv.MemInfo()
		return e
	})
	if err != nil {
		return 0, 0, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.budget > 0 {
		total = min(total, d.budget)
		left := uint64(0)
		if d.used < d.budget {
			left = d.budget - d.used
		}
		free = min(free, left)
	}
	return free, total, nil
}

// Synchronize waits for all work on the device.
func (d *Device) Synchronize() error { return d.do(d.drv.Synchronize) }

// Buffer is device memory from Alloc.
type Buffer struct {
	Ptr  DevPtr
	Size uintptr
	dev  *Device
}

// Alloc returns n bytes of device memory (uninitialised). A request over the budget
// fails with an error wrapping ErrOutOfMemory, without asking the runtime.
func (d *Device) Alloc(n uintptr) (*Buffer, error) {
	if n == 0 {
		return nil, fmt.Errorf("gpu: alloc of 0 bytes on %s", d.info.ID())
	}
	d.mu.Lock()
	if d.budget > 0 && d.used+uint64(n) > d.budget {
		used, budget := d.used, d.budget
		d.mu.Unlock()
		return nil, fmt.Errorf("gpu: alloc %d bytes on %s: VRAM budget of %d bytes has %d left: %w",
			n, d.info.ID(), budget, budget-min(used, budget), ErrOutOfMemory)
	}
	d.used += uint64(n) // reserve before the call so concurrent allocations respect the budget
	d.mu.Unlock()
	var p DevPtr
	err := d.do(func() error {
		var e error
		p, e = d.drv.Alloc(n)
		return e
	})
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		d.used -= uint64(n)
		return nil, err
	}
	d.sizes[p] = uint64(n)
	return &Buffer{Ptr: p, Size: n, dev: d}, nil
}

// Free releases the buffer. Freeing twice is an error, not a crash.
func (b *Buffer) Free() error {
	if b == nil || b.dev == nil {
		return errors.New("gpu: free of a nil or already freed buffer")
	}
	d := b.dev
	b.dev = nil
	d.mu.Lock()
	n, ok := d.sizes[b.Ptr]
	delete(d.sizes, b.Ptr)
	d.used -= n
	d.mu.Unlock()
	if !ok {
		return fmt.Errorf("gpu: free of %#x on %s: not allocated by this device", uintptr(b.Ptr), d.info.ID())
	}
	return d.do(func() error { return d.drv.Free(b.Ptr) })
}

// Upload copies src (any memory, Go included) to dst and waits until the bytes are
// on the device (a pageable copy may otherwise still be in flight when the call
// returns, invisible to work on non-blocking streams).
func (d *Device) Upload(dst DevPtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return d.do(func() error {
		if err := d.drv.Upload(dst, src); err != nil {
			return err
		}
		return d.drv.Synchronize()
	})
}

// Download copies from src into dst (any memory, Go included) synchronously. It is
// ordered after work on the default stream only: synchronize streams from NewStream
// (they do not block on the default stream) before downloading what they wrote.
func (d *Device) Download(dst []byte, src DevPtr) error {
	if len(dst) == 0 {
		return nil
	}
	return d.do(func() error { return d.drv.Download(dst, src) })
}
