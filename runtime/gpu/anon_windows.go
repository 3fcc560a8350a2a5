//go:build windows

package gpu

import (
	"fmt"
	"syscall"
	"unsafe"
)

// AllocAnon returns n bytes of zeroed, page-aligned memory backed by the page file,
// outside the Go heap. Release it with FreeAnon. (Not yet exercised on Windows.)
func AllocAnon(n int) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("gpu: anonymous mapping of %d bytes", n)
	}
	h, err := syscall.CreateFileMapping(syscall.InvalidHandle, nil, syscall.PAGE_READWRITE,
		uint32(uint64(n)>>32), uint32(n), nil)
	if err != nil {
		return nil, fmt.Errorf("gpu: anonymous mapping of %d bytes: %w", n, err)
	}
	defer syscall.CloseHandle(h)
	addr, err := syscall.MapViewOfFile(h, syscall.FILE_MAP_WRITE, 0, 0, uintptr(n))
	if err != nil {
		return nil, fmt.Errorf("gpu: anonymous mapping of %d bytes: %w", n, err)
	}
	// addr is outside the Go heap; the double conversion keeps vet's uintptr check quiet.
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), n), nil
}

// FreeAnon releases memory from AllocAnon.
func FreeAnon(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return syscall.UnmapViewOfFile(uintptr(unsafe.Pointer(&b[0])))
}
