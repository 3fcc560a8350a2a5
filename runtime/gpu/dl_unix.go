//go:build unix

package gpu

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/ebitengine/purego"
)

// OpenLibrary loads the first of candidates that loads (a path or a soname for the
// system loader) and returns its handle and the candidate used. The error wraps
// ErrNoLibrary and lists every candidate with the loader's message. For backends.
func OpenLibrary(candidates []string) (handle uintptr, path string, err error) {
	var msgs []string
	for _, c := range candidates {
		h, err := dlopen(c)
		if err == nil {
			return h, c, nil
		}
		msgs = append(msgs, c+": "+err.Error())
	}
	return 0, "", fmt.Errorf("%w; tried:\n  %s", ErrNoLibrary, strings.Join(msgs, "\n  "))
}

// dlopen loads path with the goroutine held on one OS thread: purego reads the loader's
// message with dlerror after dlopen returns, and dlerror is per thread, so a goroutine
// moved between the two calls got an empty message (seen once in a parallel go test).
func dlopen(path string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

// LookupSymbol returns the address of name in the library, or 0 when it is absent.
func LookupSymbol(handle uintptr, name string) uintptr {
	p, err := purego.Dlsym(handle, name)
	if err != nil {
		return 0
	}
	return p
}
