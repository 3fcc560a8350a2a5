// Package hip binds the AMD HIP runtime (libamdhip64.so.{7,6,5} / amdhip64_*.dll)
// through purego, with no cgo, and registers it as the "hip" backend of package gpu.
//
// One symbol table (lib) is resolved once with Dlsym. hipGetDevicePropertiesR0600 is
// optional: ROCm 6+ exports it (1472-byte struct, gcnArchName at 1160), ROCm 5 does
// not, and the plain hipGetDeviceProperties fills the old 792-byte layout (gcnArchName
// at 396) on every version; the layout read is cross-checked before it is trusted.
// Any other missing symbol is an error naming it and the library path.
//
// HIP's current device and last error are per OS thread: each call locks the thread,
// selects the device, calls, checks the status and, after a failure, drains the error
// with one hipGetLastError on that same thread (ROCm 7 made it sticky). Kernel
// arguments go through hipModuleLaunchKernel's extra buffer in the exact five-slot
// form HIP requires, {1, &args, 2, &size, 3}, from a page outside the Go heap.
//
// Mapped host memory is proved before use (package gpu) by a kernel writing through the
// device alias; this package has no built-in kernel (it would need a code object per AMD
// target; its driver says so through gpu.ProbeDriver), so the proof needs a probe
// registered with gpu.Device.SetProbe: the GPU engine registers the generated fill
// family's strata_fill_u32 from the device's code objects. Until one is registered,
// mapped memory is reported unusable and callers copy.
//
// Not yet run on AMD hardware: what is verified is symbol resolution and the no-device
// path against Debian's libamdhip64 5.2.3; the layouts and constants come from the
// headers and sources listed in the project's gpu-abi notes.
//
// # Memory
//
// See package gpu's # Memory section: the runtime keeps no Go memory past a call.
// Code-object images, the launch arena and async copy buffers live outside the Go heap.
package hip
