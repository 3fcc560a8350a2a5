package gpu

import (
	"errors"
	"fmt"
)

// ErrNoBranches: the backend (or its library) cannot change a capturing stream's
// dependencies; a caller captures one chain instead.
var ErrNoBranches = errors.New("gpu: capture dependencies cannot be changed on this backend")

// CaptureDepsDriver is what a backend implements to capture work that does not depend on
// the stream's last work: a graph with branches that run side by side. Its method runs on
// the OS thread a BoundDriver.Bind prepared, between CaptureBegin and CaptureEnd.
type CaptureDepsDriver interface {
	// CaptureDepsSupport returns nil when the library has the call, else an error
	// wrapping ErrNoBranches.
	CaptureDepsSupport() error
	// CaptureDeps makes nodes (nodes of the capture: CaptureLast's) the dependency set of
	// the capturing stream — with add, in addition to the set it has — so the next work
	// queued on it depends on them rather than on the stream's last work alone.
	CaptureDeps(stream uintptr, nodes []uintptr, add bool) error
}

// CanBranch returns nil when the Launcher's backend can capture branches (CaptureFork,
// CaptureJoin), else an error wrapping ErrNoBranches or ErrNoGraphs.
func (l *Launcher) CanBranch() error {
	if err := l.CanCapture(); err != nil {
		return err
	}
	cd, ok := l.dev.drv.(CaptureDepsDriver)
	if !ok {
		return fmt.Errorf("gpu: %s: %w", l.dev.info.ID(), ErrNoBranches)
	}
	return cd.CaptureDepsSupport()
}

// CaptureLen is the number of launches captured so far (0 when no capture is open): the
// index the next launch of the capture will have.
func (l *Launcher) CaptureLen() int {
	if l.capture == nil {
		return 0
	}
	return len(l.capture.kern)
}

// CaptureFork makes the next work captured depend on launch i of the open capture alone,
// not on the stream's last work: what is captured from here on is a branch that runs
// beside the launches after i captured so far, until CaptureJoin ties them together
// again. With plain, the branch's first launch is a plain one (a full dependency on i)
// even where LaunchDep could make it programmatic. The caller answers for the branch: it
// must neither read what the launches after i write nor write what they read or write.
func (l *Launcher) CaptureFork(i int, plain bool) error { return l.captureDeps(i, false, plain) }

// CaptureJoin adds launch i of the open capture to what the next work captured depends
// on (the end of a branch, or of the chain a CaptureFork left): the next launch waits for
// both. With plain, that launch is a plain one (full dependencies) even where LaunchDep
// could make it programmatic.
func (l *Launcher) CaptureJoin(i int, plain bool) error { return l.captureDeps(i, true, plain) }

// captureDeps sets (add false) or extends (add true) the dependencies of the next captured
// work with launch i; plain marks the stream so that the next launch is a plain one.
func (l *Launcher) captureDeps(i int, add, plain bool) error {
	if l.capture == nil {
		return errors.New("gpu: capture dependencies outside a capture")
	}
	if i < 0 || i >= len(l.capture.kern) {
		return fmt.Errorf("gpu: capture has %d launches, not %d", len(l.capture.kern), i+1)
	}
	if err := l.CanBranch(); err != nil {
		return err
	}
	cd := l.dev.drv.(CaptureDepsDriver)
	nodes := []uintptr{l.capture.kern[i].node}
	if err := l.dev.do(func() error { return cd.CaptureDeps(l.s.h, nodes, add) }); err != nil {
		return err
	}
	if plain {
		l.s.queued()
	}
	return nil
}
