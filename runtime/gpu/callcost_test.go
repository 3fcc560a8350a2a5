//go:build linux

package gpu

import (
	"runtime"
	"testing"

	"github.com/ebitengine/purego"
)

// BenchmarkCallCost prices, on the machine it runs on, the host-side pieces of one launch
// that do not depend on a GPU, with libc's labs standing in for a driver function (it
// ignores the extra arguments, which the SysV ABI allows):
//   - syscallN11: one purego.SyscallN with cuLaunchKernel's 11 arguments (the launch);
//   - bind: runtime.LockOSThread/UnlockOSThread and one 1-argument SyscallN (the
//     cuCtxSetCurrent every per-call launch adds; the driver's own work inside it is
//     not included);
//   - arena: LaunchArena.Pack and Unlock of 72 bytes (a launch's argument copy).
//
// The per-call launch path pays all three, the bound one (Launcher) syscallN11 and arena.
func BenchmarkCallCost(b *testing.B) {
	h, _, err := OpenLibrary([]string{"libc.so.6"})
	if err != nil {
		b.Skip(err)
	}
	fn := LookupSymbol(h, "labs")
	if fn == 0 {
		b.Skip("no labs in libc")
	}
	b.Run("syscallN11", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			purego.SyscallN(fn, 1, 1, 1, 1, 32, 1, 1, 0, 0, 0, 0)
		}
	})
	b.Run("bind", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			runtime.LockOSThread()
			purego.SyscallN(fn, 1)
			runtime.UnlockOSThread()
		}
	})
	b.Run("arena", func(b *testing.B) {
		a, err := NewLaunchArena(1, 2, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer a.Free()
		args := make([]byte, 72)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := a.Pack(args); err != nil {
				b.Fatal(err)
			}
			a.Unlock()
		}
	})
}
