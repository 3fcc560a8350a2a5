package gpu

import (
	"errors"
	"testing"
)

// boundFake is fakeDriver with gpu.BoundDriver: it counts binds and bound launches and
// refuses a bound launch made while unbound.
type boundFake struct {
	*fakeDriver
	binds, bound int
	on           bool
	bindErr      error
}

func (f *boundFake) Bind() error {
	if f.bindErr != nil {
		return f.bindErr
	}
	f.binds++
	f.on = true
	return nil
}
func (f *boundFake) Unbind() { f.on = false }
func (f *boundFake) LaunchBound(fn uintptr, grid, block Dim3, shmem uint32, stream uintptr, args []byte, sym string) error {
	if !f.on {
		return errors.New("bound launch on an unbound thread")
	}
	f.bound++
	return f.Launch(fn, grid, block, shmem, stream, args, sym)
}

func TestLauncherBinds(t *testing.T) {
	f := &boundFake{fakeDriver: newFake()}
	d := NewDevice(f)
	m, err := d.LoadModule(CodeObject{Name: "fk_1/x", Target: "fk_1", Image: []byte("x")})
	require.NoError(t, err)
	fn, err := m.Func("strata_x")
	require.NoError(t, err)
	ln := d.NewLauncher(nil)
	one := Dim3{1, 1, 1}
	require.NoError(t, ln.Launch(fn, one, one, nil)) // unbound: Func.Launch
	require.Equal(t, 0, f.bound)
	require.NoError(t, ln.Begin())
	for i := 0; i < 5; i++ {
		require.NoError(t, ln.Launch(fn, one, one, nil))
	}
	require.ErrorContains(t, ln.Launch(fn, Dim3{1, 0, 1}, one, nil), "no zero dimension")
	ln.End()
	ln.End() // harmless
	require.Equal(t, 1, f.binds, "one bind for the run")
	require.Equal(t, 5, f.bound)
	require.True(t, !f.on, "End unbinds")
}

// TestLauncherFaultPoisons: a fault a bound launch reports poisons the device, and a
// poisoned device refuses bound launches and Begin without calling the driver.
func TestLauncherFaultPoisons(t *testing.T) {
	f := &boundFake{fakeDriver: newFake()}
	d := NewDevice(f)
	m, _ := d.LoadModule(CodeObject{Name: "fk_1/x", Target: "fk_1", Image: []byte("x")})
	fn, _ := m.Func("strata_x")
	ln := d.NewLauncher(nil)
	require.NoError(t, ln.Begin())
	f.failWith = &Error{Backend: "fake", Call: "launch", Code: 700, Name: "IllegalAddress"}
	err := ln.Launch(fn, Dim3{1, 1, 1}, Dim3{32, 1, 1}, nil)
	require.True(t, errors.Is(err, ErrDeviceFault), "%v", err)
	before := f.calls
	err = ln.Launch(fn, Dim3{1, 1, 1}, Dim3{32, 1, 1}, nil)
	require.True(t, errors.Is(err, ErrDeviceFault), "later launches return the fault: %v", err)
	require.ErrorContains(t, err, "restart the process")
	ln.End()
	require.True(t, errors.Is(ln.Begin(), ErrDeviceFault), "Begin on a poisoned device")
	require.Equal(t, before, f.calls, "a poisoned device makes no driver call")
	require.Equal(t, 1, f.binds)
}

// TestLauncherWithoutBinding: a backend without BoundDriver launches per call.
func TestLauncherWithoutBinding(t *testing.T) {
	f := newFake()
	d := NewDevice(f)
	m, _ := d.LoadModule(CodeObject{Name: "fk_1/x", Target: "fk_1", Image: []byte("x")})
	fn, _ := m.Func("strata_x")
	ln := d.NewLauncher(nil)
	require.NoError(t, ln.Begin())
	before := f.calls
	require.NoError(t, ln.Launch(fn, Dim3{1, 1, 1}, Dim3{32, 1, 1}, nil))
	require.Equal(t, before+1, f.calls)
	ln.End()
}
