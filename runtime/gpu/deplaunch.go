package gpu

import (
	"errors"
	"fmt"
)

// ErrNoDepLaunch: the backend, its library or the device cannot launch a kernel with a
// programmatic dependency on the previous one (NVIDIA: compute capability 9.0 and a driver
// with cuLaunchKernelEx; HIP has none). Launcher.LaunchDep then launches plainly.
var ErrNoDepLaunch = errors.New("gpu: programmatic dependent launch not supported")

// DepLaunchDriver is what a backend implements for programmatic dependent launch (CUDA:
// cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION). Such a
// launch may start running before the previous kernel of its stream has finished; the
// kernel itself must wait for it (griddepcontrol.wait: STRATA_GRID_DEP in the kernel
// prelude) before it touches memory that kernel reads or writes. Stream capture records
// the dependency as a programmatic edge, so a replayed graph keeps it.
type DepLaunchDriver interface {
	// DepLaunchSupport returns nil when this device can take such launches, else an error
	// wrapping ErrNoDepLaunch that says why not.
	DepLaunchSupport() error
	// LaunchBoundDep is BoundDriver.LaunchBound with the programmatic dependency, on the
	// thread Bind prepared.
	LaunchBoundDep(fn uintptr, grid, block Dim3, shmem uint32, stream uintptr, args []byte, symbol string) error
}

// CanLaunchDep returns nil when LaunchDep can make programmatic dependent launches on this
// device, else an error wrapping ErrNoDepLaunch.
func (l *Launcher) CanLaunchDep() error {
	dd, ok := l.dev.drv.(DepLaunchDriver)
	if !ok {
		return fmt.Errorf("gpu: %s: %w", l.dev.info.ID(), ErrNoDepLaunch)
	}
	return dd.DepLaunchSupport()
}

// LaunchDep launches f as Launch does, but with a programmatic dependency on the previous
// kernel of the stream when it can: the Launcher is bound (Begin), the backend and device
// support it (CanLaunchDep), the Launcher has a stream of its own, and the last work
// queued on that stream was a kernel launch (a copy, memset, event record or wait, or a
// graph launch in between makes it a plain launch: the dependency is kernel to kernel).
// f must begin with STRATA_GRID_DEP (its kernel waits for the previous one before it
// touches memory). dep reports whether the launch was programmatic. Inside a capture the
// launch becomes a kernel node with a programmatic edge from the previous one.
func (l *Launcher) LaunchDep(f *Func, grid, block Dim3, args []byte) (dep bool, err error) {
	if !l.bound || l.s == nil || !l.s.lastKernel.Load() || l.CanLaunchDep() != nil {
		return false, l.Launch(f, grid, block, args)
	}
	dd := l.dev.drv.(DepLaunchDriver)
	err = l.launchBound(f, grid, block, args, func() error {
		return dd.LaunchBoundDep(f.h, grid, block, 0, l.s.h, args, f.symbol)
	})
	return err == nil, err
}
