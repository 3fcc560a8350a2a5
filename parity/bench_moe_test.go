package parity

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/quant"
	"github.com/strata-hip/strata/runtime/gpu"
)

// TestBenchMoeDecode measures moe_decode, one MoE layer of one decode token, against the
// memory limit (STRATA_BENCH=1; a measurement: it asserts nothing about time). In one run,
// on one stream:
//
//   - the device-to-device copy bandwidth (1 GiB, bytes read + written), the ceiling, and an
//     empty moe_decode launch (phase 2 with k_used = 0) as the per-launch floor;
//   - per weight type, at the Qwen3-30B-A3B expert shape (128 experts, top-8, hidden 2048,
//     expert width 768) and the Qwen3-Next-80B one (512 experts, top-10, width 512), and
//     the 80B shared expert as the engine runs it (Q8_0, width 512, two experts of which
//     the second has no slot): the layer (phases 0, 1, 2 back to back, an event between
//     layers only), each phase alone (an event after every launch), and the two-launch
//     layer (phase 3, then 2).
//
// Weights come from a 1 GiB pool of random bytes (expert e at physical expert e mod
// nphys, nphys = as many as fit); launch i's logits make experts k·(i mod 16) … +k−1 the
// top-k, so a physical expert is read again only after ≥ 16 layers' touched bytes (≥ 140 MB;
// H200 L2 60 MB). 10 warm-up and 60 timed layers, median. Effective GB/s counts the touched
// expert bytes plus x, h (written and read) and y. STRATA_BENCH_MOE_MODS=name=DIR,…: the
// same cases for the moe_decode code object under each DIR (e.g. base = the previous
// kernels, whose phase 3 is not timed; build variants), same run, and a bitwise comparison
// of each module's h and y for the first layer with those of STRATA_CO_DIR's ("new").
// STRATA_BENCH_TYPES (variants, comma-separated) selects types. STRATA_BENCH_OUT=DIR writes
// DIR/bench-moe.txt.
func TestBenchMoeDecode(t *testing.T) {
	if os.Getenv("STRATA_BENCH") != "1" {
		t.Skip("set STRATA_BENCH=1 to measure (GPU machine)")
	}
	dir, have := codeObjects(t)
	dev, target := openDevice(t, have)
	co, ok := abi.Find(target, "moe_decode")
	if !ok {
		t.Fatalf("no moe_decode code object for %s", target)
	}
	var mods []benchModule
	list := []struct{ name, dir string }{{"new", dir}}
	if v := os.Getenv("STRATA_BENCH_MOE_MODS"); v != "" {
		for _, f := range strings.Split(v, ",") {
			name, d, ok := strings.Cut(f, "=")
			if !ok || name == "" || name == "new" || d == "" {
				t.Fatalf("STRATA_BENCH_MOE_MODS: %q is not name=dir (name not \"new\")", f)
			}
			list = append(list, struct{ name, dir string }{name, d})
		}
	}
	for _, m := range list {
		image, err := os.ReadFile(filepath.Join(m.dir, co.Path))
		benchMust(t, err)
		mod, err := dev.LoadModule(gpu.CodeObject{Name: m.name + "/" + co.Path, Target: co.Target, Image: image})
		benchMust(t, err)
		defer mod.Unload()
		mods = append(mods, benchModule{m.name, mod})
	}
	benchMoeDecode(t, dev, target, mods, 1<<30)
}

// benchModule is a code object under test, named in the report.
type benchModule struct {
	name string
	mod  *gpu.Module
}

