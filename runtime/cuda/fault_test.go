package cuda

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/strata-hip/strata/runtime/gpu"
)

// faultPTX stores through its pointer argument; given an unmapped address it raises
// CUDA_ERROR_ILLEGAL_ADDRESS, which kills the context for the rest of the process.
const faultPTX = `.version 4.2
.target sm_50
.address_size 64

.visible .entry strata_selftest_fault(
	.param .u64 strata_selftest_fault_param_0
)
{
	.reg .b32 	%r<2>;
	.reg .b64 	%rd<3>;

	ld.param.u64 	%rd1, [strata_selftest_fault_param_0];
	cvta.to.global.u64 	%rd2, %rd1;
	mov.u32 	%r1, 1;
	st.global.u32 	[%rd2], %r1;
	ret;
}
`

// TestDeviceFault proves on real hardware that a device fault is classified as
// gpu.ErrDeviceFault and poisons the Device: later calls fail with it without reaching
// the driver. The fault is fatal to the CUDA context, so it runs in a child process.
func TestDeviceFault(t *testing.T) {
	if os.Getenv("STRATA_FAULT_CHILD") == "1" {
		faultChild(t)
		return
	}
	open(t) // skips without a GPU
	cmd := exec.Command(os.Args[0], "-test.run", "^TestDeviceFault$", "-test.v")
	cmd.Env = append(os.Environ(), "STRATA_FAULT_CHILD=1")
	out, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", out)
	if err != nil {
		t.Fatalf("child failed: %v", err)
	}
	if !strings.Contains(string(out), "FAULT-CLASSIFIED") || !strings.Contains(string(out), "POISONED") {
		t.Fatal("the child did not report both the classified fault and the poisoned device")
	}
}

func faultChild(t *testing.T) {
	d := open(t)
	mod, err := d.LoadModule(gpu.CodeObject{Name: "selftest/fault", Target: d.Info().Arch, Image: []byte(faultPTX)})
	if err != nil {
		t.Fatal(err)
	}
	fn, err := mod.Func("strata_selftest_fault")
	if err != nil {
		t.Fatal(err)
	}
	args := make([]byte, 8)
	args[0] = 0x10 // address 0x10: never mapped
	err = fn.Launch(nil, gpu.Dim3{X: 1, Y: 1, Z: 1}, gpu.Dim3{X: 1, Y: 1, Z: 1}, 0, args)
	if err == nil {
		err = d.Synchronize()
	}
	if !errors.Is(err, gpu.ErrDeviceFault) {
		t.Fatalf("want a device fault, got %v", err)
	}
	fmt.Println("FAULT-CLASSIFIED:", err)
	_, err = d.Alloc(4096)
	if !errors.Is(err, gpu.ErrDeviceFault) || !strings.Contains(err.Error(), "restart the process") {
		t.Fatalf("want the poisoned device's error, got %v", err)
	}
	fmt.Println("POISONED:", err)
}
