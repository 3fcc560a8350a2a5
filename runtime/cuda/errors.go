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
	return gpu.CString(p)
}
