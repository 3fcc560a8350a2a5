package parity

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/strata-hip/strata/kernels"
	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/quant"
	"github.com/strata-hip/strata/runtime/gpu"
)

// TestBenchPrefill measures the prefill kernels (STRATA_BENCH=1; a measurement, not a unit
// test: it asserts nothing about time). In one run, on one stream:
//
//   - NVIDIA: the int8 mma.sync ceiling, a plain m16n8k32 tile loop at full occupancy
//     (16 independent accumulator chains per warp, operands in registers, no memory);
//   - mmq, every variant the code object has, at 4096 rows × K = 14336 with 512 and 2048
//     tokens (Q8_1 activations, f32 output);
//   - moe_prefill, every variant, at the Qwen3-30B-A3B expert shape: hidden 2048, expert
//     width 768, 128 experts, top-8, 512 and 2048 tokens, routed uniformly at random; each
//     phase timed on its own, the layer is their sum.
//
// TOPS counts 2 ops (multiply, add) per weight·activation product: mmq 2·rows·K·tokens, one MoE
// layer 6·tokens·k·n_ff·hidden (gate, up and down). Weights are random bytes (timing does
// not depend on their values), in as many copies as make ≥ 128 MiB (more than twice the
// 60 MB L2), used in turn, so no launch finds its weights in L2 from the previous one.
// Timing: 5 warm-up launches, then 50 timed, an event between consecutive launches, the
// median reported. STRATA_BENCH_OUT=DIR also writes DIR/bench_prefill.txt;
// STRATA_BENCH_FILTER=REGEXP measures only the variants whose names match;
// STRATA_BENCH_ROUNDS=N (default 1) runs the mmq families N times in turn, so that two
// families' kernels alternate (A B A B) in one process.
func TestBenchPrefill(t *testing.T) {
	if os.Getenv("STRATA_BENCH") != "1" {
		t.Skip("set STRATA_BENCH=1 to measure (GPU machine)")
	}
	dir, have := codeObjects(t)
	dev, target := openDevice(t, have)
	benchPrefill(t, dev, target, dir)
}

// benchHasObject reports whether dir holds co's file: a code-object directory cut to the
// families one run measures leaves the others out, and they are skipped.
func benchHasObject(dir string, co abi.CodeObject) bool {
	_, err := os.Stat(filepath.Join(dir, co.Path))
	return err == nil
}

