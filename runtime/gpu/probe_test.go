package gpu

import (
	"reflect"
	"testing"

	"github.com/strata-hip/strata/kernels/abi"
)

// TestProbeArgsMatchABI: the probe launch's argument struct is the generated fill
// family's (kernels/abi.FillArgs, what strata_fill_u32 reads), field for field: the same
// size, and each named field at the same offset with the same type; and the probe's
// block is the family's. If the fill Spec changes, this fails before a probe launch
// hands a kernel the wrong bytes.
func TestProbeArgsMatchABI(t *testing.T) {
	type field struct {
		Name   string
		Offset uintptr
		Type   reflect.Type
	}
	fields := func(v any) (out []field) {
		rt := reflect.TypeOf(v)
		for i := 0; i < rt.NumField(); i++ {
			if f := rt.Field(i); f.Name != "_" {
				out = append(out, field{f.Name, f.Offset, f.Type})
			}
		}
		return out
	}
	require.Equal(t, reflect.TypeOf(abi.FillArgs{}).Size(), reflect.TypeOf(probeArgs{}).Size(), "sizeof")
	require.Equal(t, uintptr(abi.FillArgsSize), reflect.TypeOf(probeArgs{}).Size(), "abi.FillArgsSize")
	require.Equal(t, fields(abi.FillArgs{}), fields(probeArgs{}))
	require.Equal(t, abi.FillThreads, probeThreads, "threads per block")
	// The bytes the launch passes are the ones the generated encoder writes.
	a := probeArgs{P: 0x0102030405060708, N: 77, V: 0x5EC0DE42}
	g := abi.FillArgs{P: a.P, N: a.N, V: a.V}
	require.Equal(t, g.Bytes(), append([]byte(nil), Args(&a)...))
}

// noProbeDriver is the fake as a backend without a built-in probe (HIP): FillWords
// fails, and it says so through ProbeDriver.
type noProbeDriver struct{ *fakeDriver }

func (noProbeDriver) BuiltinProbe() bool { return false }

// TestBuiltinProbe: a Driver that does not implement ProbeDriver counts as having a
// built-in probe (FillWords's contract); one that says it has none is asked.
func TestBuiltinProbe(t *testing.T) {
	require.True(t, NewDevice(newFake()).BuiltinProbe(), "a driver without ProbeDriver")
	require.True(t, !NewDevice(noProbeDriver{newFake()}).BuiltinProbe(), "a driver that reports none")
}

// TestProbeUnregisteredOnUnload: unloading the module of the registered probe
// unregisters it, so a later proof does not launch an unloaded kernel: it falls back to
// the backend's (here: none, so the mapping is unproven, and says why).
func TestProbeUnregisteredOnUnload(t *testing.T) {
	f := newFake()
	f.fillWorks = false
	d := NewDevice(noProbeDriver{f})
	other, err := d.LoadModule(CodeObject{Name: "fk_1/other", Target: "fk_1", Image: []byte("x")})
	require.NoError(t, err)
	m, err := d.LoadModule(CodeObject{Name: "fk_1/probe", Target: "fk_1", Image: []byte("x")})
	require.NoError(t, err)
	fn, err := m.Func("probe")
	require.NoError(t, err)
	d.SetProbe(fn)
	require.NoError(t, other.Unload()) // another module: the probe stays
	h, err := d.HostAlloc(4096, true)
	require.NoError(t, err)
	_, ok, err := h.Mapped()
	require.True(t, ok, "proven by the registered probe: %v", err)
	require.NoError(t, h.Free())
	require.NoError(t, m.Unload())
	h, err = d.HostAlloc(4096, true)
	require.NoError(t, err)
	_, ok, err = h.Mapped()
	require.True(t, !ok, "the probe's module is unloaded")
	require.ErrorContains(t, err, "the mapping is not usable")
}
