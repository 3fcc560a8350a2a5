package parity

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-hip/strata/kernels"
	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/quant"
	"github.com/strata-hip/strata/runtime/gpu"
)

// TestBenchDecode measures the decode kernels against the memory limit (STRATA_BENCH=1; a
// measurement, not a unit test: it asserts nothing about time). In one run, on one stream:
//
//   - the device-to-device copy bandwidth (1 GiB, bytes read + written), the ceiling;
//   - mmvq for every weight type at 4096×14336 with n = 1, 2, 4, 8 columns, and at the
//     Qwen3-30B-A3B expert shapes (8 selected of 128 experts: gate/up 2048→768 sharing x,
//     down 768→2048 with one x per expert), experts found through slot tables.
//
// Every launch reads weights no launch touched in the last ≥ 256 MiB (rotation through a
// 1 GiB pool of random bytes; H200 L2 is 60 MB), so weights come from DRAM. Timing: two 1 GiB
// copies are queued first so that the host has queued all launches before the GPU reaches them;
// then 10 warm-up launches and 60 timed ones, an event between consecutive launches; the
// median of the 60 per-launch times is reported with effective GB/s = (weight bytes +
// activation bytes) / time and its ratio to the copy bandwidth. Floors, timed the same way:
// an mmvq launch that does no work (ncols = 0) and d2d copies of two case-sized byte counts.
// Graph view (short launches timed as graph replays, without each launch's gap): each case is also
// captured as one graph of graphK launches over the same rotation of weights (consecutive
// launches read different buffers, ≥ 256 MiB apart, so L2 does not serve them), replayed 5
// times to warm up and 60 timed times with an event between replays; time per launch =
// median replay / graphK. Per-launch event times include a launch gap (the empty-launch
// floor); replays shrink it, so both columns are printed side by side, each with its ratio
// to the copy bandwidth. The same two timings of a d2d copy of each type's weight bytes
// (read + written) give the copy engine's own figure at that size. STRATA_BENCH_GRAPH=0
// turns the graph view off (profiler runs); a backend without graphs prints "-".
// STRATA_BENCH_OUT=DIR also writes DIR/bench.txt. For sweeps: STRATA_BENCH_TYPES (variants,
// comma-separated), STRATA_BENCH_NS (column counts), STRATA_BENCH_EXPERTS=0 (no expert
// shapes), STRATA_BENCH_ROWS_PER_BLOCK (grid of the dense cases, for kernels built with
// another row count per block), STRATA_BENCH_REPS=WARM,REPS (launches per case; fewer than
// 50 timed ones is not a measurement: for profilers), STRATA_BENCH_FLOORS=0 (no floors).
// STRATA_BENCH_MMVQ_REF=DIR: also load DIR's mmvq code object ("ref", e.g. the previous
// kernels) and, per type and column count of the dense shape, run both on one matrix of
// valid random blocks (quant.RandomRow) and the bench's activations, outputs poisoned before
// each launch, and report how many of the outputs differ bitwise (a check of kernels meant
// to be bit-identical; not timed). The dense one-column case runs the type's kernel for that
// shape (mmvqStdGeom: a decode geometry where one was measured faster, else the default
// kernel; the default is then timed too); STRATA_BENCH_GEOMS=N,… (geometry numbers,
// kernels.MmvqGeoms; "all" = every one) also times those geometry kernels there, each on its
// own grid, and checks every geometry timed against the default kernel on one matrix of
// valid random blocks (0 outputs may differ bitwise: a difference fails the test after the
// sweep). STRATA_BENCH_ALT=N times those one-column kernels in N alternating rounds (A B A B,
// each round a row); STRATA_BENCH_EXPERT_GEOMS=1 also times the sweep's geometry kernels at
// the expert shapes (one column, the default's grid), alternated with the default kernel.
// STRATA_BENCH_CEIL=FILE: also, per type, the streaming ceiling (benchCeiling: FILE is the
// code object of parity/testdata/ceiling.cu) and the arithmetic floor beside it.
func TestBenchDecode(t *testing.T) {
	if os.Getenv("STRATA_BENCH") != "1" {
		t.Skip("set STRATA_BENCH=1 to measure (GPU machine)")
	}
	dir, have := codeObjects(t)
	dev, target := openDevice(t, have)
	co, ok := abi.Find(target, "mmvq")
	if !ok {
		t.Fatalf("no mmvq code object for %s", target)
	}
	image, err := os.ReadFile(filepath.Join(dir, co.Path))
	benchMust(t, err)
	mod, err := dev.LoadModule(gpu.CodeObject{Name: co.Path, Target: co.Target, Image: image})
	benchMust(t, err)
	defer mod.Unload()
	var refMod *gpu.Module
	if d := os.Getenv("STRATA_BENCH_MMVQ_REF"); d != "" {
		image, err := os.ReadFile(filepath.Join(d, co.Path))
		benchMust(t, err)
		refMod, err = dev.LoadModule(gpu.CodeObject{Name: "ref/" + co.Path, Target: co.Target, Image: image})
		benchMust(t, err)
		defer refMod.Unload()
	}
	s, err := dev.NewStream()
	benchMust(t, err)
	defer s.Destroy()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))

	const poolBytes = 1 << 30
	pool, err := dev.Alloc(poolBytes)
	benchMust(t, err)
	defer pool.Free()
	pool2, err := dev.Alloc(poolBytes)
	benchMust(t, err)
	defer pool2.Free()
	chunk := make([]byte, 64<<20)
	for i := range chunk {
		chunk[i] = byte(rng.Uint32())
	}
	for off := 0; off < poolBytes; off += len(chunk) {
		benchMust(t, dev.Upload(pool.Ptr.Add(uintptr(off)), chunk))
	}

	// Launches go through ln: unbound (outside graphTimes) its Launch is Func.Launch on s, the
	// per-launch path; graphTimes binds it to capture.
	ln := dev.NewLauncher(s)
	useGraph := os.Getenv("STRATA_BENCH_GRAPH") != "0" && ln.CanCapture() == nil
	// events: n+1 events recorded around n launches of f(i) on s, after a 1 GiB copy that
	// keeps the GPU busy while the host queues them. Returns per-launch seconds.
	timeLaunches := func(n int, f func(i int) error) []float64 {
		for c := 0; c < 2; c++ {
			benchMust(t, s.Copy(pool2.Ptr, pool.Ptr, poolBytes))
		}
		return eventTimes(t, dev, s, n, 120*time.Second, f)
	}
	// graphTimes captures f(0), …, f(k−1) on s into one graph and returns the seconds of
	// each of graphReps replays after graphWarm (events between replays, queued behind two
	// 1 GiB copies like timeLaunches). f launches through ln. A capture or replay failure is
	// returned (the graph view is then dropped, the per-launch view goes on).
	const graphK, graphWarm, graphReps = 32, 5, 60
	graphTimes := func(f func(i int) error) ([]float64, error) {
		if err := ln.Begin(); err != nil {
			return nil, err
		}
		defer ln.End()
		if err := ln.BeginCapture(); err != nil {
			return nil, err
		}
		for i := 0; i < graphK; i++ {
			if err := f(i); err != nil {
				if g, err := ln.EndCapture(); err == nil {
					_ = g.Destroy()
				}
				return nil, err
			}
		}
		g, err := ln.EndCapture()
		if err != nil {
			return nil, err
		}
		defer func() { benchMust(t, g.Destroy()) }()
		for c := 0; c < 2; c++ {
			benchMust(t, s.Copy(pool2.Ptr, pool.Ptr, poolBytes))
		}
		return eventTimes(t, dev, s, graphWarm+graphReps, 120*time.Second, func(int) error { return g.Launch() })[graphWarm:], nil
	}
	// graphCol is the graph view of a case moving bytes per launch: µs per launch, GB/s and
	// % of d2d, or dashes without graphs.
	var d2d float64
	var blog benchLog
	logf := blog.printf
	graphCol := func(f func(i int) error, bytes int) string {
		if useGraph {
			ts, err := graphTimes(f)
			if err == nil {
				m := median(ts) / graphK
				gbs := float64(bytes) / m / 1e9
				return fmt.Sprintf("%10.2f %9.1f %7.1f%%", m*1e6, gbs, 100*gbs/d2d)
			}
			logf("graph view dropped: %v", err)
			useGraph = false
		}
		return fmt.Sprintf("%10s %9s %8s", "-", "-", "-")
	}
	// Ceiling: device-to-device copy, 1 GiB, read + written bytes.
	copies := timeLaunches(21, func(int) error { return s.Copy(pool2.Ptr, pool.Ptr, poolBytes) })
	d2d = 2 * float64(poolBytes) / median(copies[1:]) / 1e9

	logf("decode benchmarks on %s (%s, %s), %s", dev.Info().Name, target, dev.Info().PCIBusID, time.Now().UTC().Format(time.RFC3339))
	logf("d2d copy 1 GiB: %.1f GB/s (bytes read + written, median of 20)", d2d)

	// Activation buffers: Q8_1 and f32, large enough for 8 columns of K = 14336 and 8
	// experts' own x of K = 2048; random quantized activations.
	const maxAct = 8 * 14336
	xf := activations(rng, 1, maxAct)
	xq := make([]byte, maxAct/32*36)
	benchMust(t, quant.QuantizeQ8_1GPU(xf, xq))
	dxq, err := dev.Alloc(uintptr(len(xq)))
	benchMust(t, err)
	defer dxq.Free()
	benchMust(t, dev.Upload(dxq.Ptr, xq))
	dxf, err := dev.Alloc(uintptr(4 * len(xf)))
	benchMust(t, err)
	defer dxf.Free()
	benchMust(t, dev.Upload(dxf.Ptr, f32Bytes(xf)))
	dy, err := dev.Alloc(4 * 8 * 14336)
	benchMust(t, err)
	defer dy.Free()
	derr, err := dev.Alloc(64)
	benchMust(t, err)
	defer derr.Free()

	variants := []string{"f16", "bf16", "q80", "q20", "q4k", "q6k", "iq2xs", "iq3xxs", "iq3s", "iq1m"}
	if v := os.Getenv("STRATA_BENCH_TYPES"); v != "" { // e.g. "q80,iq2xs": a subset, for sweeps
		variants = strings.Split(v, ",")
	}
	ncols := []int{1, 2, 4, 8}
	if v := os.Getenv("STRATA_BENCH_NS"); v != "" { // e.g. "1": a subset of the column counts
		ncols = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 || n > 8 {
				t.Fatalf("STRATA_BENCH_NS: %q is not a column count 1..8", f)
			}
			ncols = append(ncols, n)
		}
	}
	experts := os.Getenv("STRATA_BENCH_EXPERTS") != "0"
	warm, reps := 10, 60
	if v := os.Getenv("STRATA_BENCH_REPS"); v != "" { // "WARM,REPS": e.g. "0,1" under a profiler (not a timing)
		if _, err := fmt.Sscanf(v, "%d,%d", &warm, &reps); err != nil || warm < 0 || reps < 1 {
			t.Fatalf("STRATA_BENCH_REPS: %q is not WARM,REPS", v)
		}
	}
	floors := os.Getenv("STRATA_BENCH_FLOORS") != "0"
	var ceilMod *gpu.Module // STRATA_BENCH_CEIL: the streaming ceiling kernels (benchCeiling)
	if f := os.Getenv("STRATA_BENCH_CEIL"); f != "" {
		image, err := os.ReadFile(f)
		benchMust(t, err)
		ceilMod, err = dev.LoadModule(gpu.CodeObject{Name: "ceiling/" + filepath.Base(f), Target: target, Image: image})
		benchMust(t, err)
		defer ceilMod.Unload()
	}
	emptyEv := 0.0 // the empty mmvq launch on the dense grid, events median (s)

	alt := 1 // STRATA_BENCH_ALT=N: the one-column kernels of a type (its own, the default, the sweep's) timed in N alternating rounds
	if v := os.Getenv("STRATA_BENCH_ALT"); v != "" {
		if n, err := strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("STRATA_BENCH_ALT: %q is not a round count ≥ 1", v)
		} else {
			alt = n
		}
	}
	var sweep []int // STRATA_BENCH_GEOMS: geometry kernels also timed at 4096×14336, n = 1
	if v := os.Getenv("STRATA_BENCH_GEOMS"); v == "all" {
		for g := 1; g < len(kernels.MmvqGeoms); g++ {
			sweep = append(sweep, g)
		}
	} else if v != "" {
		for _, f := range strings.Split(v, ",") {
			g, err := strconv.Atoi(f)
			if err != nil || g < 1 || g >= len(kernels.MmvqGeoms) {
				t.Fatalf("STRATA_BENCH_GEOMS: %q is not a geometry 1..%d", f, len(kernels.MmvqGeoms)-1)
			}
			sweep = append(sweep, g)
		}
	}
	logf("per launch: events around each launch, median of %d; graph: one graph of %d launches, median replay of %d / %d", reps, graphK, graphReps, graphK)
	logf("%-8s %-34s %3s %10s %9s %8s %12s | %10s %9s %8s", "type", "shape", "n", "median µs", "GB/s", "of d2d", "bytes/launch", "graph µs", "GB/s", "of d2d")

	// Floors, timed like every case: an mmvq launch that does no work (ncols = 0 returns
	// before any load: the launch and event cost of one kernel with the dense grid), and
	// device-to-device copies of 8.5 and 31 MB (the bytes, read + written, of the IQ2_XS and
	// Q8_0 4096×14336 matrices: what the copy engine reaches at these sizes).
	if fn, err := mod.Func("strata_mmvq_q80"); err == nil && floors {
		args := abi.MmvqArgs{Xq: uint64(dxq.Ptr), Y: uint64(dy.Ptr), W: uint64(pool.Ptr), Rows: 4096, K: 14336, XColStride: 14336, YColStride: 4096}
		gx, err := mmvqGridX(target, "strata_mmvq_q80", 4096)
		benchMust(t, err)
		for _, nb := range []int{gx, 1} {
			grid := gpu.Dim3{X: uint32(nb), Y: 1, Z: 1}
			empty := func(int) error { return ln.Launch(fn, grid, gpu.Dim3{X: abi.MmvqThreads, Y: 1, Z: 1}, args.Bytes()) }
			ts := timeLaunches(warm+reps, empty)[warm:]
			if nb == gx {
				emptyEv = median(ts)
			}
			logf("floor: empty mmvq launch (ncols 0, %d blocks): %.2f µs median | graph: %s µs a launch", grid.X, median(ts)*1e6, strings.Fields(graphCol(empty, 0))[0])
		}
	}
	// The byte counts come from the formats (the IQ2_XS one was a constant 4096 bytes short,
	// 16969728, before 2026-11-29-decode-topk).
	var copyHalves []int
	for _, qt := range []quant.Type{quant.IQ2_XS, quant.Q8_0} {
		rb, err := qt.RowBytes(14336)
		benchMust(t, err)
		copyHalves = append(copyHalves, 4096*rb/2)
	}
	for _, half := range copyHalves {
		if !floors {
			break
		}
		half = half / 256 * 256
		nrot := poolBytes / 2 / half
		ts := timeLaunches(warm+reps, func(i int) error {
			off := uintptr((i % nrot) * half)
			return s.Copy(pool2.Ptr.Add(off), pool.Ptr.Add(uintptr(poolBytes/2)+off), half)
		})[warm:]
		m := median(ts)
		logf("floor: d2d copy of %d bytes (%d read + written): %.2f µs median, %.1f GB/s, %.1f%% of d2d", half, 2*half, m*1e6, 2*float64(half)/m/1e9, 100*2*float64(half)/m/1e9/d2d)
	}
	pad := func(n int) int { return (n + 255) / 256 * 256 }
	if os.Getenv("STRATA_BENCH_ENGINE") == "1" {
		benchEngineShapes(t, dev, s, mod, refMod, target, ln, pool.Ptr, poolBytes, dxq.Ptr, dxf.Ptr, warm, reps, d2d, rng, timeLaunches, graphCol, logf)
		blog.write(t, "bench.txt")
		return
	}
	for _, v := range variants {
		qt := mmvqTypes[v]
		fn, err := mod.Func("strata_mmvq_" + v)
		benchMust(t, err)
		isFloat := qt == quant.F16 || qt == quant.BF16
		actBytes := func(k, cols int) int {
			if isFloat {
				return 4 * k * cols
			}
			return k / 32 * 36 * cols
		}
		// Dense 4096×14336.
		rows, k := 4096, 14336
		rb, err := qt.RowBytes(k)
		benchMust(t, err)
		mat := pad(rows * rb)
		rot := min(poolBytes/mat, max(2, (256<<20+mat-1)/mat))
		for _, n := range ncols {
			args := abi.MmvqArgs{Xq: uint64(dxq.Ptr), Xf: uint64(dxf.Ptr), Y: uint64(dy.Ptr), Rows: int32(rows), K: int32(k),
				Ncols: int32(n), XColStride: int32(k), YColStride: int32(rows)}
			// The kernels timed: the type's for this case first (its row is the table's), then
			// at one column the default kernel where that is a geometry, and the sweep's.
			geoms := []int{0}
			if n == 1 {
				geoms = []int{mmvqStdGeom[v]}
				for _, g := range append([]int{0}, sweep...) {
					if !slices.Contains(geoms, g) {
						geoms = append(geoms, g)
					}
				}
			}
			var gfns []*gpu.Func
			var gsyms []string
			nk := len(geoms) // kernels of one round; STRATA_BENCH_ALT rounds alternate them (A B A B)
			for range alt - 1 {
				if len(geoms[:nk]) > 1 {
					geoms = append(geoms, geoms[:nk]...)
				}
			}
			for gi, g := range geoms {
				sym, fng := "strata_mmvq_"+v, fn
				if g != 0 {
					sym = fmt.Sprintf("strata_mmvq_%s_g%d", v, g)
					if fng, err = mod.Func(sym); err != nil { // F16/BF16 have geometry 4 only
						logf("%-8s %-34s %3d no kernel %s", v, fmt.Sprintf("%dx%d g%d", rows, k, g), n, sym)
						continue
					}
				}
				gx, err := mmvqGridX(target, sym, rows)
				benchMust(t, err)
				grid := gpu.Dim3{X: uint32(gx), Y: 1, Z: 1}
				if v := os.Getenv("STRATA_BENCH_ROWS_PER_BLOCK"); v != "" && g == 0 { // sweeps: kernels built with other row counts per block
					rpb, err := strconv.Atoi(v)
					if err != nil || rpb < 1 {
						t.Fatalf("STRATA_BENCH_ROWS_PER_BLOCK: %q", v)
					}
					grid.X = uint32((rows + rpb - 1) / rpb)
				}
				launch := func(i int) error {
					a := args
					a.W = uint64(pool.Ptr) + uint64((i%rot)*mat)
					return ln.Launch(fng, grid, gpu.Dim3{X: abi.MmvqThreads, Y: 1, Z: 1}, a.Bytes())
				}
				ts := timeLaunches(warm+reps, launch)[warm:]
				bytes := rows*rb + actBytes(k, n)
				m := median(ts)
				gbs := float64(bytes) / m / 1e9
				shape := fmt.Sprintf("%dx%d", rows, k)
				if g != 0 {
					shape += fmt.Sprintf(" g%d (%d blocks)", g, grid.X)
				} else if len(geoms) > 1 {
					shape += fmt.Sprintf(" default (%d blocks)", grid.X)
				}
				logf("%-8s %-34s %3d %10.2f %9.1f %7.1f%% %12d | %s", v, shape, n, m*1e6, gbs, 100*gbs/d2d, bytes, graphCol(launch, bytes))
				if g != 0 && gi < nk {
					gfns, gsyms = append(gfns, fng), append(gsyms, sym)
				}
			}
			if len(gfns) > 0 {
				if err := mmvqGeomCheck(dev, s, fn, gfns, qt, rows, k, 1, dxq.Ptr, dxf.Ptr, dy.Ptr, target, "strata_mmvq_"+v, gsyms, rng, logf); err != nil {
					t.Error(err)
				}
			}
		}
		if refMod != nil {
			benchMust(t, mmvqRefCheck(t, dev, s, mod, refMod, target, v, qt, rows, k, ncols, dxq.Ptr, dxf.Ptr, dy.Ptr, rng, logf))
		}
		// The copy engine at this type's size: a d2d copy of half its 4096×14336 weight bytes
		// (so read + written = the weight bytes), rotated over the pool, both timings.
		if floors {
			half := rows * rb / 2 / 256 * 256
			nrot := poolBytes / 2 / half
			cp := func(i int) error {
				off := uintptr((i % nrot) * half)
				return s.Copy(pool2.Ptr.Add(off), pool.Ptr.Add(uintptr(poolBytes/2)+off), half)
			}
			m := median(timeLaunches(warm+reps, cp)[warm:])
			gbs := 2 * float64(half) / m / 1e9
			logf("%-8s %-34s %3s %10.2f %9.1f %7.1f%% %12d | %s", v, "floor: d2d copy of its bytes", "-", m*1e6, gbs, 100*gbs/d2d, 2*half, graphCol(cp, 2*half))
		}
		if ceilMod != nil {
			xp, xb := dxq.Ptr, actBytes(k, 1)
			if isFloat {
				xp = dxf.Ptr
			}
			benchCeiling(t, dev, ceilMod, ln, v, rows, rb, pool.Ptr, mat, rot, xp, xb, emptyEv, d2d, warm, reps, timeLaunches, graphCol, logf)
		}
		// Expert shapes: 8 of 128 experts, through slot tables rotated over the pool.
		if !experts {
			continue
		}
		for si, sh := range []struct {
			name       string
			rows, k    int
			ownX       bool
			nExp, nSel int
		}{{"experts gate/up 2048->768 (8 of 128)", 768, 2048, false, 128, 8}, {"experts down 768->2048 (8 of 128)", 2048, 768, true, 128, 8}} {
			rb, err := qt.RowBytes(sh.k)
			benchMust(t, err)
			eb := pad(sh.rows * rb)
			// Tables: each covers 128 experts at distinct pool addresses; enough tables that
			// the rotation spans ≥ 256 MiB (or the whole pool).
			perTable := sh.nExp * eb
			ntab := max(1, min(poolBytes/perTable, (256<<20+perTable-1)/perTable))
			slots := make([]byte, 8*sh.nExp*ntab)
			for tb := 0; tb < ntab; tb++ {
				for e := 0; e < sh.nExp; e++ {
					binary.LittleEndian.PutUint64(slots[8*(tb*sh.nExp+e):], uint64(pool.Ptr)+uint64((tb*sh.nExp+e)*eb))
				}
			}
			dslots, err := dev.Alloc(uintptr(len(slots)))
			benchMust(t, err)
			benchMust(t, dev.Upload(dslots.Ptr, slots))
			// Launch i uses experts 8i..8i+7 (mod 128) of table (i/16) mod ntab.
			const groups = 16
			ids := make([]byte, 4*sh.nSel*groups)
			for g := 0; g < groups; g++ {
				for j := 0; j < sh.nSel; j++ {
					binary.LittleEndian.PutUint32(ids[4*(g*sh.nSel+j):], uint32((g*sh.nSel+j)%sh.nExp))
				}
			}
			dids, err := dev.Alloc(uintptr(len(ids)))
			benchMust(t, err)
			benchMust(t, dev.Upload(dids.Ptr, ids))
			args := abi.MmvqArgs{Xq: uint64(dxq.Ptr), Xf: uint64(dxf.Ptr), Y: uint64(dy.Ptr), Err: uint64(derr.Ptr),
				Rows: int32(sh.rows), K: int32(sh.k), Ncols: 1, Nslots: int32(sh.nExp), XColStride: int32(sh.k),
				YColStride: int32(sh.rows), YMatStride: int32(sh.rows)}
			if sh.ownX {
				args.XMatStride = int32(sh.k)
			}
			// Fewer blocks than rows need for the expert shapes: each block copies the IQ
			// tables into LDS once, and small experts would otherwise pay that per 16 rows.
			// The type's kernel for the shape first (mmvqExpertGeom), then the default where
			// that is a geometry; STRATA_BENCH_EXPERT_GEOMS=1: also the sweep's geometry kernels
			// (one column, the same grid), all of them in STRATA_BENCH_ALT alternating rounds.
			egeoms := []int{mmvqExpertGeom[v][si]}
			if egeoms[0] != 0 {
				egeoms = append(egeoms, 0)
			}
			if os.Getenv("STRATA_BENCH_EXPERT_GEOMS") == "1" {
				for _, g := range sweep {
					if !slices.Contains(egeoms, g) {
						egeoms = append(egeoms, g)
					}
				}
				nk := len(egeoms)
				for range alt - 1 {
					egeoms = append(egeoms, egeoms[:nk]...)
				}
			}
			for _, g := range egeoms {
				sym, fng := "strata_mmvq_"+v, fn
				if g != 0 {
					sym = fmt.Sprintf("strata_mmvq_%s_g%d", v, g)
					if fng, err = mod.Func(sym); err != nil {
						continue
					}
				}
				gx, err := mmvqGridX(target, sym, sh.rows)
				benchMust(t, err)
				grid := gpu.Dim3{X: uint32(min(gx, max(1, 4*dev.Info().Units/sh.nSel))), Y: 1, Z: uint32(sh.nSel)}
				launch := func(i int) error {
					a := args
					a.Slots = uint64(dslots.Ptr) + uint64(8*sh.nExp*((i/groups)%ntab))
					a.Ids = uint64(dids.Ptr) + uint64(4*sh.nSel*(i%groups))
					return ln.Launch(fng, grid, gpu.Dim3{X: abi.MmvqThreads, Y: 1, Z: 1}, a.Bytes())
				}
				ts := timeLaunches(warm+reps, launch)[warm:]
				xsets := 1
				if sh.ownX {
					xsets = sh.nSel
				}
				bytes := sh.nSel*sh.rows*rb + actBytes(sh.k, xsets)
				m := median(ts)
				gbs := float64(bytes) / m / 1e9
				name := sh.name
				if g != 0 {
					name = fmt.Sprintf("%s g%d", strings.Replace(sh.name, " (8 of 128)", "", 1), g)
				}
				logf("%-8s %-34s %3d %10.2f %9.1f %7.1f%% %12d | %s", v, name, 1, m*1e6, gbs, 100*gbs/d2d, bytes, graphCol(launch, bytes))
			}
			benchMust(t, dslots.Free())
			benchMust(t, dids.Free())
		}
	}
	blog.write(t, "bench.txt")
}

