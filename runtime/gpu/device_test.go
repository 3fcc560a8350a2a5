package gpu

import (
	"encoding/binary"
	"errors"
	"testing"
	"unsafe"
)

// fakeDriver is an in-memory Driver: enough to test the policy package gpu adds on
// top of a backend (budget, poisoning, argument checks, the mapping proof).
type fakeDriver struct {
	next     DevPtr
	free     uint64
	calls    int
	failWith error // returned by the next Launch
	// alias behaviour for the mapping proof
	aliasOffset uintptr // 0: alias equals host address
	fillWorks   bool
	host        map[DevPtr][]byte
}

func newFake() *fakeDriver {
	return &fakeDriver{next: 0x1000, free: 1 << 30, fillWorks: true, host: map[DevPtr][]byte{}}
}

func (f *fakeDriver) Info() DeviceInfo {
	return DeviceInfo{Backend: "fake", Name: "Fake", Arch: "fk_1", TotalMem: 1 << 30}
}
func (f *fakeDriver) Close() error                     { return nil }
func (f *fakeDriver) MemInfo() (uint64, uint64, error) { f.calls++; return f.free, 1 << 30, nil }
func (f *fakeDriver) Synchronize() error               { f.calls++; return nil }
func (f *fakeDriver) Alloc(n uintptr) (DevPtr, error) {
	f.calls++
	p := f.next
	f.next += DevPtr(n)
	return p, nil
}
func (f *fakeDriver) Free(DevPtr) error             { f.calls++; return nil }
func (f *fakeDriver) Upload(DevPtr, []byte) error   { f.calls++; return nil }
func (f *fakeDriver) Download([]byte, DevPtr) error { f.calls++; return nil }
func (f *fakeDriver) CopyAsync(CopyKind, uintptr, uintptr, uintptr, uintptr) error {
	f.calls++
	return nil
}
func (f *fakeDriver) MemsetAsync(DevPtr, byte, uintptr, uintptr) error { f.calls++; return nil }
func (f *fakeDriver) HostAlloc(n uintptr, mapped bool) (unsafe.Pointer, error) {
	f.calls++
	b := make([]byte, n) // test only: a real backend returns runtime memory
	return unsafe.Pointer(&b[0]), nil
}
func (f *fakeDriver) HostFree(unsafe.Pointer) error                    { f.calls++; return nil }
func (f *fakeDriver) HostRegister(unsafe.Pointer, uintptr, bool) error { f.calls++; return nil }
func (f *fakeDriver) HostUnregister(unsafe.Pointer) error              { f.calls++; return nil }
func (f *fakeDriver) HostDevicePtr(p unsafe.Pointer) (DevPtr, error) {
	f.calls++
	a := DevPtr(uintptr(p) + f.aliasOffset)
	f.host[a] = unsafe.Slice((*byte)(p), 4*proveWords)
	return a, nil
}
func (f *fakeDriver) FillWords(dst DevPtr, words int, v uint32) error {
	f.calls++
	if !f.fillWorks {
		return nil // the "write" went nowhere, as with an unusable mapping
	}
	if f.aliasOffset != 0 {
		return &Error{Backend: "fake", Call: "fill", Code: 1, Name: "InvalidValue"}
	}
	b := f.host[dst]
	for i := 0; i < words; i++ {
		*(*uint32)(unsafe.Pointer(&b[4*i])) = v
	}
	return nil
}
func (f *fakeDriver) LoadModule([]byte, string) (uintptr, error) { f.calls++; return 1, nil }
func (f *fakeDriver) UnloadModule(uintptr) error                 { f.calls++; return nil }
func (f *fakeDriver) Function(uintptr, string) (uintptr, error)  { f.calls++; return 2, nil }
func (f *fakeDriver) Launch(_ uintptr, _, _ Dim3, _ uint32, _ uintptr, args []byte, sym string) error {
	f.calls++
	if sym == "probe" { // a mapping-probe kernel: struct { u64 p; u32 n; u32 v }
		p := DevPtr(binary.LittleEndian.Uint64(args))
		n, v := binary.LittleEndian.Uint32(args[8:]), binary.LittleEndian.Uint32(args[12:])
		for i := 0; i < int(n); i++ {
			binary.LittleEndian.PutUint32(f.host[p][4*i:], v)
		}
		return nil
	}
	err := f.failWith
	f.failWith = nil
	return err
}
func (f *fakeDriver) StreamCreate() (uintptr, error)         { f.calls++; return 3, nil }
func (f *fakeDriver) StreamSync(uintptr) error               { f.calls++; return nil }
func (f *fakeDriver) StreamDestroy(uintptr) error            { f.calls++; return nil }
func (f *fakeDriver) StreamWaitEvent(uintptr, uintptr) error { f.calls++; return nil }
func (f *fakeDriver) EventCreate() (uintptr, error)          { f.calls++; return 4, nil }
func (f *fakeDriver) EventRecord(uintptr, uintptr) error     { f.calls++; return nil }
func (f *fakeDriver) EventSync(uintptr) error                { f.calls++; return nil }
func (f *fakeDriver) EventQuery(uintptr) error               { f.calls++; return nil }
func (f *fakeDriver) EventElapsed(uintptr, uintptr) (float32, error) {
	f.calls++
	return 1.5, nil
}
func (f *fakeDriver) EventDestroy(uintptr) error { f.calls++; return nil }

