//go:build unix

package gpu

import (
	"fmt"
	"syscall"
)

// AllocAnon returns n bytes of zeroed, page-aligned memory from an anonymous mapping,
// outside the Go heap: safe to hand to the runtime beyond one call (Register, module
// images, launch argument blocks). Release it with FreeAnon.
func AllocAnon(n int) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("gpu: anonymous mapping of %d bytes", n)
	}
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("gpu: anonymous mapping of %d bytes: %w", n, err)
	}
	return b, nil
}

// FreeAnon releases memory from AllocAnon.
func FreeAnon(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return syscall.Munmap(b)
}