// hbmPeak is the H200's HBM3e bandwidth by the vendor's datasheet (bytes/s): the arithmetic
// floor's rate (/work/.library/device/H200.md).
const hbmPeak = 4.8e12

// benchCeiling times, for type v's 4096×14336 matrix (rows of rb bytes, rotated over the pool
// as the mmvq cases: launch i reads pool + (i mod rot)·mat) and its activations (xb bytes at
// x), the streaming ceiling kernels of parity/testdata/ceiling.cu exactly as the mmvq cases
// are timed (events around each launch, median of reps after warm): every strata_ceil_w*
// kernel at 1, 2, 4 and 8 blocks of 256 an SM and at one pass of the grid (every thread
// reads U words once), strata_ceil_rows (mmvq's order without its work, passes of a seventh
// of a row: the default kernel's at K = 14336) and strata_ceil_win (the same passes in a
// moving window of row pairs, at 1, 2 and 3 blocks an SM). One line per configuration; then
// the best by events again with the graph view ("ceiling: stream best"), the rows kernel's
// row ("ceiling: mmvq order"), the window kernel's best ("ceiling: window order"), and the
// arithmetic floor t ≥ t_empty + bytes / hbmPeak
// (t_empty: the empty mmvq launch's events median, when the floors ran).
func benchCeiling(t *testing.T, dev *gpu.Device, mod *gpu.Module, ln *gpu.Launcher, v string, rows, rb int, pool gpu.DevPtr, mat, rot int,
	x gpu.DevPtr, xb int, emptyEv, d2d float64, warm, reps int, timeLaunches func(int, func(int) error) []float64,
	graphCol func(func(int) error, int) string, logf func(string, ...any)) {
	n := rows * rb
	bytes := n + xb
	const maxGrid = 1 << 18
	out, err := dev.Alloc(4 * maxGrid)
	benchMust(t, err)
	defer out.Free()
	args := func(i int, pb int) []byte {
		b := make([]byte, 72)
		binary.LittleEndian.PutUint64(b[0:], uint64(pool)+uint64((i%rot)*mat))
		binary.LittleEndian.PutUint64(b[8:], uint64(x))
		binary.LittleEndian.PutUint64(b[16:], uint64(out.Ptr))
		binary.LittleEndian.PutUint64(b[24:], uint64(n))
		binary.LittleEndian.PutUint64(b[32:], uint64(xb))
		binary.LittleEndian.PutUint64(b[40:], uint64(rows))
		binary.LittleEndian.PutUint64(b[48:], uint64(rb))
		binary.LittleEndian.PutUint64(b[56:], uint64(pb))
		return b
	}
	type cfg struct {
		sym  string
		grid int
		pb   int
	}
	var cfgs []cfg
	units := dev.Info().Units
	for _, w := range []string{"w4", "w8", "w16", "w16nc", "w16h"} {
		wb, _ := strconv.Atoi(strings.TrimRight(w[1:], "nch"))
		for _, u := range []int{1, 2, 4, 8} {
			sym := fmt.Sprintf("strata_ceil_%s_u%d", w, u)
			grids := []int{units, 2 * units, 4 * units, 8 * units}
			if one := (n/wb + 256*u - 1) / (256 * u); one <= maxGrid && !slices.Contains(grids, one) {
				grids = append(grids, one)
			}
			for _, g := range grids {
				cfgs = append(cfgs, cfg{sym, g, 0})
			}
		}
	}
	launchOf := func(c cfg) (func(int) error, error) {
		fn, err := mod.Func(c.sym)
		if err != nil {
			return nil, err
		}
		grid, block := gpu.Dim3{X: uint32(c.grid), Y: 1, Z: 1}, gpu.Dim3{X: 256, Y: 1, Z: 1}
		return func(i int) error { return ln.Launch(fn, grid, block, args(i, c.pb)) }, nil
	}
	// bestOf times every configuration (a ceilcfg line each) and returns the fastest by events.
	bestOf := func(cs []cfg) (cfg, bool) {
		best, bestT := -1, 0.0
		for ci, c := range cs {
			launch, err := launchOf(c)
			if err != nil {
				logf("%-8s ceiling %s: %v", v, c.sym, err)
				continue
			}
			m := median(timeLaunches(warm+reps, launch)[warm:])
			logf("%-8s ceilcfg %-22s grid %6d %10.2f µs %7.1f%%", v, c.sym, c.grid, m*1e6, 100*float64(bytes)/m/1e9/d2d)
			if best < 0 || m < bestT {
				best, bestT = ci, m
			}
		}
		if best < 0 {
			return cfg{}, false
		}
		return cs[best], true
	}
	row := func(name string, c cfg) {
		launch, err := launchOf(c)
		if err != nil {
			logf("%-8s ceiling %s: %v", v, c.sym, err)
			return
		}
		m := median(timeLaunches(warm+reps, launch)[warm:])
		gbs := float64(bytes) / m / 1e9
		logf("%-8s %-34s %3d %10.2f %9.1f %7.1f%% %12d | %s", v, name, 1, m*1e6, gbs, 100*gbs/d2d, bytes, graphCol(launch, bytes))
	}
	if c, ok := bestOf(cfgs); ok {
		logf("%-8s ceiling best: %s grid %d (%d configurations)", v, c.sym, c.grid, len(cfgs))
		row("ceiling: stream best", c)
	}
	if pb := rb / 7; rb%16 == 0 && pb%16 == 0 && pb <= 4096 {
		row(fmt.Sprintf("ceiling: mmvq order (pass %d B)", pb), cfg{"strata_ceil_rows", (rows + 15) / 16, pb})
		// The window order (a split-row mmvq's): 1, 2 and 3 blocks an SM, the best again.
		if c, ok := bestOf([]cfg{{"strata_ceil_win", units, pb}, {"strata_ceil_win", 2 * units, pb}, {"strata_ceil_win", 3 * units, pb}}); ok {
			row(fmt.Sprintf("ceiling: window order (pass %d B, grid %d)", pb, c.grid), c)
		}
	}
	if emptyEv > 0 {
		f := emptyEv + float64(bytes)/hbmPeak
		logf("%-8s %-34s %3s %10.2f %9.1f %7.1f%% %12d | (t_empty %.2f µs + bytes at %.1f TB/s)", v, "floor: empty launch + bytes/HBM peak", "-", f*1e6,
			float64(bytes)/f/1e9, 100*float64(bytes)/f/1e9/d2d, bytes, emptyEv*1e6, hbmPeak/1e12)
	}
}

