package gpu

import (
	"errors"
	"fmt"
	"testing"
)

// depFake is boundFake with DepLaunchDriver: it counts programmatic launches, and refuses
// them when refuse is set (as a device before sm_90 or HIP would).
type depFake struct {
	*boundFake
	deps    int
	refuse  bool
	failDep error // returned by the next LaunchBoundDep
}

func (f *depFake) DepLaunchSupport() error {
	if f.refuse {
		return fmt.Errorf("fake: %w", ErrNoDepLaunch)
	}
	return nil
}

func (f *depFake) LaunchBoundDep(fn uintptr, grid, block Dim3, shmem uint32, stream uintptr, args []byte, sym string) error {
	if err := f.failDep; err != nil {
		f.failDep = nil
		return err
	}
	if !f.on {
		return errors.New("programmatic launch on an unbound thread")
	}
	f.deps++
	return f.Launch(fn, grid, block, shmem, stream, args, sym)
}

// TestLaunchDep: LaunchDep is programmatic only when bound, on a stream of its own, with
// backend support, and when the last work queued on that stream was a kernel launch; a
// copy, memset, event record or wait in between makes the next one plain, and so does a
// failed launch. Without support it is always a plain launch.
func TestLaunchDep(t *testing.T) {
	f := &depFake{boundFake: &boundFake{fakeDriver: newFake()}}
	d := NewDevice(f)
	m, err := d.LoadModule(CodeObject{Name: "fk_1/x", Target: "fk_1", Image: []byte("x")})
	require.NoError(t, err)
	fn, err := m.Func("strata_x")
	require.NoError(t, err)
	s, err := d.NewStream()
	require.NoError(t, err)
	ev, err := d.NewEvent()
	require.NoError(t, err)
	buf, err := d.Alloc(64)
	require.NoError(t, err)
	ln := d.NewLauncher(s)
	one := Dim3{1, 1, 1}
	step := func(what string, want bool) {
		t.Helper()
		dep, err := ln.LaunchDep(fn, one, one, nil)
		require.NoError(t, err)
		require.Equal(t, want, dep, what)
	}
	require.NoError(t, ln.CanLaunchDep())
	step("unbound", false)
	require.NoError(t, ln.Begin())
	step("after an unbound launch", true)
	step("after a programmatic launch", true)
	require.NoError(t, s.Copy(buf.Ptr, buf.Ptr, 8))
	step("after a copy", false)
	step("after that launch", true)
	require.NoError(t, s.Memset(buf.Ptr, 0, 8))
	step("after a memset", false)
	require.NoError(t, ev.Record(s))
	step("after an event record", false)
	require.NoError(t, s.Wait(ev))
	step("after a stream wait", false)
	require.NoError(t, ln.Launch(fn, one, one, nil))
	step("after a plain launch", true)
	f.failDep = errors.New("boom")
	_, err = ln.LaunchDep(fn, one, one, nil)
	require.ErrorContains(t, err, "boom")
	step("after a failed launch", false)
	require.Equal(t, 4, f.deps)
	f.refuse = true
	require.True(t, errors.Is(ln.CanLaunchDep(), ErrNoDepLaunch), "refused support")
	step("without support", false)
	step("without support, after a launch", false)
	ln.End()
	require.Equal(t, 4, f.deps)
	// The default stream: never programmatic.
	f.refuse = false
	dl := d.NewLauncher(nil)
	require.NoError(t, dl.Begin())
	for i := 0; i < 3; i++ {
		dep, err := dl.LaunchDep(fn, one, one, nil)
		require.NoError(t, err)
		require.True(t, !dep, "the default stream")
	}
	dl.End()
	// A backend without DepLaunchDriver: plain launches.
	p := &boundFake{fakeDriver: newFake()}
	pd := NewDevice(p)
	pm, _ := pd.LoadModule(CodeObject{Name: "fk_1/x", Target: "fk_1", Image: []byte("x")})
	pf, _ := pm.Func("strata_x")
	ps, _ := pd.NewStream()
	pl := pd.NewLauncher(ps)
	require.True(t, errors.Is(pl.CanLaunchDep(), ErrNoDepLaunch), "no DepLaunchDriver")
	require.NoError(t, pl.Begin())
	for i := 0; i < 3; i++ {
		dep, err := pl.LaunchDep(pf, one, one, nil)
		require.NoError(t, err)
		require.True(t, !dep, "no DepLaunchDriver")
	}
	require.Equal(t, 3, p.bound)
	pl.End()
}
