package gpu

import (
	"strings"
	"testing"
)

// TestEngineSharedBranch (emulator): qwen3next's shared expert captured as a branch beside
// the routed experts (SharedBranchDep, the default, and SharedBranchPlain) gives the
// logits of the one chain (SharedBranchOff) bit for bit, in every step. The fake runs a
// graph's ready op captured last first, so the branch runs before the routed phases 3
// and 2 it was forked beside: a dependency the branch does not declare would show in the
// bits. Each captured qwen3next token forks and joins once a layer; qwen3moe (no shared
// expert) and a backend that cannot branch (the fake's noBranches, as HIP) never fork.
func TestEngineSharedBranch(t *testing.T) {
	const steps = 5
	for _, preset := range []string{"tiny", "tiny-next"} {
		t.Run(preset, func(t *testing.T) {
			off := runGraph(t, preset, Options{SharedBranch: SharedBranchOff}, nil, steps, true, false)
			if off.err != nil {
				t.Fatal(off.err)
			}
			if off.fake.forks != 0 || off.fake.joins != 0 {
				t.Fatalf("SharedBranchOff: %d forks, %d joins", off.fake.forks, off.fake.joins)
			}
			layers := off.eng.cfg.Layers
			next := preset == "tiny-next"
			for _, c := range []struct {
				name  string
				o     Options
				setup func(*fakeDriver)
				fork  bool
			}{
				{"dep", Options{}, nil, next},
				{"plain", Options{SharedBranch: SharedBranchPlain}, nil, next},
				{"no backend support", Options{}, func(f *fakeDriver) { f.noBranches = true }, false},
				{"dep without PDL", Options{NoPDL: true}, nil, next},
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
				sameLogits(t, c.name+" against SharedBranchOff", r.logs, off.logs)
				caps := int(r.eng.Stats().Captures)
				if want := 0; !c.fork {
					if r.fake.forks != want || r.fake.joins != want {
						t.Fatalf("%s: %d forks, %d joins, want none", c.name, r.fake.forks, r.fake.joins)
					}
				} else if r.fake.forks != caps*layers || r.fake.joins != caps*layers || caps == 0 {
					t.Fatalf("%s: %d forks and %d joins in %d captures of %d layers, want one each a layer", c.name, r.fake.forks, r.fake.joins, caps, layers)
				}
				// The shared expert's residual add (rmsnorm_row/add) ran before the routed
				// experts of its layer exactly when the token was a branch.
				early := 0
				for i := 0; i+1 < len(seq); i++ {
					if strings.HasPrefix(seq[i], "strata_rmsnorm_row_add") && !strings.HasPrefix(seq[i], "strata_rmsnorm_row_addq81") &&
						strings.HasPrefix(seq[i+1], "strata_moe_decode_") {
						early++
					}
				}
				if c.fork != (early > 0) {
					t.Fatalf("%s: the shared expert ran before the routed experts %d times in the replays (branch %v)", c.name, early, c.fork)
				}
				t.Logf("%s: %d captures, %d forks, %d branch-first layers in the replays", c.name, caps, r.fake.forks, early)
			}
		})
	}
}