// mmvqStdGeom is the kernel of each type's 4096×14336 one-column case in TestBenchDecode
// (issue 5's table): the decode geometry N (strata_mmvq_<type>_g<N>, kernels.MmvqGeoms)
// where one was measured faster than the default kernel at that shape, else absent (the
// default kernel). The rule: lower median than the default in both views (events and
// graph) of both runs of one H200 call, by ≥ 1 % in the graph view
// (bench/results/2026-11-30-mmvq4-s8, call1, mean graph µs default → geometry): Q4_K
// 1×2 with 4 blocks an SM (g5) 11.77 → 11.36, Q6_K the next pass prefetched into L1 (g9)
// 21.52 → 19.33, Q2_0 and IQ1_M the first pass prefetched into L1 (g1) 8.61 → 8.21 and
// 12.59 → 12.23. Q8_0, IQ2_XS, IQ3_XXS, IQ3_S and F16/BF16 keep the default (no geometry
// passed the rule: the IQ3 and IQ2_XS g1/g9 gains were ≤ 1.1 % graph and lost by events).
//
// Session 9 (bench/results/2026-11-30-mmvq-s9, call1, the same rule over two runs of two
// alternating rounds, mean events / graph µs): Q6_K takes the wide-load geometry g10 (its
// 16-byte windows, MmvqGeom.W), 22.40 / 19.36 (g9) → 21.09 / 17.96. Q8_0's g10 lost by events
// (21.75 → 22.00; graph 19.06 → 18.98). For the types without a wide form g10 and g12 run
// g1's and g9's code.
var mmvqStdGeom = map[string]int{"q4k": 5, "q6k": 10, "q20": 1, "iq1m": 1}

