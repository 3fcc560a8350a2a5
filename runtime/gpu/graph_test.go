package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// graphFake is boundFake with GraphDriver: work queued on a capturing stream is recorded
// as nodes instead of run; a graph launch runs its nodes (appends them to ran) with the
// parameters set since.
type graphFake struct {
	*boundFake
	capturing map[uintptr]*fakeGraph
	graphs    map[uintptr]*fakeGraph
	execs     map[uintptr]*fakeGraph
	next      uintptr
	ran       []string // every launch that ran: "symbol grid args"
	sets      int      // GraphSetKernel calls
	launchErr error    // returned by the next GraphLaunch
	noSupport bool
}

type fakeGraph struct {
	nodes []fakeNode
}

type fakeNode struct {
	id   uintptr
	sym  string
	grid Dim3
	args []byte
}

func newGraphFake() *graphFake {
	return &graphFake{boundFake: &boundFake{fakeDriver: newFake()}, capturing: map[uintptr]*fakeGraph{},
		graphs: map[uintptr]*fakeGraph{}, execs: map[uintptr]*fakeGraph{}, next: 100}
}

func (f *graphFake) LaunchBound(fn uintptr, grid, block Dim3, shmem uint32, stream uintptr, args []byte, sym string) error {
	if g := f.capturing[stream]; g != nil {
		f.next++
		g.nodes = append(g.nodes, fakeNode{id: f.next, sym: sym, grid: grid, args: bytes.Clone(args)})
		return nil
	}
	if err := f.boundFake.LaunchBound(fn, grid, block, shmem, stream, args, sym); err != nil {
		return err
	}
	f.ran = append(f.ran, fmt.Sprint(sym, grid, args))
	return nil
}

func (f *graphFake) GraphSupport() error {
	if f.noSupport {
		return fmt.Errorf("fake: no graphs: %w", ErrNoGraphs)
	}
	return nil
}

func (f *graphFake) needBound() error {
	if !f.on {
		return errors.New("graph call on an unbound thread")
	}
	return nil
}

func (f *graphFake) CaptureBegin(s uintptr) error {
	if err := f.needBound(); err != nil {
		return err
	}
	f.capturing[s] = &fakeGraph{}
	return nil
}

func (f *graphFake) CaptureLast(s uintptr) (uintptr, error) {
	g := f.capturing[s]
	if g == nil || len(g.nodes) == 0 {
		return 0, errors.New("fake: nothing captured")
	}
	return g.nodes[len(g.nodes)-1].id, nil
}

func (f *graphFake) CaptureEnd(s uintptr) (uintptr, error) {
	g := f.capturing[s]
	delete(f.capturing, s)
	f.next++
	f.graphs[f.next] = g
	return f.next, nil
}

func (f *graphFake) GraphInstantiate(graph uintptr) (uintptr, error) {
	g := &fakeGraph{nodes: append([]fakeNode(nil), f.graphs[graph].nodes...)}
	f.next++
	f.execs[f.next] = g
	return f.next, nil
}

func (f *graphFake) GraphSetKernel(exec, node, fn uintptr, grid, block Dim3, shmem uint32, args []byte, sym string) error {
	if err := f.needBound(); err != nil {
		return err
	}
	f.sets++
	for i := range f.execs[exec].nodes {
		if n := &f.execs[exec].nodes[i]; n.id == node {
			n.grid, n.args = grid, bytes.Clone(args)
			return nil
		}
	}
	return errors.New("fake: no such node")
}

func (f *graphFake) GraphLaunch(exec, s uintptr) error {
	if err := f.needBound(); err != nil {
		return err
	}
	if err := f.launchErr; err != nil {
		f.launchErr = nil
		return err
	}
	for _, n := range f.execs[exec].nodes {
		f.ran = append(f.ran, fmt.Sprint(n.sym, n.grid, n.args))
	}
	return nil
}

