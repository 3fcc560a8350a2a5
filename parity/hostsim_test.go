package parity

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/strata-hip/strata/kernels"
	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/runtime/gpu"
)

// TestPrefillHostSim runs the generated NVIDIA sources of mmq, mmq8, mmq8x4, mmq8x4n, mmq8x4g, mmq8c, mmq8cz and moe_prefill on the CPU
// (testdata/hostsim: the prelude's primitives on std::threads, mma.sync fragments by PTX's
// lane tables) through the ordinary parity Run functions, harness and bounds. It proves the
// kernels' logic where there is no GPU: staging, ragged edges, the folds, the integer hook,
// the four MoE phases. Needs clang++-19 (skips without it). CPU threads make it slow, so
// by default it runs one small shape on a representative subset (the 16-split, min and piece
// types; both ops; both tiles; both NVIDIA staging forms: mmq Q6_K r64t64 and the moe_prefill
// Q8_0 variants are wide, mmq IQ1_M r128t64 and moe_prefill Q6_K r64t64 4-byte, see
// kernels/prefill.go mmqWideStaging; moe_prefill Q6_K r128t32 skips empty token fragments,
// moePartialSkip; moe_prefill Q6_K and IQ1_M r64t32 run the moeNVForm forms and fold once
// per K step, moeStepFold); STRATA_HOSTSIM_ALL=1 runs every variant on two shapes
// each (minutes).
func TestPrefillHostSim(t *testing.T) {
	cxx, target, root := hostSimTools(t)
	all := os.Getenv("STRATA_HOSTSIM_ALL") == "1"
	for _, fc := range []struct {
		family string
		other  bool // compile the non-NVIDIA side of #ifdef STRATA_NVIDIA
		run    func(*Harness, string, Case, []Bound, *rand.Rand) (Outcome, error)
		cases  []Case
		pick   func(v kernels.Variant) bool
	}{
		{"mmq", true, runMmq, []Case{{"rows=70,tokens=17,k=1120", []int{70, 17, 1120}}}, func(v kernels.Variant) bool {
			return v.Values["type"]+"/"+v.Values["op"]+"/"+v.Values["tile"] == "q6k/mma/r64t64"
		}},
		{"mmq", false, runMmq, []Case{
			{"rows=70,tokens=17,k=1120", []int{70, 17, 1120}},
			{"rows=130,tokens=65,k=512", []int{130, 65, 512}},
		}, func(v kernels.Variant) bool {
			switch v.Values["type"] + "/" + v.Values["op"] + "/" + v.Values["tile"] {
			case "q6k/mma/r64t64", "q4k/dp4a/r64t64", "iq1m/mma/r128t64":
				return true
			}
			return false
		}},
		// mmq8 (2 × 4 warps, 256 threads): wide with d_x alone (Q8_0), the 16-split type (Q6_K),
		// the piece type (IQ1_M) and mins with {d_x, d_x·Σq_x} (Q4_K); k = 1056 (33 groups)
		// ends on a partial K step, 300 tokens span three tiles.
		{"mmq8", false, runMmqFamily("mmq8"), []Case{
			{"rows=70,tokens=300,k=1056", []int{70, 300, 1056}},
			{"rows=130,tokens=65,k=512", []int{130, 65, 512}},
		}, func(v kernels.Variant) bool {
			switch v.Values["type"] {
			case "q80", "q6k", "iq1m", "q4k":
				return true
			}
			return false
		}},
		// mmq8x4 (mmq8 with one d per 128-element activation segment, int32 segment sums folded
		// every K step): a 16-split type and a 32-element sub-scale type; k = 1024 is 8
		// segments, 300 tokens span three tiles.
		{"mmq8x4", false, runMmqFamily("mmq8x4"), []Case{
			{"rows=70,tokens=300,k=1056", []int{70, 300, 1056}},
			{"rows=130,tokens=65,k=512", []int{130, 65, 512}},
		}, func(v kernels.Variant) bool { return v.Values["type"] == "q6k" || v.Values["type"] == "iq3xxs" }},
		// mmq8c (mmq8 with compact scale tiles, Q2_0: kernels/prefill.go mmqCompact) and mmq8cz
		// (also without the edge zeroing, Q8_0: mmqNoZero); 33 groups end on a partial K step,
		// 300 tokens and 70 rows leave partial tiles.
		{"mmq8c", false, runMmqFamily("mmq8c"), []Case{
			{"rows=70,tokens=300,k=1056", []int{70, 300, 1056}},
			{"rows=130,tokens=65,k=512", []int{130, 65, 512}},
		}, func(kernels.Variant) bool { return true }},
		{"mmq8cz", false, runMmqFamily("mmq8cz"), []Case{
			{"rows=70,tokens=300,k=1056", []int{70, 300, 1056}},
		}, func(kernels.Variant) bool { return true }},
		// mmq8x4n (mmq8x4 with the weights staged as two int8 planes, 16·h + l, decoded by
		// byte permutes, the next K step prefetched into L1 (a hint the host simulation runs
		// as a no-op), no edge zeroing and the segment's d from the job whose block starts its
		// window: kernels/prefill.go mmqPlanes, mmqPrefetch, mmqNoZero): both types (IQ2_XS,
		// IQ1_M, the piece type), a partial row tile and three token tiles.
		{"mmq8x4n", false, runMmqFamily("mmq8x4n"), []Case{
			{"rows=70,tokens=300,k=1056", []int{70, 300, 1056}},
		}, func(kernels.Variant) bool { return true }},
		// mmq8x4g (mmq8x4n with each group's token fragments loaded once a warp:
		// kernels/prefill.go mmqBOnce): the same partial tiles.
		{"mmq8x4g", false, runMmqFamily("mmq8x4g"), []Case{
			{"rows=70,tokens=300,k=1056", []int{70, 300, 1056}},
		}, func(kernels.Variant) bool { return true }},
		{"moe_prefill", false, runMoePrefill, []Case{
			{"tokens=9,k=2,experts=6,hidden=256,ff=256,all-to-0", []int{9, 2, 6, 256, 256, 1}},
			{"tokens=20,k=3,experts=5,hidden=288,ff=288", []int{20, 3, 5, 288, 288, 0}},
			{"tokens=20,k=3,experts=5,hidden=288,ff=288,tables", []int{20, 3, 5, 288, 288, 0, 1}},
			// Every expert 70 pairs: a full and a partial tile at BN = 32, 48 and 64.
			{"tokens=70,k=3,experts=3,hidden=256,ff=256", []int{70, 3, 3, 256, 256, 0}},
		}, func(v kernels.Variant) bool {
			// Q8_0 stages in the wide form at every tile, Q6_K r64t64 in the 4-byte form; Q6_K
			// r128t32 skips empty token fragments (kernels/prefill.go moePartialSkip); Q6_K and
			// IQ1_M r64t32 run their moe-specific NVIDIA forms (moeNVForm); every NVIDIA kernel
			// has its own shared array (MoeOwnLDS). r64t48 runs its warps' tokens as n8 slices
			// (kernels/prefill.go mmqN8): Q8_0 (one m16n8k32 a slice), Q6_K and IQ1_M (16-split,
			// their NVIDIA forms, per-group fold: moeStepFold has no r64t48), and Q4_K dp4a
			// (BN = 48 in the dp4a core).
			switch v.Values["type"] + "/" + v.Values["op"] + "/" + v.Values["tile"] {
			case "q6k/mma/r64t64", "q6k/mma/r128t32", "q6k/mma/r64t32", "iq1m/mma/r64t32",
				"q6k/mma/r64t48", "iq1m/mma/r64t48", "q4k/dp4a/r64t48",
				"q6k/mma/r64t32x", "q6k/mma/r64t48x": // the Q6_K pair form (moePairForm)
				return true
			}
			return v.Values["type"]+"/"+v.Values["op"] == "q80/mma"
		}},
	} {
		name := fc.family
		if fc.other {
			name += "/other-paths"
		}
		t.Run(name, func(t *testing.T) {
			prelude := hostSimPrelude(t, root)
			flags := []string{"-O0"}
			if fc.other {
				flags = append(flags, "-DHOSTSIM_OTHER_PATHS")
			}
			if fc.family == "moe_prefill" { // the tables cases store device addresses in memory
				flags = append(flags, "-DHOSTSIM_TRANSLATE_MEMORY")
			}
			bin := buildHostSim(t, cxx, root, target, fc.family, prelude, flags...)
			co, ok := abi.Find(target, fc.family)
			if !ok {
				t.Fatalf("no %s code object for %s", fc.family, target)
			}
			spec, _ := kernels.LookupSpec(fc.family)
			tg, _ := kernels.LookupTarget(target)
			fam := families[fc.family]
			skipping := 0 // moe_prefill variants run that skip empty token fragments
			for _, v := range co.Variants {
				vals := variantValues(spec, v.Name)
				if !all && !fc.pick(kernels.Variant{Values: vals}) {
					continue
				}
				if (kernels.Variant{Values: vals}).PartialSkip(tg) {
					skipping++
				}
				for i, c := range fc.cases {
					if i > 0 && !all && !strings.HasSuffix(c.Name, ",tables") { // the first case, and the slot-table ones
						continue
					}
					t.Run(v.Name+"/"+c.Name, func(t *testing.T) {
						simRun(t, bin, fc.family, v.Symbol, fc.run, c, fam.Bounds[v.Name])
					})
				}
			}
			if fc.family == "moe_prefill" && skipping == 0 {
				t.Errorf("no moe_prefill variant run skips empty token fragments on %s: pick one of kernels/prefill.go moePartialSkip", target)
			}
		})
	}
}

