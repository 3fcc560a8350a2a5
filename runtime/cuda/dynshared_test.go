package cuda

import (
	"encoding/binary"
	"testing"

	"github.com/strata-hip/strata/runtime/gpu"
)

// dynSharedPTX stores 0x5a5a5a5a at the last word of its n bytes of dynamic shared memory,
// reads it back and writes it to *p.
const dynSharedPTX = `.version 7.0
.target sm_80
.address_size 64

.extern .shared .align 4 .b8 dyn[];

.visible .entry strata_dyn_shared(
	.param .u64 p,
	.param .u32 n
)
{
	.reg .b32 %r<6>;
	.reg .b64 %rd<3>;
	ld.param.u64 %rd1, [p];
	ld.param.u32 %r1, [n];
	sub.u32 %r2, %r1, 4;
	mov.u32 %r3, dyn;
	add.u32 %r4, %r3, %r2;
	mov.u32 %r5, 0x5a5a5a5a;
	st.shared.u32 [%r4], %r5;
	bar.sync 0;
	ld.shared.u32 %r5, [%r4];
	cvta.to.global.u64 %rd2, %rd1;
	st.global.u32 [%rd2], %r5;
	ret;
}
`

// TestDynamicSharedGPU: a function launched with 64 KiB of dynamic shared memory fails
// without the allowance (the raw driver launch: CUDA refuses more than 48 KiB by default)
// and, after gpu.Func.SetDynamicShared (cuFuncSetAttribute), runs and uses its last word.
func TestDynamicSharedGPU(t *testing.T) {
	drv, d := openDriver(t)
	const n = 64 << 10
	img := append([]byte(dynSharedPTX), 0)
	rawMod, err := drv.LoadModule(img, "test/dyn")
	if err != nil {
		t.Fatal(err)
	}
	defer drv.UnloadModule(rawMod)
	h, err := drv.Function(rawMod, "strata_dyn_shared")
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.Alloc(4)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Free()
	args := make([]byte, 16)
	binary.LittleEndian.PutUint64(args, uint64(out.Ptr))
	binary.LittleEndian.PutUint32(args[8:], n)
	one := gpu.Dim3{X: 1, Y: 1, Z: 1}
	if err := drv.Launch(h, one, one, n, 0, args, "strata_dyn_shared"); err == nil {
		t.Fatal("a 64 KiB launch without the allowance succeeded; the test cannot tell the allowance works")
	}
	fn, s := loadOnStream(t, d, "test/dyn", dynSharedPTX, "strata_dyn_shared")
	if err := fn.SetDynamicShared(n); err != nil {
		t.Fatal(err)
	}
	if err := fn.Launch(s, one, one, 0, args); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if err := d.Download(got, out.Ptr); err != nil {
		t.Fatal(err)
	}
	if v := binary.LittleEndian.Uint32(got); v != 0x5a5a5a5a {
		t.Fatalf("read back %#x, want 0x5a5a5a5a", v)
	}
}
