// Package gpu is Strata's vendor-neutral GPU runtime: device enumeration and selection,
// code-object modules and their functions, device buffers, pinned host memory, streams
// and events. The CUDA driver (package runtime/cuda) and the HIP runtime (package
// runtime/hip) implement it through purego, with no cgo; each registers a Backend
// from its init function, so a program imports the backends it wants for their side
// effect and then calls Open.
//
//	import (
//		"github.com/strata-hip/strata/runtime/gpu"
//		_ "github.com/strata-hip/strata/runtime/cuda"
//		_ "github.com/strata-hip/strata/runtime/hip"
//	)
//
//	dev, err := gpu.Open(gpu.Request{Device: flagDevice, Have: targetsWithCodeObjects})
//
// The API is small on purpose: Device (allocation, copies, modules, streams, events),
// Module and Func (load a code object, look a kernel up, launch it with one packed
// argument struct), Buffer (device memory), HostBuffer (pinned host memory), Stream and
// Event. Everything a backend supplies goes through the Driver interface, so policy that
// must be the same on every vendor — the VRAM budget, poisoning after a device fault,
// the code-object target check before a load, the mapped-memory proof — lives here once.
//
// # Selection
//
// Enumerate lists every device every registered backend sees, in the backend's own
// order (after the runtime applied its visibility variables), including devices no
// code object supports, such as an integrated GPU; one unreadable device is listed
// with its error rather than failing the list. Select picks one: an explicit request
// (an index into that list, "cuda:N"/"hip:N", a PCI bus id, or a name substring) wins;
// otherwise the first discrete device whose arch has code objects. Integrated GPUs are
// passed over unless named. When nothing fits, the error lists each device and why it
// was passed over, plus the visibility variables in effect (see Visibility). Selection
// never trusts an ordinal from another tool: nvidia-smi, rocm-smi, and display-class
// order can differ from the runtime's order when an integrated GPU is present.
//
// # Memory
//
// The GPU keeps nothing of Go memory past the call that was given it:
//   - Device.Upload and Device.Download take Go slices and return only when the
//     runtime no longer needs them (the runtime stages pageable memory itself).
//   - Asynchronous copies (Stream.Upload, Stream.Download) take a *HostBuffer, memory
//     the runtime pinned outside the Go heap; it must stay allocated until the stream
//     has passed the copy (synchronize the stream or wait on an event after it).
//   - Launch copies the packed argument struct into memory outside the Go heap for the
//     duration of the launch call; the launch captures the values, so the caller may
//     reuse its struct at once. Arguments hold device addresses (DevPtr), never Go
//     pointers.
//   - A code object's image is copied into an anonymous mapping before the load and
//     kept until Unload (HIP checks the image's mapping; CUDA needs PTX NUL-terminated).
//   - Device.Register pins memory the caller owns; it must not be Go-heap memory (use
//     an anonymous mapping, e.g. from AllocAnon) and must outlive Unregister.
//   - A HostBuffer's device alias (HostBuffer.Mapped) is used only after a kernel
//     proved it can write through it (CUDA: a built-in PTX kernel; HIP, whose driver
//     reports no built-in one (Device.BuiltinProbe): a probe registered with SetProbe,
//     the generated strata_fill_u32); otherwise Mapped says why and callers copy.
//
// Handles (DevPtr, and the uintptr handles a Driver returns) are integers that never
// hold Go pointers.
//
// # Budget
//
// Device.SetBudget caps the bytes Device.Alloc hands out, so a large card can behave
// like a 12–16 GiB one (strata-run --vram-budget-mib). MemInfo reports free memory as
// the smaller of the runtime's free bytes and the budget's remainder. An allocation the
// budget refuses fails with an error that wraps ErrOutOfMemory, exactly as a real
// out-of-memory does, so the callers' fallback path is the one tested.
//
// # Threads and errors
//
// The CUDA current context and the HIP current device and last error belong to the OS
// thread. Backends lock the OS thread around each bind → call → check → drain sequence,
// so Device methods may be called from any goroutine. Errors are *Error values naming
// the backend, the call, the object and the status
// ("cuda: cuModuleGetFunction strata_quantize_q8_1: CUDA_ERROR_NOT_FOUND (500)"); they
// match ErrOutOfMemory, ErrNoDevice, ErrNotReady and ErrDeviceFault with errors.Is.
// After a device fault (illegal address, launch failure, timeout, ECC, assert) the
// Device is poisoned: every later call returns the fault without touching the GPU, and
// only a new process recovers.
package gpu
