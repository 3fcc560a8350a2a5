package cuda

import (
	"fmt"
	"runtime"

	"github.com/strata-hip/strata/runtime/gpu"
)

// lib is the CUDA driver's symbol table, resolved once by load. Each field is the
// address of the exported function named in its comment; the C prototype follows.
// Always the _v2 exports where the plain name has the 32-bit ABI (gpu-abi.md §9.1).
type lib struct {
	path string

	cuInit               uintptr // CUresult cuInit(unsigned flags)
	cuDriverGetVersion   uintptr // CUresult cuDriverGetVersion(int* v)
	cuGetErrorName       uintptr // CUresult cuGetErrorName(CUresult e, const char** out)
	cuDeviceGetCount     uintptr // CUresult cuDeviceGetCount(int* n)
	cuDeviceGet          uintptr // CUresult cuDeviceGet(CUdevice* d, int ordinal)
	cuDeviceGetName      uintptr // CUresult cuDeviceGetName(char* name, int len, CUdevice d)
	cuDeviceGetAttribute uintptr // CUresult cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d)
	cuDeviceTotalMem     uintptr // cuDeviceTotalMem_v2: CUresult (size_t* bytes, CUdevice d)
	cuDeviceGetPCIBusId  uintptr // CUresult cuDeviceGetPCIBusId(char* buf, int len, CUdevice d)

	cuDevicePrimaryCtxRetain  uintptr // CUresult cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d)
	cuDevicePrimaryCtxRelease uintptr // cuDevicePrimaryCtxRelease_v2: CUresult (CUdevice d)
	cuCtxSetCurrent           uintptr // CUresult cuCtxSetCurrent(CUcontext c)
	cuCtxSynchronize          uintptr // CUresult cuCtxSynchronize(void)
	cuMemGetInfo              uintptr // cuMemGetInfo_v2: CUresult (size_t* free, size_t* total)

	cuModuleLoadDataEx  uintptr // CUresult cuModuleLoadDataEx(CUmodule* m, const void* image, unsigned n, CUjit_option* opts, void** vals)
	cuModuleUnload      uintptr // CUresult cuModuleUnload(CUmodule m)
	cuModuleGetFunction uintptr // CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name)
	cuLaunchKernel      uintptr // CUresult cuLaunchKernel(CUfunction f, unsigned gx, gy, gz, bx, by, bz, unsigned shmem, CUstream s, void** params, void** extra)

	cuMemAlloc          uintptr // cuMemAlloc_v2: CUresult (CUdeviceptr* p, size_t n)
	cuMemFree           uintptr // cuMemFree_v2: CUresult (CUdeviceptr p)
	cuMemcpyHtoD        uintptr // cuMemcpyHtoD_v2: CUresult (CUdeviceptr dst, const void* src, size_t n)
	cuMemcpyDtoH        uintptr // cuMemcpyDtoH_v2: CUresult (void* dst, CUdeviceptr src, size_t n)
	cuMemcpyHtoDAsync   uintptr // cuMemcpyHtoDAsync_v2: CUresult (CUdeviceptr dst, const void* src, size_t n, CUstream s)
	cuMemcpyDtoHAsync   uintptr // cuMemcpyDtoHAsync_v2: CUresult (void* dst, CUdeviceptr src, size_t n, CUstream s)
	cuMemcpyDtoDAsync   uintptr // cuMemcpyDtoDAsync_v2: CUresult (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
	cuMemsetD8Async     uintptr // CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s)
	cuMemHostAlloc      uintptr // CUresult cuMemHostAlloc(void** p, size_t n, unsigned flags)
	cuMemFreeHost       uintptr // CUresult cuMemFreeHost(void* p)
	cuMemHostRegister   uintptr // cuMemHostRegister_v2: CUresult (void* p, size_t n, unsigned flags)
	cuMemHostUnregister uintptr // CUresult cuMemHostUnregister(void* p)
	cuMemHostGetDevPtr  uintptr // cuMemHostGetDevicePointer_v2: CUresult (CUdeviceptr* d, void* p, unsigned flags)

	cuStreamCreate      uintptr // CUresult cuStreamCreate(CUstream* s, unsigned flags)
	cuStreamSynchronize uintptr // CUresult cuStreamSynchronize(CUstream s)
	cuStreamDestroy     uintptr // cuStreamDestroy_v2: CUresult (CUstream s)
	cuStreamWaitEvent   uintptr // CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags)
	cuEventCreate       uintptr // CUresult cuEventCreate(CUevent* e, unsigned flags)
	cuEventRecord       uintptr // CUresult cuEventRecord(CUevent e, CUstream s)
	cuEventSynchronize  uintptr // CUresult cuEventSynchronize(CUevent e)
	cuEventQuery        uintptr // CUresult cuEventQuery(CUevent e)
	cuEventElapsedTime  uintptr // CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) — plain name: every driver has it
	cuEventDestroy      uintptr // cuEventDestroy_v2: CUresult (CUevent e)

	graph graphLib // stream capture and graph replay (graph.go): optional

	// Optional (0 when absent): the profiler range (profile.go) and the extended launch
	// (pdl.go).
	cuProfilerStart uintptr // CUresult cuProfilerStart(void)
	cuProfilerStop  uintptr // CUresult cuProfilerStop(void)
	// CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra)
	cuLaunchKernelEx uintptr
}

