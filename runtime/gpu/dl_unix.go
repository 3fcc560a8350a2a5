//go:build unix

package gpu

import (
	"fmt"
	"strings"

	"github.com/ebitengine/purego"
)

// OpenLibrary loads the first of candidates that loads (a path or a soname for the
// system loader) and returns its handle and the candidate used. The error wraps
// ErrNoLibrary and lists every candidate with the loader's message. For backends.
func OpenLibrary(candidates []string) (handle uintptr, path string, err error) {
	var msgs []string
	for _, c := range candidates {
		h, err := purego.Dlopen(c, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			return h, c, nil
		}
		msgs = append(msgs, err.Error()) // dlerror names the file
	}
	return 0, "", fmt.Errorf("%w; tried:\n  %s", ErrNoLibrary, strings.Join(msgs, "\n  "))
}

// LookupSymbol returns the address of name in the library, or 0 when it is absent.
func LookupSymbol(handle uintptr, name string) uintptr {
	p, err := purego.Dlsym(handle, name)
	if err != nil {
		return 0
	}
	return p
}
