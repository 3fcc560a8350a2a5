package gpu

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/strata-hip/strata/kernels/abi"
)

// TestEngineNormFuse: with the residual stream's norms folded into the launches that read them
// (the default: the ffn norm into the router's, mmvq <type>_g4_rms; qwen3moe's mixer norm into
// q|k|v's where that takes geometry 3, <type>_g3_rms — at 12 units for tiny's 512 rows, as
// at 132 for 30B-A3B's 5120) a decode token's logits are bitwise those of the separate
// rmsnorm_row launches (Options.NoNormFuse), in graphs and without, for qwen3moe and
// qwen3next; each captured token has exactly one launch fewer per fold (one a layer, two
// for tiny at 12 units), every fused launch writes the new residual to the buffer its
// inputs are not in, and an engine switched between the two paths token by token (each its
// own graph) stays on the reference's logits.
// The emulator renders each kernel's contract, so this proves the composition (buffers,
// the residual's two homes, graphs); parity's mmvq/…_rms cases prove the kernel's bits.
func TestEngineNormFuse(t *testing.T) {
	const steps = 5
	t.Cleanup(func() { fakeUnits = 0 })
	for _, c := range []struct {
		preset string
		units  int
		folds  int // fused launches a layer
	}{{"tiny", 132, 1}, {"tiny", 12, 2}, {"tiny-next", 132, 1}, {"tiny-next", 12, 1}} {
		fakeUnits = c.units
		preset := c.preset
		t.Run(fmt.Sprintf("%s/units=%d", c.preset, c.units), func(t *testing.T) {
			old := runGraph(t, preset, Options{NoNormFuse: true}, nil, steps, true, false)
			if old.err != nil {
				t.Fatal(old.err)
			}
			layers := len(old.eng.layers)
			for _, o := range []Options{{}, {NoPDL: true}, {NoGraph: true}} {
				r := runGraph(t, preset, o, nil, steps, true, false)
				if r.err != nil {
					t.Fatal(r.err)
				}
				sameLogits(t, "fused norm against NoNormFuse", r.logs, old.logs)
				if o.NoGraph {
					continue
				}
				if len(r.fake.graphs) != len(old.fake.graphs) || len(r.fake.graphs) == 0 {
					t.Fatalf("%+v: %d graphs, NoNormFuse %d", o, len(r.fake.graphs), len(old.fake.graphs))
				}
				// Captured graphs and their instances, by launch count: the fused engine's are the
				// reference's, each one launch a layer shorter.
				counts := func(gr graphRun) (m map[int]int, fusedAll bool) {
					m, fusedAll = map[int]int{}, true
					for _, g := range gr.fake.graphs {
						n, fused := 0, 0
						for _, op := range g.ops {
							if !op.launch {
								continue
							}
							n++
							if !strings.HasSuffix(op.sym, "_rms") {
								continue
							}
							fused++
							a := args[abi.MmvqArgs](op.args)
							// addq81 (norm_r set): x + r to a third buffer; q81 (layer 0's mixer norm): none
							if (a.NormR != 0 && (a.NormXo == a.NormX || a.NormXo == a.NormR)) || (a.NormR == 0 && a.NormXo != 0) || a.NormN == 0 || a.Xq != 0 || a.Xf != 0 {
								t.Fatalf("%s: x %#x r %#x xo %#x n %d xq %#x xf %#x", op.sym, a.NormX, a.NormR, a.NormXo, a.NormN, a.Xq, a.Xf)
							}
						}
						m[n+fused]++
						fusedAll = fusedAll && fused == c.folds*layers
					}
					return m, fusedAll
				}
				got, all := counts(r)
				want, none := counts(old)
				if !all || none || len(got) == 0 || !maps.Equal(got, want) {
					t.Fatalf("%+v: graphs by launches (+ fused ones) %v (every one with %d fused: %v), NoNormFuse %v", o, got, c.folds*layers, all, want)
				}
			}
			sw := runGraph(t, preset, Options{}, nil, 0, false, false)
			if sw.err != nil {
				t.Fatal(sw.err)
			}
			ref := runGraph(t, preset, Options{NoNormFuse: true}, nil, steps, false, false)
			if ref.err != nil {
				t.Fatal(ref.err)
			}
			l := ref.logs[0]
			for i := 1; i < steps; i++ {
				sw.eng.SetNormFuse(i%2 == 0)
				got, err := sw.eng.Forward([]int32{argmaxF(l)})
				if err != nil {
					t.Fatal(err)
				}
				sameLogits(t, "switched engine", [][]float32{got}, [][]float32{ref.logs[i]})
				l = got
			}
			if sw.fake.emu.err != nil {
				t.Fatal(sw.fake.emu.err)
			}
			if s := sw.eng.Stats(); sw.eng.GraphErr() != nil || s.Captures < 2 {
				t.Errorf("switched engine: %d captures, error %v", s.Captures, sw.eng.GraphErr())
			}
		})
	}
}