// benchMoeDecode is TestBenchMoeDecode's measurement on dev with a weight pool of
// poolBytes (1 GiB on the GPU).
func benchMoeDecode(t *testing.T, dev *gpu.Device, target string, mods []benchModule, poolBytes int) {
	s, err := dev.NewStream()
	benchMust(t, err)
	defer s.Destroy()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))

	pool, err := dev.Alloc(uintptr(poolBytes))
	benchMust(t, err)
	defer pool.Free()
	pool2, err := dev.Alloc(uintptr(poolBytes))
	benchMust(t, err)
	defer pool2.Free()
	chunk := make([]byte, 64<<20)
	for i := range chunk {
		chunk[i] = byte(rng.Uint32())
	}
	for off := 0; off < poolBytes; off += len(chunk) {
		benchMust(t, dev.Upload(pool.Ptr.Add(uintptr(off)), chunk))
	}
	timeRuns := func(n int, f func(i int) error) []float64 {
		for c := 0; c < 2; c++ { // keeps the GPU busy while the host queues the launches
			benchMust(t, s.Copy(pool2.Ptr, pool.Ptr, poolBytes))
		}
		return eventTimes(t, dev, s, n, 120*time.Second, f)
	}
	copies := timeRuns(21, func(int) error { return s.Copy(pool2.Ptr, pool.Ptr, poolBytes) })
	if poolBytes != 1<<30 {
		t.Logf("pool of %d bytes: a dry run, not a measurement", poolBytes)
	}
	d2d := 2 * float64(poolBytes) / median(copies[1:]) / 1e9

	var blog benchLog
	logf := blog.printf
	logf("moe_decode benchmarks on %s (%s, %s), %s", dev.Info().Name, target, dev.Info().PCIBusID, time.Now().UTC().Format(time.RFC3339))
	logf("d2d copy 1 GiB: %.1f GB/s (bytes read + written, median of 20)", d2d)

	// Small buffers shared by every case (sized for the largest: 512 experts, k ≤ 10,
	// hidden 2048, width 768).
	const maxE, maxK, hidden, maxFF, sets = 512, 10, 2048, 768, 16
	alloc := func(n int) *gpu.Buffer {
		b, err := dev.Alloc(uintptr(n))
		benchMust(t, err)
		t.Cleanup(func() { _ = b.Free() })
		return b
	}
	dlog := alloc(4 * maxE * sets)
	dslots := alloc(3 * 8 * maxE)
	dids, dwts, derr := alloc(4*maxK), alloc(4*maxK), alloc(4*maxK)
	dh := alloc(maxK * maxFF / 32 * 36)
	dy := alloc(4 * hidden)
	xf := activations(rng, 1, hidden)
	xq := make([]byte, hidden/32*36)
	benchMust(t, quant.QuantizeQ8_1GPU(xf, xq))
	dx := alloc(len(xq))
	benchMust(t, dev.Upload(dx.Ptr, xq))
	block := gpu.Dim3{X: abi.MoeDecodeThreads, Y: 1, Z: 1}
	const warm, reps = 10, 60

	// Floor: an empty launch (phase 2, k_used = 0: each wave writes y = 0), 256 blocks.
	for _, m := range mods {
		fn, err := m.mod.Func("strata_moe_decode_q80")
		benchMust(t, err)
		a := abi.MoeDecodeArgs{Ids: uint64(dids.Ptr), Wts: uint64(dwts.Ptr), Err: uint64(derr.Ptr), H: uint64(dh.Ptr), Y: uint64(dy.Ptr),
			Phase: 2, Tokens: 1, NExpert: 1, KUsed: 0, NEmbd: hidden, NFf: 256}
		ts := timeRuns(warm+reps, func(int) error { return fn.Launch(s, gpu.Dim3{X: hidden / 8, Y: 1, Z: 1}, block, 0, a.Bytes()) })[warm:]
		logf("floor (%s): empty moe_decode launch (phase 2, k_used 0, 256 blocks): %.2f µs median", m.name, median(ts)*1e6)
	}
	logf("%-6s %-7s %-30s %-5s %9s %9s %9s %9s %9s %9s %8s %8s %11s", "module", "type", "shape", "", "layer µs", "p0 µs", "p1 µs", "p2 µs", "p3 µs", "3+2 µs", "GB/s", "of d2d", "bytes/layer")

	types := []string{"q80", "q20", "q4k", "q6k", "iq2xs", "iq3xxs", "iq3s", "iq1m"}
	if v := os.Getenv("STRATA_BENCH_TYPES"); v != "" {
		types = strings.Split(v, ",")
	}
	type shape struct {
		name          string
		ne, k, ff     int
		renorm, share bool
	}
	shapes := []shape{{"30B-A3B 128e top8 ff768", 128, 8, 768, true, false}, {"80B 512e top10 ff512", 512, 10, 512, true, false}}
	var cases []struct {
		v  string
		sh shape
	}
	for _, v := range types {
		for _, sh := range shapes {
			cases = append(cases, struct {
				v  string
				sh shape
			}{v, sh})
		}
	}
	cases = append(cases, struct {
		v  string
		sh shape
	}{"q80", shape{"80B shared ff512 (2e, 1 slot)", 2, 2, 512, false, true}})
	for _, c := range cases {
		qt, ok := moeTypes[c.v]
		if !ok {
			t.Fatalf("STRATA_BENCH_TYPES: no moe_decode variant %q", c.v)
		}
		sh := c.sh
		rbE, err := qt.RowBytes(hidden)
		benchMust(t, err)
		rbF, err := qt.RowBytes(sh.ff)
		benchMust(t, err)
		pad := func(n int) int { return (n + 255) / 256 * 256 }
		gb, db := pad(sh.ff*rbE), pad(hidden*rbF)
		eb := 2*gb + db
		nphys := min(sh.ne, poolBytes/eb)
		slots := make([]byte, 3*8*maxE)
		for e := 0; e < sh.ne; e++ {
			if sh.share && e == 1 {
				continue // the shared expert's second "expert" has no slot
			}
			a := uint64(pool.Ptr) + uint64((e%nphys)*eb)
			binary.LittleEndian.PutUint64(slots[8*e:], a)
			binary.LittleEndian.PutUint64(slots[8*(sh.ne+e):], a+uint64(gb))
			binary.LittleEndian.PutUint64(slots[8*(2*sh.ne+e):], a+uint64(2*gb))
		}
		benchMust(t, dev.Upload(dslots.Ptr, slots))
		logits := make([]float32, sh.ne*sets)
		for st := 0; st < sets; st++ {
			l := logits[st*sh.ne : (st+1)*sh.ne]
			for e := range l {
				l[e] = float32(0.5 * rng.NormFloat64())
			}
			for j := 0; j < sh.k; j++ {
				l[(st*sh.k+j)%sh.ne] = float32(8 - 0.25*float64(j))
			}
		}
		benchMust(t, dev.Upload(dlog.Ptr, f32Bytes(logits)))
		used := sh.k
		if sh.share {
			used = 1
		}
		nbytes := used*eb + len(xq) + 2*sh.k*sh.ff/32*36 + 4*hidden
		base := abi.MoeDecodeArgs{Ids: uint64(dids.Ptr), Wts: uint64(dwts.Ptr), Err: uint64(derr.Ptr),
			SlotsGate: uint64(dslots.Ptr), SlotsUp: uint64(dslots.Ptr) + uint64(8*sh.ne), SlotsDown: uint64(dslots.Ptr) + uint64(16*sh.ne),
			X: uint64(dx.Ptr), H: uint64(dh.Ptr), Y: uint64(dy.Ptr), Tokens: 1, NExpert: int32(sh.ne), KUsed: int32(sh.k), NEmbd: hidden, NFf: int32(sh.ff)}
		if sh.renorm {
			base.Renorm = 1
		}
		grids := []gpu.Dim3{{X: 1, Y: 1, Z: 1}, {X: uint32(sh.ff / 32), Y: uint32(sh.k), Z: 1}, {X: hidden / 8, Y: 1, Z: 1}, {X: uint32(sh.ff / 32), Y: uint32(sh.k), Z: 1}}
		outs := map[string][]byte{}
		for _, m := range mods {
			fn, err := m.mod.Func("strata_moe_decode_" + c.v)
			benchMust(t, err)
			launch := func(layer, phase int) error {
				a := base
				a.Phase = int32(phase)
				a.Logits = uint64(dlog.Ptr) + uint64(4*sh.ne*(layer%sets))
				return fn.Launch(s, grids[phase], block, 0, a.Bytes())
			}
			seq := func(phases ...int) func(int) error {
				return func(i int) error {
					for _, p := range phases {
						if err := launch(i, p); err != nil {
							return err
						}
					}
					return nil
				}
			}
			layer := median(timeRuns(warm+reps, seq(0, 1, 2))[warm:])
			per := timeRuns(3*(warm+reps), func(i int) error { return launch(i/3, i%3) })
			var ph [3][]float64
			for i := 3 * warm; i < len(per); i++ {
				ph[i%3] = append(ph[i%3], per[i])
			}
			// Phase 3 exists in the new kernels only: not timed for a module named base.
			p3, fused := math.NaN(), math.NaN()
			if m.name != "base" {
				fused = median(timeRuns(warm+reps, seq(3, 2))[warm:])
				p3 = median(timeRuns(warm+reps, seq(3))[warm:])
			}
			gbs := float64(nbytes) / layer / 1e9
			logf("%-6s %-7s %-30s %-5s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %8.1f %7.1f%% %11d", m.name, c.v, sh.name, "", layer*1e6,
				median(ph[0])*1e6, median(ph[1])*1e6, median(ph[2])*1e6, p3*1e6, fused*1e6, gbs, 100*gbs/d2d, nbytes)
			// Layer 0 once more, then its h and y for the comparison between modules.
			benchMust(t, seq(0, 1, 2)(0))
			benchMust(t, s.Sync())
			hb, yb := make([]byte, sh.k*sh.ff/32*36), make([]byte, 4*hidden)
			benchMust(t, dev.Download(hb, dh.Ptr))
			benchMust(t, dev.Download(yb, dy.Ptr))
			outs[m.name] = append(hb, yb...)
		}
		for _, m := range mods[1:] {
			logf("  %s %s: h and y of layer 0 bitwise equal between new and %s: %v", c.v, sh.name, m.name, bytes.Equal(outs["new"], outs[m.name]))
		}
	}
	blog.write(t, "bench-moe.txt")
}
