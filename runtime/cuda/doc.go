// Package cuda binds the NVIDIA CUDA driver API (libcuda.so.1 / nvcuda.dll) through
// purego, with no cgo, and registers it as the "cuda" backend of package gpu.
//
// One symbol table (lib) is resolved once with Dlsym; every binding is required and a
// missing one is an error naming the symbol and the library, except the graph calls
// (graph.go): without them the device runs without graphs; and cuLaunchKernelEx
// (pdl.go: programmatic dependent launch, sm_90 and later) and cuProfilerStart/Stop
// (profile.go), looked up and used only where present. Calls go through
// purego.SyscallN (about 0.2 µs, no reflection). Sizes and device pointers always use
// the _v2 exports, whose ABI is 64-bit.
//
// Each device uses its primary context, made current on a locked OS thread around
// every call. Kernel arguments travel as one packed struct through cuLaunchKernel's
// extra buffer ({BUFFER_POINTER, &args, BUFFER_SIZE, &size, END=0}), copied into a
// per-device page outside the Go heap for the call.
//
// Mapped host memory: with unified addressing the device alias of mapped host memory
// equals its host address (cuda.h guarantees it unless write-combined); package gpu
// still proves each mapping with the self-test kernel in selftest.go before using it.
//
// # Memory
//
// See package gpu's # Memory section: the driver keeps no Go memory past a call.
// Out-parameters and name buffers are Go memory passed for one synchronous call; PTX
// images, the launch arena and async copy buffers live outside the Go heap.
package cuda
