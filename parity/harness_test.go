package parity

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/strata-hip/strata/quant"
	"github.com/strata-hip/strata/runtime/gpu"
)

// memDriver is a gpu.Driver over Go memory whose "kernels" are Go functions: it lets the
// harness (poisons, guards, input checks) and the bounds be tested where there is no
// GPU, against kernels that are wrong in known ways.
type memDriver struct {
	next    uintptr
	allocs  map[uintptr][]byte
	kernels map[string]func(d *memDriver, args []byte)
	funcs   []string
}

func newMemDriver(k map[string]func(*memDriver, []byte)) *memDriver {
	return &memDriver{next: 1 << 20, allocs: map[uintptr][]byte{}, kernels: k}
}

// mem returns the bytes at device address p (any offset inside an allocation).
func (m *memDriver) mem(p uint64, n int) []byte {
	for base, b := range m.allocs {
		if uintptr(p) >= base && uintptr(p)+uintptr(n) <= base+uintptr(len(b)) {
			off := uintptr(p) - base
			return b[off : off+uintptr(n)]
		}
	}
	panic("memDriver: access outside every allocation")
}

var errUnsupported = errors.New("memDriver: unsupported")

func (m *memDriver) Info() gpu.DeviceInfo {
	return gpu.DeviceInfo{Backend: "mem", Name: "Go memory", Arch: "mem_1"}
}
func (m *memDriver) Close() error                     { return nil }
func (m *memDriver) MemInfo() (uint64, uint64, error) { return 1 << 30, 1 << 30, nil }
func (m *memDriver) Synchronize() error               { return nil }
func (m *memDriver) Alloc(n uintptr) (gpu.DevPtr, error) {
	p := m.next
	m.allocs[p] = make([]byte, n)
	m.next += (n + 4095) &^ 4095
	return gpu.DevPtr(p), nil
}
func (m *memDriver) Free(p gpu.DevPtr) error { delete(m.allocs, uintptr(p)); return nil }
func (m *memDriver) Upload(dst gpu.DevPtr, src []byte) error {
	copy(m.mem(uint64(dst), len(src)), src)
	return nil
}
func (m *memDriver) Download(dst []byte, src gpu.DevPtr) error {
	copy(dst, m.mem(uint64(src), len(dst)))
	return nil
}
func (m *memDriver) CopyAsync(gpu.CopyKind, uintptr, uintptr, uintptr, uintptr) error {
	return errUnsupported
}
func (m *memDriver) MemsetAsync(gpu.DevPtr, byte, uintptr, uintptr) error { return errUnsupported }
func (m *memDriver) HostAlloc(uintptr, bool) (unsafe.Pointer, error)      { return nil, errUnsupported }
func (m *memDriver) HostFree(unsafe.Pointer) error                        { return errUnsupported }
func (m *memDriver) HostRegister(unsafe.Pointer, uintptr, bool) error     { return errUnsupported }
func (m *memDriver) HostUnregister(unsafe.Pointer) error                  { return errUnsupported }
func (m *memDriver) HostDevicePtr(unsafe.Pointer) (gpu.DevPtr, error)     { return 0, errUnsupported }
func (m *memDriver) FillWords(gpu.DevPtr, int, uint32) error              { return errUnsupported }
func (m *memDriver) LoadModule([]byte, string) (uintptr, error)           { return 1, nil }
func (m *memDriver) UnloadModule(uintptr) error                           { return nil }
func (m *memDriver) Function(_ uintptr, sym string) (uintptr, error) {
	if m.kernels[sym] == nil {
		return 0, &gpu.Error{Backend: "mem", Call: "Function", Object: sym, Code: 500, Name: "NotFound"}
	}
	m.funcs = append(m.funcs, sym)
	return uintptr(len(m.funcs)), nil
}
func (m *memDriver) Launch(fn uintptr, _, _ gpu.Dim3, _ uint32, _ uintptr, args []byte, _ string) error {
	m.kernels[m.funcs[fn-1]](m, args)
	return nil
}
func (m *memDriver) StreamCreate() (uintptr, error)                 { return 1, nil }
func (m *memDriver) StreamSync(uintptr) error                       { return nil }
func (m *memDriver) StreamDestroy(uintptr) error                    { return nil }
func (m *memDriver) StreamWaitEvent(uintptr, uintptr) error         { return nil }
func (m *memDriver) EventCreate() (uintptr, error)                  { return 1, nil }
func (m *memDriver) EventRecord(uintptr, uintptr) error             { return nil }
func (m *memDriver) EventSync(uintptr) error                        { return nil }
func (m *memDriver) EventQuery(uintptr) error                       { return nil }
func (m *memDriver) EventElapsed(uintptr, uintptr) (float32, error) { return 0.001, nil }
func (m *memDriver) EventDestroy(uintptr) error                     { return nil }

