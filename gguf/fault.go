package gguf

import (
	"fmt"
	"runtime/debug"
	"sync"
	"unsafe"
)

// The live mappings, so that a fault in CopyOut can name the file it came from.
var (
	mapMu    sync.Mutex
	liveMaps = map[uintptr]mapping{}
)

type mapping struct {
	size uintptr
	path string
}

func registerMapping(b []byte, path string) {
	if len(b) == 0 {
		return
	}
	mapMu.Lock()
	liveMaps[uintptr(unsafe.Pointer(unsafe.SliceData(b)))] = mapping{uintptr(len(b)), path}
	mapMu.Unlock()
}

func unregisterMapping(b []byte) {
	if len(b) == 0 {
		return
	}
	mapMu.Lock()
	delete(liveMaps, uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	mapMu.Unlock()
}

// mappedPath returns the path of the live mapping that holds b, or "(unknown mapping)".
func mappedPath(b []byte) string {
	if len(b) == 0 {
		return "(empty slice)"
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	mapMu.Lock()
	defer mapMu.Unlock()
	for base, m := range liveMaps {
		if p >= base && p-base < m.size {
			return m.path
		}
	}
	return "(not a gguf mapping)"
}

// CopyOut copies src (a slice of a mapping, from Data) into dst and returns the bytes
// copied, min(len(dst), len(src)). If the mapped file was truncated or replaced underneath,
// touching the missing pages raises SIGBUS; CopyOut turns that fault into an *Error with
// Rule D5 instead of killing the process. Every copy out of a mapping that must survive
// such a fault (staging for GPU uploads, expert streaming) goes through here.
func CopyOut(dst, src []byte) (n int, err error) {
	err = guardFault(func() string { return mappedPath(src) }, src, func() error {
		n = copy(dst, src)
		return nil
	})
	return n, err
}

// faultAddr is what the runtime panics with on a fault under SetPanicOnFault.
type faultAddr interface{ Addr() uintptr }

// guardFault runs fn with the goroutine's panic-on-fault set and turns a memory fault
// into a D5 error naming path() and region's size. Other panics propagate.
func guardFault(path func() string, region []byte, fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			fa, ok := r.(faultAddr)
			if !ok {
				panic(r)
			}
			err = &Error{Path: path(), Offset: -1, Rule: RuleFault, Field: "mapping",
				Detail: fmt.Sprintf("memory fault at %#x reading a %d-byte mapped region: the file was truncated or replaced while in use; reopen it", fa.Addr(), len(region))}
		}
	}()
	return fn()
}