// hostSimTools returns the C++ compiler of the host simulation (skipping the test without
// clang++-19), the first NVIDIA target (whose generated sources it runs) and the module root.
func hostSimTools(t *testing.T) (cxx, target, root string) {
	cxx, err := exec.LookPath("clang++-19")
	if err != nil {
		t.Skip("clang++-19 not found")
	}
	for _, tg := range kernels.Targets {
		if tg.IsNVIDIA() {
			target = tg.Name
			break
		}
	}
	return cxx, target, moduleRoot()
}

// buildHostSim compiles target's generated source of family with the given prelude and
// testdata/hostsim/main.cpp (plus flags: the optimisation level, defines) in a temporary
// directory and returns the binary. Where clang++-19 lacks the C++ standard library
// headers, the test is skipped, naming the missing header.
func buildHostSim(t *testing.T, cxx, root, target, family string, prelude []byte, flags ...string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, "kernels", "out", target, family+".cu"))
	if err != nil {
		t.Fatal(err)
	}
	return buildHostSimSource(t, cxx, root, family, src, prelude, flags...)
}

// buildHostSimSource is buildHostSim of the given source text of family (a generated
// source, possibly rewritten for the simulation: mmvqHostSimSource).
func buildHostSimSource(t *testing.T, cxx, root, family string, src, prelude []byte, flags ...string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string][]byte{"strata_prelude.h": prelude, family + ".cu": src}
	for _, f := range []string{filepath.Join(root, "parity", "testdata", "hostsim", "main.cpp")} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(f)] = b
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "sim")
	args := append([]string{"-std=c++20", "-pthread", "-rdynamic", "-w", "-I", dir, "-I", filepath.Join(root, "kernels", "out", "include"),
		fmt.Sprintf("-DHOSTSIM_SOURCE=%q", family+".cu"), "-DHOSTSIM_ARGS=strata_" + family + "_args"}, flags...)
	cmd := exec.Command(cxx, append(args, filepath.Join(dir, "main.cpp"), "-o", bin)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		if strings.Contains(string(out), "file not found") && !strings.Contains(string(out), "strata_") {
			t.Skipf("the C++ standard library headers clang++-19 needs are missing: %s", out)
		}
		t.Fatalf("%v: %s", err, out)
	}
	return bin
}