// quantizeKernel emulates strata_quantize_q8_1_f32 with quant.QuantizeQ8_1GPU, then
// lets spoil make it wrong in one way.
func quantizeKernel(spoil func(d *memDriver, y uint64, out, x, prev []byte)) func(*memDriver, []byte) {
	return func(d *memDriver, a []byte) {
		x, y := binary.LittleEndian.Uint64(a[0:]), binary.LittleEndian.Uint64(a[8:])
		cols, padded := int(int32(binary.LittleEndian.Uint32(a[16:]))), int(int32(binary.LittleEndian.Uint32(a[20:])))
		rows, stride := int(int32(binary.LittleEndian.Uint32(a[24:]))), int(int32(binary.LittleEndian.Uint32(a[28:])))
		xb := d.mem(x, 4*((rows-1)*stride+cols))
		xs := make([]float32, rows*stride)
		for i := 0; i < len(xb)/4; i++ {
			xs[i] = math.Float32frombits(binary.LittleEndian.Uint32(xb[4*i:]))
		}
		ref, err := quantizeQ81Ref(xs, rows, cols, padded, stride)
		if err != nil {
			panic(err)
		}
		out := d.mem(y, len(ref))
		prev := append([]byte(nil), out...) // what the output held before the launch
		copy(out, ref)
		if spoil != nil {
			spoil(d, y, out, xb, prev)
		}
	}
}

func TestHarnessCatches(t *testing.T) {
	c := Case{"rows=3,cols=100", []int{3, 100, 128, 100}}
	tests := []struct {
		name      string
		spoil     func(d *memDriver, y uint64, out, x, prev []byte)
		floatOnly bool   // check only the float64 bounds (the exact one would report first)
		want      string // "" = must pass
	}{
		{"correct kernel passes", nil, false, ""},
		{"one byte past the output", func(d *memDriver, y uint64, out, _, _ []byte) { d.mem(y, len(out)+1)[len(out)] = 7 },
			false, "guard byte 1 after"},
		{"one byte before the output", func(d *memDriver, y uint64, _, _, _ []byte) { d.mem(y-1, 1)[0] = 7 },
			false, "guard byte 1 before"},
		{"an element left unwritten", func(_ *memDriver, _ uint64, out, _, prev []byte) { out[40] = prev[40] },
			false, "did not write it"},
		{"an input overwritten", func(_ *memDriver, _ uint64, _, x, _ []byte) { x[8] ^= 1 },
			false, "wrote to an input"},
		{"one q off by one", func(_ *memDriver, _ uint64, out, _, _ []byte) { out[4+5] += 2 },
			false, "bytes: 1 of"},
		{"a wrong scale", func(_ *memDriver, _ uint64, out, _, _ []byte) {
			binary.LittleEndian.PutUint16(out[36:], quant.F32ToF16(1.01*quant.F16ToF32(binary.LittleEndian.Uint16(out[36:]))))
		}, true, "dequant: max row relative error"},
		{"a wrong sum", func(_ *memDriver, _ uint64, out, _, _ []byte) {
			binary.LittleEndian.PutUint16(out[38:], quant.F32ToF16(quant.F16ToF32(binary.LittleEndian.Uint16(out[38:]))+1))
		}, true, "sum: max row relative error"},
		{"a NaN sum", func(_ *memDriver, _ uint64, out, _, _ []byte) { binary.LittleEndian.PutUint16(out[2:], 0x7E00) },
			true, "NaN/Inf"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			drv := newMemDriver(map[string]func(*memDriver, []byte){"q": quantizeKernel(tc.spoil)})
			dev := gpu.NewDevice(drv)
			mod, err := dev.LoadModule(gpu.CodeObject{Name: "mem/q", Target: "mem_1", Image: []byte{1}})
			if err != nil {
				t.Fatal(err)
			}
			h := &Harness{Dev: dev, Mod: mod}
			defer h.Close()
			bounds := quantizeQ81Bounds
			if tc.floatOnly {
				bounds = bounds[1:]
			}
			_, err = runQuantizeQ81(h, "q", c, bounds, rand.New(rand.NewPCG(1, 2)))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("correct kernel rejected: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
		})
	}
}

func TestCompareRows(t *testing.T) {
	want := []float64{1, -2, 0, 4}
	r := CompareRows([]float64{1, -2, 0.01, 4}, want, 2, func(row int) float64 { return []float64{2, 4}[row] })
	if r.MaxRowRel != 0.01/4 || r.N != 4 || r.NonFinite != 0 {
		t.Fatalf("%+v", r)
	}
	b := Bound{Name: "x", MaxRowRel: 1e-3, Why: "test"}
	if err := b.Verify(r); err == nil || !strings.Contains(err.Error(), "0.0025 > 0.001") {
		t.Fatalf("want the bound to fail naming both numbers, got %v", err)
	}
	r = CompareRows([]float64{1, math.Inf(1), 0, 4}, want, 2, func(int) float64 { return 1 })
	if err := (Bound{Name: "x", MaxRowRel: 1e9}).Verify(r); err == nil || !strings.Contains(err.Error(), "NaN/Inf") {
		t.Fatalf("Inf must never pass: %v", err)
	}
	if err := (Bound{Name: "x", Exact: true}).Verify(CompareExact([]int{1, 2}, []int{1, 3})); err == nil || !strings.Contains(err.Error(), "[1] got 2 want 3") {
		t.Fatalf("exact mismatch: %v", err)
	}
}
