package cuda

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/strata-hip/strata/runtime/gpu"
)

// pdlStepPTX: each thread i < n sets p[i] = 3·p[i] + v, after griddepcontrol.wait (so a
// programmatic launch reads what the previous launch wrote) and then
// griddepcontrol.launch_dependents, as STRATA_GRID_DEP does in the kernel prelude.
// Hand-written PTX (ISA 7.8, sm_90: griddepcontrol's first version and target).
const pdlStepPTX = `.version 7.8
.target sm_90
.address_size 64

.visible .entry strata_pdltest_step(
	.param .u64 strata_pdltest_step_param_0,
	.param .u32 strata_pdltest_step_param_1,
	.param .u32 strata_pdltest_step_param_2
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<10>;
	.reg .b64 	%rd<5>;

	griddepcontrol.wait;
	griddepcontrol.launch_dependents;
	ld.param.u32 	%r2, [strata_pdltest_step_param_1];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r6, %r3, %r4, %r5;
	setp.ge.u32 	%p1, %r6, %r2;
	@%p1 bra 	$L__BB0_2;
	ld.param.u32 	%r1, [strata_pdltest_step_param_2];
	ld.param.u64 	%rd2, [strata_pdltest_step_param_0];
	cvta.to.global.u64 	%rd3, %rd2;
	mul.wide.u32 	%rd4, %r6, 4;
	add.s64 	%rd1, %rd3, %rd4;
	ld.global.u32 	%r7, [%rd1];
	mad.lo.s32 	%r8, %r7, 3, %r1;
	st.global.u32 	[%rd1], %r8;
$L__BB0_2:
	ret;
}
`

// TestLaunchDepGPU: on a device that supports it (sm_90 and later: the H200 must), a chain
// of programmatic launches, each reading what the one before wrote, gives the host's
// result: launched directly, and captured into a graph (programmatic edges) and replayed
// twice. Every launch after the first of a chain must be programmatic.
func TestLaunchDepGPU(t *testing.T) {
	drv, d := openDriver(t)
	if err := drv.DepLaunchSupport(); err != nil {
		if ccMajor(d.Info().Arch) >= 9 {
			t.Fatalf("%s: %v", d.Info().Arch, err)
		}
		t.Skip(err)
	}
	fn, s := loadOnStream(t, d, "test/pdl", pdlStepPTX, "strata_pdltest_step")
	const words, chain = 1 << 20, 64
	buf, err := d.Alloc(4 * words)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	hb, err := d.HostAlloc(4*words, false)
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Free()
	ln := d.NewLauncher(s)
	if err := ln.CanLaunchDep(); err != nil {
		t.Fatal(err)
	}
	if err := ln.Begin(); err != nil {
		t.Fatal(err)
	}
	defer ln.End()
	grid, block := gpu.Dim3{X: words / 256, Y: 1, Z: 1}, gpu.Dim3{X: 256, Y: 1, Z: 1}
	args := func(v uint32) []byte {
		a := fillArgs{P: uint64(buf.Ptr), N: words, V: v}
		return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&a)), unsafe.Sizeof(a))...)
	}
	// want: the host's value of every word after `runs` chains from x = i.
	want := func(i, runs int) uint32 {
		x := uint32(i)
		for r := 0; r < runs; r++ {
			for k := 0; k < chain; k++ {
				x = 3*x + uint32(k+1)
			}
		}
		return x
	}
	init := func() {
		t.Helper()
		b := hb.Bytes()
		for i := 0; i < words; i++ {
			binary.LittleEndian.PutUint32(b[4*i:], uint32(i))
		}
		if err := s.Upload(buf.Ptr, hb, 0, 4*words); err != nil {
			t.Fatal(err)
		}
		if err := s.Sync(); err != nil { // hb is rewritten next
			t.Fatal(err)
		}
	}
	launchChain := func() {
		t.Helper()
		for k := 0; k < chain; k++ {
			dep, err := ln.LaunchDep(fn, grid, block, args(uint32(k+1)))
			if err != nil {
				t.Fatal(err)
			}
			if dep != (k > 0) {
				t.Fatalf("launch %d of the chain: programmatic %v", k, dep)
			}
		}
	}
	check := func(what string, runs int) {
		t.Helper()
		for i := range hb.Bytes() {
			hb.Bytes()[i] = 0xee
		}
		if err := s.Download(hb, 0, buf.Ptr, 4*words); err != nil {
			t.Fatal(err)
		}
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < words; i++ {
			if v := binary.LittleEndian.Uint32(hb.Bytes()[4*i:]); v != want(i, runs) {
				t.Fatalf("%s: word %d = %#x, want %#x", what, i, v, want(i, runs))
			}
		}
	}
	init()
	launchChain()
	check("direct chain", 1)
	init()
	if err := ln.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	launchChain()
	g, err := ln.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	for r := 1; r <= 2; r++ {
		if err := g.Launch(); err != nil {
			t.Fatal(err)
		}
		check("graph replay", r)
	}
}

// BenchmarkGraphDep483: one op is a graph of 483 dependent launches of the step kernel
// (one block of 256 threads on 256 words: each launch reads what the previous wrote, as a
// decode token's small kernels do), launched and waited for; "plain" captured with plain
// launches, "pdl" with programmatic ones. The difference per node is what programmatic
// dependent launch saves at each kernel boundary of a resident token's graph.
func BenchmarkGraphDep483(b *testing.B) {
	drv, d := openDriver(b)
	if err := drv.DepLaunchSupport(); err != nil {
		b.Skip(err)
	}
	fn, s := loadOnStream(b, d, "test/pdl", pdlStepPTX, "strata_pdltest_step")
	buf, err := d.Alloc(4 * 256)
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Free()
	a := fillArgs{P: uint64(buf.Ptr), N: 256, V: 1}
	args := unsafe.Slice((*byte)(unsafe.Pointer(&a)), unsafe.Sizeof(a))
	one, block := gpu.Dim3{X: 1, Y: 1, Z: 1}, gpu.Dim3{X: 256, Y: 1, Z: 1}
	for _, mode := range []string{"plain", "pdl"} {
		b.Run(mode, func(b *testing.B) {
			ln := d.NewLauncher(s)
			if err := ln.Begin(); err != nil {
				b.Fatal(err)
			}
			defer ln.End()
			if err := ln.BeginCapture(); err != nil {
				b.Fatal(err)
			}
			deps := 0
			for i := 0; i < 483; i++ {
				if mode == "plain" {
					err = ln.Launch(fn, one, block, args)
				} else {
					var dep bool
					dep, err = ln.LaunchDep(fn, one, block, args)
					if dep {
						deps++
					}
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			g, err := ln.EndCapture()
			if err != nil {
				b.Fatal(err)
			}
			defer g.Destroy()
			if mode == "pdl" && deps != 482 {
				b.Fatalf("%d programmatic launches of 483", deps)
			}
			for i := 0; i < 3; i++ { // warm-up
				if err := g.Launch(); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.Sync(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := g.Launch(); err != nil {
					b.Fatal(err)
				}
				if err := s.Sync(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/483, "ns/node")
		})
	}
}

// TestCCMajor: the compute capability major behind DepLaunchSupport's sm_90 gate.
func TestCCMajor(t *testing.T) {
	for arch, want := range map[string]int{"sm_90": 9, "sm_89": 8, "sm_80": 8, "sm_100": 10, "sm_120": 12, "gfx1100": 0, "sm_": 0, "": 0} {
		if got := ccMajor(arch); got != want {
			t.Errorf("ccMajor(%q) = %d, want %d", arch, got, want)
		}
	}
}