// mmvqExpertGeom is the kernel of each type's rows at the 30B-A3B expert shapes in
// TestBenchDecode ([0]: gate/up 2048->768, [1]: down 768->2048; 8 of 128 experts through
// slots, one column, the default kernel's grid): the geometry that beat the default there by
// mmvqStdGeom's rule, else 0 (bench/results/2026-11-30-mmvq-s9, call1, mean events / graph
// µs default → geometry). Down (K = 768: 24 groups a row, so one pass with U = 2 leaves
// more than half of a lane's group slots dead): one group a lane a pass, g11 (2×1, the next
// pass prefetched) for every quantized type but Q8_0 — Q6_K 16.40 / 13.47 → 12.94 / 9.79,
// Q4_K 12.16 / 9.31 → 10.47 / 7.47, Q2_0 11.14 / 8.39 → 10.03 / 7.14, IQ2_XS 14.26 / 11.56 →
// 11.61 / 8.69, IQ3_XXS 15.01 / 12.32 → 12.00 / 9.02, IQ3_S 16.08 / 13.25 → 12.49 / 9.47,
// IQ1_M 14.13 / 11.36 → 11.45 / 8.50 — and g14 (1×1 at 4 blocks an SM) for Q8_0, 12.62 /
// 9.82 → 10.71 / 7.69. Gate/up: Q2_0 g12 (g9's code for it) 8.77 / 6.01 → 8.44 / 5.55, Q4_K
// g13 (g5's shape) 9.47 / 6.67 → 9.11 / 6.18, IQ2_XS g10 (g1's code) 10.37 / 7.67 → 10.37 /
// 7.46; the others keep the default. F16/BF16 have no geometry kernel for these shapes.
var mmvqExpertGeom = map[string][2]int{"q80": {0, 14}, "q20": {12, 11}, "q4k": {13, 11}, "q6k": {0, 11},
	"iq2xs": {10, 11}, "iq3xxs": {0, 11}, "iq3s": {0, 11}, "iq1m": {0, 11}}

