package gpu

import (
	"errors"
	"fmt"
)

// Sentinels that callers branch on. Backend errors match them through (*Error).Is.
var (
	// ErrNoDevice: no usable device (none present, all hidden, or none selectable).
	ErrNoDevice = errors.New("gpu: no device")
	// ErrOutOfMemory: an allocation failed, for real or because of the VRAM budget.
	ErrOutOfMemory = errors.New("gpu: out of memory")
	// ErrNotReady: the queried work has not finished.
	ErrNotReady = errors.New("gpu: not ready")
	// ErrDeviceFault: the context is dead (illegal address, launch failure or timeout,
	// ECC, device assert); only a new process recovers.
	ErrDeviceFault = errors.New("gpu: device fault")
	// ErrNoLibrary: the vendor runtime library could not be loaded.
	ErrNoLibrary = errors.New("gpu: runtime library not found")
)

// Status codes shared by the HIP runtime and the CUDA driver (same numbers on both).
const (
	codeOutOfMemory = 2
	codeNoDevice    = 100
	codeNotReady    = 600
)

// faultCodes are the statuses after which the context is unusable (gpu-abi.md §8).
var faultCodes = map[int]bool{
	214: true, // ECC uncorrectable
	700: true, // illegal address
	701: true, // launch out of resources (HIP treats it as fatal; CUDA's is not sticky but we stop anyway)
	702: true, // launch timeout
	710: true, // device assert
	719: true, // launch failure
}

// Error is a failed runtime call.
type Error struct {
	Backend string // "cuda" or "hip"
	Call    string // the C function, e.g. "cuModuleLoadData"
	Object  string // what the call was about (symbol, module, size), may be empty
	Code    int    // the status the call returned
	Name    string // the runtime's name for Code, e.g. "hipErrorNoBinaryForGpu"
}

func (e *Error) Error() string {
	obj := ""
	if e.Object != "" {
		obj = " " + e.Object
	}
	return fmt.Sprintf("%s: %s%s: %s (%d)", e.Backend, e.Call, obj, e.Name, e.Code)
}

// Is matches the sentinels by status code.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrOutOfMemory:
		return e.Code == codeOutOfMemory
	case ErrNoDevice:
		return e.Code == codeNoDevice
	case ErrNotReady:
		return e.Code == codeNotReady
	case ErrDeviceFault:
		return IsFaultCode(e.Code)
	}
	return false
}

// IsFaultCode reports whether a status leaves the context unusable.
func IsFaultCode(code int) bool { return faultCodes[code] }
