package hip

import (
	"strconv"

	"github.com/ebitengine/purego"
	"github.com/strata-hip/strata/runtime/gpu"
)

const hipSuccess = 0

// check turns a hipError_t into nil or a *gpu.Error. On failure it drains the thread's
// last error with one hipGetLastError: ROCm 7 made it sticky, and a later call would
// otherwise report this failure again (gpu-abi.md §8). The caller holds the OS thread
// locked, so the drain reaches the thread that failed; it is bounded to one call
// because after a failed init hipGetLastError itself returns an error.
func (l *lib) check(r uintptr, call, object string) error {
	code := int32(r)
	if code == hipSuccess {
		return nil
	}
	_, _, _ = purego.SyscallN(l.hipGetLastError)
	return &gpu.Error{Backend: "hip", Call: call, Object: object, Code: int(code), Name: l.errorName(code)}
}

// errorName asks the runtime for the enum name (never NULL; unknown codes give
// "hipErrorUnknown", so the number is kept beside it in gpu.Error).
func (l *lib) errorName(code int32) string {
	r, _, _ := purego.SyscallN(l.hipGetErrorName, uintptr(code))
	if s := gpu.CString(r); s != "" {
		return s
	}
	return "hipError_t " + strconv.Itoa(int(code))
}
