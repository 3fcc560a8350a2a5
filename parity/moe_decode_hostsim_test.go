package parity

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-hip/strata/kernels/abi"
)

// TestMoeDecodeHostSim runs the generated NVIDIA source of moe_decode on the CPU (the host
// simulation of TestPrefillHostSim) through runMoeDecode, its harness and bounds: all four
// phases, the multi-row and multi-expert passes, the LDS staging of x and h and the
// global-memory fallback (ff = 2048 with 8 experts overflows the staging buffer in phase 2),
// missing experts. By default two types (Q2_0: two groups per pass; Q6_K: two rows per
// pass) on the two smallest cases; STRATA_HOSTSIM_ALL=1 runs every variant on every case.
func TestMoeDecodeHostSim(t *testing.T) {
	cxx, target, root := hostSimTools(t)
	all := os.Getenv("STRATA_HOSTSIM_ALL") == "1"
	prelude, err := os.ReadFile(filepath.Join(root, "parity", "testdata", "hostsim", "strata_prelude.h"))
	if err != nil {
		t.Fatal(err)
	}
	bin := buildHostSim(t, cxx, root, target, "moe_decode", prelude, "-O1", "-DHOSTSIM_TRANSLATE_MEMORY")
	co, ok := abi.Find(target, "moe_decode")
	if !ok {
		t.Fatalf("no moe_decode code object for %s", target)
	}
	fam := families["moe_decode"]
	for _, v := range co.Variants {
		if !all && v.Name != "q20" && v.Name != "q6k" {
			continue
		}
		for _, c := range fam.Cases {
			if !all && c.Dims[3] > 512 {
				continue
			}
			t.Run(v.Name+"/"+c.Name, func(t *testing.T) {
				h := simHarness(t, bin, "moe_decode", v.Symbol)
				defer h.Close()
				seed := rand.Uint64()
				if _, err := runMoeDecode(h, v.Symbol, c, fam.Bounds[v.Name], rand.New(rand.NewPCG(seed, 7))); err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
			})
		}
	}
}