// benchPrefill is TestBenchPrefill on dev, whose code objects for target are under dir.
func benchPrefill(t *testing.T, dev *gpu.Device, target, dir string) {
	tg, _ := kernels.LookupTarget(target)
	s, err := dev.NewStream()
	benchMust(t, err)
	defer s.Destroy()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 6))
	var blog benchLog
	logf := blog.printf
	logf("prefill benchmarks on %s (%s, %s), %s", dev.Info().Name, target, dev.Info().PCIBusID, time.Now().UTC().Format(time.RFC3339))
	const warm, reps = 5, 50
	filter := regexp.MustCompile(os.Getenv("STRATA_BENCH_FILTER"))
	// timeIt runs f warm+reps times with events between launches and returns the median
	// seconds of the timed ones.
	timeIt := func(f func() error) float64 {
		return median(eventTimes(t, dev, s, warm+reps, 300*time.Second, func(int) error { return f() })[warm:])
	}
	// Random bytes for weights (timing does not depend on their values), made once.
	noise := make([]byte, 64<<20)
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	// copies is how many weight copies of n bytes make ≥ 128 MiB (rotated per launch).
	copies := func(n int) int { return max(1, (128<<20+n-1)/n) }
	alloc := func(n int, fill bool) *gpu.Buffer {
		b, err := dev.Alloc(uintptr(n))
		benchMust(t, err)
		t.Cleanup(func() { _ = b.Free() })
		if fill {
			for off := 0; off < n; off += len(noise) {
				benchMust(t, dev.Upload(b.Ptr.Add(uintptr(off)), noise[:min(len(noise), n-off)]))
			}
		}
		return b
	}
	// q81Seg: activations quantized with one d per seg blocks (mmq8x4: kernels.MmqXSeg).
	q81Seg := func(rows, k, seg int) *gpu.Buffer {
		x := activations(rng, rows, k)
		xq := make([]byte, rows*k/32*36)
		for r := 0; r < rows; r++ {
			benchMust(t, quant.QuantizeQ8_1GPUSeg(x[r*k:(r+1)*k], xq[r*k/32*36:(r+1)*k/32*36], seg))
		}
		b := alloc(len(xq), false)
		benchMust(t, dev.Upload(b.Ptr, xq))
		return b
	}
	q81 := func(rows, k int) *gpu.Buffer { return q81Seg(rows, k, 1) }

	ceiling := 0.0
	if tg.IsNVIDIA() {
		mod, err := dev.LoadModule(gpu.CodeObject{Name: "bench/mma_ceiling", Target: dev.Info().Arch, Image: []byte(mmaCeilingPTX)})
		benchMust(t, err)
		defer mod.Unload()
		fn, err := mod.Func("strata_mma_ceiling")
		benchMust(t, err)
		const blocks, iters = 132 * 16, 4096
		out := alloc(4*256*blocks, false)
		args := make([]byte, 16)
		binary.LittleEndian.PutUint64(args, uint64(out.Ptr))
		binary.LittleEndian.PutUint32(args[8:], iters)
		binary.LittleEndian.PutUint32(args[12:], 1)
		sec := timeIt(func() error {
			return fn.Launch(s, gpu.Dim3{X: blocks, Y: 1, Z: 1}, gpu.Dim3{X: 256, Y: 1, Z: 1}, 0, args)
		})
		ops := float64(blocks) * 8 * iters * 16 * (16 * 8 * 32 * 2)
		ceiling = ops / sec / 1e12
		logf("int8 mma.sync m16n8k32 tile loop (ceiling): %.1f TOPS (%d blocks × 256 threads, %.2f ms)", ceiling, blocks, sec*1e3)
	}
	ratio := func(tops float64) string {
		if ceiling == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*tops/ceiling)
	}

	// mmq at 4096 × 14336, and its 8-warp tiles (mmq8, NVIDIA; mmq8c and mmq8cz with compact
	// scale tiles for Q2_0 and Q8_0; mmq8x4 and mmq8x4n with their shared-d activations) in
	// the same table.
	rounds, err := strconv.Atoi(cmp.Or(os.Getenv("STRATA_BENCH_ROUNDS"), "1"))
	if err != nil || rounds < 1 {
		t.Fatalf("STRATA_BENCH_ROUNDS=%q: want a positive count", os.Getenv("STRATA_BENCH_ROUNDS"))
	}
	fams := []string{"mmq", "mmq8", "mmq8x4", "mmq8x4n", "mmq8x4g", "mmq8c", "mmq8cz"}
	for round := range rounds * len(fams) {
		fam := fams[round%len(fams)]
		co, ok := abi.Find(target, fam)
		if !ok || len(co.Variants) == 0 || !benchHasObject(dir, co) {
			continue
		}
		image, err := os.ReadFile(filepath.Join(dir, co.Path))
		benchMust(t, err)
		mod, err := dev.LoadModule(gpu.CodeObject{Name: co.Path, Target: co.Target, Image: image})
		benchMust(t, err)
		defer mod.Unload()
		const rows, k = 4096, 14336
		x := q81Seg(2048, k, kernels.MmqXSeg(fam))
		y := alloc(4*2048*rows, false)
		logf("%-26s %6s %10s %8s %8s", fam+" 4096x14336", "tokens", "median µs", "TOPS", "of mma")
		spec, _ := kernels.LookupSpec(fam)
		for _, v := range co.Variants {
			if !filter.MatchString(v.Name) {
				continue
			}
			vals := variantValues(spec, v.Name)
			qt := mmqTypes[vals["type"]]
			bm, bn, err := mmqTile(vals["tile"])
			benchMust(t, err)
			rb, err := qt.RowBytes(k)
			benchMust(t, err)
			ws := make([]*gpu.Buffer, copies(rows*rb))
			for i := range ws {
				ws[i] = alloc(rows*rb, true)
			}
			fn, err := mod.Func(v.Symbol)
			benchMust(t, err)
			for _, tokens := range []int{512, 2048} {
				grid := gpu.Dim3{X: uint32((rows + bm - 1) / bm), Y: uint32((tokens + bn - 1) / bn), Z: 1}
				n := 0
				sec := timeIt(func() error {
					a := abi.MmqArgs{W: uint64(ws[n%len(ws)].Ptr), X: uint64(x.Ptr), Y: uint64(y.Ptr), Rows: rows, K: k, Tokens: int32(tokens),
						XRowBlocks: k / 32, Ldy: rows, HookGroup: -1}
					n++
					return fn.Launch(s, grid, gpu.Dim3{X: uint32(spec.Threads), Y: 1, Z: 1}, 0, a.Bytes())
				})
				tops := 2 * float64(rows) * k * float64(tokens) / sec / 1e12
				logf("%-26s %6d %10.1f %8.1f %8s", v.Name, tokens, sec*1e6, tops, ratio(tops))
			}
			for _, w := range ws {
				benchMust(t, w.Free())
			}
		}
	}

	// moe_prefill at the Qwen3-30B-A3B shape.
	if co, ok := abi.Find(target, "moe_prefill"); ok && benchHasObject(dir, co) {
		image, err := os.ReadFile(filepath.Join(dir, co.Path))
		benchMust(t, err)
		mod, err := dev.LoadModule(gpu.CodeObject{Name: co.Path, Target: co.Target, Image: image})
		benchMust(t, err)
		defer mod.Unload()
		const hidden, ff, experts, kUsed, maxT = 2048, 768, 128, 8, 2048
		x := q81(maxT, hidden)
		ids := make([]int32, maxT*kUsed)
		wts := make([]float32, maxT*kUsed)
		for tk := 0; tk < maxT; tk++ {
			perm := rng.Perm(experts)
			for j := 0; j < kUsed; j++ {
				ids[tk*kUsed+j], wts[tk*kUsed+j] = int32(perm[j]), float32(rng.Float64())
			}
		}
		dids := alloc(4*len(ids), false)
		benchMust(t, dev.Upload(dids.Ptr, int32Bytes(ids)))
		dwts := alloc(4*len(wts), false)
		benchMust(t, dev.Upload(dwts.Ptr, f32Bytes(wts)))
		maxTiles := maxT*kUsed/16 + experts // any tile of ≥ 16 tokens
		sched := alloc(4*(2*experts+1+2*maxTiles), false)
		list := alloc(4*maxT*kUsed, false)
		hq := alloc(maxT*kUsed*ff/32*36, false)
		yp := alloc(4*maxT*kUsed*hidden, false)
		out := alloc(4*maxT*hidden, false)
		logf("%-26s %6s %9s %9s %9s %9s %10s %8s %8s", "moe_prefill 2048/768 128x8", "tokens", "route µs", "gate/up", "down", "combine", "layer µs", "TOPS", "of mma")
		spec, _ := kernels.LookupSpec("moe_prefill")
		for _, v := range co.Variants {
			if !filter.MatchString(v.Name) {
				continue
			}
			vals := variantValues(spec, v.Name)
			qt := mmqTypes[vals["type"]]
			bm, bn, err := mmqTile(vals["tile"])
			benchMust(t, err)
			grb, err := qt.RowBytes(hidden)
			benchMust(t, err)
			drb, err := qt.RowBytes(ff)
			benchMust(t, err)
			guBytes, dBytes := (ff*grb+255)/256*256, (hidden*drb+255)/256*256
			// Weight sets in rotation: the smallest matrix (down) in ≥ 128 MiB of copies.
			nset := copies(experts * dBytes)
			wg, wu, wd := make([]*gpu.Buffer, nset), make([]*gpu.Buffer, nset), make([]*gpu.Buffer, nset)
			for i := 0; i < nset; i++ {
				wg[i], wu[i], wd[i] = alloc(experts*guBytes, true), alloc(experts*guBytes, true), alloc(experts*dBytes, true)
			}
			fn, err := mod.Func(v.Symbol)
			benchMust(t, err)
			for _, tokens := range []int{512, 2048} {
				tiles := (tokens*kUsed+bn-1)/bn + experts
				a := abi.MoePrefillArgs{X: uint64(x.Ptr), Ids: uint64(dids.Ptr), Wts: uint64(dwts.Ptr), Wg: uint64(wg[0].Ptr), Wu: uint64(wu[0].Ptr),
					Wd: uint64(wd[0].Ptr), Sched: uint64(sched.Ptr), List: uint64(list.Ptr), Hq: uint64(hq.Ptr), Yp: uint64(yp.Ptr), Out: uint64(out.Ptr),
					GuMatBytes: int64(guBytes), DMatBytes: int64(dBytes), Tokens: int32(tokens), KUsed: kUsed, NExpert: experts,
					Hidden: hidden, NFf: ff, XRowBlocks: hidden / 32, Ldo: hidden}
				grids := []gpu.Dim3{{X: uint32(experts), Y: 1, Z: 1}, {X: uint32((ff + bm/2 - 1) / (bm / 2)), Y: uint32(tiles), Z: 1},
					{X: uint32((hidden + bm - 1) / bm), Y: uint32(tiles), Z: 1}, {X: uint32((hidden + abi.MoePrefillThreads - 1) / abi.MoePrefillThreads), Y: uint32(tokens), Z: 1}}
				var secs [4]float64
				for ph := 0; ph < 4; ph++ {
					// The route must have run before the phases that read its schedule.
					if ph > 0 {
						a0 := a
						a0.Phase = 0
						benchMust(t, fn.Launch(s, grids[0], gpu.Dim3{X: abi.MoePrefillThreads, Y: 1, Z: 1}, 0, a0.Bytes()))
					}
					n := 0
					secs[ph] = timeIt(func() error {
						ap := a
						ap.Phase = int32(ph)
						ap.Wg, ap.Wu, ap.Wd = uint64(wg[n%nset].Ptr), uint64(wu[n%nset].Ptr), uint64(wd[n%nset].Ptr)
						n++
						return fn.Launch(s, grids[ph], gpu.Dim3{X: abi.MoePrefillThreads, Y: 1, Z: 1}, 0, ap.Bytes())
					})
				}
				total := secs[0] + secs[1] + secs[2] + secs[3]
				tops := 6 * float64(tokens) * kUsed * ff * hidden / total / 1e12
				logf("%-26s %6d %9.1f %9.1f %9.1f %9.1f %10.1f %8.1f %8s", v.Name, tokens, secs[0]*1e6, secs[1]*1e6, secs[2]*1e6, secs[3]*1e6, total*1e6, tops, ratio(tops))
			}
			for i := 0; i < nset; i++ {
				benchMust(t, wg[i].Free())
				benchMust(t, wu[i].Free())
				benchMust(t, wd[i].Free())
			}
		}
	}
	blog.write(t, "bench_prefill.txt")
}

