package gpu

import (
	"fmt"
	"sync"
	"unsafe"
)

// The launch arena's layout: one page outside the Go heap holding the extra array, the
// size word and the packed argument block, so nothing the runtime reads during the launch
// call is Go memory.
const (
	arenaSize    = 4096
	arenaExtra   = 0  // 5 pointer slots: {BUFFER_POINTER, &args, BUFFER_SIZE, &size, END}
	arenaSizeOff = 48 // the size_t the BUFFER_SIZE entry points at
	arenaArgs    = 64 // the argument block

	// MaxLaunchArgs is the largest packed argument struct a launch takes.
	MaxLaunchArgs = arenaSize - arenaArgs
)

// LaunchArena is the memory a backend passes a kernel's packed argument struct through,
// as the launch's extra array {BUFFER_POINTER, &args, BUFFER_SIZE, &size, END}. CUDA
// (cuLaunchKernel) and HIP (hipModuleLaunchKernel) take the same array and differ only in
// the key values, which NewLaunchArena records. One arena serves one device; Pack and
// Unlock serialise its use.
type LaunchArena struct {
	mu                      sync.Mutex
	mem                     []byte
	keyPtr, keySize, keyEnd uintptr
}

// NewLaunchArena allocates an arena whose extra arrays use the runtime's key values for
// BUFFER_POINTER, BUFFER_SIZE and END. Release it with Free.
func NewLaunchArena(keyPtr, keySize, keyEnd uintptr) (*LaunchArena, error) {
	mem, err := AllocAnon(arenaSize)
	if err != nil {
		return nil, err
	}
	return &LaunchArena{mem: mem, keyPtr: keyPtr, keySize: keySize, keyEnd: keyEnd}, nil
}

// Pack locks the arena, copies args into it and returns the address of the extra array
// to pass to the launch call; the caller calls Unlock once that call returns. An empty
// args gives 0, no extra array (HIP rejects one with a zero size). Arguments larger than
// MaxLaunchArgs are an error and leave the arena unlocked.
func (a *LaunchArena) Pack(args []byte) (uintptr, error) {
	if len(args) > MaxLaunchArgs {
		return 0, fmt.Errorf("%d bytes of arguments, at most %d", len(args), MaxLaunchArgs)
	}
	a.mu.Lock()
	if len(args) == 0 {
		return 0, nil
	}
	base := uintptr(unsafe.Pointer(&a.mem[0]))
	copy(a.mem[arenaArgs:], args)
	*(*uintptr)(unsafe.Pointer(&a.mem[arenaSizeOff])) = uintptr(len(args))
	slots := unsafe.Slice((*uintptr)(unsafe.Pointer(&a.mem[arenaExtra])), 5)
	slots[0], slots[1] = a.keyPtr, base+arenaArgs
	slots[2], slots[3] = a.keySize, base+arenaSizeOff
	slots[4] = a.keyEnd
	return base + arenaExtra, nil
}

// Unlock releases the arena after the launch call that Pack prepared.
func (a *LaunchArena) Unlock() { a.mu.Unlock() }

// Free releases the arena's memory.
func (a *LaunchArena) Free() error { return FreeAnon(a.mem) }
