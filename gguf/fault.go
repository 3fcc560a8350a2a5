package gguf

import (
	"fmt"
	"runtime/debug"
)

// CopyOut copies src (a slice of a mapping, from Data) into dst and returns the bytes
// copied, min(len(dst), len(src)). If the mapped file was truncated or replaced underneath,
// touching the missing pages raises SIGBUS; CopyOut turns that fault into an *Error with
// Rule D5 instead of killing the process. Every copy out of a mapping that must survive
// such a fault (staging for GPU uploads, expert streaming) goes through here.
func CopyOut(dst, src []byte) (n int, err error) {
	err = guardFault("", src, func() error {
		n = copy(dst, src)
		return nil
	})
	return n, err
}

// faultAddr is what the runtime panics with on a fault under SetPanicOnFault.
type faultAddr interface{ Addr() uintptr }

// guardFault runs fn with the goroutine's panic-on-fault set and turns a memory fault
// into a D5 error; region is used for the message only. Other panics propagate.
func guardFault(path string, region []byte, fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			fa, ok := r.(faultAddr)
			if !ok {
				panic(r)
			}
			err = &Error{Path: path, Offset: -1, Rule: RuleFault, Field: "mapping",
				Detail: fmt.Sprintf("memory fault at %#x reading a %d-byte mapped region: the file was truncated or replaced while in use; reopen it", fa.Addr(), len(region))}
		}
	}()
	return fn()
}