// mmvqEngineShapes are the one-column mmvq launches of a resident decode token of the
// synthetic 30B-A3B Q2_0 and 80B-A3B IQ2_XS models (dense weights Q8_0, routers F16:
// model/gpu forward.go attention, deltaNet, moe, logits): geom, the decode geometry counted
// best for the shape (bench/results/2026-11-30-mmvqs-s7), engine, the kernel the engine
// launches on the H200's 132 SMs (0: the default; model/gpu TestMmvqGeomShapes pins the same
// choices), and the launches a token makes of each.
var mmvqEngineShapes = []struct {
	name         string
	v            string
	rows, k, z   int
	geom, engine int
	per30, per80 int
}{
	{"q|k|v 2048->5120", "q80", 5120, 2048, 1, 3, 3, 48, 0},
	{"wo / delta-net out 4096->2048", "q80", 2048, 4096, 1, 2, 0, 48, 48},
	{"router 2048->128", "f16", 128, 2048, 1, 4, 4, 48, 0},
	{"router+shared gate 2048->513", "f16", 513, 2048, 1, 4, 4, 0, 48},
	{"delta-net in 2048->12352", "q80", 12352, 2048, 1, 3, 0, 0, 36},
	{"attn q or gate 16 x 2048->256", "q80", 256, 2048, 16, 1, 0, 0, 24},
	{"attn k|v 2048->1024", "q80", 1024, 2048, 1, 4, 4, 0, 12},
	{"LM head 2048->151936", "q80", 151936, 2048, 1, 1, 0, 1, 1},
}