// variantValues returns the axis values of spec's variant name.
func variantValues(spec kernels.Spec, name string) map[string]string {
	for _, v := range spec.AllVariants() {
		if v.Name == name {
			return v.Values
		}
	}
	return nil
}

// mmaCeilingPTX is strata_mma_ceiling: 16 independent mma.sync m16n8k32 s8 chains per warp
// with operands in registers, out[block·256 + thread] = the sum of its accumulators (so
// nothing is dead code). Built with
//
//	clang-19 -x cuda --cuda-gpu-arch=sm_80 -nocudainc -nocudalib --cuda-device-only -S -O3 \
//	    -Xclang -target-feature -Xclang +ptx70
//
// from
//
//	#define __global__ __attribute__((global))
//	#define __device__ __attribute__((device))
//	// 16 independent m16n8k32 s8 chains per warp, operands in registers.
//	extern "C" __global__ void __attribute__((launch_bounds(256))) strata_mma_ceiling(int* out, int iters, int seed) {
//	  unsigned a0 = seed * 3 + __nvvm_read_ptx_sreg_tid_x(), a1 = a0 ^ 0x5a5a5a5a, a2 = a0 * 7, a3 = a0 + 11;
//	  unsigned b0 = a0 * 13, b1 = a0 ^ 0x33333333;
//	  int c[16][4];
//	  for (int j = 0; j < 16; ++j) for (int x = 0; x < 4; ++x) c[j][x] = j + x;
//	  for (int i = 0; i < iters; ++i) {
//	#pragma unroll
//	    for (int j = 0; j < 16; ++j) {
//	      asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
//	                   : "+r"(c[j][0]), "+r"(c[j][1]), "+r"(c[j][2]), "+r"(c[j][3])
//	                   : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
//	    }
//	  }
//	  int s = 0;
//	  for (int j = 0; j < 16; ++j) for (int x = 0; x < 4; ++x) s += c[j][x];
//	  out[__nvvm_read_ptx_sreg_ctaid_x() * 256 + __nvvm_read_ptx_sreg_tid_x()] = s;
//	}
const mmaCeilingPTX = `//
// Generated by LLVM NVPTX Back-End
//

.version 7.0
.target sm_80
.address_size 64

	// .globl	strata_mma_ceiling      // -- Begin function strata_mma_ceiling
                                        // @strata_mma_ceiling
.visible .entry strata_mma_ceiling(
	.param .u64 strata_mma_ceiling_param_0,
	.param .u32 strata_mma_ceiling_param_1,
	.param .u32 strata_mma_ceiling_param_2
)
.maxntid 256, 1, 1
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<517>;
	.reg .b64 	%rd<5>;

// %bb.0:
	ld.param.u32 	%r451, [strata_mma_ceiling_param_1];
	ld.param.u64 	%rd2, [strata_mma_ceiling_param_0];
	cvta.to.global.u64 	%rd1, %rd2;
	mov.u32 	%r1, %tid.x;
	setp.lt.s32 	%p1, %r451, 1;
	mov.b32 	%r516, 576;
	@%p1 bra 	$L__BB0_4;
// %bb.1:
	ld.param.u32 	%r142, [strata_mma_ceiling_param_2];
	mad.lo.s32 	%r166, %r142, 3, %r1;
	mul.lo.s32 	%r168, %r166, 7;
	mul.lo.s32 	%r170, %r166, 13;
	xor.b32  	%r167, %r166, 1515870810;
	add.s32 	%r169, %r166, 11;
	xor.b32  	%r171, %r166, 858993459;
	mov.b32 	%r515, 0;
	mov.b32 	%r511, 1;
	mov.b32 	%r507, 2;
	mov.b32 	%r503, 3;
	mov.b32 	%r499, 4;
	mov.b32 	%r495, 5;
	mov.b32 	%r491, 6;
	mov.b32 	%r487, 7;
	mov.b32 	%r483, 8;
	mov.b32 	%r479, 9;
	mov.b32 	%r475, 10;
	mov.b32 	%r471, 11;
	mov.b32 	%r467, 12;
	mov.b32 	%r463, 13;
	mov.b32 	%r459, 14;
	mov.b32 	%r455, 15;
	mov.b32 	%r454, 16;
	mov.b32 	%r453, 17;
	mov.b32 	%r452, 18;
	mov.u32 	%r456, %r453;
	mov.u32 	%r457, %r454;
	mov.u32 	%r458, %r455;
	mov.u32 	%r460, %r454;
	mov.u32 	%r461, %r455;
	mov.u32 	%r462, %r459;
	mov.u32 	%r464, %r455;
	mov.u32 	%r465, %r459;
	mov.u32 	%r466, %r463;
	mov.u32 	%r468, %r459;
	mov.u32 	%r469, %r463;
	mov.u32 	%r470, %r467;
	mov.u32 	%r472, %r463;
	mov.u32 	%r473, %r467;
	mov.u32 	%r474, %r471;
	mov.u32 	%r476, %r467;
	mov.u32 	%r477, %r471;
	mov.u32 	%r478, %r475;
	mov.u32 	%r480, %r471;
	mov.u32 	%r481, %r475;
	mov.u32 	%r482, %r479;
	mov.u32 	%r484, %r475;
	mov.u32 	%r485, %r479;
	mov.u32 	%r486, %r483;
	mov.u32 	%r488, %r479;
	mov.u32 	%r489, %r483;
	mov.u32 	%r490, %r487;
	mov.u32 	%r492, %r483;
	mov.u32 	%r493, %r487;
	mov.u32 	%r494, %r491;
	mov.u32 	%r496, %r487;
	mov.u32 	%r497, %r491;
	mov.u32 	%r498, %r495;
	mov.u32 	%r500, %r491;
	mov.u32 	%r501, %r495;
	mov.u32 	%r502, %r499;
	mov.u32 	%r504, %r495;
	mov.u32 	%r505, %r499;
	mov.u32 	%r506, %r503;
	mov.u32 	%r508, %r499;
	mov.u32 	%r509, %r503;
	mov.u32 	%r510, %r507;
	mov.u32 	%r512, %r503;
	mov.u32 	%r513, %r507;
	mov.u32 	%r514, %r511;
$L__BB0_2:                              // =>This Inner Loop Header: Depth=1
	// begin inline asm
	mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r515,%r514,%r513,%r512}, {%r166,%r167,%r168,%r169}, {%r170,%r171}, {%r515,%r514,%r513,%r512};
	// end inline asm
	// begin inline asm
	mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r511,%r510,%r509,%r508}, {%r166,%r167,%r168,%r169}, {%r170,%r171}, {%r511,%r510,%r509,%r508};
	// end inline asm
	// begin inline asm
	mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r507,%r506,%r505,%r504}, {%r166,%r167,%r168,%r169}, {%r170,%r171}, {%r507,%r506,%r505,%r504};
	// end inline asm
	// begin inline asm
	mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r503,%r502,%r501,%r500}, {%r166,%r167,%r168,%r169}, {%r170,%r171}, {%r503,%r502,%r501,%r500};
	// end inline asm
	// begin inline asm
	mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r499,%r498,%r497,%r496}, {%r166,%r167,%r168,%r169}, {%r170,%r171}, {%r499,%r498,%r497,%r496};
	// end inline asm
	// begin inline asm
	mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r495,%r494,%r493,%r492}, {%r166,%r167,%r168,%r169}, {%r170,%r171}, {%r495,%r494,%r493,%r492};
	// end inline asm
	// begin inline asm
	mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r491,%r490,%r489,%r488}, {%r166,%r167,%r168,%r169}, {%r170,%r171}, {%r491,%r490,%r489,%r488};
	// end inline asm
	// begin inline asm
	mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r487,%r486,%r485,%r484}, {%r166,%r167,%r168,%r169}, {%r170,%r171}, {%r487,%r486,%r485,%r484};
	// end inline asm
	// begin inline asm
	mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r483,%r482,%r481,%r480}, {%r166,%r167,%r168,%r169}, {%r170,%r171}, {%r483,%r482,%r481,%r480};
	// end inline asm
	// begin inline asm
	mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r479,%r478,%r477,%r476}, {%r166,%r167,%r168,%r169}, {%r170,%r171}, {%r479,%r478,%r477,%r476};
	// end inline asm
	// begin inline asm
	mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r475,%r474,%r473,%r472}, {%r166,%r167,%r168,%r169}, {%r170,%r171}, {%r475,%r474,%r473,%r472};
	// end inline asm
	// begin inline asm
	mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r471,%r470,%r469,%r468}, {%r166,%r167,%r168,%r169}, {%r170,%r171}, {%r471,%r470,%r469,%r468};
	// end inline asm
	// begin inline asm
	mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r467,%r466,%r465,%r464}, {%r166,%r167,%r168,%r169}, {%r170,%r171}, {%r467,%r466,%r465,%r464};
	// end inline asm
	// begin inline asm
	mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r463,%r462,%r461,%r460}, {%r166,%r167,%r168,%r169}, {%r170,%r171}, {%r463,%r462,%r461,%r460};
	// end inline asm
	// begin inline asm
	mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r459,%r458,%r457,%r456}, {%r166,%r167,%r168,%r169}, {%r170,%r171}, {%r459,%r458,%r457,%r456};
	// end inline asm
	// begin inline asm
	mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r455,%r454,%r453,%r452}, {%r166,%r167,%r168,%r169}, {%r170,%r171}, {%r455,%r454,%r453,%r452};
	// end inline asm
	add.s32 	%r451, %r451, -1;
	setp.ne.s32 	%p2, %r451, 0;
	@%p2 bra 	$L__BB0_2;
// %bb.3:
	add.s32 	%r386, %r514, %r515;
	add.s32 	%r387, %r513, %r386;
	add.s32 	%r388, %r512, %r387;
	add.s32 	%r389, %r511, %r388;
	add.s32 	%r390, %r510, %r389;
	add.s32 	%r391, %r509, %r390;
	add.s32 	%r392, %r508, %r391;
	add.s32 	%r393, %r507, %r392;
	add.s32 	%r394, %r506, %r393;
	add.s32 	%r395, %r505, %r394;
	add.s32 	%r396, %r504, %r395;
	add.s32 	%r397, %r503, %r396;
	add.s32 	%r398, %r502, %r397;
	add.s32 	%r399, %r501, %r398;
	add.s32 	%r400, %r500, %r399;
	add.s32 	%r401, %r499, %r400;
	add.s32 	%r402, %r498, %r401;
	add.s32 	%r403, %r497, %r402;
	add.s32 	%r404, %r496, %r403;
	add.s32 	%r405, %r495, %r404;
	add.s32 	%r406, %r494, %r405;
	add.s32 	%r407, %r493, %r406;
	add.s32 	%r408, %r492, %r407;
	add.s32 	%r409, %r491, %r408;
	add.s32 	%r410, %r490, %r409;
	add.s32 	%r411, %r489, %r410;
	add.s32 	%r412, %r488, %r411;
	add.s32 	%r413, %r487, %r412;
	add.s32 	%r414, %r486, %r413;
	add.s32 	%r415, %r485, %r414;
	add.s32 	%r416, %r484, %r415;
	add.s32 	%r417, %r483, %r416;
	add.s32 	%r418, %r482, %r417;
	add.s32 	%r419, %r481, %r418;
	add.s32 	%r420, %r480, %r419;
	add.s32 	%r421, %r479, %r420;
	add.s32 	%r422, %r478, %r421;
	add.s32 	%r423, %r477, %r422;
	add.s32 	%r424, %r476, %r423;
	add.s32 	%r425, %r475, %r424;
	add.s32 	%r426, %r474, %r425;
	add.s32 	%r427, %r473, %r426;
	add.s32 	%r428, %r472, %r427;
	add.s32 	%r429, %r471, %r428;
	add.s32 	%r430, %r470, %r429;
	add.s32 	%r431, %r469, %r430;
	add.s32 	%r432, %r468, %r431;
	add.s32 	%r433, %r467, %r432;
	add.s32 	%r434, %r466, %r433;
	add.s32 	%r435, %r465, %r434;
	add.s32 	%r436, %r464, %r435;
	add.s32 	%r437, %r463, %r436;
	add.s32 	%r438, %r462, %r437;
	add.s32 	%r439, %r461, %r438;
	add.s32 	%r440, %r460, %r439;
	add.s32 	%r441, %r459, %r440;
	add.s32 	%r442, %r458, %r441;
	add.s32 	%r443, %r457, %r442;
	add.s32 	%r444, %r456, %r443;
	add.s32 	%r445, %r455, %r444;
	add.s32 	%r446, %r454, %r445;
	add.s32 	%r447, %r453, %r446;
	add.s32 	%r516, %r452, %r447;
$L__BB0_4:
	mov.u32 	%r448, %ctaid.x;
	shl.b32 	%r449, %r448, 8;
	or.b32  	%r450, %r449, %r1;
	mul.wide.u32 	%rd3, %r450, 4;
	add.s64 	%rd4, %rd1, %rd3;
	st.global.u32 	[%rd4], %r516;
	ret;
                                        // -- End function
}
`
