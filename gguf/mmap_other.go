//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package gguf

import (
	"fmt"
	"io"
	"math"
	"os"
)

// usesMmap: Data slices alias a heap copy (truncating the file cannot fault them).
const usesMmap = false

// mapFile reads the whole file into memory where this package has no mmap binding
// (Windows, wasm, plan9): correct but it costs the file's size in RAM and a full read.
func mapFile(f *os.File, size int64) ([]byte, func() error, error) {
	if size < 0 || uint64(size) > math.MaxInt {
		return nil, nil, fmt.Errorf("file size %d does not fit in this platform's address space", size)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, nil, err
	}
	return b, func() error { return nil }, nil
}