// hostSimPrelude is the host simulation's prelude (testdata/hostsim/strata_prelude.h).
func hostSimPrelude(t *testing.T, root string) []byte {
	t.Helper()
	prelude, err := os.ReadFile(filepath.Join(root, "parity", "testdata", "hostsim", "strata_prelude.h"))
	if err != nil {
		t.Fatal(err)
	}
	return prelude
}

// simRun runs run on a fresh simHarness of family's kernel symbol, case c and bounds with
// this run's seed, failing t (with the seed) on an error, and returns its outcome.
func simRun(t *testing.T, bin, family, symbol string, run func(*Harness, string, Case, []Bound, *rand.Rand) (Outcome, error), c Case, bounds []Bound) Outcome {
	t.Helper()
	h := simHarness(t, bin, family, symbol)
	defer h.Close()
	seed := runSeed(t)
	o, err := run(h, symbol, c, bounds, rand.New(rand.NewPCG(seed, 7)))
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	return o
}

// simHarness is a harness on a simDriver device running bin, with a module of family
// whose kernels are symbols.
func simHarness(t *testing.T, bin, family string, symbols ...string) *Harness {
	t.Helper()
	ks := map[string]func(*memDriver, []byte){}
	for _, s := range symbols {
		ks[s] = func(*memDriver, []byte) {}
	}
	drv := &simDriver{memDriver: newMemDriver(ks), bin: bin}
	// Device addresses no integer argument or data word can be mistaken for: moe_decode's
	// run translates every aligned word that falls inside an allocation (its slot tables
	// hold device addresses), so the address bytes must not occur in kernel data by
	// chance. With 2⁴⁴ as the base, a word of quantized h (bytes 00 10 00 00 above a
	// small offset: zeros and one 16) matched now and then and was translated to a host
	// address that differs between the two poisoned runs (seed 18130623195051152878 of
	// TestMoeDecodeHostSim failed this way). Here the four high bytes are 93 5e 7c 1d, a
	// tiny normal float (3.3e-21) and a pattern int8 or f16 data has no reason to hold.
	drv.next = 0x1d7c5e93_00000000
	dev := gpu.NewDevice(drv)
	mod, err := dev.LoadModule(gpu.CodeObject{Name: "hostsim/" + family, Target: "mem_1", Image: []byte{1}})
	if err != nil {
		t.Fatal(err)
	}
	return &Harness{Dev: dev, Mod: mod}
}