// benchEngineShapes times mmvq at the engine's decode shapes (STRATA_BENCH_ENGINE=1): per
// shape the default kernel ("old": strata_mmvq_<type>, kernels/abi's grid) and the shape's
// decode-geometry kernel ("geo": strata_mmvq_<type>_g<N>, its own grid), plain launches
// with prefetch 0 (the standalone view; the L1 prefetch is after the wait), events and graph
// view, weights rotated over the pool (≥ 256 MiB between reuses), median of reps; with ref
// (STRATA_BENCH_MMVQ_REF: a2cd2ed's kernels, before the geometries, whose argument struct is
// the same 104 bytes) also ref's default kernel ("ref"; its PTX is old's since mmvq2, so old
// and ref should agree within noise). Then a bitwise check of the geometry kernel against
// the default on valid random weights (same sums, so 0 outputs may differ), and the
// per-token sum of each model's launches: old everywhere, geo everywhere, the engine's
// choice ("new"), ref.
func benchEngineShapes(t *testing.T, dev *gpu.Device, s *gpu.Stream, mod, ref *gpu.Module, target string, ln *gpu.Launcher,
	pool gpu.DevPtr, poolBytes int, xq, xf gpu.DevPtr, warm, reps int, d2d float64, rng *rand.Rand,
	timeLaunches func(int, func(int) error) []float64, graphCol func(func(int) error, int) string, logf func(string, ...any)) {
	maxOut := 0
	for _, sh := range mmvqEngineShapes {
		maxOut = max(maxOut, sh.rows*sh.z)
	}
	dyE, err := dev.Alloc(uintptr(4 * maxOut)) // the LM head's 151936 outputs exceed the shared y
	benchMust(t, err)
	defer dyE.Free()
	y := dyE.Ptr
	logf("engine decode shapes (one column): old = the default kernel, geo = the shape's geometry kernel (engine: the one the engine launches); prefetch 0 (plain launches)")
	logf("%-32s %-4s %-5s %4s %6s %10s %9s %8s %12s | %10s %9s %8s", "shape", "type", "path", "geom", "blocks", "median µs", "GB/s", "of d2d", "bytes/launch", "graph µs", "GB/s", "of d2d")
	var tok [2][4][2]float64 // [model 30B/80B][old/geo/engine/ref][events/graph] µs a token
	paths := []string{"old", "geo"}
	if ref != nil {
		paths = append(paths, "ref")
	}
	for _, sh := range mmvqEngineShapes {
		qt := mmvqTypes[sh.v]
		syms := []string{"strata_mmvq_" + sh.v, fmt.Sprintf("strata_mmvq_%s_g%d", sh.v, sh.geom), "strata_mmvq_" + sh.v}
		var fns []*gpu.Func
		for i := range paths {
			m := mod
			if i == 2 {
				m = ref
			}
			fn, err := m.Func(syms[i])
			benchMust(t, err)
			fns = append(fns, fn)
		}
		rb, err := qt.RowBytes(sh.k)
		benchMust(t, err)
		matBytes := (sh.rows*rb + 255) / 256 * 256
		mat := matBytes * sh.z
		rot := min(poolBytes/mat, max(2, (256<<20+mat-1)/mat))
		act := sh.k / 32 * 36
		if qt == quant.F16 {
			act = 4 * sh.k
		}
		bytes := sh.z*sh.rows*rb + act
		for i := range paths {
			fn := fns[i]
			gx, err := mmvqGridX(target, syms[i], sh.rows)
			benchMust(t, err)
			args := abi.MmvqArgs{Xq: uint64(xq), Xf: uint64(xf), Y: uint64(y), Rows: int32(sh.rows), K: int32(sh.k), Ncols: 1,
				XColStride: int32(sh.k), YColStride: int32(sh.rows), YMatStride: int32(sh.rows), WMatBytes: int64(matBytes)}
			grid := gpu.Dim3{X: uint32(gx), Y: 1, Z: uint32(sh.z)}
			launch := func(j int) error {
				a := args
				a.W = uint64(pool) + uint64((j%rot)*mat)
				return ln.Launch(fn, grid, gpu.Dim3{X: abi.MmvqThreads, Y: 1, Z: 1}, a.Bytes())
			}
			m := median(timeLaunches(warm+reps, launch)[warm:])
			gc := graphCol(launch, bytes)
			gbs := float64(bytes) / m / 1e9
			geom := []int{0, sh.geom, 0}[i]
			logf("%-32s %-4s %-5s %4d %6d %10.2f %9.1f %7.1f%% %12d | %s", sh.name, sh.v, paths[i], geom, gx*sh.z, m*1e6, gbs, 100*gbs/d2d, bytes, gc)
			gm, _ := strconv.ParseFloat(strings.Fields(gc)[0], 64)
			slots := []int{i}
			if i == 2 {
				slots = []int{3}
			} else if (i == 1) == (sh.engine != 0) {
				slots = append(slots, 2)
			}
			for mi, n := range []int{sh.per30, sh.per80} {
				for _, sl := range slots {
					tok[mi][sl][0] += float64(n) * m * 1e6
					tok[mi][sl][1] += float64(n) * gm
				}
			}
		}
		if sh.rows <= 16384 {
			benchMust(t, mmvqGeomCheck(dev, s, fns[0], fns[1:2], qt, sh.rows, sh.k, sh.z, xq, xf, y, target, syms[0], syms[1:2], rng, logf))
		}
	}
	for mi, name := range []string{"30B-A3B Q2_0", "80B-A3B IQ2_XS"} {
		logf("%s: mmvq µs a token (sum of its launches): old %.1f / graph %.1f, geo %.1f / graph %.1f, new (the engine's) %.1f / graph %.1f (events %+.1f %%, graph %+.1f %% against old)", name,
			tok[mi][0][0], tok[mi][0][1], tok[mi][1][0], tok[mi][1][1], tok[mi][2][0], tok[mi][2][1],
			100*(tok[mi][2][0]/tok[mi][0][0]-1), 100*(tok[mi][2][1]/tok[mi][0][1]-1))
		if ref != nil {
			logf("%s: ref (a2cd2ed's kernels) %.1f / graph %.1f", name, tok[mi][3][0], tok[mi][3][1])
		}
	}
}

