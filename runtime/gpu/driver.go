package gpu

import (
	"sort"
	"strconv"
	"sync"
	"unsafe"
)

// DevPtr is a device address. It never holds a Go pointer.
type DevPtr uintptr

// Add returns p advanced by off bytes.
func (p DevPtr) Add(off uintptr) DevPtr { return p + DevPtr(off) }

// DeviceInfo describes one device as its runtime enumerates it.
type DeviceInfo struct {
	Index      int    `json:"index"`      // position in Enumerate's list (what --device N means)
	Backend    string `json:"backend"`    // "cuda" or "hip"
	Ordinal    int    `json:"ordinal"`    // the runtime's own ordinal, after its visibility variables
	Name       string `json:"name"`       // marketing name
	Arch       string `json:"arch"`       // full target id: "gfx1201:sramecc-:xnack-", "sm_90"
	TotalMem   uint64 `json:"total_mem"`  // bytes
	FreeMem    uint64 `json:"free_mem"`   // bytes, when enumerated
	PCIBusID   string `json:"pci_bus_id"` // "0000:03:00.0"
	Integrated bool   `json:"integrated"` // shares system memory (APU / iGPU)
	// Units is the number of multiprocessors (NVIDIA SMs, AMD CUs as the runtime counts them).
	Units int `json:"units"`
	// WarpSize is 32 or 64.
	WarpSize int `json:"warp_size"`
	// UnifiedAddressing: host and device share one virtual address space.
	UnifiedAddressing bool `json:"unified_addressing"`
	// CanMapHost: the device can map pinned host memory into its address space.
	CanMapHost bool `json:"can_map_host"`
	// Err is set when some property could not be read; the device is still listed.
	Err string `json:"error,omitempty"`
}

// ID is "backend:ordinal", the stable way to name a device inside one process.
func (d DeviceInfo) ID() string { return d.Backend + ":" + strconv.Itoa(d.Ordinal) }

// Backend is one vendor runtime. runtime/cuda and runtime/hip register one each.
type Backend interface {
	// Name is "cuda" or "hip".
	Name() string
	// Load opens the runtime library and resolves its symbol table; it is called once
	// and returns an error wrapping ErrNoLibrary when the library is absent.
	Load() error
	// Library is the path or name of the library Load opened.
	Library() string
	// Devices lists every device the runtime sees, with Index left 0 (Enumerate fills
	// it). No device at all is ErrNoDevice. A device whose properties fail to read is
	// listed with Err set.
	Devices() ([]DeviceInfo, error)
	// Open makes a Driver for the device with this runtime ordinal.
	Open(ordinal int) (Driver, error)
}

// Dim3 is a launch grid (in blocks) or block (in threads).
type Dim3 struct{ X, Y, Z uint32 }

// CopyKind says which way an asynchronous copy goes.
type CopyKind int

// Copy directions.
const (
	HostToDevice CopyKind = iota + 1
	DeviceToHost
	DeviceToDevice
)

// Driver is what a backend implements for one opened device. Every method binds the
// device (CUDA context / HIP device) on a locked OS thread, checks the status, drains
// sticky error state after a failure, and returns *Error. Stream and event handles are
// the runtime's own; 0 is the default stream. Package gpu calls a Driver only through
// Device, which adds the budget, poisoning and argument checks; other packages use
// Device.
type Driver interface {
	Info() DeviceInfo                         // as enumerated when opened
	Close() error                             // release the context / device
	MemInfo() (free, total uint64, err error) // the runtime's view, no budget
	Synchronize() error                       // wait for all work on the device

	Alloc(n uintptr) (DevPtr, error) // device memory, uninitialised
	Free(p DevPtr) error
	// Upload and Download are synchronous; src/dst may be Go memory (see # Memory).
	Upload(dst DevPtr, src []byte) error
	Download(dst []byte, src DevPtr) error
	// CopyAsync copies n bytes on stream; host sides are pinned (non-Go) addresses.
	CopyAsync(kind CopyKind, dst, src uintptr, n uintptr, stream uintptr) error
	MemsetAsync(dst DevPtr, value byte, n uintptr, stream uintptr) error

	// HostAlloc returns page-locked host memory; mapped asks for a device alias.
	HostAlloc(n uintptr, mapped bool) (unsafe.Pointer, error)
	HostFree(p unsafe.Pointer) error
	// HostRegister pins caller-owned (non-Go-heap) memory; mapped asks for an alias.
	HostRegister(p unsafe.Pointer, n uintptr, mapped bool) error
	HostUnregister(p unsafe.Pointer) error
	// HostDevicePtr returns the device alias of mapped host memory (unproven).
	HostDevicePtr(p unsafe.Pointer) (DevPtr, error)
	// FillWords makes a kernel write value into words 32-bit words at dst and waits: the
	// proof that device code can reach dst. It must be a kernel, not a runtime copy or
	// fill (a runtime may serve those from the host side for host memory). A backend
	// without a built-in kernel returns an error saying so (see Device.SetProbe).
	FillWords(dst DevPtr, words int, value uint32) error

	// LoadModule loads an image (in memory outside the Go heap, NUL-terminated).
	// name is only for errors.
	LoadModule(image []byte, name string) (uintptr, error)
	UnloadModule(mod uintptr) error
	Function(mod uintptr, symbol string) (uintptr, error) // kernel handle by symbol
	// Launch passes args, the packed argument struct, through the launch's extra buffer.
	Launch(fn uintptr, grid, block Dim3, shmem uint32, stream uintptr, args []byte, symbol string) error

	// Streams do not synchronise with the default stream (non-blocking).
	StreamCreate() (uintptr, error)
	StreamSync(s uintptr) error
	StreamDestroy(s uintptr) error
	StreamWaitEvent(s, e uintptr) error
	EventCreate() (uintptr, error) // a timing event
	EventRecord(e, s uintptr) error
	EventSync(e uintptr) error
	// EventQuery returns nil when done and an error matching ErrNotReady while pending.
	EventQuery(e uintptr) error
	EventElapsed(start, end uintptr) (ms float32, err error)
	EventDestroy(e uintptr) error
}

var (
	backendsMu sync.Mutex
	backends   = map[string]Backend{}
)

// Register adds a backend; runtime/cuda and runtime/hip call it from init.
// Registering one name twice is a programmer error and panics.
func Register(b Backend) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	if _, dup := backends[b.Name()]; dup {
		panic("gpu: backend registered twice: " + b.Name())
	}
	backends[b.Name()] = b
}

// Backends returns the registered backends, CUDA before HIP (sorted by name), which is
// the order Enumerate lists their devices in.
func Backends() []Backend {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	out := make([]Backend, 0, len(backends))
	for _, b := range backends {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}
