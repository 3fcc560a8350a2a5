package gpu

import "unsafe"

// CString copies a NUL-terminated C string that a runtime owns (its static tables, such
// as error names); 0 gives "". For backends.
func CString(p uintptr) string {
	if p == 0 {
		return ""
	}
	base := *(*unsafe.Pointer)(unsafe.Pointer(&p)) // C memory, never a Go pointer; keeps vet's uintptr check quiet
	n := 0
	for *(*byte)(unsafe.Add(base, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(base), n))
}

// CBuf returns the text of a NUL-terminated buffer a runtime filled (all of b when it
// holds no NUL). For backends.
func CBuf(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
