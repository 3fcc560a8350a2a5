package gpu

import (
	"bytes"
	"strings"
	"testing"
	"unsafe"
)

// TestLaunchArena checks the extra array Pack builds, word by word, against the layout
// both runtimes document: {BUFFER_POINTER, &args, BUFFER_SIZE, &size, END}, the size
// word holding len(args) and the argument block holding a copy of args.
func TestLaunchArena(t *testing.T) {
	a, err := NewLaunchArena(1, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Free()
	args := []byte{9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0xaa, 0x55}
	extra, err := a.Pack(args)
	if err != nil {
		t.Fatal(err)
	}
	a.Unlock()
	base := uintptr(unsafe.Pointer(&a.mem[0]))
	if extra != base {
		t.Fatalf("extra at %#x, want the arena's start %#x", extra, base)
	}
	slots := unsafe.Slice((*uintptr)(unsafe.Pointer(&a.mem[0])), 5)
	if slots[0] != 1 || slots[2] != 2 || slots[4] != 3 {
		t.Errorf("keys %d, %d, %d; want 1, 2, 3", slots[0], slots[2], slots[4])
	}
	// The two pointers, as offsets into the arena.
	argsOff, sizeOff := slots[1]-base, slots[3]-base
	word := unsafe.Sizeof(uintptr(0))
	if slots[1] < base || argsOff+uintptr(len(args)) > uintptr(len(a.mem)) {
		t.Fatalf("argument pointer %#x outside the arena", slots[1])
	}
	if got := a.mem[argsOff : argsOff+uintptr(len(args))]; !bytes.Equal(got, args) {
		t.Errorf("argument block %v, want %v", got, args)
	}
	if slots[3] < base || sizeOff < 5*word || sizeOff+word > argsOff {
		t.Fatalf("size pointer %#x overlaps the extra array or the arguments", slots[3])
	}
	if n := *(*uintptr)(unsafe.Pointer(&a.mem[sizeOff])); n != uintptr(len(args)) {
		t.Errorf("size word %d, want %d", n, len(args))
	}

	// No arguments: no extra array. The arena is still held until Unlock.
	if extra, err := a.Pack(nil); err != nil || extra != 0 {
		t.Errorf("Pack(nil) = %#x, %v; want 0, nil", extra, err)
	}
	a.Unlock()

	// Too large: an error naming both sizes, and the arena is not left locked.
	if _, err := a.Pack(make([]byte, MaxLaunchArgs+1)); err == nil || !strings.Contains(err.Error(), "at most 4032") {
		t.Errorf("Pack of %d bytes: %v", MaxLaunchArgs+1, err)
	}
	if _, err := a.Pack(make([]byte, MaxLaunchArgs)); err != nil {
		t.Errorf("Pack of MaxLaunchArgs bytes: %v", err)
	}
	a.Unlock()
}
