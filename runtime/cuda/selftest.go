package cuda

import (
	"fmt"
	"unsafe"

	"github.com/strata-hip/strata/runtime/gpu"
)

// selftestPTX holds the kernel behind FillWords: each thread i < n stores v at p[i].
// It is clang-19's PTX for this freestanding source, built with
// `clang-19 -x cuda --cuda-gpu-arch=sm_50 -nocudainc -nocudalib --cuda-device-only -S -O2`
// (the oldest target the driver still JIT-compiles forward to every newer device):
//
//	extern "C" __attribute__((global)) void strata_selftest_fill_u32(unsigned *p, unsigned n, unsigned v) {
//	  unsigned i = __nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() + __nvvm_read_ptx_sreg_tid_x();
//	  if (i < n) p[i] = v;
//	}
const selftestPTX = `.version 4.2
.target sm_50
.address_size 64

.visible .entry strata_selftest_fill_u32(
	.param .u64 strata_selftest_fill_u32_param_0,
	.param .u32 strata_selftest_fill_u32_param_1,
	.param .u32 strata_selftest_fill_u32_param_2
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<7>;
	.reg .b64 	%rd<5>;

	ld.param.u32 	%r2, [strata_selftest_fill_u32_param_1];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r6, %r3, %r4, %r5;
	setp.ge.u32 	%p1, %r6, %r2;
	@%p1 bra 	$L__BB0_2;
	ld.param.u32 	%r1, [strata_selftest_fill_u32_param_2];
	ld.param.u64 	%rd2, [strata_selftest_fill_u32_param_0];
	cvta.to.global.u64 	%rd3, %rd2;
	mul.wide.u32 	%rd4, %r6, 4;
	add.s64 	%rd1, %rd3, %rd4;
	st.global.u32 	[%rd1], %r1;
$L__BB0_2:
	ret;
}
`

// fillArgs is the packed argument struct of strata_selftest_fill_u32.
type fillArgs struct {
	P uint64
	N uint32
	V uint32
}

// FillWords launches the self-test kernel and waits for it: the device itself writes
// value into words 32-bit words at dst.
func (d *device) FillWords(dst gpu.DevPtr, words int, value uint32) error {
	d.selftestOnce.Do(func() {
		img, err := gpu.AllocAnon(len(selftestPTX) + 1)
		if err != nil {
			d.selftestErr = err
			return
		}
		defer gpu.FreeAnon(img) // the driver JIT-compiles during the load call
		copy(img, selftestPTX)
		if d.selftestMod, d.selftestErr = d.LoadModule(img, "selftest"); d.selftestErr != nil {
			return
		}
		d.selftestFn, d.selftestErr = d.Function(d.selftestMod, "strata_selftest_fill_u32")
	})
	if d.selftestErr != nil {
		return fmt.Errorf("cuda: self-test kernel: %w", d.selftestErr)
	}
	a := fillArgs{P: uint64(dst), N: uint32(words), V: value}
	args := unsafe.Slice((*byte)(unsafe.Pointer(&a)), unsafe.Sizeof(a))
	threads := uint32(64)
	grid := gpu.Dim3{X: (uint32(words) + threads - 1) / threads, Y: 1, Z: 1}
	if err := d.Launch(d.selftestFn, grid, gpu.Dim3{X: threads, Y: 1, Z: 1}, 0, 0, args, "strata_selftest_fill_u32"); err != nil {
		return err
	}
	return d.Synchronize()
}