// binding is one exported name and where its address goes.
type binding struct {
	name string
	addr *uintptr
}

// symbols lists every binding. All are required: the CUDA driver has exported each of
// them since CUDA 4 (gpu-abi.md §9).
func (l *lib) symbols() []binding {
	return []binding{
		{"cuInit", &l.cuInit},
		{"cuDriverGetVersion", &l.cuDriverGetVersion},
		{"cuGetErrorName", &l.cuGetErrorName},
		{"cuDeviceGetCount", &l.cuDeviceGetCount},
		{"cuDeviceGet", &l.cuDeviceGet},
		{"cuDeviceGetName", &l.cuDeviceGetName},
		{"cuDeviceGetAttribute", &l.cuDeviceGetAttribute},
		{"cuDeviceTotalMem_v2", &l.cuDeviceTotalMem},
		{"cuDeviceGetPCIBusId", &l.cuDeviceGetPCIBusId},
		{"cuDevicePrimaryCtxRetain", &l.cuDevicePrimaryCtxRetain},
		{"cuDevicePrimaryCtxRelease_v2", &l.cuDevicePrimaryCtxRelease},
		{"cuCtxSetCurrent", &l.cuCtxSetCurrent},
		{"cuCtxSynchronize", &l.cuCtxSynchronize},
		{"cuMemGetInfo_v2", &l.cuMemGetInfo},
		{"cuModuleLoadDataEx", &l.cuModuleLoadDataEx},
		{"cuModuleUnload", &l.cuModuleUnload},
		{"cuModuleGetFunction", &l.cuModuleGetFunction},
		{"cuLaunchKernel", &l.cuLaunchKernel},
		{"cuMemAlloc_v2", &l.cuMemAlloc},
		{"cuMemFree_v2", &l.cuMemFree},
		{"cuMemcpyHtoD_v2", &l.cuMemcpyHtoD},
		{"cuMemcpyDtoH_v2", &l.cuMemcpyDtoH},
		{"cuMemcpyHtoDAsync_v2", &l.cuMemcpyHtoDAsync},
		{"cuMemcpyDtoHAsync_v2", &l.cuMemcpyDtoHAsync},
		{"cuMemcpyDtoDAsync_v2", &l.cuMemcpyDtoDAsync},
		{"cuMemsetD8Async", &l.cuMemsetD8Async},
		{"cuMemHostAlloc", &l.cuMemHostAlloc},
		{"cuMemFreeHost", &l.cuMemFreeHost},
		{"cuMemHostRegister_v2", &l.cuMemHostRegister},
		{"cuMemHostUnregister", &l.cuMemHostUnregister},
		{"cuMemHostGetDevicePointer_v2", &l.cuMemHostGetDevPtr},
		{"cuStreamCreate", &l.cuStreamCreate},
		{"cuStreamSynchronize", &l.cuStreamSynchronize},
		{"cuStreamDestroy_v2", &l.cuStreamDestroy},
		{"cuStreamWaitEvent", &l.cuStreamWaitEvent},
		{"cuEventCreate", &l.cuEventCreate},
		{"cuEventRecord", &l.cuEventRecord},
		{"cuEventSynchronize", &l.cuEventSynchronize},
		{"cuEventQuery", &l.cuEventQuery},
		{"cuEventElapsedTime", &l.cuEventElapsedTime},
		{"cuEventDestroy_v2", &l.cuEventDestroy},
	}
}

// libraryNames are tried in order: the driver's versioned soname (never the toolkit's
// link-time stub libcuda.so), then the Windows DLL.
func libraryNames() []string {
	if runtime.GOOS == "windows" {
		return []string{"nvcuda.dll"}
	}
	return []string{"libcuda.so.1"}
}

// openLib loads the driver from candidates and resolves the whole table. A missing
// symbol is an error naming it and the library path.
func openLib(candidates []string) (*lib, error) {
	h, path, err := gpu.OpenLibrary(candidates)
	if err != nil {
		return nil, fmt.Errorf("cuda: the NVIDIA driver library is not installed: %w", err)
	}
	l := &lib{path: path}
	for _, s := range l.symbols() {
		if *s.addr = gpu.LookupSymbol(h, s.name); *s.addr == 0 {
			return nil, fmt.Errorf("cuda: %s has no symbol %s: the driver is too old or not NVIDIA's", path, s.name)
		}
	}
	l.graph.resolve(h)
	l.cuProfilerStart = gpu.LookupSymbol(h, "cuProfilerStart")
	l.cuProfilerStop = gpu.LookupSymbol(h, "cuProfilerStop")
	l.cuLaunchKernelEx = gpu.LookupSymbol(h, "cuLaunchKernelEx")
	return l, nil
}