// mmvqGeomCheck runs the default kernel fn0 and each geometry kernel of fngs (symbols
// symgs; each on its kernels/abi grid) on z rows×k matrices of valid random blocks (made
// once), y poisoned before each launch, and logs how many outputs differ bitwise; any
// difference or non-finite output is an error, after every kernel was checked (the
// geometries keep every sum).
func mmvqGeomCheck(dev *gpu.Device, s *gpu.Stream, fn0 *gpu.Func, fngs []*gpu.Func, qt quant.Type, rows, k, z int, xq, xf, y gpu.DevPtr,
	target, sym0 string, symgs []string, rng *rand.Rand, logf func(string, ...any)) error {
	rb, err := qt.RowBytes(k)
	if err != nil {
		return err
	}
	matBytes := (rows*rb + 255) / 256 * 256
	w := make([]byte, z*matBytes)
	for m := 0; m < z; m++ {
		for r := 0; r < rows; r++ {
			row, err := quant.RandomRow(qt, k, rng)
			if err != nil {
				return err
			}
			copy(w[m*matBytes+r*rb:], row)
		}
	}
	dw, err := dev.Alloc(uintptr(len(w)))
	if err != nil {
		return err
	}
	defer dw.Free()
	if err := dev.Upload(dw.Ptr, w); err != nil {
		return err
	}
	run := func(fn *gpu.Func, sym string) ([]byte, error) {
		gx, err := mmvqGridX(target, sym, rows)
		if err != nil {
			return nil, err
		}
		args := abi.MmvqArgs{W: uint64(dw.Ptr), Xq: uint64(xq), Xf: uint64(xf), Y: uint64(y), Rows: int32(rows), K: int32(k), Ncols: 1,
			XColStride: int32(k), YColStride: int32(rows), YMatStride: int32(rows), WMatBytes: int64(matBytes)}
		return mmvqPoisonedRun(dev, s, fn, gpu.Dim3{X: uint32(gx), Y: 1, Z: uint32(z)}, args.Bytes(), y, 4*rows*z)
	}
	out0, err := run(fn0, sym0)
	if err != nil {
		return err
	}
	var bad []string
	for i, fng := range fngs {
		out, err := run(fng, symgs[i])
		if err != nil {
			return err
		}
		diff, nonFinite := f32BitDiff(out0, out)
		logf("%-8s %s against %s, %d×%d×%d: %d of %d outputs differ bitwise (%d not finite)", qt, symgs[i], sym0, z, rows, k, diff, rows*z, nonFinite)
		if diff != 0 || nonFinite != 0 {
			bad = append(bad, fmt.Sprintf("%s: %d of %d outputs differ bitwise, %d not finite", symgs[i], diff, rows*z, nonFinite))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("against %s: %s; a geometry keeps every sum of the default kernel", sym0, strings.Join(bad, "; "))
	}
	return nil
}

// mmvqRefCheck runs mmvq variant v of mod and of ref on one rows×k matrix of random valid
// blocks with the activations at xq/xf, for each column count, y poisoned (0xff bytes: NaN)
// before each launch, and logs how many of the rows·n outputs differ bitwise.
func mmvqRefCheck(t *testing.T, dev *gpu.Device, s *gpu.Stream, mod, ref *gpu.Module, target, v string, qt quant.Type,
	rows, k int, ncols []int, xq, xf, y gpu.DevPtr, rng *rand.Rand, logf func(string, ...any)) error {
	var w []byte
	for r := 0; r < rows; r++ {
		row, err := quant.RandomRow(qt, k, rng)
		if err != nil {
			return err
		}
		w = append(w, row...)
	}
	dw, err := dev.Alloc(uintptr(len(w)))
	if err != nil {
		return err
	}
	defer dw.Free()
	if err := dev.Upload(dw.Ptr, w); err != nil {
		return err
	}
	gx, err := mmvqGridX(target, "strata_mmvq_"+v, rows)
	if err != nil {
		return err
	}
	for _, n := range ncols {
		args := abi.MmvqArgs{Xq: uint64(xq), Xf: uint64(xf), Y: uint64(y), W: uint64(dw.Ptr), Rows: int32(rows), K: int32(k),
			Ncols: int32(n), XColStride: int32(k), YColStride: int32(rows)}
		var outs [2][]byte
		for i, m := range []*gpu.Module{mod, ref} {
			fn, err := m.Func("strata_mmvq_" + v)
			if err != nil {
				return err
			}
			if outs[i], err = mmvqPoisonedRun(dev, s, fn, gpu.Dim3{X: uint32(gx), Y: 1, Z: 1}, args.Bytes(), y, 4*rows*n); err != nil {
				return err
			}
		}
		diff, nan := f32BitDiff(outs[0], outs[1])
		logf("%-8s bitwise vs ref %dx%d n=%d: %d of %d outputs differ (%d not finite)", v, rows, k, n, diff, rows*n, nan)
	}
	return nil
}

// f32BitDiff counts the f32 outputs of a and b (equal lengths) whose bits differ, and those
// that are not finite in either.
func f32BitDiff(a, b []byte) (diff, nonFinite int) {
	for j := 0; j+4 <= len(a); j += 4 {
		x, y := binary.LittleEndian.Uint32(a[j:]), binary.LittleEndian.Uint32(b[j:])
		if x != y {
			diff++
		}
		if x&0x7f800000 == 0x7f800000 || y&0x7f800000 == 0x7f800000 {
			nonFinite++
		}
	}
	return diff, nonFinite
}

// mmvqPoisonedRun fills the n bytes at y with 0xff (NaN), launches fn (an mmvq kernel, its
// block) on grid with args, waits, and returns the n bytes at y.
func mmvqPoisonedRun(dev *gpu.Device, s *gpu.Stream, fn *gpu.Func, grid gpu.Dim3, args []byte, y gpu.DevPtr, n int) ([]byte, error) {
	out := make([]byte, n)
	for j := range out {
		out[j] = 0xff
	}
	if err := dev.Upload(y, out); err != nil {
		return nil, err
	}
	if err := fn.Launch(s, grid, gpu.Dim3{X: abi.MmvqThreads, Y: 1, Z: 1}, 0, args); err != nil {
		return nil, err
	}
	if err := s.Sync(); err != nil {
		return nil, err
	}
	if err := dev.Download(out, y); err != nil {
		return nil, err
	}
	return out, nil
}

// eventTimes records n+1 events on s around n launches f(0), …, f(n−1), waits at most wait
// for the last, and returns each launch's seconds.
func eventTimes(t *testing.T, dev *gpu.Device, s *gpu.Stream, n int, wait time.Duration, f func(i int) error) []float64 {
	evs := make([]*gpu.Event, n+1)
	for i := range evs {
		e, err := dev.NewEvent()
		benchMust(t, err)
		evs[i] = e
	}
	defer func() {
		for _, e := range evs {
			_ = e.Destroy()
		}
	}()
	benchMust(t, evs[0].Record(s))
	for i := 0; i < n; i++ {
		benchMust(t, f(i))
		benchMust(t, evs[i+1].Record(s))
	}
	benchMust(t, evs[n].WaitFor(wait))
	out := make([]float64, n)
	for i := range out {
		el, err := gpu.Elapsed(evs[i], evs[i+1])
		benchMust(t, err)
		out[i] = el.Seconds()
	}
	return out
}

// median is the middle value of v (the upper of the two middle ones for even lengths);
// v is not changed.
func median(v []float64) float64 {
	c := append([]float64(nil), v...)
	sort.Float64s(c)
	return c[len(c)/2]
}

// benchLog collects a benchmark's report lines, printing each as it comes.
type benchLog struct{ lines []string }

func (b *benchLog) printf(format string, args ...any) {
	l := fmt.Sprintf(format, args...)
	b.lines = append(b.lines, l)
	fmt.Println(l)
}

// write writes the lines to STRATA_BENCH_OUT/name when STRATA_BENCH_OUT is set.
func (b *benchLog) write(t *testing.T, name string) {
	if out := os.Getenv("STRATA_BENCH_OUT"); out != "" {
		benchMust(t, os.WriteFile(filepath.Join(out, name), []byte(strings.Join(b.lines, "\n")+"\n"), 0o644))
	}
}

func benchMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
