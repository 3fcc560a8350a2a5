package gpu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hip/strata/kernels/abi"
)

// TestEnginePDL: with programmatic dependent launch (the default, Options.NoPDL off) decode
// computes the same bits as without it, launch by launch and through graphs; in every
// captured token each launch directly after another launch is programmatic, and no other
// is (the fake refuses one after a copy, memset, event or graph launch, and one of a
// family outside pdlFamilies); Stats.DepLaunches counts them. Without the engine's
// consent (NoPDL) or the backend's (a driver that cannot: the fake's noDep, as HIP or a
// device before sm_90) no launch is programmatic and the bits are the same again. One
// engine switched every step (Engine.SetPDL) captures a graph per setting.
func TestEnginePDL(t *testing.T) {
	const steps = 6
	for _, preset := range []string{"tiny", "tiny-next"} {
		t.Run(preset, func(t *testing.T) {
			off := runGraph(t, preset, Options{NoPDL: true}, nil, steps, true, false)
			if off.err != nil {
				t.Fatal(off.err)
			}
			if n := len(off.fake.depLaunches); n != 0 || off.eng.Stats().DepLaunches != 0 {
				t.Fatalf("NoPDL: %d kernels launched programmatically", n)
			}
			on := runGraph(t, preset, Options{}, nil, steps, true, false)
			if on.err != nil {
				t.Fatal(on.err)
			}
			sameLogits(t, "PDL against NoPDL", on.logs, off.logs)
			var dep int64
			for _, n := range on.fake.depLaunches {
				dep += int64(n)
			}
			if dep == 0 || on.eng.Stats().DepLaunches != dep {
				t.Fatalf("PDL: %d programmatic launches on the device, Stats.DepLaunches %d", dep, on.eng.Stats().DepLaunches)
			}
			graphs := 0
			for _, g := range on.fake.graphs {
				if len(g.ops) == 0 {
					continue
				}
				graphs++
				kernels, deps := 0, 0
				for i, op := range g.ops {
					want := op.launch && i > 0 && g.ops[i-1].launch && pdlSymbol(op.sym)
					if op.dep != want {
						t.Fatalf("graph op %d (%s, launch %v, after a launch %v): programmatic %v, want %v",
							i, op.sym, op.launch, i > 0 && g.ops[i-1].launch, op.dep, want)
					}
					if op.launch {
						kernels++
					}
					if op.dep {
						deps++
					}
				}
				if deps < kernels*9/10 {
					t.Errorf("a captured token has %d programmatic launches of %d", deps, kernels)
				}
				t.Logf("captured token: %d kernels, %d programmatic, %d ops", kernels, deps, len(g.ops))
			}
			if graphs == 0 {
				t.Fatal("no graph captured")
			}
			nodep := runGraph(t, preset, Options{}, func(f *fakeDriver) { f.noDep = true }, steps, true, false)
			if nodep.err != nil {
				t.Fatal(nodep.err)
			}
			sameLogits(t, "a backend without PDL against NoPDL", nodep.logs, off.logs)
			if n := len(nodep.fake.depLaunches); n != 0 || nodep.eng.Stats().DepLaunches != 0 {
				t.Fatalf("no backend support: %d kernels launched programmatically", n)
			}
			// mmvq asks for its L2 prefetch exactly when launches are programmatic
			// (Engine.mmvqPrefetch): every dense mmvq of the captured tokens with PDL, none without
			// it or without the backend's support.
			for name, r := range map[string]graphRun{"PDL": on, "NoPDL": off, "no backend support": nodep} {
				n := 0
				for _, g := range r.fake.graphs {
					for _, op := range g.ops {
						if !op.launch || !strings.HasPrefix(op.sym, "strata_mmvq_") {
							continue
						}
						a := args[abi.MmvqArgs](op.args)
						if want := int32(1); name != "PDL" || a.Slots != 0 {
							want = 0
							if a.Prefetch != want {
								t.Fatalf("%s: %s with slots %#x: prefetch %d, want 0", name, op.sym, a.Slots, a.Prefetch)
							}
						} else if a.Prefetch != want {
							t.Fatalf("%s: dense %s: prefetch %d, want 1", name, op.sym, a.Prefetch)
						}
						n++
					}
				}
				if n == 0 {
					t.Fatalf("%s: no mmvq launch in the captured tokens", name)
				}
			}
			// One engine, PDL switched before every step: a graph per setting and variant.
			ref := runGraph(t, preset, Options{NoPDL: true}, nil, steps, false, false)
			if ref.err != nil {
				t.Fatal(ref.err)
			}
			switchedRun(t, preset, ref.logs, steps, (*Engine).SetPDL, func(i int, e *Engine, before Stats) {
				if d := e.Stats().DepLaunches - before.DepLaunches; i%2 != 0 && d != 0 {
					t.Errorf("step %d, PDL off: %d programmatic launches", i, d)
				}
			})
		})
	}
}

