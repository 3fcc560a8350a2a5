//go:build windows

package gpu

import (
	"fmt"
	"strings"
	"syscall"
)

// OpenLibrary loads the first of candidates that loads (a DLL name or path) and
// returns its handle and the candidate used. The error wraps ErrNoLibrary and lists
// every candidate with the loader's message. For backends. (Not yet exercised on
// Windows.)
func OpenLibrary(candidates []string) (handle uintptr, path string, err error) {
	var msgs []string
	for _, c := range candidates {
		h, err := syscall.LoadLibrary(c)
		if err == nil {
			return uintptr(h), c, nil
		}
		msgs = append(msgs, c+": "+err.Error())
	}
	return 0, "", fmt.Errorf("%w; tried:\n  %s", ErrNoLibrary, strings.Join(msgs, "\n  "))
}

// LookupSymbol returns the address of name in the library, or 0 when it is absent.
func LookupSymbol(handle uintptr, name string) uintptr {
	p, err := syscall.GetProcAddress(syscall.Handle(handle), name)
	if err != nil {
		return 0
	}
	return p
}