func (f *graphFake) GraphExecDestroy(exec uintptr) error { delete(f.execs, exec); return nil }
func (f *graphFake) GraphDestroy(g uintptr) error        { delete(f.graphs, g); return nil }

func graphSetup(t *testing.T, f Driver) (*Device, *Launcher, *Func, *Func) {
	t.Helper()
	d := NewDevice(f)
	m, err := d.LoadModule(CodeObject{Name: "fk_1/x", Target: "fk_1", Image: []byte("x")})
	require.NoError(t, err)
	a, err := m.Func("strata_a")
	require.NoError(t, err)
	b, err := m.Func("strata_b")
	require.NoError(t, err)
	s, err := d.NewStream()
	require.NoError(t, err)
	return d, d.NewLauncher(s), a, b
}

// TestGraphReplay: a captured run of launches replays with the arguments and grids Set
// gave it; an unchanged Set makes no driver call; a changed function or block is refused.
func TestGraphReplay(t *testing.T) {
	f := newGraphFake()
	_, ln, a, b := graphSetup(t, f)
	one, blk := Dim3{1, 1, 1}, Dim3{64, 1, 1}
	require.NoError(t, ln.CanCapture())
	require.ErrorContains(t, ln.BeginCapture(), "outside Launcher.Begin")
	require.NoError(t, ln.Begin())
	require.NoError(t, ln.BeginCapture())
	require.True(t, ln.Capturing())
	require.NoError(t, ln.Launch(a, one, blk, []byte{1}))
	require.NoError(t, ln.Launch(b, Dim3{2, 1, 1}, blk, []byte{2}))
	require.NoError(t, ln.Launch(a, one, blk, []byte{3}))
	require.Equal(t, 0, len(f.ran), "captured launches do not run")
	g, err := ln.EndCapture()
	require.NoError(t, err)
	require.Equal(t, 3, g.Kernels())

	require.NoError(t, g.Launch())
	want := []string{fmt.Sprint("strata_a", one, []byte{1}), fmt.Sprint("strata_b", Dim3{2, 1, 1}, []byte{2}), fmt.Sprint("strata_a", one, []byte{3})}
	require.Equal(t, want, f.ran)

	changed, err := g.Set(0, a, one, blk, []byte{1})
	require.NoError(t, err)
	require.True(t, !changed && f.sets == 0, "unchanged: no driver call")
	changed, err = g.Set(1, b, Dim3{2, 5, 1}, blk, []byte{9, 9})
	require.NoError(t, err)
	require.True(t, changed && f.sets == 1, "changed: one update")
	f.ran = nil
	require.NoError(t, g.Launch())
	want[1] = fmt.Sprint("strata_b", Dim3{2, 5, 1}, []byte{9, 9})
	require.Equal(t, want, f.ran)

	_, err = g.Set(2, b, one, blk, []byte{3})
	require.ErrorContains(t, err, "graph launch 2 is strata_a")
	_, err = g.Set(2, a, one, Dim3{32, 1, 1}, []byte{3})
	require.ErrorContains(t, err, "not strata_a with block")
	_, err = g.Set(3, a, one, blk, nil)
	require.ErrorContains(t, err, "has 3 launches")
	_, err = g.Set(0, a, Dim3{0, 1, 1}, blk, []byte{7})
	require.ErrorContains(t, err, "no zero dimension")
	ln.End()
	require.ErrorContains(t, g.Launch(), "outside Launcher.Begin")
	_, err = g.Set(1, b, one, blk, nil)
	require.ErrorContains(t, err, "outside Launcher.Begin")
	require.NoError(t, g.Destroy())
	require.ErrorContains(t, g.Destroy(), "destroyed twice")
	require.Equal(t, 0, len(f.execs)+len(f.graphs))
}

