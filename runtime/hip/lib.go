package hip

import (
	"fmt"
	"path/filepath"
	"runtime"

	"github.com/strata-hip/strata/runtime/gpu"
)

// lib is the HIP runtime's symbol table, resolved once by openLib. Each field is the
// address of the export named in its comment; the C prototype follows. Every function
// returns hipError_t (a 4-byte enum).
type lib struct {
	path string

	hipInit              uintptr // hipError_t hipInit(unsigned flags)
	hipRuntimeGetVersion uintptr // hipError_t hipRuntimeGetVersion(int* v)
	hipGetErrorName      uintptr // const char* hipGetErrorName(hipError_t e)
	hipGetLastError      uintptr // hipError_t hipGetLastError(void)
	hipGetDeviceCount    uintptr // hipError_t hipGetDeviceCount(int* n)
	hipSetDevice         uintptr // hipError_t hipSetDevice(int dev)
	hipDeviceGetAttr     uintptr // hipError_t hipDeviceGetAttribute(int* v, hipDeviceAttribute_t a, int dev)
	hipDeviceGetName     uintptr // hipError_t hipDeviceGetName(char* buf, int len, hipDevice_t dev)
	hipDeviceGetPCIBusId uintptr // hipError_t hipDeviceGetPCIBusId(char* buf, int len, int dev)
	hipDeviceTotalMem    uintptr // hipError_t hipDeviceTotalMem(size_t* bytes, hipDevice_t dev)
	hipMemGetInfo        uintptr // hipError_t hipMemGetInfo(size_t* free, size_t* total)
	hipDeviceSynchronize uintptr // hipError_t hipDeviceSynchronize(void)

	// Device properties: ROCm 6+ exports hipGetDevicePropertiesR0600 (1472-byte struct);
	// the plain export fills the old 792-byte layout on every version (gpu-abi.md §3).
	hipGetDevicePropertiesR0600 uintptr // optional: hipError_t (hipDeviceProp_tR0600* p, int dev)
	hipGetDeviceProperties      uintptr // hipError_t hipGetDeviceProperties(hipDeviceProp_t* p, int dev) — R0000 layout

	hipModuleLoadData     uintptr // hipError_t hipModuleLoadData(hipModule_t* m, const void* image)
	hipModuleUnload       uintptr // hipError_t hipModuleUnload(hipModule_t m)
	hipModuleGetFunction  uintptr // hipError_t hipModuleGetFunction(hipFunction_t* f, hipModule_t m, const char* name)
	hipModuleLaunchKernel uintptr // hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned gx, gy, gz, bx, by, bz, unsigned shmem, hipStream_t s, void** params, void** extra)

	hipMalloc               uintptr // hipError_t hipMalloc(void** p, size_t n)
	hipFree                 uintptr // hipError_t hipFree(void* p)
	hipMemcpyHtoD           uintptr // hipError_t hipMemcpyHtoD(hipDeviceptr_t dst, void* src, size_t n)
	hipMemcpyDtoH           uintptr // hipError_t hipMemcpyDtoH(void* dst, hipDeviceptr_t src, size_t n)
	hipMemcpyAsync          uintptr // hipError_t hipMemcpyAsync(void* dst, const void* src, size_t n, hipMemcpyKind k, hipStream_t s)
	hipMemsetAsync          uintptr // hipError_t hipMemsetAsync(void* d, int byte, size_t n, hipStream_t s)
	hipHostMalloc           uintptr // hipError_t hipHostMalloc(void** p, size_t n, unsigned flags)
	hipHostFree             uintptr // hipError_t hipHostFree(void* p)
	hipHostRegister         uintptr // hipError_t hipHostRegister(void* p, size_t n, unsigned flags)
	hipHostUnregister       uintptr // hipError_t hipHostUnregister(void* p)
	hipHostGetDevicePointer uintptr // hipError_t hipHostGetDevicePointer(void** d, void* h, unsigned flags)

	hipStreamCreateWithFlags uintptr // hipError_t hipStreamCreateWithFlags(hipStream_t* s, unsigned flags)
	hipStreamSynchronize     uintptr // hipError_t hipStreamSynchronize(hipStream_t s)
	hipStreamDestroy         uintptr // hipError_t hipStreamDestroy(hipStream_t s)
	hipStreamWaitEvent       uintptr // hipError_t hipStreamWaitEvent(hipStream_t s, hipEvent_t e, unsigned flags)
	hipEventCreateWithFlags  uintptr // hipError_t hipEventCreateWithFlags(hipEvent_t* e, unsigned flags)
	hipEventRecord           uintptr // hipError_t hipEventRecord(hipEvent_t e, hipStream_t s)
	hipEventSynchronize      uintptr // hipError_t hipEventSynchronize(hipEvent_t e)
	hipEventQuery            uintptr // hipError_t hipEventQuery(hipEvent_t e)
	hipEventElapsedTime      uintptr // hipError_t hipEventElapsedTime(float* ms, hipEvent_t start, hipEvent_t stop)
	hipEventDestroy          uintptr // hipError_t hipEventDestroy(hipEvent_t e)
}

