package gpu

import (
	"strings"
	"testing"
)

// TestEngineBranches (emulator): qwen3next's shared expert captured as a branch beside the
// routed experts (Options.SharedBranch) and its attention layers' q, gate and k|v
// projections as three branches from the norm (Options.AttnBranch), programmatic
// (BranchDep, the default) or plain, give the logits of the one chain (both BranchOff) bit
// for bit, in every step. The fake runs a graph's ready op captured last first, so a
// branch runs before the chain it was forked beside: a dependency a branch does not
// declare would show in the bits (forking the shared expert one launch early, before the
// router wrote its gate logit, fails this test). Each captured qwen3next token forks once
// a layer for the shared expert and twice an attention layer; qwen3moe never forks, nor
// does a backend that cannot branch (the fake's noBranches, as HIP).
func TestEngineBranches(t *testing.T) {
	const steps = 5
	for _, preset := range []string{"tiny", "tiny-next"} {
		t.Run(preset, func(t *testing.T) {
			off := runGraph(t, preset, Options{SharedBranch: BranchOff, AttnBranch: BranchOff}, nil, steps, true, false)
			if off.err != nil {
				t.Fatal(off.err)
			}
			if off.fake.forks != 0 || off.fake.joins != 0 {
				t.Fatalf("BranchOff: %d forks, %d joins", off.fake.forks, off.fake.joins)
			}
			layers, attn := 0, 0
			if preset == "tiny-next" {
				layers = off.eng.cfg.Layers
				for _, l := range off.eng.layers {
					if !l.recurrent {
						attn++
					}
				}
			}
			for _, c := range []struct {
				name     string
				o        Options
				setup    func(*fakeDriver)
				sh, at   bool
				sharedFF bool // the shared expert runs before the routed ones in the replays
			}{
				{"dep", Options{}, nil, true, true, true},
				{"plain", Options{SharedBranch: BranchPlain, AttnBranch: BranchPlain}, nil, true, true, true},
				{"shared only", Options{AttnBranch: BranchOff}, nil, true, false, true},
				{"attention only", Options{SharedBranch: BranchOff}, nil, false, true, false},
				{"no backend support", Options{}, func(f *fakeDriver) { f.noBranches = true }, false, false, false},
				{"dep without PDL", Options{NoPDL: true}, nil, true, true, true},
			} {
				var seq []string
				setup := func(f *fakeDriver) {
					if c.setup != nil {
						c.setup(f)
					}
					f.beforeLaunch = func(sym string) {
						if f.inGraph {
							seq = append(seq, sym)
						}
					}
				}
				r := runGraph(t, preset, c.o, setup, steps, true, false)
				if r.err != nil {
					t.Fatal(r.err)
				}
				sameLogits(t, c.name+" against BranchOff", r.logs, off.logs)
				caps := int(r.eng.Stats().Captures)
				want := 0
				if c.sh {
					want += layers
				}
				if c.at {
					want += 2 * attn
				}
				if caps == 0 || r.fake.forks != caps*want || r.fake.joins != caps*want {
					t.Fatalf("%s: %d forks and %d joins in %d captures, want %d each a capture", c.name, r.fake.forks, r.fake.joins, caps, want)
				}
				// The shared expert's residual add (rmsnorm_row/add) ran right before the
				// routed experts of its layer exactly when it was a branch.
				early := 0
				for i := 0; i+1 < len(seq); i++ {
					if strings.HasPrefix(seq[i], "strata_rmsnorm_row_add") && !strings.HasPrefix(seq[i], "strata_rmsnorm_row_addq81") &&
						strings.HasPrefix(seq[i+1], "strata_moe_decode_") {
						early++
					}
				}
				if (c.sharedFF && layers > 0) != (early > 0) {
					t.Fatalf("%s: the shared expert ran before the routed experts %d times in the replays", c.name, early)
				}
				t.Logf("%s: %d captures, %d forks, %d branch-first layers in the replays", c.name, caps, r.fake.forks, early)
			}
		})
	}
}
