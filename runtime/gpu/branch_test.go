package gpu

import (
	"errors"
	"fmt"
	"testing"
)

// branchFake is graphFake with CaptureDepsDriver: each call is recorded as
// "set|add node…" against the stream it names.
type branchFake struct {
	*graphFake
	deps  []string
	noDep bool
}

func (f *branchFake) CaptureDepsSupport() error {
	if f.noDep {
		return fmt.Errorf("fake: %w", ErrNoBranches)
	}
	return nil
}

func (f *branchFake) CaptureDeps(s uintptr, nodes []uintptr, add bool) error {
	if f.capturing[s] == nil {
		return errors.New("fake: stream not capturing")
	}
	op := "set"
	if add {
		op = "add"
	}
	f.deps = append(f.deps, fmt.Sprint(op, nodes))
	return nil
}

// TestCaptureBranch: CaptureFork and CaptureJoin hand the captured launch's node to the
// driver (set, then add), refuse outside a capture, an index not captured yet and a
// backend without the call, and with plain make the next LaunchDep a plain launch.
func TestCaptureBranch(t *testing.T) {
	f := &branchFake{graphFake: newGraphFake()}
	_, ln, a, b := graphSetup(t, f)
	one, blk := Dim3{1, 1, 1}, Dim3{64, 1, 1}
	require.NoError(t, ln.CanBranch())
	require.NoError(t, ln.Begin())
	defer ln.End()
	require.ErrorContains(t, ln.CaptureFork(0, false), "outside a capture")
	require.Equal(t, 0, ln.CaptureLen())
	require.NoError(t, ln.BeginCapture())
	require.NoError(t, ln.Launch(a, one, blk, []byte{1}))
	require.NoError(t, ln.Launch(b, one, blk, []byte{2}))
	require.Equal(t, 2, ln.CaptureLen())
	require.ErrorContains(t, ln.CaptureFork(2, false), "has 2 launches")
	require.NoError(t, ln.CaptureFork(0, true))
	require.True(t, !ln.s.lastKernel.Load(), "plain fork: the next launch is no programmatic one")
	require.NoError(t, ln.Launch(a, one, blk, []byte{3}))
	require.NoError(t, ln.CaptureJoin(1, false))
	require.True(t, ln.s.lastKernel.Load(), "a join without plain keeps the stream's state")
	nodes := ln.capture.kern
	require.Equal(t, []string{fmt.Sprint("set", []uintptr{nodes[0].node}), fmt.Sprint("add", []uintptr{nodes[1].node})}, f.deps)
	f.noDep = true
	require.True(t, errors.Is(ln.CaptureJoin(0, false), ErrNoBranches))
	require.True(t, errors.Is(ln.CanBranch(), ErrNoBranches))
	g, err := ln.EndCapture()
	require.NoError(t, err)
	require.Equal(t, 3, g.Kernels())
	require.NoError(t, g.Destroy())

	plain := newGraphFake() // no CaptureDepsDriver
	_, ln2, _, _ := graphSetup(t, plain)
	require.True(t, errors.Is(ln2.CanBranch(), ErrNoBranches))
}
