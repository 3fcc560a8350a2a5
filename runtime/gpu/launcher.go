package gpu

import "errors"

// BoundDriver is what a backend implements to submit runs of launches from one OS
// thread bound once: Bind locks the calling goroutine to its OS thread and makes the
// device current there (CUDA: cuCtxSetCurrent), Unbind undoes the lock; LaunchBound is
// Driver.Launch without the per-call binding, valid only between Bind and Unbind on the
// goroutine that called Bind. It saves a driver call and the thread lock per launch: on
// the H200 host the per-call layer cost about 1 µs of a 5.5 µs launch
// (bench/results/2026-11-29-h200-ceilings, "Launch overhead by layer").
type BoundDriver interface {
	Bind() error
	Unbind()
	LaunchBound(fn uintptr, grid, block Dim3, shmem uint32, stream uintptr, args []byte, symbol string) error
}

// Launcher submits kernels to one stream from one goroutine. Between Begin and End the
// device stays bound to the goroutine's OS thread, so a launch costs the driver's launch
// call and nothing else; outside them (or on a backend that is no BoundDriver) Launch is
// Func.Launch. The device's fault state is honoured as by every other call: a poisoned
// device refuses the launch, and a fault a launch reports poisons it. A Launcher is not
// safe for concurrent use; other calls on the device (copies, syncs) may be made between
// Begin and End from the same goroutine (they bind as usual, which is harmless).
type Launcher struct {
	dev   *Device
	s     *Stream
	bd    BoundDriver // nil: the backend binds per call
	bound bool

	capture *Graph // open capture (graph.go), nil when none
}

// NewLauncher returns a Launcher for stream s of d (nil: the default stream).
func (d *Device) NewLauncher(s *Stream) *Launcher {
	bd, _ := d.drv.(BoundDriver)
	return &Launcher{dev: d, s: s, bd: bd}
}

// Begin binds the device to the calling goroutine's OS thread until End. Without
// backend support it does nothing. Calling Begin twice is a programmer error.
func (l *Launcher) Begin() error {
	if l.bound {
		panic("gpu: Launcher.Begin twice")
	}
	if l.bd == nil {
		return nil
	}
	if err := l.dev.check(); err != nil {
		return err
	}
	if err := l.dev.note(l.bd.Bind()); err != nil {
		return err
	}
	l.bound = true
	return nil
}

// End releases what Begin bound; without a Begin it does nothing. A capture still open
// is ended and its graph discarded.
func (l *Launcher) End() {
	if l.capture != nil {
		if g, err := l.EndCapture(); err == nil {
			_ = g.Destroy()
		}
	}
	if l.bound {
		l.bound = false
		l.bd.Unbind()
	}
}

// Launch runs f on the Launcher's stream with grid blocks of block threads and no dynamic
// shared memory. args is copied during the call.
func (l *Launcher) Launch(f *Func, grid, block Dim3, args []byte) error {
	if !l.bound {
		return f.Launch(l.s, grid, block, 0, args)
	}
	return l.launchBound(f, grid, block, args, func() error {
		return l.bd.LaunchBound(f.h, grid, block, 0, l.s.handle(), args, f.symbol)
	})
}

// launchBound is a bound Launcher's launch of f (Launch, LaunchDep): it checks f's
// dimensions and device, queues the launch through do, keeps the stream's record of its
// last work, and records the launch when a capture is on.
func (l *Launcher) launchBound(f *Func, grid, block Dim3, args []byte, launch func() error) error {
	if err := f.checkDims(grid, block); err != nil {
		return err
	}
	if f.mod.dev != l.dev {
		return errors.New("gpu: launch " + f.symbol + ": the function belongs to another device")
	}
	if err := l.dev.do(launch); err != nil {
		l.s.queued() // what the stream holds last is unknown
		return err
	}
	l.s.launched()
	if l.capture != nil {
		return l.capturedLaunch(f, grid, block, args)
	}
	return nil
}