// simDriver is the memDriver whose launches run the host simulation binary over every
// allocation.
type simDriver struct {
	*memDriver
	bin string
}

func (s *simDriver) Launch(fn uintptr, grid, block gpu.Dim3, _ uint32, _ uintptr, args []byte, _ string) error {
	sym := s.funcs[fn-1]
	var in bytes.Buffer
	w32 := func(v uint32) { _ = binary.Write(&in, binary.LittleEndian, v) }
	w32(uint32(len(sym)))
	in.WriteString(sym)
	w32(grid.X)
	w32(grid.Y)
	w32(grid.Z)
	w32(block.X)
	w32(uint32(len(args)))
	in.Write(args)
	var bases []uintptr
	for b := range s.allocs {
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	w32(uint32(len(bases)))
	for _, b := range bases {
		_ = binary.Write(&in, binary.LittleEndian, uint64(b))
		_ = binary.Write(&in, binary.LittleEndian, uint64(len(s.allocs[b])))
		in.Write(s.allocs[b])
	}
	cmd := exec.Command(s.bin)
	cmd.Stdin = &in
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("hostsim %s: %v: %s", sym, err, stderr.String())
	}
	for _, b := range bases {
		n := copy(s.allocs[b], out)
		out = out[n:]
	}
	return nil
}
