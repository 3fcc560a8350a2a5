package parity

import (
	"os"
	"strings"
	"testing"

	"github.com/strata-hip/strata/kernels/abi"
)

// TestMoeDecodeHostSim runs the generated NVIDIA source of moe_decode on the CPU (the host
// simulation of TestPrefillHostSim) through runMoeDecode, its harness and bounds: all four
// phases, the multi-row and multi-expert passes, the LDS staging of x and h. CPU threads
// make it slow (45 s for one small case on 2 busy cores), so it runs only when asked:
// STRATA_HOSTSIM_MOE=1 runs one type on one case, STRATA_HOSTSIM_ALL=1 every variant on
// every case (long), adding missing experts and the global-memory fallback (ff = 2048 with
// 8 experts overflows the staging buffer).
func TestMoeDecodeHostSim(t *testing.T) {
	all := os.Getenv("STRATA_HOSTSIM_ALL") == "1"
	if !all && os.Getenv("STRATA_HOSTSIM_MOE") != "1" {
		t.Skip("slow on the CPU: set STRATA_HOSTSIM_MOE=1 (one case) or STRATA_HOSTSIM_ALL=1")
	}
	cxx, target, root := hostSimTools(t)
	prelude := hostSimPrelude(t, root)
	bin := buildHostSim(t, cxx, root, target, "moe_decode", prelude, "-O1", "-DHOSTSIM_TRANSLATE_MEMORY")
	co, ok := abi.Find(target, "moe_decode")
	if !ok {
		t.Fatalf("no moe_decode code object for %s", target)
	}
	fam := families["moe_decode"]
	// STRATA_HOSTSIM_MOE=1: Q2_0 on the 3-token case.
	pick := map[string]string{"q20": "tokens=3,"}
	for _, v := range co.Variants {
		for _, c := range fam.Cases {
			if !all && (pick[v.Name] == "" || !strings.Contains(c.Name, pick[v.Name])) {
				continue
			}
			t.Run(v.Name+"/"+c.Name, func(t *testing.T) {
				simRun(t, bin, "moe_decode", v.Symbol, runMoeDecode, c, fam.Bounds[v.Name])
			})
		}
	}
}
