package hip

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/strata-hip/strata/runtime/gpu"
)

// Offsets in hipDeviceProp_t (linux/amd64; gpu-abi.md §3.2). name is at 0 in both.
const (
	propsBufSize     = 4096 // headroom over the 1472-byte R0600 struct against growth
	archOffsetR0600  = 1160 // gcnArchName in hipDeviceProp_tR0600 (ROCm 6.0+)
	archOffsetR0000  = 396  // gcnArchName in the 5.x / R0000 layout
	gcnArchNameBytes = 256
)

// archName reads the full target id ("gfx1201:sramecc-:xnack-") of device dev from
// the properties struct: R0600 when the library exports it, else the old layout.
// It cross-checks the struct's name against hipDeviceGetName and that the arch looks
// like one, and refuses (naming the symbol and offset) rather than guess.
func (l *lib) archName(dev int, name string) (string, error) {
	buf := make([]byte, propsBufSize)
	fn, sym, off := l.hipGetDeviceProperties, "hipGetDeviceProperties", archOffsetR0000
	if l.hipGetDevicePropertiesR0600 != 0 {
		fn, sym, off = l.hipGetDevicePropertiesR0600, "hipGetDevicePropertiesR0600", archOffsetR0600
	}
	r, _, _ := purego.SyscallN(fn, uintptr(unsafe.Pointer(&buf[0])), uintptr(dev))
	if err := l.check(r, sym, fmt.Sprint(dev)); err != nil {
		return "", err
	}
	return parseArch(buf, sym, off, name)
}

// parseArch extracts and validates gcnArchName from a filled properties buffer.
func parseArch(buf []byte, sym string, off int, name string) (string, error) {
	if got := gpu.CBuf(buf[:256]); name != "" && got != name {
		return "", fmt.Errorf("hip: %s filled name %q, hipDeviceGetName says %q: unknown struct layout, refusing to read gcnArchName at offset %d", sym, got, name, off)
	}
	arch := gpu.CBuf(buf[off : off+gcnArchNameBytes])
	if !strings.HasPrefix(arch, "gfx") {
		return "", fmt.Errorf("hip: %s gave gcnArchName %q at offset %d, not an AMD target id: unknown struct layout", sym, arch, off)
	}
	return arch, nil
}
