package gpu

import (
	"bytes"
	"errors"
	"fmt"
)

// ErrNoGraphs: the backend (or its library) cannot capture and replay graphs; a caller
// falls back to plain launches.
var ErrNoGraphs = errors.New("gpu: graph capture not supported by this backend")

// GraphDriver is what a backend implements to capture the work queued on a stream into a
// graph and replay it with one launch. Every method runs on the OS thread a
// BoundDriver.Bind prepared (the Launcher only calls them between Begin and End), so none
// binds per call. Handles are the runtime's own.
type GraphDriver interface {
	BoundDriver
	// GraphSupport returns nil when the runtime has every graph call this needs, else an
	// error wrapping ErrNoGraphs that says what is missing.
	GraphSupport() error
	// CaptureBegin starts capturing stream: later work queued on it (launches, copies)
	// is recorded, not run. The capture is relaxed: other calls on the thread stay legal.
	CaptureBegin(stream uintptr) error
	// CaptureLast returns the node the last work queued on the capturing stream became
	// (after a launch: its kernel node).
	CaptureLast(stream uintptr) (node uintptr, err error)
	// CaptureEnd ends the capture and returns the graph.
	CaptureEnd(stream uintptr) (graph uintptr, err error)
	// GraphInstantiate makes an executable graph of graph.
	GraphInstantiate(graph uintptr) (exec uintptr, err error)
	// GraphSetKernel changes the grid and arguments a kernel node of exec runs with from
	// its next launch (fn and block as captured).
	GraphSetKernel(exec, node, fn uintptr, grid, block Dim3, shmem uint32, args []byte, symbol string) error
	// GraphLaunch queues exec on stream.
	GraphLaunch(exec, stream uintptr) error
	GraphExecDestroy(exec uintptr) error
	GraphDestroy(graph uintptr) error
}

// Graph is the work a Launcher captured between BeginCapture and EndCapture, instantiated:
// Launch queues all of it on the Launcher's stream at once. Kernel launches are numbered
// in capture order; Set changes launch i's grid and arguments for the next replay (what
// the launch's own Launch call would have passed), at the cost of a comparison when they
// are unchanged. Copies replay as captured: same addresses and sizes (the host side is
// pinned memory, read or written when the replay runs, so new contents are fine). A
// Graph belongs to its Launcher and, like it, is not safe for concurrent use.
type Graph struct {
	l           *Launcher
	graph, exec uintptr
	kern        []graphKernel
}

// graphKernel is one captured launch: its node and what it runs with now.
type graphKernel struct {
	node        uintptr
	f           *Func
	grid, block Dim3
	args        []byte
}

// CanCapture returns nil when the device's backend can capture graphs, else an error
// wrapping ErrNoGraphs.
func (l *Launcher) CanCapture() error {
	gd, ok := l.dev.drv.(GraphDriver)
	if !ok {
		return fmt.Errorf("gpu: %s: %w", l.dev.info.ID(), ErrNoGraphs)
	}
	return gd.GraphSupport()
}

// BeginCapture starts recording the Launcher's stream: launches and the stream's copies
// are captured instead of run, until EndCapture. It needs Begin (the capture and the
// launches stay on one bound thread) and a stream of its own (not the default stream).
// Nothing may synchronise the stream while it is captured.
func (l *Launcher) BeginCapture() error {
	if l.capture != nil {
		panic("gpu: Launcher.BeginCapture twice")
	}
	if err := l.CanCapture(); err != nil {
		return err
	}
	if !l.bound {
		return errors.New("gpu: graph capture outside Launcher.Begin")
	}
	if l.s == nil {
		return errors.New("gpu: graph capture of the default stream")
	}
	gd := l.dev.drv.(GraphDriver)
	l.s.queued() // a capture's first launch depends on nothing captured
	if err := l.dev.do(func() error { return gd.CaptureBegin(l.s.h) }); err != nil {
		return err
	}
	l.capture = &Graph{l: l}
	return nil
}

// Capturing reports whether a capture is open.
func (l *Launcher) Capturing() bool { return l.capture != nil }

// capturedLaunch records launch f of the capture as the node the stream's last work became.
func (l *Launcher) capturedLaunch(f *Func, grid, block Dim3, args []byte) error {
	gd := l.dev.drv.(GraphDriver)
	var node uintptr
	err := l.dev.do(func() error {
		var e error
		node, e = gd.CaptureLast(l.s.h)
		return e
	})
	if err != nil {
		return err
	}
	l.capture.kern = append(l.capture.kern, graphKernel{node: node, f: f, grid: grid, block: block, args: bytes.Clone(args)})
	return nil
}

