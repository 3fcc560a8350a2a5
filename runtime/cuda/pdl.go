package cuda

import (
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/strata-hip/strata/runtime/gpu"
)

// device implements gpu.DepLaunchDriver: programmatic dependent launch through
// cuLaunchKernelEx (CUDA 12.0 on) on devices of compute capability 9.0 and later.
var _ gpu.DepLaunchDriver = (*device)(nil)

// launchAttrProgrammaticStreamSerialization is CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
// (cuda.h CUlaunchAttributeID): value.programmaticStreamSerializationAllowed (an int at the
// value's offset 0) non-zero lets the launch overlap the previous kernel of its stream.
const launchAttrProgrammaticStreamSerialization = 6

// launchConfig is CUlaunchConfig (cuda.h, CUDA 12.0 on; 56 bytes on a 64-bit host): grid,
// block, dynamic shared memory, the stream, then the attribute array and its length.
type launchConfig struct {
	gridX, gridY, gridZ uint32
	blkX, blkY, blkZ    uint32
	shmem               uint32
	_                   uint32 // padding to the pointer's alignment
	stream              uintptr
	attrs               uintptr // CUlaunchAttribute*
	numAttrs            uint32
	_                   uint32
}

// launchAttr is CUlaunchAttribute (72 bytes): the id (a 4-byte enum), padding to 8, and
// the value, a 64-byte union.
type launchAttr struct {
	id    uint32
	_     uint32
	value [64]byte
}

// The layouts the driver reads (cuda.h 12.x and 13.0: CUlaunchConfig_st, CUlaunchAttribute_st).
var _ = [1]struct{}{}[unsafe.Sizeof(launchConfig{})-56]
var _ = [1]struct{}{}[unsafe.Offsetof(launchConfig{}.stream)-32]
var _ = [1]struct{}{}[unsafe.Offsetof(launchConfig{}.attrs)-40]
var _ = [1]struct{}{}[unsafe.Offsetof(launchConfig{}.numAttrs)-48]
var _ = [1]struct{}{}[unsafe.Sizeof(launchAttr{})-72]
var _ = [1]struct{}{}[unsafe.Offsetof(launchAttr{}.value)-8]

// depPage is where a programmatic launch's config and attribute live during the call:
// memory outside the Go heap (the config points at the attribute), used only under the
// launch arena's lock.
const (
	depCfgOff  = 0
	depAttrOff = 64
	depPageLen = 4096
)

// ccMajor is the compute capability major of an arch id "sm_XY" or "sm_XYZ" (0 if not one).
func ccMajor(arch string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(arch, "sm_"))
	if err != nil || !strings.HasPrefix(arch, "sm_") {
		return 0
	}
	return n / 10
}

// depCapable reports whether a device of arch can take programmatic launches through lib:
// cuLaunchKernelEx exported and compute capability ≥ 9.0 (Open allocates depPage then).
func depCapable(lib *lib, arch string) bool {
	return lib.cuLaunchKernelEx != 0 && ccMajor(arch) >= 9
}

// DepLaunchSupport: cuLaunchKernelEx exported and a device of compute capability ≥ 9.0
// (depCapable, decided once at Open: depPage is there exactly then); the error says which
// is missing.
func (d *device) DepLaunchSupport() error {
	if d.depPage != nil {
		return nil
	}
	if d.l.cuLaunchKernelEx == 0 {
		return fmt.Errorf("cuda: %s has no cuLaunchKernelEx: %w", d.l.path, gpu.ErrNoDepLaunch)
	}
	if m := ccMajor(d.info.Arch); m < 9 {
		return fmt.Errorf("cuda: device %s is %s, programmatic dependent launch needs sm_90 or later: %w", d.info.ID(), d.info.Arch, gpu.ErrNoDepLaunch)
	}
	if d.depPage == nil {
		return fmt.Errorf("cuda: device %s: no launch config page: %w", d.info.ID(), gpu.ErrNoDepLaunch)
	}
	return nil
}

// LaunchBoundDep packs args into the arena as LaunchBound does and launches through
// cuLaunchKernelEx with programmatic stream serialization allowed, on a thread Bind
// prepared.
func (d *device) LaunchBoundDep(fn uintptr, grid, block gpu.Dim3, shmem uint32, stream uintptr, args []byte, symbol string) error {
	if err := d.DepLaunchSupport(); err != nil {
		return err
	}
	extra, err := d.arena.Pack(args)
	if err != nil { // Pack left the arena unlocked
		return fmt.Errorf("cuda: launch %s: %w", symbol, err)
	}
	base := unsafe.Pointer(&d.depPage[0])
	attr := (*launchAttr)(unsafe.Add(base, depAttrOff))
	*attr = launchAttr{id: launchAttrProgrammaticStreamSerialization}
	*(*int32)(unsafe.Pointer(&attr.value[0])) = 1
	cfg := (*launchConfig)(unsafe.Add(base, depCfgOff))
	*cfg = launchConfig{gridX: grid.X, gridY: grid.Y, gridZ: grid.Z, blkX: block.X, blkY: block.Y, blkZ: block.Z,
		shmem: shmem, stream: stream, attrs: uintptr(unsafe.Pointer(attr)), numAttrs: 1}
	r, _, _ := purego.SyscallN(d.l.cuLaunchKernelEx, uintptr(unsafe.Pointer(cfg)), fn, 0, extra)
	d.arena.Unlock()
	if r != 0 {
		return d.l.check(r, "cuLaunchKernelEx", symbol)
	}
	return nil
}