// TestPDLFamiliesWait: every kernel of every family in pdlFamilies begins with
// STRATA_GRID_DEP in the generated sources of every target (after at most a one-statement
// L2 prefetch of its weights, strata_prefetch_l2_share, which touches no memory another
// kernel writes), and the sm_90 prelude makes it
// griddepcontrol.wait before launch_dependents (so a programmatic launch of any of them
// waits for its predecessor before it touches memory); older NVIDIA targets and AMD make it
// nothing.
func TestPDLFamiliesWait(t *testing.T) {
	out := filepath.Join("..", "..", "kernels", "out")
	targets, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tg := range targets {
		if !tg.IsDir() || tg.Name() == "include" {
			continue
		}
		pre, err := os.ReadFile(filepath.Join(out, tg.Name(), "strata_prelude.h"))
		if err != nil {
			t.Fatal(err)
		}
		var def string
		for _, line := range strings.Split(string(pre), "\n") {
			if strings.HasPrefix(line, "#define STRATA_GRID_DEP()") {
				def = line
			}
		}
		wait := strings.Index(def, "griddepcontrol.wait;")
		launch := strings.Index(def, "griddepcontrol.launch_dependents;")
		if tg.Name() == "sm_90" {
			if wait < 0 || launch < wait {
				t.Errorf("%s: STRATA_GRID_DEP is %q, want griddepcontrol.wait then launch_dependents", tg.Name(), def)
			}
		} else if def == "" || wait >= 0 || launch >= 0 {
			t.Errorf("%s: STRATA_GRID_DEP is %q, want it defined empty", tg.Name(), def)
		}
		for fam := range pdlFamilies {
			files, _ := filepath.Glob(filepath.Join(out, tg.Name(), fam+".*"))
			if len(files) == 0 {
				t.Fatalf("%s: no generated source of %s", tg.Name(), fam)
			}
			for _, f := range files {
				src, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				lines := strings.Split(string(src), "\n")
				kernels := 0
				for i, line := range lines {
					if !strings.HasPrefix(line, "STRATA_KERNEL ") {
						continue
					}
					kernels++
					j := i + 1
					for j < len(lines) && strings.Contains(lines[j], "strata_prefetch_l2_share(") &&
						strings.Count(lines[j], ";") == 1 {
						j++ // an L2 prefetch of weights (no kernel writes them) may come first
					}
					first := ""
					if j < len(lines) {
						first = strings.TrimSpace(lines[j])
					}
					// mmvq: a decode-geometry kernel's wait may move after its first-pass L1
					// prefetch of dense weights (STRATA_MMVQ_LATE), where
					// strata_mmvq_rows_x waits before anything else reads memory.
					if fam == "mmvq" && strings.HasPrefix(first, "if (!STRATA_MMVQ_LATE(p)) STRATA_GRID_DEP();") &&
						strings.Contains(string(src), "    if (pre == 2) STRATA_GRID_DEP();\n") {
						continue
					}
					if !strings.HasPrefix(first, "STRATA_GRID_DEP();") {
						t.Errorf("%s line %d: kernel does not begin with STRATA_GRID_DEP(): %q", f, j+1, strings.TrimSpace(lines[min(j, len(lines)-1)]))
					}
				}
				if kernels == 0 {
					t.Errorf("%s: no kernel", f)
				}
				n += kernels
			}
		}
	}
	t.Logf("%d kernels checked", n)
}