// TestGraphFaultPoisons: a fault a graph launch reports poisons the device as a launch's
// does; the device then refuses graph launches without calling the driver.
func TestGraphFaultPoisons(t *testing.T) {
	f := newGraphFake()
	_, ln, a, _ := graphSetup(t, f)
	require.NoError(t, ln.Begin())
	defer ln.End()
	require.NoError(t, ln.BeginCapture())
	require.NoError(t, ln.Launch(a, Dim3{1, 1, 1}, Dim3{32, 1, 1}, nil))
	g, err := ln.EndCapture()
	require.NoError(t, err)
	f.launchErr = &Error{Backend: "fake", Call: "graphlaunch", Code: 700, Name: "IllegalAddress"}
	require.True(t, errors.Is(g.Launch(), ErrDeviceFault))
	err = g.Launch()
	require.True(t, errors.Is(err, ErrDeviceFault), "later graph launches return the fault: %v", err)
	require.Equal(t, 0, len(f.ran))
}

// TestGraphEndCaptureAfterFault: a device poisoned while a capture is open still ends the
// capture (the stream must not stay capturing), frees the graph it made and returns the
// fault; End with a capture open does the same.
func TestGraphEndCaptureAfterFault(t *testing.T) {
	for _, viaEnd := range []bool{false, true} {
		f := newGraphFake()
		_, ln, a, _ := graphSetup(t, f)
		require.NoError(t, ln.Begin())
		require.NoError(t, ln.BeginCapture())
		require.NoError(t, ln.Launch(a, Dim3{1, 1, 1}, Dim3{32, 1, 1}, nil))
		f.failWith = &Error{Backend: "fake", Call: "launch", Code: 700, Name: "IllegalAddress"}
		require.True(t, errors.Is(a.Launch(nil, Dim3{1, 1, 1}, Dim3{32, 1, 1}, 0, nil), ErrDeviceFault), "a plain launch faults")
		if viaEnd {
			ln.End()
		} else {
			g, err := ln.EndCapture()
			require.True(t, g == nil && errors.Is(err, ErrDeviceFault), "EndCapture on a poisoned device: %v, %v", g, err)
			ln.End()
		}
		require.True(t, !ln.Capturing() && len(f.capturing) == 0, "end %v: the driver's capture ended", viaEnd)
		require.Equal(t, 0, len(f.execs)+len(f.graphs), "end %v: nothing left", viaEnd)
	}
}

// TestGraphEndDiscardsCapture: End with a capture open ends it and frees what it made.
func TestGraphEndDiscardsCapture(t *testing.T) {
	f := newGraphFake()
	_, ln, a, _ := graphSetup(t, f)
	require.NoError(t, ln.Begin())
	require.NoError(t, ln.BeginCapture())
	require.NoError(t, ln.Launch(a, Dim3{1, 1, 1}, Dim3{32, 1, 1}, nil))
	ln.End()
	require.True(t, !ln.Capturing() && len(f.capturing) == 0, "capture ended")
	require.Equal(t, 0, len(f.execs)+len(f.graphs))
	_, err := ln.EndCapture()
	require.ErrorContains(t, err, "without BeginCapture")
}

// TestGraphUnsupported: a backend without graphs (or whose library lacks them) says so
// with ErrNoGraphs, and a capture of the default stream is refused.
func TestGraphUnsupported(t *testing.T) {
	_, ln, _, _ := graphSetup(t, &boundFake{fakeDriver: newFake()})
	require.True(t, errors.Is(ln.CanCapture(), ErrNoGraphs))
	require.NoError(t, ln.Begin())
	require.True(t, errors.Is(ln.BeginCapture(), ErrNoGraphs))
	ln.End()

	f := newGraphFake()
	f.noSupport = true
	_, ln, _, _ = graphSetup(t, f)
	require.True(t, errors.Is(ln.CanCapture(), ErrNoGraphs))

	f = newGraphFake()
	d := NewDevice(f)
	def := d.NewLauncher(nil)
	require.NoError(t, def.Begin())
	require.ErrorContains(t, def.BeginCapture(), "default stream")
	def.End()
}