// EndCapture ends the capture and instantiates the graph. It always ends the capture, also
// after a failed launch inside it (then it returns that failure's consequence, an error,
// and no graph), and also on a device poisoned since BeginCapture: ending the capture is
// the one driver call a poisoned device still makes, so the stream is not left capturing;
// the graph it returns is destroyed and the fault returned.
func (l *Launcher) EndCapture() (*Graph, error) {
	g := l.capture
	if g == nil {
		return nil, errors.New("gpu: EndCapture without BeginCapture")
	}
	l.capture = nil
	l.s.queued() // the work after a capture follows no captured node
	gd := l.dev.drv.(GraphDriver)
	if fault := l.dev.check(); fault != nil {
		graph, err := gd.CaptureEnd(l.s.h)
		if err == nil && graph != 0 {
			err = gd.GraphDestroy(graph)
		}
		return nil, errors.Join(fault, err)
	}
	err := l.dev.do(func() error {
		var e error
		g.graph, e = gd.CaptureEnd(l.s.h)
		return e
	})
	if err != nil {
		return nil, err
	}
	err = l.dev.do(func() error {
		var e error
		g.exec, e = gd.GraphInstantiate(g.graph)
		return e
	})
	if err != nil {
		_ = l.dev.do(func() error { return gd.GraphDestroy(g.graph) })
		return nil, err
	}
	return g, nil
}

// Kernels is the number of launches captured.
func (g *Graph) Kernels() int { return len(g.kern) }

// Set makes captured launch i run with grid and args from the next Launch; f and block
// must be the captured ones (a graph cannot change them). Unchanged values cost a
// comparison and no driver call; changed reports whether there was a driver update. It
// needs the Launcher's Begin.
func (g *Graph) Set(i int, f *Func, grid, block Dim3, args []byte) (changed bool, err error) {
	if i < 0 || i >= len(g.kern) {
		return false, fmt.Errorf("gpu: graph has %d launches, not %d", len(g.kern), i+1)
	}
	k := &g.kern[i]
	if k.f != f || k.block != block {
		return false, fmt.Errorf("gpu: graph launch %d is %s with block %v, not %s with block %v", i, k.f.symbol, k.block, f.symbol, block)
	}
	if k.grid == grid && bytes.Equal(k.args, args) {
		return false, nil
	}
	if err := f.checkDims(grid, block); err != nil {
		return false, err
	}
	if !g.l.bound {
		return false, errors.New("gpu: graph update outside Launcher.Begin")
	}
	gd := g.l.dev.drv.(GraphDriver)
	if err := g.l.dev.do(func() error {
		return gd.GraphSetKernel(g.exec, k.node, f.h, grid, block, 0, args, f.symbol)
	}); err != nil {
		return false, err
	}
	k.grid = grid
	k.args = append(k.args[:0], args...)
	return true, nil
}

// Same reports whether captured launch i would run with grid and args as its node stands
// now: Set's comparison without the update (no driver call). f and block must be the
// captured ones, as for Set. It checks a graph that was launched before its walk
// (model/gpu's launch-first order), while the graph may be running.
func (g *Graph) Same(i int, f *Func, grid, block Dim3, args []byte) (bool, error) {
	if i < 0 || i >= len(g.kern) {
		return false, fmt.Errorf("gpu: graph has %d launches, not %d", len(g.kern), i+1)
	}
	k := &g.kern[i]
	if k.f != f || k.block != block {
		return false, fmt.Errorf("gpu: graph launch %d is %s with block %v, not %s with block %v", i, k.f.symbol, k.block, f.symbol, block)
	}
	return k.grid == grid && bytes.Equal(k.args, args), nil
}

// Launch queues the graph on its Launcher's stream. It needs the Launcher's Begin.
func (g *Graph) Launch() error {
	if g.exec == 0 {
		return errors.New("gpu: launch of a destroyed graph")
	}
	if !g.l.bound {
		return errors.New("gpu: graph launch outside Launcher.Begin")
	}
	gd := g.l.dev.drv.(GraphDriver)
	g.l.s.queued()
	return g.l.dev.do(func() error { return gd.GraphLaunch(g.exec, g.l.s.h) })
}

// Destroy releases the graph (after its last replay completed). It binds per call, so it
// works outside Begin too; destroying twice is an error.
func (g *Graph) Destroy() error {
	if g.exec == 0 {
		return errors.New("gpu: graph destroyed twice")
	}
	gd := g.l.dev.drv.(GraphDriver)
	exec, graph := g.exec, g.graph
	g.exec, g.graph = 0, 0
	run := func(f func() error) error {
		if g.l.bound {
			return g.l.dev.do(f)
		}
		if err := gd.Bind(); err != nil {
			return err
		}
		defer gd.Unbind()
		return g.l.dev.do(f)
	}
	return errors.Join(run(func() error { return gd.GraphExecDestroy(exec) }), run(func() error { return gd.GraphDestroy(graph) }))
}