func TestBudget(t *testing.T) {
	f := newFake()
	d := NewDevice(f)
	d.SetBudget(1000)
	a, err := d.Alloc(600)
	require.NoError(t, err)
	_, err = d.Alloc(500)
	require.True(t, errors.Is(err, ErrOutOfMemory), "over budget must match ErrOutOfMemory: %v", err)
	require.ErrorContains(t, err, "budget of 1000 bytes has 400 left")
	free, total, err := d.MemInfo()
	require.NoError(t, err)
	require.Equal(t, uint64(400), free)
	require.Equal(t, uint64(1000), total)
	require.NoError(t, a.Free())
	require.Equal(t, uint64(0), d.Used())
	b, err := d.Alloc(1000)
	require.NoError(t, err, "freed memory returns to the budget")
	require.Error(t, a.Free(), "double free")
	require.NoError(t, b.Free())
	d.SetBudget(0)
	_, err = d.Alloc(1 << 20)
	require.NoError(t, err, "no budget")
}

func TestFaultPoisons(t *testing.T) {
	f := newFake()
	d := NewDevice(f)
	m, err := d.LoadModule(CodeObject{Name: "fk_1/x", Target: "fk_1", Image: []byte("x")})
	require.NoError(t, err)
	fn, err := m.Func("strata_x")
	require.NoError(t, err)
	f.failWith = &Error{Backend: "fake", Call: "launch", Code: 700, Name: "IllegalAddress"}
	err = fn.Launch(nil, Dim3{1, 1, 1}, Dim3{32, 1, 1}, 0, nil)
	require.True(t, errors.Is(err, ErrDeviceFault), "%v", err)
	before := f.calls
	_, err = d.Alloc(16)
	require.True(t, errors.Is(err, ErrDeviceFault), "later calls return the fault: %v", err)
	require.ErrorContains(t, err, "restart the process")
	require.Equal(t, before, f.calls, "a poisoned device makes no driver call")
}

func TestNotFaultDoesNotPoison(t *testing.T) {
	f := newFake()
	d := NewDevice(f)
	m, err := d.LoadModule(CodeObject{Name: "fk_1/x", Target: "fk_1", Image: []byte("x")})
	require.NoError(t, err)
	fn, _ := m.Func("strata_x")
	f.failWith = &Error{Backend: "fake", Call: "launch", Code: 1, Name: "InvalidValue"}
	require.Error(t, fn.Launch(nil, Dim3{1, 1, 1}, Dim3{32, 1, 1}, 0, nil))
	_, err = d.Alloc(16)
	require.NoError(t, err)
}

func TestLoadModuleChecksTarget(t *testing.T) {
	f := newFake()
	d := NewDevice(f)
	_, err := d.LoadModule(CodeObject{Name: "fk_2/x", Target: "fk_2", Image: []byte("x")})
	require.ErrorContains(t, err, "code object fk_2/x is for fk_2, device fake:0 (Fake) is fk_1")
	require.Equal(t, 0, f.calls, "the runtime is not asked")
}

func TestLaunchRejectsZeroDims(t *testing.T) {
	d := NewDevice(newFake())
	m, _ := d.LoadModule(CodeObject{Name: "fk_1/x", Target: "fk_1", Image: []byte("x")})
	fn, _ := m.Func("strata_x")
	require.ErrorContains(t, fn.Launch(nil, Dim3{0, 1, 1}, Dim3{32, 1, 1}, 0, nil), "no zero dimension")
}

func TestMappingProof(t *testing.T) {
	t.Run("works", func(t *testing.T) {
		d := NewDevice(newFake())
		h, err := d.HostAlloc(4096, true)
		require.NoError(t, err)
		p, ok, err := h.Mapped()
		require.True(t, ok, "%v", err)
		require.Equal(t, DevPtr(h.Ptr()), p)
		require.Equal(t, byte(0), h.Bytes()[0], "the proof leaves the buffer cleared")
	})
	t.Run("write goes nowhere", func(t *testing.T) {
		f := newFake()
		f.fillWorks = false
		d := NewDevice(f)
		h, err := d.HostAlloc(4096, true)
		require.NoError(t, err, "the buffer is still usable pinned memory")
		_, ok, err := h.Mapped()
		require.True(t, !ok)
		require.ErrorContains(t, err, "the mapping is not usable")
	})
	t.Run("alias faults", func(t *testing.T) {
		f := newFake()
		f.aliasOffset = 1 << 40
		d := NewDevice(f)
		h, err := d.HostAlloc(4096, true)
		require.NoError(t, err)
		_, ok, err := h.Mapped()
		require.True(t, !ok)
		require.ErrorContains(t, err, "device could not write through the alias")
	})
	t.Run("backend has no probe, registered one proves", func(t *testing.T) {
		f := newFake()
		f.fillWorks = false
		d := NewDevice(f)
		m, err := d.LoadModule(CodeObject{Name: "fk_1/probe", Target: "fk_1", Image: []byte("x")})
		require.NoError(t, err)
		fn, err := m.Func("probe")
		require.NoError(t, err)
		d.SetProbe(fn)
		h, err := d.HostAlloc(4096, true)
		require.NoError(t, err)
		_, ok, err := h.Mapped()
		require.True(t, ok, "%v", err)
	})
	t.Run("not mapped", func(t *testing.T) {
		d := NewDevice(newFake())
		h, err := d.HostAlloc(4096, false)
		require.NoError(t, err)
		_, ok, _ := h.Mapped()
		require.True(t, !ok)
	})
}

func TestErrorFormat(t *testing.T) {
	e := &Error{Backend: "hip", Call: "hipModuleGetFunction", Object: "strata_mmq_iq3_s", Code: 500, Name: "hipErrorNotFound"}
	require.Equal(t, "hip: hipModuleGetFunction strata_mmq_iq3_s: hipErrorNotFound (500)", e.Error())
	require.True(t, errors.Is(&Error{Code: 2}, ErrOutOfMemory))
	require.True(t, errors.Is(&Error{Code: 719}, ErrDeviceFault))
	require.True(t, !errors.Is(&Error{Code: 1}, ErrDeviceFault))
}
