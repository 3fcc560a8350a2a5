package gpu

import (
	"testing"
	"unsafe"
)

func TestCStrings(t *testing.T) {
	mem, err := AllocAnon(16) // C-like memory outside the Go heap
	if err != nil {
		t.Fatal(err)
	}
	defer FreeAnon(mem)
	copy(mem, "hipErrorX\x00tail")
	if got := CString(uintptr(unsafe.Pointer(&mem[0]))); got != "hipErrorX" {
		t.Errorf("CString = %q, want %q", got, "hipErrorX")
	}
	if got := CString(0); got != "" {
		t.Errorf("CString(0) = %q", got)
	}
	for in, want := range map[string]string{"gfx1100\x00\x00junk": "gfx1100", "no terminator": "no terminator", "\x00x": ""} {
		if got := CBuf([]byte(in)); got != want {
			t.Errorf("CBuf(%q) = %q, want %q", in, got, want)
		}
	}
}
