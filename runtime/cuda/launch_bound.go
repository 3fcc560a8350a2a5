package cuda

import (
	"fmt"
	"runtime"

	"github.com/ebitengine/purego"
	"github.com/strata-hip/strata/runtime/gpu"
)

// device implements gpu.BoundDriver: a run of launches binds the context once.
var _ gpu.BoundDriver = (*device)(nil)

// Bind locks the goroutine to its OS thread and makes the device's context current there
// until Unbind.
func (d *device) Bind() error {
	_, err := d.bind() // its unlock is Unbind
	return err
}

// Unbind releases the thread lock Bind took (the context stays current on that thread,
// as after every other call here).
func (d *device) Unbind() { runtime.UnlockOSThread() }

// LaunchBound packs args into the arena and passes them through extra, on a thread Bind
// prepared: one cuLaunchKernel, no thread lock or cuCtxSetCurrent of its own.
func (d *device) LaunchBound(fn uintptr, grid, block gpu.Dim3, shmem uint32, stream uintptr, args []byte, symbol string) error {
	extra, err := d.arena.Pack(args)
	if err != nil { // Pack left the arena unlocked
		return fmt.Errorf("cuda: launch %s: %w", symbol, err)
	}
	r, _, _ := purego.SyscallN(d.l.cuLaunchKernel, fn,
		uintptr(grid.X), uintptr(grid.Y), uintptr(grid.Z), uintptr(block.X), uintptr(block.Y), uintptr(block.Z),
		uintptr(shmem), stream, 0, extra)
	d.arena.Unlock()
	if r != 0 {
		return d.l.check(r, "cuLaunchKernel", symbol)
	}
	return nil
}