type symbol struct {
	name     string
	addr     *uintptr
	optional bool // absent on some supported versions; the code checks for 0
}

// symbols lists every binding. All exist in ROCm 5.0 through 7.x except the optional
// ones (gpu-abi.md §2).
func (l *lib) symbols() []symbol {
	return []symbol{
		{"hipInit", &l.hipInit, false},
		{"hipRuntimeGetVersion", &l.hipRuntimeGetVersion, false},
		{"hipGetErrorName", &l.hipGetErrorName, false},
		{"hipGetLastError", &l.hipGetLastError, false},
		{"hipGetDeviceCount", &l.hipGetDeviceCount, false},
		{"hipSetDevice", &l.hipSetDevice, false},
		{"hipDeviceGetAttribute", &l.hipDeviceGetAttr, false},
		{"hipDeviceGetName", &l.hipDeviceGetName, false},
		{"hipDeviceGetPCIBusId", &l.hipDeviceGetPCIBusId, false},
		{"hipDeviceTotalMem", &l.hipDeviceTotalMem, false},
		{"hipMemGetInfo", &l.hipMemGetInfo, false},
		{"hipDeviceSynchronize", &l.hipDeviceSynchronize, false},
		{"hipGetDevicePropertiesR0600", &l.hipGetDevicePropertiesR0600, true},
		{"hipGetDeviceProperties", &l.hipGetDeviceProperties, false},
		{"hipModuleLoadData", &l.hipModuleLoadData, false},
		{"hipModuleUnload", &l.hipModuleUnload, false},
		{"hipModuleGetFunction", &l.hipModuleGetFunction, false},
		{"hipModuleLaunchKernel", &l.hipModuleLaunchKernel, false},
		{"hipMalloc", &l.hipMalloc, false},
		{"hipFree", &l.hipFree, false},
		{"hipMemcpyHtoD", &l.hipMemcpyHtoD, false},
		{"hipMemcpyDtoH", &l.hipMemcpyDtoH, false},
		{"hipMemcpyAsync", &l.hipMemcpyAsync, false},
		{"hipMemsetAsync", &l.hipMemsetAsync, false},
		{"hipHostMalloc", &l.hipHostMalloc, false},
		{"hipHostFree", &l.hipHostFree, false},
		{"hipHostRegister", &l.hipHostRegister, false},
		{"hipHostUnregister", &l.hipHostUnregister, false},
		{"hipHostGetDevicePointer", &l.hipHostGetDevicePointer, false},
		{"hipStreamCreateWithFlags", &l.hipStreamCreateWithFlags, false},
		{"hipStreamSynchronize", &l.hipStreamSynchronize, false},
		{"hipStreamDestroy", &l.hipStreamDestroy, false},
		{"hipStreamWaitEvent", &l.hipStreamWaitEvent, false},
		{"hipEventCreateWithFlags", &l.hipEventCreateWithFlags, false},
		{"hipEventRecord", &l.hipEventRecord, false},
		{"hipEventSynchronize", &l.hipEventSynchronize, false},
		{"hipEventQuery", &l.hipEventQuery, false},
		{"hipEventElapsedTime", &l.hipEventElapsedTime, false},
		{"hipEventDestroy", &l.hipEventDestroy, false},
	}
}

// libraryNames lists where the HIP runtime may be, most specific first: $ROCM_PATH/lib
// and $HIP_PATH/lib, /opt/rocm/lib (ROCm does not add it to the loader path), then the
// sonames for the system loader, newest major first (gpu-abi.md §1.1).
func libraryNames(getenv func(string) string) []string {
	if runtime.GOOS == "windows" {
		var out []string
		for _, dir := range []string{getenv("HIP_PATH")} {
			if dir != "" {
				for _, n := range []string{"amdhip64_7.dll", "amdhip64_6.dll", "amdhip64.dll"} {
					out = append(out, filepath.Join(dir, "bin", n))
				}
			}
		}
		return append(out, "amdhip64_7.dll", "amdhip64_6.dll", "amdhip64.dll")
	}
	sonames := []string{"libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"}
	var out []string
	for _, dir := range []string{getenv("ROCM_PATH"), getenv("HIP_PATH"), "/opt/rocm"} {
		if dir == "" {
			continue
		}
		for _, s := range sonames {
			out = append(out, filepath.Join(dir, "lib", s))
		}
	}
	return append(out, sonames...)
}

// openLib loads the runtime and resolves the table. A missing required symbol is an
// error naming it and the library path.
func openLib(candidates []string) (*lib, error) {
	h, path, err := gpu.OpenLibrary(candidates)
	if err != nil {
		return nil, fmt.Errorf("hip: the HIP runtime (libamdhip64) is not installed: %w", err)
	}
	l := &lib{path: path}
	for _, s := range l.symbols() {
		*s.addr = gpu.LookupSymbol(h, s.name)
		if *s.addr == 0 && !s.optional {
			return nil, fmt.Errorf("hip: %s has no symbol %s: this HIP runtime is too old or not AMD's (ROCm 5.0 or newer is needed)", path, s.name)
		}
	}
	return l, nil
}
