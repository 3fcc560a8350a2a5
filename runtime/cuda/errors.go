package cuda

import (
	"strconv"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/strata-hip/strata/runtime/gpu"
)

// CUresult values this package branches on (cuda.h; same in 12.6 and 13.0).
const (
	cudaSuccess       = 0
	cudaErrorNoDevice = 100
	cudaErrorNotReady = 600
)

// check turns a CUresult into nil or a *gpu.Error naming the call and the object.
// The driver API has no last-error slot to drain: each call returns its own status.
func (l *lib) check(r uintptr, call, object string) error {
	code := int32(r)
	if code == cudaSuccess {
		return nil
	}
	return &gpu.Error{Backend: "cuda", Call: call, Object: object, Code: int(code), Name: l.errorName(code)}
}

// errorName asks the driver for the enum name; unknown codes come back as "CUresult N".
func (l *lib) errorName(code int32) string {
	var p uintptr
	if r, _, _ := purego.SyscallN(l.cuGetErrorName, uintptr(code), uintptr(unsafe.Pointer(&p))); int32(r) != 0 || p == 0 {
		return "CUresult " + strconv.Itoa(int(code))
	}
	return cstring(p)
}

// cstring copies a NUL-terminated C string the driver owns (static tables).
func cstring(p uintptr) string {
	if p == 0 {
		return ""
	}
	// p is C memory, never a Go pointer; the double conversion keeps vet quiet.
	base := *(*unsafe.Pointer)(unsafe.Pointer(&p))
	n := 0
	for *(*byte)(unsafe.Add(base, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(base), n))
}

// cbuf returns the text of a NUL-terminated buffer the driver filled.
func cbuf(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
